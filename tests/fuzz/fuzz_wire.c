/* libFuzzer harness for the coved <-> cove-init codec (src/common/wire.c).
 *
 * cove-init runs wire_check_hdr and then wire_decode_spawn on every packet
 * it receives; a hostile coved is out of scope, but a torn or corrupted
 * packet must be rejected without reading outside it. The input is tried
 * twice: as a whole packet (header checked, payload decoded when the type is
 * WIRE_SPAWN) and as a bare payload, so the fuzzer reaches the decoder
 * without first having to forge a consistent header.
 *
 * Beyond "no crash": a decoded request respects the limits (argc in
 * 1..WIRE_MAX_ARGS, envc <= WIRE_MAX_ARGS, NULL-terminated vectors, strings
 * inside the payload, env entries with '='), and encoding it again gives
 * back exactly the same payload bytes (the layout is canonical).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu17 -D_GNU_SOURCE \
 *         -Isrc -Iinclude tests/fuzz/fuzz_wire.c src/common/wire.c -o fuzz_wire
 *   ./fuzz_wire -max_total_time=60 corpus/
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct wire_spawn sp; /* ~64 KiB: not on the fuzzer's stack */
static char pkt[WIRE_MAX_PACKET];

static int inside(const char *s, const char *p, size_t len)
{
	return s >= p && s < p + len && memchr(s, '\0', len - (size_t)(s - p)) != NULL;
}

static void check_decoded(const char *payload, size_t len)
{
	if (wire_decode_spawn(payload, len, &sp) != 0)
		return;
	if (sp.argc == 0 || sp.argc > WIRE_MAX_ARGS || sp.envc > WIRE_MAX_ARGS)
		abort();
	if (sp.argv[sp.argc] != NULL || sp.envp[sp.envc] != NULL)
		abort();
	if (!inside(sp.user, payload, len) || !inside(sp.cwd, payload, len))
		abort();
	for (uint32_t i = 0; i < sp.argc; i++)
		if (!sp.argv[i] || !inside(sp.argv[i], payload, len))
			abort();
	for (uint32_t i = 0; i < sp.envc; i++)
		if (!sp.envp[i] || !inside(sp.envp[i], payload, len) || !strchr(sp.envp[i], '='))
			abort();

	/* Re-encode: the same bytes, or -E2BIG when a header no longer fits. */
	struct wire_hdr h = { .seq = 1 };
	long n = wire_encode_spawn(pkt, sizeof(pkt), &h, sp.user, sp.cwd, sp.argv, sp.envp);
	if (n == -E2BIG && len + sizeof(h) > WIRE_MAX_PACKET)
		return;
	if (n < 0 || (size_t)n != sizeof(h) + len || h.payload_len != len || memcmp(pkt + sizeof(h), payload, len))
		abort();
	struct wire_hdr got;
	if (wire_check_hdr(pkt, (size_t)n, &got) != 0 || got.type != WIRE_SPAWN || got.payload_len != len)
		abort();
}

/* The payload of WIRE_OPEN and WIRE_FSOP, which cove-init decodes from
 * coved: strings inside the payload, an absolute path, nothing after the
 * user, and the same bytes when encoded again. */
static void check_path_decoded(const char *payload, size_t len)
{
	struct wire_path wp;
	if (wire_decode_path(payload, len, &wp) != 0)
		return;
	if (!inside(wp.path, payload, len) || !inside(wp.path2, payload, len) || !inside(wp.user, payload, len) ||
	    wp.path[0] != '/')
		abort();
	struct wire_hdr h = { .type = WIRE_OPEN, .seq = 1 };
	long n = wire_encode_path(pkt, sizeof(pkt), &h, &wp);
	if (n == -E2BIG && len + sizeof(h) > WIRE_MAX_PACKET)
		return;
	if (n < 0 || (size_t)n != sizeof(h) + len || memcmp(pkt + sizeof(h), payload, len))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	struct wire_hdr h;

	if (size > WIRE_MAX_PACKET)
		return 0;
	if (wire_check_hdr(p, size, &h) == 0) {
		if (h.type < WIRE_SPAWN || h.type > WIRE_TYPE_LAST || h.payload_len != size - sizeof(h))
			abort();
		if (h.type == WIRE_SPAWN)
			check_decoded(p + sizeof(h), h.payload_len);
		if (h.type == WIRE_OPEN || h.type == WIRE_FSOP)
			check_path_decoded(p + sizeof(h), h.payload_len);
	}
	check_decoded(p, size);
	check_path_decoded(p, size);
	return 0;
}

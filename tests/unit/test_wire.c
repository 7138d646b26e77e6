/* Unit tests for src/common/wire.c: the coved <-> cove-init packet codec.
 * A valid packet round-trips; every way a hostile or torn packet can be
 * malformed (short, unterminated strings, bad counts, env without '=',
 * trailing bytes, header/length mismatch) is rejected. */
#include "common/wire.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"

static char pkt[WIRE_MAX_PACKET];
static struct wire_spawn sp; /* ~64 KiB: not on the stack */

/* Builds a raw payload: argc, envc, then the given bytes verbatim. */
static size_t raw_payload(char *buf, uint32_t argc, uint32_t envc, const char *bytes, size_t n)
{
	memcpy(buf, &argc, 4);
	memcpy(buf + 4, &envc, 4);
	memcpy(buf + 8, bytes, n);
	return 8 + n;
}

static void test_round_trip(void)
{
	const char *argv[] = { "/bin/sh", "-c", "echo hi", "", NULL };
	const char *envp[] = { "PATH=/usr/bin:/bin", "EMPTY=", "A==b", NULL };
	struct wire_hdr h = { .seq = 7, .pid = 0, .value = 0, .flags = WIRE_FLAG_STDIN, .payload_len = 12345 };
	long n = wire_encode_spawn(pkt, sizeof(pkt), &h, "nobody", "/tmp", argv, envp);
	CHECK(n > (long)sizeof(struct wire_hdr), "encode returns a packet length (%ld)", n);
	CHECK(h.type == WIRE_SPAWN, "encode sets the type to WIRE_SPAWN");
	CHECK(h.payload_len == (uint32_t)(n - (long)sizeof(h)), "encode fills in payload_len");

	struct wire_hdr got;
	CHECK(wire_check_hdr(pkt, (size_t)n, &got) == 0, "header of an encoded packet checks");
	CHECK(got.type == WIRE_SPAWN && got.seq == 7 && got.flags == WIRE_FLAG_STDIN &&
		      got.payload_len == h.payload_len,
	      "header fields survive");

	int r = wire_decode_spawn(pkt + sizeof(got), got.payload_len, &sp);
	CHECK(r == 0, "decode of an encoded payload succeeds (%d)", r);
	CHECK_STR(sp.user, "nobody", "user round-trips");
	CHECK_STR(sp.cwd, "/tmp", "cwd round-trips");
	CHECK(sp.argc == 4 && sp.envc == 3, "argc %u envc %u", sp.argc, sp.envc);
	int same = sp.argc == 4;
	for (int i = 0; same && i < 4; i++)
		same = strcmp(sp.argv[i], argv[i]) == 0;
	CHECK(same && sp.argv[4] == NULL, "argv round-trips, NULL-terminated, empty string kept");
	same = sp.envc == 3;
	for (int i = 0; same && i < 3; i++)
		same = strcmp(sp.envp[i], envp[i]) == 0;
	CHECK(same && sp.envp[3] == NULL, "envp round-trips, NULL-terminated");
}

static void test_defaults(void)
{
	const char *argv[] = { "true", NULL };
	struct wire_hdr h = { 0 };
	long n = wire_encode_spawn(pkt, sizeof(pkt), &h, NULL, NULL, argv, NULL);
	CHECK(n > 0, "NULL user, cwd and envp encode");
	CHECK(wire_decode_spawn(pkt + sizeof(h), h.payload_len, &sp) == 0, "and decode");
	CHECK_STR(sp.user, "", "NULL user becomes \"\" (root)");
	CHECK_STR(sp.cwd, "", "NULL cwd becomes \"\" (home)");
	CHECK(sp.argc == 1 && sp.envc == 0 && sp.envp[0] == NULL, "no environment");
}

/* Every proper prefix of a valid payload is rejected, and so is every
 * prefix of a valid packet by the header check. */
static void test_truncations(void)
{
	const char *argv[] = { "ls", "-l", "/", NULL };
	const char *envp[] = { "HOME=/root", "X=1", NULL };
	struct wire_hdr h = { .seq = 1 };
	long n = wire_encode_spawn(pkt, sizeof(pkt), &h, "0", "/", argv, envp);
	size_t plen = h.payload_len;
	int bad_payload = 0, bad_pkt = 0;
	struct wire_hdr got;

	for (size_t k = 0; k < plen; k++) {
		/* A copy of exactly k bytes, so ASan catches any read past it. */
		char *p = malloc(k ? k : 1);
		memcpy(p, pkt + sizeof(h), k);
		if (wire_decode_spawn(p, k, &sp) != -EINVAL)
			bad_payload++;
		free(p);
	}
	for (size_t k = 0; k < (size_t)n; k++)
		if (wire_check_hdr(pkt, k, &got) != -EINVAL)
			bad_pkt++;
	CHECK(bad_payload == 0, "all %zu truncations of the payload rejected (%d accepted)", plen, bad_payload);
	CHECK(bad_pkt == 0, "all %ld truncations of the packet fail the header check (%d accepted)", n, bad_pkt);
	CHECK(wire_decode_spawn(pkt + sizeof(h), plen, &sp) == 0, "the untruncated payload decodes");
}

static void test_malformed(void)
{
	char p[256] = { 0 };
	size_t n;

	CHECK(wire_decode_spawn(p, 0, &sp) == -EINVAL, "empty payload rejected");
	n = raw_payload(p, 1, 0, "root\0/\0ls", 9);
	CHECK(wire_decode_spawn(p, n, &sp) == -EINVAL, "last string without NUL rejected");
	n = raw_payload(p, 1, 0, "root", 4);
	CHECK(wire_decode_spawn(p, n, &sp) == -EINVAL, "user without NUL rejected");
	n = raw_payload(p, 1, 0, "root\0/\0ls\0", 10);
	CHECK(wire_decode_spawn(p, n, &sp) == 0, "the same payload, terminated, decodes");
	n = raw_payload(p, 0, 0, "root\0/\0", 7);
	CHECK(wire_decode_spawn(p, n, &sp) == -EINVAL, "argc 0 rejected");
	n = raw_payload(p, WIRE_MAX_ARGS + 1, 0, "root\0/\0ls\0", 10);
	CHECK(wire_decode_spawn(p, n, &sp) == -EINVAL, "argc WIRE_MAX_ARGS + 1 rejected");
	n = raw_payload(p, UINT32_MAX, 0, "root\0/\0ls\0", 10);
	CHECK(wire_decode_spawn(p, n, &sp) == -EINVAL, "argc UINT32_MAX rejected");
	n = raw_payload(p, 1, WIRE_MAX_ARGS + 1, "root\0/\0ls\0A=1\0", 14);
	CHECK(wire_decode_spawn(p, n, &sp) == -EINVAL, "envc WIRE_MAX_ARGS + 1 rejected");
	n = raw_payload(p, 2, 0, "root\0/\0ls\0", 10);
	CHECK(wire_decode_spawn(p, n, &sp) == -EINVAL, "argc larger than the strings present rejected");
	n = raw_payload(p, 1, 1, "root\0/\0ls\0NOEQUALS\0", 19);
	CHECK(wire_decode_spawn(p, n, &sp) == -EINVAL, "env entry without '=' rejected");
	n = raw_payload(p, 1, 1, "root\0/\0ls\0A=1\0", 14);
	CHECK(wire_decode_spawn(p, n, &sp) == 0 && sp.envc == 1, "env entry with '=' accepted");
	n = raw_payload(p, 1, 1, "root\0/\0ls\0A=1\0x", 15);
	CHECK(wire_decode_spawn(p, n, &sp) == -EINVAL, "one trailing garbage byte rejected");
	n = raw_payload(p, 1, 1, "root\0/\0ls\0A=1\0\0", 15);
	CHECK(wire_decode_spawn(p, n, &sp) == -EINVAL, "a trailing extra empty string rejected");
}

static void test_encode_limits(void)
{
	const char *none[] = { NULL };
	const char *argv[] = { "x", NULL };
	const char *noeq[] = { "NOEQUALS", NULL };
	struct wire_hdr h = { 0 };

	CHECK(wire_encode_spawn(pkt, sizeof(pkt), &h, "", "", none, NULL) == -EINVAL, "encode: argc 0 rejected");
	CHECK(wire_encode_spawn(pkt, sizeof(pkt), &h, "", "", NULL, NULL) == -EINVAL, "encode: NULL argv rejected");
	CHECK(wire_encode_spawn(pkt, sizeof(pkt), &h, "", "", argv, noeq) == -EINVAL,
	      "encode: env entry without '=' rejected (the decoder would refuse it)");

	static const char *many[WIRE_MAX_ARGS + 2];
	for (int i = 0; i < WIRE_MAX_ARGS + 1; i++)
		many[i] = "a";
	many[WIRE_MAX_ARGS + 1] = NULL;
	CHECK(wire_encode_spawn(pkt, sizeof(pkt), &h, "", "", many, NULL) == -EINVAL,
	      "encode: WIRE_MAX_ARGS + 1 args rejected");
	many[WIRE_MAX_ARGS] = NULL;
	long n = wire_encode_spawn(pkt, sizeof(pkt), &h, "", "", many, NULL);
	CHECK(n > 0, "encode: exactly WIRE_MAX_ARGS args accepted");
	CHECK(n > 0 && wire_decode_spawn(pkt + sizeof(h), h.payload_len, &sp) == 0 && sp.argc == WIRE_MAX_ARGS &&
		      sp.argv[WIRE_MAX_ARGS] == NULL,
	      "decode: exactly WIRE_MAX_ARGS args accepted");
	for (int i = 0; i < WIRE_MAX_ARGS; i++)
		many[i] = "A=1";
	CHECK(wire_encode_spawn(pkt, sizeof(pkt), &h, "", "", argv, many) > 0, "encode: WIRE_MAX_ARGS env entries");
	many[WIRE_MAX_ARGS] = "A=1";
	CHECK(wire_encode_spawn(pkt, sizeof(pkt), &h, "", "", argv, many) == -EINVAL,
	      "encode: WIRE_MAX_ARGS + 1 env entries rejected");

	/* Capacity: every cap below the packet size fails with -E2BIG and
	 * writes nothing past cap. */
	n = wire_encode_spawn(pkt, sizeof(pkt), &h, "user", "/cwd", argv, NULL);
	int bad = 0;
	for (long cap = 0; cap < n; cap++) {
		char *b = malloc(cap ? (size_t)cap : 1);
		if (wire_encode_spawn(b, (size_t)cap, &h, "user", "/cwd", argv, NULL) != -E2BIG)
			bad++;
		free(b);
	}
	CHECK(bad == 0, "encode: every capacity below %ld gives -E2BIG (%d did not)", n, bad);
	CHECK(wire_encode_spawn(pkt, (size_t)n, &h, "user", "/cwd", argv, NULL) == n, "encode: exact capacity fits");

	/* A single argument larger than WIRE_MAX_PACKET cannot fit. */
	char *big = malloc(WIRE_MAX_PACKET + 1);
	memset(big, 'x', WIRE_MAX_PACKET);
	big[WIRE_MAX_PACKET] = '\0';
	const char *bigv[] = { big, NULL };
	static char huge[2 * WIRE_MAX_PACKET];
	CHECK(wire_encode_spawn(huge, sizeof(huge), &h, "", "", bigv, NULL) == -E2BIG,
	      "encode: packet over WIRE_MAX_PACKET rejected even with a larger buffer");
	free(big);
}

static void test_check_hdr(void)
{
	struct wire_hdr h = { .type = WIRE_PING, .seq = 3 }, got;
	char buf[sizeof(h) + 4];

	memcpy(buf, &h, sizeof(h));
	CHECK(wire_check_hdr(buf, sizeof(h), &got) == 0 && got.type == WIRE_PING && got.seq == 3,
	      "bare header with payload_len 0 accepted");
	CHECK(wire_check_hdr(buf, sizeof(h) + 4, &got) == -EINVAL, "payload_len 0 but 4 more bytes rejected");
	h.payload_len = 4;
	memcpy(buf, &h, sizeof(h));
	CHECK(wire_check_hdr(buf, sizeof(h) + 4, &got) == 0, "payload_len matching the packet accepted");
	CHECK(wire_check_hdr(buf, sizeof(h) + 3, &got) == -EINVAL, "payload_len larger than the packet rejected");
	h.payload_len = UINT32_MAX;
	memcpy(buf, &h, sizeof(h));
	CHECK(wire_check_hdr(buf, sizeof(h) + 4, &got) == -EINVAL, "payload_len UINT32_MAX rejected");
	CHECK(wire_check_hdr(buf, sizeof(h) - 1, &got) == -EINVAL, "packet shorter than a header rejected");
	CHECK(wire_check_hdr(buf, 0, &got) == -EINVAL, "empty packet rejected");

	h.payload_len = 0;
	int bad = 0;
	uint32_t types[] = { 0, WIRE_TYPE_LAST + 1, 100, UINT32_MAX, 0x80000000u };
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		h.type = types[i];
		memcpy(buf, &h, sizeof(h));
		if (wire_check_hdr(buf, sizeof(h), &got) != -EINVAL)
			bad++;
	}
	CHECK(bad == 0, "unknown types (0, LAST+1, 100, 2^31, 2^32-1) rejected");
	bad = 0;
	for (uint32_t t = WIRE_SPAWN; t <= WIRE_TYPE_LAST; t++) {
		h.type = t;
		memcpy(buf, &h, sizeof(h));
		if (wire_check_hdr(buf, sizeof(h), &got) != 0)
			bad++;
	}
	CHECK(bad == 0, "every known type accepted");

	/* The header is read with memcpy: an unaligned packet is fine. */
	char ubuf[sizeof(h) + 1];
	h.type = WIRE_EXITED;
	h.pid = -5;
	memcpy(ubuf + 1, &h, sizeof(h));
	CHECK(wire_check_hdr(ubuf + 1, sizeof(h), &got) == 0 && got.pid == -5, "unaligned header accepted");
}

static void test_stage_names(void)
{
	CHECK_STR(wire_stage_name(WIRE_STAGE_EXEC), "exec", "stage exec named");
	CHECK_STR(wire_stage_name(WIRE_STAGE_USER), "user", "stage user named");
	CHECK_STR(wire_stage_name(0), "spawn", "unknown stage falls back to \"spawn\"");
	CHECK_STR(wire_stage_name(-1), "spawn", "negative stage falls back to \"spawn\"");
}

static void test_path_requests(void)
{
	struct wire_path p = { .mode = 0640, .path = "/a/b", .path2 = "/c", .user = "nobody" }, got;
	struct wire_hdr h = { .type = WIRE_FSOP, .seq = 9 }, hg;
	long n = wire_encode_path(pkt, sizeof(pkt), &h, &p);
	CHECK(n > (long)sizeof(h) && wire_check_hdr(pkt, (size_t)n, &hg) == 0 && hg.type == WIRE_FSOP,
	      "a path request encodes to a valid packet (%ld)", n);
	int r = wire_decode_path(pkt + sizeof(h), h.payload_len, &got);
	CHECK(r == 0 && got.mode == 0640 && strcmp(got.path, "/a/b") == 0 && strcmp(got.path2, "/c") == 0 &&
		      strcmp(got.user, "nobody") == 0,
	      "a path request round-trips");
	p.path = "relative";
	CHECK(wire_encode_path(pkt, sizeof(pkt), &h, &p) == -EINVAL, "a relative path is refused by the encoder");
	char raw[] = "\0\0\0\0rel\0\0\0";
	CHECK(wire_decode_path(raw, sizeof(raw) - 1, &got) == -EINVAL, "a relative path is refused by the decoder");
	char unterminated[] = "\0\0\0\0/a\0\0x";
	CHECK(wire_decode_path(unterminated, sizeof(unterminated) - 1, &got) == -EINVAL,
	      "an unterminated string is refused");
	char trailing[] = "\0\0\0\0/a\0\0\0x";
	CHECK(wire_decode_path(trailing, sizeof(trailing) - 1, &got) == -EINVAL, "trailing bytes are refused");
	CHECK(wire_decode_path(raw, 3, &got) == -EINVAL, "a payload shorter than the mode is refused");
}

static void test_entry_paths(void)
{
	static const char *const ok[] = { "a", "a/b", "a.b/.c", "..a/b..", "x/...", NULL };
	static const char *const bad[] = { "", "/a", "a/", "a//b", ".", "..", "a/./b", "a/../b", "a/..", "./a", NULL };
	int wrong = 0;
	for (int i = 0; ok[i]; i++)
		wrong += !wire_entry_path_valid(ok[i], strlen(ok[i]));
	for (int i = 0; bad[i]; i++)
		wrong += wire_entry_path_valid(bad[i], strlen(bad[i]));
	CHECK(wrong == 0, "entry paths: relative real names only (%d wrong)", wrong);
	CHECK(!wire_entry_path_valid("a\0b", 3), "an entry path with a NUL is refused");

	char out[16];
	static const struct {
		const char *in, *out;
		int r;
	} cases[] = {
		{ "a/b", "a/b", 0 },
		{ "/etc/passwd", "etc/passwd", 0 },
		{ "./x/./y/", "x/y", 0 },
		{ "//a//b//", "a/b", 0 },
		{ "./", "", 1 },
		{ "/", "", 1 },
		{ "", "", 1 },
		{ "a/../b", NULL, -EINVAL },
		{ "../x", NULL, -EINVAL },
		{ "/x/..", NULL, -EINVAL },
		{ "..x/y..", "..x/y..", 0 },
	};
	wrong = 0;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r = wire_entry_path_normalize(cases[i].in, out, sizeof(out));
		if (r != cases[i].r || (r >= 0 && strcmp(out, cases[i].out) != 0)) {
			printf("# '%s': %d '%s'\n", cases[i].in, r, out);
			wrong++;
		}
	}
	CHECK(wrong == 0, "tar member names normalize to entry paths");
	CHECK(wire_entry_path_normalize("abcdefgh/abcdefgh", out, sizeof(out)) == -ENAMETOOLONG,
	      "a name that does not fit is refused");
	CHECK(wire_entry_path_normalize("abcdefgh/abcdef", out, sizeof(out)) == 0, "a name that just fits is kept");

	struct wire_entry e = { .type = WIRE_ENTRY_FILE, .mode = 0644, .path_len = 1 };
	CHECK(wire_entry_check(&e) == 0, "a file entry header is accepted");
	e.type = WIRE_ENTRY_TYPE_LAST + 1;
	CHECK(wire_entry_check(&e) == -EINVAL, "an unknown entry type is refused");
	e.type = WIRE_ENTRY_FILE;
	e.path_len = 0;
	CHECK(wire_entry_check(&e) == -EINVAL, "an entry without a path is refused");
	e.path_len = WIRE_ENTRY_MAX_PATH + 1;
	CHECK(wire_entry_check(&e) == -EINVAL, "an entry path too long is refused");
	e = (struct wire_entry){ .type = WIRE_ENTRY_END };
	CHECK(wire_entry_check(&e) == 0, "an end record is accepted");
	e.mode = 010000;
	CHECK(wire_entry_check(&e) == -EINVAL, "mode bits beyond 07777 are refused");
}

int main(void)
{
	test_round_trip();
	test_defaults();
	test_truncations();
	test_malformed();
	test_encode_limits();
	test_check_hdr();
	test_stage_names();
	test_path_requests();
	test_entry_paths();
	return tap_done();
}

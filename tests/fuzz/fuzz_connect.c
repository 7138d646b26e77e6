/* libFuzzer harness for E2B's request parsers (src/daemon/e2b/connect.c,
 * multipart.c): what a client sends on coved's TCP listener, arbitrary
 * bytes.
 *
 * Beyond "no crash", it checks the contracts: a request envelope parses
 * only when it is exactly one uncompressed message whose length matches
 * and whose payload is a JSON object, and then gives that object; every
 * refusal is COVE_EINVAL with a message and no object. Walking a client
 * stream's envelopes only moves forward, stays inside the body, and stops
 * at the first refusal without moving. A multipart parse
 * gives at most max parts, each lying inside the body.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu17 -D_GNU_SOURCE -Isrc -Iinclude \
 *         tests/fuzz/fuzz_connect.c src/daemon/e2b/connect.c src/daemon/e2b/multipart.c \
 *         src/common/error.c -ljansson -o fuzz_connect
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/e2b/connect.h"
#include "daemon/e2b/multipart.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void envelope(const uint8_t *data, size_t size)
{
	json_t *j = NULL;
	struct cove_err err = { 0 };
	int r = connect_parse_request(data, size, &j, &err);
	if (r == 0) {
		uint32_t n =
			size >= 5 ? (uint32_t)data[1] << 24 | (uint32_t)data[2] << 16 | (uint32_t)data[3] << 8 | data[4]
				  : 0;
		if (size < 5 || data[0] != 0 || n != size - 5 || !json_is_object(j))
			abort();
		json_t *again = json_loadb((const char *)data + 5, n, 0, NULL);
		if (!json_equal(again, j))
			abort();
		json_decref(again);
		json_decref(j);
	} else if (r != -1 || j || err.code != COVE_EINVAL || !err.msg[0]) {
		abort();
	}
}

static void client_stream(const uint8_t *data, size_t size)
{
	size_t off = 0;
	for (;;) {
		size_t at = off;
		uint8_t flags = 0xff;
		json_t *j = NULL;
		struct cove_err err = { 0 };
		if (off == size)
			return;
		if (connect_next(data, size, &off, &flags, &j, &err) < 0) {
			if (off != at || j || err.code != COVE_EINVAL || !err.msg[0])
				abort();
			return;
		}
		if (off <= at + 4 || off > size || (flags & ~CONNECT_FLAG_END) || !json_is_object(j))
			abort();
		json_decref(j);
	}
}

static void multipart(const uint8_t *data, size_t size)
{
	static struct part parts[8];
	int n = -1;
	struct cove_err err = { 0 };
	int r = multipart_parse(data, size, "b", parts, 8, &n, &err);
	if (n < 0 || n > 8 || (r != 0 && (r != -1 || err.code != COVE_EINVAL)))
		abort();
	for (int i = 0; i < n && r == 0; i++)
		if (parts[i].data < data || parts[i].data + parts[i].len > data + size)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	envelope(data, size);
	client_stream(data, size);
	multipart(data, size);
	return 0;
}

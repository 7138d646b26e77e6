/* libFuzzer harness for the HTTP response parser (src/client/http.c).
 *
 * The same input is fed in several split patterns (whole, one byte at a
 * time, pseudo-random pieces). Beyond "no crash", it checks the parser's
 * contract: consumed <= len, stops early only when the response is done,
 * -1 exactly in HTTP_PARSE_ERROR, no empty on_body slices, a Content-Length
 * body of exactly that length, and above all that the outcome (final state,
 * status, body bytes, bytes consumed) is the same whatever the split.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu17 -D_GNU_SOURCE \
 *         -Isrc -Iinclude tests/fuzz/fuzz_http.c src/client/http.c src/common/error.c -o fuzz_http
 *   ./fuzz_http -max_total_time=60 corpus/
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct outcome {
	enum http_parse_state state;
	int status;
	int keep_alive;
	uint64_t used;
	uint64_t body_len;
	uint64_t body_hash; /* FNV-1a over the body bytes, in order */
};

static int hash_body(void *arg, const char *buf, size_t len)
{
	struct outcome *o = arg;

	if (len == 0)
		abort();
	for (size_t i = 0; i < len; i++)
		o->body_hash = (o->body_hash ^ (uint8_t)buf[i]) * 0x100000001b3ULL;
	o->body_len += len;
	return 0;
}

/* Piece lengths: 0 whole, 1 single bytes, 2 and 3 pseudo-random small and
 * large pieces (xorshift seeded from the input size: reproducible). */
static size_t piece(unsigned pattern, uint32_t *rng, size_t left)
{
	size_t n;

	*rng ^= *rng << 13;
	*rng ^= *rng >> 17;
	*rng ^= *rng << 5;
	switch (pattern) {
	case 0:
		n = left;
		break;
	case 1:
		n = 1;
		break;
	case 2:
		n = *rng % 7 + 1;
		break;
	default:
		n = *rng % 5000 + 1;
		break;
	}
	return n < left ? n : left;
}

static void run(const uint8_t *data, size_t size, unsigned pattern, struct outcome *o)
{
	static struct http_parser p; /* 16 KiB: not on the fuzzer's stack */
	uint32_t rng = (uint32_t)size * 2654435761u + pattern + 1;
	size_t off = 0;

	memset(o, 0, sizeof(*o));
	o->body_hash = 0xcbf29ce484222325ULL;
	http_parser_init(&p, hash_body, o);
	while (off < size && p.state != HTTP_PARSE_ERROR) {
		size_t n = piece(pattern, &rng, size - off);
		long r = http_parser_feed(&p, (const char *)data + off, n);

		if ((r < 0) != (p.state == HTTP_PARSE_ERROR) || r < -1)
			abort();
		if (r >= 0 && ((size_t)r > n || ((size_t)r < n && p.state != HTTP_PARSE_DONE)))
			abort();
		if (r > 0)
			o->used += (uint64_t)r;
		off += n;
	}
	if (p.state != HTTP_PARSE_ERROR && p.state != HTTP_PARSE_DONE) {
		int r = http_parser_eof(&p);
		if ((r == 0) != (p.state == HTTP_PARSE_DONE) || (r != 0 && p.state != HTTP_PARSE_ERROR))
			abort();
	}
	if (p.head_len > sizeof(p.head) || p.content_length < -1 || (p.state == HTTP_PARSE_ERROR && !p.why))
		abort();
	/* A complete Content-Length body is exactly that long. */
	if (p.state == HTTP_PARSE_DONE && p.content_length >= 0 && !p.chunked && p.status != 204 && p.status != 304 &&
	    o->body_len != (uint64_t)p.content_length)
		abort();
	o->state = p.state;
	o->status = p.status;
	o->keep_alive = p.keep_alive;
	/* Bytes consumed before an error are not part of the contract. */
	if (p.state == HTTP_PARSE_ERROR)
		o->used = 0;
}

static int outcome_eq(const struct outcome *a, const struct outcome *b)
{
	return a->state == b->state && a->status == b->status && a->keep_alive == b->keep_alive && a->used == b->used &&
	       a->body_len == b->body_len && a->body_hash == b->body_hash;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outcome first, o;

	run(data, size, 0, &first);
	for (unsigned pattern = 1; pattern < 4; pattern++) {
		run(data, size, pattern, &o);
		if (!outcome_eq(&o, &first))
			abort();
	}
	return 0;
}

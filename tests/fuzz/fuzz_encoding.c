/* libFuzzer harness for base64 and UTF-8 validation (src/common/encoding.c).
 *
 * base64_decode reads API request bodies ("stdin_b64") and daemon events
 * ("data_b64"); utf8_valid_prefix reads a sandboxed process's raw output.
 *
 * Invariants checked:
 * - base64: decoding writes at most n / 4 * 3 bytes (the buffer is exactly
 *   that, so ASan sees any overflow); a successful decode re-encodes to the
 *   same length, identical except for the unused bits of the last quartet,
 *   and decodes again to the same bytes; any bytes encode and decode back.
 * - UTF-8: the result agrees with a straightforward reference decoder
 *   (code points, overlongs, surrogates, > U+10FFFF); a valid result leaves
 *   at most 3 bytes of tail, which is a proper prefix of some valid
 *   sequence; and validating in two chunks, carrying the tail over as the
 *   daemon does, gives the same verdict as validating at once.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu17 -D_GNU_SOURCE \
 *         -Isrc -Iinclude tests/fuzz/fuzz_encoding.c src/common/encoding.c -o fuzz_encoding
 *   ./fuzz_encoding -max_total_time=60 corpus/
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/encoding.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_base64_decode(const char *in, size_t n)
{
	size_t cap = n / 4 * 3;
	unsigned char *out = malloc(cap ? cap : 1);
	long m = base64_decode(in, n, out);

	if (m < -1 || m > (long)cap)
		abort();
	if (m >= 0) {
		if (n % 4 || (size_t)m + 2 < cap)
			abort();
		char *re = malloc(base64_encoded_len((size_t)m) + 1);
		size_t rl = base64_encode(out, (size_t)m, re);
		/* Same length; same text up to the last data character, which
		 * may differ only in bits a lax decoder ignores. */
		size_t pad = n >= 1 && in[n - 1] == '=' ? (n >= 2 && in[n - 2] == '=' ? 2 : 1) : 0;
		if (rl != n || re[rl] != '\0' || (n && memcmp(re, in, n - pad - 1) != 0) ||
		    (pad && memcmp(re + n - pad, in + n - pad, pad) != 0))
			abort();
		unsigned char *again = malloc(cap ? cap : 1);
		if (base64_decode(re, rl, again) != m || memcmp(again, out, (size_t)m) != 0)
			abort();
		free(again);
		free(re);
	}
	free(out);
}

static void check_base64_round_trip(const unsigned char *in, size_t n)
{
	size_t el = base64_encoded_len(n);
	char *enc = malloc(el + 1);
	if (base64_encode(in, n, enc) != el || enc[el] != '\0' || strlen(enc) != el)
		abort();
	unsigned char *dec = malloc(el / 4 * 3 + 1);
	if (base64_decode(enc, el, dec) != (long)n || memcmp(dec, in, n) != 0)
		abort();
	free(dec);
	free(enc);
}

/* Reference: length of the valid sequence at s[0..n), 0 if invalid, or
 * -1 if s[0..n) is a proper prefix of some valid sequence (incomplete). */
static int ref_seq(const unsigned char *s, size_t n)
{
	int len;
	uint32_t cp, min;
	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		len = 2, cp = s[0] & 0x1f, min = 0x80;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, cp = s[0] & 0x0f, min = 0x800;
	else if ((s[0] & 0xf8) == 0xf0)
		len = 4, cp = s[0] & 0x07, min = 0x10000;
	else
		return 0;
	for (int k = 1; k < len; k++) {
		if ((size_t)k >= n) {
			/* Incomplete: the completions span [lo, hi]; is any of
			 * them in range and not a surrogate? */
			int bits = 6 * (len - k);
			uint32_t lo = cp << bits, hi = lo | ((1u << bits) - 1);
			uint32_t a = lo > min ? lo : min, b = hi < 0x10ffff ? hi : 0x10ffff;
			if (a > b || (a >= 0xd800 && b <= 0xdfff))
				return 0;
			return -1;
		}
		if ((s[k] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[k] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

static size_t ref_prefix(const unsigned char *s, size_t n, int *ret_valid)
{
	size_t i = 0;
	*ret_valid = 1;
	while (i < n) {
		int l = ref_seq(s + i, n - i);
		if (l < 0)
			return i;
		if (l == 0) {
			*ret_valid = 0;
			return i;
		}
		i += (size_t)l;
	}
	return n;
}

static void check_utf8(const char *buf, size_t n, size_t cut)
{
	int valid = -1, rvalid;
	size_t p = utf8_valid_prefix(buf, n, &valid);
	size_t rp = ref_prefix((const unsigned char *)buf, n, &rvalid);

	if (p > n || (valid != 0 && valid != 1) || p != rp || valid != rvalid)
		abort();
	if (valid && n - p > 3)
		abort();
	/* The valid prefix is itself wholly valid. */
	int v2;
	if (utf8_valid_prefix(buf, p, &v2) != p || !v2)
		abort();

	/* Two chunks, the first's tail carried into the second. */
	if (cut > n)
		cut = n;
	int va;
	size_t pa = utf8_valid_prefix(buf, cut, &va);
	if (!va) {
		if (valid || pa != p)
			abort();
		return;
	}
	int vb;
	size_t pb = utf8_valid_prefix(buf + pa, n - pa, &vb);
	if (vb != valid || pa + pb != p)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;

	check_base64_decode(s, size);
	check_base64_round_trip(data, size);
	check_utf8(s, size, size ? data[0] % (size + 1) : 0);
	check_utf8(s, size, size / 2);
	return 0;
}

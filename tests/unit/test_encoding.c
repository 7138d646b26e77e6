/* Unit tests for src/common/encoding.c: base64 against the RFC 4648 test
 * vectors in both directions, rejection of malformed base64, and UTF-8
 * prefix validation (the daemon decides per output chunk between "data" and
 * "data_b64", carrying an incomplete tail over to the next chunk). */
#include "common/encoding.h"

#include <stdlib.h>
#include <string.h>

#include "tap.h"

/* RFC 4648, section 10. */
static const char *const rfc_plain[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
static const char *const rfc_b64[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };

static void test_base64_vectors(void)
{
	char out[64];
	unsigned char dec[64];

	for (size_t i = 0; i < sizeof(rfc_plain) / sizeof(rfc_plain[0]); i++) {
		size_t n = strlen(rfc_plain[i]);
		memset(out, 'X', sizeof(out));
		size_t len = base64_encode((const unsigned char *)rfc_plain[i], n, out);
		CHECK(len == strlen(rfc_b64[i]) && len == base64_encoded_len(n) && strcmp(out, rfc_b64[i]) == 0,
		      "encode \"%s\" -> \"%s\"", rfc_plain[i], rfc_b64[i]);
		memset(dec, 0xAA, sizeof(dec));
		long m = base64_decode(rfc_b64[i], strlen(rfc_b64[i]), dec);
		CHECK(m == (long)n && memcmp(dec, rfc_plain[i], n) == 0, "decode \"%s\" -> \"%s\"", rfc_b64[i],
		      rfc_plain[i]);
	}
}

static void test_base64_binary(void)
{
	unsigned char in[256], dec[256 + 3];
	char out[344 + 1];
	for (int i = 0; i < 256; i++)
		in[i] = (unsigned char)(255 - i);

	int bad = 0;
	for (size_t n = 0; n <= sizeof(in); n++) {
		size_t len = base64_encode(in, n, out);
		long m = base64_decode(out, len, dec);
		if (len != base64_encoded_len(n) || out[len] != '\0' || m != (long)n || memcmp(dec, in, n) != 0)
			bad++;
	}
	CHECK(bad == 0, "all 257 prefixes of 0xff..0x00 round-trip (%d did not)", bad);

	static const unsigned char ones[] = { 0xfb, 0xff, 0xbf };
	size_t len = base64_encode(ones, 3, out);
	CHECK(len == 4 && strcmp(out, "+/+/") == 0, "'+' and '/' used for 62 and 63 (%s)", out);
	CHECK(base64_decode("+/+/", 4, dec) == 3 && memcmp(dec, ones, 3) == 0, "and decoded back");
	CHECK(base64_encoded_len(0) == 0 && base64_encoded_len(1) == 4 && base64_encoded_len(3) == 4 &&
		      base64_encoded_len(4) == 8,
	      "encoded lengths 0, 4, 4, 8");
}

/* Decoding bad input: returns -1, and writes at most n / 4 * 3 bytes. */
static int rejects(const char *s, size_t n)
{
	unsigned char *out = malloc(n / 4 * 3 + 1);
	long r = base64_decode(s, n, out);
	free(out);
	return r == -1;
}

static void test_base64_bad(void)
{
	CHECK(rejects("Zg=", 3), "length not a multiple of 4");
	CHECK(rejects("Zm9vY", 5), "length 5");
	CHECK(rejects("Z", 1), "length 1");
	CHECK(rejects("Zg==Zg==", 8), "padding in a quartet other than the last");
	CHECK(rejects("Z===", 4), "three '='");
	CHECK(rejects("====", 4), "only '='");
	CHECK(rejects("Zg=a", 4), "data after '='");
	CHECK(rejects("=Zg=", 4), "leading '='");
	CHECK(rejects("Zm9v\n", 5), "newline");
	CHECK(rejects("Zm 9", 4), "space");
	CHECK(rejects("Zm-_", 4), "base64url alphabet");
	CHECK(rejects("Zm9\x80", 4), "byte 0x80");
	CHECK(rejects("Zm9\xff", 4), "byte 0xff");
	CHECK(rejects("Zm\0v", 4), "embedded NUL");
	CHECK(rejects("Zm9v\0\0\0\0", 8), "trailing NULs");
	unsigned char dec[4];
	CHECK(base64_decode("Zm9vYmFy", 4, dec) == 3 && memcmp(dec, "foo", 3) == 0, "input bounded by n, not NUL");
}

static void test_utf8(void)
{
	int valid;

	/* The length argument is explicit; NUL is a valid code point. */
	CHECK(utf8_valid_prefix("", 0, &valid) == 0 && valid, "empty: 0, valid");
	CHECK(utf8_valid_prefix("hello", 5, &valid) == 5 && valid, "ASCII");
	CHECK(utf8_valid_prefix("a\0b", 3, &valid) == 3 && valid, "NUL byte is valid UTF-8");
	CHECK(utf8_valid_prefix("\x7f", 1, &valid) == 1 && valid, "U+007F");
	CHECK(utf8_valid_prefix("\xc2\x80", 2, &valid) == 2 && valid, "U+0080 (2 bytes)");
	CHECK(utf8_valid_prefix("\xc3\xa9t\xc3\xa9", 5, &valid) == 5 && valid, "\"été\"");
	CHECK(utf8_valid_prefix("\xdf\xbf", 2, &valid) == 2 && valid, "U+07FF");
	CHECK(utf8_valid_prefix("\xe0\xa0\x80", 3, &valid) == 3 && valid, "U+0800 (3 bytes)");
	CHECK(utf8_valid_prefix("\xe2\x82\xac", 3, &valid) == 3 && valid, "U+20AC euro");
	CHECK(utf8_valid_prefix("\xed\x9f\xbf", 3, &valid) == 3 && valid, "U+D7FF, below the surrogates");
	CHECK(utf8_valid_prefix("\xee\x80\x80", 3, &valid) == 3 && valid, "U+E000, above the surrogates");
	CHECK(utf8_valid_prefix("\xef\xbf\xbf", 3, &valid) == 3 && valid, "U+FFFF");
	CHECK(utf8_valid_prefix("\xf0\x90\x80\x80", 4, &valid) == 4 && valid, "U+10000 (4 bytes)");
	CHECK(utf8_valid_prefix("\xf0\x9f\x98\x80", 4, &valid) == 4 && valid, "U+1F600 emoji");
	CHECK(utf8_valid_prefix("\xf4\x8f\xbf\xbf", 4, &valid) == 4 && valid, "U+10FFFF");

	/* Incomplete tails of 1-3 bytes: left out, still valid. */
	CHECK(utf8_valid_prefix("ab\xc3", 3, &valid) == 2 && valid, "1-byte tail of a 2-byte sequence");
	CHECK(utf8_valid_prefix("ab\xe2", 3, &valid) == 2 && valid, "1-byte tail of a 3-byte sequence");
	CHECK(utf8_valid_prefix("ab\xe2\x82", 4, &valid) == 2 && valid, "2-byte tail of a 3-byte sequence");
	CHECK(utf8_valid_prefix("ab\xf0", 3, &valid) == 2 && valid, "1-byte tail of a 4-byte sequence");
	CHECK(utf8_valid_prefix("ab\xf0\x9f", 4, &valid) == 2 && valid, "2-byte tail of a 4-byte sequence");
	CHECK(utf8_valid_prefix("ab\xf0\x9f\x98", 5, &valid) == 2 && valid, "3-byte tail of a 4-byte sequence");
	CHECK(utf8_valid_prefix("\xf0\x9f\x98", 3, &valid) == 0 && valid, "only a 3-byte tail: 0, valid");

	/* A tail that can never be completed is invalid now, not later. */
	CHECK(utf8_valid_prefix("ab\xe0\x80", 4, &valid) == 2 && !valid, "tail starting an overlong: invalid");
	CHECK(utf8_valid_prefix("ab\xed\xa0", 4, &valid) == 2 && !valid, "tail starting a surrogate: invalid");
	CHECK(utf8_valid_prefix("ab\xf4\x90", 4, &valid) == 2 && !valid, "tail starting > U+10FFFF: invalid");
	CHECK(utf8_valid_prefix("ab\xe2\x41", 4, &valid) == 2 && !valid, "tail with a non-continuation: invalid");
	CHECK(utf8_valid_prefix("ab\xf0\x9f\x41", 5, &valid) == 2 && !valid,
	      "3-byte tail with a bad third byte: invalid");

	/* Bytes that never start a sequence. */
	CHECK(utf8_valid_prefix("\x80", 1, &valid) == 0 && !valid, "lone continuation byte");
	CHECK(utf8_valid_prefix("\xbf", 1, &valid) == 0 && !valid, "lone 0xbf");
	CHECK(utf8_valid_prefix("\xc0\x80", 2, &valid) == 0 && !valid, "overlong NUL c0 80");
	CHECK(utf8_valid_prefix("\xc1\xbf", 2, &valid) == 0 && !valid, "overlong c1 bf");
	CHECK(utf8_valid_prefix("\xc0", 1, &valid) == 0 && !valid, "lone c0 is invalid, not an incomplete tail");
	CHECK(utf8_valid_prefix("\xf5\x80\x80\x80", 4, &valid) == 0 && !valid, "f5 lead (> U+10FFFF)");
	CHECK(utf8_valid_prefix("\xff", 1, &valid) == 0 && !valid, "0xff");
	CHECK(utf8_valid_prefix("\xfe", 1, &valid) == 0 && !valid, "0xfe");
	CHECK(utf8_valid_prefix("\xf8\x88\x80\x80\x80", 5, &valid) == 0 && !valid, "5-byte form");

	/* Overlongs, surrogates, beyond U+10FFFF in full. */
	CHECK(utf8_valid_prefix("\xe0\x80\xaf", 3, &valid) == 0 && !valid, "overlong '/' e0 80 af");
	CHECK(utf8_valid_prefix("\xe0\x9f\xbf", 3, &valid) == 0 && !valid, "overlong U+07FF e0 9f bf");
	CHECK(utf8_valid_prefix("\xf0\x80\x80\xaf", 4, &valid) == 0 && !valid, "overlong '/' f0 80 80 af");
	CHECK(utf8_valid_prefix("\xf0\x8f\xbf\xbf", 4, &valid) == 0 && !valid, "overlong U+FFFF f0 8f bf bf");
	CHECK(utf8_valid_prefix("\xed\xa0\x80", 3, &valid) == 0 && !valid, "surrogate U+D800");
	CHECK(utf8_valid_prefix("\xed\xbf\xbf", 3, &valid) == 0 && !valid, "surrogate U+DFFF");
	CHECK(utf8_valid_prefix("\xf4\x90\x80\x80", 4, &valid) == 0 && !valid, "U+110000");
	CHECK(utf8_valid_prefix("\xf4\xbf\xbf\xbf", 4, &valid) == 0 && !valid, "U+13FFFF");
	CHECK(utf8_valid_prefix("\xe2\x82\x41", 3, &valid) == 0 && !valid, "bad third byte");
	CHECK(utf8_valid_prefix("\xf0\x9f\x98\x41", 4, &valid) == 0 && !valid, "bad fourth byte");
	CHECK(utf8_valid_prefix("\xc3\xc3", 2, &valid) == 0 && !valid, "lead byte where a continuation belongs");

	/* Invalid in the middle: the prefix before it, even with a tail after. */
	CHECK(utf8_valid_prefix("abc\377def", 7, &valid) == 3 && !valid, "0xff after 3 bytes: 3, invalid");
	CHECK(utf8_valid_prefix("\xc3\xa9\x80\xc3\xa9", 5, &valid) == 2 && !valid,
	      "stray continuation between two é: 2, invalid");
	CHECK(utf8_valid_prefix("ok\xed\xa0\x80ok\xe2", 8, &valid) == 2 && !valid,
	      "surrogate before an incomplete tail: invalid wins");
	valid = 0;
	CHECK(utf8_valid_prefix("ok", 2, &valid) == 2 && valid, "ret_valid reset to 1 on valid input");

	/* Bounded by n: a valid sequence cut by n is a tail. */
	CHECK(utf8_valid_prefix("\xe2\x82\xac", 2, &valid) == 0 && valid, "n cuts the euro sign: 0, valid");
}

static void test_utf8_sanitize(void)
{
	char out[16];
	CHECK(utf8_sanitize("caf\xc3\xa9", 5, out, sizeof(out)) == 5 && strcmp(out, "caf\xc3\xa9") == 0,
	      "valid text is kept");
	CHECK(utf8_sanitize("a\xff"
			    "b",
			    3, out, sizeof(out)) == 5 &&
		      strcmp(out, "a\xef\xbf\xbd"
				  "b") == 0,
	      "an invalid byte becomes U+FFFD");
	CHECK(utf8_sanitize("ab\xe2\x82", 4, out, sizeof(out)) == 8 && strcmp(out, "ab\xef\xbf\xbd\xef\xbf\xbd") == 0,
	      "a cut-off sequence at the end is replaced byte by byte");
	CHECK(utf8_sanitize("\xe2\x82\xac\xe2\x82\xac", 6, out, 6) == 3 && strcmp(out, "\xe2\x82\xac") == 0,
	      "the text is cut before a sequence that does not fit");
	CHECK(utf8_sanitize("abc\xff", 4, out, 5) == 3 && strcmp(out, "abc") == 0,
	      "a replacement that does not fit is left out");
	int valid;
	char big[64];
	const char *in = "\x80\xc3\xa9\xed\xa0\x80z\xf4\x90\x80\x80";
	size_t n = utf8_sanitize(in, strlen(in), big, sizeof(big));
	CHECK(utf8_valid_prefix(big, n, &valid) == n && valid, "the output is always valid UTF-8");
	CHECK(utf8_sanitize("x", 1, out, 1) == 0 && out[0] == '\0', "room for the NUL only: empty");
}

int main(void)
{
	test_utf8_sanitize();
	test_base64_vectors();
	test_base64_binary();
	test_base64_bad();
	test_utf8();
	return tap_done();
}

#include "common/encoding.h"

#include <stdint.h>
#include <string.h>

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t base64_encoded_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

size_t base64_encode(const unsigned char *in, size_t n, char *out)
{
	size_t o = 0, i = 0;
	for (; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
		out[o++] = b64[v >> 18];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = b64[(v >> 6) & 63];
		out[o++] = b64[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
		out[o++] = b64[v >> 18];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	out[o] = '\0';
	return o;
}

static int b64_value(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;
	return p ? (int)(p - b64) : -1;
}

long base64_decode(const char *in, size_t n, unsigned char *out)
{
	if (n % 4)
		return -1;
	size_t o = 0;
	for (size_t i = 0; i < n; i += 4) {
		int v[4], pad = 0;
		for (int k = 0; k < 4; k++) {
			if (in[i + k] == '=' && i + 4 == n && k >= 2) {
				v[k] = 0;
				pad++;
			} else if (pad || (v[k] = b64_value(in[i + k])) < 0) {
				return -1;
			}
		}
		uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
		out[o++] = x >> 16;
		if (pad < 2)
			out[o++] = (x >> 8) & 0xff;
		if (pad < 1)
			out[o++] = x & 0xff;
	}
	return (long)o;
}

/* Length of the UTF-8 sequence starting with byte c, 0 if c cannot start one. */
static int seq_len(unsigned char c)
{
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return 2;
	if (c >= 0xe0 && c <= 0xef)
		return 3;
	if (c >= 0xf0 && c <= 0xf4)
		return 4;
	return 0;
}

/* Whether the second byte is allowed after lead (no overlongs, surrogates,
 * or code points above U+10FFFF). */
static int second_ok(unsigned char lead, unsigned char c)
{
	if ((c & 0xc0) != 0x80)
		return 0;
	if (lead == 0xe0)
		return c >= 0xa0;
	if (lead == 0xed)
		return c <= 0x9f;
	if (lead == 0xf0)
		return c >= 0x90;
	if (lead == 0xf4)
		return c <= 0x8f;
	return 1;
}

size_t utf8_valid_prefix(const char *buf, size_t n, int *ret_valid)
{
	const unsigned char *s = (const unsigned char *)buf;
	size_t i = 0;
	*ret_valid = 1;
	while (i < n) {
		int len = seq_len(s[i]);
		if (len == 0)
			goto invalid;
		for (int k = 1; k < len; k++) {
			if (i + k >= n)
				return i; /* incomplete tail: maybe completed later */
			if (k == 1 ? !second_ok(s[i], s[i + 1]) : (s[i + k] & 0xc0) != 0x80)
				goto invalid;
		}
		i += len;
	}
	return n;
invalid:
	*ret_valid = 0;
	return i;
}

size_t utf8_sanitize(const char *in, size_t n, char *out, size_t cap)
{
	static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */
	size_t o = 0;
	if (cap == 0)
		return 0;
	while (n > 0) {
		int valid;
		size_t k = utf8_valid_prefix(in, n, &valid), whole = k;
		/* Whole sequences only: the output is cut where one would not fit. */
		while (k > 0 && o + k >= cap) {
			k--;
			while (k > 0 && ((unsigned char)in[k] & 0xc0) == 0x80)
				k--;
		}
		memcpy(out + o, in, k);
		o += k;
		in += k;
		n -= k;
		if (n == 0 || k < whole || o + sizeof(replacement) - 1 >= cap)
			break;
		memcpy(out + o, replacement, sizeof(replacement) - 1);
		o += sizeof(replacement) - 1;
		in++;
		n--;
	}
	out[o] = '\0';
	return o;
}

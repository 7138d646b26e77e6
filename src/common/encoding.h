/* Byte encodings for JSON transport of process output: base64 (RFC 4648)
 * and UTF-8 validation. Pure. */
#pragma once
#include <stddef.h>

/* Encoded length of n bytes, without the NUL. */
size_t base64_encoded_len(size_t n);
/* Encode n bytes to out (base64_encoded_len(n) + 1 bytes); returns the length. */
size_t base64_encode(const unsigned char *in, size_t n, char *out);
/* Decode; out needs n / 4 * 3 bytes. Returns the decoded length or -1 on
 * bad input (wrong length, bad characters, misplaced padding). */
long base64_decode(const char *in, size_t n, unsigned char *out);

/* Length of the longest prefix of buf that is valid UTF-8 with any
 * incomplete trailing sequence (at most 3 bytes, which may be completed by
 * the next chunk) left out. *ret_valid is 0 when an invalid sequence stands
 * before that point. */
size_t utf8_valid_prefix(const char *buf, size_t n, int *ret_valid);
/* in (n bytes) as valid UTF-8 text into out (NUL-terminated, cap bytes):
 * each byte that is not part of a valid sequence becomes U+FFFD, and the
 * text is cut before a sequence that would not fit. Returns its length. */
size_t utf8_sanitize(const char *in, size_t n, char *out, size_t cap);

#include "image/digest.h"

#include <string.h>

void digest_init(struct digest_ctx *c)
{
	sha256_init(&c->sha);
}

void digest_update(struct digest_ctx *c, const void *buf, size_t n)
{
	sha256_update(&c->sha, n, buf);
}

void digest_final(struct digest_ctx *c, char out[DIGEST_STR_MAX])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char d[SHA256_DIGEST_SIZE];
	sha256_digest(&c->sha, sizeof(d), d);
	strcpy(out, DIGEST_PREFIX);
	char *p = out + strlen(DIGEST_PREFIX);
	for (size_t i = 0; i < sizeof(d); i++) {
		*p++ = hex[d[i] >> 4];
		*p++ = hex[d[i] & 15];
	}
	*p = '\0';
}

void digest_of(const void *buf, size_t n, char out[DIGEST_STR_MAX])
{
	struct digest_ctx c;
	digest_init(&c);
	digest_update(&c, buf, n);
	digest_final(&c, out);
}

bool digest_valid(const char *s)
{
	size_t pre = strlen(DIGEST_PREFIX);
	if (!s || strncmp(s, DIGEST_PREFIX, pre) != 0 || strlen(s + pre) != DIGEST_HEX_LEN)
		return false;
	/* Lowercase only: the hex names a file, and two spellings of one
	 * digest must not name two. */
	return strspn(s + pre, "0123456789abcdef") == DIGEST_HEX_LEN;
}

const char *digest_hex(const char *s)
{
	return s + strlen(DIGEST_PREFIX);
}

/* Content digests as OCI writes them: "sha256:" and 64 lowercase hex
 * digits. Only sha256 is accepted (the algorithm every registry and
 * `docker save` use); anything else is refused, not guessed at. */
#pragma once
#include <nettle/sha2.h>
#include <stdbool.h>
#include <stddef.h>

#define DIGEST_HEX_LEN 64
#define DIGEST_PREFIX "sha256:"
/* "sha256:" + 64 hex + NUL */
#define DIGEST_STR_MAX (sizeof(DIGEST_PREFIX) + DIGEST_HEX_LEN)

struct digest_ctx {
	struct sha256_ctx sha;
};

void digest_init(struct digest_ctx *c);
void digest_update(struct digest_ctx *c, const void *buf, size_t n);
/* The digest so far as "sha256:<hex>" into out (DIGEST_STR_MAX bytes). */
void digest_final(struct digest_ctx *c, char out[DIGEST_STR_MAX]);
/* The digest of buf in one go. */
void digest_of(const void *buf, size_t n, char out[DIGEST_STR_MAX]);
/* s is "sha256:" and exactly 64 lowercase hex digits. */
bool digest_valid(const char *s);
/* The hex part of a valid digest (a pointer into s). */
const char *digest_hex(const char *s);

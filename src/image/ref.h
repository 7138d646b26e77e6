/* Image references as Docker and the OCI distribution spec write them:
 *
 *   [REGISTRY/]REPOSITORY[:TAG][@sha256:HEX]
 *
 * REGISTRY is the first component when it has a '.' or a ':' or is
 * "localhost" (and is followed by more); otherwise the registry is
 * docker.io, where a one-component repository is in "library/"
 * ("python:3.12-slim" is docker.io/library/python:3.12-slim). Repository
 * components are lowercase letters and digits joined by '.', '_', "__" or
 * runs of '-'; a tag is up to 128 of [A-Za-z0-9_.-] not starting with '.'
 * or '-'; no tag and no digest means the tag "latest". Pure: no lookups. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "image/digest.h"

#define IMAGE_REF_NAME_MAX 255 /* registry + '/' + repository */
#define IMAGE_REF_TAG_MAX 128

struct image_ref {
	char registry[IMAGE_REF_NAME_MAX + 1];   /* "docker.io", "localhost:5000", "[::1]:5000" */
	char repository[IMAGE_REF_NAME_MAX + 1]; /* "library/python" */
	char tag[IMAGE_REF_TAG_MAX + 1];         /* "" when only a digest was given */
	char digest[DIGEST_STR_MAX];             /* "" when none */
};

/* Parse s; COVE_EINVAL with what is wrong. */
int image_ref_parse(const char *s, struct image_ref *ret, struct cove_err *err);
/* The reference in full ("docker.io/library/python:3.12-slim", with
 * "@sha256:..." when it has a digest) into out; -ENAMETOOLONG if it does
 * not fit. */
int image_ref_format(const struct image_ref *r, char *out, size_t n);
/* The host:port the registry's API is at (docker.io's is
 * registry-1.docker.io). */
const char *image_ref_api_host(const struct image_ref *r);
/* The registry is on this machine (localhost, 127.0.0.0/8, [::1]): the
 * only ones plain HTTP is used for without being told. */
bool image_ref_is_loopback(const struct image_ref *r);

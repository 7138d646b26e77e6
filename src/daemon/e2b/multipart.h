/* multipart/form-data, as E2B's SDK uploads files (multipart.c). */
#pragma once
#include <limits.h>
#include <stddef.h>

#include "common/error.h"

struct part {
	char path[PATH_MAX]; /* its filename */
	const unsigned char *data;
	size_t len;
};

/* The boundary of a multipart Content-Type into out: 0, or -1. */
int multipart_boundary(const char *type, char *out, size_t cap);
/* A multipart body's parts (at most max) into parts: each one's filename
 * (undici's escapes undone; "" if none) and bytes, which point into body.
 * -1 with a COVE_EINVAL err when the body is malformed or has more. */
int multipart_parse(const unsigned char *body, size_t n, const char *boundary, struct part *parts, int max, int *count,
		    struct cove_err *err);

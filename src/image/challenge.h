/* A registry's WWW-Authenticate challenge (RFC 7235, as the OCI
 * distribution spec's token auth uses it): its scheme and the parameters
 * a Bearer one carries. Pure. */
#pragma once

struct challenge {
	char scheme[16]; /* "Basic", "Bearer" */
	char realm[1024], service[256], scope[512];
};

/* 0, -EINVAL (no scheme, an unterminated value) or -ENAMETOOLONG (a
 * value too long for its field); ret untouched on failure. */
int challenge_parse(const char *header, struct challenge *ret);

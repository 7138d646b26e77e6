/* multipart/form-data bodies as undici sends them (multipart.h): pure, so
 * that the unit tests and the fuzzer drive it alone. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "daemon/e2b/multipart.h"

/* The multipart boundary of a Content-Type, into out. */
int multipart_boundary(const char *type, char *out, size_t cap)
{
	const char *b = type ? strcasestr(type, "boundary=") : NULL;
	if (!b)
		return -1;
	b += 9;
	size_t n = *b == '"' ? strcspn(++b, "\"") : strcspn(b, "; \t");
	if (n == 0 || n > 200 || n >= cap)
		return -1;
	memcpy(out, b, n);
	out[n] = '\0';
	return 0;
}

/* A part's filename="..." (undici's escapes %22, %0D, %0A undone). */
static int filename_of(const unsigned char *hdrs, size_t n, char *out, size_t cap)
{
	const char *f = memmem(hdrs, n, "filename=\"", 10);
	if (!f)
		return -1;
	f += 10;
	const char *end = memchr(f, '"', n - (size_t)(f - (const char *)hdrs));
	size_t o = 0;
	for (const char *p = f; end && p < end && o + 1 < cap; p++) {
		if (*p == '%' && end - p >= 3 &&
		    (!strncmp(p, "%22", 3) || !strncmp(p, "%0D", 3) || !strncmp(p, "%0A", 3))) {
			out[o++] = p[2] == '2' ? '"' : p[2] == 'D' ? '\r' : '\n';
			p += 2;
		} else {
			out[o++] = *p;
		}
	}
	out[o] = '\0';
	return end && o > 0 && o + 1 < cap ? 0 : -1;
}

int multipart_parse(const unsigned char *body, size_t n, const char *boundary, struct part *parts, int max, int *count,
		    struct cove_err *err)
{
	char delim[256];
	int dl = snprintf(delim, sizeof(delim), "\r\n--%s", boundary);
	/* The first delimiter may open the body, without its CRLF. */
	const unsigned char *p, *end = body + n;
	if (n >= (size_t)dl - 2 && !memcmp(body, delim + 2, (size_t)dl - 2)) {
		p = body + dl - 2;
	} else {
		p = memmem(body, n, delim, (size_t)dl);
		p = p ? p + dl : NULL;
	}
	*count = 0;
	while (p) {
		if (end - p >= 2 && p[0] == '-' && p[1] == '-')
			return 0;
		if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
			break;
		p += 2;
		const unsigned char *hend = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
		const unsigned char *next = hend ? memmem(hend + 4, (size_t)(end - hend - 4), delim, (size_t)dl) : NULL;
		if (!next)
			break;
		if (*count == max)
			return err_set(err, COVE_EINVAL, "more than %d files in one upload", max);
		struct part *pt = &parts[(*count)++];
		if (filename_of(p, (size_t)(hend - p), pt->path, sizeof(pt->path)) < 0)
			pt->path[0] = '\0';
		pt->data = hend + 4;
		pt->len = (size_t)(next - hend - 4);
		p = next + dl;
	}
	return err_set(err, COVE_EINVAL, "the multipart body is malformed");
}

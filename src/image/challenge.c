#include "image/challenge.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int challenge_parse(const char *header, struct challenge *ret)
{
	struct challenge c = { 0 };
	size_t n = strcspn(header, " ");
	if (n == 0 || n >= sizeof(c.scheme))
		return -EINVAL;
	memcpy(c.scheme, header, n);
	for (const char *p = header + n; *p;) {
		p += strspn(p, " ,");
		size_t klen = strcspn(p, "=");
		if (!*p || !p[klen] || p[klen + 1] != '"')
			break;
		const char *v = p + klen + 2, *end = strchr(v, '"');
		if (!end)
			return -EINVAL;
		char *dst = NULL;
		size_t cap = 0;
		if (klen == 5 && strncasecmp(p, "realm", 5) == 0)
			dst = c.realm, cap = sizeof(c.realm);
		else if (klen == 7 && strncasecmp(p, "service", 7) == 0)
			dst = c.service, cap = sizeof(c.service);
		else if (klen == 5 && strncasecmp(p, "scope", 5) == 0)
			dst = c.scope, cap = sizeof(c.scope);
		if (dst && (size_t)(end - v) >= cap)
			return -ENAMETOOLONG;
		if (dst)
			snprintf(dst, cap, "%.*s", (int)(end - v), v);
		p = end + 1;
	}
	*ret = c;
	return 0;
}

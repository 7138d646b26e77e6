#include "image/ref.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define DOCKER_HUB "docker.io"

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* One repository component: alnum runs joined by '.', '_', "__" or '-'+. */
static bool component_valid(const char *s, size_t n)
{
	if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
		return false;
	for (size_t i = 0; i < n;) {
		if (is_lower_alnum(s[i])) {
			i++;
			continue;
		}
		size_t sep = strspn(s + i, "-");
		if (sep == 0)
			sep = s[i] == '_' && s[i + 1] == '_' ? 2 : (s[i] == '.' || s[i] == '_') ? 1 : 0;
		if (sep == 0 || i + sep >= n || !is_lower_alnum(s[i + sep]))
			return false;
		i += sep;
	}
	return true;
}

static bool repository_valid(const char *s)
{
	for (const char *p = s;;) {
		size_t n = strcspn(p, "/");
		if (!component_valid(p, n))
			return false;
		if (!p[n])
			return true;
		p += n + 1;
	}
}

static bool tag_valid(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > IMAGE_REF_TAG_MAX || s[0] == '.' || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
			return false;
	return true;
}

/* host[:port], host a DNS name or a bracketed IPv6 address. */
static bool registry_valid(const char *s)
{
	const char *port = NULL;
	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end == s + 1 || strspn(s + 1, "0123456789abcdefABCDEF:.") != (size_t)(end - s - 1))
			return false;
		if (end[1] && end[1] != ':')
			return false;
		port = end[1] ? end + 2 : NULL;
	} else {
		size_t host = strcspn(s, ":");
		if (host == 0 || s[0] == '.' || s[0] == '-' ||
		    strspn(s, "abcdefghijklmnopqrstuvwxyz"
			      "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != host)
			return false;
		port = s[host] ? s + host + 1 : NULL;
	}
	return !port || (strlen(port) >= 1 && strlen(port) <= 5 && strspn(port, "0123456789") == strlen(port));
}

/* Is the first component of a name a registry? */
static bool looks_like_registry(const char *s, size_t n)
{
	return memchr(s, '.', n) || memchr(s, ':', n) || (n == 9 && memcmp(s, "localhost", 9) == 0) || s[0] == '[';
}

static int split_registry(const char *name, struct image_ref *r, struct cove_err *err)
{
	size_t first = strcspn(name, "/");
	const char *repo = name;
	if (name[first] == '/' && looks_like_registry(name, first)) {
		if (first > IMAGE_REF_NAME_MAX)
			return err_set(err, COVE_EINVAL, "image reference: registry name too long");
		memcpy(r->registry, name, first);
		r->registry[first] = '\0';
		if (!registry_valid(r->registry))
			return err_set(err, COVE_EINVAL, "image reference: '%s' is not a registry host[:port]",
				       r->registry);
		repo = name + first + 1;
	} else {
		strcpy(r->registry, DOCKER_HUB);
	}
	bool hub_official = strcmp(r->registry, DOCKER_HUB) == 0 && !strchr(repo, '/');
	int n = snprintf(r->repository, sizeof(r->repository), "%s%s", hub_official ? "library/" : "", repo);
	if (n < 0 || (size_t)n >= sizeof(r->repository) || strlen(r->registry) + 1 + (size_t)n > IMAGE_REF_NAME_MAX)
		return err_set(err, COVE_EINVAL, "image reference: name longer than %d", IMAGE_REF_NAME_MAX);
	if (!repository_valid(r->repository))
		return err_set(err, COVE_EINVAL,
			       "image reference: '%.100s' is not a repository (lowercase letters, digits, "
			       "'.', '_', '-', '/')",
			       repo);
	return 0;
}

int image_ref_parse(const char *s, struct image_ref *ret, struct cove_err *err)
{
	char name[2 * IMAGE_REF_NAME_MAX];
	struct image_ref r = { 0 };
	const char *at = strchr(s, '@');
	size_t len = at ? (size_t)(at - s) : strlen(s);
	if (at && !digest_valid(at + 1))
		return err_set(err, COVE_EINVAL, "image reference: '%.80s' is not sha256:<64 lowercase hex>", at + 1);
	if (at)
		strcpy(r.digest, at + 1);
	if (len == 0 || len >= sizeof(name))
		return err_set(err, COVE_EINVAL, "image reference: empty or too long");
	memcpy(name, s, len);
	name[len] = '\0';
	/* A tag is after the last ':' that follows the last '/' (a ':'
	 * before it is a registry's port). */
	char *colon = strrchr(name, ':');
	char *slash = strrchr(name, '/');
	if (colon && (!slash || colon > slash)) {
		*colon = '\0';
		if (!tag_valid(colon + 1))
			return err_set(err, COVE_EINVAL, "image reference: '%.130s' is not a tag", colon + 1);
		strcpy(r.tag, colon + 1);
	} else if (!at) {
		strcpy(r.tag, "latest");
	}
	if (split_registry(name, &r, err) < 0)
		return -1;
	*ret = r;
	return 0;
}

int image_ref_format(const struct image_ref *r, char *out, size_t n)
{
	int k = snprintf(out, n, "%s/%s%s%s%s%s", r->registry, r->repository, r->tag[0] ? ":" : "", r->tag,
			 r->digest[0] ? "@" : "", r->digest);
	return k < 0 || (size_t)k >= n ? -ENAMETOOLONG : 0;
}

const char *image_ref_api_host(const struct image_ref *r)
{
	return strcmp(r->registry, DOCKER_HUB) == 0 ? "registry-1.docker.io" : r->registry;
}

bool image_ref_is_loopback(const struct image_ref *r)
{
	const char *h = r->registry;
	size_t host = h[0] == '[' ? strcspn(h, "]") + 1 : strcspn(h, ":");
	if ((host == 9 && strncmp(h, "localhost", 9) == 0) || (host == 5 && strncmp(h, "[::1]", 5) == 0))
		return true;
	unsigned a, b, c, d;
	char tail;
	char ip[64];
	if (host >= sizeof(ip))
		return false;
	memcpy(ip, h, host);
	ip[host] = '\0';
	return sscanf(ip, "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 && c < 256 && d < 256;
}

#include "net/sniff.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

/* s[0..n) as a host name into out: see sniff.h for what passes. */
static bool name_copy(const char *s, size_t n, char out[SNIFF_NAME_MAX + 1])
{
	if (n && s[n - 1] == '.')
		n--;
	if (n == 0 || n > SNIFF_NAME_MAX || s[0] == '.' || s[n - 1] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '.' && s[i + 1] == '.')
			return false; /* an empty label (i + 1 < n: s[n - 1] is no dot) */
		if (!isalnum(c) && c != '-' && c != '_' && c != '.')
			return false;
	}
	memcpy(out, s, n);
	out[n] = '\0';
	return true;
}

static unsigned get16(const uint8_t *p)
{
	return (unsigned)p[0] << 8 | p[1];
}

/* A cursor over a bounded byte range: every take checks what is left. */
struct cur {
	const uint8_t *p;
	size_t n;
};

static bool take(struct cur *c, size_t k, struct cur *ret)
{
	if (c->n < k)
		return false;
	if (ret)
		*ret = (struct cur){ c->p, k };
	c->p += k;
	c->n -= k;
	return true;
}

/* A length-prefixed (1 or 2 bytes) range. */
static bool take_vec(struct cur *c, int len_bytes, struct cur *ret)
{
	struct cur l;
	if (!take(c, (size_t)len_bytes, &l))
		return false;
	return take(c, len_bytes == 1 ? l.p[0] : get16(l.p), ret);
}

/* The server_name extension's body: a list of (type, name); the first
 * host_name (type 0) is the name. */
static enum sniff_result sni_extension(struct cur e, char name[SNIFF_NAME_MAX + 1])
{
	struct cur list, entry;
	if (!take_vec(&e, 2, &list) || e.n != 0)
		return SNIFF_BAD;
	while (list.n) {
		struct cur type;
		if (!take(&list, 1, &type) || !take_vec(&list, 2, &entry))
			return SNIFF_BAD;
		if (type.p[0] == 0)
			return name_copy((const char *)entry.p, entry.n, name) ? SNIFF_NAME : SNIFF_BAD;
	}
	return SNIFF_NONE;
}

/* A whole ClientHello's body (after its 4-byte handshake header). */
static enum sniff_result client_hello(struct cur h, char name[SNIFF_NAME_MAX + 1])
{
	struct cur skip, exts, ext;
	if (!take(&h, 2 + 32, NULL) || !take_vec(&h, 1, &skip) || skip.n > 32 || !take_vec(&h, 2, &skip) ||
	    skip.n < 2 || skip.n % 2 || !take_vec(&h, 1, &skip) || skip.n < 1)
		return SNIFF_BAD;
	if (h.n == 0)
		return SNIFF_NONE; /* no extensions at all */
	if (!take_vec(&h, 2, &exts) || h.n != 0)
		return SNIFF_BAD;
	enum sniff_result r = SNIFF_NONE;
	while (exts.n) {
		struct cur type;
		if (!take(&exts, 2, &type) || !take_vec(&exts, 2, &ext))
			return SNIFF_BAD;
		if (get16(type.p) != 0)
			continue;
		/* An extension twice is malformed (RFC 8446 4.2): two server
		 * names could be judged by one and served by the other. */
		if (r != SNIFF_NONE)
			return SNIFF_BAD;
		r = sni_extension(ext, name);
		if (r == SNIFF_BAD)
			return r;
	}
	return r;
}

enum sniff_result sniff_tls(const uint8_t *buf, size_t len, char name[SNIFF_NAME_MAX + 1])
{
	/* The handshake message may span records: their fragments joined. */
	uint8_t hs[SNIFF_MAX];
	size_t n = 0;
	struct cur in = { buf, len }, hdr, frag = { 0 };
	while (in.n) {
		if (in.n >= 1 && in.p[0] != 22)
			return SNIFF_BAD; /* not a handshake record */
		if (in.n >= 2 && in.p[1] != 3)
			return SNIFF_BAD;
		if (in.n < 5)
			return SNIFF_MORE;
		size_t rl = get16(in.p + 3);
		if (rl == 0 || rl > 16384)
			return SNIFF_BAD;
		if (in.n < 5 + rl)
			return SNIFF_MORE;
		(void)take(&in, 5, &hdr);
		(void)take(&in, rl, &frag);
		if (n + frag.n > sizeof(hs))
			return SNIFF_BAD;
		memcpy(hs + n, frag.p, frag.n);
		n += frag.n;
		if (n >= 1 && hs[0] != 1)
			return SNIFF_BAD; /* not a ClientHello */
		if (n < 4)
			continue;
		size_t ml = (size_t)hs[1] << 16 | get16(hs + 2);
		if (ml + 4 > sizeof(hs))
			return SNIFF_BAD;
		if (n >= ml + 4)
			return client_hello((struct cur){ hs + 4, ml }, name);
	}
	return SNIFF_MORE;
}

/* A Host value ("name", "name:port", "[v6]", "[v6]:port") into name. */
static bool host_value(const char *s, size_t n, char name[SNIFF_NAME_MAX + 1])
{
	const char *end = s + n;
	if (n && s[0] == '[') {
		const char *close = memchr(s, ']', n);
		char a[64];
		struct in6_addr v6;
		if (!close || (size_t)(close - s - 1) >= sizeof(a))
			return false;
		memcpy(a, s + 1, (size_t)(close - s - 1));
		a[close - s - 1] = '\0';
		if (inet_pton(AF_INET6, a, &v6) != 1)
			return false;
		if (close + 1 != end && (close[1] != ':' || close + 2 == end))
			return false;
		for (const char *p = close + 2; p < end; p++)
			if (!isdigit((unsigned char)*p))
				return false;
		strcpy(name, a);
		return true;
	}
	const char *colon = memchr(s, ':', n);
	if (colon) {
		if (colon + 1 == end)
			return false;
		for (const char *p = colon + 1; p < end; p++)
			if (!isdigit((unsigned char)*p))
				return false;
		n = (size_t)(colon - s);
	}
	return name_copy(s, n, name);
}

static bool is_tchar(unsigned char c)
{
	return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The request line "METHOD SP TARGET SP HTTP/1.x": the target's authority
 * (absolute form) into name, or "" for origin form. */
static bool request_line(const char *s, size_t n, char name[SNIFF_NAME_MAX + 1])
{
	const char *sp1 = memchr(s, ' ', n);
	if (!sp1 || sp1 == s)
		return false;
	for (const char *p = s; p < sp1; p++)
		if (!isupper((unsigned char)*p))
			return false;
	const char *t = sp1 + 1, *end = s + n;
	const char *sp2 = memchr(t, ' ', (size_t)(end - t));
	if (!sp2 || sp2 == t || end - sp2 != 9 ||
	    (memcmp(sp2 + 1, "HTTP/1.1", 8) != 0 && memcmp(sp2 + 1, "HTTP/1.0", 8) != 0))
		return false;
	name[0] = '\0';
	if ((size_t)(sp2 - t) < 7 || strncasecmp(t, "http://", 7) != 0)
		return true;
	const char *a = t + 7, *ae = a;
	while (ae < sp2 && *ae != '/' && *ae != '?' && *ae != '#')
		ae++;
	/* user@host: which part is the host is a classic confusion. */
	return !memchr(a, '@', (size_t)(ae - a)) && host_value(a, (size_t)(ae - a), name);
}

/* One header line: if it is Host, its value into host (once only). */
static bool header_line(const char *s, size_t n, char host[SNIFF_NAME_MAX + 1], bool *seen)
{
	const char *colon = memchr(s, ':', n);
	if (!colon || colon == s)
		return false; /* and obs-fold (a line starting with a space) */
	for (const char *p = s; p < colon; p++)
		if (!is_tchar((unsigned char)*p))
			return false;
	if (colon - s != 4 || strncasecmp(s, "host", 4) != 0)
		return true;
	if (*seen)
		return false;
	*seen = true;
	const char *v = colon + 1, *ve = s + n;
	while (v < ve && (*v == ' ' || *v == '\t'))
		v++;
	while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
		ve--;
	if (v == ve) {
		host[0] = '\0';
		return true;
	}
	return host_value(v, (size_t)(ve - v), host);
}

enum sniff_result sniff_http(const uint8_t *buf, size_t len, char name[SNIFF_NAME_MAX + 1])
{
	const char *s = (const char *)buf, *end = s + len;
	char target[SNIFF_NAME_MAX + 1], host[SNIFF_NAME_MAX + 1] = "";
	bool seen = false;
	/* A client that is not speaking HTTP is told apart at its first byte
	 * that cannot be a method's. */
	for (const char *p = s; p < end && *p != ' '; p++)
		if (!isupper((unsigned char)*p) || p - s > 32)
			return SNIFF_BAD;
	const char *eol = memmem(s, len, "\r\n", 2);
	if (!eol)
		return SNIFF_MORE;
	if (!request_line(s, (size_t)(eol - s), target))
		return SNIFF_BAD;
	for (const char *l = eol + 2;; l = eol + 2) {
		eol = memmem(l, (size_t)(end - l), "\r\n", 2);
		if (!eol)
			return SNIFF_MORE;
		if (eol == l)
			break; /* the empty line: headers whole */
		if (!header_line(l, (size_t)(eol - l), host, &seen))
			return SNIFF_BAD;
	}
	if (target[0] && host[0] && strcasecmp(target, host) != 0)
		return SNIFF_BAD;
	const char *got = target[0] ? target : host;
	if (!got[0])
		return SNIFF_NONE;
	strcpy(name, got);
	return SNIFF_NAME;
}

/* Whether the header line [l, e) is named name (case-insensitive). */
static bool header_is(const char *l, const char *e, const char *name)
{
	size_t n = strlen(name);
	return (size_t)(e - l) > n && l[n] == ':' && strncasecmp(l, name, n) == 0;
}

/* Whether a Connection header's value in [l, e) names "upgrade". */
static bool asks_upgrade(const char *l, const char *e)
{
	for (const char *p = l; p + 7 <= e; p++)
		if (strncasecmp(p, "upgrade", 7) == 0)
			return true;
	return false;
}

size_t sniff_http_one_request(const uint8_t *buf, size_t len, uint8_t *out, size_t cap)
{
	const char *s = (const char *)buf, *end = s + len;
	const char *hend = memmem(s, len, "\r\n\r\n", 4);
	if (!hend || cap < len + 64)
		return 0;
	bool upgrade = false, has_upgrade_header = false;
	size_t n = 0;
	/* The request line and every header but the connection's own. */
	for (const char *l = s, *e; l < hend + 2; l = e + 2) {
		e = memmem(l, (size_t)(hend + 2 - l), "\r\n", 2);
		if (header_is(l, e, "connection")) {
			upgrade = upgrade || asks_upgrade(l, e);
			continue;
		}
		has_upgrade_header = has_upgrade_header || header_is(l, e, "upgrade");
		if (header_is(l, e, "keep-alive") || header_is(l, e, "proxy-connection"))
			continue;
		memcpy(out + n, l, (size_t)(e + 2 - l));
		n += (size_t)(e + 2 - l);
	}
	const char *c =
		upgrade && has_upgrade_header ? "Connection: upgrade, close\r\n\r\n" : "Connection: close\r\n\r\n";
	memcpy(out + n, c, strlen(c));
	n += strlen(c);
	memcpy(out + n, hend + 4, (size_t)(end - hend - 4));
	return n + (size_t)(end - hend - 4);
}

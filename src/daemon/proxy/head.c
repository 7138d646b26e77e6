/* A request head, read strictly (head.h). */
#include "daemon/proxy/head.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/parse.h"

/* RFC 9110's tchar: what a method and a field name are made of. */
static bool is_tchar(unsigned char c)
{
	return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The line at p (before end) up to its CRLF: its length, or -1 without a
 * CRLF or with a bare CR or LF in it. */
static long line_len(const char *p, const char *end)
{
	for (const char *q = p; q + 1 < end; q++) {
		if (q[0] == '\r' && q[1] == '\n')
			return q - p;
		if (q[0] == '\r' || q[0] == '\n' || q[0] == '\0')
			return -1;
	}
	return -1;
}

static int parse_request_line(const char *p, size_t n, struct http_head *h)
{
	const char *sp1 = memchr(p, ' ', n);
	if (!sp1 || sp1 == p)
		return -1;
	const char *sp2 = memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - p));
	if (!sp2 || sp2 == sp1 + 1)
		return -1;
	for (const char *q = p; q < sp1; q++)
		if (!is_tchar((unsigned char)*q))
			return -1;
	for (const char *q = sp1 + 1; q < sp2; q++)
		if ((unsigned char)*q <= ' ' || *q == 0x7f)
			return -1;
	size_t vlen = n - (size_t)(sp2 + 1 - p);
	if (vlen != 8 || memcmp(sp2 + 1, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)sp2[8]))
		return -1;
	h->method = p;
	h->method_len = (size_t)(sp1 - p);
	h->target = sp1 + 1;
	h->target_len = (size_t)(sp2 - sp1 - 1);
	h->minor = sp2[8] - '0';
	return 0;
}

static int parse_field(const char *p, size_t n, struct head_field *f)
{
	const char *colon = memchr(p, ':', n);
	if (!colon || colon == p)
		return -1;
	for (const char *q = p; q < colon; q++)
		if (!is_tchar((unsigned char)*q))
			return -1; /* a space before the colon, or folding */
	const char *v = colon + 1, *end = p + n;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	f->name = p;
	f->name_len = (size_t)(colon - p);
	f->value = v;
	f->value_len = (size_t)(end - v);
	return 0;
}

int head_parse(const char *buf, size_t len, struct http_head *ret)
{
	const char *p = buf, *end = buf + len;
	long n = line_len(p, end);
	memset(ret, 0, sizeof(*ret));
	if (n <= 0 || parse_request_line(p, (size_t)n, ret) < 0)
		return -1;
	p += n + 2;
	while ((n = line_len(p, end)) > 0) {
		if (ret->n_fields == HEAD_MAX_FIELDS || parse_field(p, (size_t)n, &ret->fields[ret->n_fields]) < 0)
			return -1;
		ret->n_fields++;
		p += n + 2;
	}
	/* The blank line, and nothing after it. */
	return n == 0 && p + 2 == end ? 0 : -1;
}

const struct head_field *head_get(const struct http_head *h, const char *name)
{
	size_t len = strlen(name);
	for (int i = 0; i < h->n_fields; i++)
		if (h->fields[i].name_len == len && strncasecmp(h->fields[i].name, name, len) == 0)
			return &h->fields[i];
	return NULL;
}

bool head_list_has(const char *v, size_t len, const char *item)
{
	size_t n = strlen(item);
	const char *p = v, *end = v + len;
	while (p < end) {
		while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
			p++;
		const char *q = p;
		while (q < end && *q != ',')
			q++;
		const char *e = q;
		while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if ((size_t)(e - p) == n && strncasecmp(p, item, n) == 0)
			return true;
		p = q;
	}
	return false;
}

/* Decimal digits only (no sign, no space), at most 18 of them. */
static int parse_length(const char *v, size_t len, uint64_t *ret)
{
	uint64_t x = 0;
	if (len == 0 || len > 18)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (!isdigit((unsigned char)v[i]))
			return -1;
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	*ret = x;
	return 0;
}

int head_body(const struct http_head *h, bool *chunked, uint64_t *length)
{
	bool te = false, cl = false;
	uint64_t n = 0;
	*chunked = false;
	*length = 0;
	for (int i = 0; i < h->n_fields; i++) {
		const struct head_field *f = &h->fields[i];
		if (f->name_len == 17 && strncasecmp(f->name, "Transfer-Encoding", 17) == 0) {
			/* chunked must be the last coding, and only once */
			const char *last = f->value + f->value_len;
			while (last > f->value && last[-1] != ',')
				last--;
			while (last < f->value + f->value_len && (*last == ' ' || *last == '\t'))
				last++;
			size_t ln = (size_t)(f->value + f->value_len - last);
			if (te || ln != 7 || strncasecmp(last, "chunked", 7) != 0)
				return -1;
			te = true;
		} else if (f->name_len == 14 && strncasecmp(f->name, "Content-Length", 14) == 0) {
			uint64_t x;
			if (parse_length(f->value, f->value_len, &x) < 0 || (cl && x != n))
				return -1;
			cl = true;
			n = x;
		}
	}
	if (te && cl)
		return -1;
	*chunked = te;
	*length = n;
	return 0;
}

int head_route_id(const char *v, size_t len, char id[16])
{
	char buf[16];
	if (len == 12) {
		memcpy(buf, "sb_", 3);
		memcpy(buf + 3, v, 12);
	} else if (len == 15) {
		memcpy(buf, v, 15);
		if (buf[2] == '-')
			buf[2] = '_';
	} else {
		return -1;
	}
	buf[15] = '\0';
	for (int i = 0; i < 15; i++)
		buf[i] = (char)tolower((unsigned char)buf[i]);
	if (!sandbox_id_valid(buf))
		return -1;
	memcpy(id, buf, 16);
	return 0;
}

int head_port(const char *v, size_t len, int *port)
{
	uint64_t x;
	if (len > 5 || parse_length(v, len, &x) < 0 || x < 1 || x > 65535 || v[0] == '0')
		return -1;
	*port = (int)x;
	return 0;
}

int head_route_host(const char *host, size_t len, const char *domain, char id[16], int *port)
{
	const char *colon = memchr(host, ':', len);
	if (colon)
		len = (size_t)(colon - host);
	if (len && host[len - 1] == '.') /* a fully qualified name */
		len--;
	const char *dot = memchr(host, '.', len), *dash = memchr(host, '-', len);
	size_t dlen = strlen(domain);
	if (!dot || !dash || dash > dot)
		return -1;
	if (len - (size_t)(dot + 1 - host) != dlen || strncasecmp(dot + 1, domain, dlen) != 0)
		return -1;
	if (head_port(host, (size_t)(dash - host), port) < 0)
		return -1;
	return head_route_id(dash + 1, (size_t)(dot - dash - 1), id);
}

/* Take the item "name=value" out of the list v[0..len) of items separated
 * by sep (and, for cookies, spaces). */
static int take_item(const char *v, size_t len, char sep, const char *name, char token[HEAD_TOKEN_MAX + 1], char *out,
		     size_t cap, bool *removed)
{
	size_t nlen = strlen(name), o = 0;
	int found = 0;
	*removed = false;
	const char *p = v, *end = v + len;
	while (p < end) {
		const char *q = memchr(p, sep, (size_t)(end - p));
		if (!q)
			q = end;
		const char *s = p;
		while (sep == ';' && s < q && *s == ' ')
			s++;
		size_t ilen = (size_t)(q - s);
		if (ilen > nlen && strncmp(s, name, nlen) == 0 && s[nlen] == '=') {
			/* every one goes (none may reach the server); the first
			 * is the token */
			*removed = true;
			if (!found && ilen - nlen - 1 <= HEAD_TOKEN_MAX) {
				memcpy(token, s + nlen + 1, ilen - nlen - 1);
				token[ilen - nlen - 1] = '\0';
				found = 1;
			}
		} else if (ilen > 0) {
			size_t need = ilen + (o ? (sep == ';' ? 2 : 1) : 0);
			if (o + need >= cap)
				return -1;
			if (o) {
				out[o++] = sep;
				if (sep == ';')
					out[o++] = ' ';
			}
			memcpy(out + o, s, ilen);
			o += ilen;
		}
		p = q + 1;
	}
	if (o >= cap)
		return -1;
	out[o] = '\0';
	return found;
}

int head_take_param(const char *target, size_t len, const char *name, char token[HEAD_TOKEN_MAX + 1], char *out,
		    size_t cap)
{
	const char *q = memchr(target, '?', len);
	size_t plen = q ? (size_t)(q - target) : len;
	if (plen + 1 >= cap)
		return -1;
	memcpy(out, target, plen);
	out[plen] = '\0';
	if (!q)
		return 0;
	out[plen] = '?';
	bool removed;
	int r = take_item(q + 1, len - plen - 1, '&', name, token, out + plen + 1, cap - plen - 1, &removed);
	if (r >= 0 && out[plen + 1] == '\0')
		out[plen] = '\0'; /* no parameter left: no '?' either */
	if (r == 0 && !removed) {
		/* as it was, byte for byte (an empty item stays) */
		if (len >= cap)
			return -1;
		memcpy(out, target, len);
		out[len] = '\0';
	}
	return r;
}

int head_take_cookie(const char *v, size_t len, const char *name, char token[HEAD_TOKEN_MAX + 1], char *out, size_t cap)
{
	bool removed;
	return take_item(v, len, ';', name, token, out, cap, &removed);
}

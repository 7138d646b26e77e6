/* The proxy's reading of a request head (pure: no I/O, no allocation):
 * the request line and header fields, the route a host name names, and
 * the traffic token in a query or a cookie, taken out before the request
 * goes on. Strict where a loose reading would let a request mean one
 * thing to the proxy and another to the server behind it (request
 * smuggling): no obsolete line folding, no space before a colon, no bare
 * LF, one Content-Length. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HEAD_MAX_FIELDS 100
#define HEAD_TOKEN_MAX 64 /* a token longer than that is no port's */

struct head_field {
	const char *name, *value; /* not NUL-terminated */
	size_t name_len, value_len;
};

struct http_head {
	const char *method, *target;
	size_t method_len, target_len;
	int minor; /* HTTP/1.minor */
	struct head_field fields[HEAD_MAX_FIELDS];
	int n_fields;
};

/* The head in buf[0..len), which ends with the blank line. 0, or -1 when
 * it is not a well-formed HTTP/1.x request head (or has more than
 * HEAD_MAX_FIELDS fields). The fields point into buf. */
int head_parse(const char *buf, size_t len, struct http_head *ret);
/* The first field named name (case-insensitive), or NULL. */
const struct head_field *head_get(const struct http_head *h, const char *name);
/* Whether the comma-separated list v[0..len) has the item item
 * (case-insensitive): "Connection: keep-alive, Upgrade". */
bool head_list_has(const char *v, size_t len, const char *item);
/* The body's framing: 0 with *chunked, or *length (0 when none); -1 for a
 * head whose framing is ambiguous (both, a transfer coding other than
 * chunked last, differing or malformed lengths). */
int head_body(const struct http_head *h, bool *chunked, uint64_t *length);

/* A host name "PORT-ID.DOMAIN" (with an optional ":port" after it;
 * case-insensitive) into id ("sb_" and 12 characters) and *port. ID is the
 * sandbox ID with '-' for its '_' (a host name has no '_'), or as it is,
 * or without "sb_". 0, or -1 when host names no port of a sandbox under
 * domain. */
int head_route_host(const char *host, size_t len, const char *domain, char id[16], int *port);
/* A sandbox ID as E2b-Sandbox-Id may give it (with or without "sb_") into
 * id; a port number 1-65535. 0 or -1. */
int head_route_id(const char *v, size_t len, char id[16]);
int head_port(const char *v, size_t len, int *port);

/* The query parameter name in target[0..len): its value (at most
 * HEAD_TOKEN_MAX bytes, not decoded: a token is hex) into token, and the
 * target without it (without every parameter of that name) into out (cap
 * bytes). 1 when it was there with a value of at most HEAD_TOKEN_MAX, 0
 * when not (out is the target as it was, but for any such parameter),
 * -1 when out is too small. */
int head_take_param(const char *target, size_t len, const char *name, char token[HEAD_TOKEN_MAX + 1], char *out,
		    size_t cap);
/* The same for a cookie name in a Cookie field's value; out may come out
 * empty (the field is then left out). */
int head_take_cookie(const char *v, size_t len, const char *name, char token[HEAD_TOKEN_MAX + 1], char *out,
		     size_t cap);

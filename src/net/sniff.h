/* The name a sandbox's outgoing connection asks for, read from its first
 * bytes: the server name (SNI) of a TLS ClientHello, or the Host of an
 * HTTP/1.x request. Pure functions over a buffer: the egress proxy
 * (egress.h) calls them as bytes arrive, and a fuzzer calls them with
 * anything.
 *
 * The name is what the proxy judges and then dials itself, so it is held
 * to a host name's characters: labels of [A-Za-z0-9_-] separated by dots
 * (one trailing dot dropped), at most 253 bytes, or an IP literal (IPv6 in
 * brackets for HTTP). Anything else, a NUL or a space inside included, is
 * SNIFF_BAD: a name that compares one way and resolves another must never
 * get through. */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* The most bytes read before the name must be known: a ClientHello with a
 * post-quantum key share is about 1.8 KiB, an HTTP request's headers a
 * few hundred bytes; more is refused. */
#define SNIFF_MAX 16384
#define SNIFF_NAME_MAX 253

enum sniff_result {
	SNIFF_BAD = -1, /* not TLS/HTTP, malformed, or a name that is not one */
	SNIFF_MORE = 0, /* whole so far: read more bytes and call again */
	SNIFF_NAME = 1, /* name filled */
	SNIFF_NONE = 2, /* whole, and carries no name (a ClientHello without SNI,
			  * an HTTP/1.0 request without Host) */
};

/* buf holds the first len bytes a client sent to port 443. */
enum sniff_result sniff_tls(const uint8_t *buf, size_t len, char name[SNIFF_NAME_MAX + 1]);
/* buf holds the first len bytes a client sent to port 80. The Host
 * header's name without its port; an absolute-form request target
 * ("GET http://a.example/ HTTP/1.1") names the host instead, and a Host
 * beside it must agree. Two Host headers are SNIFF_BAD. */
enum sniff_result sniff_http(const uint8_t *buf, size_t len, char name[SNIFF_NAME_MAX + 1]);

/* The request sniff_http judged (buf, len: the same bytes; its headers
 * whole), made the connection's only request: its Connection, Keep-Alive
 * and Proxy-Connection headers replaced by "Connection: close" (or
 * "Connection: upgrade, close" when it asked for an upgrade), so that the
 * server closes after answering it and a second request, naming another
 * host, never reaches the server the first one's name chose. What follows
 * the headers (a body's first bytes) is kept. Into out (cap bytes; len +
 * 64 is always enough): the length, or 0 if the headers are not whole. */
size_t sniff_http_one_request(const uint8_t *buf, size_t len, uint8_t *out, size_t cap);

/* coved's port proxy: a sandbox's open port as a URL,
 * http://PORT-ID.DOMAIN:PROXYPORT/ (ID with '-' for its '_': a host name
 * has no '_'), or, as E2B's proxy takes them, any host name with the
 * headers E2b-Sandbox-Id and E2b-Sandbox-Port. A front end over the
 * engine's ports (engine/ports.h): the engine gives the connection to the
 * port, the proxy reads request heads, checks the token and passes bytes.
 *
 * What it does to a connection: each request head is read (strictly: see
 * head.h) and sent on with the traffic token taken out (header
 * X-Cove-Token, query parameter cove_token, cookie cove_token) and the
 * client's address in X-Forwarded-For; bodies pass as they come
 * (Content-Length or chunked, followed to find the next head); answers
 * pass untouched, but for the Set-Cookie a query token earns. An upgrade
 * (WebSocket or any other) makes the connection raw both ways after its
 * head. The first request decides the connection's sandbox and port and is
 * the one whose token is checked; a later request on it for another one
 * closes it (a browser keeps one connection per host name anyway).
 *
 * Bounded: at most PROXY_HIGH_WATER bytes wait in coved for either side;
 * above that the other side is not read (TCP's window then slows the
 * sender), so a 1 GiB download through it takes no more memory than a
 * small one. */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "common/error.h"

struct event_base;

#define PROXY_DEFAULT_LISTEN "127.0.0.1:7071"
#define PROXY_HIGH_WATER (256u << 10)
#define PROXY_MAX_HEAD (32u << 10)
#define PROXY_MAX_CONNECTIONS 4096

struct proxy_config {
	char listen[128]; /* "ADDR:PORT", "off", or "" (the default, PROXY_DEFAULT_LISTEN) */
	char domain[128]; /* "" = "localhost" */
};

/* --proxy-listen and --proxy-domain. */
int proxy_parse_option(struct proxy_config *cfg, const char *name, const char *value, struct cove_err *err);
/* Bind the listener (before sandboxes are loaded, like the API's). An
 * address given with --proxy-listen that cannot be had stops coved; the
 * default one, taken (another coved on the host), is warned about and any
 * free port of 127.0.0.1 serves instead (the URLs say which). */
int proxy_setup(struct proxy_config *cfg, struct cove_err *err);
int proxy_serve(struct event_base *base, struct cove_err *err);
/* SIGTERM: no new connections. */
void proxy_stop(void);
/* Close every connection (coved is exiting). */
void proxy_cleanup(void);

bool proxy_serving(void);
/* The URL of port of sandbox id into buf; with token (not NULL) the query
 * that lets a browser in. -1 when buf is too small. */
int proxy_url(const char *id, int port, const char *token, char *buf, size_t cap);
/* The engine's port_url: proxy_url without a token, -1 when not serving. */
int proxy_port_url(const char *id, int port, char *buf, size_t cap);
/* {"listen": "ADDR:PORT", "domain": D} or null when not serving. */
json_t *proxy_to_json(void);
/* The engine's on_port_closed: end the connections to port (0: every
 * port) of sandbox id. */
void proxy_port_closed(const char *id, int port);

/* The API's listeners, its token and its limits (access.c). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "daemon/http/httpd.h"

struct event_base;

/* access.c: the API's listeners and their limits, from coved's flags; 0 or
 * "" is the default. */
struct access_config {
	char listen[128];          /* "ADDR:PORT" of a TCP listener, or "" for none */
	char token_file[512];      /* "" = <data>/token, made if missing */
	uint64_t max_header_bytes; /* a request's line and headers */
	uint64_t max_body_bytes;   /* a request's body */
	int max_connections;       /* per listener */
	double idle_timeout;       /* seconds a connection may wait between requests */
	double request_timeout;    /* seconds for a whole request to come, from its first byte */
};

/* access.c: see there. */
/* A coved flag --name VALUE of struct access_config. */
int access_parse_option(struct access_config *cfg, const char *name, const char *value, struct cove_err *err);
/* Before serving: defaults, the token, the TCP listener (if --listen). */
int access_setup(struct access_config *cfg, const char *data_dir, struct cove_err *err);
/* The HTTP server's limits, and the TCP listener, serving routes' streams
 * and handle (its keep_idle is access.c's). */
int access_serve(struct event_base *base, const struct http_callbacks *routes, struct cove_err *err);
/* SIGTERM: no new TCP connections. */
void access_stop(void);
/* After http_shutdown. */
void access_cleanup(void);
/* Whether req may be served: it came on the unix socket, or on TCP with
 * 'Authorization: Bearer <token>'. A front end refuses it in its own
 * shape otherwise. */
bool access_authorized(struct http_req *req);

/* Whether given is the token (constant time; false on a listener-less
 * coved, which has none). */
bool access_token_is(const char *given);
/* A secret derived from the token for label (hex): a front end's
 * per-object token (E2B's envd access token of a sandbox). */
#define ACCESS_DERIVED_LEN 32
void access_derive(const char *label, char out[ACCESS_DERIVED_LEN + 1]);

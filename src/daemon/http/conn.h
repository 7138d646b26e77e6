/* The client connections' registry (conn.c). */
#pragma once
#include <stdbool.h>

#include "daemon/http/httpd.h"

/* conn.c: what hangs on a client's connection, behind its one close
 * callback: the request in progress's hook (one at a time: libevent serves
 * a connection's requests in turn) and the ephemeral sandboxes it created.
 * A hook is called when the connection closes, before libevent frees it. */
typedef void (*conn_close_fn)(struct http_conn *conn, void *arg);
int conn_set_hook(struct http_conn *conn, conn_close_fn fn, void *arg);
/* Detach the hook whose arg is arg (no-op if another one replaced it). */
void conn_clear_hook(struct http_conn *conn, void *arg);
/* The connection's owner: fn(conn, arg) runs when it closes, after the
 * request's hook. One owner per connection; conn_owner gives its arg. */
int conn_set_owner(struct http_conn *conn, conn_close_fn fn, void *arg);
void *conn_owner(struct http_conn *conn);
void conn_clear_owner(struct http_conn *conn);

/* Tell fn (after the hook and the owner) when the connection
 * closes; access.c watches every connection so from its start to its end. */
int conn_watch(struct http_conn *conn, conn_close_fn fn, void *arg);
/* Whether a front end owns state on the connection (cove's API: ephemeral
 * sandboxes that still exist): such a connection is kept while idle. */
bool conn_has_owner(struct http_conn *conn);


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
int conn_add_ephemeral(struct http_conn *conn, const char *id);
/* Sandbox id is being deleted: no connection owns it any more. */
void conn_forget_sandbox(const char *id);

/* Tell fn (after the hook and the ephemeral sandboxes) when the connection
 * closes; access.c watches every connection so from its start to its end. */
int conn_watch(struct http_conn *conn, conn_close_fn fn, void *arg);
/* Whether the connection created ephemeral sandboxes that still exist. */
bool conn_owns_sandboxes(struct http_conn *conn);


/* What coved hangs on a client's HTTP connection. httpd gives a
 * connection ONE close callback, and three things need it: the request in
 * progress (an exec kills its process, a file request drops its answer),
 * the connection's owner, a front end's state for its whole life (cove's
 * API: the ephemeral sandboxes it created, deleted with it), and access.c,
 * which watches every connection to count it and to time it out. This
 * registry owns that callback and dispatches to all three.
 *
 * An entry lives from the first thing attached to a connection until the
 * connection closes or nothing is attached any more. The close callback
 * unlinks the entry before anything else: libevent frees the connection
 * right after, and a later connection at the same address must never find
 * this one's entry. Connections are few (one per client, and at most
 * --max-connections per listener), so a list does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/log.h"
#include "daemon/http/conn.h"

struct conn_entry {
	struct conn_entry *next;
	struct http_conn *conn;
	conn_close_fn hook; /* the request in progress, or NULL */
	void *hook_arg;
	conn_close_fn owner; /* a front end's, for the connection's whole life */
	void *owner_arg;
	conn_close_fn watch; /* access.c's, for the connection's whole life */
	void *watch_arg;
};

static struct conn_entry *entries;

static struct conn_entry *find(struct http_conn *conn)
{
	for (struct conn_entry *e = entries; e; e = e->next)
		if (e->conn == conn)
			return e;
	return NULL;
}

static void unlink_entry(struct conn_entry *e)
{
	for (struct conn_entry **pp = &entries; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			return;
		}
}

static void entry_free(struct conn_entry *e)
{
	free(e);
}

/* Nothing attached any more: the connection goes back to having no close
 * callback. */
static void drop_if_empty(struct conn_entry *e)
{
	if (e->hook || e->owner || e->watch)
		return;
	unlink_entry(e);
	http_conn_set_closecb(e->conn, NULL, NULL);
	entry_free(e);
}

static void on_close(struct http_conn *conn, void *arg)
{
	struct conn_entry *e = arg;
	unlink_entry(e);
	/* Never twice with e: it is freed below. */
	http_conn_set_closecb(conn, NULL, NULL);
	/* The request's hook first: it detaches the request from the dying
	 * connection, so that what the owner does below (deleting a sandbox,
	 * which fails its execs) never answers on it. */
	if (e->hook)
		e->hook(conn, e->hook_arg);
	if (e->owner)
		e->owner(conn, e->owner_arg);
	if (e->watch)
		e->watch(conn, e->watch_arg);
	entry_free(e);
}

static struct conn_entry *get(struct http_conn *conn)
{
	struct conn_entry *e = find(conn);
	if (e)
		return e;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->conn = conn;
	e->next = entries;
	entries = e;
	http_conn_set_closecb(conn, on_close, e);
	return e;
}

int conn_set_hook(struct http_conn *conn, conn_close_fn fn, void *arg)
{
	struct conn_entry *e = get(conn);
	if (!e)
		return -ENOMEM;
	e->hook = fn;
	e->hook_arg = arg;
	return 0;
}

void conn_clear_hook(struct http_conn *conn, void *arg)
{
	struct conn_entry *e = find(conn);
	if (!e || e->hook_arg != arg)
		return;
	e->hook = NULL;
	e->hook_arg = NULL;
	drop_if_empty(e);
}

int conn_set_owner(struct http_conn *conn, conn_close_fn fn, void *arg)
{
	struct conn_entry *e = get(conn);
	if (!e)
		return -ENOMEM;
	e->owner = fn;
	e->owner_arg = arg;
	return 0;
}

void *conn_owner(struct http_conn *conn)
{
	struct conn_entry *e = find(conn);
	return e ? e->owner_arg : NULL;
}

void conn_clear_owner(struct http_conn *conn)
{
	struct conn_entry *e = find(conn);
	if (!e)
		return;
	e->owner = NULL;
	e->owner_arg = NULL;
	drop_if_empty(e);
}

int conn_watch(struct http_conn *conn, conn_close_fn fn, void *arg)
{
	struct conn_entry *e = get(conn);
	if (!e)
		return -ENOMEM;
	e->watch = fn;
	e->watch_arg = arg;
	return 0;
}

bool conn_has_owner(struct http_conn *conn)
{
	struct conn_entry *e = find(conn);
	return e && e->owner;
}

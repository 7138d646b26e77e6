/* What coved hangs on a client's HTTP connection. libevent gives a
 * connection ONE close callback, and two things need it: the request in
 * progress (an exec kills its process, a file request drops its answer)
 * and the ephemeral sandboxes the connection created (deleted with it).
 * access.c also watches every connection, to count it and to time it out.
 * This registry owns that callback and dispatches to all three.
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
#include "engine/engine.h"

struct conn_entry {
	struct conn_entry *next;
	struct http_conn *conn;
	conn_close_fn hook; /* the request in progress, or NULL */
	void *hook_arg;
	char (*ids)[16]; /* ephemeral sandboxes created on this connection */
	size_t n_ids, cap_ids;
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
	free(e->ids);
	free(e);
}

/* Nothing attached any more: the connection goes back to having no close
 * callback. */
static void drop_if_empty(struct conn_entry *e)
{
	if (e->hook || e->n_ids || e->watch)
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
	 * connection, so that deleting a sandbox below (which fails its execs)
	 * never answers on it. */
	if (e->hook)
		e->hook(conn, e->hook_arg);
	for (size_t i = 0; i < e->n_ids; i++) {
		struct sandbox *sb = sandbox_find(engine_ctx, e->ids[i]);
		struct cove_err err = { 0 };
		if (!sb)
			continue;
		log_info("sandbox %s: deleting: the connection that created it (ephemeral) closed", sb->id);
		if (sandbox_delete(engine_ctx, sb, &err) < 0)
			log_error("sandbox %s: delete: %s", sb->id, err.msg);
	}
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

int conn_add_ephemeral(struct http_conn *conn, const char *id)
{
	struct conn_entry *e = get(conn);
	if (!e)
		return -ENOMEM;
	char(*ids)[16] = array_room_for_one(e->ids, e->n_ids, &e->cap_ids, sizeof(*ids), 4);
	if (!ids) {
		drop_if_empty(e);
		return -ENOMEM;
	}
	e->ids = ids;
	snprintf(e->ids[e->n_ids++], sizeof(e->ids[0]), "%s", id);
	return 0;
}

void conn_forget_sandbox(const char *id)
{
	for (struct conn_entry *e = entries, *next; e; e = next) {
		next = e->next;
		for (size_t i = 0; i < e->n_ids; i++)
			if (strcmp(e->ids[i], id) == 0) {
				memmove(e->ids[i], e->ids[i + 1], (e->n_ids - i - 1) * sizeof(e->ids[0]));
				e->n_ids--;
				drop_if_empty(e);
				return;
			}
	}
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

bool conn_owns_sandboxes(struct http_conn *conn)
{
	struct conn_entry *e = find(conn);
	return e && e->n_ids > 0;
}

/* Ephemeral sandboxes: deleted when the connection that created them
 * closes (`cove run`). Each such connection owns the list of the sandboxes
 * it created (conn.h's owner slot); a sandbox deleted otherwise is taken off
 * its list (the engine's on_sandbox_deleted hook), so that the list only
 * ever names live sandboxes. Connections are few, so lists do. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/log.h"
#include "daemon/api/api.h"
#include "daemon/http/conn.h"
#include "engine/engine.h"

struct owned {
	struct owned *next;
	struct http_conn *conn;
	char (*ids)[16];
	size_t n_ids, cap_ids;
};

static struct owned *all;

static void owned_free(struct owned *o)
{
	for (struct owned **pp = &all; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			break;
		}
	free(o->ids);
	free(o);
}

static void on_conn_closed(struct http_conn *conn, void *arg)
{
	struct owned *o = arg;
	/* Off the registry first: deleting a sandbox calls back into
	 * ephemeral_forget, which must not find this list half gone. */
	for (struct owned **pp = &all; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			break;
		}
	o->next = NULL;
	for (size_t i = 0; i < o->n_ids; i++) {
		struct sandbox *sb = sandbox_find(engine_ctx, o->ids[i]);
		struct cove_err err = { 0 };
		if (!sb)
			continue;
		log_info("sandbox %s: deleting: the connection that created it (ephemeral) closed", sb->id);
		if (sandbox_delete(engine_ctx, sb, &err) < 0)
			log_error("sandbox %s: delete: %s", sb->id, err.msg);
	}
	free(o->ids);
	free(o);
}

int ephemeral_add(struct http_conn *conn, const char *id)
{
	struct owned *o = conn_owner(conn);
	if (!o) {
		if (!(o = calloc(1, sizeof(*o))))
			return -ENOMEM;
		if (conn_set_owner(conn, on_conn_closed, o) < 0) {
			free(o);
			return -ENOMEM;
		}
		o->conn = conn;
		o->next = all;
		all = o;
	}
	char(*ids)[16] = array_room_for_one(o->ids, o->n_ids, &o->cap_ids, sizeof(*ids), 4);
	if (!ids) {
		if (!o->n_ids) {
			conn_clear_owner(conn);
			owned_free(o);
		}
		return -ENOMEM;
	}
	o->ids = ids;
	snprintf(o->ids[o->n_ids++], sizeof(o->ids[0]), "%s", id);
	return 0;
}

void ephemeral_forget(const char *id)
{
	for (struct owned *o = all; o; o = o->next)
		for (size_t i = 0; i < o->n_ids; i++)
			if (strcmp(o->ids[i], id) == 0) {
				memmove(o->ids[i], o->ids[i + 1], (o->n_ids - i - 1) * sizeof(o->ids[0]));
				if (--o->n_ids == 0) {
					conn_clear_owner(o->conn);
					owned_free(o);
				}
				return;
			}
}

/* envd's polled watchers, filesystem.Filesystem's CreateWatcher,
 * GetWatcherEvents and RemoveWatcher (E2B's Python SDK watches this way):
 * an engine watch (engine/watch.h) whose events wait here until they are
 * asked for. CreateWatcher answers once the watch began, so that no change
 * made after its answer is missed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/parse.h"
#include "daemon/api/request.h"
#include "daemon/e2b/connect.h"
#include "daemon/e2b/e2b_private.h"
#include "daemon/http/conn.h"
#include "engine/engine.h"
#include "engine/output.h"
#include "engine/watch.h"

#define WATCHERS_MAX 64          /* per sandbox, ended ones too */
#define WATCHER_MAX_EVENTS 10000 /* waiting to be fetched; more ends the watcher */

struct watcher {
	struct output out;
	char id[40];
	char sandbox[16];
	struct http_req *req; /* CreateWatcher, until the watch began */
	struct http_conn *conn;
	json_t *events; /* FilesystemEvent objects not fetched yet */
	bool ended;     /* no more events: code and why */
	bool closed;    /* the engine is done with out */
	char code[32];
	char why[256];
	struct watcher *next;
};

static struct watcher *watchers;

static void unlink_watcher(struct watcher *w)
{
	for (struct watcher **p = &watchers; *p; p = &(*p)->next) {
		if (*p == w) {
			*p = w->next;
			break;
		}
	}
	if (w->conn)
		conn_clear_hook(w->conn, w);
	if (!w->closed)
		output_cancel(&w->out);
	json_decref(w->events);
	free(w);
}

static void end_watch(struct watcher *w, const char *code, const char *why)
{
	w->ended = true;
	snprintf(w->code, sizeof(w->code), "%s", code);
	snprintf(w->why, sizeof(w->why), "%s", why);
}

static void on_write(struct output *o, const struct out_event *ev)
{
	struct watcher *w = (struct watcher *)o;
	const struct watch_event *e = ev->event;
	json_t *j;
	if (ev->type != OUT_EVENT || w->ended)
		return;
	if (e->type == WATCH_START && w->req) {
		conn_clear_hook(w->conn, w);
		connect_reply(w->req, json_pack("{s:s}", "watcherId", w->id));
		w->req = NULL;
		w->conn = NULL;
	} else if (json_array_size(w->events) >= WATCHER_MAX_EVENTS) {
		end_watch(w, "resource_exhausted", "more events than a watcher keeps were not fetched");
	} else if ((j = fs_event_json(e))) {
		json_array_append_new(w->events, j);
	}
}

static void on_close(struct output *o, const struct cove_err *err)
{
	struct watcher *w = (struct watcher *)o;
	w->closed = true;
	if (w->req) { /* it never began */
		connect_reply_error(w->req, err ? connect_code_of(err->code) : "internal", "%s",
				    err && err->msg[0] ? err->msg : "the watch ended before it began");
		unlink_watcher(w);
		return;
	}
	if (!w->ended)
		end_watch(w, err ? connect_code_of(err->code) : "internal",
			  err && err->msg[0] ? err->msg : "the watch ended");
}

static const struct output_ops watcher_ops = { .write = on_write, .close = on_close };

/* CreateWatcher's client left before the watch began. */
static void on_gone(struct http_conn *conn, void *arg)
{
	struct watcher *w = arg;
	w->conn = NULL;
	w->req = NULL;
	unlink_watcher(w);
}

/* Those of sandboxes that are gone go; how many sb has. */
static int sweep(const struct sandbox *sb)
{
	int n = 0;
	for (struct watcher *w = watchers, *next; w; w = next) {
		next = w->next;
		if (!sandbox_find(engine_ctx, w->sandbox) && !w->req)
			unlink_watcher(w);
		else if (strcmp(w->sandbox, sb->id) == 0)
			n++;
	}
	return n;
}

static int create(struct envd_req *er, json_t *j, struct cove_err *err)
{
	char path[PATH_MAX];
	bool entry = false;
	struct watch_request rq = { .path = path, .user = er->user[0] ? er->user : NULL };
	if (fs_request_path(er, j, "path", path, err) < 0 || get_bool(j, "recursive", &rq.recursive, err) < 0 ||
	    get_bool(j, "includeEntry", &entry, err) < 0)
		return -1;
	if (entry)
		return err_set(err, COVE_EINVAL, "'includeEntry' is not supported (envd %s)", E2B_ENVD_VERSION);
	if (sweep(er->sb) >= WATCHERS_MAX)
		return err_set(err, COVE_EFULL, "too many watchers (%d in this sandbox): remove some", WATCHERS_MAX);
	struct watcher *w = calloc(1, sizeof(*w));
	if (!w || !(w->events = json_array()) || random_hex(w->id, 16) < 0) {
		free(w);
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	w->out.ops = &watcher_ops;
	w->req = er->req;
	w->conn = http_req_conn(er->req);
	snprintf(w->sandbox, sizeof(w->sandbox), "%s", er->sb->id);
	w->next = watchers;
	watchers = w;
	if (conn_set_hook(w->conn, on_gone, w) < 0 || watch_start(er->sb, &rq, &w->out, err) < 0) {
		w->req = NULL;
		w->closed = true; /* never taken */
		unlink_watcher(w);
		return err->code ? -1 : err_set(err, COVE_EINTERNAL, "out of memory");
	}
	return 0;
}

static struct watcher *find(struct envd_req *er, json_t *j, struct cove_err *err)
{
	const char *id = NULL;
	if (get_string(j, "watcherId", &id, 63, err) < 0)
		return NULL;
	if (!id || !*id)
		return err_set(err, COVE_EINVAL, "'watcherId' is required"), NULL;
	for (struct watcher *w = watchers; w; w = w->next)
		if (!w->req && strcmp(w->id, id) == 0 && strcmp(w->sandbox, er->sb->id) == 0)
			return w;
	return err_set(err, COVE_ENOTFOUND, "watcher '%s' not found", id), NULL;
}

/* The events waiting; once none wait, an ended watcher's error (and it
 * goes). */
static int get_events(struct envd_req *er, json_t *j, struct cove_err *err)
{
	struct watcher *w = find(er, j, err);
	if (!w)
		return -1;
	if (json_array_size(w->events) == 0 && w->ended) {
		connect_reply_error(er->req, w->code, "%s", w->why);
		unlink_watcher(w);
		return 0;
	}
	json_t *events = w->events;
	w->events = json_array();
	if (json_array_size(events)) {
		connect_reply(er->req, json_pack("{s:o}", "events", events));
	} else {
		json_decref(events);
		connect_reply(er->req, json_object());
	}
	return 0;
}

static int remove_watcher(struct envd_req *er, json_t *j, struct cove_err *err)
{
	struct watcher *w = find(er, j, err);
	if (!w)
		return -1;
	unlink_watcher(w);
	connect_reply(er->req, json_object());
	return 0;
}

int watcher_call(struct envd_req *er, const char *method, json_t *j, struct cove_err *err)
{
	if (strcmp(method, "CreateWatcher") == 0)
		return create(er, j, err);
	if (strcmp(method, "GetWatcherEvents") == 0)
		return get_events(er, j, err);
	return remove_watcher(er, j, err);
}

/* cove's REST watch: GET /v1/sandboxes/{id}/files/watch?path=DIR
 * [&recursive=1][&user=U][&keepalive=S], the engine's watch (engine/watch.h)
 * as NDJSON, one JSON object a line: {"type":"start"} once watching; then
 * {"type","name","is_dir"} with type create, write, remove, rename (with
 * "moved": "from" or "to", and the "cookie" that pairs both halves) or
 * chmod; {"type":"overflow"} when events were lost; {"type":"keepalive"}
 * after a silence; {"type":"error","error":{code,message}} as the last line
 * when coved ends the stream. Otherwise it lasts until the client
 * disconnects, which cancels the watch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/api/files.h"
#include "daemon/api/reply.h"
#include "daemon/api/request.h"
#include "engine/engine.h"
#include "engine/files.h"
#include "engine/output.h"
#include "engine/watch.h"

static void watch_encode(struct http_output *ho, const struct out_event *ev)
{
	static const char *const types[] = {
		[WATCH_START] = "start",       [WATCH_CREATE] = "create", [WATCH_WRITE] = "write",
		[WATCH_REMOVE] = "remove",     [WATCH_RENAME] = "rename", [WATCH_CHMOD] = "chmod",
		[WATCH_OVERFLOW] = "overflow",
	};
	const struct watch_event *e = ev->event;
	if (ev->type == OUT_KEEPALIVE && ho->started) {
		reply_line(ho, json_pack("{s:s}", "type", "keepalive"));
		return;
	}
	if (ev->type != OUT_EVENT)
		return;
	if (e->type == WATCH_START)
		reply_start(ho, "application/x-ndjson");
	if (!ho->started)
		return;
	if (e->type == WATCH_START || e->type == WATCH_OVERFLOW) {
		reply_line(ho, json_pack("{s:s}", "type", types[e->type]));
		return;
	}
	json_t *j = json_pack("{s:s, s:s, s:b}", "type", types[e->type], "name", e->name, "is_dir", e->is_dir);
	if (j && e->moved != WATCH_MOVED_NONE) {
		json_object_set_new(j, "moved", json_string(e->moved == WATCH_MOVED_FROM ? "from" : "to"));
		json_object_set_new(j, "cookie", json_integer((json_int_t)e->cookie));
	}
	reply_line(ho, j);
}

static void watch_free(struct http_output *ho)
{
	free(ho);
}

static const struct http_output_route watch_route = { .encode = watch_encode,
						      .finish = reply_ndjson_finish,
						      .free = watch_free };

static int parse_watch(const char *q, struct watch_request *rq, char path[PATH_MAX], char user[64],
		       struct cove_err *err)
{
	static const char *const params[] = { "path", "recursive", "user", "keepalive", NULL };
	char v[16], *end;
	if (check_params(q, params, err) < 0 || get_path(q, "path", path, err) < 0 ||
	    get_flag(q, "recursive", &rq->recursive, err) < 0)
		return -1;
	rq->path = path;
	int r = query_param(q, "user", user, 64, err);
	if (r < 0)
		return -1;
	rq->user = r ? user : NULL;
	if ((r = query_param(q, "keepalive", v, sizeof(v), err)) < 0)
		return -1;
	if (r > 0) {
		long s = strtol(v, &end, 10);
		if (!v[0] || *end || s < 1 || s > WATCH_MAX_KEEPALIVE)
			return err_set(err, COVE_EINVAL, "'keepalive' must be seconds from 1 to %d",
				       WATCH_MAX_KEEPALIVE);
		rq->keepalive = (int)s;
	}
	return 0;
}

int api_files_watch(struct http_req *req, const char *id, struct cove_err *err)
{
	char path[PATH_MAX], user[64];
	struct watch_request rq = { 0 };
	struct sandbox *sb = sandbox_lookup(engine_ctx, id, err);
	if (!sb || files_sandbox_ready(sb, err) < 0 || parse_watch(query_of(req), &rq, path, user, err) < 0)
		return -1;
	struct http_output *ho = calloc(1, sizeof(*ho));
	if (!ho)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	if (http_output_init(ho, req, &watch_route, NULL, err) < 0) {
		free(ho);
		return -1;
	}
	if (watch_start(sb, &rq, &ho->out, err) < 0) {
		http_output_abandon(ho);
		free(ho);
		return -1;
	}
	return 0;
}

/* cove's REST lifecycle: POST /v1/sandboxes/{id}/pause, /resume, /archive,
 * /reboot (each answers the sandbox's JSON; 409 from a state it does not
 * start from; archive's body may say {"memory": false}), and GET
 * /v1/events[?sandbox=ID][&keepalive=S], the transitions as NDJSON:
 * {"type":"state","id","state","from","reason","at"} (an archive, and a
 * wake from one, add "memory_kept" and "memory_note"), ("lost": N when this client lagged and missed N), {"type":"keepalive"}
 * after S seconds (default 15) of silence. A stream lasts until the client
 * disconnects. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/api/api.h"
#include "daemon/api/reply.h"
#include "daemon/api/request.h"
#include "engine/engine.h"

#define EVENTS_DEFAULT_KEEPALIVE 15

typedef int (*transition_fn)(struct engine *d, struct sandbox *sb, enum sandbox_reason why, struct cove_err *err);

/* The body must be empty or {}: a transition takes no options. */
static int transition(struct http_req *req, const char *id, transition_fn fn, struct cove_err *err)
{
	static const char *const fields[] = { NULL };
	struct sandbox *sb = api_lookup(id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	int r = check_fields(j, fields, err);
	json_decref(j);
	if (r < 0 || fn(engine_ctx, sb, SB_REASON_USER, err) < 0)
		return -1;
	reply_json(req, 200, sandbox_to_json(sb));
	return 0;
}

int h_pause(struct http_req *req, const char *id, struct cove_err *err)
{
	return transition(req, id, engine_sandbox_pause, err);
}

int h_resume(struct http_req *req, const char *id, struct cove_err *err)
{
	return transition(req, id, engine_sandbox_resume, err);
}

/* Its body may say {"memory": false}: the processes are ended, not saved
 * (absent: saved when they can be; true: saved, or a 409). */
int h_archive(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "memory", NULL };
	struct sandbox *sb = api_lookup(id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	json_t *m = json_object_get(j, "memory");
	enum archive_memory mode = !m ? ARCHIVE_MEMORY_AUTO : json_is_true(m) ? ARCHIVE_MEMORY_YES : ARCHIVE_MEMORY_NO;
	int r = check_fields(j, fields, err);
	if (r == 0 && m && !json_is_boolean(m))
		r = err_set(err, COVE_EINVAL, "'memory' must be a boolean");
	json_decref(j);
	if (r < 0 || engine_sandbox_archive_mem(engine_ctx, sb, SB_REASON_USER, mode, err) < 0)
		return -1;
	reply_json(req, 200, sandbox_to_json(sb));
	return 0;
}

int h_reboot(struct http_req *req, const char *id, struct cove_err *err)
{
	return transition(req, id, engine_sandbox_reboot, err);
}

static void events_encode(struct http_output *ho, const struct out_event *ev)
{
	if (ev->type == OUT_START) {
		reply_start(ho, "application/x-ndjson");
		return;
	}
	if (!ho->started)
		return;
	if (ev->type == OUT_KEEPALIVE) {
		reply_line(ho, json_pack("{s:s}", "type", "keepalive"));
		return;
	}
	if (ev->type != OUT_EVENT)
		return;
	const struct sandbox_event *e = ev->event;
	json_t *j = json_pack("{s:s, s:s, s:s, s:s?, s:s, s:I}", "type", "state", "id", e->id, "state", e->state,
			      "from", e->from, "reason", e->reason, "at", (json_int_t)e->at);
	if (j && e->lost)
		json_object_set_new(j, "lost", json_integer((json_int_t)e->lost));
	if (j && e->memory_kept >= 0)
		json_object_set_new(j, "memory_kept", json_boolean(e->memory_kept));
	if (j && e->note)
		json_object_set_new(j, "memory_note", json_string(e->note));
	reply_line(ho, j);
}

static void events_free(struct http_output *ho)
{
	free(ho);
}

static const struct http_output_route events_route = { .encode = events_encode, .free = events_free };

int h_events(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "sandbox", "keepalive", NULL };
	const char *q = query_of(req);
	char sandbox[64] = "", v[16], *end;
	int keepalive = EVENTS_DEFAULT_KEEPALIVE, r;
	if (check_params(q, params, err) < 0 || query_param(q, "sandbox", sandbox, sizeof(sandbox), err) < 0 ||
	    (r = query_param(q, "keepalive", v, sizeof(v), err)) < 0)
		return -1;
	if (r > 0) {
		long s = strtol(v, &end, 10);
		if (!v[0] || *end || s < 1 || s > EVENTS_MAX_KEEPALIVE)
			return err_set(err, COVE_EINVAL, "'keepalive' must be seconds from 1 to %d",
				       EVENTS_MAX_KEEPALIVE);
		keepalive = (int)s;
	}
	/* A filter must name a sandbox there is (its later events only). */
	if (sandbox[0] && !api_lookup(sandbox, err))
		return -1;
	struct http_output *ho = calloc(1, sizeof(*ho));
	if (!ho)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	if (http_output_init(ho, req, &events_route, NULL, err) < 0) {
		free(ho);
		return -1;
	}
	if (events_subscribe(engine_ctx, sandbox[0] ? sandbox : NULL, keepalive, &ho->out, err) < 0) {
		http_output_abandon(ho);
		free(ho);
		return -1;
	}
	return 0;
}

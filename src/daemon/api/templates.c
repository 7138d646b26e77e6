/* cove's REST API: templates (create, list, get, delete), what a create
 * inherits from one, its start command and readiness check, and the
 * answer of a create that waits for them. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/api/api.h"
#include "daemon/api/reply.h"
#include "daemon/api/request.h"
#include "engine/engine.h"
#include "engine/template.h"

#define API_MAX_IDLE_TIMEOUT (30 * 86400) /* seconds */

/* ---- start command and readiness ---- */

/* "ready": {"port": N} | {"url": "http://..."} | {"cmd": argv or string},
 * and "timeout" (seconds, default 30), normalized into *ret. */
static int parse_ready(json_t *v, json_t **ret, struct cove_err *err)
{
	static const char *const fields[] = { "port", "url", "cmd", "timeout", NULL };
	json_t *port = json_object_get(v, "port"), *url = json_object_get(v, "url"), *cmd = json_object_get(v, "cmd");
	double timeout = 30;
	if (!json_is_object(v))
		return err_set(err, COVE_EINVAL,
			       "'ready' must be an object: {\"port\": N}, {\"url\": U} or {\"cmd\": C}");
	if (check_fields(v, fields, err) < 0 || get_number(v, "timeout", 0.1, READY_MAX_TIMEOUT, &timeout, err) < 0)
		return -1;
	if ((port != NULL) + (url != NULL) + (cmd != NULL) != 1)
		return err_set(err, COVE_EINVAL, "'ready' needs exactly one of 'port', 'url' and 'cmd'");
	json_t *r = json_pack("{s:f}", "timeout", timeout), *argv = NULL;
	if (port && (!json_is_integer(port) || json_integer_value(port) < 1 || json_integer_value(port) > 65535)) {
		json_decref(r);
		return err_set(err, COVE_EINVAL, "'ready' 'port' must be an integer from 1 to 65535");
	}
	if (url && (json_is_string(url) ? launch_check_url(json_string_value(url), err)
					: err_set(err, COVE_EINVAL, "'ready' 'url' must be a string")) < 0) {
		json_decref(r);
		return -1;
	}
	if (cmd && get_argv(cmd, "ready.cmd", &argv, err) < 0) {
		json_decref(r);
		return -1;
	}
	json_object_set(r, port ? "port" : url ? "url" : "cmd", port ? port : url ? url : argv);
	json_decref(argv);
	*ret = r;
	return 0;
}

int api_parse_launch(json_t *j, struct sandbox_spec *s, struct cove_err *err)
{
	json_t *start = json_object_get(j, "start"), *ready = json_object_get(j, "ready");
	if (start && !json_is_null(start) && get_argv(start, "start", &s->start, err) < 0)
		return -1;
	if (ready && !json_is_null(ready) && parse_ready(ready, &s->ready, err) < 0)
		return -1;
	if ((s->start || s->ready) && s->external)
		return err_set(err, COVE_EINVAL, "an external sandbox has no start command nor readiness check");
	return 0;
}

/* ---- what a create inherits ---- */

/* The fields of a create that a snapshot's spec gives a template made from
 * it: the sandbox as it was, under whatever the template says. */
static json_t *snapshot_base(const char *id)
{
	static const char *const keys[] = { "image",     "memory",      "cpus",    "pids",      "env",
					    "cwd",       "user",        "network", "allow_out", "deny_out",
					    "isolation", "inherit_env", "start",   "ready",     NULL };
	const struct snapshot *sn = id && *id ? snapshot_find(engine_ctx, id) : NULL;
	json_t *base = json_object();
	for (int i = 0; sn && keys[i]; i++) {
		json_t *v = json_object_get(sn->spec, keys[i]);
		if (v && !json_is_null(v))
			json_object_set(base, keys[i], v);
	}
	return base;
}

/* over's create fields onto base: env is merged name by name, the others
 * replace base's. Others than create fields are left out. */
static void merge_onto(json_t *base, json_t *over)
{
	const char *k;
	json_t *v;
	json_object_foreach(over, k, v)
	{
		json_t *have = json_object_get(base, k);
		if (strcmp(k, "template") == 0 || !api_spec_field_known(k))
			continue;
		if (strcmp(k, "env") == 0 && json_is_object(have) && json_is_object(v)) {
			json_t *env = json_deep_copy(have);
			json_object_update(env, v);
			json_object_set_new(base, k, env);
		} else {
			json_object_set(base, k, v);
		}
	}
}

int api_template_merge(json_t *j, struct template **ret, json_t **merged, struct cove_err *err)
{
	const char *name = NULL;
	*ret = NULL;
	if (get_string(j, "template", &name, 63, err) < 0)
		return -1;
	if (!name) {
		*merged = json_incref(j);
		return 0;
	}
	struct template *t = template_lookup(engine_ctx, name, err);
	if (!t)
		return -1;
	/* What the request has that a create does not know is refused by the
	 * parse of what comes out: merge_onto leaves it out, so look first. */
	const char *k;
	json_t *v;
	json_object_foreach(j, k, v)
	{
		if (strcmp(k, "template") != 0 && !api_spec_field_known(k))
			return err_set(err, COVE_EINVAL, "unknown field '%s'", k);
	}
	json_t *m = snapshot_base(t->snapshot);
	merge_onto(m, t->body);
	merge_onto(m, j);
	*ret = t;
	*merged = m;
	return 0;
}

/* ---- the answer of a create ---- */

struct launching {
	struct http_output ho;
	char id[16];
	bool answered;
	const struct api_answer *answer;
};

static void cove_ok(struct http_req *req, struct sandbox *sb)
{
	reply_json(req, 201, sandbox_to_json(sb));
}

static const struct api_answer cove_answer = { .ok = cove_ok, .fail = reply_error };

static void launching_encode(struct http_output *ho, const struct out_event *ev)
{
}

static void launching_finish(struct http_output *ho, const struct cove_err *err)
{
	struct launching *c = ho->arg;
	struct sandbox *sb = sandbox_find(engine_ctx, c->id);
	struct cove_err e = { 0 };
	c->answered = true;
	if (!ho->req)
		return;
	if (!err && sb && sb->spec.ephemeral && ephemeral_add(http_req_conn(ho->req), sb->id) < 0)
		err = &e, err_set(&e, COVE_EINTERNAL, "out of memory");
	if (!err && sb) {
		c->answer->ok(ho->req, sb);
	} else {
		if (sb)
			(void)sandbox_delete(engine_ctx, sb, NULL);
		if (!err)
			err_set(&e, COVE_ESTATE, "sandbox %s went away before it was ready", c->id), err = &e;
		c->answer->fail(ho->req, err);
	}
	ho->req = NULL;
}

/* The client went before the answer: nobody will have the sandbox. */
static void launching_free(struct http_output *ho)
{
	struct launching *c = ho->arg;
	struct sandbox *sb = c->answered ? NULL : sandbox_find(engine_ctx, c->id);
	if (sb)
		(void)sandbox_delete(engine_ctx, sb, NULL);
	free(c);
}

static const struct http_output_route launching_route = {
	.encode = launching_encode,
	.finish = launching_finish,
	.free = launching_free,
	.watch_hangup = true,
};

int api_created(struct http_req *req, struct sandbox *sb, bool pooled, struct cove_err *err)
{
	return api_created_as(req, sb, pooled, &cove_answer, err);
}

int api_created_as(struct http_req *req, struct sandbox *sb, bool pooled, const struct api_answer *answer,
		   struct cove_err *err)
{
	if (!pooled && launch_needed(sb)) {
		struct launching *c = calloc(1, sizeof(*c));
		int r = c ? http_output_init(&c->ho, req, &launching_route, c, err)
			  : err_set(err, COVE_EINTERNAL, "out of memory");
		if (c) {
			snprintf(c->id, sizeof(c->id), "%s", sb->id);
			c->answer = answer;
		}
		if (r == 0 && (r = launch_start(engine_ctx, sb, &c->ho.out, err)) < 0)
			http_output_abandon(&c->ho);
		if (r < 0) {
			free(c);
			(void)sandbox_delete(engine_ctx, sb, NULL);
		}
		return r;
	}
	/* Tied to the connection before the answer: a client gone by now
	 * takes the sandbox with it. */
	if (sb->spec.ephemeral && ephemeral_add(http_req_conn(req), sb->id) < 0) {
		(void)sandbox_delete(engine_ctx, sb, NULL);
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	answer->ok(req, sb);
	return 0;
}

/* ---- the routes ---- */

static bool template_name_valid(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 63 || s[0] == '.' || s[0] == '-')
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

/* The template's own fields, checked; the rest must be a create's. */
static int parse_template_fields(json_t *j, const char **name, const char **snapshot, int *warm, struct cove_err *err)
{
	static const char *const own[] = { "name", "from_snapshot", "warm", "disk", "idle_timeout", NULL };
	const char *k;
	json_t *v, *w = json_object_get(j, "warm");
	uint64_t disk = 0;
	double idle = 1;
	json_object_foreach(j, k, v)
	{
		bool mine = false;
		for (int i = 0; own[i] && !mine; i++)
			mine = strcmp(k, own[i]) == 0;
		if (!mine && (!api_spec_field_known(k) || strcmp(k, "ephemeral") == 0 || strcmp(k, "template") == 0))
			return err_set(err, COVE_EINVAL, "unknown field '%s'", k);
	}
	if (get_string(j, "name", name, 63, err) < 0 || get_string(j, "from_snapshot", snapshot, 15, err) < 0 ||
	    get_size(j, "disk", &disk, err) < 0 ||
	    get_number(j, "idle_timeout", 1, API_MAX_IDLE_TIMEOUT, &idle, err) < 0)
		return -1;
	if (!*name || !template_name_valid(*name))
		return err_set(err, COVE_EINVAL, "'name' must be 1 to 63 letters, digits, '_', '.' or '-' (not first)");
	if (w && !json_is_null(w) &&
	    (!json_is_integer(w) || json_integer_value(w) < 0 || json_integer_value(w) > TEMPLATE_MAX_WARM))
		return err_set(err, COVE_EINVAL, "'warm' must be an integer from 0 to %d", TEMPLATE_MAX_WARM);
	*warm = json_is_integer(w) ? (int)json_integer_value(w) : 0;
	if (**snapshot && !snapshot_find(engine_ctx, *snapshot))
		return err_set(err, COVE_ENOTFOUND, "no snapshot '%s'", *snapshot);
	if (**snapshot && json_object_get(j, "image"))
		return err_set(err, COVE_EINVAL, "a template from a snapshot has the snapshot's image: no 'image'");
	return 0;
}

int h_template_create(struct http_req *req, const char *id, struct cove_err *err)
{
	json_t *j = read_body(req, err);
	const char *name = "", *snapshot = "";
	int warm = 0;
	struct sandbox_spec spec = { 0 };
	struct template *t;
	if (!j || parse_template_fields(j, &name, &snapshot, &warm, err) < 0) {
		json_decref(j);
		return -1;
	}
	/* What the template's sandboxes are made with: checked as a create. */
	json_t *body = json_deep_copy(j), *merged = snapshot_base(snapshot);
	json_object_del(body, "name");
	json_object_del(body, "from_snapshot");
	json_object_del(body, "warm");
	merge_onto(merged, body);
	int r = api_parse_spec(merged, &spec, err);
	if (r == 0)
		r = template_add(engine_ctx, name, body, snapshot, warm, &spec, &t, err);
	sandbox_spec_free(&spec);
	json_decref(merged);
	json_decref(body);
	json_decref(j);
	if (r < 0)
		return -1;
	reply_json(req, 201, template_to_json(t));
	return 0;
}

int h_template_list(struct http_req *req, const char *id, struct cove_err *err)
{
	json_t *a = json_array();
	for (const struct template *t = engine_ctx->templates; t; t = t->next)
		json_array_append_new(a, template_to_json(t));
	reply_json(req, 200, json_pack("{s:o}", "templates", a));
	return 0;
}

int h_template_get(struct http_req *req, const char *id, struct cove_err *err)
{
	struct template *t = template_lookup(engine_ctx, id, err);
	if (!t)
		return -1;
	reply_json(req, 200, template_to_json(t));
	return 0;
}

int h_template_delete(struct http_req *req, const char *id, struct cove_err *err)
{
	struct template *t = template_lookup(engine_ctx, id, err);
	if (!t || template_delete(engine_ctx, t, err) < 0)
		return -1;
	reply_json(req, 200, json_pack("{s:s, s:b}", "name", id, "deleted", 1));
	return 0;
}

/* The HTTP/JSON API: a route table, request validation, error shapes.
 * Bad input is refused before anything is changed: every field is checked,
 * unknown fields included, and only then does a handler act. */
#include <event2/buffer.h>
#include "daemon/http/httpd.h"
#include <event2/keyvalq_struct.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/encoding.h"
#include "common/parse.h"
#include "daemon/api/api.h"
#include "daemon/api/files.h"
#include "daemon/daemon.h"
#include "daemon/api/reply.h"
#include "daemon/api/request.h"
#include "daemon/http/access.h"
#include "engine/engine.h"

#define API_DEFAULT_MAX_OUTPUT (16u << 20)
#define API_MAX_STDIN (64u << 20)


static int check_env(json_t *env, struct cove_err *err)
{
	if (!env || json_is_null(env))
		return 0;
	if (!json_is_object(env))
		return err_set(err, COVE_EINVAL, "'env' must be an object of strings");
	const char *k;
	json_t *v;
	json_object_foreach(env, k, v)
	{
		if (!env_name_valid(k))
			return err_set(err, COVE_EINVAL, "bad environment variable name '%s'", k);
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return err_set(err, COVE_EINVAL, "environment variable '%s' must be a string", k);
	}
	return 0;
}

/* "memory": bytes as a number or a string like "512M". */
static int get_size(json_t *j, const char *key, uint64_t *ret, struct cove_err *err)
{
	json_t *v = json_object_get(j, key);
	if (!v || json_is_null(v))
		return 0;
	if (json_is_integer(v) && json_integer_value(v) > 0) {
		*ret = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (json_is_string(v) && parse_size(json_string_value(v), ret) == 0 && *ret > 0)
		return 0;
	return err_set(err, COVE_EINVAL, "'%s' must be a positive size (bytes, or like \"512M\")", key);
}

#define API_MAX_TIMEOUT (30 * 86400) /* seconds */

/* "timeout": seconds from now, > 0 and at most 30 days, as a deadline in
 * unix ms (*ret untouched when absent). */
static int get_deadline(json_t *j, int64_t *ret, struct cove_err *err)
{
	json_t *v = json_object_get(j, "timeout");
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_number(v) || !(json_number_value(v) > 0) || json_number_value(v) > API_MAX_TIMEOUT)
		return err_set(err, COVE_EINVAL, "'timeout' must be a number of seconds above 0 and at most %d",
			       API_MAX_TIMEOUT);
	int64_t ms = (int64_t)(json_number_value(v) * 1000 + 0.5);
	*ret = sandbox_now_ms() + (ms > 0 ? ms : 1);
	return 0;
}

/* "isolation": "isolated" (the default) or "external", the host backend,
 * which must be asked for by name: its commands run on the host as root,
 * with nothing between them and it. "inherit_env" only goes with it. */
static int parse_isolation(json_t *j, struct sandbox_spec *s, struct cove_err *err)
{
	const char *isolation = "isolated";
	if (get_string(j, "isolation", &isolation, 15, err) < 0 || get_bool(j, "inherit_env", &s->inherit_env, err) < 0)
		return -1;
	if (strcmp(isolation, "external") != 0 && strcmp(isolation, "isolated") != 0)
		return err_set(err, COVE_EINVAL, "'isolation' must be \"isolated\" or \"external\", not \"%s\"",
			       isolation);
	s->external = strcmp(isolation, "external") == 0;
	if (s->inherit_env && !s->external)
		return err_set(err, COVE_EINVAL, "'inherit_env' is only for \"isolation\": \"external\"");
	json_t *image = json_object_get(j, "image");
	if (s->external && image && !json_is_null(image))
		return err_set(err, COVE_EINVAL,
			       "an external sandbox has no 'image': its commands see the host's files");
	return 0;
}

static int parse_spec(json_t *j, struct sandbox_spec *s, struct cove_err *err)
{
	static const char *const fields[] = { "name", "image",   "memory",    "cpus",      "pids",        "env", "cwd",
					      "user", "timeout", "ephemeral", "isolation", "inherit_env", NULL };
	const char *name = "", *image = "host", *cwd = "", *user = "";
	double cpus = 1, pids = 1024;
	s->memory = 512ull << 20;
	if (check_fields(j, fields, err) < 0 || get_string(j, "name", &name, 63, err) < 0 ||
	    get_string(j, "image", &image, 63, err) < 0 || get_string(j, "cwd", &cwd, 1023, err) < 0 ||
	    get_string(j, "user", &user, 63, err) < 0 || get_size(j, "memory", &s->memory, err) < 0 ||
	    get_number(j, "cpus", 0.01, 1024, &cpus, err) < 0 || get_number(j, "pids", 16, 1 << 22, &pids, err) < 0 ||
	    check_env(json_object_get(j, "env"), err) < 0 || get_deadline(j, &s->expires_at, err) < 0 ||
	    get_bool(j, "ephemeral", &s->ephemeral, err) < 0 || parse_isolation(j, s, err) < 0)
		return -1;
	if (s->external)
		image = "";
	if (s->memory < (16u << 20))
		return err_set(err, COVE_EINVAL, "'memory' must be at least 16M");
	if (!s->external && (strchr(image, '/') || image[0] == '.' || !image[0]))
		return err_set(err, COVE_EINVAL, "bad image name '%s'", image);
	if (*cwd && *cwd != '/')
		return err_set(err, COVE_EINVAL, "'cwd' must be an absolute path");
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->image, sizeof(s->image), "%s", image);
	snprintf(s->cwd, sizeof(s->cwd), "%s", cwd);
	snprintf(s->user, sizeof(s->user), "%s", user);
	s->cpu_millis = (uint32_t)(cpus * 1000 + 0.5);
	s->pids = (uint32_t)pids;
	json_t *env = json_object_get(j, "env");
	s->env = json_is_object(env) ? json_deep_copy(env) : json_object();
	return 0;
}

static int parse_argv(json_t *cmd, json_t **ret, struct cove_err *err)
{
	if (json_is_string(cmd)) {
		if (json_string_length(cmd) == 0 || strlen(json_string_value(cmd)) != json_string_length(cmd))
			return err_set(err, COVE_EINVAL, "'cmd' must not be empty or hold NUL bytes");
		*ret = json_pack("[s, s, O]", "/bin/sh", "-c", cmd);
		return 0;
	}
	if (!json_is_array(cmd) || json_array_size(cmd) == 0)
		return err_set(err, COVE_EINVAL, "'cmd' must be a non-empty array of strings, or a shell string");
	size_t i;
	json_t *v;
	json_array_foreach(cmd, i, v)
	{
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return err_set(err, COVE_EINVAL, "'cmd' must hold only strings without NUL bytes");
	}
	if (json_string_length(json_array_get(cmd, 0)) == 0)
		return err_set(err, COVE_EINVAL, "'cmd' must not start with an empty string");
	*ret = json_incref(cmd);
	return 0;
}

static int parse_stdin(json_t *j, struct exec_request *er, unsigned char **store, struct cove_err *err)
{
	json_t *text = json_object_get(j, "stdin"), *b64 = json_object_get(j, "stdin_b64");
	if (text && b64)
		return err_set(err, COVE_EINVAL, "give 'stdin' or 'stdin_b64', not both");
	if (text) {
		if (!json_is_string(text))
			return err_set(err, COVE_EINVAL, "'stdin' must be a string");
		er->stdin_data = (const unsigned char *)json_string_value(text);
		er->stdin_len = json_string_length(text);
		er->has_stdin = true;
	} else if (b64) {
		if (!json_is_string(b64))
			return err_set(err, COVE_EINVAL, "'stdin_b64' must be a base64 string");
		*store = malloc(json_string_length(b64) / 4 * 3 + 3);
		if (!*store)
			return err_set(err, COVE_EINTERNAL, "out of memory");
		long n = base64_decode(json_string_value(b64), json_string_length(b64), *store);
		if (n < 0)
			return err_set(err, COVE_EINVAL, "'stdin_b64' is not valid base64");
		er->stdin_data = *store;
		er->stdin_len = (size_t)n;
		er->has_stdin = true;
	}
	if (er->stdin_len > API_MAX_STDIN)
		return err_set(err, COVE_ETOOBIG, "stdin is larger than %u bytes", API_MAX_STDIN);
	return 0;
}

/* Handlers: id is the {id} segment or NULL. Return 0 when a reply was (or
 * will be) sent, -1 with err set otherwise. */
typedef int (*handler_fn)(struct http_req *req, const char *id, struct cove_err *err);

static int h_health(struct http_req *req, const char *id, struct cove_err *err)
{
	reply_json(req, 200, json_pack("{s:s, s:i}", "status", "ok", "sandboxes", engine_ctx->count));
	return 0;
}

/* One backend's entry: what selects it, and its capabilities (DESIGN.md:
 * ports, nativeSnapshot for memory snapshots, resume; none yet). */
static json_t *backend_json(const char *isolation, bool os_boundary)
{
	return json_pack("{s:s, s:b, s:{s:b, s:b, s:b}}", "isolation", isolation, "os_boundary", os_boundary,
			 "capabilities", "ports", 0, "nativeSnapshot", 0, "resume", 0);
}

static int h_capabilities(struct http_req *req, const char *id, struct cove_err *err)
{
	struct engine *d = engine_ctx;
	const char *storage = storage_driver_name(d->pool.driver);
	json_t *j =
		json_pack("{s:s, s:s, s:s, s:{s:b, s:b, s:b}, s:[s], s:b}", "backend", "isolated", "storage", storage,
			  "cgroups", d->cgroups.mode == CGROUP_V2 ? "v2" : "v1", "capabilities", "ports", 0,
			  "nativeSnapshot", 0, "resume", 0, "images", "host", "pool_loop_backed", d->pool.loop_backed);
	json_object_set_new(j, "backends",
			    json_pack("{s:o, s:o}", "isolated", backend_json("isolated", true), "host",
				      backend_json("external", false)));
	reply_json(req, 200, j);
	return 0;
}

static int h_create(struct http_req *req, const char *id, struct cove_err *err)
{
	json_t *j = read_body(req, err);
	struct sandbox_spec spec = { 0 };
	struct sandbox *sb;
	int r = j ? parse_spec(j, &spec, err) : -1;
	json_decref(j);
	if (r == 0)
		r = sandbox_create(engine_ctx, &spec, NULL, &sb, err);
	sandbox_spec_free(&spec);
	if (r < 0)
		return -1;
	/* Tied to the connection before the answer: a client gone by now
	 * takes the sandbox with it. */
	if (sb->spec.ephemeral && conn_add_ephemeral(http_req_conn(req), sb->id) < 0) {
		(void)sandbox_delete(engine_ctx, sb, NULL);
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	reply_json(req, 201, sandbox_to_json(sb));
	return 0;
}

static int h_list(struct http_req *req, const char *id, struct cove_err *err)
{
	json_t *a = json_array();
	for (int i = 0; i < MAX_SANDBOXES; i++)
		if (engine_ctx->sandboxes[i] && engine_ctx->sandboxes[i]->state != SB_DELETING)
			json_array_append_new(a, sandbox_to_json(engine_ctx->sandboxes[i]));
	reply_json(req, 200, json_pack("{s:o}", "sandboxes", a));
	return 0;
}

static struct sandbox *lookup(const char *id, struct cove_err *err)
{
	return sandbox_lookup(engine_ctx, id, err);
}

static int h_get(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb = lookup(id, err);
	if (!sb)
		return -1;
	reply_json(req, 200, sandbox_to_json(sb));
	return 0;
}

static int h_delete(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb = lookup(id, err);
	if (!sb || sandbox_delete(engine_ctx, sb, err) < 0)
		return -1;
	reply_json(req, 200, json_pack("{s:s, s:b}", "id", id, "deleted", 1));
	return 0;
}

static int h_timeout(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "timeout", NULL };
	struct sandbox *sb = lookup(id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	int64_t deadline = 0;
	int r = check_fields(j, fields, err) < 0 || get_deadline(j, &deadline, err) < 0 ? -1 : 0;
	json_decref(j);
	if (r == 0 && !deadline)
		r = err_set(err, COVE_EINVAL, "'timeout' is required");
	if (r == 0)
		r = sandbox_set_expiry(engine_ctx, sb, deadline, err);
	if (r < 0)
		return -1;
	reply_json(req, 200, sandbox_to_json(sb));
	return 0;
}

static int h_exec(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "cmd",     "env",    "cwd",        "user",       "stdin", "stdin_b64",
					      "timeout", "stream", "max_output", "background", "tag",   "tty",
					      "rows",    "cols",   "stdin_open", "session",    NULL };
	struct sandbox *sb = lookup(id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	struct exec_request er = { .max_output = API_DEFAULT_MAX_OUTPUT };
	_cleanup_free_ unsigned char *stdin_store = NULL;
	double max_output = API_DEFAULT_MAX_OUTPUT;
	json_t *stream = json_object_get(j, "stream");
	int r = get_flag(query_of(req), "stream", &er.stream, err);
	if (r == 0)
		r = check_fields(j, fields, err);
	if (r == 0 && stream && !json_is_boolean(stream))
		r = err_set(err, COVE_EINVAL, "'stream' must be a boolean");
	if (r == 0 && !json_object_get(j, "cmd"))
		r = err_set(err, COVE_EINVAL, "'cmd' is required");
	if (r == 0)
		r = parse_argv(json_object_get(j, "cmd"), &er.argv, err);
	er.cmd = json_object_get(j, "cmd");
	if (r == 0 && (check_env(json_object_get(j, "env"), err) < 0 || get_string(j, "cwd", &er.cwd, 4095, err) < 0 ||
		       get_string(j, "user", &er.user, 63, err) < 0 ||
		       get_number(j, "timeout", 0, 86400 * 365, &er.timeout, err) < 0 ||
		       get_number(j, "max_output", 0, 1 << 30, &max_output, err) < 0 ||
		       parse_stdin(j, &er, &stdin_store, err) < 0))
		r = -1;
	double rows = 24, cols = 80;
	const char *session = NULL;
	if (r == 0 && get_string(j, "session", &session, 31, err) < 0)
		r = -1;
	if (r == 0 &&
	    (get_bool(j, "background", &er.background, err) < 0 || get_bool(j, "tty", &er.tty, err) < 0 ||
	     get_bool(j, "stdin_open", &er.stdin_open, err) < 0 || get_string(j, "tag", &er.tag, 63, err) < 0 ||
	     get_number(j, "rows", 1, 9999, &rows, err) < 0 || get_number(j, "cols", 1, 9999, &cols, err) < 0))
		r = -1;
	er.rows = (int)rows;
	er.cols = (int)cols;
	if (r == 0 && er.cwd && *er.cwd != '/')
		r = err_set(err, COVE_EINVAL, "'cwd' must be an absolute path");
	er.env = json_object_get(j, "env");
	if (json_is_null(er.env))
		er.env = NULL;
	er.stream = er.stream || json_is_true(stream);
	er.max_output = (size_t)max_output;
	if (r == 0 && er.tag && !er.background && !er.tty)
		r = err_set(err, COVE_EINVAL, "'tag' is for background or terminal processes");
	if (r == 0 && er.max_output != API_DEFAULT_MAX_OUTPUT && (er.background || er.tty))
		r = err_set(err, COVE_EINVAL, "'max_output' is for collected output, not kept processes");
	if (r == 0 && session)
		r = sessions_exec(sb, req, &er, session, err);
	else if (r == 0 && (er.background || er.tty))
		r = procs_start(sb, req, &er, err);
	else if (r == 0)
		r = exec_start(sb, req, &er, err);
	json_decref(er.argv);
	json_decref(j);
	return r;
}

static int h_snapshot(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "name", "memory", "wait_durable", NULL };
	struct sandbox *sb = lookup(id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	const char *name = "";
	json_t *memory = json_object_get(j, "memory");
	json_t *wait = json_object_get(j, "wait_durable");
	struct snapshot *sn;
	int r = check_fields(j, fields, err) < 0 || get_string(j, "name", &name, 63, err) < 0 ? -1 : 0;
	if (r == 0 && memory && !json_is_boolean(memory))
		r = err_set(err, COVE_EINVAL, "'memory' must be a boolean");
	if (r == 0 && wait && !json_is_boolean(wait))
		r = err_set(err, COVE_EINVAL, "'wait_durable' must be a boolean");
	if (r == 0 && json_is_true(memory))
		r = err_set(err, COVE_EINVAL, "memory snapshots are not supported on this host");
	if (r == 0)
		r = json_is_false(wait) ? snapshot_create_nowait(engine_ctx, sb, name, &sn, err)
					: snapshot_create(engine_ctx, sb, name, &sn, err);
	json_decref(j);
	if (r < 0)
		return -1;
	reply_json(req, 201, snapshot_to_json(sn));
	return 0;
}

static struct snapshot *lookup_snapshot(const char *id, struct cove_err *err)
{
	struct snapshot *sn = snapshot_find(engine_ctx, id);
	if (!sn)
		err_set(err, COVE_ENOTFOUND, "no snapshot '%s'", id ? id : "");
	return sn;
}

static int h_snapshot_list(struct http_req *req, const char *id, struct cove_err *err)
{
	json_t *a = json_array();
	for (const struct snapshot *sn = engine_ctx->snapshots; sn; sn = sn->next)
		json_array_append_new(a, snapshot_to_json(sn));
	reply_json(req, 200, json_pack("{s:o}", "snapshots", a));
	return 0;
}

static int h_snapshot_get(struct http_req *req, const char *id, struct cove_err *err)
{
	struct snapshot *sn = lookup_snapshot(id, err);
	if (!sn)
		return -1;
	reply_json(req, 200, snapshot_to_json(sn));
	return 0;
}

static int h_snapshot_delete(struct http_req *req, const char *id, struct cove_err *err)
{
	struct snapshot *sn = lookup_snapshot(id, err);
	if (!sn || snapshot_delete(engine_ctx, sn, err) < 0)
		return -1;
	reply_json(req, 200, json_pack("{s:s, s:b}", "id", id, "deleted", 1));
	return 0;
}

/* A restore's overrides: name and limits; what is not given stays the
 * snapshot's (0 / "" in o). */
static int parse_overrides(json_t *j, struct sandbox_spec *o, struct cove_err *err)
{
	static const char *const fields[] = { "name", "memory", "cpus", "pids", NULL };
	const char *name = "";
	double cpus = 0, pids = 0;
	if (check_fields(j, fields, err) < 0 || get_string(j, "name", &name, 63, err) < 0 ||
	    get_size(j, "memory", &o->memory, err) < 0 || get_number(j, "cpus", 0.01, 1024, &cpus, err) < 0 ||
	    get_number(j, "pids", 16, 1 << 22, &pids, err) < 0)
		return -1;
	if (o->memory && o->memory < (16u << 20))
		return err_set(err, COVE_EINVAL, "'memory' must be at least 16M");
	snprintf(o->name, sizeof(o->name), "%s", name);
	o->cpu_millis = (uint32_t)(cpus * 1000 + 0.5);
	o->pids = (uint32_t)pids;
	return 0;
}

static int h_restore(struct http_req *req, const char *id, struct cove_err *err)
{
	struct snapshot *sn = lookup_snapshot(id, err);
	json_t *j = sn ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	struct sandbox_spec o = { 0 };
	struct sandbox *sb;
	int r = parse_overrides(j, &o, err);
	json_decref(j);
	if (r == 0)
		r = snapshot_restore(engine_ctx, sn, &o, &sb, err);
	if (r < 0)
		return -1;
	reply_json(req, 201, sandbox_to_json(sb));
	return 0;
}

#define API_MAX_FORK 100

static int h_fork(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "count", NULL };
	struct sandbox *sb = lookup(id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	json_t *count = json_object_get(j, "count");
	json_int_t n = count ? (json_is_integer(count) ? json_integer_value(count) : -1) : 1;
	int r = check_fields(j, fields, err);
	json_decref(j);
	if (r == 0 && (n < 1 || n > API_MAX_FORK))
		r = err_set(err, COVE_EINVAL, "'count' must be an integer from 1 to %d", API_MAX_FORK);
	struct sandbox *copies[API_MAX_FORK];
	if (r == 0)
		r = sandbox_fork(engine_ctx, sb, (int)n, copies, err);
	if (r < 0)
		return -1;
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, sandbox_to_json(copies[i]));
	reply_json(req, 201, json_pack("{s:o}", "sandboxes", a));
	return 0;
}

#define API_DEFAULT_LEASE 30.0 /* seconds */
#define API_MAX_LEASE 3600
#define API_MAX_LOCK_WAIT 3600

/* The fields of a locks request: "name" always and "token" when asked for
 * (both required); "lease" and "wait" when asked for (else left as given). */
static int parse_lock_request(json_t *j, const char *const *fields, const char **name, const char **token,
			      double *lease, double *wait, struct cove_err *err)
{
	if (check_fields(j, fields, err) < 0 || get_string(j, "name", name, LOCK_MAX_NAME, err) < 0 ||
	    (token && get_string(j, "token", token, 64, err) < 0) ||
	    (lease && get_number(j, "lease", 0.001, API_MAX_LEASE, lease, err) < 0) ||
	    (wait && get_number(j, "wait", 0, API_MAX_LOCK_WAIT, wait, err) < 0))
		return -1;
	if (!*name)
		return err_set(err, COVE_EINVAL, "'name' is required");
	if (token && (!*token || !**token))
		return err_set(err, COVE_EINVAL, "'token' is required");
	return 0;
}

static int h_lock_acquire(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "name", "lease", "wait", NULL };
	struct sandbox *sb = lookup(id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	const char *name = NULL;
	double lease = API_DEFAULT_LEASE, wait = 0;
	int r = parse_lock_request(j, fields, &name, NULL, &lease, &wait, err);
	if (r == 0)
		r = lock_acquire(sb, req, name, lease, wait, err);
	json_decref(j);
	return r;
}

static int h_lock_release(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "name", "token", NULL };
	struct sandbox *sb = lookup(id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	const char *name = NULL, *token = NULL;
	int r = parse_lock_request(j, fields, &name, &token, NULL, NULL, err);
	if (r == 0)
		r = lock_release(sb, name, token, err);
	if (r == 0)
		reply_json(req, 200, json_pack("{s:s, s:b}", "name", name, "released", 1));
	json_decref(j);
	return r;
}

static int h_lock_renew(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "name", "token", "lease", NULL };
	struct sandbox *sb = lookup(id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	const char *name = NULL, *token = NULL;
	double lease = API_DEFAULT_LEASE;
	int64_t expires_at = 0;
	int r = parse_lock_request(j, fields, &name, &token, &lease, NULL, err);
	if (r == 0)
		r = lock_renew(sb, name, token, lease, &expires_at, err);
	if (r == 0)
		reply_json(req, 200, json_pack("{s:s, s:I}", "name", name, "expires_at", (json_int_t)expires_at));
	json_decref(j);
	return r;
}

static int h_lock_list(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb = lookup(id, err);
	if (!sb)
		return -1;
	reply_json(req, 200, json_pack("{s:o}", "locks", locks_to_json(sb)));
	return 0;
}

#define API_MAX_LABEL 255

/* Histories (history.c). Their GET, DELETE, rollback and branch take the
 * ID of a deleted sandbox too: its history outlives it. */
static int h_checkpoint(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "label", NULL };
	struct sandbox *sb = lookup(id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	const char *label = "";
	json_t *checkpoint = NULL;
	int r = check_fields(j, fields, err) < 0 || get_string(j, "label", &label, API_MAX_LABEL, err) < 0 ? -1 : 0;
	if (r == 0)
		r = history_checkpoint(engine_ctx, sb, label, &checkpoint, err);
	json_decref(j);
	if (r < 0)
		return -1;
	reply_json(req, 201, checkpoint);
	return 0;
}

static int h_history(struct http_req *req, const char *id, struct cove_err *err)
{
	json_t *h;
	if (history_get(engine_ctx, id, &h, err) < 0)
		return -1;
	reply_json(req, 200, h);
	return 0;
}

static int h_history_delete(struct http_req *req, const char *id, struct cove_err *err)
{
	json_t *answer;
	if (history_delete(engine_ctx, id, &answer, err) < 0)
		return -1;
	reply_json(req, 200, answer);
	return 0;
}

/* The body of a rollback or a branch: "seq", required, and "count" (1 to
 * API_MAX_FORK) when count is not NULL. */
static int parse_history_point(json_t *j, int *seq, int *count, struct cove_err *err)
{
	static const char *const rollback_fields[] = { "seq", NULL };
	static const char *const branch_fields[] = { "seq", "count", NULL };
	json_t *s = json_object_get(j, "seq"), *n = json_object_get(j, "count");
	if (check_fields(j, count ? branch_fields : rollback_fields, err) < 0)
		return -1;
	if (!s)
		return err_set(err, COVE_EINVAL, "'seq' is required: the number of a checkpoint");
	if (!json_is_integer(s) || json_integer_value(s) < 1 || json_integer_value(s) > INT32_MAX)
		return err_set(err, COVE_EINVAL, "'seq' must be a checkpoint's number, an integer from 1");
	*seq = (int)json_integer_value(s);
	if (n && (!json_is_integer(n) || json_integer_value(n) < 1 || json_integer_value(n) > API_MAX_FORK))
		return err_set(err, COVE_EINVAL, "'count' must be an integer from 1 to %d", API_MAX_FORK);
	if (n)
		*count = (int)json_integer_value(n);
	return 0;
}

static int h_rollback(struct http_req *req, const char *id, struct cove_err *err)
{
	json_t *j = read_body(req, err);
	int seq = 0;
	struct sandbox *sb;
	int r = j ? parse_history_point(j, &seq, NULL, err) : -1;
	json_decref(j);
	if (r < 0 || history_restore(engine_ctx, id, seq, "rollback", 1, &sb, err) < 0)
		return -1;
	reply_json(req, 201, sandbox_to_json(sb));
	return 0;
}

static int h_branch(struct http_req *req, const char *id, struct cove_err *err)
{
	json_t *j = read_body(req, err);
	int seq = 0, count = 1;
	struct sandbox *made[API_MAX_FORK];
	int r = j ? parse_history_point(j, &seq, &count, err) : -1;
	json_decref(j);
	if (r < 0 || history_restore(engine_ctx, id, seq, "branch", count, made, err) < 0)
		return -1;
	json_t *a = json_array();
	for (int i = 0; i < count; i++)
		json_array_append_new(a, sandbox_to_json(made[i]));
	reply_json(req, 201, json_pack("{s:o}", "sandboxes", a));
	return 0;
}

/* A streaming route's handler is called at the end of the request's
 * headers and takes the body as it comes (http_req_take_body); the others
 * get the body whole, within --max-body-bytes. */
#define STREAMING (1u << 16)
#define METHOD_OF(route) ((route)->method & ~STREAMING)

static const struct route {
	unsigned method;     /* an enum http_method, | STREAMING */
	const char *pattern; /* fnmatch; '*' is the {id} segment */
	handler_fn fn;
} routes[] = {
	{ HTTP_GET, "/v1/health", h_health },
	{ HTTP_GET, "/v1/capabilities", h_capabilities },
	{ HTTP_POST, "/v1/sandboxes", h_create },
	{ HTTP_GET, "/v1/sandboxes", h_list },
	{ HTTP_GET, "/v1/sandboxes/*", h_get },
	{ HTTP_DELETE, "/v1/sandboxes/*", h_delete },
	{ HTTP_POST, "/v1/sandboxes/*/exec", h_exec },
	{ HTTP_POST, "/v1/sandboxes/*/timeout", h_timeout },
	{ HTTP_GET, "/v1/sandboxes/*/files", api_files_get },
	{ HTTP_PUT | STREAMING, "/v1/sandboxes/*/files", api_files_put },
	{ HTTP_DELETE, "/v1/sandboxes/*/files", api_files_delete },
	{ HTTP_POST, "/v1/sandboxes/*/files/mkdir", api_files_mkdir },
	{ HTTP_POST, "/v1/sandboxes/*/files/move", api_files_move },
	{ HTTP_POST, "/v1/sandboxes/*/snapshots", h_snapshot },
	{ HTTP_POST, "/v1/sandboxes/*/fork", h_fork },
	{ HTTP_GET, "/v1/snapshots", h_snapshot_list },
	{ HTTP_GET, "/v1/snapshots/*", h_snapshot_get },
	{ HTTP_DELETE, "/v1/snapshots/*", h_snapshot_delete },
	{ HTTP_POST, "/v1/snapshots/*/restore", h_restore },
	{ HTTP_GET, "/v1/sandboxes/*/processes", procs_list },
	{ HTTP_GET, "/v1/sandboxes/*/processes/*", procs_get },
	{ HTTP_GET, "/v1/sandboxes/*/processes/*/attach", procs_attach },
	{ HTTP_POST, "/v1/sandboxes/*/processes/*/stdin", procs_stdin },
	{ HTTP_POST, "/v1/sandboxes/*/processes/*/signal", procs_signal },
	{ HTTP_POST, "/v1/sandboxes/*/processes/*/resize", procs_resize },
	{ HTTP_POST, "/v1/sandboxes/*/sessions", sessions_create },
	{ HTTP_GET, "/v1/sandboxes/*/sessions", sessions_list },
	{ HTTP_DELETE, "/v1/sandboxes/*/sessions/*", sessions_delete },
	{ HTTP_POST, "/v1/sandboxes/*/locks", h_lock_acquire },
	{ HTTP_GET, "/v1/sandboxes/*/locks", h_lock_list },
	{ HTTP_POST, "/v1/sandboxes/*/locks/release", h_lock_release },
	{ HTTP_POST, "/v1/sandboxes/*/locks/renew", h_lock_renew },
	{ HTTP_POST, "/v1/sandboxes/*/files/chmod", api_files_chmod },
	{ HTTP_GET, "/v1/sandboxes/*/files/tar", api_files_tar_get },
	{ HTTP_PUT | STREAMING, "/v1/sandboxes/*/files/tar", api_files_tar_put },
	{ HTTP_POST, "/v1/sandboxes/*/checkpoints", h_checkpoint },
	{ HTTP_GET, "/v1/sandboxes/*/checkpoints", h_history },
	{ HTTP_DELETE, "/v1/sandboxes/*/checkpoints", h_history_delete },
	{ HTTP_POST, "/v1/sandboxes/*/rollback", h_rollback },
	{ HTTP_POST, "/v1/sandboxes/*/branch", h_branch },
	{ HTTP_GET, "/v1/sandboxes/*/files/watch", api_files_watch },
	{ HTTP_GET, "/v1/sandboxes/*/export", api_export_get },
	{ HTTP_GET, "/v1/sandboxes/*/snapshot.json", api_portable_get },
	{ HTTP_POST, "/v1/sandboxes/*/snapshot.json", api_portable_post },
};

/* The route of req's method and path, or NULL. */
static const struct route *route_of(struct http_req *req, const char *path)
{
	for (size_t i = 0; path && i < ARRAY_SIZE(routes); i++)
		if (METHOD_OF(&routes[i]) == http_req_method(req) &&
		    fnmatch(routes[i].pattern, path, FNM_PATHNAME) == 0)
			return &routes[i];
	return NULL;
}

bool api_streams(struct http_req *req)
{
	const struct route *r = route_of(req, http_req_path(req));
	return r && (r->method & STREAMING);
}

void api_handle(struct http_req *req)
{
	struct cove_err err = { 0 };
	const char *path = http_req_path(req);
	bool path_known = false;
	daemon_ctx->requests++;
	if (!access_request_begin(req))
		return;
	for (size_t i = 0; path && i < ARRAY_SIZE(routes); i++) {
		if (fnmatch(routes[i].pattern, path, FNM_PATHNAME) != 0)
			continue;
		path_known = true;
		if (METHOD_OF(&routes[i]) != http_req_method(req))
			continue;
		/* The {id} segment: the pattern's text before '*' matched
		 * literally, so it starts at the same offset in path. */
		char id[64] = "";
		const char *star = strchr(routes[i].pattern, '*');
		if (star)
			sscanf(path + (star - routes[i].pattern), "%63[^/]", id);
		if (routes[i].fn(req, id[0] ? id : NULL, &err) < 0)
			reply_error(req, &err);
		return;
	}
	if (path_known)
		err_set(&err, COVE_EINVAL, "method not allowed on '%s'", path);
	else
		err_set(&err, COVE_ENOTFOUND, "no route '%s'", path ? path : "");
	reply_error(req, &err);
}

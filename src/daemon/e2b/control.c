/* E2B's control plane: sandboxes created, listed, described, extended and
 * killed, in the answers E2B's SDK takes (../shared/e2b-protocol.md,
 * section 4). Its "domain" is the port proxy's, with its port, so that the
 * SDK's getHost(port) names a host the proxy routes (PORT-ID.DOMAIN:PORT).
 * A template is a cove image, any name the engine takes (and
 * refuses: an unknown one is a 400); E2B's 'base' is cove's 'host' image
 * with E2B's user 'user' (made in the new root by the engine at its
 * create, sandbox_user_make, when the image has none). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "daemon/api/api.h"
#include "daemon/api/request.h"
#include "daemon/e2b/e2b_private.h"
#include "engine/engine.h"
#include "engine/network.h"
#include "engine/template.h"

#define E2B_DEFAULT_TIMEOUT 300 /* seconds, E2B's */
#define E2B_MAX_TIMEOUT (30 * 86400)
#define E2B_MAX_FORK 100

const char *e2b_template_of(const struct sandbox *sb)
{
	bool base = strcmp(sb->spec.image, "host") == 0 && strcmp(sb->spec.user, E2B_USER) == 0;
	return sb->spec.template[0] ? sb->spec.template : base ? "base" : sb->spec.image;
}

/* The SDK's Sandbox (full: create, connect) or ListedSandbox / info. */
json_t *e2b_sandbox_json(const struct sandbox *sb, bool with_token)
{
	char token[64], started[32], end[32];
	e2b_envd_token(sb, token);
	e2b_iso_time(sb->spec.created_at, started);
	e2b_iso_time(sb->spec.expires_at, end);
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s}", "sandboxID", sb->id, "templateID", e2b_template_of(sb),
			      "alias", e2b_template_of(sb), "clientID", "cove", "envdVersion", E2B_ENVD_VERSION);
	char domain[160];
	if (e2b_proxy_domain(domain, sizeof(domain)))
		json_object_set_new(j, "domain", json_string(domain));
	if (with_token) {
		json_object_set_new(j, "envdAccessToken", json_string(token));
		json_object_set_new(j, "trafficAccessToken", json_null());
		return j;
	}
	uint32_t cpus = sb->spec.cpu_millis / 1000;
	json_object_set_new(j, "startedAt", json_string(started));
	json_object_set_new(j, "endAt", sb->spec.expires_at ? json_string(end) : json_null());
	json_object_set_new(j, "cpuCount", json_integer(cpus ? cpus : 1));
	json_object_set_new(j, "memoryMB", json_integer((json_int_t)(sb->spec.memory >> 20)));
	json_object_set_new(j, "diskSizeMB", json_integer((json_int_t)(sb->spec.disk >> 20)));
	json_object_set_new(j, "metadata", sb->spec.metadata ? json_deep_copy(sb->spec.metadata) : json_object());
	json_object_set_new(j, "state", json_string(sb->state == SB_RUNNING ? "running" : "paused"));
	json_object_set_new(j, "lifecycle",
			    json_pack("{s:b, s:s}", "autoResume", 1, "onTimeout",
				      sb->spec.on_timeout == SB_ON_TIMEOUT_DELETE ? "kill" : "pause"));
	if (json_array_size(sb->spec.allow_out) || json_array_size(sb->spec.deny_out))
		json_object_set_new(j, "network",
				    json_pack("{s:o, s:o}", "allowOut",
					      sb->spec.allow_out ? json_deep_copy(sb->spec.allow_out) : json_array(),
					      "denyOut",
					      sb->spec.deny_out ? json_deep_copy(sb->spec.deny_out) : json_array()));
	return j;
}

static int get_timeout(json_t *j, int64_t *ret, struct cove_err *err)
{
	double t = *ret;
	if (get_number(j, "timeout", 1, E2B_MAX_TIMEOUT, &t, err) < 0)
		return -1;
	*ret = (int64_t)t;
	return 0;
}

/* metadata: an object of strings. */
static int check_metadata(json_t *m, struct cove_err *err)
{
	const char *k;
	json_t *v;
	if (!m || json_is_null(m))
		return 0;
	if (!json_is_object(m))
		return err_set(err, COVE_EINVAL, "'metadata' must be an object of strings");
	json_object_foreach(m, k, v)
	{
		if (!json_is_string(v) || strlen(k) > 256 || json_string_length(v) > 4096)
			return err_set(err, COVE_EINVAL, "'metadata' must map keys to strings (at most 4096 bytes)");
	}
	return 0;
}

/* What coved cannot do yet is refused, not ignored. */
static int check_unsupported(json_t *j, struct cove_err *err)
{
	json_t *mounts = json_object_get(j, "volumeMounts");
	if (json_array_size(mounts) || json_object_get(j, "mcp"))
		return err_set(err, COVE_EINVAL, "'volumeMounts' and 'mcp' are not supported by this coved");
	return 0;
}

/* autoPause (and autoPauseMemory) as what the timeout does: delete
 * ("kill"), pause, or with autoPauseMemory false archive (files only).
 * autoResume is taken: a paused sandbox wakes at any envd call but
 * /health (lifecycle.h). */
static int parse_lifecycle(json_t *j, struct sandbox_spec *s, struct cove_err *err)
{
	bool pause = false, memory = true, resume = false;
	json_t *ar = json_object_get(j, "autoResume");
	static const char *const ar_fields[] = { "enabled", NULL };
	if (get_bool(j, "autoPause", &pause, err) < 0 || get_bool(j, "autoPauseMemory", &memory, err) < 0)
		return -1;
	if (ar && !json_is_null(ar) &&
	    (!json_is_object(ar) || check_fields(ar, ar_fields, err) < 0 || get_bool(ar, "enabled", &resume, err) < 0))
		return err_set(err, COVE_EINVAL, "'autoResume' must be {\"enabled\": true or false}");
	s->on_timeout = !pause ? SB_ON_TIMEOUT_DELETE : memory ? SB_ON_TIMEOUT_PAUSE : SB_ON_TIMEOUT_ARCHIVE;
	return 0;
}

/* E2B's network options (net: {allowOut, denyOut, allowPublicTraffic},
 * and internet: allow_internet_access) as cove's egress policy, whose
 * semantics are E2B's (net/policy.h): the lists as they are, and
 * allow_internet_access false denies every destination but allowOut's. */
static int network_lists(json_t *net, json_t *internet, json_t **allow, json_t **deny, struct cove_err *err)
{
	static const char *const fields[] = { "allowOut", "denyOut", "allowPublicTraffic", "allow_internet_access",
					      NULL };
	bool public = true;
	*allow = *deny = NULL;
	if (internet && !json_is_null(internet) && !json_is_boolean(internet))
		return err_set(err, COVE_EINVAL, "'allow_internet_access' must be a boolean");
	if (net && !json_is_null(net) && !json_is_object(net))
		return err_set(err, COVE_EINVAL, "'network' must be an object {allowOut, denyOut}");
	if (json_is_object(net) &&
	    (check_fields(net, fields, err) < 0 || get_bool(net, "allowPublicTraffic", &public, err) < 0))
		return -1;
	if (!public)
		return err_set(err, COVE_EINVAL, "'allowPublicTraffic' false is not supported by this coved");
	if (get_string_list(net, "allowOut", NETWORK_LIST_MAX, allow, err) < 0 ||
	    get_string_list(net, "denyOut", NETWORK_LIST_MAX, deny, err) < 0) {
		json_decref(*allow);
		*allow = NULL;
		return -1;
	}
	if (json_is_false(internet)) {
		json_array_append_new(*deny, json_string("0.0.0.0/0"));
		json_array_append_new(*deny, json_string("::/0"));
	}
	return 0;
}

/* PUT /sandboxes/{id}/network: the SDK's updateNetwork, its options at
 * the top of the body; both lists replaced. */
static int update_network(struct http_req *req, struct sandbox *sb, struct cove_err *err)
{
	json_t *j = read_body(req, err), *allow = NULL, *deny = NULL;
	int r = !j ? -1 : network_lists(j, json_object_get(j, "allow_internet_access"), &allow, &deny, err);
	if (r == 0)
		r = set_policy(sb, allow, deny, err);
	json_decref(j);
	json_decref(allow);
	json_decref(deny);
	if (r == 0)
		http_send_reply(req, 204, "No Content", NULL);
	return r;
}

static int parse_create(json_t *j, struct sandbox_spec *s, struct cove_err *err)
{
	static const char *const fields[] = { "templateID",      "timeout",    "envVars", "metadata",
					      "autoPause",       "autoResume", "secure",  "allow_internet_access",
					      "network",         "mcp",        "iam",     "volumeMounts",
					      "autoPauseMemory", NULL };
	const char *tpl = "base";
	int64_t timeout = E2B_DEFAULT_TIMEOUT;
	if (check_fields(j, fields, err) < 0 || get_string(j, "templateID", &tpl, sizeof(s->image) - 1, err) < 0 ||
	    get_timeout(j, &timeout, err) < 0 || check_env(json_object_get(j, "envVars"), err) < 0 ||
	    check_metadata(json_object_get(j, "metadata"), err) < 0 || check_unsupported(j, err) < 0 ||
	    parse_lifecycle(j, s, err) < 0 ||
	    network_lists(json_object_get(j, "network"), json_object_get(j, "allow_internet_access"), &s->allow_out,
			  &s->deny_out, err) < 0)
		return -1;
	s->egress = true; /* E2B's sandboxes have the internet */
	bool base = strcmp(tpl, "base") == 0;
	if (!tpl[0])
		return err_set(err, COVE_EINVAL, "'templateID' must name a template");
	snprintf(s->image, sizeof(s->image), "%s", base ? "host" : tpl);
	snprintf(s->user, sizeof(s->user), "%s", base ? E2B_USER : "");
	s->make_user = base;
	s->ports_public = true; /* E2B's traffic is public unless asked otherwise */
	s->memory = 512ull << 20;
	s->cpu_millis = 2000;
	s->pids = 1024;
	s->expires_at = sandbox_now_ms() + timeout * 1000;
	json_t *env = json_object_get(j, "envVars"), *meta = json_object_get(j, "metadata");
	s->env = json_is_object(env) ? json_deep_copy(env) : json_object();
	s->metadata = json_object_size(meta) ? json_deep_copy(meta) : NULL;
	return 0;
}

/* ---- create ---- */

static void created_ok(struct http_req *req, struct sandbox *sb)
{
	e2b_json(req, 201, e2b_sandbox_json(sb, true));
}

static const struct api_answer created = { .ok = created_ok, .fail = e2b_error_of };

/* A sandbox from cove's template t (templates.h): its fields under the
 * create's envVars, as cove's own create merges them
 * (api_template_merge); the create's metadata and deadline, and E2B's
 * public ports, on top. spec
 * (E2B's) is left for the caller to free. */
static int from_template(struct template *t, struct sandbox_spec *spec, struct sandbox **ret, bool *pooled,
			 struct cove_err *err)
{
	struct sandbox_spec ts = { 0 };
	json_t *body = json_pack("{s:s, s:O}", "template", t->name, "env", spec->env), *merged = NULL;
	struct template *found = NULL;
	int r = api_template_merge(body, &found, &merged, err);
	if (r == 0)
		r = api_parse_spec(merged, &ts, err);
	json_decref(body);
	json_decref(merged);
	if (r == 0) {
		ts.expires_at = spec->expires_at;
		ts.metadata = spec->metadata;
		spec->metadata = NULL;
		ts.ports_public = true;
		r = template_create_sandbox(engine_ctx, found, &ts, ret, pooled, err);
	}
	sandbox_spec_free(&ts);
	return r;
}

/* templateID: 'base', a cove template, a snapshot's ID (snapshots.c), or
 * an image. A template's start command and readiness are waited for
 * before the answer (api_created_as). */
static int create(struct http_req *req, struct cove_err *err)
{
	json_t *j = read_body(req, err);
	struct sandbox_spec spec = { 0 };
	struct sandbox *sb = NULL;
	bool pooled = false;
	int r = j ? parse_create(j, &spec, err) : -1;
	json_decref(j);
	struct template *t = r == 0 && !spec.make_user ? template_find(engine_ctx, spec.image) : NULL;
	struct snapshot *sn = r == 0 && !t ? snapshot_find(engine_ctx, spec.image) : NULL;
	if (r == 0 && t)
		r = from_template(t, &spec, &sb, &pooled, err);
	else if (r == 0 && sn)
		r = e2b_snapshot_restore(req, sn, &spec, &sb, err);
	else if (r == 0)
		r = sandbox_create(engine_ctx, &spec, NULL, &sb, err);
	sandbox_spec_free(&spec);
	return r < 0 ? -1 : api_created_as(req, sb, pooled, &created, err);
}

/* ---- one sandbox ---- */

static struct sandbox *lookup(struct http_req *req, const char *id)
{
	struct sandbox *sb = sandbox_find(engine_ctx, id);
	if (!sb || sb->state == SB_DELETING)
		e2b_error(req, 404, "sandbox '%s' not found", id);
	return sb && sb->state != SB_DELETING ? sb : NULL;
}

/* A body's 'key': seconds (1 to 30 days), required unless opt (-1 when
 * absent); and 'memory' (true when absent) into *memory. */
static int body_seconds(struct http_req *req, const char *key, bool opt, int64_t *ret, bool *memory,
			struct cove_err *err)
{
	const char *fields[] = { key, "memory", NULL };
	json_t *j = read_body(req, err);
	double t = -1;
	int r = !j || check_fields(j, fields, err) < 0 || get_number(j, key, 0, E2B_MAX_TIMEOUT, &t, err) < 0 ||
				get_bool(j, "memory", memory, err) < 0
			? -1
			: 0;
	json_decref(j);
	if (r == 0 && t < 0 && !opt)
		r = err_set(err, COVE_EINVAL, "'%s' is required", key);
	*ret = (int64_t)t;
	return r;
}

/* Extend sb's end to now + s seconds (never shorten, unless shorten). */
static int extend(struct sandbox *sb, int64_t s, bool shorten, struct cove_err *err)
{
	int64_t end = sandbox_now_ms() + s * 1000;
	if (s < 0 || (!shorten && sb->spec.expires_at && end <= sb->spec.expires_at))
		return 0;
	return sandbox_set_expiry(engine_ctx, sb, end > 0 ? end : 1, err);
}

/* POST /sandboxes/{id}/fork {timeout, count}: copies of sb's files at one
 * frozen instant (sandbox_fork; its processes are not copied), each with
 * its own deadline and envd token. */
static int fork_sandbox(struct http_req *req, struct sandbox *sb, struct cove_err *err)
{
	static const char *const fields[] = { "timeout", "count", NULL };
	json_t *j = read_body(req, err);
	double count = 1;
	int64_t timeout = E2B_DEFAULT_TIMEOUT;
	int r = !j || check_fields(j, fields, err) < 0 || get_number(j, "count", 1, E2B_MAX_FORK, &count, err) < 0 ||
				get_timeout(j, &timeout, err) < 0
			? -1
			: 0;
	json_decref(j);
	if (r == 0 && count != (int)count)
		r = err_set(err, COVE_EINVAL, "'count' must be an integer from 1 to %d", E2B_MAX_FORK);
	struct sandbox *copies[E2B_MAX_FORK];
	if (r < 0 || sandbox_fork(engine_ctx, sb, (int)count, false, copies, err) < 0)
		return -1;
	json_t *a = json_array();
	for (int i = 0; i < (int)count; i++) {
		struct cove_err e = { 0 };
		if (extend(copies[i], timeout, true, &e) == 0) {
			json_array_append_new(a, json_pack("{s:o}", "sandbox", e2b_sandbox_json(copies[i], true)));
			continue;
		}
		json_array_append_new(a, json_pack("{s:{s:i, s:s}}", "error", "code", 500, "message", e.msg));
		(void)sandbox_delete(engine_ctx, copies[i], NULL);
	}
	e2b_json(req, 201, a);
	return 0;
}

static bool known_action(const char *action)
{
	static const char *const known[] = { "",        "timeout", "refreshes", "connect",   "pause", "resume",
					     "metrics", "network", "fork",      "snapshots", NULL };
	for (int i = 0; known[i]; i++)
		if (strcmp(action, known[i]) == 0)
			return true;
	return false;
}

/* ---- pause, connect (resume): the engine's lifecycle (lifecycle.h) ---- */

static bool asleep(const struct sandbox *sb)
{
	return sb->state == SB_PAUSED || sb->state == SB_ARCHIVED;
}

/* POST .../pause {memory}: running to paused (its memory kept) or, with
 * memory false, archived (its files only); 409 when it is not running. */
static int pause_sandbox(struct http_req *req, struct sandbox *sb, struct cove_err *err)
{
	int64_t s;
	bool memory = true;
	if (body_seconds(req, "timeout", true, &s, &memory, err) < 0)
		return -1;
	if (sb->state != SB_RUNNING) {
		e2b_error(req, 409, "sandbox '%s' is %s, not running", sb->id, sandbox_state_name(sb->state));
		return 0;
	}
	/* Without memory: E2B's files-only pause, its processes ended. */
	int r = memory ? engine_sandbox_pause(engine_ctx, sb, SB_REASON_USER, err)
		       : engine_sandbox_archive_mem(engine_ctx, sb, SB_REASON_USER, ARCHIVE_MEMORY_NO, err);
	if (r < 0)
		return -1;
	http_send_reply(req, 204, "No Content", NULL);
	return 0;
}

/* POST /v2/sandboxes/{id}/connect {timeout, memory}, and v1's resume: a
 * paused or archived sandbox is woken (201; with memory false started
 * afresh on its files: a reboot), a running one is found (200; resume:
 * 409). The timeout only extends, but a woken sandbox whose end has passed
 * gets a new one (E2B's default without one). */
static int connect_sandbox(struct http_req *req, struct sandbox *sb, bool resume, struct cove_err *err)
{
	int64_t s;
	bool memory = true, woke = asleep(sb);
	if (body_seconds(req, "timeout", true, &s, &memory, err) < 0)
		return -1;
	if (!woke && resume) {
		e2b_error(req, 409, "sandbox '%s' is %s, not paused", sb->id, sandbox_state_name(sb->state));
		return 0;
	}
	if (woke && (memory ? engine_sandbox_wake : engine_sandbox_reboot)(engine_ctx, sb, SB_REASON_USER, err) < 0)
		return -1;
	if (woke && s < 0 && sb->spec.expires_at && sb->spec.expires_at <= sandbox_now_ms())
		s = E2B_DEFAULT_TIMEOUT;
	if (extend(sb, s, false, err) < 0)
		return -1;
	e2b_json(req, woke ? 201 : 200, e2b_sandbox_json(sb, true));
	return 0;
}

static int one(struct http_req *req, struct sandbox *sb, const char *action, struct cove_err *err)
{
	enum http_method m = http_req_method(req);
	int64_t s;
	if (!*action && m == HTTP_GET) {
		e2b_json(req, 200, e2b_sandbox_json(sb, false));
	} else if (!*action && m == HTTP_DELETE) {
		if (sandbox_delete(engine_ctx, sb, err) < 0)
			return -1;
		http_send_reply(req, 204, "No Content", NULL);
	} else if ((!strcmp(action, "timeout") || !strcmp(action, "refreshes")) && m == HTTP_POST) {
		bool timeout = !strcmp(action, "timeout"), memory;
		if (body_seconds(req, timeout ? "timeout" : "duration", !timeout, &s, &memory, err) < 0 ||
		    extend(sb, s, timeout, err) < 0)
			return -1;
		http_send_reply(req, 204, "No Content", NULL);
	} else if ((!strcmp(action, "connect") || !strcmp(action, "resume")) && m == HTTP_POST) {
		return connect_sandbox(req, sb, !strcmp(action, "resume"), err);
	} else if (!strcmp(action, "pause") && m == HTTP_POST) {
		return pause_sandbox(req, sb, err);
	} else if (!strcmp(action, "snapshots") && m == HTTP_POST) {
		return e2b_snapshot_create(req, sb, err);
	} else if (!strcmp(action, "fork") && m == HTTP_POST) {
		return fork_sandbox(req, sb, err);
	} else if (!strcmp(action, "network") && m == HTTP_PUT) {
		return update_network(req, sb, err);
	} else if (!strcmp(action, "metrics") && m == HTTP_GET) {
		return e2b_metrics(req, sb, err);
	} else if (known_action(action)) {
		e2b_error(req, 405, "method not allowed on '%s'", http_req_path(req));
	} else {
		e2b_error(req, 404, "no route '%s'", http_req_path(req));
	}
	return 0;
}

void e2b_control(struct http_req *req)
{
	struct cove_err err = { 0 };
	const char *path = http_req_path(req);
	enum http_method m = http_req_method(req);
	const char *rest = path + (strncmp(path, "/v2/", 4) == 0 ? 3 : 0); /* "/sandboxes..." */
	int r = 0;
	char id[32] = "", action[32] = "";
	if (strcmp(path, "/snapshots") == 0) {
		if (m == HTTP_GET)
			r = e2b_snapshots_list(req, &err);
		else
			e2b_error(req, 405, "method not allowed on '%s'", path);
	} else if (sscanf(path, "/templates/%31[^/]%31s", id, action) == 1) {
		if (m == HTTP_DELETE)
			r = e2b_template_delete(req, id, &err);
		else
			e2b_error(req, 405, "method not allowed on '%s'", path);
	} else if (strncmp(path, "/templates/", 11) == 0) {
		e2b_error(req, 404, "no route '%s'", path);
	} else if (strcmp(rest, "/sandboxes") == 0) {
		if (m == HTTP_POST && path != rest)
			r = create(req, &err);
		else if (m == HTTP_GET)
			r = e2b_list(req, &err);
		else
			e2b_error(req, 405, "method not allowed on '%s'", path);
	} else {
		if (sscanf(rest, "/sandboxes/%31[^/]/%31[^/]", id, action) < 1 || strlen(id) > 15) {
			e2b_error(req, 404, "sandbox '%.32s' not found", id);
			return;
		}
		struct sandbox *sb = lookup(req, id);
		if (sb)
			r = one(req, sb, action, &err);
	}
	if (r < 0)
		e2b_error_of(req, &err);
}

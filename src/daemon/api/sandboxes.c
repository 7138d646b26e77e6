/* cove's REST API: sandboxes (create, list, get, delete, timeout), and
 * health and capabilities. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "daemon/api/api.h"
#include "daemon/api/reply.h"
#include "daemon/api/request.h"
#include "engine/engine.h"
#include "engine/network.h"
#include "daemon/proxy/proxy.h"
#include "engine/template.h"
#include "common/parse.h"

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

/* "allow_out"/"deny_out": an array of at most NETWORK_LIST_MAX strings
 * (absent: empty), into *ret (a new reference). What each string means is
 * the engine's to check. */
static int get_list(json_t *j, const char *key, json_t **ret, struct cove_err *err)
{
	json_t *v = json_object_get(j, key), *it;
	size_t i;
	if (!v || json_is_null(v)) {
		*ret = json_array();
		return 0;
	}
	if (!json_is_array(v) || json_array_size(v) > NETWORK_LIST_MAX)
		return err_set(err, COVE_EINVAL, "'%s' must be an array of at most %d CIDRs and domain names", key,
			       NETWORK_LIST_MAX);
	json_array_foreach(v, i, it)
	{
		if (!json_is_string(it))
			return err_set(err, COVE_EINVAL, "'%s'[%zu] must be a string", key, i);
	}
	*ret = json_incref(v);
	return 0;
}

/* "network": "egress" (the default, but for an external sandbox, which
 * shares the host's) or "none"; and the policy lists. */
static int parse_network(json_t *j, struct sandbox_spec *s, struct cove_err *err)
{
	const char *network = s->external ? "none" : "egress";
	if (get_string(j, "network", &network, 15, err) < 0 || get_list(j, "allow_out", &s->allow_out, err) < 0 ||
	    get_list(j, "deny_out", &s->deny_out, err) < 0)
		return -1;
	if (strcmp(network, "egress") != 0 && strcmp(network, "none") != 0)
		return err_set(err, COVE_EINVAL, "'network' must be \"egress\" or \"none\", not \"%s\"", network);
	s->egress = strcmp(network, "egress") == 0;
	return network_check(s, err);
}

static const char *const create_fields[] = { "name",      "image",       "memory",  "cpus",      "pids",
					     "env",       "cwd",         "user",    "timeout",   "ephemeral",
					     "isolation", "inherit_env", "network", "allow_out", "deny_out",
					     "workdir",   "start",       "ready",   "template",  NULL };

bool api_spec_field_known(const char *key)
{
	for (int i = 0; create_fields[i]; i++)
		if (strcmp(key, create_fields[i]) == 0)
			return true;
	return false;
}

int api_parse_spec(json_t *j, struct sandbox_spec *s, struct cove_err *err)
{
	static const char *const *fields = create_fields;
	const char *name = "", *image = "host", *cwd = "", *user = "", *workdir = "";
	double cpus = 1, pids = 1024;
	s->memory = 512ull << 20;
	if (check_fields(j, fields, err) < 0 || get_string(j, "name", &name, 63, err) < 0 ||
	    get_string(j, "image", &image, sizeof(s->image) - 1, err) < 0 || get_string(j, "cwd", &cwd, 1023, err) < 0 ||
	    get_string(j, "workdir", &workdir, 1023, err) < 0 ||
	    get_string(j, "user", &user, 63, err) < 0 || get_size(j, "memory", &s->memory, err) < 0 ||
	    get_number(j, "cpus", 0.01, 1024, &cpus, err) < 0 || get_number(j, "pids", 16, 1 << 22, &pids, err) < 0 ||
	    check_env(json_object_get(j, "env"), err) < 0 || get_deadline(j, &s->expires_at, err) < 0 ||
	    get_bool(j, "ephemeral", &s->ephemeral, err) < 0 || parse_isolation(j, s, err) < 0 ||
	    parse_network(j, s, err) < 0 || api_parse_launch(j, s, err) < 0)
		return -1;
	if (s->external)
		image = "";
	if (s->memory < (16u << 20))
		return err_set(err, COVE_EINVAL, "'memory' must be at least 16M");
	if (!s->external && !image[0])
		return err_set(err, COVE_EINVAL, "bad image name '%s'", image);
	if (*cwd && *cwd != '/')
		return err_set(err, COVE_EINVAL, "'cwd' must be an absolute path");
	if (*workdir && (*workdir != '/' || (*cwd && strcmp(cwd, workdir) != 0)))
		return err_set(err, COVE_EINVAL, "'workdir' must be an absolute path (the same as 'cwd', if both are given)");
	cwd = *workdir ? workdir : cwd; /* the workspace is where commands start */
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

int h_health(struct http_req *req, const char *id, struct cove_err *err)
{
	reply_json(req, 200, json_pack("{s:s, s:i}", "status", "ok", "sandboxes", engine_ctx->count));
	return 0;
}

/* One backend's entry: what selects it, and its capabilities (DESIGN.md:
 * ports (through the port proxy, when coved serves one), nativeSnapshot
 * for memory snapshots, resume; not yet). */
static json_t *backend_json(const char *isolation, bool os_boundary)
{
	return json_pack("{s:s, s:b, s:{s:b, s:b, s:b}}", "isolation", isolation, "os_boundary", os_boundary,
			 "capabilities", "ports", proxy_serving(), "nativeSnapshot", 0, "resume", 0);
}

int h_capabilities(struct http_req *req, const char *id, struct cove_err *err)
{
	struct engine *d = engine_ctx;
	const char *storage = storage_driver_name(d->pool.driver);
	json_t *j = json_pack("{s:s, s:s, s:s, s:{s:b, s:b, s:b}, s:[s], s:b}", "backend", "isolated", "storage",
			      storage, "cgroups", d->cgroups.mode == CGROUP_V2 ? "v2" : "v1", "capabilities", "ports",
			      proxy_serving(), "nativeSnapshot", 0, "resume", 0, "images", "host", "pool_loop_backed",
			      d->pool.loop_backed);
	json_object_set_new(j, "network", network_modes_json());
	json_object_set_new(j, "proxy", proxy_to_json());
	/* coved --warm N: the default pool (size 0 without one). */
	json_object_set_new(j, "warm_pool", warm_to_json(d->default_pool));
	json_object_set_new(j, "backends",
			    json_pack("{s:o, s:o}", "isolated", backend_json("isolated", true), "host",
				      backend_json("external", false)));
	reply_json(req, 200, j);
	return 0;
}

int h_create(struct http_req *req, const char *id, struct cove_err *err)
{
	json_t *j = read_body(req, err), *merged = NULL;
	struct sandbox_spec spec = { 0 };
	struct template *t = NULL;
	struct sandbox *sb;
	bool pooled = false;
	/* A template's fields under the request's own: each can be overridden. */
	int r = j ? api_template_merge(j, &t, &merged, err) : -1;
	if (r == 0)
		r = api_parse_spec(merged, &spec, err);
	json_decref(j);
	json_decref(merged);
	if (r == 0)
		r = template_create_sandbox(engine_ctx, t, &spec, &sb, &pooled, err);
	sandbox_spec_free(&spec);
	if (r < 0)
		return -1;
	return api_created(req, sb, pooled, err);
}

int h_list(struct http_req *req, const char *id, struct cove_err *err)
{
	json_t *a = json_array();
	for (int i = 0; i < MAX_SANDBOXES; i++)
		if (sandbox_listed(engine_ctx->sandboxes[i]))
			json_array_append_new(a, sandbox_to_json(engine_ctx->sandboxes[i]));
	reply_json(req, 200, json_pack("{s:o}", "sandboxes", a));
	return 0;
}

int h_get(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb = api_lookup(id, err);
	if (!sb)
		return -1;
	reply_json(req, 200, sandbox_to_json(sb));
	return 0;
}

int h_delete(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb = api_lookup(id, err);
	if (!sb || sandbox_delete(engine_ctx, sb, err) < 0)
		return -1;
	reply_json(req, 200, json_pack("{s:s, s:b}", "id", id, "deleted", 1));
	return 0;
}

int h_timeout(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "timeout", NULL };
	struct sandbox *sb = api_lookup(id, err);
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

/* PUT /v1/sandboxes/{id}/network {allow_out, deny_out}: both lists
 * replaced (an absent one is empty). */
int h_network(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "allow_out", "deny_out", NULL };
	struct sandbox *sb = api_lookup(id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	json_t *allow = NULL, *deny = NULL;
	int r = check_fields(j, fields, err) < 0 || get_list(j, "allow_out", &allow, err) < 0 ||
				get_list(j, "deny_out", &deny, err) < 0
			? -1
			: 0;
	json_decref(j);
	size_t na = json_array_size(allow), nd = json_array_size(deny);
	const char **a = calloc(na + 1, sizeof(*a)), **dv = calloc(nd + 1, sizeof(*dv));
	if (r == 0 && (!a || !dv))
		r = err_set(err, COVE_EINTERNAL, "out of memory");
	for (size_t i = 0; r == 0 && i < na; i++)
		a[i] = json_string_value(json_array_get(allow, i));
	for (size_t i = 0; r == 0 && i < nd; i++)
		dv[i] = json_string_value(json_array_get(deny, i));
	struct network_policy_req pr = { .allow_out = a, .n_allow = na, .deny_out = dv, .n_deny = nd };
	if (r == 0)
		r = network_set_policy(engine_ctx, sb, &pr, err);
	free(a);
	free(dv);
	json_decref(allow);
	json_decref(deny);
	if (r < 0)
		return -1;
	reply_json(req, 200, sandbox_to_json(sb));
	return 0;
}

/* A sandbox's spec: what its create asked for and was given, as it is kept
 * in state.db (its JSON, both ways, with the defaults older rows lack) and
 * copied for restores, forks and pools. */
#include <stdio.h>
#include <string.h>

#include "engine/engine.h"
#include "engine/images.h"
#include "engine/lifecycle.h"

void sandbox_spec_free(struct sandbox_spec *spec)
{
	json_decref(spec->env);
	json_decref(spec->allow_out);
	json_decref(spec->deny_out);
	spec->env = spec->allow_out = spec->deny_out = NULL;
	json_decref(spec->metadata);
	json_decref(spec->start);
	json_decref(spec->ready);
	json_decref(spec->image_meta);
	spec->metadata = spec->start = spec->ready = spec->image_meta = NULL;
}

json_t *sandbox_spec_to_json(const struct sandbox_spec *s)
{
	json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:f, s:i, s:o, s:s, s:s, s:I, s:o, s:b}", "name", s->name, "image",
			      s->image, "image_dir", s->image_dir, "memory", (json_int_t)s->memory, "cpus",
			      s->cpu_millis / 1000.0, "pids", (int)s->pids, "env",
			      s->env ? json_incref(s->env) : json_object(), "cwd", s->cwd, "user", s->user,
			      "created_at", (json_int_t)s->created_at, "expires_at",
			      s->expires_at ? json_integer(s->expires_at) : json_null(), "ephemeral", s->ephemeral);
	json_object_set_new(j, "isolation", json_string(s->external ? "external" : "isolated"));
	json_object_set_new(j, "inherit_env", json_boolean(s->inherit_env));
	json_object_set_new(j, "network", json_string(s->egress ? "egress" : "none"));
	json_object_set_new(j, "allow_out", s->allow_out ? json_incref(s->allow_out) : json_array());
	json_object_set_new(j, "deny_out", s->deny_out ? json_incref(s->deny_out) : json_array());
	if (s->egress)
		json_object_set_new(j, "net_slot", json_integer(s->net_slot));
	json_object_set_new(j, "workdir", s->workdir[0] ? json_string(s->workdir) : json_null());
	if (json_object_size(s->metadata))
		json_object_set(j, "metadata", s->metadata);
	json_object_set_new(j, "disk", s->disk ? json_integer((json_int_t)s->disk) : json_null());
	lifecycle_spec_to_json(s, j);
	json_object_set_new(j, "start", s->start ? json_incref(s->start) : json_null());
	json_object_set_new(j, "ready", s->ready ? json_incref(s->ready) : json_null());
	json_object_set_new(j, "template", s->template[0] ? json_string(s->template) : json_null());
	json_object_set_new(j, "from_pool", json_boolean(s->from_pool));
	if (s->pooled)
		json_object_set_new(j, "pooled", json_true());
	if (s->ports_public)
		json_object_set_new(j, "ports_public", json_true());
	image_spec_to_json(s, j);
	return j;
}

int sandbox_spec_from_json(const char *text, struct sandbox_spec *s)
{
	json_t *j = json_loads(text, 0, NULL);
	const char *name = "", *image = "host", *image_dir = "", *cwd = "", *user = "";
	json_int_t memory = 0, created = 0;
	double cpus = 0;
	int pids = 0;
	json_t *env = NULL, *expires = NULL;
	int ephemeral = 0;
	if (!j ||
	    json_unpack(j, "{s?s, s?s, s?s, s?I, s?F, s?i, s?o, s?s, s?s, s?I, s?o, s?b}", "name", &name, "image",
			&image, "image_dir", &image_dir, "memory", &memory, "cpus", &cpus, "pids", &pids, "env", &env,
			"cwd", &cwd, "user", &user, "created_at", &created, "expires_at", &expires, "ephemeral",
			&ephemeral) < 0 ||
	    (expires && !json_is_null(expires) && !json_is_integer(expires))) {
		json_decref(j);
		return -1;
	}
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->image, sizeof(s->image), "%s", image);
	snprintf(s->image_dir, sizeof(s->image_dir), "%s", image_dir);
	snprintf(s->cwd, sizeof(s->cwd), "%s", cwd);
	snprintf(s->user, sizeof(s->user), "%s", user);
	s->memory = (uint64_t)memory;
	s->cpu_millis = (uint32_t)(cpus * 1000 + 0.5);
	s->pids = (uint32_t)pids;
	s->env = env ? json_incref(env) : json_object();
	s->created_at = created;
	s->expires_at = json_is_integer(expires) ? json_integer_value(expires) : 0;
	s->ephemeral = ephemeral;
	/* Rows from before the host backend have no "isolation": isolated. */
	s->external = json_is_string(json_object_get(j, "isolation")) &&
		      strcmp(json_string_value(json_object_get(j, "isolation")), "external") == 0;
	s->inherit_env = json_is_true(json_object_get(j, "inherit_env"));
	/* Rows from before the network have none. */
	json_t *network = json_object_get(j, "network"), *allow = json_object_get(j, "allow_out"),
	       *deny = json_object_get(j, "deny_out");
	s->egress = json_is_string(network) && strcmp(json_string_value(network), "egress") == 0;
	s->allow_out = json_is_array(allow) ? json_incref(allow) : json_array();
	s->deny_out = json_is_array(deny) ? json_incref(deny) : json_array();
	json_t *net_slot = json_object_get(j, "net_slot");
	s->net_slot = json_is_integer(net_slot) ? (int)json_integer_value(net_slot) : -1;
	const char *workdir = json_string_value(json_object_get(j, "workdir")); /* none in older rows */
	snprintf(s->workdir, sizeof(s->workdir), "%s", workdir ? workdir : "");
	json_t *metadata = json_object_get(j, "metadata");
	s->metadata = json_is_object(metadata) ? json_incref(metadata) : NULL;
	json_t *disk = json_object_get(j, "disk"); /* none in older rows: no limit */
	s->disk = json_is_integer(disk) && json_integer_value(disk) > 0 ? (uint64_t)json_integer_value(disk) : 0;
	lifecycle_spec_from_json(j, s);
	json_t *start = json_object_get(j, "start"), *ready = json_object_get(j, "ready");
	s->start = json_is_array(start) ? json_incref(start) : NULL;
	s->ready = json_is_object(ready) ? json_incref(ready) : NULL;
	const char *template = json_string_value(json_object_get(j, "template"));
	snprintf(s->template, sizeof(s->template), "%s", template ? template : "");
	s->pooled = json_is_true(json_object_get(j, "pooled"));
	s->from_pool = json_is_true(json_object_get(j, "from_pool"));
	s->ports_public = json_is_true(json_object_get(j, "ports_public"));
	image_spec_from_json(j, s);
	json_decref(j);
	return 0;
}

int sandbox_spec_copy(const struct sandbox_spec *from, struct sandbox_spec *to)
{
	*to = *from;
	to->env = from->env ? json_deep_copy(from->env) : json_object();
	to->allow_out = from->allow_out ? json_deep_copy(from->allow_out) : json_array();
	to->deny_out = from->deny_out ? json_deep_copy(from->deny_out) : json_array();
	to->metadata = from->metadata ? json_deep_copy(from->metadata) : NULL;
	to->start = from->start ? json_deep_copy(from->start) : NULL;
	to->ready = from->ready ? json_deep_copy(from->ready) : NULL;
	to->image_meta = from->image_meta ? json_deep_copy(from->image_meta) : NULL;
	if (to->env && to->allow_out && to->deny_out && (to->metadata || !from->metadata) &&
	    (to->start || !from->start) && (to->ready || !from->ready) && (to->image_meta || !from->image_meta))
		return 0;
	sandbox_spec_free(to);
	return -1;
}

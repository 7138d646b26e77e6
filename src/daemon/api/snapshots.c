/* cove's REST API: snapshots, restore, fork, and histories (checkpoints,
 * rollback, branch). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "daemon/api/api.h"
#include "daemon/api/reply.h"
#include "daemon/api/request.h"
#include "engine/disk.h"
#include "engine/engine.h"

/* "memory": a boolean, false when absent: with it, the sandbox's
 * processes are saved too (memory snapshots). */
static int get_memory_flag(json_t *j, bool *ret, struct cove_err *err)
{
	json_t *m = json_object_get(j, "memory");
	if (m && !json_is_boolean(m))
		return err_set(err, COVE_EINVAL, "'memory' must be a boolean");
	*ret = json_is_true(m);
	return 0;
}

int h_snapshot(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "name", "memory", "wait_durable", NULL };
	struct sandbox *sb = api_lookup(id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	const char *name = "";
	json_t *wait = json_object_get(j, "wait_durable");
	struct snapshot *sn;
	bool mem = false;
	int r = check_fields(j, fields, err) < 0 || get_string(j, "name", &name, 63, err) < 0 ||
				get_memory_flag(j, &mem, err) < 0
			? -1
			: 0;
	if (r == 0 && wait && !json_is_boolean(wait))
		r = err_set(err, COVE_EINVAL, "'wait_durable' must be a boolean");
	if (r == 0)
		r = json_is_false(wait) ? snapshot_create_nowait(engine_ctx, sb, name, mem, &sn, err)
					: snapshot_create_mem(engine_ctx, sb, name, mem, NULL, NULL, &sn, err);
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

int h_snapshot_list(struct http_req *req, const char *id, struct cove_err *err)
{
	json_t *a = json_array();
	for (const struct snapshot *sn = engine_ctx->snapshots; sn; sn = sn->next)
		json_array_append_new(a, snapshot_to_json(sn));
	reply_json(req, 200, json_pack("{s:o}", "snapshots", a));
	return 0;
}

int h_snapshot_get(struct http_req *req, const char *id, struct cove_err *err)
{
	struct snapshot *sn = lookup_snapshot(id, err);
	if (!sn)
		return -1;
	reply_json(req, 200, snapshot_to_json(sn));
	return 0;
}

int h_snapshot_delete(struct http_req *req, const char *id, struct cove_err *err)
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
	static const char *const fields[] = { "name", "memory", "cpus", "pids", "disk", NULL };
	const char *name = "";
	double cpus = 0, pids = 0;
	if (check_fields(j, fields, err) < 0 || get_string(j, "name", &name, 63, err) < 0 ||
	    get_size(j, "memory", &o->memory, err) < 0 || get_number(j, "cpus", 0.01, 1024, &cpus, err) < 0 ||
	    get_number(j, "pids", 16, 1 << 22, &pids, err) < 0 || get_size(j, "disk", &o->disk, err) < 0 ||
	    (o->disk && disk_check(engine_ctx, o, true, err) < 0))
		return -1;
	if (o->memory && o->memory < (16u << 20))
		return err_set(err, COVE_EINVAL, "'memory' must be at least 16M");
	snprintf(o->name, sizeof(o->name), "%s", name);
	o->cpu_millis = (uint32_t)(cpus * 1000 + 0.5);
	o->pids = (uint32_t)pids;
	return 0;
}

int h_restore(struct http_req *req, const char *id, struct cove_err *err)
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

int h_fork(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "count", "memory", NULL };
	struct sandbox *sb = api_lookup(id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	json_t *count = json_object_get(j, "count");
	json_int_t n = count ? (json_is_integer(count) ? json_integer_value(count) : -1) : 1;
	bool memory = false;
	int r = check_fields(j, fields, err) < 0 || get_memory_flag(j, &memory, err) < 0 ? -1 : 0;
	json_decref(j);
	if (r == 0 && (n < 1 || n > API_MAX_FORK))
		r = err_set(err, COVE_EINVAL, "'count' must be an integer from 1 to %d", API_MAX_FORK);
	struct sandbox *copies[API_MAX_FORK];
	if (r == 0)
		r = sandbox_fork(engine_ctx, sb, (int)n, memory, copies, err);
	if (r < 0)
		return -1;
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, sandbox_to_json(copies[i]));
	reply_json(req, 201, json_pack("{s:o}", "sandboxes", a));
	return 0;
}

#define API_MAX_LABEL 255

/* Histories (history.c). Their GET, DELETE, rollback and branch take the
 * ID of a deleted sandbox too: its history outlives it. */
int h_checkpoint(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "label", "memory", NULL };
	struct sandbox *sb = api_lookup(id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	const char *label = "";
	json_t *checkpoint = NULL;
	bool memory = false;
	int r = check_fields(j, fields, err) < 0 || get_string(j, "label", &label, API_MAX_LABEL, err) < 0 ||
				get_memory_flag(j, &memory, err) < 0
			? -1
			: 0;
	if (r == 0)
		r = history_checkpoint(engine_ctx, sb, label, memory, &checkpoint, err);
	json_decref(j);
	if (r < 0)
		return -1;
	reply_json(req, 201, checkpoint);
	return 0;
}

int h_history(struct http_req *req, const char *id, struct cove_err *err)
{
	json_t *h;
	if (history_get(engine_ctx, id, &h, err) < 0)
		return -1;
	reply_json(req, 200, h);
	return 0;
}

int h_history_delete(struct http_req *req, const char *id, struct cove_err *err)
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

int h_rollback(struct http_req *req, const char *id, struct cove_err *err)
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

int h_branch(struct http_req *req, const char *id, struct cove_err *err)
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


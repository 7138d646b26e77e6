/* E2B's snapshots over cove's (engine.h, snapshots.c): createSnapshot
 * (POST /sandboxes/{id}/snapshots {name}), listSnapshots (GET /snapshots
 * with sandboxID, name, limit and nextToken), deleteSnapshot (DELETE
 * /templates/{id}), and Sandbox.create(snapshotID), which control.c hands
 * to e2b_snapshot_restore. A snapshot holds the sandbox's files (not its
 * processes: cove's snapshots are of the files). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/api/request.h"
#include "daemon/e2b/e2b_private.h"
#include "engine/engine.h"

#define E2B_MAX_SNAPSHOTS_PAGE 1000

static json_t *snapshot_json(const struct snapshot *sn)
{
	return json_pack("{s:s, s:o}", "snapshotID", sn->id, "names",
			 sn->name[0] ? json_pack("[s]", sn->name) : json_array());
}

int e2b_snapshot_create(struct http_req *req, struct sandbox *sb, struct cove_err *err)
{
	static const char *const fields[] = { "name", NULL };
	json_t *j = read_body(req, err);
	const char *name = "";
	struct snapshot *sn = NULL;
	int r = !j || check_fields(j, fields, err) < 0 || get_string(j, "name", &name, 63, err) < 0 ? -1 : 0;
	if (r == 0)
		r = snapshot_create(engine_ctx, sb, name, &sn, err);
	json_decref(j);
	if (r == 0)
		e2b_json(req, 201, snapshot_json(sn));
	return r;
}

/* Oldest first; the cursor is how many matching ones came before. */
int e2b_snapshots_list(struct http_req *req, struct cove_err *err)
{
	static const char *const params[] = { "sandboxID", "name", "limit", "nextToken", NULL };
	const char *q = query_of(req);
	char sandbox[32] = "", name[80] = "", num[16] = "", token[16] = "", *end;
	if (check_params(q, params, err) < 0 || query_param(q, "sandboxID", sandbox, sizeof(sandbox), err) < 0 ||
	    query_param(q, "name", name, sizeof(name), err) < 0 || query_param(q, "limit", num, sizeof(num), err) < 0 ||
	    query_param(q, "nextToken", token, sizeof(token), err) < 0)
		return -1;
	long limit = num[0] ? strtol(num, &end, 10) : E2B_MAX_SNAPSHOTS_PAGE;
	if (num[0] && (*end || limit < 1 || limit > E2B_MAX_SNAPSHOTS_PAGE))
		return err_set(err, COVE_EINVAL, "'limit' must be 1 to %d", E2B_MAX_SNAPSHOTS_PAGE);
	long from = token[0] ? strtol(token, &end, 10) : 0;
	if (token[0] && (*end || from < 0))
		return err_set(err, COVE_EINVAL, "bad 'nextToken'");
	json_t *a = json_array();
	long seen = 0;
	bool more = false;
	for (struct snapshot *sn = engine_ctx->snapshots; sn && !more; sn = sn->next) {
		if ((sandbox[0] && strcmp(sn->sandbox, sandbox) != 0) || (name[0] && strcmp(sn->name, name) != 0))
			continue;
		if (seen++ < from)
			continue;
		if ((long)json_array_size(a) == limit)
			more = true;
		else
			json_array_append_new(a, snapshot_json(sn));
	}
	if (more) {
		char next[24];
		snprintf(next, sizeof(next), "%ld", from + limit);
		evhttp_add_header(http_req_out_headers(req), "X-Next-Token", next);
	}
	e2b_json(req, 200, a);
	return 0;
}

/* DELETE /templates/{id}: a snapshot (E2B's deleteSnapshot); 404 for any
 * other name (cove's images are not E2B's to delete). */
int e2b_template_delete(struct http_req *req, const char *id, struct cove_err *err)
{
	struct snapshot *sn = snapshot_find(engine_ctx, id);
	if (!sn) {
		e2b_error(req, 404, "snapshot '%.64s' not found", id);
		return 0;
	}
	if (snapshot_delete(engine_ctx, sn, err) < 0)
		return -1;
	http_send_reply(req, 204, "No Content", NULL);
	return 0;
}

int e2b_snapshot_restore(struct http_req *req, const struct snapshot *sn, struct sandbox_spec *spec,
			 struct sandbox **ret, struct cove_err *err)
{
	struct sandbox_spec o = { 0 };
	o.env = json_object_size(spec->env) ? spec->env : NULL;
	o.metadata = spec->metadata;
	if (snapshot_restore(engine_ctx, sn, &o, ret, err) < 0)
		return -1;
	if (sandbox_set_expiry(engine_ctx, *ret, spec->expires_at, err) < 0) {
		(void)sandbox_delete(engine_ctx, *ret, NULL);
		return -1;
	}
	return 0;
}

/* E2B's GET /sandboxes/{id}/metrics?start=&end= (unix seconds), from the
 * engine's reading of the sandbox's cgroup and disk (engine/usage.h). cove
 * samples nothing in the background, so the answer is one reading, taken
 * now, when now lies between start and end (else none): its CPU share is
 * that since the reading before (this front end keeps the last one of each
 * sandbox), or since the sandbox started. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/api/request.h"
#include "daemon/e2b/e2b_private.h"
#include "engine/engine.h"
#include "engine/usage.h"

/* The last reading of the sandbox in each slot. */
static struct {
	char id[16];
	int64_t at;
	uint64_t cpu_ns;
} last[MAX_SANDBOXES];

/* A bound of the window, unix seconds, into *ret (untouched when absent). */
static int bound(const char *query, const char *name, int64_t *ret, struct cove_err *err)
{
	char v[32], *end;
	int r = query_param(query, name, v, sizeof(v), err);
	if (r <= 0)
		return r;
	long long s = strtoll(v, &end, 10);
	if (!v[0] || *end || s < 0)
		return err_set(err, COVE_EINVAL, "'%s' must be unix seconds", name);
	*ret = s;
	return 0;
}

/* CPU use since the last reading (or the start), in % of the sandbox's
 * CPUs; -1 when the host gives no CPU time. */
static double cpu_pct(const struct sandbox *sb, const struct sandbox_usage *u, int cpus)
{
	int64_t since = sb->spec.created_at;
	uint64_t before = 0;
	if (u->cg.cpu_ns == USAGE_NONE)
		return -1;
	if (strcmp(last[sb->slot].id, sb->id) == 0 && last[sb->slot].at < u->at &&
	    last[sb->slot].cpu_ns <= u->cg.cpu_ns) {
		since = last[sb->slot].at;
		before = last[sb->slot].cpu_ns;
	}
	snprintf(last[sb->slot].id, sizeof(last[sb->slot].id), "%s", sb->id);
	last[sb->slot].at = u->at;
	last[sb->slot].cpu_ns = u->cg.cpu_ns;
	double wall_ns = (double)(u->at > since ? u->at - since : 1) * 1e6;
	double pct = (double)(u->cg.cpu_ns - before) / (wall_ns * cpus) * 100;
	return (double)(long)(pct * 100 + 0.5) / 100;
}

static json_t *metric(const struct sandbox *sb, const struct sandbox_usage *u)
{
	char when[32];
	int cpus = sb->spec.cpu_millis >= 1000 ? (int)(sb->spec.cpu_millis / 1000) : 1;
	e2b_iso_time(u->at, when);
	json_t *m = json_pack("{s:s, s:I, s:i, s:I}", "timestamp", when, "timestampUnix", (json_int_t)(u->at / 1000),
			      "cpuCount", cpus, "memTotal", (json_int_t)sb->spec.memory);
	double pct = cpu_pct(sb, u, cpus);
	if (pct >= 0)
		json_object_set_new(m, "cpuUsedPct", json_real(pct));
	if (u->cg.memory != USAGE_NONE)
		json_object_set_new(m, "memUsed", json_integer((json_int_t)u->cg.memory));
	if (u->disk != USAGE_NONE)
		json_object_set_new(m, "diskUsed", json_integer((json_int_t)u->disk));
	if (sb->spec.disk)
		json_object_set_new(m, "diskTotal", json_integer((json_int_t)sb->spec.disk));
	return m;
}

int e2b_metrics(struct http_req *req, const struct sandbox *sb, struct cove_err *err)
{
	static const char *const params[] = { "start", "end", NULL };
	const char *q = query_of(req);
	int64_t start = 0, end = INT64_MAX / 1000;
	if (check_params(q, params, err) < 0 || bound(q, "start", &start, err) < 0 || bound(q, "end", &end, err) < 0)
		return -1;
	if (start > end)
		return err_set(err, COVE_EINVAL, "'start' is after 'end'");
	struct sandbox_usage u;
	sandbox_usage_get(engine_ctx, sb, &u);
	json_t *a = json_array();
	if (u.at / 1000 >= start && u.at / 1000 <= end)
		json_array_append_new(a, metric(sb, &u));
	e2b_json(req, 200, a);
	return 0;
}

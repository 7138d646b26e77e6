/* E2B's GET /v2/sandboxes: filters by metadata (decoded as the SDK encodes
 * it), state, template and startedAfter, ordered by start (order asc, the
 * default, or desc), in pages of limit with an X-Next-Token cursor: the
 * start and ID of the last one given, so that a page goes on after it
 * whatever came or went meanwhile. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cleanup.h"
#include "daemon/api/request.h"
#include "daemon/e2b/e2b_private.h"
#include "engine/engine.h"

#define E2B_MAX_LIST 1000

/* A form string's part, decoded twice (URLSearchParams', then the SDK's
 * own encodeURIComponent). NULL when out of memory or holding a NUL. */
static char *decode_twice(const char *s, size_t n)
{
	_cleanup_free_ char *part = strndup(s, n);
	size_t len1 = 0, len2 = 0;
	_cleanup_free_ char *once = part ? evhttp_uridecode(part, 1, &len1) : NULL;
	char *twice = once && strlen(once) == len1 ? evhttp_uridecode(once, 0, &len2) : NULL;
	if (twice && strlen(twice) != len2) {
		free(twice);
		return NULL;
	}
	return twice;
}

/* The 'metadata' filter, decoded as the SDK encodes it (e2b-protocol.md,
 * section 4): an object of the pairs that must all be equal. */
static int parse_filter(const char *query, json_t **ret, struct cove_err *err)
{
	char text[8192];
	int r = query_param(query, "metadata", text, sizeof(text), err);
	if (r <= 0)
		return r;
	json_t *f = json_object();
	for (char *p = text, *next; p && *p; p = next) {
		next = strchr(p, '&');
		size_t n = next ? (size_t)(next - p) : strlen(p);
		if (next)
			next++;
		const char *eq = memchr(p, '=', n);
		_cleanup_free_ char *k = decode_twice(p, eq ? (size_t)(eq - p) : n);
		_cleanup_free_ char *v = eq ? decode_twice(eq + 1, n - (size_t)(eq - p) - 1) : strdup("");
		if (!k || !v) {
			json_decref(f);
			return err_set(err, COVE_EINVAL, "bad 'metadata' filter");
		}
		if (*k)
			json_object_set_new(f, k, json_string(v));
	}
	*ret = f;
	return 0;
}

/* 'state': running and paused, comma-separated; none: both. */
static int parse_states(char *state, bool *running, bool *paused, struct cove_err *err)
{
	char *save = NULL;
	*running = *paused = !state[0];
	for (char *t = strtok_r(state, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (strcmp(t, "running") == 0)
			*running = true;
		else if (strcmp(t, "paused") == 0)
			*paused = true;
		else
			return err_set(err, COVE_EINVAL, "'state' must be running, paused or both (comma-separated)");
	}
	return 0;
}

struct list_query {
	json_t *filter; /* metadata pairs that must all be equal */
	bool running, paused, desc;
	char template[128];
	int64_t after; /* startedAfter, unix ms (0: any) */
	long limit;
	int64_t from_at; /* the cursor: the last one given (from_id "": none) */
	char from_id[16];
};

static bool matches(const struct sandbox *sb, const struct list_query *q)
{
	const char *k;
	json_t *v;
	if (sb->state == SB_DELETING || !(sb->state == SB_RUNNING ? q->running : q->paused))
		return false;
	if ((q->template[0] && strcmp(e2b_template_of(sb), q->template) != 0) || sb->spec.created_at <= q->after)
		return false;
	json_object_foreach(q->filter, k, v)
	{
		json_t *have = sb->spec.metadata ? json_object_get(sb->spec.metadata, k) : NULL;
		if (!have || !json_equal(have, v))
			return false;
	}
	return true;
}

/* RFC 3339 in UTC as the SDK sends it ("2026-12-02T04:00:00.000Z"), or
 * unix seconds, into unix ms. */
static int parse_time(const char *s, int64_t *ret, struct cove_err *err)
{
	struct tm tm = { 0 };
	char *end;
	long long secs = strtoll(s, &end, 10);
	if (*s && !*end && secs >= 0) {
		*ret = secs * 1000;
		return 0;
	}
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	double frac = 0;
	if (p && *p == '.')
		frac = strtod(p, &end), p = end;
	if (!p || strcmp(p, "Z") != 0 || frac < 0 || frac >= 1)
		return err_set(err, COVE_EINVAL, "'startedAfter' must be a time like 2026-12-02T04:00:00.000Z");
	*ret = (int64_t)timegm(&tm) * 1000 + (int64_t)(frac * 1000);
	return 0;
}

static int parse_list(const char *query, struct list_query *q, struct cove_err *err)
{
	static const char *const params[] = { "metadata",     "state",    "limit", "nextToken",
					      "startedAfter", "template", "order", NULL };
	char state[64] = "", num[32] = "", token[48] = "", after[64] = "", order[16] = "", *end;
	if (check_params(query, params, err) < 0 || query_param(query, "state", state, sizeof(state), err) < 0 ||
	    query_param(query, "limit", num, sizeof(num), err) < 0 ||
	    query_param(query, "nextToken", token, sizeof(token), err) < 0 ||
	    query_param(query, "startedAfter", after, sizeof(after), err) < 0 ||
	    query_param(query, "template", q->template, sizeof(q->template), err) < 0 ||
	    query_param(query, "order", order, sizeof(order), err) < 0 ||
	    parse_states(state, &q->running, &q->paused, err) < 0 ||
	    (after[0] && parse_time(after, &q->after, err) < 0))
		return -1;
	if (order[0] && strcmp(order, "asc") != 0 && strcmp(order, "desc") != 0)
		return err_set(err, COVE_EINVAL, "'order' must be asc or desc");
	q->desc = strcmp(order, "desc") == 0;
	q->limit = num[0] ? strtol(num, &end, 10) : E2B_MAX_LIST;
	if (num[0] && (*end || q->limit < 1 || q->limit > E2B_MAX_LIST))
		return err_set(err, COVE_EINVAL, "'limit' must be 1 to %d", E2B_MAX_LIST);
	int n = 0;
	if (token[0] && (sscanf(token, "%" SCNd64 ":%15[a-z0-9_]%n", &q->from_at, q->from_id, &n) != 2 || token[n]))
		return err_set(err, COVE_EINVAL, "bad 'nextToken'");
	return parse_filter(query, &q->filter, err);
}

/* By start, then ID; backwards for desc (arg: the query). */
static int compare(const void *a, const void *b, void *arg)
{
	const struct sandbox *x = *(struct sandbox *const *)a, *y = *(struct sandbox *const *)b;
	int c = x->spec.created_at < y->spec.created_at   ? -1
		: x->spec.created_at > y->spec.created_at ? 1
							  : strcmp(x->id, y->id);
	return ((const struct list_query *)arg)->desc ? -c : c;
}

/* Whether sb comes after the cursor in q's order. */
static bool after_cursor(const struct sandbox *sb, const struct list_query *q)
{
	if (!q->from_id[0])
		return true;
	int c = sb->spec.created_at < q->from_at   ? -1
		: sb->spec.created_at > q->from_at ? 1
						   : strcmp(sb->id, q->from_id);
	return q->desc ? c < 0 : c > 0;
}

int e2b_list(struct http_req *req, struct cove_err *err)
{
	struct list_query q = { 0 };
	_cleanup_free_ struct sandbox **all = calloc(MAX_SANDBOXES, sizeof(*all));
	if (!all)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	if (parse_list(query_of(req), &q, err) < 0) {
		json_decref(q.filter);
		return -1;
	}
	size_t n = 0;
	for (int i = 0; i < MAX_SANDBOXES; i++)
		if (engine_ctx->sandboxes[i] && matches(engine_ctx->sandboxes[i], &q) &&
		    after_cursor(engine_ctx->sandboxes[i], &q))
			all[n++] = engine_ctx->sandboxes[i];
	qsort_r(all, n, sizeof(*all), compare, &q);
	json_t *a = json_array();
	for (size_t i = 0; i < n && i < (size_t)q.limit; i++)
		json_array_append_new(a, e2b_sandbox_json(all[i], false));
	if (n > (size_t)q.limit) {
		char next[48];
		const struct sandbox *last = all[q.limit - 1];
		snprintf(next, sizeof(next), "%" PRId64 ":%s", last->spec.created_at, last->id);
		evhttp_add_header(http_req_out_headers(req), "X-Next-Token", next);
	}
	json_decref(q.filter);
	e2b_json(req, 200, a);
	return 0;
}

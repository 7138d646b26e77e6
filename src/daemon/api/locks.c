/* cove's REST API: a sandbox's named locks. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "daemon/api/api.h"
#include "daemon/api/reply.h"
#include "daemon/api/request.h"
#include "engine/engine.h"
#include "engine/locks.h"

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

/* An acquire answered when the lock is granted, maybe after a wait. */
static void grant_encode(struct http_output *ho, const struct out_event *ev)
{
	const struct lock_grant *g = ev->event;
	reply_json(ho->req, 200,
		   json_pack("{s:s, s:s, s:I}", "name", g->name, "token", g->token, "expires_at",
			     (json_int_t)g->expires_at));
	ho->req = NULL;
}

static void grant_free(struct http_output *ho)
{
	free(ho);
}

/* A waiter's client that hangs up leaves the queue at once. */
static const struct http_output_route grant_route = {
	.encode = grant_encode,
	.free = grant_free,
	.watch_hangup = true,
};

int h_lock_acquire(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "name", "lease", "wait", NULL };
	struct sandbox *sb = api_lookup(id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	struct lock_request lr = { .lease = API_DEFAULT_LEASE };
	int r = parse_lock_request(j, fields, &lr.name, NULL, &lr.lease, &lr.wait, err);
	struct http_output *ho = r == 0 ? malloc(sizeof(*ho)) : NULL;
	if (r == 0 && !ho)
		r = err_set(err, COVE_EINTERNAL, "out of memory");
	if (r == 0 && (r = http_output_init(ho, req, &grant_route, NULL, err)) == 0 &&
	    (r = lock_acquire(sb, &lr, &ho->out, err)) < 0)
		http_output_abandon(ho);
	if (r < 0)
		free(ho);
	json_decref(j);
	return r;
}

int h_lock_release(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "name", "token", NULL };
	struct sandbox *sb = api_lookup(id, err);
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

int h_lock_renew(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "name", "token", "lease", NULL };
	struct sandbox *sb = api_lookup(id, err);
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

int h_lock_list(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb = api_lookup(id, err);
	if (!sb)
		return -1;
	reply_json(req, 200, json_pack("{s:o}", "locks", locks_to_json(sb)));
	return 0;
}


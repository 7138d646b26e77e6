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
#include "daemon/api/reply.h"
#include "daemon/api/request.h"
#include "daemon/http/access.h"
#include "engine/engine.h"

#define API_DEFAULT_MAX_OUTPUT (16u << 20)
#define API_MAX_STDIN (64u << 20)

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

struct sandbox *api_lookup(const char *id, struct cove_err *err)
{
	return sandbox_lookup(engine_ctx, id, err);
}


static int h_exec(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "cmd",     "env",    "cwd",        "user",       "stdin", "stdin_b64",
					      "timeout", "stream", "max_output", "background", "tag",   "tty",
					      "rows",    "cols",   "stdin_open", "session",    NULL };
	struct sandbox *sb = api_lookup(id, err);
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
	{ HTTP_GET, "/v1/sandboxes/*/files", files_get },
	{ HTTP_PUT | STREAMING, "/v1/sandboxes/*/files", files_put },
	{ HTTP_DELETE, "/v1/sandboxes/*/files", files_delete },
	{ HTTP_POST, "/v1/sandboxes/*/files/mkdir", files_mkdir },
	{ HTTP_POST, "/v1/sandboxes/*/files/move", files_move },
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
	{ HTTP_POST, "/v1/sandboxes/*/files/chmod", files_chmod },
	{ HTTP_GET, "/v1/sandboxes/*/files/tar", files_tar_get },
	{ HTTP_PUT | STREAMING, "/v1/sandboxes/*/files/tar", files_tar_put },
	{ HTTP_POST, "/v1/sandboxes/*/checkpoints", h_checkpoint },
	{ HTTP_GET, "/v1/sandboxes/*/checkpoints", h_history },
	{ HTTP_DELETE, "/v1/sandboxes/*/checkpoints", h_history_delete },
	{ HTTP_POST, "/v1/sandboxes/*/rollback", h_rollback },
	{ HTTP_POST, "/v1/sandboxes/*/branch", h_branch },
	{ HTTP_GET, "/v1/sandboxes/*/files/watch", watch_start },
	{ HTTP_GET, "/v1/sandboxes/*/export", export_get },
	{ HTTP_GET, "/v1/sandboxes/*/snapshot.json", portable_get },
	{ HTTP_POST, "/v1/sandboxes/*/snapshot.json", portable_post },
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

/* An answer that ends the connection: the client is refused, not served. */
static void refuse_unauthorized(struct http_req *req)
{
	struct evkeyvalq *h = http_req_out_headers(req);
	evhttp_add_header(h, "Connection", "close");
	evhttp_add_header(h, "WWW-Authenticate", "Bearer");
	reply_json(req, 401,
		   json_pack("{s:{s:s, s:s}}", "error", "code", "unauthorized", "message",
			     "this listener needs the header 'Authorization: Bearer <token>'"));
}

void api_handle(struct http_req *req)
{
	struct cove_err err = { 0 };
	const char *path = http_req_path(req);
	bool path_known = false;
	if (!access_authorized(req)) {
		refuse_unauthorized(req);
		return;
	}
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


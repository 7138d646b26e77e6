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
#include "daemon/api/processes.h"
#include "daemon/api/reply.h"
#include "daemon/api/request.h"
#include "daemon/http/access.h"
#include "engine/engine.h"
#include "engine/template.h"

struct sandbox *api_lookup(const char *id, struct cove_err *err)
{
	return sandbox_lookup(engine_ctx, id, err);
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
	{ HTTP_POST, "/v1/sandboxes/*/exec", api_exec },
	{ HTTP_POST, "/v1/sandboxes/*/timeout", h_timeout },
	{ HTTP_PUT, "/v1/sandboxes/*/network", h_network },
	{ HTTP_POST, "/v1/sandboxes/*/ports", h_ports_open },
	{ HTTP_GET, "/v1/sandboxes/*/ports", h_ports_list },
	{ HTTP_DELETE, "/v1/sandboxes/*/ports/*", h_port_close },
	{ HTTP_GET, "/v1/sandboxes/*/ports/*/forward", h_port_forward },
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
	{ HTTP_GET, "/v1/sandboxes/*/processes", api_procs_list },
	{ HTTP_GET, "/v1/sandboxes/*/processes/*", api_proc_get },
	{ HTTP_GET, "/v1/sandboxes/*/processes/*/attach", api_proc_attach },
	{ HTTP_POST, "/v1/sandboxes/*/processes/*/stdin", api_proc_stdin },
	{ HTTP_POST, "/v1/sandboxes/*/processes/*/signal", api_proc_signal },
	{ HTTP_POST, "/v1/sandboxes/*/processes/*/resize", api_proc_resize },
	{ HTTP_POST, "/v1/sandboxes/*/sessions", api_sessions_create },
	{ HTTP_GET, "/v1/sandboxes/*/sessions", api_sessions_list },
	{ HTTP_DELETE, "/v1/sandboxes/*/sessions/*", api_session_delete },
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
	{ HTTP_POST, "/v1/templates", h_template_create },
	{ HTTP_GET, "/v1/templates", h_template_list },
	{ HTTP_GET, "/v1/templates/*", h_template_get },
	{ HTTP_DELETE, "/v1/templates/*", h_template_delete },
	{ HTTP_POST, "/v1/sandboxes/*/snapshot.json", api_portable_post },
	{ HTTP_GET, "/v1/images", h_images_list },
	{ HTTP_POST | STREAMING, "/v1/images", h_images_import },
	{ HTTP_POST, "/v1/images/pull", h_images_pull },
	{ HTTP_POST, "/v1/images/prune", h_images_prune },
	{ HTTP_GET, "/v1/images/*", h_image_get },
	{ HTTP_DELETE, "/v1/images/*", h_image_delete },
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
	warm_note_request();
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


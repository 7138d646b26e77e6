/* libcove's Files API and export: see include/cove.h. Uploads stream
 * from a file descriptor (put_from), downloads to a callback (download). */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"

/* "/v1/sandboxes/<id>/files?path=<path, percent-encoded>" into buf. */
static int files_target(char *buf, size_t cap, const char *id, const char *path, struct cove_error *err)
{
	snprintf(buf, cap, "/v1/sandboxes/%s/files", id);
	return client_add_param(buf, cap, '?', "path", path, err);
}

int cove_read_file(struct cove *c, const char *id, const char *path, char **ret_data, size_t *ret_len,
		   struct cove_error *err)
{
	char target[3 * 4096 + 128];
	struct http_response res;
	if (files_target(target, sizeof(target), id, path, err) < 0 ||
	    client_request_raw(c, "GET", target, NULL, 0, NULL, NULL, &res, err) < 0)
		return -1;
	if (res.status >= 300 || strncmp(res.content_type, "application/octet-stream", 24) != 0) {
		if (res.status < 300)
			client_set_error(err, res.status, "invalid_argument", "'%s' is a directory", path);
		else
			client_error_from_body(res.status, res.body, err);
		free(res.body);
		return -1;
	}
	*ret_data = res.body;
	*ret_len = res.body_len;
	return 0;
}

int cove_write_file(struct cove *c, const char *id, const char *path, const void *data, size_t len, const char *mode,
		    struct cove_error *err)
{
	char target[3 * 4096 + 160];
	struct http_response res;
	if (files_target(target, sizeof(target) - 32, id, path, err) < 0)
		return -1;
	if (mode)
		snprintf(target + strlen(target), 32, "&mode=%.8s", mode);
	if (client_request_raw(c, "PUT", target, data, len, NULL, NULL, &res, err) < 0)
		return -1;
	int r = res.status >= 300 ? client_error_from_body(res.status, res.body, err) : 0;
	free(res.body);
	return r;
}

/* PUT target with the body from src; a kept-alive connection the daemon
 * closed meanwhile is retried only when src can be rewound. */
static int put_from(struct cove *c, const char *target, const struct cove_source *src, char **ret_json,
		    struct cove_error *err)
{
	struct http_body_source body = { src->fd, src->len, src->progress, src->arg };
	struct http_response res;
	struct cove_err e = { 0 };
	off_t start = lseek(src->fd, 0, SEEK_CUR);
	for (int attempt = 0; attempt < 2; attempt++) {
		if (client_connect(c, err) < 0)
			return -1;
		memset(&e, 0, sizeof(e));
		bool reused = c->requests_on_fd++ > 0;
		if (http_request_from(c->fd, "PUT", target, c->auth, &body, MAX_RESPONSE, &res, &e) == 0)
			return client_take_json(&res, ret_json, err);
		close(c->fd);
		c->fd = -1;
		if (!reused || e.code != ECONNRESET || start < 0 || lseek(src->fd, start, SEEK_SET) != start)
			break;
	}
	return client_set_error(err, 0, e.code == COVE_EINVAL ? "invalid_argument" : "unreachable", "coved at '%s': %s",
				client_daemon_address(c), e.msg);
}

int cove_write_file_from(struct cove *c, const char *id, const char *path, const struct cove_source *src,
			 const char *mode, struct cove_error *err)
{
	char target[3 * 4096 + 160];
	if (files_target(target, sizeof(target) - 32, id, path, err) < 0)
		return -1;
	if (mode)
		snprintf(target + strlen(target), 32, "&mode=%.8s", mode);
	return put_from(c, target, src, NULL, err);
}

/* ---- the rest of the Files API ---- */

#define FILES_TARGET_MAX (2 * 3 * 4096 + 256)

/* "/v1/sandboxes/<id>/<route>?path=<path>" into buf. */
static int route_target(char *buf, size_t cap, const char *id, const char *route, const char *path,
			struct cove_error *err)
{
	snprintf(buf, cap, "/v1/sandboxes/%s/%s", id, route);
	return client_add_param(buf, cap, '?', "path", path, err);
}

int cove_stat(struct cove *c, const char *id, const char *path, char **ret_json, struct cove_error *err)
{
	char target[FILES_TARGET_MAX];
	if (route_target(target, sizeof(target), id, "files", path, err) < 0 ||
	    client_add_param(target, sizeof(target), '&', "stat", "1", err) < 0)
		return -1;
	return cove_call(c, "GET", target, NULL, ret_json, err);
}

int cove_list(struct cove *c, const char *id, const char *path, int depth, char **ret_json, struct cove_error *err)
{
	char target[FILES_TARGET_MAX], d[16];
	snprintf(d, sizeof(d), "%d", depth);
	if (route_target(target, sizeof(target), id, "files", path, err) < 0 ||
	    client_add_param(target, sizeof(target), '&', "depth", d, err) < 0)
		return -1;
	char *body = NULL;
	if (cove_call(c, "GET", target, NULL, &body, err) < 0)
		return -1;
	json_t *j = json_loads(body, 0, NULL);
	bool listing = json_is_array(json_object_get(j, "entries"));
	json_decref(j);
	if (!listing) { /* a file's bytes */
		free(body);
		return client_set_error(err, 400, "invalid_argument", "'%s' is not a directory", path);
	}
	*ret_json = body;
	return 0;
}

int cove_remove(struct cove *c, const char *id, const char *path, bool recursive, bool *ret_deleted,
		struct cove_error *err)
{
	char target[FILES_TARGET_MAX], *body = NULL;
	if (route_target(target, sizeof(target), id, "files", path, err) < 0 ||
	    (recursive && client_add_param(target, sizeof(target), '&', "recursive", "1", err) < 0) ||
	    cove_call(c, "DELETE", target, NULL, &body, err) < 0)
		return -1;
	json_t *j = json_loads(body, 0, NULL);
	if (ret_deleted)
		*ret_deleted = json_is_true(json_object_get(j, "deleted"));
	json_decref(j);
	free(body);
	return 0;
}

int cove_mkdir(struct cove *c, const char *id, const char *path, struct cove_error *err)
{
	char target[FILES_TARGET_MAX];
	if (route_target(target, sizeof(target), id, "files/mkdir", path, err) < 0)
		return -1;
	return cove_call(c, "POST", target, NULL, NULL, err);
}

int cove_move(struct cove *c, const char *id, const char *from, const char *to, bool overwrite, struct cove_error *err)
{
	char target[FILES_TARGET_MAX];
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/files/move", id);
	if (client_add_param(target, sizeof(target), '?', "from", from, err) < 0 ||
	    client_add_param(target, sizeof(target), '&', "to", to, err) < 0 ||
	    (overwrite && client_add_param(target, sizeof(target), '&', "overwrite", "1", err) < 0))
		return -1;
	return cove_call(c, "POST", target, NULL, NULL, err);
}

int cove_chmod(struct cove *c, const char *id, const char *path, const char *mode, struct cove_error *err)
{
	char target[128];
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/files/chmod", id);
	json_t *j = json_pack("{s:s, s:s}", "path", path, "mode", mode);
	char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	if (!body)
		return client_set_error(err, 0, "invalid_argument", "path or mode is not valid UTF-8");
	int r = cove_call(c, "POST", target, body, NULL, err);
	free(body);
	return r;
}

/* A download's bytes to the caller, noting that some went: a request that
 * delivered anything is never sent again. */
struct download {
	cove_data_fn on_data;
	void *arg;
	bool delivered;
};

static int on_download(void *arg, const char *buf, size_t len)
{
	struct download *d = arg;
	d->delivered = true;
	return d->on_data(d->arg, buf, len);
}

static int download(struct cove *c, const char *target, const char *path, const char *type, cove_data_fn on_data,
		    void *arg, struct cove_export_info *info, struct cove_error *err)
{
	struct download d = { on_data, arg, false };
	struct http_response res;
	struct cove_err e = { 0 };
	for (int attempt = 0; attempt < 2; attempt++) {
		if (client_connect(c, err) < 0)
			return -1;
		memset(&e, 0, sizeof(e));
		bool reused = c->requests_on_fd++ > 0;
		if (http_request_typed_stream(c->fd, "GET", target, type, on_download, &d, MAX_RESPONSE, &res, &e) == 0)
			break;
		close(c->fd);
		c->fd = -1;
		if (!reused || e.code != ECONNRESET || d.delivered)
			return client_set_error(err, 0, "unreachable", "coved at '%s': %s", c->socket_path, e.msg);
	}
	if (c->fd < 0)
		return client_set_error(err, 0, "unreachable", "coved at '%s': %s", c->socket_path, e.msg);
	int r = 0;
	if (info)
		*info = (struct cove_export_info){ res.counts[0], res.counts[1] };
	if (res.status >= 300)
		r = client_error_from_body(res.status, res.body, err);
	else if (res.body) /* collected: not the type asked for */
		r = client_set_error(err, res.status, "invalid_argument", "'%s' is not a %s", path,
				     strcmp(type, "application/x-tar") == 0 ? "directory" : "regular file");
	free(res.body);
	return r;
}

int cove_read_file_stream(struct cove *c, const char *id, const char *path, cove_data_fn on_data, void *arg,
			  struct cove_error *err)
{
	char target[FILES_TARGET_MAX];
	if (route_target(target, sizeof(target), id, "files", path, err) < 0)
		return -1;
	return download(c, target, path, "application/octet-stream", on_data, arg, NULL, err);
}

int cove_read_tar(struct cove *c, const char *id, const char *path, cove_data_fn on_data, void *arg,
		  struct cove_error *err)
{
	char target[FILES_TARGET_MAX];
	if (route_target(target, sizeof(target), id, "files/tar", path, err) < 0)
		return -1;
	return download(c, target, path, "application/x-tar", on_data, arg, NULL, err);
}

int cove_write_tar(struct cove *c, const char *id, const char *path, const void *tar, size_t len, char **ret_json,
		   struct cove_error *err)
{
	char target[FILES_TARGET_MAX];
	struct http_response res;
	if (route_target(target, sizeof(target), id, "files/tar", path, err) < 0 ||
	    client_request_raw(c, "PUT", target, tar, len, NULL, NULL, &res, err) < 0)
		return -1;
	return client_take_json(&res, ret_json, err);
}

int cove_write_tar_from(struct cove *c, const char *id, const char *path, const struct cove_source *src,
			char **ret_json, struct cove_error *err)
{
	char target[FILES_TARGET_MAX];
	if (route_target(target, sizeof(target), id, "files/tar", path, err) < 0)
		return -1;
	return put_from(c, target, src, ret_json, err);
}

int cove_export(struct cove *c, const char *id, const char *path, const char *format, cove_data_fn on_data, void *arg,
		struct cove_error *err)
{
	return cove_export_counted(c, id, path, format, on_data, arg, NULL, err);
}

int cove_export_counted(struct cove *c, const char *id, const char *path, const char *format, cove_data_fn on_data,
			void *arg, struct cove_export_info *info, struct cove_error *err)
{
	char target[FILES_TARGET_MAX];
	bool json = strcmp(format, "json") == 0;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/%s", id, json ? "snapshot.json" : "export");
	if ((!json && client_add_param(target, sizeof(target), '?', "format", format, err) < 0) ||
	    (path && client_add_param(target, sizeof(target), json ? '?' : '&', "path", path, err) < 0))
		return -1;
	const char *type = json                         ? "application/json"
			   : strcmp(format, "zip") == 0 ? "application/zip"
							: "application/x-tar";
	return download(c, target, path ? path : "the changes", type, on_data, arg, info, err);
}

int cove_import_portable(struct cove *c, const char *id, const char *path, const void *json, size_t len,
			 char **ret_json, struct cove_error *err)
{
	char target[FILES_TARGET_MAX];
	struct http_response res;
	snprintf(target, sizeof(target), "/v1/sandboxes/%s/snapshot.json", id);
	if ((path && client_add_param(target, sizeof(target), '?', "path", path, err) < 0) ||
	    client_request_raw(c, "POST", target, json, len, NULL, NULL, &res, err) < 0)
		return -1;
	return client_take_json(&res, ret_json, err);
}

/* A watch's NDJSON stream: lines are gathered in line, each handed to fn. */
struct watch_stream {
	struct client_lines lines;
	cove_watch_fn fn;
	void *arg;
	bool stopped;
	char error_code[32], error_message[512];
};

static int watch_line(void *arg, const char *line, size_t len)
{
	struct watch_stream *s = arg;
	json_t *j = json_loadb(line, len, 0, NULL);
	const char *type = client_line_type(j, s->error_code, s->error_message);
	if (type && strcmp(type, "error") != 0 && strcmp(type, "keepalive") != 0) {
		const char *name = json_string_value(json_object_get(j, "name"));
		struct cove_watch_event ev = { .type = type,
					       .name = name ? name : "",
					       .is_dir = json_is_true(json_object_get(j, "is_dir")),
					       .moved = json_string_value(json_object_get(j, "moved")),
					       .json = line };
		s->stopped = s->fn(s->arg, &ev) != 0;
	}
	json_decref(j);
	return s->stopped ? 1 : 0;
}

static int on_watch_body(void *arg, const char *buf, size_t n)
{
	struct watch_stream *s = arg;
	return client_lines_feed(&s->lines, buf, n);
}

int client_status_of_code(const char *code)
{
	static const struct {
		const char *code;
		int status;
	} map[] = { { "invalid_argument", 400 }, { "permission_denied", 403 }, { "not_found", 404 },
		    { "wrong_state", 409 },      { "too_large", 413 },         { "no_capacity", 429 } };
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(code, map[i].code) == 0)
			return map[i].status;
	return 500;
}

int cove_watch(struct cove *c, const char *id, const char *path, bool recursive, cove_watch_fn fn, void *arg,
	       struct cove_error *err)
{
	char target[3 * 4096 + 128], files[3 * 4096 + 128];
	if (files_target(files, sizeof(files) - 32, id, path, err) < 0)
		return -1;
	/* ".../files?path=P" becomes ".../files/watch?path=P[&recursive=1]" */
	const char *query = strchr(files, '?');
	snprintf(target, sizeof(target), "%.*s/watch%s%s", (int)(query - files), files, query,
		 recursive ? "&recursive=1" : "");
	struct watch_stream s = { .fn = fn, .arg = arg };
	s.lines = (struct client_lines){ .fn = watch_line, .arg = &s };
	struct http_response res;
	int r = client_request_raw(c, "GET", target, NULL, 0, on_watch_body, &s, &res, err);
	if (s.stopped) {
		r = 0; /* our own doing: the connection is closed, coved frees the watch */
		if (err)
			memset(err, 0, sizeof(*err));
	} else if (r == 0 && s.error_code[0]) {
		r = client_set_error(err, res.status >= 300 ? res.status : client_status_of_code(s.error_code),
				     s.error_code, "%s", s.error_message);
	} else if (r == 0) {
		r = client_set_error(err, res.status >= 300 ? res.status : 0, "unreachable",
				     "the watch stream ended early");
	}
	free(s.lines.line);
	return r;
}

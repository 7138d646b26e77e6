/* cove's REST Files API: each handler parses the query (and a chmod's or
 * an import's body) into the engine's typed request (engine/files.h),
 * calls the engine and encodes its answer.
 *
 * One-answer operations (read, stat, list, write, remove, mkdir, move,
 * chmod, a tar's or a portable snapshot's import) are a struct call: the
 * engine's done callback answers, and the connection's close cancels the
 * operation. A body (PUT /files, PUT /files/tar) goes from httpd to the
 * engine as it comes (files_write_data writes it before returning), so
 * what waits in coved is httpd's buffer, HTTP_BODY_HIGH_WATER at most.
 * Tree downloads (GET /files/tar, /export, GET /snapshot.json) are an
 * http_output (reply.h) whose bytes go out as chunks. */
#include <event2/buffer.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/encoding.h"
#include "daemon/api/files.h"
#include "daemon/api/reply.h"
#include "daemon/api/request.h"
#include "daemon/http/conn.h"
#include "engine/engine.h"
#include "engine/files.h"
#include "engine/output.h"

#define USER_MAX 64 /* bytes, with the NUL */

/* ---- parsing ---- */

/* "0644" or "644": permission bits, octal. */
static int get_mode(const char *query, uint32_t *ret, bool *given, struct cove_err *err)
{
	char v[16], *end;
	int r = query_param(query, "mode", v, sizeof(v), err);
	if (r <= 0)
		return r;
	unsigned long m = strtoul(v, &end, 8);
	if (!v[0] || *end || m > 07777)
		return err_set(err, COVE_EINVAL, "'mode' must be octal permission bits, like 0644");
	*ret = (uint32_t)m;
	*given = true;
	return 0;
}

/* "depth": 1 (the directory's own entries) to FILES_MAX_DEPTH. */
static int get_depth(const char *query, int *ret, struct cove_err *err)
{
	char v[16], *end;
	int r = query_param(query, "depth", v, sizeof(v), err);
	if (r <= 0)
		return r;
	long d = strtol(v, &end, 10);
	if (!v[0] || *end || d < 1 || d > FILES_MAX_DEPTH)
		return err_set(err, COVE_EINVAL, "'depth' must be an integer from 1 to %d", FILES_MAX_DEPTH);
	*ret = (int)d;
	return 0;
}

/* What every Files request names: the sandbox, a path (a move's from and
 * to), the user. */
struct target {
	struct sandbox *sb;
	char path[PATH_MAX];
	char path2[PATH_MAX];
	char user_buf[USER_MAX];
	const char *user; /* NULL: the sandbox's */
	bool path_given;  /* a tree's: else the workspace */
};

/* The sandbox (404, 409), then the query's parameters: only params,
 * "path" (or "from" and "to") required, "user". */
static int parse_target(struct http_req *req, const char *id, const char *const *params, bool move, struct target *t,
			struct cove_err *err)
{
	const char *q = query_of(req);
	t->sb = sandbox_lookup(engine_ctx, id, err);
	if (!t->sb || files_sandbox_ready(t->sb, err) < 0 || check_params(q, params, err) < 0)
		return -1;
	if (move ? get_path(q, "from", t->path, err) < 0 || get_path(q, "to", t->path2, err) < 0
		 : get_path(q, "path", t->path, err) < 0)
		return -1;
	int r = query_param(q, "user", t->user_buf, sizeof(t->user_buf), err);
	if (r < 0)
		return -1;
	t->user = r ? t->user_buf : NULL;
	return 0;
}

/* ---- one answer ---- */

/* A request waiting for the engine's answer. */
struct call {
	struct http_req *req;
	struct http_conn *conn;
	struct file_op *op;
	void (*answer)(struct http_req *req, const struct files_result *res);
	/* Inside http_req_take_body, which may call on_data and on_end in a
	 * row: an end meanwhile (ended) frees c only once it returns. */
	bool taking, ended;
};

/* c is done with: now, or once http_req_take_body returns. */
static void call_free(struct call *c)
{
	if (c->taking)
		c->ended = true;
	else
		free(c);
}

/* The client is gone: the engine forgets the operation. */
static void on_conn_closed(struct http_conn *conn, void *arg)
{
	struct call *c = arg;
	files_cancel(c->op);
	call_free(c);
}

static void on_done(void *arg, const struct files_result *res, const struct cove_err *err)
{
	struct call *c = arg;
	conn_clear_hook(c->conn, c);
	if (err)
		reply_error(c->req, err);
	else
		c->answer(c->req, res);
	call_free(c);
}

/* A call for req, watching its connection; NULL with err. */
static struct call *call_new(struct http_req *req, void (*answer)(struct http_req *, const struct files_result *),
			     struct cove_err *err)
{
	struct call *c = calloc(1, sizeof(*c));
	if (c) {
		c->req = req;
		c->conn = http_req_conn(req);
		c->answer = answer;
	}
	if (!c || conn_set_hook(c->conn, on_conn_closed, c) < 0) {
		free(c);
		err_set(err, COVE_EINTERNAL, "out of memory");
		return NULL;
	}
	return c;
}

/* The engine refused: nothing was started. */
static int call_fail(struct call *c)
{
	conn_clear_hook(c->conn, c);
	free(c);
	return -1;
}

/* s as a JSON string; bytes that are not UTF-8 show as U+FFFD (a file name
 * need not be UTF-8). */
static json_t *json_text(const char *s)
{
	size_t n = strlen(s);
	int valid;
	if (utf8_valid_prefix(s, n, &valid) == n && valid)
		return json_stringn(s, n);
	_cleanup_free_ char *t = malloc(3 * n + 1);
	return t ? json_stringn(t, utf8_sanitize(s, n, t, 3 * n + 1)) : NULL;
}

static void answer_json(struct http_req *req, int status, json_t *body)
{
	struct cove_err err = { 0 };
	if (body) {
		reply_json(req, status, body);
		return;
	}
	err_set(&err, COVE_EINTERNAL, "out of memory");
	reply_error(req, &err);
}

/* {name, path, type, size, mode, mtime, uid, gid[, target]}: a stat's and
 * a listing entry's shape. */
static json_t *entry_json(const struct files_entry *e)
{
	static const char *const types[] = {
		[FILES_FILE] = "file", [FILES_DIR] = "dir", [FILES_SYMLINK] = "symlink", [FILES_OTHER] = "other"
	};
	char m[8];
	snprintf(m, sizeof(m), "%04o", (unsigned)(e->mode & 07777));
	json_t *j = json_pack("{s:o, s:o, s:s, s:I, s:s, s:I, s:I, s:I}", "name", json_text(e->name), "path",
			      json_text(e->path), "type", types[e->type], "size", (json_int_t)e->size, "mode", m,
			      "mtime", (json_int_t)e->mtime, "uid", (json_int_t)e->uid, "gid", (json_int_t)e->gid);
	if (j && e->target)
		json_object_set_new(j, "target", json_text(e->target));
	return j;
}

static json_t *listing_json(const struct files_listing *l)
{
	json_t *entries = json_array();
	for (size_t i = 0; entries && i < l->n; i++)
		json_array_append_new(entries, entry_json(&l->entries[i]));
	return json_pack("{s:o, s:o, s:b}", "path", json_text(l->path), "entries", entries, "truncated", l->truncated);
}

/* A file's bytes, sent from its fd (sendfile); a listing; a stat. */
static void answer_read(struct http_req *req, const struct files_result *res)
{
	if (res->fd >= 0) {
		evhttp_add_header(http_req_out_headers(req), "Content-Type", "application/octet-stream");
		http_send_file(req, 200, "OK", res->fd, res->size);
	} else if (res->listing) {
		answer_json(req, 200, listing_json(res->listing));
	} else {
		answer_json(req, 200, entry_json(res->stat));
	}
}

static void answer_write(struct http_req *req, const struct files_result *res)
{
	answer_json(req, res->changed ? 201 : 200,
		    json_pack("{s:o, s:I}", "path", json_text(res->path), "size", (json_int_t)res->size));
}

static void answer_remove(struct http_req *req, const struct files_result *res)
{
	answer_json(req, 200, json_pack("{s:o, s:b}", "path", json_text(res->path), "deleted", res->changed));
}

static void answer_mkdir(struct http_req *req, const struct files_result *res)
{
	answer_json(req, res->changed ? 201 : 200,
		    json_pack("{s:o, s:b}", "path", json_text(res->path), "created", res->changed));
}

static void answer_move(struct http_req *req, const struct files_result *res)
{
	answer_json(req, 200, json_pack("{s:o, s:o}", "from", json_text(res->path), "to", json_text(res->path2)));
}

static void answer_chmod(struct http_req *req, const struct files_result *res)
{
	char mode[8];
	snprintf(mode, sizeof(mode), "%04o", (unsigned)res->mode);
	answer_json(req, 200, json_pack("{s:o, s:s}", "path", json_text(res->path), "mode", mode));
}

static void answer_extract(struct http_req *req, const struct files_result *res)
{
	answer_json(req, 200,
		    json_pack("{s:o, s:I, s:i, s:b}", "path", json_text(res->path), "entries", (json_int_t)res->entries,
			      "skipped", (int)res->skipped, "created", res->changed));
}

/* ---- bodies ---- */

static void on_body_data(struct http_req *req, struct evbuffer *buf, void *arg)
{
	struct call *c = arg;
	if (!c->ended)
		(void)files_write_data(c->op, buf); /* -1: answered (c ended) */
}

static void on_body_end(struct http_req *req, void *arg)
{
	struct call *c = arg;
	if (!c->ended)
		files_write_end(c->op);
}

/* The engine wants the body: from now on, as it comes (what came already
 * at once, and its end too if it is whole). */
static void take_body(struct call *c)
{
	c->taking = true;
	http_req_take_body(c->req, on_body_data, on_body_end, c);
	c->taking = false;
	if (c->ended)
		free(c);
}

static void on_ready(void *arg)
{
	take_body(arg);
}

/* ---- handlers ---- */

int api_files_get(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", "stat", "user", "depth", NULL };
	struct files_read_req rq = { .depth = 1 };
	struct target t;
	struct call *c;
	if (get_flag(query_of(req), "stat", &rq.stat, err) < 0 || get_depth(query_of(req), &rq.depth, err) < 0 ||
	    parse_target(req, id, params, false, &t, err) < 0 || !(c = call_new(req, answer_read, err)))
		return -1;
	rq.path = t.path;
	rq.user = t.user;
	return files_read(t.sb, &rq, on_done, c, &c->op, err) < 0 ? call_fail(c) : 0;
}

int api_files_put(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", "mode", "user", "parents", NULL };
	struct files_write_req rq = { .mode = 0644 };
	struct target t;
	struct call *c;
	if (get_mode(query_of(req), &rq.mode, &rq.mode_given, err) < 0 ||
	    get_flag(query_of(req), "parents", &rq.parents, err) < 0 ||
	    parse_target(req, id, params, false, &t, err) < 0 || !(c = call_new(req, answer_write, err)))
		return -1;
	rq.path = t.path;
	rq.user = t.user;
	return files_write(t.sb, &rq, on_ready, on_done, c, &c->op, err) < 0 ? call_fail(c) : 0;
}

int api_files_delete(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", "recursive", "user", NULL };
	struct files_remove_req rq = { 0 };
	struct target t;
	struct call *c;
	if (get_flag(query_of(req), "recursive", &rq.recursive, err) < 0 ||
	    parse_target(req, id, params, false, &t, err) < 0 || !(c = call_new(req, answer_remove, err)))
		return -1;
	rq.path = t.path;
	rq.user = t.user;
	return files_remove(t.sb, &rq, on_done, c, &c->op, err) < 0 ? call_fail(c) : 0;
}

int api_files_mkdir(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", "user", NULL };
	struct target t;
	struct call *c;
	if (parse_target(req, id, params, false, &t, err) < 0 || !(c = call_new(req, answer_mkdir, err)))
		return -1;
	struct files_mkdir_req rq = { .path = t.path, .user = t.user };
	return files_mkdir(t.sb, &rq, on_done, c, &c->op, err) < 0 ? call_fail(c) : 0;
}

int api_files_move(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "from", "to", "overwrite", "user", NULL };
	struct files_move_req rq = { 0 };
	struct target t;
	struct call *c;
	if (get_flag(query_of(req), "overwrite", &rq.overwrite, err) < 0 ||
	    parse_target(req, id, params, true, &t, err) < 0 || !(c = call_new(req, answer_move, err)))
		return -1;
	rq.from = t.path;
	rq.to = t.path2;
	rq.user = t.user;
	return files_move(t.sb, &rq, on_done, c, &c->op, err) < 0 ? call_fail(c) : 0;
}

/* chmod's body: {"path", "mode": "0755" (octal) or 493, "user"}. */
static int parse_chmod(struct http_req *req, struct target *t, uint32_t *ret_mode, struct cove_err *err)
{
	struct evbuffer *b = http_req_body(req);
	json_error_t je;
	const char *key, *p = NULL, *user = NULL;
	json_t *v, *mode = NULL;
	size_t n = evbuffer_get_length(b);
	json_t *j = n ? json_loadb((const char *)evbuffer_pullup(b, -1), n, JSON_REJECT_DUPLICATES, &je) : NULL;
	if (!json_is_object(j)) {
		json_decref(j);
		return err_set(err, COVE_EINVAL, "the body must be a JSON object {\"path\", \"mode\"}");
	}
	int r = 0;
	json_object_foreach(j, key, v)
	{
		if (strcmp(key, "mode") == 0)
			mode = v;
		else if (strcmp(key, "path") == 0 && json_is_string(v))
			p = json_string_value(v);
		else if (strcmp(key, "user") == 0 && json_is_string(v))
			user = json_string_value(v);
		else if (r == 0)
			r = err_set(err, COVE_EINVAL, "unknown field or wrong type: '%s'", key);
	}
	char *end = NULL;
	long m = json_is_integer(mode)  ? (long)json_integer_value(mode)
		 : json_is_string(mode) ? strtol(json_string_value(mode), &end, 8)
					: -1;
	if (r == 0 && (m < 0 || m > 07777 || (end && (*end || !json_string_length(mode)))))
		r = err_set(err, COVE_EINVAL,
			    "'mode' must be permission bits: an octal string like \"0755\" or a number");
	if (r == 0 &&
	    (!p || p[0] != '/' || strlen(p) >= PATH_MAX || strlen(p) != json_string_length(json_object_get(j, "path"))))
		r = err_set(err, COVE_EINVAL, "'path' must be an absolute path");
	if (r == 0 && user && (strlen(user) >= sizeof(t->user_buf) || !user[0]))
		r = err_set(err, COVE_EINVAL, "'user' must be a user name or uid");
	if (r == 0) {
		snprintf(t->path, sizeof(t->path), "%s", p);
		snprintf(t->user_buf, sizeof(t->user_buf), "%s", user ? user : "");
		t->user = user ? t->user_buf : NULL;
		*ret_mode = (uint32_t)m;
	}
	json_decref(j);
	return r;
}

int api_files_chmod(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { NULL };
	struct files_chmod_req rq = { 0 };
	struct target t;
	struct call *c;
	t.sb = sandbox_lookup(engine_ctx, id, err);
	if (!t.sb || parse_chmod(req, &t, &rq.mode, err) < 0 || files_sandbox_ready(t.sb, err) < 0 ||
	    check_params(query_of(req), params, err) < 0 || !(c = call_new(req, answer_chmod, err)))
		return -1;
	rq.path = t.path;
	rq.user = t.user;
	return files_chmod(t.sb, &rq, on_done, c, &c->op, err) < 0 ? call_fail(c) : 0;
}

/* ---- trees ---- */

/* A tree download: its format says its content type. */
struct tree_call {
	struct http_output ho;
	enum tree_format format;
};

static void tree_encode(struct http_output *ho, const struct out_event *ev)
{
	static const char *const types[] = {
		[TREE_TAR] = "application/x-tar", [TREE_ZIP] = "application/zip", [TREE_JSON] = "application/json"
	};
	struct tree_call *t = ho->arg;
	if (ev->type == OUT_START && ev->changes) {
		/* An export of the changes: what it holds, known before its bytes
		 * (a client says so when it is empty). */
		char n[24];
		snprintf(n, sizeof(n), "%" PRIu64, ev->changes->entries);
		evhttp_add_header(http_req_out_headers(ho->req), "X-Cove-Entries", n);
		snprintf(n, sizeof(n), "%" PRIu64, ev->changes->deletions);
		evhttp_add_header(http_req_out_headers(ho->req), "X-Cove-Deleted", n);
	}
	if (ev->type == OUT_START) {
		reply_start(ho, types[t->format]);
	} else if (ev->type == OUT_BYTES && ho->started && ev->buf) {
		reply_chunk(ho, ev->buf);
	} else if (ev->type == OUT_BYTES && ho->started) {
		struct evbuffer *b = evbuffer_new();
		if (b && evbuffer_add(b, ev->data, ev->len) == 0)
			reply_chunk(ho, b);
		if (b)
			evbuffer_free(b);
	}
}

/* A tree cut short must not look whole: its connection is cut. */
static void tree_finish(struct http_output *ho, const struct cove_err *err)
{
	struct cove_err internal = { .code = COVE_EINTERNAL };
	if (ho->req && ho->started && err)
		reply_abort(ho);
	else if (ho->req && ho->started)
		reply_end(ho);
	else if (ho->req)
		reply_error(ho->req, err ? err : &internal);
}

static void tree_free(struct http_output *ho)
{
	free(ho->arg);
}

static const struct http_output_route tree_route = { .encode = tree_encode, .finish = tree_finish, .free = tree_free };

static int tree_out(struct http_req *req, struct sandbox *sb, const struct files_tree_req *rq, struct cove_err *err)
{
	struct tree_call *t = calloc(1, sizeof(*t));
	if (!t)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	t->format = rq->format;
	if (http_output_init(&t->ho, req, &tree_route, t, err) < 0) {
		free(t);
		return -1;
	}
	if (files_tree_out(sb, rq, &t->ho.out, err) < 0) {
		http_output_abandon(&t->ho);
		free(t);
		return -1;
	}
	return 0;
}

int api_files_tar_get(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", "user", NULL };
	struct target t;
	if (parse_target(req, id, params, false, &t, err) < 0)
		return -1;
	struct files_tree_req rq = { .path = t.path, .user = t.user, .format = TREE_TAR };
	return tree_out(req, t.sb, &rq, err);
}

int api_files_tar_put(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", "user", NULL };
	struct target t;
	struct call *c;
	if (parse_target(req, id, params, false, &t, err) < 0 || !(c = call_new(req, answer_extract, err)))
		return -1;
	struct files_tree_req rq = { .path = t.path, .user = t.user, .format = TREE_TAR };
	if (files_tar_in(t.sb, &rq, on_done, c, &c->op, err) < 0)
		return call_fail(c);
	take_body(c); /* may be answered at once, and c freed: last */
	return 0;
}

/* The sandbox, then "path" when given (else the workspace: NULL), then
 * 409, then only params. */
static int parse_tree(struct http_req *req, const char *id, const char *const *params, struct target *t,
		      struct cove_err *err)
{
	const char *q = query_of(req);
	t->sb = sandbox_lookup(engine_ctx, id, err);
	int r = t->sb ? query_param(q, "path", t->path, sizeof(t->path), err) : -1;
	if (r < 0)
		return -1;
	if (r == 1 && t->path[0] != '/')
		return err_set(err, COVE_EINVAL, "'path' must be an absolute path");
	if (files_sandbox_ready(t->sb, err) < 0 || check_params(q, params, err) < 0)
		return -1;
	t->user = NULL;
	t->path_given = r == 1;
	return 0;
}

int api_export_get(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "format", "path", NULL };
	char format[8] = "tar";
	struct target t;
	if (!sandbox_lookup(engine_ctx, id, err))
		return -1;
	if (query_param(query_of(req), "format", format, sizeof(format), err) < 0 ||
	    (strcmp(format, "tar") != 0 && strcmp(format, "zip") != 0))
		return err_set(err, COVE_EINVAL, "'format' must be tar or zip");
	if (parse_tree(req, id, params, &t, err) < 0)
		return -1;
	struct files_tree_req rq = { .path = t.path_given ? t.path : NULL,
				     .format = strcmp(format, "zip") == 0 ? TREE_ZIP : TREE_TAR };
	return tree_out(req, t.sb, &rq, err);
}

int api_portable_get(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", NULL };
	struct target t;
	if (parse_tree(req, id, params, &t, err) < 0)
		return -1;
	struct files_tree_req rq = { .path = t.path_given ? t.path : NULL, .format = TREE_JSON };
	return tree_out(req, t.sb, &rq, err);
}

int api_portable_post(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", NULL };
	struct evbuffer *body = http_req_body(req);
	size_t n = evbuffer_get_length(body);
	struct target t;
	struct call *c;
	if (parse_tree(req, id, params, &t, err) < 0 || !(c = call_new(req, answer_extract, err)))
		return -1;
	/* The body lives as long as req: until the answer, or the close that
	 * cancels the import. */
	struct files_tree_req rq = { .path = t.path_given ? t.path : NULL,
				     .format = TREE_JSON,
				     .doc = n ? (const char *)evbuffer_pullup(body, -1) : NULL,
				     .doc_len = n };
	return files_portable_in(t.sb, &rq, on_done, c, &c->op, err) < 0 ? call_fail(c) : 0;
}

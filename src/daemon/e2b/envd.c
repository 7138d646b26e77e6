/* envd's REST routes, /files (GET a file's bytes; POST files, multipart or
 * octet-stream, gzip allowed), over the engine's Files operations
 * (engine/files.h); and what envd's Files calls share (fscall.h). */
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/cleanup.h"
#include "daemon/api/request.h"
#include "daemon/e2b/fscall.h"
#include "daemon/http/conn.h"
#include "engine/engine.h"

/* ---- shared ---- */

static void on_conn_closed(struct http_conn *conn, void *arg)
{
	struct fscall *fc = arg;
	fc->conn = NULL;
	fc->req = NULL;
	if (fc->op)
		files_cancel(fc->op);
	fscall_free(fc);
}

struct fscall *fscall_new(struct envd_req *er, files_done_fn done)
{
	struct fscall *fc = calloc(1, sizeof(*fc));
	if (fc && conn_set_hook(http_req_conn(er->req), on_conn_closed, fc) < 0) {
		free(fc);
		fc = NULL;
	}
	if (!fc) {
		e2b_error(er->req, 500, "out of memory");
		return NULL;
	}
	fc->req = er->req;
	fc->conn = http_req_conn(er->req);
	fc->sb = er->sb;
	fc->done = done;
	snprintf(fc->user, sizeof(fc->user), "%s", er->user);
	return fc;
}

void fscall_unbind(struct fscall *fc)
{
	fc->op = NULL;
}

void fscall_free(struct fscall *fc)
{
	if (fc->conn)
		conn_clear_hook(fc->conn, fc);
	if (fc->plain)
		evbuffer_free(fc->plain);
	json_decref(fc->written);
	free(fc->parts);
	free(fc);
}

const char *fscall_user(const struct fscall *fc)
{
	return fc->user[0] ? fc->user : NULL;
}

/* Go's FileMode.String() for a type and permission bits. */
static void permissions(enum files_type t, uint32_t mode, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";
	out[0] = t == FILES_DIR ? 'd' : t == FILES_SYMLINK ? 'L' : '-';
	for (int i = 0; i < 9; i++)
		out[1 + i] = mode & (1u << (8 - i)) ? rwx[i] : '-';
	out[10] = '\0';
}

json_t *entry_info(const struct files_entry *e)
{
	static const char *const types[] = { "FILE_TYPE_FILE", "FILE_TYPE_DIRECTORY", "FILE_TYPE_SYMLINK",
					     "FILE_TYPE_UNSPECIFIED" };
	char perm[11], size[24], when[32], uid[16], gid[16];
	time_t s = (time_t)e->mtime;
	struct tm tm;
	gmtime_r(&s, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	permissions(e->type, e->mode, perm);
	snprintf(size, sizeof(size), "%llu", (unsigned long long)e->size);
	snprintf(uid, sizeof(uid), "%u", e->uid);
	snprintf(gid, sizeof(gid), "%u", e->gid);
	json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:s}", "name", e->name, "type",
			      types[e->type <= FILES_OTHER ? e->type : FILES_OTHER], "path", e->path, "size", size,
			      "mode", (int)(e->mode & 0777), "permissions", perm, "owner", e->uid ? uid : "root",
			      "group", e->gid ? gid : "root", "modifiedTime", when);
	if (e->target)
		json_object_set_new(j, "symlinkTarget", json_string(e->target));
	return j;
}

int envd_abs_path(const struct envd_req *er, const char *path, char *out, size_t cap, struct cove_err *err)
{
	const char *user = er->user[0] ? er->user : er->sb->spec.user[0] ? er->sb->spec.user : "root";
	char home[96];
	if (strcmp(user, "root") == 0 || strcmp(user, "0") == 0)
		snprintf(home, sizeof(home), "/root");
	else
		snprintf(home, sizeof(home), "/home/%s", user);
	int n;
	if (path[0] == '/')
		n = snprintf(out, cap, "%s", path);
	else if (path[0] == '~' && (path[1] == '/' || !path[1]))
		n = snprintf(out, cap, "%s%s", home, path + 1);
	else
		n = snprintf(out, cap, "%s/%s", home, path);
	if (n < 0 || (size_t)n >= cap)
		return err_set(err, COVE_EINVAL, "the path is too long");
	return 0;
}

/* ---- GET /files ---- */

/* The query's path (required) and username. */
int envd_files_query(struct envd_req *er, bool need_path, char *path, struct cove_err *err)
{
	static const char *const params[] = { "path", "username", "signature", "signature_expiration", NULL };
	const char *q = query_of(er->req);
	char raw[PATH_MAX] = "";
	int r = check_params(q, params, err) < 0 ? -1 : query_param(q, "path", raw, sizeof(raw), err);
	if (r < 0 || query_param(q, "username", er->user, sizeof(er->user), err) < 0)
		return -1;
	if (r == 0 && need_path)
		return err_set(err, COVE_EINVAL, "'path' is required");
	path[0] = '\0';
	return r == 0 ? 0 : envd_abs_path(er, raw, path, PATH_MAX, err);
}

void envd_files_error(struct http_req *req, const char *path, const struct cove_err *err)
{
	if (err->code == COVE_ENOTFOUND)
		e2b_error(req, 404, "path '%s' does not exist", path);
	else if (err->code == COVE_ETOOBIG) /* ENOSPC, EDQUOT, EFBIG: the SDK's NotEnoughSpaceError */
		e2b_error(req, 507, "not enough disk space: %s", err->msg);
	else
		e2b_error_of(req, err);
}

static void got_file(void *arg, const struct files_result *res, const struct cove_err *err)
{
	struct fscall *fc = arg;
	fscall_unbind(fc);
	if (err) {
		envd_files_error(fc->req, fc->path, err);
	} else if (res->fd < 0) {
		e2b_error(fc->req, 400, "path '%s' is a directory", fc->path);
	} else {
		evhttp_add_header(http_req_out_headers(fc->req), "Content-Type", "application/octet-stream");
		http_send_file(fc->req, 200, "OK", res->fd, res->size);
	}
	fscall_free(fc);
}

void envd_files_get(struct envd_req *er)
{
	struct cove_err err = { 0 };
	char path[PATH_MAX];
	if (envd_files_query(er, true, path, &err) < 0) {
		e2b_error_of(er->req, &err);
		return;
	}
	struct fscall *fc = fscall_new(er, got_file);
	if (!fc)
		return;
	snprintf(fc->path, sizeof(fc->path), "%s", path);
	struct files_read_req rq = { .path = fc->path, .user = fscall_user(fc), .depth = 1 };
	if (files_read(er->sb, &rq, got_file, fc, &fc->op, &err) < 0) {
		envd_files_error(er->req, path, &err);
		fscall_free(fc);
	}
}

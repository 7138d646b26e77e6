/* envd's filesystem.Filesystem service over the engine's Files operations
 * (engine/files.h): Stat, ListDir, MakeDir, Move, Remove; each a unary
 * Connect call answered when the engine's done comes. WatchDir streams
 * the engine's watch; the polled watchers are watcher.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/api/request.h"
#include "daemon/e2b/connect.h"
#include "daemon/e2b/fscall.h"
#include "engine/engine.h"
#include "engine/output.h"
#include "engine/watch.h"

enum fs_method { FS_STAT, FS_LIST, FS_MKDIR, FS_MOVE, FS_MOVE_STAT, FS_REMOVE, FS_WATCHER };

static void fs_done(void *arg, const struct files_result *res, const struct cove_err *err);

static int fs_stat(struct fscall *fc, const char *path, struct cove_err *err)
{
	struct files_read_req rq = { .path = path, .user = fscall_user(fc), .stat = true };
	return files_read(fc->sb, &rq, fs_done, fc, &fc->op, err);
}

static void answer(struct fscall *fc, const struct files_result *res)
{
	enum fs_method m = (enum fs_method)(intptr_t)fc->arg;
	json_t *entries;
	switch (m) {
	case FS_STAT:
	case FS_MOVE_STAT:
		connect_reply(fc->req, json_pack("{s:o}", "entry", entry_info(res->stat)));
		break;
	case FS_LIST:
		if (!res->listing) {
			if (res->fd >= 0)
				close(res->fd);
			connect_reply_error(fc->req, "invalid_argument", "path '%s' is not a directory", fc->path);
			break;
		}
		entries = json_array();
		for (size_t i = 0; i < res->listing->n; i++)
			json_array_append_new(entries, entry_info(&res->listing->entries[i]));
		connect_reply(fc->req, json_pack("{s:o}", "entries", entries));
		break;
	case FS_MKDIR:
		if (!res->changed) {
			connect_reply_error(fc->req, "already_exists", "directory '%s' already exists", fc->path);
			break;
		}
		connect_reply(fc->req, json_pack("{s:{s:s, s:s, s:s}}", "entry", "name", strrchr(fc->path, '/') + 1,
						 "type", "FILE_TYPE_DIRECTORY", "path", fc->path));
		break;
	default:
		connect_reply(fc->req, json_object());
	}
}

static void fs_done(void *arg, const struct files_result *res, const struct cove_err *err)
{
	struct fscall *fc = arg;
	enum fs_method m = (enum fs_method)(intptr_t)fc->arg;
	struct cove_err err2 = { 0 };
	fscall_unbind(fc);
	if (err && m == FS_REMOVE && err->code == COVE_ENOTFOUND) {
		connect_reply(fc->req, json_object()); /* envd's RemoveAll */
	} else if (err) {
		connect_reply_err(fc->req, err);
	} else if (m == FS_MOVE) {
		fc->arg = (void *)(intptr_t)FS_MOVE_STAT;
		if (fs_stat(fc, fc->path2, &err2) == 0)
			return;
		connect_reply_err(fc->req, &err2);
	} else {
		answer(fc, res);
	}
	fscall_free(fc);
}

int fs_request_path(struct envd_req *er, json_t *j, const char *key, char *out, struct cove_err *err)
{
	const char *p = NULL;
	if (get_string(j, key, &p, PATH_MAX - 1, err) < 0)
		return -1;
	if (!p || !*p)
		return err_set(err, COVE_EINVAL, "'%s' is required", key);
	return envd_abs_path(er, p, out, PATH_MAX, err);
}

static int start(struct envd_req *er, struct fscall *fc, enum fs_method m, json_t *j, struct cove_err *err)
{
	double depth = 1;
	const char *user = fscall_user(fc);
	fc->arg = (void *)(intptr_t)m;
	if (fs_request_path(er, j, m == FS_MOVE ? "source" : "path", fc->path, err) < 0 ||
	    (m == FS_MOVE && fs_request_path(er, j, "destination", fc->path2, err) < 0) ||
	    get_number(j, "depth", 0, FILES_MAX_DEPTH, &depth, err) < 0)
		return -1;
	if (m == FS_STAT)
		return fs_stat(fc, fc->path, err);
	if (m == FS_LIST) {
		struct files_read_req rq = { .path = fc->path, .user = user, .depth = depth < 1 ? 1 : (int)depth };
		return files_read(fc->sb, &rq, fs_done, fc, &fc->op, err);
	}
	if (m == FS_MKDIR) {
		struct files_mkdir_req rq = { .path = fc->path, .user = user };
		return files_mkdir(fc->sb, &rq, fs_done, fc, &fc->op, err);
	}
	if (m == FS_MOVE) {
		struct files_move_req rq = { .from = fc->path, .to = fc->path2, .user = user, .overwrite = true };
		return files_move(fc->sb, &rq, fs_done, fc, &fc->op, err);
	}
	struct files_remove_req rq = { .path = fc->path, .user = user, .recursive = true };
	return files_remove(fc->sb, &rq, fs_done, fc, &fc->op, err);
}

/* ---- WatchDir: a stream of the engine's watch events ---- */

json_t *fs_event_json(const struct watch_event *w)
{
	static const char *const types[] = {
		[WATCH_CREATE] = "EVENT_TYPE_CREATE", [WATCH_WRITE] = "EVENT_TYPE_WRITE",
		[WATCH_REMOVE] = "EVENT_TYPE_REMOVE", [WATCH_RENAME] = "EVENT_TYPE_RENAME",
		[WATCH_CHMOD] = "EVENT_TYPE_CHMOD",
	};
	if (w->type < WATCH_CREATE || w->type > WATCH_CHMOD || !w->name)
		return NULL;
	return json_pack("{s:s, s:s}", "name", w->name, "type", types[w->type]);
}

static void watch_event(struct connect_stream *cs, const struct out_event *ev)
{
	const struct watch_event *w = ev->event;
	json_t *j;
	if (ev->type != OUT_EVENT)
		return; /* the stream's own keepalives stand for the engine's */
	if (w->type == WATCH_START)
		connect_stream_send(cs, json_pack("{s:{}}", "start"));
	else if ((j = fs_event_json(w)))
		connect_stream_send(cs, json_pack("{s:o}", "filesystem", j));
}

static void watch_dir(struct envd_req *er)
{
	json_t *j;
	if (connect_read(er, true, &j) < 0)
		return;
	struct cove_err err = { 0 };
	char path[PATH_MAX];
	struct watch_request rq = { .path = path,
				    .user = er->user[0] ? er->user : NULL,
				    .keepalive = WATCH_MAX_KEEPALIVE };
	struct connect_stream *cs = NULL;
	int r = fs_request_path(er, j, "path", path, &err) < 0 || get_bool(j, "recursive", &rq.recursive, &err) < 0 ? -1
														    : 0;
	if (r == 0 && !(cs = connect_stream_new(er->req, false, &err)))
		r = -1;
	if (cs)
		cs->on_event = watch_event;
	if (r == 0 && (r = watch_start(er->sb, &rq, &cs->ho.out, &err)) < 0)
		connect_stream_abandon(cs);
	if (r < 0)
		connect_stream_fail(er->req, connect_code_of(err.code), err.msg);
	json_decref(j);
}

void filesystem_service(struct envd_req *er, const char *method)
{
	if (strcmp(method, "WatchDir") == 0)
		return watch_dir(er);
	static const struct {
		const char *name;
		enum fs_method m;
	} methods[] = {
		{ "Stat", FS_STAT },
		{ "ListDir", FS_LIST },
		{ "MakeDir", FS_MKDIR },
		{ "Move", FS_MOVE },
		{ "Remove", FS_REMOVE },
		{ "CreateWatcher", FS_WATCHER },
		{ "GetWatcherEvents", FS_WATCHER },
		{ "RemoveWatcher", FS_WATCHER },
	};
	size_t i = 0;
	while (i < sizeof(methods) / sizeof(methods[0]) && strcmp(methods[i].name, method) != 0)
		i++;
	if (i == sizeof(methods) / sizeof(methods[0])) {
		connect_reply_error(er->req, "unimplemented", "filesystem.Filesystem has no method '%s'", method);
		return;
	}
	json_t *j;
	struct cove_err err = { 0 };
	if (connect_read(er, false, &j) < 0)
		return;
	if (methods[i].m == FS_WATCHER) {
		if (watcher_call(er, method, j, &err) < 0)
			connect_reply_err(er->req, &err);
		json_decref(j);
		return;
	}
	struct fscall *fc = fscall_new(er, fs_done);
	if (fc && start(er, fc, methods[i].m, j, &err) < 0) {
		connect_reply_err(er->req, &err);
		fscall_free(fc);
	}
	json_decref(j);
}

/* Taking a sandbox's workspace home, and bringing it back:
 *
 *   GET  /v1/sandboxes/{id}/export?format=tar|zip[&path=DIR]
 *   GET  /v1/sandboxes/{id}/snapshot.json[?path=DIR]    the portable snapshot (portable.h)
 *   POST /v1/sandboxes/{id}/snapshot.json[?path=DIR]    its files made in DIR
 *
 * These are the Files API's tree transfers (files_tar.c) in other formats:
 * init's child walks DIR as the sandbox's user and coved writes the tar,
 * the zip or the JSON as the entry stream comes, with the same
 * backpressure; an import is validated whole, then made by init's child
 * as the user, beneath DIR, through no symlink.
 *
 * DIR defaults to the workspace: where a command runs by default, that is
 * the sandbox's cwd when it has one, else the user's home as the sandbox's
 * own /etc/passwd says (init looks it up: WIRE_FLAG_HOME), or the root of
 * an external sandbox's workspace. */
#include <stdio.h>
#include <string.h>

#include "engine/files.h"

/* DIR from the query, or the default, into fr. */
static int tree_path(struct http_req *req, struct sandbox *sb, char path[PATH_MAX], struct file_request *fr,
		     struct cove_err *err)
{
	int r = query_param(query_of(req), "path", path, PATH_MAX, err);
	if (r < 0)
		return -1;
	if (r == 1 && path[0] != '/')
		return err_set(err, COVE_EINVAL, "'path' must be an absolute path");
	if (r == 0 && sb->spec.cwd[0]) {
		snprintf(path, PATH_MAX, "%s", sb->spec.cwd);
	} else if (r == 0) {
		snprintf(path, PATH_MAX, "/");
		fr->flags |= sb->spec.external ? 0 : WIRE_FLAG_HOME;
	}
	return 0;
}

static int start_tree(struct http_req *req, const char *id, struct file_request *fr,
		      int (*check)(struct http_req *req, struct cove_err *err), struct cove_err *err)
{
	char path[PATH_MAX];
	struct sandbox *sb = sandbox_find(engine_ctx, id);
	if (!sb)
		return err_set(err, COVE_ENOTFOUND, "no sandbox '%s'", id ? id : "");
	if (tree_path(req, sb, path, fr, err) < 0)
		return -1;
	fr->path = path;
	return files_start(req, id, fr, check, err);
}

int export_get(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "format", "path", NULL };
	struct file_request fr = { .kind = FK_TAR, .params = params, .type = WIRE_OPEN, .value = WIRE_OPEN_TAR };
	char format[8] = "tar";
	if (!sandbox_find(engine_ctx, id))
		return err_set(err, COVE_ENOTFOUND, "no sandbox '%s'", id ? id : "");
	if (query_param(query_of(req), "format", format, sizeof(format), err) < 0 ||
	    (strcmp(format, "tar") != 0 && strcmp(format, "zip") != 0))
		return err_set(err, COVE_EINVAL, "'format' must be tar or zip");
	fr.format = strcmp(format, "zip") == 0 ? TREE_ZIP : TREE_TAR;
	return start_tree(req, id, &fr, NULL, err);
}

int portable_get(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", NULL };
	struct file_request fr = {
		.kind = FK_TAR, .params = params, .type = WIRE_OPEN, .value = WIRE_OPEN_TAR, .format = TREE_JSON
	};
	return start_tree(req, id, &fr, NULL, err);
}

int portable_post(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", NULL };
	struct file_request fr = {
		.kind = FK_EXTRACT, .params = params, .type = WIRE_OPEN, .value = WIRE_OPEN_EXTRACT, .format = TREE_JSON
	};
	return start_tree(req, id, &fr, portable_check_body, err);
}

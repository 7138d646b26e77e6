/* Taking a sandbox's work home, and bringing it back:
 *
 *   GET  /v1/sandboxes/{id}/export?format=tar|zip[&path=DIR]
 *   GET  /v1/sandboxes/{id}/snapshot.json[?path=DIR]    the portable snapshot (portable.h)
 *
 * Without DIR an export and a portable snapshot take everything the
 * sandbox changed over its image (changes.h): coved lists the changed
 * paths from its upper layers, init's child sends those entries (each
 * alone) as the user through the merged view, and a tar or zip ends with
 * CHANGES_MANIFEST, the deletions and opaque directories. A portable
 * snapshot (version 1) cannot express a deletion: it has the changed files
 * only, and the front end says how many deletions it left out; its
 * "base": "/" says the paths are relative to the root, where an import
 * without DIR makes them (a folder's snapshot goes to the workspace). An external
 * sandbox has no image under it: its workspace folder, as with DIR.
 *   POST /v1/sandboxes/{id}/snapshot.json[?path=DIR]    its files made in DIR
 *
 * These are the Files tree transfers (files_tar.c) in other formats:
 * init's child walks DIR as the sandbox's user and coved writes the tar,
 * the zip or the JSON as the entry stream comes, with the same
 * backpressure; an import is validated whole, then made by init's child
 * as the user, beneath DIR, through no symlink.
 *
 * For a tar extraction and an import, DIR defaults to the workspace: where a command runs by default, that is
 * the sandbox's cwd when it has one, else the user's home as the sandbox's
 * own /etc/passwd says (init looks it up: WIRE_FLAG_HOME), or the root of
 * an external sandbox's workspace. */
#include <stdio.h>
#include <string.h>

#include "engine/files_op.h"
#include "image/image.h"
#include "engine/portable.h"

/* The tree's folder: rq->path, or the workspace. flags gets
 * WIRE_FLAG_HOME when init is to look the user's home up. */
static const char *tree_path(const struct sandbox *sb, const struct files_tree_req *rq, uint32_t *flags)
{
	if (rq->path)
		return rq->path;
	if (sb->spec.cwd[0])
		return sb->spec.cwd;
	*flags |= sb->spec.external ? 0 : WIRE_FLAG_HOME;
	return "/";
}

int files_tree_out(struct sandbox *sb, const struct files_tree_req *rq, struct output *o, struct cove_err *err)
{
	struct file_request fr = {
		.kind = FK_TAR, .type = WIRE_OPEN, .value = WIRE_OPEN_TAR, .user = rq->user, .format = rq->format
	};
	struct file_caller c = { .out = o };
	if (rq->format != TREE_TAR && rq->format != TREE_ZIP && rq->format != TREE_JSON)
		return err_set(err, COVE_EINVAL, "'format' must be tar or zip");
	if (!rq->path && !sb->spec.external) {
		char subvol[PATH_MAX], image[PATH_MAX];
		snprintf(subvol, sizeof(subvol), "%s/sandboxes/%s", engine_ctx->pool.dir, sb->id);
		snprintf(image, sizeof(image), "%s/images/%s", engine_ctx->pool.dir, sb->spec.image_dir);
		if (files_sandbox_ready(sb, err) < 0 || changes_collect(subvol, image, image_tree_host_layers(image),
									engine_ctx->data_dir, &c.changes, err) < 0)
			return -1;
		fr.value = WIRE_OPEN_TAR_LIST;
		fr.path = "/";
		return files_start(sb, &fr, &c, NULL, err);
	}
	fr.path = tree_path(sb, rq, &fr.flags);
	return files_start(sb, &fr, &c, NULL, err);
}

/* The first pass over a portable snapshot: all of it valid, before
 * anything changes. *whole: it holds a sandbox's changes ("base": "/"). */
static int portable_check(const char *doc, size_t len, bool *whole, struct cove_err *err)
{
	struct portable_doc *d = NULL;
	if (!doc || len == 0)
		return err_set(err, COVE_EINVAL,
			       "the body must be a portable snapshot {\"version\": 1, \"files\": [...]}");
	if (portable_parse(doc, len, &d, err) < 0)
		return -1;
	*whole = d->whole;
	portable_doc_free(d);
	return 0;
}

int files_portable_in(struct sandbox *sb, const struct files_tree_req *rq, files_done_fn done, void *arg,
		      struct file_op **ret, struct cove_err *err)
{
	struct file_request fr = {
		.kind = FK_EXTRACT, .type = WIRE_OPEN, .value = WIRE_OPEN_EXTRACT, .user = rq->user, .format = TREE_JSON
	};
	struct file_caller c = { .done = done, .arg = arg, .doc = rq->doc, .doc_len = rq->doc_len };
	bool whole = false;
	if (files_sandbox_ready(sb, err) < 0 || portable_check(rq->doc, rq->doc_len, &whole, err) < 0)
		return -1;
	/* A sandbox's changes go back where they were, a folder's files into
	 * the workspace. */
	fr.path = !rq->path && whole ? "/" : tree_path(sb, rq, &fr.flags);
	return files_start(sb, &fr, &c, ret, err);
}

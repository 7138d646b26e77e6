/* The Files operations of a sandbox: read, write, list, stat, remove,
 * mkdir, move, chmod, folders as tar streams in and out, export (tar, zip)
 * and the portable JSON snapshot out and in (files.c, files_tar.c,
 * export.c). No front end's types here: a caller gives a typed request,
 * already parsed and validated, and gets typed results.
 *
 * Every operation asks cove-init (which resolves the path inside the
 * sandbox, as the user) and answers later, never before its call returns:
 *   - one answer: done(arg, res, err) is called exactly once, with res
 *     (err NULL) or err (res NULL); the operation is over then. Its
 *     struct file_op (*ret, when ret is not NULL) is the caller's handle
 *     until done: files_cancel() says the caller is gone (no callback
 *     comes any more; what it held is freed, a stream is cut).
 *   - a byte stream (a tar, a zip, a portable snapshot): the caller's
 *     struct output (engine/output.h). OUT_START once the stream begins,
 *     then OUT_BYTES (ev->buf, drained by the consumer), then
 *     output_close: err NULL when the stream is whole; an err after
 *     OUT_START means the stream was cut (a consumer must not present
 *     what it got as whole). Pause, resume and cancel as output.h says.
 *   - an input body (a write, a tar extraction): the caller feeds it with
 *     files_write_data / files_write_end; see there.
 * A call that fails returns -1 with err, and has called nothing and taken
 * nothing (the caller answers err itself). */
#pragma once
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

struct evbuffer;
struct file_op;
struct output;
struct sandbox;

#define FILES_MAX_DEPTH 256 /* of a listing */

/* sandbox_ready (lifecycle.h): wakes a paused or archived sandbox; 0, or
 * -1 with a 409 when sb cannot take Files operations (its init is gone).
 * Every operation checks it; a front end may check it first to
 * answer that before its own validation. */
int files_sandbox_ready(struct sandbox *sb, struct cove_err *err);

/* ---- requests. user NULL: the sandbox's user. Paths are absolute. ---- */

struct files_read_req {
	const char *path;
	const char *user;
	bool stat; /* the path itself (a symlink not followed), not its bytes */
	int depth; /* a directory's listing: 1 (its own entries) to FILES_MAX_DEPTH */
};

struct files_write_req {
	const char *path;
	const char *user;
	uint32_t mode;   /* a new file's permission bits (0644 if not mode_given) */
	bool mode_given; /* also applied to an existing file */
	bool parents;    /* missing parent directories are made */
};

struct files_remove_req {
	const char *path;
	const char *user;
	bool recursive; /* a directory with its contents */
};

struct files_mkdir_req {
	const char *path;
	const char *user;
};

struct files_move_req {
	const char *from;
	const char *to;
	const char *user;
	bool overwrite; /* replace an existing target */
};

struct files_chmod_req {
	const char *path;
	const char *user;
	uint32_t mode; /* permission bits, <= 07777 */
};

/* What a tree travels as: a tar, a zip (out only), or the portable JSON
 * snapshot (portable.h). */
enum tree_format { TREE_TAR, TREE_ZIP, TREE_JSON };

/* A folder's tree out or in. path NULL (export and portable snapshots
 * only): out, everything the sandbox changed over its image (changes.h;
 * an external sandbox's workspace root); in, the workspace, where a
 * command runs by default (the sandbox's cwd, else the user's home). */
struct files_tree_req {
	const char *path;
	const char *user;
	enum tree_format format; /* out: TREE_TAR, TREE_ZIP, TREE_JSON; in: TREE_TAR, TREE_JSON */
	/* A portable snapshot's import: the document's text, borrowed until
	 * done is called or the operation is cancelled. */
	const char *doc;
	size_t doc_len;
};

/* ---- results ---- */

enum files_type { FILES_FILE, FILES_DIR, FILES_SYMLINK, FILES_OTHER };

/* A stat's answer, and a listing's entry. */
struct files_entry {
	const char *name; /* the last component of path */
	const char *path; /* absolute, inside the sandbox */
	enum files_type type;
	uint64_t size;
	uint32_t mode; /* permission bits */
	int64_t mtime; /* unix seconds */
	uint32_t uid, gid;
	const char *target; /* a symlink's, else NULL */
};

struct files_listing {
	const char *path; /* the directory, as asked */
	const struct files_entry *entries;
	size_t n;
	bool truncated; /* stopped at FILES_MAX_ENTRIES */
};
#define FILES_MAX_ENTRIES 100000

/* Borrowed for the callback, but fd, which the callback takes. */
struct files_result {
	const char *path;  /* the operation's path (a move's from) */
	const char *path2; /* a move's to */
	/* a read: a regular file, open for reading (fd >= 0, size bytes), or a
	 * directory's listing; a stat: its entry */
	int fd;
	uint64_t size; /* a read's file; a write's bytes written */
	const struct files_listing *listing;
	const struct files_entry *stat;
	/* remove: it was deleted; mkdir, write, extraction: it was made */
	bool changed;
	uint32_t mode;    /* a chmod's */
	uint64_t entries; /* an extraction's: entries made */
	unsigned skipped; /* an extraction's: special files passed over */
};

typedef void (*files_done_fn)(void *arg, const struct files_result *res, const struct cove_err *err);
/* A write's file is open: its body is wanted now (files_write_data). */
typedef void (*files_ready_fn)(void *arg);

/* ---- operations ---- */

/* A file's bytes (res->fd, res->size), a directory's listing, or with
 * rq->stat the path's own entry. */
int files_read(struct sandbox *sb, const struct files_read_req *rq, files_done_fn done, void *arg, struct file_op **ret,
	       struct cove_err *err);
/* The file is opened (a replacement that init renames over it at the end,
 * else the file itself, created or truncated: files.c); then ready(arg),
 * after which the caller feeds the body: files_write_data as it comes,
 * files_write_end at its end (done then answers res->size, res->changed). */
int files_write(struct sandbox *sb, const struct files_write_req *rq, files_ready_fn ready, files_done_fn done,
		void *arg, struct file_op **ret, struct cove_err *err);
int files_remove(struct sandbox *sb, const struct files_remove_req *rq, files_done_fn done, void *arg,
		 struct file_op **ret, struct cove_err *err);
int files_mkdir(struct sandbox *sb, const struct files_mkdir_req *rq, files_done_fn done, void *arg,
		struct file_op **ret, struct cove_err *err);
int files_move(struct sandbox *sb, const struct files_move_req *rq, files_done_fn done, void *arg, struct file_op **ret,
	       struct cove_err *err);
int files_chmod(struct sandbox *sb, const struct files_chmod_req *rq, files_done_fn done, void *arg,
		struct file_op **ret, struct cove_err *err);

/* A folder's tree out as rq->format, onto o: GET .../files/tar (a tar of
 * rq->path), export (a tar or a zip) and the portable snapshot (both of
 * the sandbox's changes when rq->path is NULL: OUT_START then carries
 * ev->changes, and a tar or zip ends with CHANGES_MANIFEST). */
int files_tree_out(struct sandbox *sb, const struct files_tree_req *rq, struct output *o, struct cove_err *err);
/* A tar into a folder (made if missing). The body is wanted at once:
 * files_write_data as it comes, files_write_end at its end. It goes whole
 * into an unlinked temporary file under the data root, is checked from its
 * start, and only then made in the sandbox: bad input changes nothing. */
int files_tar_in(struct sandbox *sb, const struct files_tree_req *rq, files_done_fn done, void *arg,
		 struct file_op **ret, struct cove_err *err);

/* A portable snapshot's files made in a folder (rq->path, or the
 * workspace), the document (rq->doc) validated whole first. */
int files_portable_in(struct sandbox *sb, const struct files_tree_req *rq, files_done_fn done, void *arg,
		      struct file_op **ret, struct cove_err *err);

/* An input body's next bytes, written to the file as they come (buf is
 * drained). The caller's buffer stays bounded: the bytes are written before
 * this returns. 0, or -1 when the operation ended with an error (done was
 * called: op is gone). */
int files_write_data(struct file_op *op, struct evbuffer *buf);
/* The body is whole. */
void files_write_end(struct file_op *op);
/* The caller is gone: no callback comes any more. */
void files_cancel(struct file_op *op);

/* ---- for the engine ---- */

/* From the init connection; files_on_opened takes fd (-1 if none came). */
void files_on_opened(struct sandbox *sb, uint32_t seq, uint32_t flags, int fd);
void files_on_failed(struct sandbox *sb, uint32_t seq, int errnum);
void files_on_done(struct sandbox *sb, uint32_t seq, int errnum, bool changed);
/* The sandbox is going away: fail and free all its file requests. */
void files_abort_all(struct sandbox *sb, const char *why);

/* A build's files (build.h): its context, and the tars of its layers.
 * Everything here reads and writes files only, and runs on a worker
 * thread: what it is given is a copy, or not changed while it runs. */
#pragma once
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "image/dockerfile.h"
#include "image/image.h"

struct build_fs {
	struct image_store *store;
	char dir[PATH_MAX];     /* <images>/builds/<id> */
	char context[PATH_MAX]; /* <dir>/context */
	struct dockerignore ignore;
};

/* A new build's folder. */
int build_fs_open(struct build_fs *fs, struct image_store *store, struct cove_err *err);
/* Its folder removed, with everything in it. */
void build_fs_remove(struct build_fs *fs);
/* The context tar (read from fd) unpacked, as a layer is (no name out of
 * it, no write through a symlink), and its .dockerignore read. */
int build_fs_unpack(struct build_fs *fs, int fd, struct cove_err *err);
/* A file of the context (rel: clean, relative), whole, at most max bytes. */
int build_fs_read(const struct build_fs *fs, const char *rel, size_t max, char **ret, size_t *ret_len,
		  struct cove_err *err);

/* A layer's tar, stored as a blob: its digest (the diff id) and size. */
struct build_tar {
	char diff_id[DIGEST_STR_MAX];
	int64_t size;
	uint64_t entries;
};

struct build_copy {
	char **srcs; /* relative to the context, as written (globs allowed) */
	size_t n_srcs;
	char dest[PATH_MAX]; /* absolute, clean */
	bool dest_dir;       /* dest is a folder (it ended in '/', or several sources) */
	const char *chown;   /* "user[:group]", or NULL: 0:0 */
	int chmod;           /* or -1 */
	bool add;            /* ADD: a local tar is unpacked into dest */
	const char *below;   /* the tree below (holds rootfs/), or NULL */
	int line;
};
int build_fs_copy(const struct build_fs *fs, const struct build_copy *c, struct build_tar *ret, struct cove_err *err);
/* The folders of path (absolute, clean) that the tree below lacks. */
int build_fs_mkdir(const struct build_fs *fs, const char *path, const char *below, struct build_tar *ret,
		   struct cove_err *err);
/* What a RUN's sandbox changed: subvol is a snapshot of its subvolume,
 * image the tree it ran on, host_layers its runtime_config's (the files
 * under /usr and /opt are in upper/usr and upper/opt). */
int build_fs_changes(const struct build_fs *fs, const char *subvol, const char *image, bool host_layers,
		     struct build_tar *ret, struct cove_err *err);
/* The layer of diff_id over parent (chain id, "" for none): *chain, found
 * or made (*made). */
int build_fs_commit(const struct build_fs *fs, const char *parent, const char *diff_id, char chain[DIGEST_STR_MAX],
		    bool *made, struct cove_err *err);
/* FROM host's first layer (image/image.h): the tree of chain made from the
 * host image's tree host_tree, unless it is there. Not deleted when the
 * build fails (another build may stand on it): collected when no image
 * needs it. */
int build_fs_host_base(const struct build_fs *fs, const char *host_tree, const char *chain, struct cove_err *err);
/* ChainID(parent, diff). */
void build_chain_next(const char *parent, const char *diff_id, char out[DIGEST_STR_MAX]);

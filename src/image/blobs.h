/* The image blob store: <pool>/images/blobs/sha256/<hex>, one file per
 * content digest, so a layer that several images share is stored once.
 *
 * A blob is only ever under its name once its bytes hashed to that name:
 * it is written to an unnamed file (O_TMPFILE) in the same directory,
 * hashed while it is written, fsynced, and linked into place only when the
 * digest (and the size, when one is expected) match. A crash or a refusal
 * leaves nothing behind; a blob that is already there is kept as it is. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"
#include "image/digest.h"

struct blob_store {
	int dirfd; /* <images>/blobs/sha256 */
};

/* Open (make if missing) the store under images_dir (<pool>/images). */
int blobs_open(struct blob_store *bs, const char *images_dir, struct cove_err *err);
void blobs_close(struct blob_store *bs);

struct blob_writer {
	int fd;
	struct digest_ctx hash;
	uint64_t size, max;
};

/* Start a blob of at most max bytes. */
int blob_writer_begin(const struct blob_store *bs, struct blob_writer *w, uint64_t max, struct cove_err *err);
/* Append n bytes; COVE_ETOOBIG past max. */
int blob_writer_write(struct blob_writer *w, const void *buf, size_t n, struct cove_err *err);
/* Finish: the digest of what was written must be want (if not NULL) and
 * its size want_size (if >= 0), or nothing is stored (COVE_EINVAL, "digest
 * mismatch"). The digest goes to ret_digest (may be NULL); *ret_new (may be
 * NULL) says whether the blob was new to the store. The writer is done
 * either way. */
int blob_writer_commit(const struct blob_store *bs, struct blob_writer *w, const char *want, int64_t want_size,
		       char ret_digest[DIGEST_STR_MAX], bool *ret_new, struct cove_err *err);
void blob_writer_abort(struct blob_writer *w);

/* The whole of fd (read to its end) as a blob, as blob_writer_commit. */
int blob_put_fd(const struct blob_store *bs, int fd, uint64_t max, const char *want, int64_t want_size,
		char ret_digest[DIGEST_STR_MAX], bool *ret_new, struct cove_err *err);
/* A blob opened for reading, or -errno (-ENOENT if missing, -EINVAL for a
 * malformed digest). */
int blob_open(const struct blob_store *bs, const char *digest);
bool blob_exists(const struct blob_store *bs, const char *digest);
/* A blob's whole contents (at most max bytes, else COVE_ETOOBIG), NUL
 * terminated, into a malloc'd *ret of *ret_len bytes. */
int blob_read_all(const struct blob_store *bs, const char *digest, size_t max, char **ret, size_t *ret_len,
		  struct cove_err *err);
/* Remove a blob; -errno. */
int blob_remove(const struct blob_store *bs, const char *digest);

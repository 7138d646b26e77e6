/* Where an import reads from: a folder, or a tar read once from front to
 * back. Either way a member is asked for by its name and comes back as a
 * blob in the store (blobs.h), hashed on the way in. A tar is read whole
 * first (its members are in no useful order), every regular member stored
 * as a blob; the import then takes what it needs and drops the rest.
 * Internal to src/image/. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "image/blobs.h"

#define SOURCE_MEMBERS_MAX 16384 /* found by a linear search: keep it small */

struct source_member {
	char *name;
	char *link; /* another member's name: a symlink or hard link */
	char digest[DIGEST_STR_MAX];
};

struct source {
	const struct blob_store *bs;
	int dirfd; /* a folder, or -1 for a tar */
	struct source_member *m;
	size_t n, cap;
	/* Blobs new to the store that came in through this source. */
	char (*added)[DIGEST_STR_MAX];
	size_t n_added, cap_added;
};

int source_open_dir(struct source *src, const struct blob_store *bs, const char *path, struct cove_err *err);
int source_open_tar(struct source *src, const struct blob_store *bs, int fd, struct cove_err *err);
void source_free(struct source *src);
/* name is in the source (a tar member, a file in the folder). */
bool source_has(struct source *src, const char *name);
/* Member name as a blob: its digest to ret. COVE_ENOTFOUND if missing. */
int source_blob(struct source *src, const char *name, char ret[DIGEST_STR_MAX], struct cove_err *err);
/* Note a blob the import added to the store by other means. */
int source_note_added(struct source *src, const char *digest);

/* For the registry client (registry.c), which stores an image's blobs
 * itself: with the import lock held (image_lock_imports, an fd to close),
 * finish the image whose manifest and every blob it names are in the store,
 * src listing those that are new (src is taken over). As an import: on
 * failure what src lists is removed. */
struct image_store;
struct image_info;
int image_lock_imports(struct image_store *s, struct cove_err *err);
int image_finish_stored(struct image_store *s, struct source *src, const char *manifest, const char *tag,
			struct image_info *ret, struct cove_err *err);

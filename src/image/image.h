/* OCI images in the pool: import of an OCI image layout (a folder, or a
 * tar of one) and of a `docker save` / `podman save` archive, into
 *
 *   <pool>/images/blobs/sha256/<hex>     every blob, by digest (blobs.h)
 *   <pool>/images/layers/<chain hex>/rootfs/
 *                                        one read-only tree per layer
 *                                        prefix, keyed by its chain id
 *
 * Each layer's tree is a snapshot of the one below it with the layer
 * applied (layer.h), so an image of any number of layers is one tree, its
 * top layer's, and images that share their first k layers share those k
 * trees. The tree holds rootfs/ as the host image does, so it can be a
 * sandbox's image as it is (runtime_config.image).
 *
 * An image is named by the digest of its manifest (for a docker archive,
 * which has none, of an OCI manifest made from its manifest.json and
 * stored as a blob like the others): image_open finds everything again
 * from that digest alone. Names (tags) are kept by the caller.
 *
 * An import refused for any reason (a bad document, a digest or size that
 * does not match, a hostile layer) leaves nothing behind: the blobs and
 * layer trees it added are removed. Imports into one pool are serialized
 * by an flock on <pool>/images/import.lock; trees left by a crash in the
 * middle of one (layers/.tmp-*) are removed by the next. */
#pragma once
#include <limits.h>
#include <stdint.h>

#include "common/error.h"
#include "image/blobs.h"
#include "image/oci.h"
#include "sys/pool.h"

#define IMAGE_BLOB_MAX (64ull << 30)
#define IMAGE_OS "linux"
#define IMAGE_ARCH "amd64"

/* What an import or a pull tells of a blob or a layer as it goes. */
struct image_progress {
	const char *digest; /* the blob's (a layer's as stored: compressed) */
	uint64_t done, total;
	const char *status; /* "downloading", "verified", "exists", "unpacked" */
};

struct image_store {
	const struct pool *pool;
	/* Told of progress, if not NULL. */
	void (*progress)(void *arg, const struct image_progress *p);
	void *progress_arg;
	char images[PATH_MAX]; /* <pool>/images */
	char layers[PATH_MAX]; /* <pool>/images/layers */
	struct blob_store blobs;
};

int image_store_open(struct image_store *s, const struct pool *pool, struct cove_err *err);
void image_store_close(struct image_store *s);

struct image_info {
	char manifest[DIGEST_STR_MAX]; /* the image's name in the store */
	char config_digest[DIGEST_STR_MAX];
	char chain_id[DIGEST_STR_MAX]; /* of the top layer */
	char tree[PATH_MAX];           /* <pool>/images/layers/<chain hex>: holds rootfs/ */
	size_t n_layers;
	struct image_config config;
	char **tags; /* the archive's names for it (docker RepoTags, OCI ref.name), NULL-terminated */
	size_t n_tags;
};
void image_info_free(struct image_info *info);

/* Import the image at path: an OCI image layout folder, a docker archive
 * folder, or a tar of either (plain or compressed). ref picks one image of
 * several (a RepoTag, or an OCI org.opencontainers.image.ref.name); NULL
 * when the archive holds one. An index is resolved to linux/amd64. */
int image_import_path(struct image_store *s, const char *path, const char *ref, struct image_info *ret,
		      struct cove_err *err);
/* The same, for a tar read from fd (a stream: read once, front to back). */
int image_import_tar_fd(struct image_store *s, int fd, const char *ref, struct image_info *ret, struct cove_err *err);
/* An imported image by its manifest digest; COVE_ENOTFOUND if it or one of
 * its layer trees is missing. */
int image_open(struct image_store *s, const char *manifest, struct image_info *ret, struct cove_err *err);
/* Tell s's progress hook, if any. */
void image_report(const struct image_store *s, const char *digest, uint64_t done, uint64_t total, const char *status);
/* The tree of chain id into out. */
void image_layer_path(const struct image_store *s, const char *chain_id, char out[PATH_MAX]);

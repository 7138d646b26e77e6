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
 * middle of one (layers/.tmp-*) are removed by the next, and by coved's
 * start and collections (image_remove_scratch). */
#pragma once
#include <limits.h>
#include <stdbool.h>
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
/* The layer in blob (a tar, plain or compressed, whose uncompressed
 * digest must be diff_id) applied onto a scratch snapshot of the tree
 * below (NULL: an empty one) and published as tree (<layers>/<chain hex>):
 * 0 also when tree is already there. The caller holds the import lock
 * (image_lock_imports), under which scratch trees are another's only
 * after a crash. Nothing is left on failure. */
int image_layer_make(const struct image_store *s, const char *below, const char *blob, const char *diff_id,
		     const char *tree, struct cove_err *err);
/* The scratch trees (layers/.tmp-*) removed. Only with the import lock
 * held: then they are what a crash left (an import, a pull or a build's
 * layer cut short), never a tree being made. */
void image_remove_scratch(const struct image_store *s);
/* The import lock (image_lock_imports) taken without waiting: its fd,
 * the scratch trees removed; or -1 while an import, a pull or a build's
 * layer is under way (in coved, or in a helper of a previous run). */
int image_try_lock_imports(struct image_store *s);
/* The tree of chain id into out. */
void image_layer_path(const struct image_store *s, const char *chain_id, char out[PATH_MAX]);

/* Images built on the host image (FROM host): their first layer is no tar
 * but the host image itself, a manifest layer of media type
 * OCI_HOST_LAYER_TYPE whose blob is a line naming it ("cove host image
 * host-<fingerprint>"). Its tree is a snapshot of <pool>/images/host-<fp>
 * holding the mark IMAGE_HOST_MARK beside rootfs/; the trees above it are
 * snapshots of it, so they hold the mark too. A sandbox on a tree with the
 * mark (or on the host image) gets the host's /usr and /opt layered under
 * the tree's own rootfs/usr and rootfs/opt (runtime_config.host_layers). */
#define IMAGE_HOST_MARK "host-layers"
/* The host image's tree (host_tree) as the layer tree tree, marked. The
 * caller holds the import lock. 0 also when tree is already there. */
int image_host_layer_make(const struct image_store *s, const char *host_tree, const char *tree, struct cove_err *err);
/* Whether sandboxes on the image tree (<pool>/images/<image_dir>) get the
 * host's /usr and /opt: the host image, or a tree with IMAGE_HOST_MARK. */
bool image_tree_host_layers(const char *tree);

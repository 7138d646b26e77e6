/* Applying an image layer (a tar diff: plain, gzip or zstd) onto a tree:
 * the layer's files added or replacing what is there, its whiteouts
 * (".wh.NAME": NAME of a lower layer removed; ".wh..wh..opq": the folder's
 * lower contents removed) applied, hard links, xattrs and file
 * capabilities kept, device nodes and sockets skipped. Owners are kept as
 * the layer gives them, the image's own ids: the sandboxes made from the
 * image see them through their idmapped mount, as for the host image; ids
 * at or above RUNTIME_UID_COUNT, which no sandbox maps, are refused.
 *
 * The layer is untrusted. Every file operation is relative to an fd of a
 * folder opened with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) from the tree's root, and the
 * leaf is made with O_EXCL/O_NOFOLLOW or its *at equivalent, so nothing is
 * written outside the tree or through a symlink (a lower layer's or this
 * one's). Refused, stopping the unpack: an absolute name or one with a ".."
 * component, a name or link target over 4095 bytes or 256 components, a
 * path through a symlink or a non-folder, a hard link to a name that is not
 * in the tree, ids out of range, more than LAYER_ENTRIES_MAX entries, a tar
 * libarchive cannot read, and an uncompressed digest other than the
 * expected diff id. A refused layer leaves the tree half-applied: the
 * caller unpacks into a scratch snapshot and throws it away. */
#pragma once
#include <stdint.h>

#include "common/error.h"
#include "image/digest.h"

#define LAYER_ENTRIES_MAX (1u << 20)
#define LAYER_DEPTH_MAX 256

struct layer_stats {
	uint64_t entries;         /* tar members seen */
	uint64_t bytes;           /* file data written */
	uint64_t whiteouts;       /* names removed by a whiteout or an opaque folder */
	uint64_t skipped_devices; /* device nodes and sockets */
	uint64_t skipped_xattrs;  /* xattrs of a namespace not kept (trusted.*, security.* but caps, ...) */
};

/* Apply the layer read from fd onto the tree at rootfd. The digest of the
 * uncompressed tar goes to ret_diff_id (may be NULL); if want_diff_id is
 * not NULL it must match, else COVE_EINVAL. stats may be NULL. */
int layer_apply(int rootfd, int fd, const char *want_diff_id, char ret_diff_id[DIGEST_STR_MAX],
		struct layer_stats *stats, struct cove_err *err);

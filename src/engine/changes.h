/* What a sandbox changed over its image, read from the host: its overlays'
 * upper layers (<subvol>/upper/root for /, upper/<layer> for each host
 * layer: /usr, /opt), the same on both storage drivers.
 *
 * Every name in an upper layer is a change: a file, directory or symlink
 * made or modified; but a directory that is only the overlay's copy of the
 * image's (same mode and owner, not opaque: something in it changed) is
 * not, and neither are /etc/hostname and /etc/hosts, which cove writes
 * itself at create (a sandbox's name for itself). A 0/0
 * character device is a whiteout: a deletion. A directory with the overlay
 * opaque mark (trusted. or user.overlay.opaque = "y") replaced the image's
 * whole directory of that name: listed as opaque. /dev, /proc and /sys are
 * left out.
 *
 * coved reads names and metadata only, never contents, and never through a
 * name of the sandbox's (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS, no
 * symlink followed): the files' bytes are read by init's child through the
 * merged view, as the user (WIRE_OPEN_TAR_LIST). */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

struct changes {
	int list_fd;      /* the changed paths, relative, each ended by a NUL, from its start */
	uint64_t entries; /* paths in list_fd */
	json_t *deleted;  /* array of absolute paths */
	json_t *opaque;   /* array of absolute paths */
};

/* The changes of the sandbox whose subvolume is subvol, over the image
 * at image (its rootfs; with host_layers, as runtime_config's, /usr and
 * /opt in upper/usr and upper/opt, over the host's); the list goes into
 * an unlinked file under tmp_dir. 0 with *ret, or -1 with err. */
int changes_collect(const char *subvol, const char *image, bool host_layers, const char *tmp_dir, struct changes **ret,
		    struct cove_err *err);
void changes_free(struct changes *c);
/* {"deleted": [...], "opaque": [...]} as text (malloc'd), NULL on ENOMEM. */
char *changes_manifest(const struct changes *c);

#define CHANGES_MANIFEST ".cove-manifest.json"

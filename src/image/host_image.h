/* The built-in `host` image: the host's /usr and /opt, layered read-only
 * under each sandbox's own writes, and a copy of its /etc without secrets.
 * The image itself is a small read-only subvolume <pool>/images/host holding
 * the layout every sandbox root starts from:
 *
 *   rootfs/           the sandbox's / (skeleton dirs, merged-/usr links, a
 *                     copy of the host's dpkg database, and a copy of /etc
 *                     without what others cannot read there: shadow,
 *                     gshadow, ssh host keys, credentials)
 *   lower/{usr,opt}   mount points for the idmapped host directories
 *   upper/… work/…    the overlays' writable layers (the sandbox's changes)
 *
 * /etc is a copy, not a live layer, so that a secret put into the host's
 * /etc later never shows in a sandbox. A copy goes stale: the image is made
 * again when coved starts and the host's /etc or package database changed
 * (see host_image_ensure); running sandboxes keep theirs. */
#pragma once
#include <stdbool.h>

#include "common/error.h"

/* Make <pool>/images/host, or make it again when the host's /etc or dpkg
 * database changed since. Safe against a crash at any point: it is built
 * under a temporary name and snapshotted into place. *ret_rebuilt tells
 * whether it changed (spare roots made from the old one must go). */
int host_image_ensure(const char *pool_dir, bool *ret_rebuilt, struct cove_err *err);

/* The built-in `host` image: the host's /usr, /etc (without its secrets) and
 * /opt, layered read-only under each sandbox's own writes. The image itself
 * is a small read-only subvolume <pool>/images/host holding the layout every
 * sandbox root starts from:
 *
 *   rootfs/           the sandbox's / (skeleton dirs, merged-/usr links,
 *                     a copy of the host's dpkg database)
 *   lower/{usr,etc,opt}   mount points for the idmapped host directories
 *   upper/… work/…    the overlays' writable layers (the sandbox's changes)
 *   mask/etc/…        whiteouts for every host /etc entry that is not
 *                     world-readable (shadow, gshadow, ssh host keys, …)
 */
#pragma once
#include "common/error.h"

/* Make <pool>/images/host if it does not exist yet. Safe against a crash at
 * any point: it is built under a temporary name and snapshotted into place. */
int host_image_ensure(const char *pool_dir, struct cove_err *err);

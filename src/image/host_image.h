/* The built-in `host` image: the host's /usr and /opt, layered read-only
 * under each sandbox's own writes, and a copy of its /etc without secrets.
 * The image itself is a small read-only tree (a subvolume with the btrfs
 * storage driver) <pool>/images/host-<fingerprint> holding
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
 * /etc later never shows in a sandbox. A copy goes stale: a new image is made
 * when coved starts and the host's /etc or package database changed (see
 * host_image_ensure); existing sandboxes keep theirs. */
#pragma once
#include <stdbool.h>

#include "common/error.h"
#include "sys/pool.h"

#define HOST_IMAGE_NAME_MAX 32

/* Make the host image for the host as it is now, if it does not exist yet:
 * <pool>/images/host-<fingerprint of /etc and the dpkg database>, and put
 * that name in ret_name. Sandboxes keep the image they were made from; a
 * host that changed gets a new one. Safe against a crash at any point: it
 * is built under a temporary name and published into place. */
int host_image_ensure(const struct pool *pool, char ret_name[HOST_IMAGE_NAME_MAX], struct cove_err *err);
/* Delete every host image that in_use() says no sandbox needs. */
void host_image_gc(const struct pool *pool, bool (*in_use)(void *arg, const char *name), void *arg);

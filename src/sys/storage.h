/* Storage drivers: how the pool makes, copies and removes the directory
 * trees that hold images, sandbox roots and snapshots. Every call site goes
 * through here with the pool's driver, so the rest of cove is the same on
 * both:
 *
 *   btrfs    each tree is a subvolume: a snapshot is one O(1) subvolume
 *            snapshot, a delete one ioctl (btrfs.h). The default.
 *   overlay  each tree is a plain directory on whatever file system the data
 *            root is on: a snapshot is a copy (tree.h), O(size of the tree).
 *            A sandbox's tree holds only its own changes over the shared
 *            image (its overlays' upper layers: a diff layer), so that is
 *            O(its changes). For hosts where btrfs cannot be had.
 *
 * "Read-only" is the btrfs flag for the btrfs driver; the overlay driver
 * keeps it by use: coved never mounts an image or a snapshot's files
 * writable, and restores and forks copy them. */
#pragma once
#include <stdbool.h>

enum storage_driver {
	STORAGE_AUTO, /* only as a request (pool_open): the data root's, or the best available */
	STORAGE_BTRFS,
	STORAGE_OVERLAY,
};

/* "btrfs", "overlay", "auto". */
const char *storage_driver_name(enum storage_driver drv);
/* The driver named name (as storage_driver_name gives it); -EINVAL if none. */
int storage_driver_parse(const char *name, enum storage_driver *ret);

/* A new, empty tree at path (its parent must exist). -errno. */
int storage_create(enum storage_driver drv, const char *path);
/* The tree src as a new tree dst (which must not exist), read-only or
 * writable. On failure nothing of dst is left. -errno. */
int storage_snapshot(enum storage_driver drv, const char *src, const char *dst, bool readonly);
/* The finished tree tmp as the read-only tree dst, which must not exist;
 * tmp is gone afterwards (btrfs: a snapshot and a delete; overlay: a
 * rename, atomic, so dst existing means it is whole). -errno. */
int storage_publish(enum storage_driver drv, const char *tmp, const char *dst);
/* Delete the tree at path with everything in it, read-only or not. -ENOENT
 * if missing; btrfs: -EINVAL for a directory that is not a subvolume. */
int storage_delete(enum storage_driver drv, const char *path);
/* 1 if path is a tree's root (btrfs: a subvolume; overlay: a directory),
 * 0 if not, -errno (-ENOENT if missing). */
int storage_is_tree(enum storage_driver drv, const char *path);

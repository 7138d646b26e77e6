/* btrfs subvolumes through the kernel's ioctls (no btrfs-progs at run time):
 * create, snapshot, delete. Each costs O(1) in the size of the tree. */
#pragma once
#include <stdbool.h>

/* 1 if path is on btrfs, 0 if not, -errno. */
int btrfs_is_btrfs(const char *path);
/* Create subvolume at path (its parent must exist). -errno. */
int btrfs_subvol_create(const char *path);
/* Snapshot subvolume src to dst (dst must not exist). -errno. */
int btrfs_subvol_snapshot(const char *src, const char *dst, bool readonly);
/* Delete subvolume path (and nothing else: -EINVAL for a plain directory)
 * with everything in it, including nested subvolumes (depth first, up to 32
 * levels). -ENOENT if missing. Retries a briefly busy subvolume (a mount
 * namespace still being torn down) for up to 2 s. Read-only subvolumes are
 * deleted too. */
int btrfs_subvol_delete(const char *path);
/* 1 if path is a subvolume root, 0 if not, -errno. */
int btrfs_is_subvol(const char *path);

/* btrfs subvolumes through the kernel's ioctls (no btrfs-progs at run time):
 * create, snapshot, delete. Each costs O(1) in the size of the tree. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Quota groups. cove uses simple quotas (Linux >= 6.7): each extent is
 * charged to the subvolume that wrote it, which costs a snapshot nothing,
 * where full qgroups make every snapshot pay for the accounting. */
enum { BTRFS_QUOTA_OFF, BTRFS_QUOTA_FULL, BTRFS_QUOTA_SIMPLE };
/* The quota mode of path's file system (BTRFS_QUOTA_*), -errno. */
int btrfs_quota_mode(const char *path);
/* Turn simple quotas on for path's file system (0 when they are on
 * already); -EEXIST when full qgroups are on, left so; -errno (-EINVAL
 * from a kernel without simple quotas). They count only what is written
 * from then on. */
int btrfs_quota_enable_simple(const char *path);
/* Limit what the subvolume path may write (referenced bytes) to bytes; 0
 * lifts the limit. Past it, writes fail with EDQUOT. -errno. */
int btrfs_qgroup_limit(const char *path, uint64_t bytes);
/* What the subvolume path's qgroup is charged, data not yet committed
 * included (and, when ret_limit is not NULL, its limit, 0 for none).
 * -ENOENT when quotas are off. */
int btrfs_qgroup_usage(const char *path, uint64_t *ret_used, uint64_t *ret_limit);
/* Data space reserved by writes not yet written out (statfs counts it as
 * free until they are): the file system's allocation/data/bytes_may_use,
 * opened once (an fd, or -errno) and read again at will. */
int btrfs_data_reserved_open(const char *path);
int btrfs_data_reserved(int kfd, uint64_t *ret);
/* Grow the file system mounted at path to the whole of its (one) device. */
int btrfs_resize_max(const char *path);
/* The path of device 1 of the file system at path ("/dev/loop3"). */
int btrfs_device_path(const char *path, char *buf, size_t n);

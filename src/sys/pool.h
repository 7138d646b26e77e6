/* The storage pool: the directory <data>/pool holding images, sandboxes
 * and snapshots, with one storage driver (storage.h) for all of them.
 *
 * btrfs: when <data> is on btrfs the pool is <data>/pool itself; when it is
 * not, a sparse file <data>/pool.img is formatted as btrfs on first start
 * (mkfs.btrfs), attached to a loop device and mounted at <data>/pool, and
 * re-attached and re-mounted on later starts (as LXD does).
 * overlay: <data>/pool is a plain directory on <data>'s file system.
 *
 * The driver is chosen once per data root and recorded in <data>/pool.driver
 * before the pool is made: trees of one driver are not trees of the other,
 * so a later open asking for the other driver is refused. */
#pragma once
#include <stdint.h>

#include "common/error.h"
#include "sys/storage.h"

struct pool {
	char dir[512];              /* <data>/pool: the btrfs mount, or a directory */
	int loop_backed;            /* 1 when pool.img is in use */
	enum storage_driver driver; /* STORAGE_BTRFS or STORAGE_OVERLAY */
	const char *fallback;       /* why STORAGE_AUTO chose overlay on a new data root, or NULL */
};

/* Open (create on first use) the pool under data_dir with the driver want:
 * STORAGE_AUTO takes the one recorded for data_dir, and on a new data root
 * btrfs when it can be had (data_dir on btrfs; or a loop device, btrfs in
 * the kernel and mkfs.btrfs), overlay when not. A data root made before
 * drivers were recorded and holding a pool is btrfs. An explicit want that
 * differs from the recorded driver fails (COVE_ESTATE) with nothing changed.
 * size_bytes is the pool file's apparent size when it has to be created
 * (sparse; mkfs.btrfs needs at least ~114 MiB). Returns 0, or -errno with
 * err filled (ret is then untouched). Concurrent callers on one data_dir
 * are serialised by an flock on <data>/pool.lock. Needs root (loop devices,
 * mount). A btrfs pool stays mounted after the process exits; unmounting it
 * frees the loop device (LO_FLAGS_AUTOCLEAR). */
int pool_open(struct pool *ret, const char *data_dir, enum storage_driver want, uint64_t size_bytes,
	      struct cove_err *err);

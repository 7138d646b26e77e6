/* The storage pool: a btrfs filesystem holding images, sandboxes and
 * snapshots. When <data> is on btrfs the pool is <data>/pool itself; when it
 * is not, a sparse file <data>/pool.img is formatted as btrfs on first start
 * (mkfs.btrfs), attached to a loop device and mounted at <data>/pool, and
 * re-attached and re-mounted on later starts (as LXD does). */
#pragma once
#include <stdint.h>

#include "common/error.h"

struct pool {
	char dir[512];   /* <data>/pool: the btrfs mount (or directory) */
	int loop_backed; /* 1 when pool.img is in use */
};

/* Open (create on first use) the pool under data_dir. size_bytes is the
 * pool file's apparent size when it has to be created (sparse; mkfs.btrfs
 * needs at least ~114 MiB). Returns 0, or -errno with err filled (ret is
 * then untouched). Concurrent callers on one data_dir are serialised by an
 * flock on <data>/pool.lock. Needs root (loop devices, mount). The pool
 * stays mounted after the process exits; unmounting it frees the loop
 * device (LO_FLAGS_AUTOCLEAR). */
int pool_open(struct pool *ret, const char *data_dir, uint64_t size_bytes, struct cove_err *err);

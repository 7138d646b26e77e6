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
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "sys/storage.h"

struct pool {
	char dir[512];              /* <data>/pool: the btrfs mount, or a directory */
	int loop_backed;            /* 1 when pool.img is in use */
	enum storage_driver driver; /* STORAGE_BTRFS or STORAGE_OVERLAY */
	const char *fallback;       /* why STORAGE_AUTO chose overlay on a new data root, or NULL */
	char img[520];              /* loop-backed: <data>/pool.img */
	bool quotas;                /* btrfs simple quotas are on: disk limits can be had */
	const char *no_quotas;      /* why not, when they are not */
};

/* Open (create on first use) the pool under data_dir with the driver want:
 * STORAGE_AUTO takes the one recorded for data_dir, and on a new data root
 * btrfs when it can be had (data_dir on btrfs; or a loop device, btrfs in
 * the kernel and mkfs.btrfs), overlay when not. A data root made before
 * drivers were recorded and holding a pool is btrfs. An explicit want that
 * differs from the recorded driver fails (COVE_ESTATE) with nothing changed.
 * size_bytes is the pool file's size when it has to be created, or less
 * when the host's disk has less room (pool_host_room); the file is
 * allocated whole (pool_size.c), and -ENOSPC when the host has not even
 * POOL_MIN_BYTES of room (mkfs.btrfs needs ~114 MiB). Returns 0, or -errno with
 * err filled (ret is then untouched). Concurrent callers on one data_dir
 * are serialised by an flock on <data>/pool.lock. Needs root (loop devices,
 * mount). A btrfs pool stays mounted after the process exits; unmounting it
 * frees the loop device (LO_FLAGS_AUTOCLEAR). */
int pool_open(struct pool *ret, const char *data_dir, enum storage_driver want, uint64_t size_bytes,
	      struct cove_err *err);

/* Disk limits: with enable, simple quotas on a loop-backed pool (turned on
 * if they are not: they count what is written from then on); a btrfs data
 * root's only if its owner turned them on (a setting of the whole file
 * system). Sets p->quotas, or p->no_quotas to why not. */
void pool_quotas(struct pool *p, bool enable);

/* The smallest pool file made. */
#define POOL_MIN_BYTES (256ull << 20)

/* pool_size.c: the loop-backed pool held to what the host's disk has. */
/* What the host keeps for itself: 5% of its disk, from 64 MiB to 2 GiB. */
uint64_t pool_host_reserve(uint64_t host_total);
/* How much more the pool may take of the host: avail beyond the reserve. */
uint64_t pool_host_room(uint64_t host_avail, uint64_t host_total);
/* How much a pool of size bytes with free bytes left should grow, up to
 * max: 0 while it has headroom. Pure. */
uint64_t pool_grow_step(uint64_t size, uint64_t free, uint64_t max);
/* The free and total bytes of the file system holding path. -errno. */
int pool_host_space(const char *path, uint64_t *ret_avail, uint64_t *ret_total);
/* Allocate bytes [from, to) of fd, its size then to. -errno. */
int pool_allocate(int fd, uint64_t from, uint64_t to);

struct pool_growth {
	uint64_t size, free;               /* the pool file's size, and btrfs's free bytes */
	uint64_t host_avail, host_reserve; /* the host's disk */
	uint64_t grown;                    /* bytes added now */
	bool stuck;                        /* it should grow and the host has no room */
};
/* Grow a loop-backed pool that is short of free space (less reserved:
 * what writes not yet written out will take, btrfs_data_reserved) by a
 * step, within max and the host's room (the file allocated, the loop device and btrfs
 * resized online); ret says what it found and did. No-op (0) for other
 * pools. -errno with err. */
int pool_grow(struct pool *p, uint64_t max, uint64_t reserved, struct pool_growth *ret, struct cove_err *err);
/* The loop device and btrfs take the whole of the pool file (after it
 * grew; at start, after a crash between a growth's two steps). -errno. */
int pool_take_new_size(const struct pool *p);
/* Allocate the holes of a pool file made sparse (an older coved's) when
 * the host has room; *ret_missing: the bytes still without host space. */
int pool_fill(const struct pool *p, uint64_t *ret_missing);

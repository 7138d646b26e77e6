/* The loop-backed pool's size, held to what the host's disk has.
 *
 * A sparse pool file promises btrfs space the host may not have: once the
 * host's disk is full, the loop device's writes fail under btrfs, which
 * then turns read-only, and the host's own services find no space either.
 * So the pool file is allocated whole (fallocate: no hole for a later write
 * to need host space), btrfs never discards into it (mkfs -K, mount
 * nodiscard: a discard would punch the space back out), and it starts
 * small and grows in steps while the host has room beyond a reserve it
 * keeps for itself. A write that finds the pool full fails inside the
 * sandbox (ENOSPC), never on the host. */
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "sys/btrfs.h"
#include "sys/pool.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)

uint64_t pool_host_reserve(uint64_t host_total)
{
	uint64_t r = host_total / 20; /* 5% of the host's disk */
	return r < 64 * MIB ? 64 * MIB : r > 2 * GIB ? 2 * GIB : r;
}

uint64_t pool_host_room(uint64_t host_avail, uint64_t host_total)
{
	uint64_t keep = pool_host_reserve(host_total);
	return host_avail > keep ? host_avail - keep : 0;
}

uint64_t pool_grow_step(uint64_t size, uint64_t free, uint64_t max)
{
	/* Headroom: a fifth of the pool, at least 512 MiB (a new 1 GiB pool
	 * has more); the step a quarter, at least 2 GiB, so growth is rare
	 * and a burst of writes between two checks still finds room. */
	uint64_t headroom = size / 5 > GIB / 2 ? size / 5 : GIB / 2;
	if (free >= headroom || size >= max)
		return 0;
	uint64_t step = size / 4 > 2 * GIB ? size / 4 : 2 * GIB;
	return step > max - size ? max - size : step;
}

int pool_host_space(const char *path, uint64_t *ret_avail, uint64_t *ret_total)
{
	struct statvfs sv;
	if (statvfs(path, &sv) < 0)
		return -errno;
	/* f_bavail: what an unprivileged writer may still use, so the
	 * file system's own root reserve is never counted as room. */
	*ret_avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	*ret_total = (uint64_t)sv.f_blocks * sv.f_frsize;
	return 0;
}

int pool_allocate(int fd, uint64_t from, uint64_t to)
{
	if (to <= from)
		return 0;
	/* Mode 0: allocate, and extend the file's size to "to". */
	return fallocate(fd, 0, (off_t)from, (off_t)(to - from)) < 0 ? -errno : 0;
}

int pool_take_new_size(const struct pool *p)
{
	char dev[64];
	int r = btrfs_device_path(p->dir, dev, sizeof(dev));
	if (r < 0)
		return r;
	_cleanup_close_ int lfd = open(dev, O_RDONLY | O_CLOEXEC);
	if (lfd < 0)
		return -errno;
	if (ioctl(lfd, LOOP_SET_CAPACITY, 0) < 0)
		return -errno;
	return btrfs_resize_max(p->dir);
}

int pool_grow(struct pool *p, uint64_t max, uint64_t reserved, struct pool_growth *ret, struct cove_err *err)
{
	struct statvfs pv;
	struct stat st;
	uint64_t avail = 0, total = 0;
	memset(ret, 0, sizeof(*ret));
	if (!p->loop_backed)
		return 0;
	/* No fd is opened unless it grows: a check leaves coved's fds as
	 * they were at every instant. */
	if (stat(p->img, &st) < 0 || statvfs(p->dir, &pv) < 0)
		return err_sys(err, errno, "pool '%s'", p->img);
	int r = pool_host_space(p->img, &avail, &total);
	if (r < 0)
		return err_sys(err, -r, "statvfs '%s'", p->img);
	ret->size = (uint64_t)st.st_size;
	ret->free = (uint64_t)pv.f_bavail * pv.f_frsize;
	/* A burst of writes sits in the page cache, reserved and not yet
	 * taken from statfs's free: what it will take is counted now. */
	ret->free = ret->free > reserved ? ret->free - reserved : 0;
	ret->host_avail = avail;
	ret->host_reserve = pool_host_reserve(total);
	uint64_t step = pool_grow_step(ret->size, ret->free, max);
	if (step == 0)
		return 0;
	uint64_t room = pool_host_room(avail, total);
	if (step > room)
		step = room / MIB * MIB;
	if (step < 64 * MIB) {
		ret->stuck = true;
		return 0;
	}
	_cleanup_close_ int fd = open(p->img, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return err_sys(err, errno, "open '%s'", p->img);
	r = pool_allocate(fd, ret->size, ret->size + step);
	if (r < 0) {
		/* Whatever part was allocated stays beyond the size the file
		 * system knows: fine, the next growth takes it. */
		(void)!ftruncate(fd, (off_t)ret->size);
		return err_sys(err, -r, "grow '%s' by %llu bytes", p->img, (unsigned long long)step);
	}
	r = pool_take_new_size(p);
	if (r < 0)
		return err_sys(err, -r, "resize the pool at '%s'", p->dir);
	ret->grown = step;
	ret->size += step;
	return 0;
}

int pool_fill(const struct pool *p, uint64_t *ret_missing)
{
	struct stat st;
	uint64_t avail = 0, total = 0;
	*ret_missing = 0;
	if (!p->loop_backed)
		return 0;
	_cleanup_close_ int fd = open(p->img, O_RDWR | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0)
		return -errno;
	int r = pool_host_space(p->img, &avail, &total);
	if (r < 0)
		return r;
	uint64_t size = (uint64_t)st.st_size, allocated = (uint64_t)st.st_blocks * 512;
	uint64_t missing = allocated < size ? size - allocated : 0;
	/* A pool made sparse (by an older coved): allocated now if the host
	 * has the room, which only fills its holes. */
	if (missing && missing <= pool_host_room(avail, total) && pool_allocate(fd, 0, size) == 0)
		missing = 0;
	*ret_missing = missing;
	return 0;
}

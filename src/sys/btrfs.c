/* btrfs subvolumes through the kernel's ioctls. Every operation goes through
 * the parent directory's fd plus a single leaf name, which is how the btrfs
 * ioctls address a subvolume; nothing here spawns btrfs-progs. */
#include "sys/btrfs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/btrfs.h>
#include <linux/magic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/io.h"

/* The root directory of every subvolume has this inode number. */
#define BTRFS_SUBVOL_ROOT_INO 256
/* Total time btrfs_subvol_delete waits for a busy subvolume, in ms. */
#define BTRFS_DELETE_BUSY_MS 2000
/* Depth of nested subvolumes btrfs_subvol_delete goes into. Each level
 * costs two fds and a few KiB of heap; deeper trees get ENOTEMPTY. */
#define BTRFS_NEST_MAX 32

/* Split path into its parent directory (into parent, size n) and a pointer
 * to its leaf name inside path. Trailing slashes are not accepted: the
 * callers pass paths they built themselves. -EINVAL on "", "/", ".", "..". */
static int btrfs_split(const char *path, char *parent, size_t n, const char **ret_leaf)
{
	const char *slash = strrchr(path, '/');
	const char *leaf = slash ? slash + 1 : path;
	size_t len = slash ? (size_t)(slash - path) : 0;

	if (!*leaf || strcmp(leaf, ".") == 0 || strcmp(leaf, "..") == 0)
		return -EINVAL;
	if (strlen(leaf) > NAME_MAX)
		return -ENAMETOOLONG;
	if (!slash) {
		len = 1;
		path = ".";
	} else if (len == 0) {
		len = 1; /* "/leaf": the parent is "/" */
	}
	if (len >= n)
		return -ENAMETOOLONG;
	memcpy(parent, path, len);
	parent[len] = '\0';
	*ret_leaf = leaf;
	return 0;
}

/* Open the parent of path as a directory; fd or -errno. */
static int btrfs_open_parent(const char *path, const char **ret_leaf)
{
	char parent[PATH_MAX];
	int r = btrfs_split(path, parent, sizeof(parent), ret_leaf);
	if (r < 0)
		return r;
	int fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int btrfs_is_btrfs(const char *path)
{
	struct statfs sfs;
	if (statfs(path, &sfs) < 0)
		return -errno;
	return sfs.f_type == (typeof(sfs.f_type))BTRFS_SUPER_MAGIC;
}

int btrfs_is_subvol(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	/* Inode 256 alone is not proof: other filesystems can hand it out. */
	if (!S_ISDIR(st.st_mode) || st.st_ino != BTRFS_SUBVOL_ROOT_INO)
		return 0;
	return btrfs_is_btrfs(path);
}

int btrfs_subvol_create(const char *path)
{
	const char *leaf;
	_cleanup_close_ int dfd = btrfs_open_parent(path, &leaf);
	if (dfd < 0)
		return dfd;

	struct btrfs_ioctl_vol_args args = { 0 };
	memcpy(args.name, leaf, strlen(leaf) + 1);
	if (ioctl(dfd, BTRFS_IOC_SUBVOL_CREATE, &args) < 0)
		return -errno;
	return 0;
}

int btrfs_subvol_snapshot(const char *src, const char *dst, bool readonly)
{
	_cleanup_close_ int sfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sfd < 0)
		return -errno;
	const char *leaf;
	_cleanup_close_ int dfd = btrfs_open_parent(dst, &leaf);
	if (dfd < 0)
		return dfd;

	struct btrfs_ioctl_vol_args_v2 args = { 0 };
	args.fd = sfd;
	args.flags = readonly ? BTRFS_SUBVOL_RDONLY : 0;
	memcpy(args.name, leaf, strlen(leaf) + 1);
	if (ioctl(dfd, BTRFS_IOC_SNAP_CREATE_V2, &args) < 0)
		return -errno;
	return 0;
}

/* One destroy attempt. The v2 ioctl (5.7) is tried first; older kernels
 * answer ENOTTY and get the v1 ioctl, which takes the same leaf name. Both
 * remove the whole tree in O(1): the cleaner thread frees the extents later. */
static int btrfs_destroy_once(int dfd, const char *leaf)
{
	struct btrfs_ioctl_vol_args_v2 v2 = { 0 };
	memcpy(v2.name, leaf, strlen(leaf) + 1);
	if (ioctl(dfd, BTRFS_IOC_SNAP_DESTROY_V2, &v2) == 0)
		return 0;
	if (errno != ENOTTY && errno != EOPNOTSUPP)
		return -errno;

	struct btrfs_ioctl_vol_args v1 = { 0 };
	memcpy(v1.name, leaf, strlen(leaf) + 1);
	if (ioctl(dfd, BTRFS_IOC_SNAP_DESTROY, &v1) == 0)
		return 0;
	return -errno;
}

/* Destroy, retrying EBUSY for a while. Current kernels detach mounts on a
 * deleted subvolume themselves, but a subvolume still busy in a mount
 * namespace whose last process is exiting gets the benefit of the doubt. */
static int btrfs_destroy_retry(int dfd, const char *leaf)
{
	for (int waited = 0;;) {
		int r = btrfs_destroy_once(dfd, leaf);
		if (r != -EBUSY || waited >= BTRFS_DELETE_BUSY_MS)
			return r;
		int step = waited < 100 ? 10 : 50;
		struct timespec ts = { 0, step * 1000000L };
		(void)nanosleep(&ts, NULL);
		waited += step;
	}
}

/* Open path below dirfd without following symlinks or leaving dirfd's
 * tree: the paths come from inside a tree that a sandbox wrote. "" is
 * dirfd itself. */
static int btrfs_open_beneath(int dirfd, const char *path)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	return io_openat2(dirfd, *path ? path : ".", &how);
}

/* Set or clear the read-only flag of subvolume fd. Returns 1 if the flag
 * changed, 0 if it already had that value, -errno. */
static int btrfs_set_readonly(int fd, bool readonly)
{
	uint64_t flags;
	if (ioctl(fd, BTRFS_IOC_SUBVOL_GETFLAGS, &flags) < 0)
		return -errno;
	if (!!(flags & BTRFS_SUBVOL_RDONLY) == readonly)
		return 0;
	flags ^= BTRFS_SUBVOL_RDONLY;
	if (ioctl(fd, BTRFS_IOC_SUBVOL_SETFLAGS, &flags) < 0)
		return -errno;
	return 1;
}

static int btrfs_destroy_tree(int dfd, const char *leaf, int depth);

/* Destroy every subvolume directly inside subvolume sfd (each with its own
 * nested ones). GET_SUBVOL_ROOTREF lists the children's ids and the
 * directories holding them, INO_LOOKUP_USER turns those into paths. */
static int btrfs_destroy_children(int sfd, int depth)
{
	_cleanup_free_ struct btrfs_ioctl_get_subvol_rootref_args *refs = calloc(1, sizeof(*refs));
	_cleanup_free_ struct btrfs_ioctl_ino_lookup_user_args *look = calloc(1, sizeof(*look));
	if (!refs || !look)
		return -ENOMEM;

	for (;;) {
		/* EOVERFLOW: a full batch, with min_treeid set for the next. */
		int more = ioctl(sfd, BTRFS_IOC_GET_SUBVOL_ROOTREF, refs) < 0;
		if (more && errno != EOVERFLOW)
			return -errno;
		for (int i = 0; i < refs->num_items; i++) {
			memset(look, 0, sizeof(*look));
			look->dirid = refs->rootref[i].dirid;
			look->treeid = refs->rootref[i].treeid;
			if (ioctl(sfd, BTRFS_IOC_INO_LOOKUP_USER, look) < 0)
				return -errno;
			_cleanup_close_ int dfd = btrfs_open_beneath(sfd, look->path);
			if (dfd < 0)
				return dfd;
			int r = btrfs_destroy_tree(dfd, look->name, depth + 1);
			if (r < 0 && r != -ENOENT)
				return r;
		}
		if (!more)
			return 0;
	}
}

/* Destroy subvolume leaf in directory dfd. Two refusals are worked around:
 * ENOTEMPTY, when it holds nested subvolumes (a sandbox may create them:
 * BTRFS_IOC_SUBVOL_CREATE needs no privilege), which are destroyed first,
 * up to BTRFS_NEST_MAX deep; and EPERM for a read-only subvolume on some
 * kernels (and on every kernel under user_subvol_rm_allowed), by clearing
 * the flag, put back if the delete still fails so that a failed delete
 * never leaves a writable "read-only" snapshot. */
static int btrfs_destroy_tree(int dfd, const char *leaf, int depth)
{
	int r = btrfs_destroy_retry(dfd, leaf);
	if (r != -ENOTEMPTY && r != -EPERM)
		return r;
	if (depth >= BTRFS_NEST_MAX)
		return r;
	_cleanup_close_ int sfd = btrfs_open_beneath(dfd, leaf);
	if (sfd < 0)
		return r;

	int cleared = 0;
	if (r == -EPERM) {
		cleared = btrfs_set_readonly(sfd, false);
		if (cleared != 1)
			return r;
	} else {
		r = btrfs_destroy_children(sfd, depth);
		if (r < 0)
			return r;
	}
	r = btrfs_destroy_retry(dfd, leaf);
	if (r == -ENOTEMPTY && cleared == 1) {
		/* Read-only and with nested subvolumes. */
		r = btrfs_destroy_children(sfd, depth);
		if (r == 0)
			r = btrfs_destroy_retry(dfd, leaf);
	}
	if (r < 0 && cleared == 1)
		(void)btrfs_set_readonly(sfd, true);
	return r;
}

int btrfs_subvol_delete(const char *path)
{
	/* Refuse anything but a subvolume root up front: the kernel's EINVAL
	 * for a plain directory says less, and "and nothing else" is the
	 * contract. */
	int r = btrfs_is_subvol(path);
	if (r < 0)
		return r;
	if (r == 0)
		return -EINVAL;

	const char *leaf;
	_cleanup_close_ int dfd = btrfs_open_parent(path, &leaf);
	if (dfd < 0)
		return dfd;
	return btrfs_destroy_tree(dfd, leaf, 0);
}

/* Not in the uapi headers of older systems (Linux 6.7 added it). */
#ifndef BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA
#define BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA 4
#endif

/* /sys/fs/btrfs/<fsid>/<dir>/<rest> for the file system of fd. */
static int btrfs_sysfs(int fd, const char *dir, const char *rest, char *buf, size_t n)
{
	struct btrfs_ioctl_fs_info_args fi = { 0 };
	if (ioctl(fd, BTRFS_IOC_FS_INFO, &fi) < 0)
		return -errno;
	const uint8_t *u = fi.fsid;
	int len = snprintf(buf, n,
			   "/sys/fs/btrfs/%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x/%s/%s",
			   u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
			   u[14], u[15], dir, rest);
	return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}

/* The first line of a small sysfs file into buf, without its newline. */
static int btrfs_read_line(const char *path, char *buf, size_t n)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t k = read(fd, buf, n - 1);
	if (k < 0)
		return -errno;
	buf[k] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

int btrfs_quota_mode(const char *path)
{
	char file[256], mode[32];
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = btrfs_sysfs(fd, "qgroups", "mode", file, sizeof(file));
	if (r < 0)
		return r;
	/* No qgroups directory: quotas are off. */
	r = btrfs_read_line(file, mode, sizeof(mode));
	if (r == -ENOENT)
		return BTRFS_QUOTA_OFF;
	if (r < 0)
		return r;
	if (strcmp(mode, "squota") == 0)
		return BTRFS_QUOTA_SIMPLE;
	return strcmp(mode, "qgroup") == 0 ? BTRFS_QUOTA_FULL : BTRFS_QUOTA_OFF;
}

int btrfs_quota_enable_simple(const char *path)
{
	int mode = btrfs_quota_mode(path);
	if (mode < 0 || mode == BTRFS_QUOTA_SIMPLE)
		return mode < 0 ? mode : 0;
	/* Full qgroups make every snapshot pay for the accounting (peers'
	 * README: 5x slower); they are not turned into simple ones here, the
	 * file system is someone's choice. */
	if (mode == BTRFS_QUOTA_FULL)
		return -EEXIST;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct btrfs_ioctl_quota_ctl_args args = { .cmd = BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA };
	return ioctl(fd, BTRFS_IOC_QUOTA_CTL, &args) < 0 ? -errno : 0;
}

/* The id of the subvolume fd is in (its qgroup is 0/<id>). */
static int btrfs_subvol_id(int fd, uint64_t *ret)
{
	struct btrfs_ioctl_ino_lookup_args args = { .treeid = 0, .objectid = BTRFS_SUBVOL_ROOT_INO };
	if (ioctl(fd, BTRFS_IOC_INO_LOOKUP, &args) < 0)
		return -errno;
	*ret = args.treeid;
	return 0;
}

int btrfs_qgroup_limit(const char *path, uint64_t bytes)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* qgroupid 0: the qgroup of the subvolume fd is in. Simple quotas
	 * charge each extent to the subvolume that wrote it, so referenced is
	 * what the sandbox wrote itself: the limit is on that. A flag without
	 * its value clears the limit. */
	struct btrfs_ioctl_qgroup_limit_args args = { .qgroupid = 0 };
	args.lim.flags = BTRFS_QGROUP_LIMIT_MAX_RFER;
	args.lim.max_rfer = bytes ? bytes : (uint64_t)-1;
	return ioctl(fd, BTRFS_IOC_QGROUP_LIMIT, &args) < 0 ? -errno : 0;
}

int btrfs_qgroup_usage(const char *path, uint64_t *ret_used, uint64_t *ret_limit)
{
	char file[256], line[32], rest[64];
	uint64_t id;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = btrfs_subvol_id(fd, &id);
	snprintf(rest, sizeof(rest), "0_%llu/referenced", (unsigned long long)id);
	if (r == 0)
		r = btrfs_sysfs(fd, "qgroups", rest, file, sizeof(file));
	if (r == 0)
		r = btrfs_read_line(file, line, sizeof(line));
	if (r < 0)
		return r;
	*ret_used = strtoull(line, NULL, 10);
	/* Data written and not yet committed is reserved against the limit
	 * and counted in referenced only at the commit: both, as the limit
	 * sees them. */
	snprintf(rest, sizeof(rest), "0_%llu/rsv_data", (unsigned long long)id);
	if (btrfs_sysfs(fd, "qgroups", rest, file, sizeof(file)) == 0 && btrfs_read_line(file, line, sizeof(line)) == 0)
		*ret_used += strtoull(line, NULL, 10);
	if (!ret_limit)
		return 0;
	snprintf(rest, sizeof(rest), "0_%llu/max_referenced", (unsigned long long)id);
	r = btrfs_sysfs(fd, "qgroups", rest, file, sizeof(file));
	if (r == 0)
		r = btrfs_read_line(file, line, sizeof(line));
	/* "none", or bytes. */
	*ret_limit = r == 0 ? strtoull(line, NULL, 10) : 0;
	return 0;
}

int btrfs_resize_max(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct btrfs_ioctl_vol_args args = { 0 };
	memcpy(args.name, "max", 4);
	return ioctl(fd, BTRFS_IOC_RESIZE, &args) < 0 ? -errno : 0;
}

int btrfs_device_path(const char *path, char *buf, size_t n)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* One device, id 1: the pool's loop device. */
	_cleanup_free_ struct btrfs_ioctl_dev_info_args *di = calloc(1, sizeof(*di));
	if (!di)
		return -ENOMEM;
	di->devid = 1;
	if (ioctl(fd, BTRFS_IOC_DEV_INFO, di) < 0)
		return -errno;
	int len = snprintf(buf, n, "%s", (const char *)di->path);
	return len < 0 || (size_t)len >= n ? -ENAMETOOLONG : 0;
}

int btrfs_data_reserved_open(const char *path)
{
	char file[256];
	_cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = btrfs_sysfs(fd, "allocation/data", "bytes_may_use", file, sizeof(file));
	if (r < 0)
		return r;
	int kfd = open(file, O_RDONLY | O_CLOEXEC);
	return kfd < 0 ? -errno : kfd;
}

int btrfs_data_reserved(int kfd, uint64_t *ret)
{
	char line[32];
	/* A sysfs attribute is made anew by each read from offset 0. */
	ssize_t n = pread(kfd, line, sizeof(line) - 1, 0);
	if (n <= 0)
		return n < 0 ? -errno : -EIO;
	line[n] = '\0';
	*ret = strtoull(line, NULL, 10);
	return 0;
}

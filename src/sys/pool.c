/* The storage pool. On a btrfs data directory it is a plain directory; on
 * anything else it is a btrfs filesystem in a sparse file, attached to a loop
 * device with LO_FLAGS_AUTOCLEAR and mounted at <data>/pool.
 *
 * Autoclear ties the loop device's life to its users: while the filesystem
 * is mounted the mount holds it, and the moment it is unmounted (or the
 * process that attached it dies before mounting) the kernel detaches it. So
 * there is no loop state to clean up and no daemon-side bookkeeping; every
 * start that finds <data>/pool unmounted simply attaches afresh. */
#include "sys/pool.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/loop.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "sys/btrfs.h"

/* LOOP_CTL_GET_FREE hands the same free device to racing callers; the loser
 * gets EBUSY from LOOP_CONFIGURE and asks again. */
#define POOL_LOOP_ATTEMPTS 16
/* Bytes of mkfs.btrfs's stderr kept for the error message. */
#define POOL_MKFS_ERR_MAX 256
/* In <data>: the storage driver of the pool, one line. */
#define POOL_DRIVER_FILE "pool.driver"

/* Fill err with the message and strerror(-r), and return r (< 0), so that
 * failure sites read "return pool_fail(err, -errno, ...)" with errno
 * captured before anything can clobber it. */
__attribute__((format(printf, 3, 4))) static int pool_fail(struct cove_err *err, int r, const char *fmt, ...)
{
	char msg[sizeof(err->msg)];
	va_list ap;
	va_start(ap, fmt);
	(void)vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	(void)err_sys(err, -r, "%s", msg);
	return r;
}

/* mkdir -p with mode for every component created. -errno. */
static int pool_mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = c;
		if (c == '\0')
			break;
	}
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* 1 if mnt is the root of a btrfs mount, 0 if it is not a mount point at
 * all, -EBUSY if some other filesystem is mounted there, -errno. A mount
 * point is recognised by its device differing from its parent's, which holds
 * for btrfs (each mount has its own anonymous st_dev) and for the ext4/xfs
 * data directories this path is used on. */
static int pool_mounted(const char *mnt)
{
	char parent[PATH_MAX];
	struct stat st, pst;

	if (snprintf(parent, sizeof(parent), "%s/..", mnt) >= (int)sizeof(parent))
		return -ENAMETOOLONG;
	if (stat(mnt, &st) < 0 || stat(parent, &pst) < 0)
		return -errno;
	if (st.st_dev == pst.st_dev)
		return 0;
	int r = btrfs_is_btrfs(mnt);
	if (r < 0)
		return r;
	return r ? 1 : -EBUSY;
}

/* Child side of pool_mkfs: only async-signal-safe calls from here on. */
static void pool_mkfs_child(char *const argv[], int nullfd, int errfd)
{
	sigset_t all;
	(void)sigemptyset(&all);
	/* A daemon that blocks signals for signalfd must not pass that on. */
	(void)sigprocmask(SIG_SETMASK, &all, NULL);
	if (dup2(nullfd, 0) < 0 || dup2(nullfd, 1) < 0 || dup2(errfd, 2) < 0)
		_exit(127);
	(void)execvp(argv[0], argv);
	/* A daemon started with a minimal PATH may lack the sbin dirs. */
	(void)execv("/usr/sbin/mkfs.btrfs", argv);
	(void)execv("/sbin/mkfs.btrfs", argv);
	static const char msg[] = "cannot execute mkfs.btrfs (is btrfs-progs installed?)";
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(127);
}

/* Read fd to EOF, keeping the first n-1 bytes in buf with newlines flattened;
 * the rest is drained so the child never blocks on a full pipe. */
static void pool_read_all(int fd, char *buf, size_t n)
{
	size_t len = 0;
	char tmp[512];
	for (;;) {
		ssize_t k = read(fd, tmp, sizeof(tmp));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		for (ssize_t i = 0; i < k && len + 1 < n; i++)
			buf[len++] = tmp[i] == '\n' ? ' ' : tmp[i];
	}
	while (len > 0 && buf[len - 1] == ' ')
		len--;
	buf[len] = '\0';
}

/* Format file as btrfs with mkfs.btrfs; its stderr goes into err. */
static int pool_mkfs(const char *file, struct cove_err *err)
{
	/* -K: no discard of the file, which is allocated on purpose. */
	char *const argv[] = { "mkfs.btrfs", "-q", "-f", "-K", (char *)file, NULL };
	int pipefd[2];
	char out[POOL_MKFS_ERR_MAX];

	_cleanup_close_ int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (nullfd < 0)
		return pool_fail(err, -errno, "open /dev/null");
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return pool_fail(err, -errno, "pipe for mkfs.btrfs");
	_cleanup_close_ int rfd = pipefd[0];
	_cleanup_close_ int wfd = pipefd[1];

	pid_t pid = fork();
	if (pid < 0)
		return pool_fail(err, -errno, "fork mkfs.btrfs");
	if (pid == 0)
		pool_mkfs_child(argv, nullfd, wfd);
	/* Our copy of the write end must go, or the read never sees EOF. */
	close(TAKE_FD(wfd));
	pool_read_all(rfd, out, sizeof(out));

	int status;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return pool_fail(err, -errno, "wait for mkfs.btrfs");
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		err_set(err, COVE_EINTERNAL, "mkfs.btrfs '%s' exited with %d: %s", file, WEXITSTATUS(status), out);
	else
		err_set(err, COVE_EINTERNAL, "mkfs.btrfs '%s' killed by signal %d", file, WTERMSIG(status));
	return -EIO;
}

/* Create and format the pool file. It is built as <img>.tmp and renamed
 * only once formatted and synced, so pool.img existing means a complete
 * filesystem: a crash at any earlier point leaves just a .tmp, which the
 * next start throws away and redoes. An existing pool.img is never
 * reformatted, whatever state it is in: it holds the user's data. */
static int pool_create_image(const char *img, int dirfd, uint64_t size_bytes, struct cove_err *err)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", img) >= (int)sizeof(tmp)) {
		err_set(err, COVE_EINVAL, "pool path '%s' too long", img);
		return -ENAMETOOLONG;
	}
	if (size_bytes == 0 || size_bytes > (uint64_t)INT64_MAX) {
		err_set(err, COVE_EINVAL, "pool size %llu out of range", (unsigned long long)size_bytes);
		return -EINVAL;
	}
	if (unlink(tmp) < 0 && errno != ENOENT)
		return pool_fail(err, -errno, "remove stale '%s'", tmp);

	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return pool_fail(err, -errno, "create '%s'", tmp);
	/* Allocated whole, and no larger than the host has room for
	 * (pool_size.c): no write into the pool ever needs host space. */
	uint64_t avail = 0, total = 0;
	int r = pool_host_space(tmp, &avail, &total);
	uint64_t room = r < 0 ? 0 : pool_host_room(avail, total) / (1ull << 20) * (1ull << 20);
	if (r == 0 && size_bytes > room)
		size_bytes = room;
	if (r == 0 && room < POOL_MIN_BYTES) {
		err_set(err, COVE_EFULL,
			"the host's disk under '%s' has %llu MiB free, and keeps %llu MiB of it: not enough for a "
			"pool of %llu MiB",
			tmp, (unsigned long long)(avail >> 20), (unsigned long long)(pool_host_reserve(total) >> 20),
			POOL_MIN_BYTES >> 20);
		r = -ENOSPC;
	} else if (r < 0) {
		r = pool_fail(err, r, "statvfs '%s'", tmp);
	} else if ((r = pool_allocate(fd, 0, size_bytes)) < 0) {
		r = pool_fail(err, r, "allocate %llu bytes for '%s'", (unsigned long long)size_bytes, tmp);
	}
	if (r == 0)
		r = pool_mkfs(tmp, err);
	if (r == 0 && fsync(fd) < 0)
		r = pool_fail(err, -errno, "fsync '%s'", tmp);
	if (r == 0 && rename(tmp, img) < 0)
		r = pool_fail(err, -errno, "rename '%s' to '%s'", tmp, img);
	if (r < 0) {
		(void)unlink(tmp);
		return r;
	}
	if (fsync(dirfd) < 0)
		return pool_fail(err, -errno, "fsync directory of '%s'", img);
	return 0;
}

/* Open /dev/loopN, creating the node when /dev is a plain tmpfs (as in some
 * containers) where the kernel's devtmpfs does not add it for us. */
static int pool_loop_open_dev(int nr, char *dev, size_t n)
{
	snprintf(dev, n, "/dev/loop%d", nr);
	int fd = open(dev, O_RDWR | O_CLOEXEC);
	if (fd >= 0 || errno != ENOENT)
		return fd < 0 ? -errno : fd;

	char sys[64], buf[32];
	unsigned maj, min;
	snprintf(sys, sizeof(sys), "/sys/block/loop%d/dev", nr);
	_cleanup_close_ int sfd = open(sys, O_RDONLY | O_CLOEXEC);
	if (sfd < 0)
		return -ENOENT;
	ssize_t k = read(sfd, buf, sizeof(buf) - 1);
	if (k <= 0)
		return -ENOENT;
	buf[k] = '\0';
	if (sscanf(buf, "%u:%u", &maj, &min) != 2)
		return -ENOENT;
	if (mknod(dev, S_IFBLK | 0600, makedev(maj, min)) < 0 && errno != EEXIST)
		return -errno;
	fd = open(dev, O_RDWR | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Bind file_fd to the loop device lfd with autoclear. LOOP_CONFIGURE (5.8)
 * does it atomically; older kernels answer EINVAL and get LOOP_SET_FD plus
 * LOOP_SET_STATUS64, undone if the second step fails. -EBUSY: the device
 * was taken by someone else. */
static int pool_loop_bind(int lfd, int file_fd, const char *file)
{
	struct loop_config cfg = { 0 };
	cfg.fd = (unsigned)file_fd;
	cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
	/* Informational only (losetup -a); keep the end, the unique part. */
	size_t len = strlen(file);
	const char *tail = len >= LO_NAME_SIZE ? file + len - (LO_NAME_SIZE - 1) : file;
	memcpy(cfg.info.lo_file_name, tail, strlen(tail));

	if (ioctl(lfd, LOOP_CONFIGURE, &cfg) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOTTY)
		return -errno;

	if (ioctl(lfd, LOOP_SET_FD, file_fd) < 0)
		return -errno;
	if (ioctl(lfd, LOOP_SET_STATUS64, &cfg.info) < 0) {
		int r = -errno;
		(void)ioctl(lfd, LOOP_CLR_FD, 0);
		return r;
	}
	return 0;
}

/* Attach file to a free loop device. Returns the device's fd (the caller
 * must keep it open until the filesystem is mounted: closing the last
 * reference of an autoclear device detaches it) and its path in dev. */
static int pool_loop_attach(const char *file, char *dev, size_t n, struct cove_err *err)
{
	_cleanup_close_ int ffd = open(file, O_RDWR | O_CLOEXEC);
	if (ffd < 0)
		return pool_fail(err, -errno, "open '%s'", file);
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return pool_fail(err, -errno, "open /dev/loop-control");

	int r = -EBUSY;
	for (int i = 0; i < POOL_LOOP_ATTEMPTS && r == -EBUSY; i++) {
		int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (nr < 0)
			return pool_fail(err, -errno, "find a free loop device");
		_cleanup_close_ int lfd = pool_loop_open_dev(nr, dev, n);
		if (lfd < 0)
			return pool_fail(err, lfd, "open '%s'", dev);
		r = pool_loop_bind(lfd, ffd, file);
		if (r == 0) {
			/* Best effort: direct I/O keeps pool pages out of
			 * the host's page cache, which btrfs caches already.
			 * Refused when the backing file system cannot do it. */
			(void)ioctl(lfd, LOOP_SET_DIRECT_IO, 1UL);
			return TAKE_FD(lfd);
		}
	}
	return pool_fail(err, r, "attach '%s' to a loop device", file);
}

/* The loop-backed pool: format pool.img if missing, then attach and mount
 * it at mnt unless it is mounted already. */
static int pool_open_loop(const char *data_dir, int dirfd, const char *mnt, uint64_t size_bytes, struct cove_err *err)
{
	char img[PATH_MAX], dev[32];
	if (snprintf(img, sizeof(img), "%s/pool.img", data_dir) >= (int)sizeof(img)) {
		err_set(err, COVE_EINVAL, "data directory '%s' too long", data_dir);
		return -ENAMETOOLONG;
	}
	if (mkdir(mnt, 0700) < 0 && errno != EEXIST)
		return pool_fail(err, -errno, "mkdir '%s'", mnt);

	int r = pool_mounted(mnt);
	if (r == 1)
		return 0;
	if (r == -EBUSY) {
		err_set(err, COVE_EINTERNAL, "'%s' has a file system other than btrfs mounted on it", mnt);
		return r;
	}
	if (r < 0)
		return pool_fail(err, r, "pool mount point '%s'", mnt);

	struct stat st;
	if (stat(img, &st) < 0) {
		if (errno != ENOENT)
			return pool_fail(err, -errno, "stat '%s'", img);
		r = pool_create_image(img, dirfd, size_bytes, err);
		if (r < 0)
			return r;
	} else if (!S_ISREG(st.st_mode)) {
		err_set(err, COVE_EINTERNAL, "'%s' is not a regular file", img);
		return -EINVAL;
	}

	_cleanup_close_ int lfd = pool_loop_attach(img, dev, sizeof(dev), err);
	if (lfd < 0)
		return lfd;
	/* No user_subvol_rm_allowed: cove deletes subvolumes as root, and the
	 * option would let any user inside a sandbox destroy subvolumes it
	 * can write to. No nosuid/nodev either: sandboxes bind-mount their
	 * root file systems from here, and bind mounts inherit those flags. */
	/* nodiscard: a discard would punch holes into the allocated file. */
	if (mount(dev, mnt, "btrfs", MS_NOATIME, "nodiscard") < 0) {
		r = -errno;
		(void)ioctl(lfd, LOOP_CLR_FD, 0);
		return pool_fail(err, r, "mount '%s' (%s) on '%s'", img, dev, mnt);
	}
	/* The fresh root is 0755: sandbox trees (with their setuid binaries)
	 * must not be reachable by other host users even when data_dir was
	 * created with a looser mode by someone else. */
	if (chmod(mnt, 0700) < 0)
		return pool_fail(err, -errno, "chmod '%s'", mnt);
	return 0;
}

/* 1 if the kernel has btrfs: loaded or built in, or a module it can load
 * when the pool is mounted. */
static int pool_kernel_has_btrfs(void)
{
	char buf[4096], mod[512];
	_cleanup_close_ int fd = open("/proc/filesystems", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	if (strstr(buf, "\tbtrfs\n"))
		return 1;
	struct utsname u;
	if (uname(&u) < 0)
		return 0;
	snprintf(mod, sizeof(mod), "/lib/modules/%s/kernel/fs/btrfs", u.release);
	return access(mod, F_OK) == 0;
}

/* 1 if pool_mkfs_child finds mkfs.btrfs: in PATH or in the sbin dirs. */
static int pool_has_mkfs(void)
{
	char path[PATH_MAX];
	const char *dirs = getenv("PATH");
	for (const char *p = dirs ? dirs : ""; *p;) {
		size_t len = strcspn(p, ":");
		snprintf(path, sizeof(path), "%.*s/mkfs.btrfs", (int)len, p);
		if (len && access(path, X_OK) == 0)
			return 1;
		p += len + (p[len] == ':');
	}
	return access("/usr/sbin/mkfs.btrfs", X_OK) == 0 || access("/sbin/mkfs.btrfs", X_OK) == 0;
}

/* Why a btrfs pool cannot be had on a data root, or NULL if it can. */
static const char *pool_btrfs_missing(int data_on_btrfs)
{
	if (data_on_btrfs)
		return NULL;
	struct stat st;
	_cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0 || fstat(ctl, &st) < 0 || !S_ISCHR(st.st_mode))
		return "no usable /dev/loop-control";
	if (!pool_kernel_has_btrfs())
		return "the kernel has no btrfs";
	if (!pool_has_mkfs())
		return "no mkfs.btrfs (btrfs-progs)";
	return NULL;
}

/* The driver recorded for the data root: 1 with *ret set, 0 when none is,
 * -errno with err filled. */
static int pool_driver_read(int dirfd, const char *data_dir, enum storage_driver *ret, struct cove_err *err)
{
	char buf[32];
	_cleanup_close_ int fd = openat(dirfd, POOL_DRIVER_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0;
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (n < 0)
		return pool_fail(err, -errno, "read '%s/" POOL_DRIVER_FILE "'", data_dir);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	enum storage_driver drv;
	if (storage_driver_parse(buf, &drv) < 0 || drv == STORAGE_AUTO) {
		err_set(err, COVE_EINTERNAL, "'%s/" POOL_DRIVER_FILE "' names no storage driver: '%s'", data_dir, buf);
		return -EINVAL;
	}
	*ret = drv;
	return 1;
}

/* Record drv for the data root, whole or not at all: a temporary file,
 * synced, renamed into place, the directory synced. */
static int pool_driver_write(int dirfd, const char *data_dir, enum storage_driver drv, struct cove_err *err)
{
	char text[32];
	int len = snprintf(text, sizeof(text), "%s\n", storage_driver_name(drv));
	_cleanup_close_ int fd =
		openat(dirfd, POOL_DRIVER_FILE ".tmp", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, text, (size_t)len) != len || fsync(fd) < 0 ||
	    renameat(dirfd, POOL_DRIVER_FILE ".tmp", dirfd, POOL_DRIVER_FILE) < 0 || fsync(dirfd) < 0)
		return pool_fail(err, errno ? -errno : -EIO, "write '%s/" POOL_DRIVER_FILE "'", data_dir);
	return 0;
}

/* Which driver the data root gets, recorded before anything of the pool
 * is made, so that a crash leaves a pool and its driver, or nothing. */
static int pool_choose_driver(struct pool *p, int dirfd, const char *data_dir, enum storage_driver want,
			      int data_on_btrfs, struct cove_err *err)
{
	enum storage_driver had = STORAGE_AUTO;
	int recorded = pool_driver_read(dirfd, data_dir, &had, err);
	if (recorded < 0)
		return recorded;
	int known = recorded;
	struct stat st;
	if (!known && (fstatat(dirfd, "pool.img", &st, AT_SYMLINK_NOFOLLOW) == 0 ||
		       (data_on_btrfs && fstatat(dirfd, "pool", &st, AT_SYMLINK_NOFOLLOW) == 0))) {
		had = STORAGE_BTRFS; /* a pool made before drivers were recorded */
		known = 1;
	}
	if (known && want != STORAGE_AUTO && want != had) {
		err_set(err, COVE_ESTATE,
			"data root '%s' holds a pool of the %s storage driver (see '%s/" POOL_DRIVER_FILE
			"'), not %s: start coved with --storage %s, or use another data root",
			data_dir, storage_driver_name(had), data_dir, storage_driver_name(want),
			storage_driver_name(had));
		return -EEXIST;
	}
	if (known) {
		p->driver = had;
	} else if (want != STORAGE_AUTO) {
		p->driver = want;
	} else {
		p->fallback = pool_btrfs_missing(data_on_btrfs);
		p->driver = p->fallback ? STORAGE_OVERLAY : STORAGE_BTRFS;
	}
	return recorded ? 0 : pool_driver_write(dirfd, data_dir, p->driver, err);
}

void pool_quotas(struct pool *p, bool enable)
{
	if (!enable) {
		p->no_quotas = "coved was started with --no-disk-quota";
		if (p->loop_backed && btrfs_quota_mode(p->dir) == BTRFS_QUOTA_SIMPLE)
			p->no_quotas = "coved was started with --no-disk-quota (the pool keeps counting)";
	} else if (p->driver != STORAGE_BTRFS) {
		p->no_quotas = "the overlay storage driver has no per-sandbox quota";
	}
	if (p->no_quotas)
		return;
	int r = p->loop_backed ? btrfs_quota_enable_simple(p->dir) : btrfs_quota_mode(p->dir);
	if (r == -EEXIST || r == BTRFS_QUOTA_FULL)
		p->no_quotas = "the pool's btrfs has full qgroups on, not simple quotas";
	else if (!p->loop_backed && r == BTRFS_QUOTA_OFF)
		p->no_quotas = "the data root's btrfs has no simple quotas (btrfs quota enable --simple)";
	else if (r < 0)
		p->no_quotas = "this kernel has no btrfs simple quotas (Linux 6.7 and later have)";
	p->quotas = !p->no_quotas;
}

int pool_open(struct pool *ret, const char *data_dir, enum storage_driver want, uint64_t size_bytes,
	      struct cove_err *err)
{
	struct pool p = { 0 };

	if (snprintf(p.dir, sizeof(p.dir), "%s/pool", data_dir) >= (int)sizeof(p.dir)) {
		err_set(err, COVE_EINVAL, "data directory '%s' too long", data_dir);
		return -ENAMETOOLONG;
	}
	int r = pool_mkdir_p(data_dir, 0700);
	if (r < 0)
		return pool_fail(err, r, "create data directory '%s'", data_dir);

	_cleanup_close_ int dirfd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return pool_fail(err, -errno, "open '%s'", data_dir);
	/* Two starts racing on one data directory would both see the pool
	 * unmounted and mount it twice; the lock serialises them and is
	 * released when lockfd closes. A file of its own, not data_dir: a
	 * daemon holding its own flock on data_dir would deadlock with us. */
	_cleanup_close_ int lockfd = openat(dirfd, "pool.lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lockfd < 0)
		return pool_fail(err, -errno, "open '%s/pool.lock'", data_dir);
	if (flock(lockfd, LOCK_EX) < 0)
		return pool_fail(err, -errno, "lock '%s/pool.lock'", data_dir);

	int on_btrfs = btrfs_is_btrfs(data_dir);
	if (on_btrfs < 0)
		return pool_fail(err, on_btrfs, "statfs '%s'", data_dir);
	r = pool_choose_driver(&p, dirfd, data_dir, want, on_btrfs, err);
	if (r < 0)
		return r;
	if (p.driver == STORAGE_OVERLAY) {
		/* 0700 whatever made it: sandbox trees (with their setuid
		 * binaries) must not be reachable by other host users. */
		if ((mkdir(p.dir, 0700) < 0 && errno != EEXIST) || chmod(p.dir, 0700) < 0)
			return pool_fail(err, -errno, "make '%s'", p.dir);
	} else if (on_btrfs) {
		if (mkdir(p.dir, 0700) < 0 && errno != EEXIST)
			return pool_fail(err, -errno, "mkdir '%s'", p.dir);
	} else {
		r = pool_open_loop(data_dir, dirfd, p.dir, size_bytes, err);
		if (r < 0)
			return r;
		p.loop_backed = 1;
		snprintf(p.img, sizeof(p.img), "%s/pool.img", data_dir);
	}
	*ret = p;
	return 0;
}

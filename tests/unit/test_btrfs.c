/* btrfs subvolumes and the loop-backed pool, on a real btrfs: needs root,
 * /dev/loop-control and mkfs.btrfs, and a /var/tmp that is not btrfs (so
 * that the pool is loop-backed). Everything lives in a mkdtemp directory
 * that is unmounted and removed at the end. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <linux/magic.h>

#include "sys/btrfs.h"
#include "sys/pool.h"
#include "tap.h"

#define GIB (1024ULL * 1024 * 1024)
#define TIMING_RUNS 5

static char base[] = "/var/tmp/cove-test-btrfs-XXXXXX";

/* snprintf for paths; the test's paths are far below PATH_MAX. */
static void pathcpy(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void pathcpy(char *dst, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(dst, n, fmt, ap);
	va_end(ap);
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, s, strlen(s));
	int r = n == (ssize_t)strlen(s) ? 0 : -EIO;
	close(fd);
	return r;
}

/* File contents as a static string ("" when unreadable). */
static const char *read_file(const char *path)
{
	static char buf[256];
	buf[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return buf;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
	return buf;
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* How many loop devices have file as their backing file. */
static int loops_backing(const char *file)
{
	char want[PATH_MAX];
	glob_t g;
	int n = 0;

	if (!realpath(file, want))
		pathcpy(want, sizeof(want), "%s", file);
	if (glob("/sys/block/loop*/loop/backing_file", 0, NULL, &g) != 0)
		return 0;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		char got[PATH_MAX];
		int fd = open(g.gl_pathv[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t k = read(fd, got, sizeof(got) - 1);
		close(fd);
		if (k <= 0)
			continue;
		got[k] = '\0';
		got[strcspn(got, "\n")] = '\0';
		n += strcmp(got, want) == 0;
	}
	globfree(&g);
	return n;
}

/* Autoclear detaches on the last close, which may trail umount a little. */
static int loops_backing_settled(const char *file)
{
	int n = 0;
	for (int i = 0; i < 200 && (n = loops_backing(file)) > 0; i++)
		usleep(10000);
	return n;
}

static bool is_mountpoint(const char *path)
{
	struct stat a, b;
	return stat(path, &a) == 0 && stat(pathf("%s/..", path), &b) == 0 && a.st_dev != b.st_dev;
}

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void test_subvolumes(const char *pool)
{
	char src[PATH_MAX], ro[PATH_MAX], rw[PATH_MAX];
	pathcpy(src, sizeof(src), "%s/src", pool);
	pathcpy(ro, sizeof(ro), "%s/ro", pool);
	pathcpy(rw, sizeof(rw), "%s/rw", pool);

	CHECK1(btrfs_subvol_create(src) == 0, "create subvolume");
	CHECK1(btrfs_subvol_create(src) == -EEXIST, "create over an existing one: EEXIST");
	CHECK1(btrfs_subvol_create(pathf("%s/no/such", pool)) == -ENOENT, "create without parent: ENOENT");
	CHECK1(write_file(pathf("%s/a.txt", src), "hello") == 0 && mkdir(pathf("%s/dir", src), 0755) == 0 &&
		       write_file(pathf("%s/dir/b.txt", src), "world") == 0,
	       "write files into the subvolume");

	CHECK1(btrfs_subvol_snapshot(src, ro, true) == 0, "read-only snapshot");
	CHECK1(btrfs_subvol_snapshot(src, rw, false) == 0, "writable snapshot");
	CHECK1(btrfs_subvol_snapshot(src, rw, false) == -EEXIST, "snapshot onto an existing path: EEXIST");
	CHECK1(btrfs_subvol_snapshot(pathf("%s/dir", src), pathf("%s/x", pool), false) < 0,
	       "snapshot of a plain directory fails");
	CHECK_STR(read_file(pathf("%s/a.txt", ro)), "hello", "ro snapshot has a.txt");
	CHECK_STR(read_file(pathf("%s/dir/b.txt", ro)), "world", "ro snapshot has dir/b.txt");
	CHECK_STR(read_file(pathf("%s/a.txt", rw)), "hello", "rw snapshot has a.txt");
	CHECK_STR(read_file(pathf("%s/dir/b.txt", rw)), "world", "rw snapshot has dir/b.txt");

	CHECK1(write_file(pathf("%s/new.txt", ro), "x") == -EROFS, "ro snapshot rejects a new file: EROFS");
	CHECK1(open(pathf("%s/a.txt", ro), O_WRONLY | O_CLOEXEC) < 0 && errno == EROFS,
	       "ro snapshot rejects writing a file: EROFS");
	CHECK1(write_file(pathf("%s/a.txt", rw), "changed") == 0 && write_file(pathf("%s/new.txt", rw), "n") == 0,
	       "write into the rw snapshot");
	CHECK_STR(read_file(pathf("%s/a.txt", src)), "hello", "source unchanged by the snapshot's write");
	CHECK1(!exists(pathf("%s/new.txt", src)), "source does not see the snapshot's new file");

	CHECK1(btrfs_is_subvol(src) == 1 && btrfs_is_subvol(ro) == 1 && btrfs_is_subvol(rw) == 1,
	       "is_subvol on subvolumes");
	CHECK1(btrfs_is_subvol(pathf("%s/dir", src)) == 0, "is_subvol on a plain directory: 0");
	CHECK1(btrfs_is_subvol(pathf("%s/a.txt", src)) == 0, "is_subvol on a file: 0");
	CHECK1(btrfs_is_subvol(pathf("%s/missing", pool)) == -ENOENT, "is_subvol on a missing path: ENOENT");

	CHECK1(btrfs_subvol_delete(pathf("%s/dir", src)) == -EINVAL && exists(pathf("%s/dir/b.txt", src)),
	       "delete refuses a plain directory and leaves it alone");
	CHECK1(btrfs_subvol_delete(ro) == 0 && !exists(ro), "delete the ro snapshot");
	CHECK1(btrfs_subvol_delete(rw) == 0 && !exists(rw), "delete the rw snapshot (with files)");
	CHECK1(btrfs_subvol_delete(src) == 0 && !exists(src), "delete the source (with files and dirs)");
	CHECK1(btrfs_subvol_delete(src) == -ENOENT, "delete a missing subvolume: ENOENT");
}

/* A subvolume that is still a mount point (a sandbox's namespace not yet
 * gone) is deleted all the same: the kernel detaches the mounts on it. */
static void test_delete_mounted(const char *pool)
{
	char sv[PATH_MAX];
	pathcpy(sv, sizeof(sv), "%s/mounted", pool);
	if (btrfs_subvol_create(sv) < 0 || mount(sv, sv, NULL, MS_BIND, NULL) < 0) {
		CHECK1(0, "set up a mounted subvolume: %s", strerror(errno));
		return;
	}
	CHECK1(is_mountpoint(sv), "the subvolume is a mount point");
	int r = btrfs_subvol_delete(sv);
	CHECK1(r == 0 && !exists(sv), "delete a subvolume that is a mount point (%d)", r);
	if (r < 0)
		(void)umount2(sv, MNT_DETACH);
}

/* Nested subvolumes (which a sandbox can create unprivileged) are deleted
 * with their parent, depth first, wherever they sit in its tree. */
static void test_delete_nested(const char *pool)
{
	char top[PATH_MAX];
	pathcpy(top, sizeof(top), "%s/nest", pool);
	bool ok = btrfs_subvol_create(top) == 0 && btrfs_subvol_create(pathf("%s/a", top)) == 0 &&
		  btrfs_subvol_create(pathf("%s/a/b", top)) == 0 && mkdir(pathf("%s/d", top), 0755) == 0 &&
		  mkdir(pathf("%s/d/e", top), 0755) == 0 && btrfs_subvol_create(pathf("%s/d/e/c", top)) == 0 &&
		  write_file(pathf("%s/a/b/f", top), "x") == 0 &&
		  btrfs_subvol_snapshot(pathf("%s/a", top), pathf("%s/d/ro", top), true) == 0;
	CHECK1(ok, "build nest/{a/b, d/e/c, d/ro} as nested subvolumes");
	int r = btrfs_subvol_delete(top);
	CHECK1(r == 0 && !exists(top), "delete removes nested subvolumes too (%d)", r);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static void report(const char *what, int64_t *us, int n)
{
	printf("# %-34s", what);
	for (int i = 0; i < n; i++)
		printf(" %6lld", (long long)us[i]);
	qsort(us, n, sizeof(*us), cmp_i64);
	printf("  (median %lld us)\n", (long long)us[n / 2]);
}

/* Microseconds per operation, on a subvolume holding 200 small files. The
 * first snapshot also writes those files out (a snapshot must contain
 * them); the second shows the bare cost of the snapshot's commit. */
static void test_timings(const char *pool)
{
	int64_t c[TIMING_RUNS], sr[TIMING_RUNS], sw[TIMING_RUNS], d[TIMING_RUNS], dr[TIMING_RUNS];
	int ok = 1;
	for (int i = 0; i < TIMING_RUNS; i++) {
		char sv[PATH_MAX], snr[PATH_MAX], snw[PATH_MAX];
		pathcpy(sv, sizeof(sv), "%s/t%d", pool, i);
		pathcpy(snr, sizeof(snr), "%s/t%d-ro", pool, i);
		pathcpy(snw, sizeof(snw), "%s/t%d-rw", pool, i);
		int64_t t = now_us();
		ok &= btrfs_subvol_create(sv) == 0;
		c[i] = now_us() - t;
		for (int f = 0; f < 200; f++)
			ok &= write_file(pathf("%s/f%d", sv, f), "some content") == 0;
		t = now_us();
		ok &= btrfs_subvol_snapshot(sv, snr, true) == 0;
		sr[i] = now_us() - t;
		t = now_us();
		ok &= btrfs_subvol_snapshot(sv, snw, false) == 0;
		sw[i] = now_us() - t;
		t = now_us();
		ok &= btrfs_subvol_delete(snr) == 0;
		dr[i] = now_us() - t;
		ok &= btrfs_subvol_delete(snw) == 0;
		t = now_us();
		ok &= btrfs_subvol_delete(sv) == 0;
		d[i] = now_us() - t;
	}
	CHECK1(ok, "timing runs succeeded");
	report("subvol_create (empty)", c, TIMING_RUNS);
	report("snapshot ro (200 unflushed files)", sr, TIMING_RUNS);
	report("snapshot rw (same, now flushed)", sw, TIMING_RUNS);
	report("delete (a snapshot)", dr, TIMING_RUNS);
	report("delete (the 200-file source)", d, TIMING_RUNS);
}

/* Write n MiB to path: 0, or the -errno that stopped it. */
static int write_mib(const char *path, int n)
{
	static char buf[1 << 20];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), r = 0;
	if (fd < 0)
		return -errno;
	for (int i = 0; i < n && r == 0; i++)
		for (size_t done = 0; done < sizeof(buf) && r == 0;) {
			ssize_t k = write(fd, buf + done, sizeof(buf) - done);
			if (k <= 0)
				r = k < 0 ? -errno : -EIO;
			done += k > 0 ? (size_t)k : 0;
		}
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}

/* Simple quotas: a limit stops a writer with EDQUOT, a snapshot does not
 * inherit it, and space freed is writable again. */
static void test_quotas(struct pool *p)
{
	char sv[PATH_MAX], snap[PATH_MAX];
	uint64_t used = 0, limit = 0;
	pool_quotas(p, true);
	CHECK1(p->quotas && !p->no_quotas, "simple quotas on a loop-backed pool (%s)",
	       p->no_quotas ? p->no_quotas : "");
	CHECK1(btrfs_quota_mode(p->dir) == BTRFS_QUOTA_SIMPLE, "the pool's quota mode is simple");
	CHECK1(btrfs_quota_enable_simple(p->dir) == 0, "enabling them again is a no-op");
	pathcpy(sv, sizeof(sv), "%s/limited", p->dir);
	pathcpy(snap, sizeof(snap), "%s/limited-snap", p->dir);
	CHECK1(btrfs_subvol_create(sv) == 0 && btrfs_qgroup_limit(sv, 16 << 20) == 0, "limit a subvolume to 16M");
	CHECK1(btrfs_qgroup_usage(sv, &used, &limit) == 0 && limit == 16 << 20, "its limit reads back (%llu)",
	       (unsigned long long)limit);
	CHECK1(write_mib(pathf("%s/big", sv), 40) == -EDQUOT, "writing 40M into it fails with EDQUOT");
	CHECK1(btrfs_qgroup_usage(sv, &used, NULL) == 0 && used > (8u << 20) && used <= (16u << 20),
	       "its usage is near the limit (%llu)", (unsigned long long)used);
	CHECK1(unlink(pathf("%s/big", sv)) == 0 && write_mib(pathf("%s/small", sv), 1) == 0,
	       "after a delete, a small write works");
	CHECK1(btrfs_subvol_snapshot(sv, snap, false) == 0 && btrfs_qgroup_usage(snap, &used, &limit) == 0 &&
		       limit == 0,
	       "a snapshot has no limit of its own (the engine sets it)");
	CHECK1(btrfs_qgroup_limit(sv, 0) == 0 && btrfs_qgroup_usage(sv, &used, &limit) == 0 && limit == 0,
	       "limit 0 lifts it");
	CHECK1(write_mib(pathf("%s/big", sv), 40) == 0, "and 40M fit then");
	(void)btrfs_subvol_delete(snap);
	(void)btrfs_subvol_delete(sv);
}

/* The pool's growth: pure steps, then a real one. */
static void test_grow(struct pool *p)
{
	CHECK1(pool_grow_step(8 * GIB, 4 * GIB, 1024 * GIB) == 0, "a pool with headroom does not grow");
	CHECK1(pool_grow_step(GIB, GIB * 8 / 10, 1024 * GIB) == 0, "nor a new 1 GiB one");
	CHECK1(pool_grow_step(8 * GIB, GIB / 2, 1024 * GIB) == 2 * GIB, "one short of it grows by 2 GiB");
	CHECK1(pool_grow_step(40 * GIB, 4 * GIB, 1024 * GIB) == 10 * GIB, "a large one by a quarter");
	CHECK1(pool_grow_step(8 * GIB, 0, 9 * GIB) == GIB, "never past the maximum");
	CHECK1(pool_host_reserve(252 * GIB) == 2 * GIB && pool_host_reserve(GIB) == 64 << 20,
	       "the host keeps 5%%, from 64 MiB to 2 GiB");
	CHECK1(pool_host_room(GIB, 100 * GIB) == 0, "no room when the host has less than its reserve");
	struct pool_growth g;
	struct cove_err err = { 0 };
	struct statfs before, after;
	CHECK1(statfs(p->dir, &before) == 0 && pool_grow(p, 1024 * GIB, 0, &g, &err) == 0 && g.grown == 0,
	       "a fresh 1 GiB pool has its headroom (%s)", err.msg);
	/* Writes not yet written out are counted as taken (statfs does not
	 * count them until they are): 100 MiB written and not synced are in
	 * one or the other, whenever writeback happens to run. Reserved is
	 * read first: data moving meanwhile is counted twice, never lost. */
	uint64_t reserved = 0;
	struct statfs f0, f1;
	int kfd = btrfs_data_reserved_open(p->dir);
	int wfd = open(pathf("%s/pending", p->dir), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	static char chunk[1 << 20];
	CHECK1(kfd >= 0 && wfd >= 0 && statfs(p->dir, &f0) == 0, "open the reserved counter");
	for (int i = 0; wfd >= 0 && i < 100; i++)
		(void)!write(wfd, chunk, sizeof(chunk));
	CHECK1(kfd >= 0 && btrfs_data_reserved(kfd, &reserved) == 0 && statfs(p->dir, &f1) == 0 &&
		       (int64_t)reserved + ((int64_t)f0.f_bavail - (int64_t)f1.f_bavail) * f1.f_bsize >= 90 << 20,
	       "100 MiB written and not synced: reserved (%llu) or taken", (unsigned long long)reserved);
	if (wfd >= 0)
		close(wfd);
	(void)unlink(pathf("%s/pending", p->dir));
	CHECK1(statfs(p->dir, &before) == 0 && pool_grow(p, 1024 * GIB, 900ull << 20, &g, &err) == 0,
	       "900 MiB reserved: pool_grow on the fresh pool (%s)", err.msg);
	if (kfd >= 0)
		close(kfd);
	CHECK1(g.grown == 2 * GIB && g.size == 3 * GIB, "it grew by 2 GiB (%llu)", (unsigned long long)g.grown);
	struct stat st;
	CHECK1(stat(p->img, &st) == 0 && (uint64_t)st.st_size == 3 * GIB && (uint64_t)st.st_blocks * 512 >= 3 * GIB,
	       "the file is 3 GiB, allocated");
	CHECK1(statfs(p->dir, &after) == 0 && after.f_blocks > before.f_blocks + (GIB / after.f_bsize),
	       "btrfs took the new space online");
}

static void test_pool_lifecycle(const char *data)
{
	struct pool p;
	struct cove_err err = { 0 };
	char img[PATH_MAX], dir[512];
	pathcpy(img, sizeof(img), "%s/pool.img", data);
	struct stat st;
	struct statfs sfs;

	int r = pool_open(&p, data, STORAGE_BTRFS, GIB, &err);
	CHECK1(r == 0, "pool_open creates the pool (%d %s)", r, err.msg);
	if (r < 0)
		return;
	pathcpy(dir, sizeof(dir), "%s", p.dir);
	CHECK1(strcmp(dir, pathf("%s/pool", data)) == 0, "pool dir is <data>/pool");
	CHECK1(p.loop_backed == 1, "pool is loop-backed on a non-btrfs data dir");
	CHECK1(stat(img, &st) == 0 && (uint64_t)st.st_size == GIB && (uint64_t)st.st_blocks * 512 >= GIB,
	       "pool.img is a 1 GiB file, allocated whole (no host space needed later)");
	CHECK1(!exists(pathf("%s.tmp", img)), "no pool.img.tmp left behind");
	CHECK1(statfs(dir, &sfs) == 0 && sfs.f_type == (typeof(sfs.f_type))BTRFS_SUPER_MAGIC,
	       "a btrfs is mounted at the pool dir");
	CHECK1(is_mountpoint(dir), "the pool dir is a mount point");
	CHECK1(btrfs_is_btrfs(dir) == 1 && btrfs_is_btrfs(data) == 0, "is_btrfs on pool and data dir");
	CHECK1(stat(dir, &st) == 0 && (st.st_mode & 07777) == 0700, "pool root is mode 0700");
	CHECK1(loops_backing(img) == 1, "one loop device backs pool.img");

	test_subvolumes(dir);
	test_quotas(&p);
	test_grow(&p);
	test_delete_mounted(dir);
	test_delete_nested(dir);
	test_timings(dir);

	char keep[PATH_MAX];
	pathcpy(keep, sizeof(keep), "%s/keep", dir);
	CHECK1(btrfs_subvol_create(keep) == 0 && write_file(pathf("%s/f", keep), "persisted") == 0,
	       "write a subvolume to survive remounting");

	memset(&p, 0, sizeof(p));
	r = pool_open(&p, data, STORAGE_BTRFS, GIB, &err);
	CHECK1(r == 0 && p.loop_backed == 1 && strcmp(p.dir, dir) == 0, "pool_open on a mounted pool (%d %s)", r,
	       err.msg);
	CHECK_STR(read_file(pathf("%s/pool.driver", data)), "btrfs\n", "the driver is recorded");
	memset(&err, 0, sizeof(err));
	CHECK1(pool_open(&p, data, STORAGE_OVERLAY, GIB, &err) < 0 && err.code == COVE_ESTATE,
	       "asked for overlay on a btrfs data root: refused (%s)", err.msg);
	/* A data root from before drivers were recorded: its pool is btrfs. */
	CHECK1(unlink(pathf("%s/pool.driver", data)) == 0, "forget the driver");
	memset(&err, 0, sizeof(err));
	CHECK1(pool_open(&p, data, STORAGE_OVERLAY, GIB, &err) < 0 && err.code == COVE_ESTATE,
	       "a pool.img without record is btrfs: overlay refused (%s)", err.msg);
	r = pool_open(&p, data, STORAGE_AUTO, GIB, &err);
	CHECK1(r == 0 && p.driver == STORAGE_BTRFS && p.loop_backed == 1, "auto opens it as btrfs (%d %s)", r, err.msg);
	CHECK_STR(read_file(pathf("%s/pool.driver", data)), "btrfs\n", "and records it");
	CHECK1(loops_backing(img) == 1, "no new loop device for the mounted pool");

	CHECK1(umount2(dir, 0) == 0, "umount the pool");
	CHECK1(loops_backing_settled(img) == 0, "autoclear freed the loop device");
	r = pool_open(&p, data, STORAGE_BTRFS, GIB, &err);
	CHECK1(r == 0 && is_mountpoint(dir), "pool_open re-mounts the pool (%d %s)", r, err.msg);
	CHECK1(loops_backing(img) == 1, "one loop device backs pool.img again");
	CHECK_STR(read_file(pathf("%s/keep/f", dir)), "persisted", "files survived the remount");
	CHECK1(btrfs_is_subvol(pathf("%s/keep", dir)) == 1, "subvolume survived the remount");

	CHECK1(umount2(dir, 0) == 0, "umount the pool again");
	CHECK1(loops_backing_settled(img) == 0, "no loop device backs pool.img at the end");
}

/* A crash between creating and formatting leaves pool.img.tmp: it is
 * thrown away and the pool created afresh. */
static void test_half_created(const char *data)
{
	struct pool p;
	struct cove_err err = { 0 };
	char tmp[PATH_MAX];
	pathcpy(tmp, sizeof(tmp), "%s/pool.img.tmp", data);

	CHECK1(mkdir(data, 0700) == 0 && write_file(tmp, "garbage, not a file system") == 0,
	       "leave a half-created pool.img.tmp");
	int r = pool_open(&p, data, STORAGE_BTRFS, GIB, &err);
	CHECK1(r == 0 && is_mountpoint(p.dir) && btrfs_is_btrfs(p.dir) == 1,
	       "pool_open recovers from a half-created pool (%d %s)", r, err.msg);
	CHECK1(!exists(tmp) && exists(pathf("%s/pool.img", data)), "pool.img.tmp replaced by pool.img");
	if (r == 0)
		CHECK1(umount2(p.dir, 0) == 0, "umount the recovered pool");
	CHECK1(loops_backing_settled(pathf("%s/pool.img", data)) == 0, "its loop device is freed");
}

/* mkfs.btrfs refusing (a file below its minimum size) is reported with its
 * own words, and leaves no pool file behind. */
static void test_mkfs_failure(const char *data)
{
	struct pool p;
	struct cove_err err = { 0 };

	int r = pool_open(&p, data, STORAGE_BTRFS, 16ULL << 20, &err);
	CHECK1(r < 0 && strstr(err.msg, "mkfs.btrfs") != NULL, "a too small pool fails in mkfs (%s)", err.msg);
	CHECK1(!exists(pathf("%s/pool.img", data)) && !exists(pathf("%s/pool.img.tmp", data)),
	       "no pool file left after mkfs failed");
}

/* Something other than btrfs mounted at <data>/pool is not mounted over. */
static void test_foreign_mount(const char *data)
{
	struct pool p;
	struct cove_err err = { 0 };
	char mnt[PATH_MAX];
	pathcpy(mnt, sizeof(mnt), "%s/pool", data);

	if (mkdir(data, 0700) < 0 || mkdir(mnt, 0700) < 0 || mount("tmpfs", mnt, "tmpfs", 0, "size=1m") < 0) {
		CHECK1(0, "mount a tmpfs at <data>/pool: %s", strerror(errno));
		return;
	}
	int r = pool_open(&p, data, STORAGE_BTRFS, GIB, &err);
	CHECK1(r == -EBUSY && err.msg[0], "pool_open refuses a foreign mount (%s)", err.msg);
	CHECK1(!exists(pathf("%s/pool.img", data)), "and creates no pool file");
	CHECK1(umount2(mnt, 0) == 0, "umount the tmpfs");
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Unmount whatever a failed check left mounted, then remove the tree
 * without crossing into any mount (FTW_MOUNT). */
static void cleanup(void)
{
	const char *mnts[] = { "data/sub/pool", "half/pool", "small/pool", "foreign/pool" };
	for (size_t i = 0; i < sizeof(mnts) / sizeof(mnts[0]); i++) {
		char m[PATH_MAX];
		pathcpy(m, sizeof(m), "%s/%s", base, mnts[i]);
		while (is_mountpoint(m) && umount2(m, MNT_DETACH) == 0)
			;
	}
	CHECK1(nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) == 0 && !exists(base),
	       "remove the test directory");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!tap_loop_tmpdir(base))
		return tap_done();
	if (btrfs_is_btrfs(base) == 1) {
		SKIP("/var/tmp is btrfs: the pool would not be loop-backed");
	} else {
		char data[PATH_MAX];
		/* Two levels, for pool_open's mkdir -p. */
		pathcpy(data, sizeof(data), "%s/data/sub", base);
		test_pool_lifecycle(data);
		pathcpy(data, sizeof(data), "%s/half", base);
		test_half_created(data);
		pathcpy(data, sizeof(data), "%s/small", base);
		test_mkfs_failure(data);
		pathcpy(data, sizeof(data), "%s/foreign", base);
		test_foreign_mount(data);
	}
	cleanup();
	return tap_done();
}

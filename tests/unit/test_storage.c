/* The overlay storage driver: tree_copy keeps everything an overlay upper
 * layer holds (whiteouts, trusted.overlay xattrs, owners, modes, times,
 * holes, hard links), tree_remove removes any depth and neither crosses a
 * mount; and pool_open records a data root's driver and refuses the other.
 * Needs root (owners, devices, trusted xattrs, mounts). Everything lives in
 * a mkdtemp directory removed at the end. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sched.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "sys/pool.h"
#include "sys/storage.h"
#include "sys/tree.h"
#include "tap.h"

static char base[] = "/var/tmp/cove-test-storage-XXXXXX";

/* A path to keep: pathf's buffers are reused. */
#define PATH_VAR(name, ...)  \
	char name[PATH_MAX]; \
	snprintf(name, sizeof(name), __VA_ARGS__)

static int write_file(const char *path, const char *s, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -EIO;
}

static bool exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* A tree with one of everything an overlay upper layer can hold. 0 or the
 * line that failed. */
static int make_tree(const char *t)
{
	struct timespec old[2] = { { 981173106, 5 }, { 981173106, 700 } };
	char big[200000];
	memset(big, 'b', sizeof(big));
	big[sizeof(big) - 1] = '\0';
	int fd;
	if (mkdir(t, 0755) < 0 || mkdir(pathf("%s/etc", t), 0755) < 0 || mkdir(pathf("%s/etc/ssh", t), 0700) < 0)
		return __LINE__;
	if (write_file(pathf("%s/etc/hostname", t), "sb_x\n", 0644) < 0 ||
	    write_file(pathf("%s/etc/ssh/new", t), "only this\n", 0600) < 0 ||
	    write_file(pathf("%s/etc/big", t), big, 0644) < 0 || write_file(pathf("%s/empty", t), "", 0644) < 0)
		return __LINE__;
	/* Overlay's marks: a whiteout, an opaque directory, a redirect. */
	if (mknod(pathf("%s/etc/motd", t), S_IFCHR | 0, makedev(0, 0)) < 0 ||
	    setxattr(pathf("%s/etc/ssh", t), "trusted.overlay.opaque", "y", 1, 0) < 0 ||
	    setxattr(pathf("%s/etc", t), "trusted.overlay.redirect", "/x", 2, 0) < 0)
		return __LINE__;
	/* Owners, setuid, capabilities (dropped by a chown: set after it). */
	if (write_file(pathf("%s/suid", t), "#!/bin/sh\n", 0755) < 0 || chown(pathf("%s/suid", t), 1234, 4321) < 0 ||
	    chmod(pathf("%s/suid", t), 04755) < 0)
		return __LINE__;
	static const char cap[] = { 0x01, 0x00, 0x00, 0x02, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00,
				    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00 };
	if (write_file(pathf("%s/capped", t), "x", 0755) < 0 || chown(pathf("%s/capped", t), 7, 7) < 0 ||
	    setxattr(pathf("%s/capped", t), "security.capability", cap, sizeof(cap), 0) < 0 ||
	    setxattr(pathf("%s/capped", t), "user.note", "hello", 5, 0) < 0)
		return __LINE__;
	/* Symlinks (one dangling, one owned by someone), a fifo, a socket,
	 * a device, hard links. */
	if (symlink("../etc/hostname", pathf("%s/rel", t)) < 0 || symlink("/nowhere", pathf("%s/dangling", t)) < 0 ||
	    lchown(pathf("%s/dangling", t), 55, 66) < 0 || mkfifo(pathf("%s/fifo", t), 0620) < 0 ||
	    mknod(pathf("%s/sock", t), S_IFSOCK | 0755, 0) < 0 ||
	    mknod(pathf("%s/null", t), S_IFCHR | 0666, makedev(1, 3)) < 0 ||
	    link(pathf("%s/etc/hostname", t), pathf("%s/hard", t)) < 0 ||
	    link(pathf("%s/etc/motd", t), pathf("%s/hard-whiteout", t)) < 0)
		return __LINE__;
	/* A sparse file of 1 GiB with 5 bytes in its middle. */
	if ((fd = open(pathf("%s/sparse", t), O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) < 0)
		return __LINE__;
	int bad = ftruncate(fd, 1 << 30) < 0 || pwrite(fd, "holes", 5, 1 << 29) != 5;
	close(fd);
	if (bad)
		return __LINE__;
	/* A directory nobody may enter, and old times (set last). */
	if (mkdir(pathf("%s/locked", t), 0755) < 0 || write_file(pathf("%s/locked/in", t), "in", 0) < 0 ||
	    chmod(pathf("%s/locked", t), 0) < 0 || utimensat(AT_FDCWD, pathf("%s/etc/hostname", t), old, 0) < 0 ||
	    utimensat(AT_FDCWD, pathf("%s/dangling", t), old, AT_SYMLINK_NOFOLLOW) < 0 ||
	    utimensat(AT_FDCWD, pathf("%s/etc", t), old, 0) < 0 || chmod(t, 0751) < 0 || chown(t, 3, 4) < 0 ||
	    utimensat(AT_FDCWD, t, old, 0) < 0)
		return __LINE__;
	return 0;
}

/* Extended attributes of path as one sorted "name=value;" string. */
static void xattrs(const char *path, char *out, size_t n)
{
	char names[4096], val[256];
	ssize_t len = llistxattr(path, names, sizeof(names));
	out[0] = '\0';
	/* Names come back in no set order; a simple sort keeps it stable. */
	const char *list[64];
	int k = 0;
	for (const char *p = names; len > 0 && p < names + len && k < 64; p += strlen(p) + 1)
		list[k++] = p;
	for (int i = 1; i < k; i++)
		for (int j = i; j > 0 && strcmp(list[j - 1], list[j]) > 0; j--) {
			const char *x = list[j];
			list[j] = list[j - 1];
			list[j - 1] = x;
		}
	for (int i = 0; i < k; i++) {
		ssize_t v = lgetxattr(path, list[i], val, sizeof(val) - 1);
		val[v > 0 ? v : 0] = '\0';
		size_t used = strlen(out);
		snprintf(out + used, n - used, "%s=%zd:%s;", list[i], v, val);
	}
}

/* Byte for byte: contents of regular files. */
static bool same_content(const char *a, const char *b)
{
	FILE *fa = fopen(a, "re"), *fb = fopen(b, "re");
	bool same = fa && fb;
	while (same) {
		int ca = getc(fa), cb = getc(fb);
		same = ca == cb;
		if (ca == EOF)
			break;
	}
	if (fa)
		fclose(fa);
	if (fb)
		fclose(fb);
	return same;
}

/* 0 if b is a faithful copy of a (type, mode, owner, size, rdev, nlink,
 * mtime, atime (but a symlink's: reading it in the copy moved it), xattrs,
 * symlink target, content, same entries); else
 * prints the difference and returns -1. */
static int compare(const char *a, const char *b)
{
	struct stat sa, sb;
	char xa[2048], xb[2048];
	if (lstat(a, &sa) < 0 || lstat(b, &sb) < 0) {
		printf("#   missing: %s or %s\n", a, b);
		return -1;
	}
	xattrs(a, xa, sizeof(xa));
	xattrs(b, xb, sizeof(xb));
	if (sa.st_mode != sb.st_mode || sa.st_uid != sb.st_uid || sa.st_gid != sb.st_gid || sa.st_size != sb.st_size ||
	    sa.st_rdev != sb.st_rdev || sa.st_nlink != sb.st_nlink || sa.st_mtim.tv_sec != sb.st_mtim.tv_sec ||
	    sa.st_mtim.tv_nsec != sb.st_mtim.tv_nsec ||
	    (sa.st_atim.tv_sec != sb.st_atim.tv_sec && !S_ISLNK(sa.st_mode)) || strcmp(xa, xb) != 0) {
		printf("#   differs: %s (mode %o/%o uid %d/%d nlink %d/%d xattrs %s/%s)\n", b, sa.st_mode, sb.st_mode,
		       sa.st_uid, sb.st_uid, (int)sa.st_nlink, (int)sb.st_nlink, xa, xb);
		return -1;
	}
	if (S_ISLNK(sa.st_mode)) {
		char ta[PATH_MAX] = "", tb[PATH_MAX] = "";
		ssize_t na = readlink(a, ta, sizeof(ta) - 1), nb = readlink(b, tb, sizeof(tb) - 1);
		return na == nb && memcmp(ta, tb, na > 0 ? (size_t)na : 0) == 0 ? 0 : -1;
	}
	if (S_ISREG(sa.st_mode))
		return same_content(a, b) ? 0 : -1;
	if (!S_ISDIR(sa.st_mode))
		return 0;
	DIR *d = opendir(a);
	int r = d ? 0 : -1, na = 0, nb = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) && r == 0) {
		na++;
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			PATH_VAR(pa, "%s/%s", a, e->d_name);
			PATH_VAR(pb, "%s/%s", b, e->d_name);
			r = compare(pa, pb);
		}
	}
	if (d)
		closedir(d);
	d = opendir(b);
	while (d && readdir(d))
		nb++;
	if (d)
		closedir(d);
	if (r == 0 && na != nb) {
		printf("#   %s has %d entries, %s %d\n", a, na, b, nb);
		r = -1;
	}
	return r;
}

static void test_copy(void)
{
	PATH_VAR(src, "%s/src", base);
	PATH_VAR(dst, "%s/dst", base);
	int line = make_tree(src);
	CHECK1(line == 0, "make a tree with everything (failed at line %d: %s)", line, strerror(errno));
	CHECK1(tree_copy(src, dst) == 0, "tree_copy");
	CHECK1(compare(src, dst) == 0, "the copy is faithful: types, modes, owners, times, xattrs, links, contents");
	struct stat st, sw;
	CHECK1(lstat(pathf("%s/etc/motd", dst), &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0),
	       "the whiteout is a character device 0/0");
	CHECK1(lstat(pathf("%s/hard-whiteout", dst), &sw) == 0 && sw.st_ino == st.st_ino,
	       "hard links stay one inode (a shared whiteout too)");
	CHECK1(lstat(pathf("%s/sparse", dst), &st) == 0 && st.st_size == 1 << 30 && st.st_blocks * 512 < (1 << 20),
	       "a sparse file stays sparse (%lld blocks)", (long long)st.st_blocks);
	CHECK1(lstat(pathf("%s/suid", dst), &st) == 0 && (st.st_mode & 07777) == 04755, "setuid survives the chown");
	CHECK1(getxattr(pathf("%s/capped", dst), "security.capability", NULL, 0) == 20,
	       "file capabilities survive the chown");
	CHECK1(tree_copy(src, dst) == -EEXIST, "copy onto an existing tree: EEXIST");
	CHECK1(tree_copy(pathf("%s/empty", src), pathf("%s/x", base)) == -ENOTDIR && !exists(pathf("%s/x", base)),
	       "copy of a file: ENOTDIR");
	CHECK1(tree_copy(pathf("%s/missing", base), pathf("%s/x", base)) == -ENOENT, "copy of nothing: ENOENT");

	/* A write in the copy is not seen in the source, and the other way. */
	CHECK1(write_file(pathf("%s/etc/ssh/new", dst), "changed\n", 0600) == 0 &&
		       write_file(pathf("%s/empty", src), "src only", 0644) == 0,
	       "write into both");
	CHECK1(same_content(pathf("%s/etc/ssh/new", src), pathf("%s/etc/ssh/new", src)) &&
		       !same_content(pathf("%s/etc/ssh/new", src), pathf("%s/etc/ssh/new", dst)) &&
		       !same_content(pathf("%s/empty", src), pathf("%s/empty", dst)),
	       "the trees are independent");

	CHECK1(tree_remove(dst) == 0 && !exists(dst), "tree_remove of the copy");
	CHECK1(exists(pathf("%s/locked/in", src)), "the source is untouched");
	CHECK1(tree_remove(dst) == -ENOENT, "remove of nothing: ENOENT");
	CHECK1(tree_remove(pathf("%s/rel", src)) == -ENOTDIR && exists(pathf("%s/etc/hostname", src)),
	       "remove of a symlink to a file: refused, the target stays");
	CHECK1(symlink(pathf("%s/etc", src), pathf("%s/link", base)) == 0 && tree_remove(pathf("%s/link", base)) < 0 &&
		       exists(pathf("%s/etc/hostname", src)),
	       "remove of a symlink to a directory: refused, the target stays");
	(void)unlink(pathf("%s/link", base));
}

/* Deeper than the copy goes: the copy fails whole; the remove still
 * removes it all. */
static void test_deep(void)
{
	PATH_VAR(t, "%s/deep", base);
	int fd = mkdir(t, 0755) == 0 ? open(t, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	bool ok = fd >= 0;
	for (int i = 0; ok && i < TREE_COPY_DEPTH_MAX + 50; i++) {
		ok = mkdirat(fd, "d", 0755) == 0;
		int sub = ok ? openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
		ok = ok && sub >= 0 && (i % 7 || mknodat(sub, "w", S_IFCHR, 0) == 0);
		close(fd);
		fd = sub;
	}
	if (fd >= 0)
		close(fd);
	CHECK1(ok, "make a tree %d levels deep", TREE_COPY_DEPTH_MAX + 50);
	CHECK1(tree_copy(t, pathf("%s/deep-copy", base)) == -ELOOP && !exists(pathf("%s/deep-copy", base)),
	       "copy of a too deep tree: ELOOP, nothing left");
	CHECK1(tree_remove(t) == 0 && !exists(t), "tree_remove removes it all");
}

/* A file system mounted inside a tree is neither copied nor emptied. */
static void test_mount_inside(void)
{
	PATH_VAR(t, "%s/mnt", base);
	PATH_VAR(m, "%s/mnt/m", base);
	if (mkdir(t, 0755) < 0 || mkdir(m, 0755) < 0 || mount("tmpfs", m, "tmpfs", 0, "size=1m") < 0 ||
	    write_file(pathf("%s/keep", m), "keep", 0644) < 0) {
		CHECK1(0, "mount a tmpfs inside a tree: %s", strerror(errno));
		return;
	}
	CHECK1(tree_copy(t, pathf("%s/mnt-copy", base)) == -EBUSY && !exists(pathf("%s/mnt-copy", base)),
	       "copy across a mount: EBUSY, nothing left");
	CHECK1(tree_remove(t) == -EBUSY && exists(pathf("%s/keep", m)), "remove across a mount: EBUSY, it is kept");
	CHECK1(umount2(m, MNT_DETACH) == 0 && tree_remove(t) == 0, "unmounted, it goes");
}

/* The overlay driver's calls. */
static void test_overlay_driver(void)
{
	PATH_VAR(a, "%s/a", base);
	PATH_VAR(b, "%s/b", base);
	PATH_VAR(c, "%s/c", base);
	struct stat st;
	CHECK1(storage_create(STORAGE_OVERLAY, a) == 0 && lstat(a, &st) == 0 && S_ISDIR(st.st_mode),
	       "create: a directory");
	CHECK1(storage_create(STORAGE_OVERLAY, a) == -EEXIST, "create over one: EEXIST");
	CHECK1(storage_is_tree(STORAGE_OVERLAY, a) == 1 && storage_is_tree(STORAGE_OVERLAY, b) == -ENOENT, "is_tree");
	CHECK1(write_file(pathf("%s/f", a), "f", 0644) == 0 && storage_snapshot(STORAGE_OVERLAY, a, b, true) == 0 &&
		       compare(a, b) == 0,
	       "snapshot: a copy");
	CHECK1(storage_publish(STORAGE_OVERLAY, a, b) == -EEXIST && exists(a), "publish onto a tree: EEXIST");
	CHECK1(storage_publish(STORAGE_OVERLAY, a, c) == 0 && !exists(a) && exists(pathf("%s/f", c)),
	       "publish: a rename");
	CHECK1(storage_delete(STORAGE_OVERLAY, b) == 0 && storage_delete(STORAGE_OVERLAY, c) == 0 && !exists(b) &&
		       !exists(c),
	       "delete");
	enum storage_driver d;
	CHECK1(storage_driver_parse("overlay", &d) == 0 && d == STORAGE_OVERLAY &&
		       storage_driver_parse("btrfs", &d) == 0 && d == STORAGE_BTRFS &&
		       storage_driver_parse("zfs", &d) == -EINVAL,
	       "driver names");
}

static const char *slurp(const char *path)
{
	static char buf[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? 0 : read(fd, buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
	return buf;
}

/* An overlay data root: recorded before anything is made, kept, and not
 * opened as btrfs. */
static void test_pool_record(void)
{
	PATH_VAR(data, "%s/data", base);
	struct pool p;
	struct cove_err err = { 0 };
	struct stat st;
	int r = pool_open(&p, data, STORAGE_OVERLAY, 1ULL << 30, &err);
	CHECK1(r == 0 && p.driver == STORAGE_OVERLAY && !p.loop_backed, "pool_open overlay (%s)", err.msg);
	CHECK1(lstat(pathf("%s/pool", data), &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700 &&
		       !exists(pathf("%s/pool.img", data)),
	       "the pool is a plain 0700 directory, no pool file");
	CHECK_STR(slurp(pathf("%s/pool.driver", data)), "overlay\n", "the driver is recorded");
	memset(&err, 0, sizeof(err));
	r = pool_open(&p, data, STORAGE_BTRFS, 1ULL << 30, &err);
	CHECK1(r < 0 && err.code == COVE_ESTATE && strstr(err.msg, "--storage overlay"),
	       "asked for btrfs: refused (%s)", err.msg);
	CHECK1(!exists(pathf("%s/pool.img", data)) && strcmp(slurp(pathf("%s/pool.driver", data)), "overlay\n") == 0,
	       "and nothing changed");
	memset(&p, 0, sizeof(p));
	r = pool_open(&p, data, STORAGE_AUTO, 1ULL << 30, &err);
	CHECK1(r == 0 && p.driver == STORAGE_OVERLAY && !p.fallback, "auto takes the recorded driver");
	CHECK1(write_file(pathf("%s/pool.driver", data), "zfs\n", 0600) == 0, "spoil the record");
	memset(&err, 0, sizeof(err));
	r = pool_open(&p, data, STORAGE_AUTO, 1ULL << 30, &err);
	CHECK1(r < 0 && strstr(err.msg, "'zfs'"), "a bad record is an error (%s)", err.msg);
}

/* On a new data root, auto takes overlay where btrfs cannot be had: here,
 * in a mount namespace of its own where /dev has no loop-control. */
static void test_auto_fallback(void)
{
	PATH_VAR(data, "%s/auto", base);
	pid_t pid = fork();
	if (pid == 0) {
		struct pool p;
		struct cove_err err = { 0 };
		if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("tmpfs", "/dev", "tmpfs", 0, "size=64k") < 0)
			_exit(10);
		if (pool_open(&p, data, STORAGE_AUTO, 1ULL << 30, &err) < 0)
			_exit(11);
		_exit(p.driver == STORAGE_OVERLAY && p.fallback && strstr(p.fallback, "loop-control") ? 0 : 12);
	}
	int status = -1;
	CHECK1(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "without loop devices auto takes overlay (child exit %d)", WEXITSTATUS(status));
	CHECK_STR(slurp(pathf("%s/pool.driver", data)), "overlay\n", "and records it");
	struct pool p;
	struct cove_err err = { 0 };
	int r = pool_open(&p, data, STORAGE_AUTO, 1ULL << 30, &err);
	CHECK1(r == 0 && p.driver == STORAGE_OVERLAY && !p.fallback,
	       "with loop devices back, the data root stays overlay (%s)", err.msg);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (geteuid() != 0) {
		SKIP("needs root");
		return tap_done();
	}
	if (!mkdtemp(base)) {
		CHECK1(0, "mkdtemp: %s", strerror(errno));
		return tap_done();
	}
	test_copy();
	test_deep();
	test_mount_inside();
	test_overlay_driver();
	test_pool_record();
	test_auto_fallback();
	(void)umount2(pathf("%s/mnt/m", base), MNT_DETACH);
	CHECK1(tree_remove(base) == 0 || nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) == 0,
	       "remove the test directory");
	return tap_done();
}

/* Directory trees as plain files: tree_copy and tree_remove (tree.h).
 *
 * Every entry is addressed as (open directory fd, one name) with
 * AT_SYMLINK_NOFOLLOW / O_NOFOLLOW, so a symlink planted by a sandbox is
 * copied as a symlink and never followed. Extended attributes have no *at
 * calls on this libc; they go through /proc/self/fd/<dir>/<name> with the
 * l* calls, which resolve the directory by its fd and do not follow the
 * entry itself. */
#include "sys/tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <search.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/cleanup.h"

/* Depth at which tree_remove moves a subdirectory up instead of opening
 * it: it holds one fd per level. */
#define TREE_REMOVE_DEPTH 64
/* Room for "/proc/self/fd/<fd>/" in front of a name or path. */
#define TREE_PROC_PATH (PATH_MAX + 32)

/* A hard-linked inode of the source and where its first copy is, below
 * the destination's root. */
struct tree_link {
	dev_t dev;
	ino_t ino;
	char path[];
};

struct tree_copy {
	int droot;   /* the destination's root */
	char *rel;   /* the current entry's path below it */
	size_t len;  /* strlen(rel) */
	void *links; /* tsearch tree of struct tree_link */
	char names[XATTR_LIST_MAX];
	char value[XATTR_SIZE_MAX];
};

static bool tree_is_dot(const char *name)
{
	return strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
}

/* Open directory name below dir (dir may be AT_FDCWD with a path), without
 * touching its atime (a copy keeps the source's). -EBUSY for the root of a
 * mount: a file system mounted into a tree is not part of it, and removing
 * its contents could destroy what it shows. */
static int tree_open_dir(int dir, const char *name)
{
	_cleanup_close_ int fd = openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct statx stx;
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, 0, &stx) < 0)
		return -errno;
	if (stx.stx_attributes_mask & stx.stx_attributes & STATX_ATTR_MOUNT_ROOT)
		return -EBUSY;
	return TAKE_FD(fd);
}

/* dir and name as a path for the l*xattr calls. */
static int tree_proc_path(char *buf, int dir, const char *name)
{
	int n = dir == AT_FDCWD ? snprintf(buf, TREE_PROC_PATH, "%s", name)
				: snprintf(buf, TREE_PROC_PATH, "/proc/self/fd/%d/%s", dir, name);
	return n < 0 || n >= TREE_PROC_PATH ? -ENAMETOOLONG : 0;
}

static int tree_copy_xattrs(struct tree_copy *c, int sdir, const char *sname, int ddir, const char *dname)
{
	char sp[TREE_PROC_PATH], dp[TREE_PROC_PATH];
	if (tree_proc_path(sp, sdir, sname) < 0 || tree_proc_path(dp, ddir, dname) < 0)
		return -ENAMETOOLONG;
	ssize_t n = llistxattr(sp, c->names, sizeof(c->names));
	if (n < 0)
		return errno == ENOTSUP ? 0 : -errno;
	for (const char *k = c->names; k < c->names + n; k += strlen(k) + 1) {
		ssize_t v = lgetxattr(sp, k, c->value, sizeof(c->value));
		if (v < 0 && errno == ENODATA)
			continue;
		if (v < 0 || lsetxattr(dp, k, c->value, (size_t)v, 0) < 0)
			return -errno;
	}
	return 0;
}

/* Owner, then extended attributes (a chown drops security.capability),
 * then mode (a chown drops setuid bits), then times (every change above
 * touches them). Symlinks have no mode of their own. */
static int tree_copy_meta(struct tree_copy *c, int sdir, const char *sname, int ddir, const char *dname,
			  const struct stat *st)
{
	if (fchownat(ddir, dname, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	int r = tree_copy_xattrs(c, sdir, sname, ddir, dname);
	if (r < 0)
		return r;
	if (!S_ISLNK(st->st_mode) && fchmodat(ddir, dname, st->st_mode & 07777, 0) < 0)
		return -errno;
	struct timespec times[2] = { st->st_atim, st->st_mtim };
	if (utimensat(ddir, dname, times, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

/* n bytes of buf at off. */
static int tree_pwrite_all(int fd, const char *buf, size_t n, off_t off)
{
	while (n > 0) {
		ssize_t k = pwrite(fd, buf, n, off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		buf += k;
		n -= (size_t)k;
		off += k;
	}
	return 0;
}

/* len bytes at off, with copy_file_range (in-kernel, and shared extents
 * where the file system offers them), or read and write where it cannot. */
static int tree_copy_range(int in, int out, off_t off, off_t len)
{
	bool plain = false;
	char buf[65536];
	while (len > 0) {
		ssize_t n;
		if (!plain) {
			loff_t i = off, o = off;
			n = copy_file_range(in, &i, out, &o, (size_t)len, 0);
			if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP)) {
				plain = true;
				continue;
			}
		} else {
			n = pread(in, buf, len < (off_t)sizeof(buf) ? (size_t)len : sizeof(buf), off);
			int r = n > 0 ? tree_pwrite_all(out, buf, (size_t)n, off) : 0;
			if (r < 0)
				return r;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break; /* the file got shorter */
		off += n;
		len -= n;
	}
	return 0;
}

/* The data of in, size bytes, into the empty file out: one FICLONE where
 * the file system shares extents, else extent by extent, so that a hole
 * (a sparse file a sandbox made, however large) stays a hole. */
static int tree_copy_data(int in, int out, off_t size)
{
	if (ioctl(out, FICLONE, in) == 0)
		return 0;
	for (off_t pos = 0; pos < size;) {
		off_t data = lseek(in, pos, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break; /* a hole up to the end */
		off_t hole = data < 0 ? -1 : lseek(in, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		if (hole <= data)
			return -EIO; /* no file system answers so: do not loop on it */
		int r = tree_copy_range(in, out, data, hole - data);
		if (r < 0)
			return r;
		pos = hole;
	}
	return ftruncate(out, size) < 0 ? -errno : 0;
}

static int tree_copy_file(int sdir, int ddir, const char *name, const struct stat *st)
{
	_cleanup_close_ int in = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_NOATIME | O_NOCTTY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	_cleanup_close_ int out = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return -errno;
	return tree_copy_data(in, out, st->st_size);
}

static int tree_copy_symlink(int sdir, int ddir, const char *name)
{
	char target[PATH_MAX];
	ssize_t n = readlinkat(sdir, name, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	return symlinkat(target, ddir, name) < 0 ? -errno : 0;
}

static int tree_link_cmp(const void *a, const void *b)
{
	const struct tree_link *x = a, *y = b;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->dev < y->dev ? -1 : x->dev > y->dev;
}

/* 1 when name became a hard link to the copy of an inode met before, 0
 * when it has to be copied (the first of its links, or a path to the
 * first one too long for linkat), -errno. */
static int tree_copy_hardlink(struct tree_copy *c, int ddir, const char *name, const struct stat *st)
{
	struct tree_link key = { .dev = st->st_dev, .ino = st->st_ino };
	struct tree_link **found = tfind(&key, &c->links, tree_link_cmp);
	if (!found)
		return 0;
	if (linkat(c->droot, (*found)->path, ddir, name, 0) == 0)
		return 1;
	return errno == ENAMETOOLONG || errno == EMLINK ? 0 : -errno;
}

static int tree_remember_link(struct tree_copy *c, const struct stat *st)
{
	struct tree_link *l = malloc(sizeof(*l) + c->len + 1);
	if (!l)
		return -ENOMEM;
	l->dev = st->st_dev;
	l->ino = st->st_ino;
	memcpy(l->path, c->rel, c->len + 1);
	struct tree_link **slot = tsearch(l, &c->links, tree_link_cmp);
	if (!slot || *slot != l)
		free(l);
	return slot ? 0 : -ENOMEM;
}

static int tree_copy_entry(struct tree_copy *c, int sdir, int ddir, const char *name, int depth);

/* fd as a DIR; fd is closed if that fails. */
static DIR *tree_fdopendir(int fd)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		int saved = errno;
		close(fd);
		errno = saved;
	}
	return d;
}

/* The next entry of d but . and ..: 1 with *ret_name set, 0 at the end,
 * -errno. */
static int tree_next(DIR *d, const char **ret_name)
{
	for (;;) {
		errno = 0;
		struct dirent *e = readdir(d);
		if (!e)
			return -errno;
		if (!tree_is_dot(e->d_name)) {
			*ret_name = e->d_name;
			return 1;
		}
	}
}

/* The entries of directory sfd (closed here), at depth, into the empty
 * directory dfd. */
static int tree_copy_children(struct tree_copy *c, int sfd, int dfd, int depth)
{
	DIR *d = tree_fdopendir(sfd);
	if (!d)
		return -errno;
	const char *name;
	int r;
	while ((r = tree_next(d, &name)) > 0 && (r = tree_copy_entry(c, dirfd(d), dfd, name, depth)) == 0)
		;
	closedir(d);
	return r;
}

static int tree_copy_dir(struct tree_copy *c, int sdir, int ddir, const char *name, int depth)
{
	if (depth >= TREE_COPY_DEPTH_MAX)
		return -ELOOP;
	int sfd = tree_open_dir(sdir, name);
	if (sfd < 0)
		return sfd;
	int dfd = mkdirat(ddir, name, 0700) < 0 ? -errno : tree_open_dir(ddir, name);
	if (dfd < 0) {
		close(sfd);
		return dfd;
	}
	int r = tree_copy_children(c, sfd, dfd, depth + 1);
	close(dfd);
	return r;
}

/* One entry of a directory, with everything below it. c->rel is its path
 * while it is copied, for the hard links met later. */
static int tree_copy_entry(struct tree_copy *c, int sdir, int ddir, const char *name, int depth)
{
	struct stat st;
	if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	size_t len = c->len;
	c->len += (size_t)sprintf(c->rel + len, "%s%s", len ? "/" : "", name);
	bool linked = !S_ISDIR(st.st_mode) && st.st_nlink > 1;
	int r = linked ? tree_copy_hardlink(c, ddir, name, &st) : 0;
	if (r == 0) {
		if (S_ISDIR(st.st_mode))
			r = tree_copy_dir(c, sdir, ddir, name, depth);
		else if (S_ISREG(st.st_mode))
			r = tree_copy_file(sdir, ddir, name, &st);
		else if (S_ISLNK(st.st_mode))
			r = tree_copy_symlink(sdir, ddir, name);
		else /* whiteouts (character devices 0/0), other devices, fifos, sockets */
			r = mknodat(ddir, name, (st.st_mode & S_IFMT) | 0600, st.st_rdev) < 0 ? -errno : 0;
		if (r == 0)
			r = tree_copy_meta(c, sdir, name, ddir, name, &st);
		if (r == 0 && linked)
			r = tree_remember_link(c, &st);
	}
	c->len = len;
	c->rel[len] = '\0';
	return r < 0 ? r : 0;
}

int tree_copy(const char *src, const char *dst)
{
	struct stat st;
	if (lstat(src, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	struct tree_copy *c = calloc(1, sizeof(*c));
	/* Every level's name and its slash, plus the entry's. */
	char *rel = calloc(TREE_COPY_DEPTH_MAX + 2, NAME_MAX + 1);
	int sfd = tree_open_dir(AT_FDCWD, src);
	int r = !c || !rel ? -ENOMEM : sfd;
	if (r >= 0 && mkdir(dst, 0700) < 0)
		r = -errno;
	if (r >= 0) {
		c->rel = rel;
		c->droot = tree_open_dir(AT_FDCWD, dst);
		r = c->droot < 0 ? c->droot : tree_copy_children(c, TAKE_FD(sfd), c->droot, 1);
		if (r == 0)
			r = tree_copy_meta(c, AT_FDCWD, src, AT_FDCWD, dst, &st);
		if (c->droot >= 0)
			close(c->droot);
		tdestroy(c->links, free);
		if (r < 0)
			(void)tree_remove(dst);
	}
	if (sfd >= 0)
		close(sfd);
	free(rel);
	free(c);
	return r < 0 ? r : 0;
}

/* Move directory name in dir into top under a name not taken there. */
static int tree_move_up(int top, int dir, const char *name, unsigned *moved)
{
	for (;;) {
		char tmp[32];
		snprintf(tmp, sizeof(tmp), ".tree-remove-%u", (*moved)++);
		if (renameat2(dir, name, top, tmp, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
}

/* Remove the entries of directory fd (closed here), depth levels below
 * top. A subdirectory at TREE_REMOVE_DEPTH is moved up into top for the
 * next pass instead of opened; *moved counts those. */
static int tree_remove_children(int top, int fd, int depth, unsigned *moved)
{
	DIR *d = tree_fdopendir(fd);
	if (!d)
		return -errno;
	int dfd = dirfd(d), r;
	const char *name;
	while ((r = tree_next(d, &name)) > 0) {
		struct stat st;
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = errno == ENOENT ? 0 : -errno;
		} else if (!S_ISDIR(st.st_mode)) {
			r = unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
		} else if (depth >= TREE_REMOVE_DEPTH) {
			r = tree_move_up(top, dfd, name, moved);
		} else {
			int sub = tree_open_dir(dfd, name);
			r = sub < 0 ? sub : tree_remove_children(top, sub, depth + 1, moved);
			if (r == 0 && unlinkat(dfd, name, AT_REMOVEDIR) < 0)
				r = -errno;
		}
		if (r < 0)
			break;
	}
	closedir(d);
	return r;
}

int tree_remove(const char *path)
{
	_cleanup_close_ int top = tree_open_dir(AT_FDCWD, path);
	if (top < 0)
		return top;
	/* Passes until one moves nothing up: that one saw and removed all. */
	unsigned moved;
	do {
		moved = 0;
		int fd = openat(top, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* its own read position */
		int r = fd < 0 ? -errno : tree_remove_children(top, fd, 0, &moved);
		if (r < 0)
			return r;
	} while (moved);
	return rmdir(path) < 0 ? -errno : 0;
}

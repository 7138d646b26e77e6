/* cove-init's extraction of an entry stream into a directory (PUT
 * /files/tar, a portable snapshot's files): coved writes the entries on a
 * socket, the child (already the request's user) makes them beneath the
 * root without following any symlink, and answers once at the end. A file
 * (and a symlink) is made under no name or a passing one and renamed over
 * what was there (replace.c): a stream cut short leaves each existing file
 * whole, old or new. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/array.h"
#include "common/io.h"
#include "common/wire.h"
#include "init/files_private.h"
#include "init/init.h"

struct late_mode {
	char *path;
	uint32_t mode;
};

struct extract {
	int sock, root;
	struct wire_entry e;
	char path[PATH_MAX], link[PATH_MAX];
	char parent[PATH_MAX]; /* the last entry's parent directory, kept open: most follow their siblings */
	int parent_fd;
	struct late_mode *late; /* directories made writable for their entries: their mode comes last */
	size_t n_late, cap_late;
	uint64_t done;
	char buf[FILES_IO_CHUNK];
};

/* One component beneath dirfd: never a symlink (ELOOP), never up; made
 * as a directory when missing and make is set. */
static int step_beneath(int dirfd, const char *name, bool make)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	int fd = io_openat2(dirfd, name, &how);
	if (fd == -ENOENT && make && (mkdirat(dirfd, name, FILES_DIR_MODE) == 0 || errno == EEXIST))
		fd = io_openat2(dirfd, name, &how);
	return fd;
}

/* The directory dir ("" is root itself) beneath root, component by
 * component, so that no symlink on the way is followed: not the archive's
 * own (a symlink entry, then an entry through it), nor one that was there. */
static int open_beneath(int root, const char *dir, bool make)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", dir);
	int fd = fcntl(root, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	char *save = NULL;
	for (char *c = strtok_r(buf, "/", &save); c && fd >= 0; c = strtok_r(NULL, "/", &save)) {
		int next = step_beneath(fd, c, make);
		close(fd);
		fd = next;
	}
	return fd;
}

/* The parent directory of path (made if missing) and path's last name. */
static int entry_parent(struct extract *x, const char *path, const char **ret_base)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	*ret_base = slash ? slash + 1 : path;
	if (x->parent_fd >= 0 && strlen(x->parent) == n && memcmp(x->parent, path, n) == 0)
		return x->parent_fd;
	if (x->parent_fd >= 0)
		close(x->parent_fd);
	memcpy(x->parent, path, n);
	x->parent[n] = '\0';
	x->parent_fd = open_beneath(x->root, x->parent, true);
	int r = x->parent_fd;
	if (r < 0)
		x->parent_fd = -1;
	return r;
}

static int make_hardlink(struct extract *x, int pfd, const char *base)
{
	const char *tbase;
	char dir[PATH_MAX];
	const char *slash = strrchr(x->link, '/');
	size_t n = slash ? (size_t)(slash - x->link) : 0;
	if (!wire_entry_path_valid(x->link, strlen(x->link)))
		return -EINVAL;
	memcpy(dir, x->link, n);
	dir[n] = '\0';
	tbase = slash ? slash + 1 : x->link;
	int tfd = open_beneath(x->root, dir, false);
	if (tfd < 0)
		return tfd;
	int r = linkat(tfd, tbase, pfd, base, 0) < 0 ? -errno : 0;
	close(tfd);
	return r;
}

/* Create the entry at base in pfd; -EEXIST when something is there. A
 * file is created exclusively and not following a symlink, its fd in
 * *ret_fd. */
static int make_entry(struct extract *x, int pfd, const char *base, int *ret_fd)
{
	switch (x->e.type) {
	case WIRE_ENTRY_FILE:
		*ret_fd = openat(pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, x->e.mode);
		return *ret_fd < 0 ? -errno : 0;
	case WIRE_ENTRY_DIR:
		/* Writable by its owner until its entries are in. */
		return mkdirat(pfd, base, x->e.mode | 0700) < 0 ? -errno : 0;
	case WIRE_ENTRY_SYMLINK:
		return symlinkat(x->link, pfd, base) < 0 ? -errno : 0;
	case WIRE_ENTRY_HARDLINK:
		return make_hardlink(x, pfd, base);
	default:
		return -EINVAL;
	}
}

/* What is at base already: a directory stays (1 for a directory entry,
 * else -EISDIR); anything else goes, as tar replaces what it extracts over. */
static int clear_way(int pfd, const char *base, bool for_dir)
{
	struct stat st;
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return for_dir ? 1 : -EISDIR;
	return unlinkat(pfd, base, 0) < 0 ? -errno : 0;
}

static int receive_file(struct extract *x, int fd)
{
	int r = 0;
	for (uint64_t left = x->e.size; left > 0 && r == 0;) {
		size_t n = left < sizeof(x->buf) ? (size_t)left : sizeof(x->buf);
		r = files_read_all(x->sock, x->buf, n);
		if (r == 0)
			r = io_write_all(fd, x->buf, n);
		left -= n;
	}
	struct timespec ts[2] = { { x->e.mtime, 0 }, { x->e.mtime, 0 } };
	if (r == 0 && futimens(fd, ts) < 0)
		r = -errno;
	return r;
}

static int remember_mode(struct extract *x)
{
	struct late_mode *late = array_room_for_one(x->late, x->n_late, &x->cap_late, sizeof(*late), 16);
	if (!late)
		return -ENOMEM;
	x->late = late;
	if (!(x->late[x->n_late].path = strdup(x->path)))
		return -ENOMEM;
	x->late[x->n_late++].mode = x->e.mode;
	return 0;
}

/* A file received whole into its replacement, then renamed over what is
 * at base (a directory stays: EISDIR). Takes fd. */
static int replace_file(struct extract *x, int fd, int pfd, const char *base)
{
	int r = receive_file(x, fd);
	if (r == 0)
		r = replace_commit(fd, pfd, base);
	close(fd);
	return r;
}

static int extract_entry(struct extract *x)
{
	const char *base;
	int fd = -1, pfd = entry_parent(x, x->path, &base), r;
	if (pfd < 0)
		return pfd;
	/* Where the file system has no O_TMPFILE, the old file goes first. */
	if (x->e.type == WIRE_ENTRY_FILE && (fd = replace_open(pfd, x->e.mode, NULL)) >= 0)
		return replace_file(x, fd, pfd, base);
	fd = -1;
	if (x->e.type == WIRE_ENTRY_SYMLINK)
		r = replace_symlink(x->link, pfd, base);
	else if ((r = make_entry(x, pfd, base, &fd)) == -EEXIST &&
		 (r = clear_way(pfd, base, x->e.type == WIRE_ENTRY_DIR)) == 0)
		r = make_entry(x, pfd, base, &fd);
	if (r == 1)
		return 0; /* an existing directory keeps its mode */
	if (r == 0 && fd >= 0)
		r = receive_file(x, fd);
	if (fd >= 0)
		close(fd);
	if (r == 0 && x->e.type == WIRE_ENTRY_DIR && (x->e.mode & 0700) != 0700)
		r = remember_mode(x);
	if (r == 0 && x->e.type == WIRE_ENTRY_SYMLINK) {
		struct timespec ts[2] = { { x->e.mtime, 0 }, { x->e.mtime, 0 } };
		(void)utimensat(pfd, base, ts, AT_SYMLINK_NOFOLLOW);
	}
	return r;
}

/* Deepest first (the reverse of creation), so that a parent made
 * read-only does not stop its children's chmod. */
static int apply_late_modes(struct extract *x)
{
	int r = 0;
	while (x->n_late > 0) {
		struct late_mode *l = &x->late[--x->n_late];
		if (r == 0) {
			int fd = open_beneath(x->root, l->path, false);
			r = fd < 0 ? fd : files_chmod_opath(fd, l->mode);
			if (fd >= 0)
				close(fd);
			if (r < 0)
				snprintf(x->path, sizeof(x->path), "%s", l->path);
		}
		free(l->path);
	}
	return r;
}

static int receive_entry(struct extract *x)
{
	int r = files_read_all(x->sock, &x->e, sizeof(x->e));
	if (r == 0 && wire_entry_check(&x->e) < 0)
		r = -EINVAL;
	if (r == 0)
		r = files_read_all(x->sock, x->path, x->e.path_len);
	if (r == 0)
		r = files_read_all(x->sock, x->link, x->e.link_len);
	if (r < 0)
		return r;
	x->path[x->e.path_len] = '\0';
	x->link[x->e.link_len] = '\0';
	if (x->e.type != WIRE_ENTRY_END && !wire_entry_path_valid(x->path, x->e.path_len))
		return -EINVAL;
	if (strlen(x->link) != x->e.link_len || (x->e.type == WIRE_ENTRY_SYMLINK && !x->link[0]))
		return -EINVAL;
	return 0;
}

/* Entries until the end, then one answer: how many were made, and 0, or
 * the errno and the entry that stopped it. */
void files_extract(int root, int sock)
{
	static struct extract x;
	x.sock = sock;
	x.root = root;
	x.parent_fd = -1;
	int r;
	while ((r = receive_entry(&x)) == 0 && x.e.type != WIRE_ENTRY_END && (r = extract_entry(&x)) == 0)
		x.done++;
	if (r == 0)
		r = apply_late_modes(&x);
	struct wire_entry end = { .type = WIRE_ENTRY_END, .errnum = -r, .size = x.done };
	(void)files_send_entry(sock, &end, r < 0 ? x.path : "", NULL);
	/* The child ends here; what it holds goes anyway, but a caller that
	 * goes on (tests/fuzz/fuzz_files_tar.c) starts the next one afresh. */
	if (x.parent_fd >= 0)
		close(x.parent_fd);
	while (x.n_late > 0)
		free(x.late[--x.n_late].path);
	free(x.late);
	x.late = NULL;
	x.cap_late = 0;
	x.done = 0;
}

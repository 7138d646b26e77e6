/* cove-init's file operations for the Files API.
 *
 * coved cannot resolve a path of the sandbox: the sandbox's root exists only
 * in its own mount namespace, and a path walked from the host would follow
 * the sandbox's symlinks out of it. Here every path is resolved by openat2
 * from the root ("/", or an external sandbox's workspace) with
 * RESOLVE_IN_ROOT, so "..", absolute and relative symlinks all stay inside
 * the root, even while the sandbox swaps them, and with
 * RESOLVE_NO_MAGICLINKS, so /proc/<pid>/root and fd links lead nowhere.
 *
 * Each request runs in a forked child that first becomes the request's user:
 * what it creates belongs to that user (no chown afterwards, and no window
 * where a file is root's), the user's permissions apply, and init stays
 * responsive whatever the operation costs (a recursive remove of a big tree).
 * The child answers coved itself on the inherited connection (a packet is
 * atomic on SOCK_SEQPACKET); init answers only for a child that died first.
 * The child never execs: it stays non-dumpable, as init is.
 *
 * Opens come back to coved as file descriptors, which coved reads or writes
 * itself. Listings, tar downloads and extractions come back as one end of
 * a socket pair on which the child, still the user, then writes the
 * directory's entries (and files' bytes) or reads entries to make: an entry
 * stream (common/wire.h). coved never walks the tree itself. Files on procfs are refused for reading and writing: the child
 * would be reading or writing its own /proc/self, on behalf of a path that
 * the sandbox's code may have pointed there. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/array.h"
#include "common/cleanup.h"
#include "common/io.h"
#include "init/files_private.h"
#include "init/init.h"

#define FILES_MAX_OPS 256   /* file operations under way at once */
#define FILES_MAX_DEPTH 256 /* directory depth a recursive remove descends */

static struct file_op {
	pid_t pid; /* 0 = free */
	uint32_t seq;
	uint32_t fail_type; /* WIRE_OPEN_FAILED or WIRE_FSOP_DONE */
	unsigned conn;
} ops[FILES_MAX_OPS];

static int root_fd = -1;

/* openat2 inside the root. Returns an fd, or -errno. */
static int resolve(const char *path, int flags, mode_t mode)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC),
				.mode = (flags & O_CREAT) ? mode : 0,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	if (!(flags & O_PATH))
		how.flags |= O_NOCTTY;
	return io_openat2(root_fd, path, &how);
}

static bool on_procfs(int fd)
{
	struct statfs sf;
	return fstatfs(fd, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC;
}

/* Open the file an O_PATH fd names, for real, with the permission checks of
 * an open (the /proc/self/fd link is the one magic link used on purpose:
 * it is our own fd, not a path from the request). Closes opath. */
static int reopen(int opath, int flags)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", opath);
	int fd = open(link, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	int e = errno;
	close(opath);
	return fd < 0 ? -e : fd;
}

/* A regular file or a directory, for reading; anything else (FIFO, device,
 * socket) is never opened. */
static int open_read(const struct wire_path *p)
{
	struct stat st;
	int fd = resolve(p->path, O_PATH, 0);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 || on_procfs(fd) || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
		int e = on_procfs(fd) ? -EACCES : -EINVAL;
		close(fd);
		return e;
	}
	return reopen(fd, O_RDONLY | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
}

/* A path split into its parent directory and last component. */
struct split {
	char parent[PATH_MAX];
	char base[NAME_MAX + 1];
};

/* The last component must be a real name: not "", "." or "..". Trailing
 * slashes are dropped. */
static int split_path(const char *path, struct split *ret)
{
	size_t n = strlen(path);
	if (n >= PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(ret->parent, path, n + 1);
	while (n > 1 && ret->parent[n - 1] == '/')
		ret->parent[--n] = '\0';
	char *slash = strrchr(ret->parent, '/');
	if (strlen(slash + 1) > NAME_MAX)
		return -ENAMETOOLONG;
	strcpy(ret->base, slash + 1);
	if (!ret->base[0] || strcmp(ret->base, ".") == 0 || strcmp(ret->base, "..") == 0)
		return -EINVAL;
	slash[slash == ret->parent ? 1 : 0] = '\0';
	return 0;
}

static int open_parent(const char *path, struct split *ret)
{
	int r = split_path(path, ret);
	return r < 0 ? r : resolve(ret->parent, O_PATH | O_DIRECTORY, 0);
}

/* Make every missing directory of path, and path itself when last is set.
 * Existing components are followed (inside the root) as mkdir -p does. */
static int make_dirs(const char *path, bool last, int *ret_made);

/* An existing file: only a regular one, truncated. */
static int open_existing_for_write(const char *path)
{
	struct stat st;
	int fd = resolve(path, O_PATH, 0);
	if (fd < 0)
		return fd;
	int e = fstat(fd, &st) < 0 ? -errno : on_procfs(fd) ? -EACCES : S_ISDIR(st.st_mode) ? -EISDIR : 0;
	if (e == 0 && !S_ISREG(st.st_mode))
		e = -EINVAL;
	if (e < 0) {
		close(fd);
		return e;
	}
	return reopen(fd, O_WRONLY | O_TRUNC);
}

/* A regular file at path, or none there yet: a new unnamed file in its
 * directory (replace.c) with the mode it is to have (an existing file's
 * own, unless WIRE_FLAG_MODE) and its owner, for WIRE_FS_COMMIT to rename
 * over it once the body is whole. -EAGAIN when it is to be written in
 * place: a symlink (followed to what it names), a file with hard links
 * (which all see the new content), or anything else, which open_write
 * refuses as before. */
static int open_replacement(const struct wire_path *p, uint32_t flags, bool *created)
{
	struct split sp;
	struct stat st;
	int pfd = open_parent(p->path, &sp);
	if (pfd < 0)
		return pfd;
	int r = on_procfs(pfd) ? -EACCES : fstatat(pfd, sp.base, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	if (r == 0 && (!S_ISREG(st.st_mode) || st.st_nlink > 1))
		r = -EAGAIN;
	*created = r == -ENOENT;
	if (r == 0 || r == -ENOENT)
		r = replace_open(pfd, (flags & WIRE_FLAG_MODE) || *created ? p->mode : st.st_mode,
				 *created ? NULL : &st);
	close(pfd);
	return r;
}

/* Created if missing (exclusively, so that *created is true), else
 * truncated. A dangling symlink is followed to create its target, which
 * RESOLVE_IN_ROOT keeps inside the root. A replacement when it can be
 * (*replace): what open_replacement cannot do, for whatever reason (the
 * directory not writable by the user, who may write the file; the owner
 * not the user's to give; no O_TMPFILE), is done in place, with the
 * permission checks and errors of that. */
static int open_write(const struct wire_path *p, uint32_t flags, bool *created, bool *replace)
{
	int made, fd;
	if ((flags & WIRE_FLAG_PARENTS) && (fd = make_dirs(p->path, false, &made)) < 0)
		return fd;
	if ((fd = open_replacement(p, flags, created)) >= 0) {
		*replace = true;
		return fd;
	}
	*created = true;
	fd = resolve(p->path, O_WRONLY | O_CREAT | O_EXCL | O_NONBLOCK, p->mode);
	if (fd == -EEXIST) {
		*created = false;
		fd = open_existing_for_write(p->path);
		if (fd == -ENOENT) {
			*created = true;
			fd = resolve(p->path, O_WRONLY | O_CREAT | O_NONBLOCK, p->mode);
		}
	}
	struct stat st;
	int e = fd < 0 ? fd : fstat(fd, &st) < 0 ? -errno : !S_ISREG(st.st_mode) ? -EINVAL : 0;
	if (e == 0 && (flags & WIRE_FLAG_MODE) && !*created && fchmod(fd, p->mode) < 0)
		e = -errno;
	if (e < 0 && fd >= 0)
		close(fd);
	return e < 0 ? e : fd;
}

static int open_tree(const struct wire_path *p);
static int open_extract_root(const struct wire_path *p, bool *created);

static int open_kind(int kind, const struct wire_path *p, uint32_t flags, uint32_t *ret_flags)
{
	bool created = false, replace = false;
	int fd;
	switch (kind) {
	case WIRE_OPEN_READ:
	case WIRE_OPEN_PLAIN:
		return open_read(p);
	case WIRE_OPEN_STAT:
		return resolve(p->path, O_PATH | O_NOFOLLOW, 0);
	case WIRE_OPEN_WRITE:
		fd = open_write(p, flags, &created, &replace);
		*ret_flags = (created ? WIRE_FLAG_CREATED : 0) | (replace ? WIRE_FLAG_REPLACE : 0);
		return fd;
	case WIRE_OPEN_TAR:
	case WIRE_OPEN_TAR_LIST:
		return open_tree(p);
	case WIRE_OPEN_EXTRACT:
		fd = open_extract_root(p, &created);
		*ret_flags = created ? WIRE_FLAG_CREATED : 0;
		return fd;
	default:
		return -EINVAL;
	}
}

static int ensure_dir(const char *path, int *made)
{
	struct split sp;
	int fd = resolve(path, O_PATH | O_DIRECTORY, 0);
	if (fd != -ENOENT)
		return fd < 0 ? fd : close(fd);
	int pfd = open_parent(path, &sp);
	if (pfd < 0)
		return pfd;
	int r = mkdirat(pfd, sp.base, FILES_DIR_MODE) < 0 && errno != EEXIST ? -errno : 0;
	close(pfd);
	if (r < 0)
		return r;
	(*made)++;
	/* What is there now must be a directory (not, say, a dangling link). */
	fd = resolve(path, O_PATH | O_DIRECTORY, 0);
	return fd < 0 ? fd : close(fd);
}

static int make_dirs(const char *path, bool last, int *ret_made)
{
	char buf[PATH_MAX];
	size_t n = strlen(path);
	if (n >= PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	*ret_made = 0;
	for (size_t i = 1; i < n; i++) {
		if (buf[i] != '/' || buf[i - 1] == '/')
			continue;
		buf[i] = '\0';
		int r = ensure_dir(buf, ret_made);
		buf[i] = '/';
		if (r < 0)
			return r;
	}
	return last ? ensure_dir(buf, ret_made) : 0;
}

/* Remove name in dirfd and all it holds, without following a symlink or
 * leaving the file system (a mount point inside is an error, EBUSY). */
static int remove_tree(int dirfd, const char *name, dev_t dev, int depth)
{
	if (depth > FILES_MAX_DEPTH)
		return -ELOOP;
	if (unlinkat(dirfd, name, 0) == 0)
		return 0;
	if (errno != EISDIR)
		return errno == ENOENT ? 0 : -errno;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_dev != dev) {
		close(fd);
		return -EBUSY;
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	struct dirent *e;
	int r = 0;
	while (r == 0 && (e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			r = remove_tree(fd, e->d_name, dev, depth + 1);
	closedir(d);
	if (r == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0)
		r = -errno;
	return r;
}

/* A missing path is not an error: *changed says whether it was there. */
static int fs_remove(const struct wire_path *p, uint32_t flags, int *changed)
{
	struct split sp;
	struct stat st;
	int pfd = open_parent(p->path, &sp);
	if (pfd < 0)
		return pfd == -ENOENT ? 0 : pfd;
	int r = fstatat(pfd, sp.base, &st, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	if (r == 0 && S_ISDIR(st.st_mode) && (flags & WIRE_FLAG_RECURSIVE))
		r = remove_tree(pfd, sp.base, st.st_dev, 0);
	else if (r == 0 && unlinkat(pfd, sp.base, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
		r = -errno;
	close(pfd);
	*changed = r == 0;
	return r == -ENOENT ? 0 : r;
}

static int fs_rename(const struct wire_path *p, uint32_t flags, int *changed)
{
	static struct split from, to;
	int ffd = open_parent(p->path, &from);
	if (ffd < 0)
		return ffd;
	int tfd = open_parent(p->path2, &to);
	if (tfd < 0) {
		close(ffd);
		return tfd;
	}
	unsigned how = (flags & WIRE_FLAG_OVERWRITE) ? 0 : RENAME_NOREPLACE;
	int r = renameat2(ffd, from.base, tfd, to.base, how) < 0 ? -errno : 0;
	close(ffd);
	close(tfd);
	*changed = r == 0;
	return r;
}

/* chmod(2) of what an O_PATH fd names (fchmod refuses O_PATH fds). */
int files_chmod_opath(int fd, mode_t mode)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	return chmod(link, mode) < 0 ? -errno : 0;
}

/* Like chmod(2), a symlink is followed (inside the root). */
static int fs_chmod(const struct wire_path *p, int *changed)
{
	int fd = resolve(p->path, O_PATH, 0);
	if (fd < 0)
		return fd;
	int r = on_procfs(fd) ? -EACCES : files_chmod_opath(fd, p->mode & 07777);
	close(fd);
	*changed = r == 0;
	return r;
}

/* A write's replacement (fd, its whole body in it) renamed over its path,
 * with its mode again (p->mode: what replace_open gave it; the writes of
 * the body took away its setuid and setgid bits). */
static int fs_commit(const struct wire_path *p, int fd, int *changed)
{
	struct split sp;
	if (fd < 0)
		return -EINVAL;
	int pfd = open_parent(p->path, &sp);
	if (pfd < 0)
		return pfd;
	int r = on_procfs(pfd) ? -EACCES : fchmod(fd, p->mode & 07777) < 0 ? -errno : replace_commit(fd, pfd, sp.base);
	close(pfd);
	*changed = r == 0;
	return r;
}

static int fsop(int op, const struct wire_path *p, uint32_t flags, int fd, int *changed)
{
	switch (op) {
	case WIRE_FS_REMOVE:
		return fs_remove(p, flags, changed);
	case WIRE_FS_MKDIR: {
		int r = make_dirs(p->path, true, changed);
		*changed = *changed > 0;
		return r;
	}
	case WIRE_FS_RENAME:
		return p->path2[0] == '/' ? fs_rename(p, flags, changed) : -EINVAL;
	case WIRE_FS_CHMOD:
		return fs_chmod(p, changed);
	case WIRE_FS_COMMIT:
		return fs_commit(p, fd, changed);
	default:
		return -EINVAL;
	}
}

int files_set_root(const char *path)
{
	root_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return root_fd < 0 ? -errno : 0;
}

/* The child: become the user, do it, answer. Exits 0 once answered. */
static bool is_stream(int kind, int fd);
static void run_stream(int kind, int fd, int sock, int depth, int list_fd);

/* The child: become the user, do it, answer. Exits 0 once answered. An
 * open that is an entry stream answers with one end of a socket pair, then
 * writes or reads the stream on the other. */
static void child_main(const struct wire_hdr *req, const struct wire_path *p, int req_fd)
{
	struct passwd_entry pw;
	struct wire_hdr h = { .seq = req->seq };
	int r = -init_become_user(p->user, &pw), fd = -1, changed = 0, dir = -1, sock[2] = { -1, -1 };
	struct wire_path home = *p;
	umask(0); /* the request's mode is the file's mode */
	if (req->type == WIRE_OPEN) {
		/* The home as the sandbox's own /etc/passwd says, where an exec
		 * starts; "/" for a user without one. */
		if (r == 0 && (req->flags & WIRE_FLAG_HOME))
			home.path = pw.home[0] == '/' ? pw.home : "/";
		if (r == 0)
			r = fd = open_kind(req->value, &home, req->flags, &h.flags);
		if (r >= 0 && is_stream(req->value, fd)) {
			dir = fd;
			r = fd = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock) < 0 ? -errno : sock[0];
			h.flags |= WIRE_FLAG_ENTRIES;
		}
		h.type = r < 0 ? WIRE_OPEN_FAILED : WIRE_OPENED;
	} else {
		if (r == 0)
			r = fsop(req->value, p, req->flags, req_fd, &changed);
		h.type = WIRE_FSOP_DONE;
		h.pid = changed;
	}
	h.value = r < 0 ? -r : 0;
	if (init_send(&h, fd, true) < 0)
		_exit(1);
	if (r >= 0 && dir >= 0) {
		close(sock[0]);
		run_stream(req->value, dir, sock[1], req->pid, req_fd);
	}
	_exit(0);
}

void files_handle(const struct wire_hdr *h, const char *payload, int fd)
{
	struct wire_path p;
	struct wire_hdr fail = { .type = h->type == WIRE_OPEN ? WIRE_OPEN_FAILED : WIRE_FSOP_DONE, .seq = h->seq };
	int slot = 0;
	while (slot < FILES_MAX_OPS && ops[slot].pid)
		slot++;
	if (wire_decode_path(payload, h->payload_len, &p) < 0)
		fail.value = EINVAL;
	else if (h->type == WIRE_OPEN && h->value == WIRE_OPEN_TAR_LIST && fd < 0)
		fail.value = EINVAL;
	else if (slot == FILES_MAX_OPS)
		fail.value = EAGAIN;
	pid_t pid = fail.value ? -1 : fork();
	if (pid == 0)
		child_main(h, &p, fd);
	if (pid < 0) {
		fail.value = fail.value ? fail.value : errno;
		(void)init_send(&fail, -1, false);
		return;
	}
	ops[slot] = (struct file_op){ pid, h->seq, fail.type, init_connection() };
}

void files_reaped(pid_t pid, int status)
{
	for (int i = 0; i < FILES_MAX_OPS; i++) {
		if (ops[i].pid != pid)
			continue;
		ops[i].pid = 0;
		/* Killed before it answered (or while): say so, on the connection
		 * that asked; a duplicate answer is ignored by coved. */
		bool answered = WIFEXITED(status) && WEXITSTATUS(status) == 0;
		if (!answered && ops[i].conn == init_connection()) {
			struct wire_hdr h = { .type = ops[i].fail_type, .seq = ops[i].seq, .value = EIO };
			(void)init_send(&h, -1, false);
		}
		return;
	}
}

/* ---- entry streams ---- */

static bool on_pseudo_fs(int fd)
{
	struct statfs sf;
	return fstatfs(fd, &sf) == 0 && (sf.f_type == PROC_SUPER_MAGIC || sf.f_type == SYSFS_MAGIC);
}

/* A listing (a directory opened for reading), a tree, an extraction. */
static bool is_stream(int kind, int fd)
{
	struct stat st;
	if (kind == WIRE_OPEN_TAR || kind == WIRE_OPEN_TAR_LIST || kind == WIRE_OPEN_EXTRACT)
		return true;
	return kind == WIRE_OPEN_READ && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
}

/* A directory to send as a tar: read as the user, never procfs or sysfs. */
static int open_tree(const struct wire_path *p)
{
	struct stat st;
	int fd = open_read(p);
	if (fd < 0)
		return fd;
	int e = fstat(fd, &st) < 0 ? -errno : !S_ISDIR(st.st_mode) ? -ENOTDIR : on_pseudo_fs(fd) ? -EACCES : 0;
	if (e < 0) {
		close(fd);
		return e;
	}
	return fd;
}

/* The directory to extract into, made (mkdir -p) if missing. */
static int open_extract_root(const struct wire_path *p, bool *created)
{
	int made = 0;
	int fd = make_dirs(p->path, true, &made);
	if (fd < 0)
		return fd;
	*created = made > 0;
	fd = resolve(p->path, O_PATH | O_DIRECTORY, 0);
	if (fd >= 0 && on_pseudo_fs(fd)) {
		close(fd);
		return -EACCES;
	}
	return fd;
}

static uint32_t entry_type(mode_t m)
{
	return S_ISREG(m)   ? WIRE_ENTRY_FILE
	       : S_ISDIR(m) ? WIRE_ENTRY_DIR
	       : S_ISLNK(m) ? WIRE_ENTRY_SYMLINK
			    : WIRE_ENTRY_OTHER;
}

/* Exactly n bytes, or -EPIPE when the stream ends first. */
int files_read_all(int fd, void *buf, size_t n)
{
	char *p = buf;
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EPIPE;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* A header with its path and link target. Writes to a stream whose reader
 * is gone fail with EPIPE: init's children inherit its blocked SIGPIPE. */
int files_send_entry(int sock, struct wire_entry *e, const char *path, const char *link)
{
	static char buf[sizeof(struct wire_entry) + 2 * (WIRE_ENTRY_MAX_PATH + 1)];
	e->path_len = (uint32_t)strnlen(path, WIRE_ENTRY_MAX_PATH);
	e->link_len = link ? (uint32_t)strnlen(link, WIRE_ENTRY_MAX_PATH) : 0;
	memcpy(buf, e, sizeof(*e));
	memcpy(buf + sizeof(*e), path, e->path_len);
	if (link)
		memcpy(buf + sizeof(*e) + e->path_len, link, e->link_len);
	return io_write_all(sock, buf, sizeof(*e) + e->path_len + e->link_len);
}

/* ---- walking a tree onto a stream: a listing, or a tar's contents ---- */

struct walk {
	int sock;
	dev_t skip_dev; /* a tar skips what the root's /dev mount holds */
	ino_t skip_ino;
	bool data;     /* a tar: files' bytes follow their entries, and only files, dirs and symlinks go */
	int max_depth; /* 1: the directory's own entries */
	char path[PATH_MAX];
	char link[PATH_MAX];
	char buf[FILES_IO_CHUNK];
};

/* Exactly size bytes of fd: a file that shrank meanwhile (or fails to
 * read) is padded with zeros, as tar does, since its header is sent. */
static int send_data(struct walk *w, int fd, uint64_t size)
{
	while (size > 0) {
		size_t want = size < sizeof(w->buf) ? (size_t)size : sizeof(w->buf);
		ssize_t n = read(fd, w->buf, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			memset(w->buf, 0, want);
			n = (ssize_t)want;
		}
		int r = io_write_all(w->sock, w->buf, (size_t)n);
		if (r < 0)
			return r;
		size -= (uint64_t)n;
	}
	return 0;
}

/* A member's file, opened as the user; what it cannot read is left out. */
static int open_member(int dirfd, const char *name, struct stat *st)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd >= 0 && (fstat(fd, st) < 0 || !S_ISREG(st->st_mode))) {
		close(fd);
		return -1;
	}
	return fd;
}

static int walk_dir(struct walk *w, int fd, int depth);
static bool is_skipped(const struct walk *w, int fd);

/* name in dirfd, whose path is w->path; then, for a directory not deeper
 * than asked, what it holds. Never follows a symlink, never descends into
 * procfs or sysfs. A stream error ends the walk; anything else skips. */
static int walk_entry(struct walk *w, int dirfd, const char *name, int depth)
{
	struct stat st;
	size_t len = strlen(w->path);
	if (len + 1 + strlen(name) > WIRE_ENTRY_MAX_PATH || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	struct wire_entry e = { .type = entry_type(st.st_mode),
				.mode = st.st_mode & 07777,
				.uid = st.st_uid,
				.gid = st.st_gid,
				.mtime = st.st_mtim.tv_sec,
				.size = (uint64_t)st.st_size };
	int fd = -1;
	if (w->data && e.type == WIRE_ENTRY_OTHER)
		return 0;
	if (w->data && e.type == WIRE_ENTRY_FILE && (fd = open_member(dirfd, name, &st)) < 0)
		return 0;
	if (w->data)
		e.size = fd >= 0 ? (uint64_t)st.st_size : 0;
	w->link[0] = '\0';
	if (e.type == WIRE_ENTRY_SYMLINK) {
		ssize_t n = readlinkat(dirfd, name, w->link, sizeof(w->link) - 1);
		w->link[n > 0 ? n : 0] = '\0';
	}
	snprintf(w->path + len, sizeof(w->path) - len, "%s%s", len ? "/" : "", name);
	int r = files_send_entry(w->sock, &e, w->path, e.type == WIRE_ENTRY_SYMLINK ? w->link : NULL);
	if (r == 0 && fd >= 0)
		r = send_data(w, fd, e.size);
	if (fd >= 0)
		close(fd);
	if (r == 0 && e.type == WIRE_ENTRY_DIR && depth + 1 < w->max_depth) {
		int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (sub >= 0 && (on_pseudo_fs(sub) || (w->data && is_skipped(w, sub)))) {
			close(sub);
			sub = -1;
		}
		if (sub >= 0)
			r = walk_dir(w, sub, depth + 1);
	}
	w->path[len] = '\0';
	return r;
}

static bool is_skipped(const struct walk *w, int fd)
{
	struct stat st;
	return w->skip_ino && fstat(fd, &st) == 0 && st.st_dev == w->skip_dev && st.st_ino == w->skip_ino;
}

/* The root's /dev, when it is a mount of its own (a sandbox's tmpfs of
 * device nodes, ptys, shared memory): a tar lists it, empty. An external
 * sandbox's workspace may hold a "dev" of the user's, on its own device. */
static void skip_dev_mount(struct walk *w)
{
	struct stat root, dev;
	if (fstat(root_fd, &root) == 0 && fstatat(root_fd, "dev", &dev, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISDIR(dev.st_mode) && dev.st_dev != root.st_dev) {
		w->skip_dev = dev.st_dev;
		w->skip_ino = dev.st_ino;
	}
}

/* Takes dirfd. A directory the user cannot read is listed, not entered. */
static int walk_dir(struct walk *w, int fd, int depth)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	struct dirent *de;
	int r = 0;
	while (r == 0 && (de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			r = walk_entry(w, dirfd(d), de->d_name, depth);
	closedir(d);
	return r;
}

/* The listed paths, each one alone (max_depth 1), as walk_entry sends
 * them: what is gone or unreadable by now is left out. Each path's parent
 * is opened beneath the root through no symlink, as it is on the upper
 * layer the list was read from. Takes root. */
static int walk_list(struct walk *w, int root, int list_fd)
{
	_cleanup_close_ int rootfd = root;
	FILE *f = fdopen(list_fd, "r");
	char *line = NULL;
	size_t cap = 0;
	int r = f ? 0 : -errno;
	while (r == 0 && getdelim(&line, &cap, '\0', f) > 0) {
		char *slash = strrchr(line, '/');
		const char *base = slash ? slash + 1 : line;
		if (!*base || strlen(line) > WIRE_ENTRY_MAX_PATH)
			continue;
		if (slash)
			*slash = '\0';
		struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
					.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
		int pfd = slash ? io_openat2(rootfd, line, &how) : fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
		if (pfd < 0)
			continue;
		snprintf(w->path, sizeof(w->path), "%s", slash ? line : "");
		r = walk_entry(w, pfd, base, 0);
		w->path[0] = '\0';
		close(pfd);
	}
	free(line);
	if (f)
		fclose(f);
	return r;
}

static void run_stream(int kind, int fd, int sock, int depth, int list_fd)
{
	static struct walk w;
	if (kind == WIRE_OPEN_EXTRACT) {
		files_extract(fd, sock);
		return;
	}
	w.sock = sock;
	w.data = kind == WIRE_OPEN_TAR || kind == WIRE_OPEN_TAR_LIST;
	w.max_depth = kind == WIRE_OPEN_TAR_LIST ? 1
		      : w.data                   ? FILES_MAX_DEPTH
		      : depth < 1                ? 1
		      : depth > FILES_MAX_DEPTH  ? FILES_MAX_DEPTH
						 : depth;
	struct wire_entry end = { .type = WIRE_ENTRY_END };
	if (w.data)
		skip_dev_mount(&w);
	int r = kind == WIRE_OPEN_TAR_LIST ? walk_list(&w, fd, list_fd) : walk_dir(&w, fd, 0);
	if (r == 0)
		(void)files_send_entry(sock, &end, "", NULL);
}

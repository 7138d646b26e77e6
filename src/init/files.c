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
 * itself. Files on procfs are refused for reading and writing: the child
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
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "init/init.h"

#define FILES_MAX_OPS 256   /* file operations under way at once */
#define FILES_MAX_DEPTH 256 /* directory depth a recursive remove descends */
#define FILES_DIR_MODE 0755 /* directories made by mkdir and parents=1 */

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
	int fd = (int)syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
	return fd < 0 ? -errno : fd;
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

/* Created if missing (exclusively, so that *created is true), else
 * truncated. A dangling symlink is followed to create its target, which
 * RESOLVE_IN_ROOT keeps inside the root. */
static int open_write(const struct wire_path *p, uint32_t flags, bool *created)
{
	int made, fd;
	if ((flags & WIRE_FLAG_PARENTS) && (fd = make_dirs(p->path, false, &made)) < 0)
		return fd;
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

static int open_kind(int kind, const struct wire_path *p, uint32_t flags, uint32_t *ret_flags)
{
	bool created = false;
	int fd;
	switch (kind) {
	case WIRE_OPEN_READ:
		return open_read(p);
	case WIRE_OPEN_STAT:
		return resolve(p->path, O_PATH | O_NOFOLLOW, 0);
	case WIRE_OPEN_WRITE:
		fd = open_write(p, flags, &created);
		*ret_flags = created ? WIRE_FLAG_CREATED : 0;
		return fd;
	default:
		return -EINVAL;
	}
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

static int fsop(int op, const struct wire_path *p, uint32_t flags, int *changed)
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
static void child_main(const struct wire_hdr *req, const struct wire_path *p)
{
	struct passwd_entry pw;
	struct wire_hdr h = { .seq = req->seq };
	int r = -init_become_user(p->user, &pw), fd = -1, changed = 0;
	umask(0); /* the request's mode is the file's mode */
	if (req->type == WIRE_OPEN) {
		if (r == 0)
			r = fd = open_kind(req->value, p, req->flags, &h.flags);
		h.type = r < 0 ? WIRE_OPEN_FAILED : WIRE_OPENED;
	} else {
		if (r == 0)
			r = fsop(req->value, p, req->flags, &changed);
		h.type = WIRE_FSOP_DONE;
		h.pid = changed;
	}
	h.value = r < 0 ? -r : 0;
	_exit(init_send(&h, fd, true) == 0 ? 0 : 1);
}

void files_handle(const struct wire_hdr *h, const char *payload)
{
	struct wire_path p;
	struct wire_hdr fail = { .type = h->type == WIRE_OPEN ? WIRE_OPEN_FAILED : WIRE_FSOP_DONE, .seq = h->seq };
	int slot = 0;
	while (slot < FILES_MAX_OPS && ops[slot].pid)
		slot++;
	if (wire_decode_path(payload, h->payload_len, &p) < 0)
		fail.value = EINVAL;
	else if (slot == FILES_MAX_OPS)
		fail.value = EAGAIN;
	pid_t pid = fail.value ? -1 : fork();
	if (pid == 0)
		child_main(h, &p);
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

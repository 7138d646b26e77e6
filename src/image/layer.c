/* Layer unpacking (layer.h). Two libarchive readers in a row: the outer one
 * only undoes the compression (format "raw", filters gzip and zstd), and
 * its output is hashed on its way into the inner one, which reads the tar.
 * So the diff id is the digest of exactly the bytes the tar reader saw. */
#include "image/layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/io.h"
#include "common/wire.h"
#include "sandbox/runtime.h"

#define LAYER_READ_BLOCK (128 << 10)
#define LAYER_XATTRS_MAX 128
#define WHITEOUT ".wh."
#define WHITEOUT_OPAQUE ".wh..wh..opq"

/* The names this layer has made so far, as 64-bit hashes (a whiteout or
 * an opaque folder applies to lower layers only, not to names of its own
 * layer). A collision could only keep a lower file the layer meant to
 * remove, which the layer's author could have done anyway. */
struct name_set {
	uint64_t *slots; /* 0 = empty */
	size_t cap, n;
};

static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h ? h : 1;
}

static bool name_set_has(const struct name_set *s, const char *name)
{
	if (!s->cap)
		return false;
	uint64_t h = name_hash(name);
	for (size_t i = h & (s->cap - 1); s->slots[i]; i = (i + 1) & (s->cap - 1))
		if (s->slots[i] == h)
			return true;
	return false;
}

static int name_set_add_hash(struct name_set *s, uint64_t h)
{
	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 1024;
		uint64_t *slots = calloc(cap, sizeof(*slots));
		if (!slots)
			return -ENOMEM;
		struct name_set grown = { slots, cap, 0 };
		for (size_t i = 0; i < s->cap; i++)
			if (s->slots[i])
				(void)name_set_add_hash(&grown, s->slots[i]);
		free(s->slots);
		*s = grown;
	}
	size_t i = h & (s->cap - 1);
	for (; s->slots[i]; i = (i + 1) & (s->cap - 1))
		if (s->slots[i] == h)
			return 0;
	s->slots[i] = h;
	s->n++;
	return 0;
}

struct unpack {
	int root;
	struct archive *raw, *tar;
	struct digest_ctx hash;
	struct name_set seen;
	struct layer_stats stats;
	/* The folder of the last entry, kept open: members come grouped by
	 * folder. Dropped whenever something is removed. */
	char cached[WIRE_ENTRY_MAX_PATH + 1];
	int cached_fd;
	struct cove_err *err;
};

static void cache_drop(struct unpack *u)
{
	if (u->cached_fd >= 0)
		close(u->cached_fd);
	u->cached_fd = -1;
	u->cached[0] = '\0';
}

/* Open dir (a normalized relative path, "" for the root) below the root,
 * through no symlink, as a folder fd; -errno (-ELOOP: a symlink on the way). */
static int open_below(int root, const char *dir)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC, /* RESOLVE_NO_SYMLINKS covers the leaf too */
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	return io_openat2(root, *dir ? dir : ".", &how);
}

/* Make the missing folders of dir one component at a time (0755, root's,
 * as tar does for a member whose folder was not in the archive). */
static int make_parents(int root, const char *dir)
{
	char part[WIRE_ENTRY_MAX_PATH + 1];
	int fd = open_below(root, "");
	for (const char *p = dir; fd >= 0 && *p;) {
		size_t len = strcspn(p, "/");
		memcpy(part, p, len);
		part[len] = '\0';
		if (mkdirat(fd, part, 0755) < 0 && errno != EEXIST) {
			int e = -errno;
			close(fd);
			return e;
		}
		int next = open_below(fd, part);
		close(fd);
		fd = next;
		p += len;
		p += *p == '/';
	}
	return fd;
}

static const char *why(int r)
{
	return r == -ELOOP ? "a symlink is on the way" : r == -ENOTDIR ? "a non-folder is on the way" : strerror(-r);
}

/* The folder dir, made if create and missing. A borrowed fd (the cache),
 * or -errno with err set. */
static int parent_fd(struct unpack *u, const char *dir, bool create)
{
	if (u->cached_fd >= 0 && strcmp(u->cached, dir) == 0)
		return u->cached_fd;
	cache_drop(u);
	int fd = open_below(u->root, dir);
	if (fd == -ENOENT && create)
		fd = make_parents(u->root, dir);
	if (fd < 0) {
		if (fd != -ENOENT || create)
			err_set(u->err, COVE_EINVAL, "'%s': %s", dir, why(fd));
		return fd;
	}
	strcpy(u->cached, dir);
	u->cached_fd = fd;
	return fd;
}

/* Remove leaf in dfd and, for a folder, all below it (never following a
 * symlink: a folder is opened O_NOFOLLOW and read through its own fd). */
static int remove_tree(int dfd, const char *leaf, int depth)
{
	if (unlinkat(dfd, leaf, 0) == 0)
		return 0;
	if (errno != EISDIR)
		return errno == ENOENT ? 0 : -errno;
	if (depth > LAYER_DEPTH_MAX)
		return -ELOOP;
	int fd = openat(dfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	int r = 0;
	struct dirent *e;
	while (r == 0 && (e = readdir(d)))
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			r = remove_tree(fd, e->d_name, depth + 1);
	closedir(d);
	if (r == 0 && unlinkat(dfd, leaf, AT_REMOVEDIR) < 0)
		r = -errno;
	return r;
}

/* What is at leaf goes, unless both it and the new entry are folders
 * (then the folder stays, with its contents, and takes the new metadata). */
static int replace_existing(struct unpack *u, int pfd, const char *leaf, bool dir, const char *path)
{
	struct stat st;
	if (fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : err_sys(u->err, errno, "'%s'", path);
	if (dir && S_ISDIR(st.st_mode))
		return 0;
	/* A folder replaced by a non-folder goes with its contents. */
	int r = remove_tree(pfd, leaf, 0);
	return r < 0 ? err_sys(u->err, -r, "replace '%s'", path) : 0;
}

/* A VFS capability as v2, the form that applies in whatever user namespace
 * the file is seen from: a v3 one names the host uid of a namespace's root
 * (rootid), which has no meaning for an image. */
static int caps_v2(const void *value, size_t size, char out[20])
{
	uint32_t magic;
	if (size < 4)
		return -1;
	memcpy(&magic, value, 4);
	uint32_t rev = magic & 0xff000000u;
	if (!((rev == 0x02000000u && size == 20) || (rev == 0x03000000u && size == 24)))
		return -1;
	memcpy(out, value, 20);
	magic = 0x02000000u | (magic & 1u); /* keep VFS_CAP_FLAGS_EFFECTIVE */
	memcpy(out, &magic, 4);
	return 0;
}

/* The entry's xattrs that an image may carry: user.* (but overlay's own
 * marks, user.overlay.*, which the sandbox's overlay would obey) and file
 * capabilities. Others (trusted.*, security.selinux, ...) are skipped. */
static int set_xattrs(struct unpack *u, int fd, struct archive_entry *e, const char *path)
{
	const char *name;
	const void *value;
	size_t size;
	int n = archive_entry_xattr_reset(e);
	if (n > LAYER_XATTRS_MAX)
		return err_set(u->err, COVE_EINVAL, "'%s': %d xattrs, at most %d", path, n, LAYER_XATTRS_MAX);
	while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
		char caps[20];
		bool user = strncmp(name, "user.", 5) == 0 && strncmp(name, "user.overlay.", 13) != 0;
		bool cap = strcmp(name, "security.capability") == 0;
		if (!user && !cap) {
			u->stats.skipped_xattrs++;
			continue;
		}
		if (cap && caps_v2(value, size, caps) < 0)
			return err_set(u->err, COVE_EINVAL, "'%s': malformed file capability", path);
		if (fsetxattr(fd, name, cap ? caps : value, cap ? sizeof(caps) : size, 0) < 0)
			return err_sys(u->err, errno, "'%s': set xattr %s", path, name);
	}
	return 0;
}

/* Owner, then mode (a chown clears set-id bits), then xattrs (it clears
 * capabilities too), then times. */
static int set_meta(struct unpack *u, int fd, struct archive_entry *e, const char *path)
{
	struct timespec t[2] = { { archive_entry_mtime(e), archive_entry_mtime_nsec(e) },
				 { archive_entry_mtime(e), archive_entry_mtime_nsec(e) } };
	if (archive_entry_atime_is_set(e))
		t[0] = (struct timespec){ archive_entry_atime(e), archive_entry_atime_nsec(e) };
	if (fchown(fd, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e)) < 0 ||
	    fchmod(fd, archive_entry_perm(e) & 07777) < 0)
		return err_sys(u->err, errno, "'%s': set owner and mode", path);
	if (set_xattrs(u, fd, e, path) < 0)
		return -1;
	if (futimens(fd, t) < 0)
		return err_sys(u->err, errno, "'%s': set times", path);
	return 0;
}

static int write_data(struct unpack *u, int fd, struct archive_entry *e, const char *path)
{
	const void *buf;
	size_t n;
	la_int64_t off;
	int r;
	while ((r = archive_read_data_block(u->tar, &buf, &n, &off)) == ARCHIVE_OK) {
		for (size_t done = 0; done < n;) {
			ssize_t w = pwrite(fd, (const char *)buf + done, n - done, off + (off_t)done);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return err_sys(u->err, errno, "write '%s'", path);
			done += (size_t)w;
		}
		u->stats.bytes += n;
	}
	if (r != ARCHIVE_EOF)
		return err_set(u->err, COVE_EINVAL, "'%s': %s", path, archive_error_string(u->tar));
	/* A sparse file's hole at its end. */
	if (archive_entry_size_is_set(e) && ftruncate(fd, archive_entry_size(e)) < 0)
		return err_sys(u->err, errno, "'%s': set size", path);
	return 0;
}

static int make_file(struct unpack *u, int pfd, const char *leaf, struct archive_entry *e, const char *path)
{
	if (replace_existing(u, pfd, leaf, false, path) < 0)
		return -1;
	_cleanup_close_ int fd = openat(pfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_sys(u->err, errno, "create '%s'", path);
	if (write_data(u, fd, e, path) < 0)
		return -1;
	return set_meta(u, fd, e, path);
}

static int make_dir(struct unpack *u, int pfd, const char *leaf, struct archive_entry *e, const char *path)
{
	if (replace_existing(u, pfd, leaf, true, path) < 0)
		return -1;
	if (mkdirat(pfd, leaf, 0700) < 0 && errno != EEXIST)
		return err_sys(u->err, errno, "mkdir '%s'", path);
	_cleanup_close_ int fd = openat(pfd, leaf, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return err_sys(u->err, errno, "open '%s'", path);
	return set_meta(u, fd, e, path);
}

static int make_symlink(struct unpack *u, int pfd, const char *leaf, struct archive_entry *e, const char *path)
{
	const char *target = archive_entry_symlink(e);
	if (!target || !*target || strlen(target) > WIRE_ENTRY_MAX_PATH)
		return err_set(u->err, COVE_EINVAL, "'%s': symlink target empty or too long", path);
	if (replace_existing(u, pfd, leaf, false, path) < 0)
		return -1;
	struct timespec t[2] = { { archive_entry_mtime(e), 0 }, { archive_entry_mtime(e), 0 } };
	if (symlinkat(target, pfd, leaf) < 0 ||
	    fchownat(pfd, leaf, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e), AT_SYMLINK_NOFOLLOW) < 0 ||
	    utimensat(pfd, leaf, t, AT_SYMLINK_NOFOLLOW) < 0)
		return err_sys(u->err, errno, "symlink '%s'", path);
	return 0;
}

static int make_fifo(struct unpack *u, int pfd, const char *leaf, struct archive_entry *e, const char *path)
{
	if (replace_existing(u, pfd, leaf, false, path) < 0)
		return -1;
	if (mknodat(pfd, leaf, S_IFIFO | 0600, 0) < 0)
		return err_sys(u->err, errno, "mkfifo '%s'", path);
	struct timespec t[2] = { { archive_entry_mtime(e), 0 }, { archive_entry_mtime(e), 0 } };
	/* The scratch tree is this process's alone: leaf is the FIFO just made. */
	if (fchownat(pfd, leaf, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e), AT_SYMLINK_NOFOLLOW) < 0 ||
	    fchmodat(pfd, leaf, archive_entry_perm(e) & 0777, 0) < 0 ||
	    utimensat(pfd, leaf, t, AT_SYMLINK_NOFOLLOW) < 0)
		return err_sys(u->err, errno, "mkfifo '%s'", path);
	return 0;
}

/* path split into its folder (in dir) and its leaf. */
static const char *split(const char *path, char dir[WIRE_ENTRY_MAX_PATH + 1])
{
	const char *slash = strrchr(path, '/');
	size_t len = slash ? (size_t)(slash - path) : 0;
	memcpy(dir, path, len);
	dir[len] = '\0';
	return slash ? slash + 1 : path;
}

/* A member name or hard link target as a path in the tree. */
static int entry_path(struct unpack *u, const char *name, char out[WIRE_ENTRY_MAX_PATH + 1], const char *what)
{
	if (!name)
		return err_set(u->err, COVE_EINVAL, "a member without a %s", what);
	if (name[0] == '/')
		return err_set(u->err, COVE_EINVAL, "'%.200s': an absolute %s", name, what);
	int r = wire_entry_path_normalize(name, out, WIRE_ENTRY_MAX_PATH + 1);
	if (r == -EINVAL)
		return err_set(u->err, COVE_EINVAL, "'%.200s': a '..' in a %s", name, what);
	if (r == -ENAMETOOLONG)
		return err_set(u->err, COVE_EINVAL, "'%.200s...': %s longer than %d bytes", name, what,
			       WIRE_ENTRY_MAX_PATH);
	int depth = 1;
	for (const char *p = out; *p; p++)
		depth += *p == '/';
	if (r == 0 && depth > LAYER_DEPTH_MAX)
		return err_set(u->err, COVE_EINVAL, "'%.200s': deeper than %d folders", name, LAYER_DEPTH_MAX);
	return r;
}

static int make_hardlink(struct unpack *u, int pfd, const char *leaf, struct archive_entry *e, const char *path)
{
	char target[WIRE_ENTRY_MAX_PATH + 1], tdir[WIRE_ENTRY_MAX_PATH + 1];
	int r = entry_path(u, archive_entry_hardlink(e), target, "hard link target");
	if (r != 0)
		return r < 0 ? -1 : err_set(u->err, COVE_EINVAL, "'%s': a hard link to the root", path);
	if (strcmp(target, path) == 0)
		return 0;
	const char *tleaf = split(target, tdir);
	/* Opened apart from the cache, which holds pfd. */
	_cleanup_close_ int tfd = open_below(u->root, tdir);
	struct stat st;
	if (tfd < 0 || fstatat(tfd, tleaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return err_set(u->err, COVE_EINVAL, "'%s': hard link to '%s', which is not in the layer", path, target);
	if (S_ISDIR(st.st_mode))
		return err_set(u->err, COVE_EINVAL, "'%s': hard link to the folder '%s'", path, target);
	if (replace_existing(u, pfd, leaf, false, path) < 0)
		return -1;
	if (linkat(tfd, tleaf, pfd, leaf, 0) < 0)
		return err_sys(u->err, errno, "hard link '%s' to '%s'", path, target);
	return 0;
}

/* Remove what lower layers put in folder dfd (at path dir): every name but
 * those this layer made, and below those that are folders, the same. */
static int clear_opaque(struct unpack *u, int dfd, const char *dir, int depth)
{
	if (depth > LAYER_DEPTH_MAX)
		return -ELOOP;
	int fd = dup(dfd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	int r = 0;
	struct dirent *e;
	char child[WIRE_ENTRY_MAX_PATH + NAME_MAX + 2];
	while (r == 0 && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(child, sizeof(child), "%s%s%s", dir, *dir ? "/" : "", e->d_name);
		if (!name_set_has(&u->seen, child)) {
			r = remove_tree(dfd, e->d_name, 0);
			u->stats.whiteouts++;
		} else if (e->d_type == DT_DIR) {
			_cleanup_close_ int sub =
				openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			r = sub < 0 ? -errno : clear_opaque(u, sub, child, depth + 1);
		}
	}
	closedir(d);
	return r;
}

static int whiteout(struct unpack *u, const char *dir, const char *leaf, const char *path)
{
	bool opaque = strcmp(leaf, WHITEOUT_OPAQUE) == 0;
	const char *victim = leaf + strlen(WHITEOUT);
	if (!opaque && strncmp(victim, WHITEOUT, strlen(WHITEOUT)) == 0)
		return 0; /* aufs's own metadata (.wh..wh.plnk, ...): nothing to apply */
	if (!opaque && (!*victim || strcmp(victim, ".") == 0 || strcmp(victim, "..") == 0))
		return err_set(u->err, COVE_EINVAL, "'%s': a whiteout of no name", path);
	int pfd = parent_fd(u, dir, false);
	if (pfd == -ENOENT)
		return 0; /* nothing below to hide */
	if (pfd < 0)
		return -1;
	char vpath[WIRE_ENTRY_MAX_PATH + 1];
	snprintf(vpath, sizeof(vpath), "%s%s%s", dir, *dir ? "/" : "", victim);
	int r = 0;
	if (opaque) {
		r = clear_opaque(u, pfd, dir, 0);
	} else if (!name_set_has(&u->seen, vpath)) {
		r = remove_tree(pfd, victim, 0);
		u->stats.whiteouts++;
	}
	cache_drop(u);
	return r < 0 ? err_sys(u->err, -r, "whiteout '%s'", path) : 0;
}

static int apply_entry(struct unpack *u, struct archive_entry *e)
{
	char path[WIRE_ENTRY_MAX_PATH + 1], dir[WIRE_ENTRY_MAX_PATH + 1];
	int r = entry_path(u, archive_entry_pathname(e), path, "name");
	if (r < 0)
		return -1;
	if (r == 1)
		return 0; /* "./": the root, which the layer below made */
	if (archive_entry_uid(e) < 0 || archive_entry_uid(e) >= RUNTIME_UID_COUNT || archive_entry_gid(e) < 0 ||
	    archive_entry_gid(e) >= RUNTIME_UID_COUNT)
		return err_set(u->err, COVE_EINVAL, "'%s': owner %lld:%lld outside the %d ids a sandbox maps", path,
			       (long long)archive_entry_uid(e), (long long)archive_entry_gid(e), RUNTIME_UID_COUNT);
	const char *leaf = split(path, dir);
	if (strncmp(leaf, WHITEOUT, strlen(WHITEOUT)) == 0)
		return whiteout(u, dir, leaf, path);
	unsigned type = archive_entry_filetype(e);
	if (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK) {
		u->stats.skipped_devices++;
		return 0;
	}
	int pfd = parent_fd(u, dir, true);
	if (pfd < 0)
		return -1;
	if (archive_entry_hardlink(e))
		r = make_hardlink(u, pfd, leaf, e, path);
	else if (type == AE_IFREG)
		r = make_file(u, pfd, leaf, e, path);
	else if (type == AE_IFDIR)
		r = make_dir(u, pfd, leaf, e, path);
	else if (type == AE_IFLNK)
		r = make_symlink(u, pfd, leaf, e, path);
	else if (type == AE_IFIFO)
		r = make_fifo(u, pfd, leaf, e, path);
	else
		r = err_set(u->err, COVE_EINVAL, "'%s': unknown member type 0%o", path, type);
	if (r < 0)
		return -1;
	return name_set_add_hash(&u->seen, name_hash(path)) < 0 ? err_sys(u->err, ENOMEM, "layer") : 0;
}

/* The inner reader's input: the outer reader's output, hashed. */
static la_ssize_t tar_read(struct archive *a, void *arg, const void **ret)
{
	struct unpack *u = arg;
	const void *buf;
	size_t n;
	la_int64_t off;
	int r = archive_read_data_block(u->raw, &buf, &n, &off);
	if (r == ARCHIVE_EOF)
		return 0;
	if (r != ARCHIVE_OK) {
		archive_set_error(a, EINVAL, "%s", archive_error_string(u->raw));
		return -1;
	}
	digest_update(&u->hash, buf, n);
	*ret = buf;
	return (la_ssize_t)n;
}

static int open_readers(struct unpack *u, int fd)
{
	struct archive_entry *raw_entry;
	u->raw = archive_read_new();
	u->tar = archive_read_new();
	if (!u->raw || !u->tar)
		return err_sys(u->err, ENOMEM, "layer");
	if (archive_read_support_filter_gzip(u->raw) != ARCHIVE_OK ||
	    archive_read_support_filter_zstd(u->raw) != ARCHIVE_OK ||
	    archive_read_support_format_raw(u->raw) != ARCHIVE_OK ||
	    archive_read_support_format_tar(u->tar) != ARCHIVE_OK)
		return err_set(u->err, COVE_EINTERNAL, "libarchive: %s", archive_error_string(u->raw));
	if (archive_read_open_fd(u->raw, fd, LAYER_READ_BLOCK) != ARCHIVE_OK ||
	    archive_read_next_header(u->raw, &raw_entry) != ARCHIVE_OK)
		return err_set(u->err, COVE_EINVAL, "not a layer: %s", archive_error_string(u->raw));
	if (archive_read_open(u->tar, u, NULL, tar_read, NULL) != ARCHIVE_OK)
		return err_set(u->err, COVE_EINVAL, "not a tar: %s", archive_error_string(u->tar));
	return 0;
}

static int unpack_all(struct unpack *u)
{
	struct archive_entry *e;
	int r;
	while ((r = archive_read_next_header(u->tar, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN) {
		if (++u->stats.entries > LAYER_ENTRIES_MAX)
			return err_set(u->err, COVE_EINVAL, "more than %u members", LAYER_ENTRIES_MAX);
		if (apply_entry(u, e) < 0)
			return -1;
	}
	if (r != ARCHIVE_EOF)
		return err_set(u->err, COVE_EINVAL, "bad tar: %s", archive_error_string(u->tar));
	/* What follows the tar's end marker is part of the diff id too. */
	while ((r = (int)tar_read(u->tar, u, &(const void *){ NULL })) > 0)
		;
	return r < 0 ? err_set(u->err, COVE_EINVAL, "bad layer: %s", archive_error_string(u->raw)) : 0;
}

int layer_apply(int rootfd, int fd, const char *want_diff_id, char ret_diff_id[DIGEST_STR_MAX],
		struct layer_stats *stats, struct cove_err *err)
{
	struct unpack u = { .root = rootfd, .cached_fd = -1, .err = err };
	char got[DIGEST_STR_MAX];
	digest_init(&u.hash);
	int r = open_readers(&u, fd);
	if (r == 0)
		r = unpack_all(&u);
	cache_drop(&u);
	free(u.seen.slots);
	if (u.tar)
		archive_read_free(u.tar);
	if (u.raw)
		archive_read_free(u.raw);
	if (r < 0)
		return -1;
	digest_final(&u.hash, got);
	if (want_diff_id && strcmp(want_diff_id, got) != 0)
		return err_set(err, COVE_EINVAL, "digest mismatch: the layer's diff id is %s, %s expected", got,
			       want_diff_id);
	if (ret_diff_id)
		memcpy(ret_diff_id, got, DIGEST_STR_MAX);
	if (stats)
		*stats = u.stats;
	return 0;
}

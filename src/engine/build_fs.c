/* A build's files: the context, and its layers' tars (build_fs.h). */
#include "engine/build_fs.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/io.h"
#include "common/parse.h"
#include "common/passwd.h"
#include "engine/changes.h"
#include "image/layer.h"
#include "image/source.h"
#include "sandbox/runtime.h"
#include "sys/storage.h"
#include "sys/tree.h"

#define TAR_BUF (64u << 10)
#define PASSWD_MAX (1u << 20)

int build_fs_open(struct build_fs *fs, struct image_store *store, struct cove_err *err)
{
	char id[17];
	memset(fs, 0, sizeof(*fs));
	fs->store = store;
	if (random_hex(id, 8) < 0)
		return err_set(err, COVE_EINTERNAL, "no random bytes");
	snprintf(fs->dir, sizeof(fs->dir), "%s/builds/%s", store->images, id);
	snprintf(fs->context, sizeof(fs->context), "%s/context", fs->dir);
	int r = io_mkdir_p(fs->dir, 0700);
	return r < 0 ? err_sys(err, -r, "mkdir '%s'", fs->dir) : 0;
}

void build_fs_remove(struct build_fs *fs)
{
	if (fs->dir[0])
		(void)tree_remove(fs->dir);
	dockerignore_free(&fs->ignore);
	fs->dir[0] = '\0';
}

static int open_in(int dirfd, const char *rel, int flags)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC),
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	return io_openat2(dirfd, *rel ? rel : ".", &how);
}

static int read_fd(int fd, size_t max, char **ret, size_t *ret_len)
{
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (len + 4096 + 1 > cap) {
			cap = cap ? 2 * cap : 8192;
			char *p = len > max ? NULL : realloc(buf, cap);
			if (!p) {
				free(buf);
				return len > max ? -EFBIG : -ENOMEM;
			}
			buf = p;
		}
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			free(buf);
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > max) {
		free(buf);
		return -EFBIG;
	}
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}

int build_fs_read(const struct build_fs *fs, const char *rel, size_t max, char **ret, size_t *ret_len,
		  struct cove_err *err)
{
	_cleanup_close_ int dir = open(fs->context, O_PATH | O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int fd = dir < 0 ? -errno : open_in(dir, rel, O_RDONLY);
	int r = fd < 0 ? fd : read_fd(fd, max, ret, ret_len);
	if (r == -ENOENT)
		return err_set(err, COVE_EINVAL, "no '%s' in the build context", rel);
	if (r == -EFBIG)
		return err_set(err, COVE_EINVAL, "'%s' is over %zu bytes", rel, max);
	return r < 0 ? err_sys(err, -r, "read '%s' of the build context", rel) : 0;
}

int build_fs_unpack(struct build_fs *fs, int fd, struct cove_err *err)
{
	if (mkdir(fs->context, 0700) < 0)
		return err_sys(err, errno, "mkdir '%s'", fs->context);
	_cleanup_close_ int root = open(fs->context, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct cove_err lerr = { 0 };
	if (root < 0)
		return err_sys(err, errno, "open '%s'", fs->context);
	if (layer_apply(root, fd, NULL, NULL, NULL, &lerr) < 0)
		return err_set(err, COVE_EINVAL, "the build context: %s", lerr.msg);
	char *text = NULL;
	size_t len = 0;
	if (build_fs_read(fs, ".dockerignore", DOCKERFILE_MAX, &text, &len, &lerr) < 0)
		return 0;
	int r = dockerignore_parse(text, len, &fs->ignore);
	free(text);
	return r < 0 ? err_set(err, COVE_EINTERNAL, "out of memory") : 0;
}

/* ---- a tar into a blob ---- */

struct tarw {
	struct archive *a;
	struct archive_entry *e;
	struct blob_writer w;
	const struct blob_store *bs;
	struct cove_err *err;
	uint64_t entries;
	bool writing;
};

static la_ssize_t tarw_cb(struct archive *a, void *arg, const void *buf, size_t n)
{
	struct tarw *t = arg;
	return blob_writer_write(&t->w, buf, n, t->err) < 0 ? -1 : (la_ssize_t)n;
}

static int tarw_open(struct tarw *t, const struct build_fs *fs, struct cove_err *err)
{
	*t = (struct tarw){ .bs = &fs->store->blobs, .err = err };
	if (blob_writer_begin(t->bs, &t->w, IMAGE_BLOB_MAX, err) < 0)
		return -1;
	t->writing = true;
	t->a = archive_write_new();
	t->e = archive_entry_new();
	if (!t->a || !t->e || archive_write_set_format_pax_restricted(t->a) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(t->a, 1) != ARCHIVE_OK ||
	    archive_write_open(t->a, t, NULL, tarw_cb, NULL) != ARCHIVE_OK)
		return err_set(err, COVE_EINTERNAL, "a layer's tar: %s",
			       t->a ? archive_error_string(t->a) : "no memory");
	return 0;
}

static void tarw_free(struct tarw *t)
{
	if (t->a)
		archive_write_free(t->a);
	if (t->e)
		archive_entry_free(t->e);
	if (t->writing)
		blob_writer_abort(&t->w);
	t->a = NULL;
	t->e = NULL;
	t->writing = false;
}

static int tarw_close(struct tarw *t, struct build_tar *ret)
{
	if (!t->err->code && archive_write_close(t->a) != ARCHIVE_OK)
		err_set(t->err, COVE_EINTERNAL, "a layer's tar: %s", archive_error_string(t->a));
	int64_t size = (int64_t)t->w.size;
	int r = t->err->code ? -1 : 0;
	if (r == 0) {
		t->writing = false;
		r = blob_writer_commit(t->bs, &t->w, NULL, -1, ret->diff_id, NULL, t->err);
	}
	ret->size = size;
	ret->entries = t->entries;
	tarw_free(t);
	return r;
}

/* One entry: st's type, mode, owner, mtime and size; a regular file's
 * bytes from fd, a symlink's target link. */
static int tarw_add(struct tarw *t, const char *name, const struct stat *st, const char *link, int fd)
{
	static __thread char buf[TAR_BUF];
	struct archive_entry *e = archive_entry_clear(t->e);
	archive_entry_set_pathname(e, name);
	archive_entry_set_mode(e, st->st_mode);
	archive_entry_set_uid(e, st->st_uid);
	archive_entry_set_gid(e, st->st_gid);
	archive_entry_set_mtime(e, st->st_mtime, 0);
	archive_entry_set_size(e, S_ISREG(st->st_mode) ? st->st_size : 0);
	if (link)
		archive_entry_set_symlink(e, link);
	if (archive_write_header(t->a, e) < ARCHIVE_WARN)
		return err_set(t->err, COVE_EINTERNAL, "'%s': %s", name, archive_error_string(t->a));
	t->entries++;
	int64_t left = S_ISREG(st->st_mode) ? st->st_size : 0;
	while (left > 0) {
		ssize_t n = read(fd, buf, left < (int64_t)sizeof(buf) ? (size_t)left : sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return err_sys(t->err, n < 0 ? errno : EIO, "read '%s'", name);
		if (archive_write_data(t->a, buf, (size_t)n) != n)
			return err_set(t->err, COVE_EINTERNAL, "'%s': %s", name, archive_error_string(t->a));
		left -= n;
	}
	return 0;
}

/* An empty file or a folder of the layer (a whiteout, a made parent). */
static int tarw_mark(struct tarw *t, const char *name, mode_t mode)
{
	struct stat st = { .st_mode = mode };
	return tarw_add(t, name, &st, NULL, -1);
}

/* ---- COPY and ADD ---- */

struct copier {
	const struct build_fs *fs;
	const struct build_copy *c;
	struct tarw t;
	int ctx;   /* the context */
	int below; /* the tree below's rootfs, or -1 */
	uid_t uid;
	gid_t gid;
	struct cove_err *err;
};

/* path (relative) in the tree below, resolved as the image would. */
static bool below_stat(const struct copier *cp, const char *path, struct stat *st)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	if (cp->below < 0)
		return false;
	_cleanup_close_ int fd = io_openat2(cp->below, *path ? path : ".", &how);
	return fd >= 0 && fstat(fd, st) == 0;
}

/* The folders above name (relative) that the tree below lacks. */
static int add_parents(struct copier *cp, const char *name)
{
	char dir[PATH_MAX];
	struct stat st;
	for (const char *s = strchr(name, '/'); s; s = strchr(s + 1, '/')) {
		snprintf(dir, sizeof(dir), "%.*s", (int)(s - name), name);
		if (!below_stat(cp, dir, &st) && tarw_mark(&cp->t, dir, S_IFDIR | 0755) < 0)
			return -1;
	}
	return 0;
}

/* A file of the image's passwd or group text (or "" when it has none). */
static char *below_text(const struct copier *cp, const char *path, size_t *len)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	char *text = NULL;
	_cleanup_close_ int fd = cp->below < 0 ? -1 : io_openat2(cp->below, path, &how);
	if (fd < 0 || read_fd(fd, PASSWD_MAX, &text, len) < 0) {
		*len = 0;
		return strdup("");
	}
	return text;
}

static int group_lookup(const char *text, const char *name, gid_t *ret)
{
	size_t n = strlen(name);
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c2 && (size_t)(c1 - l) == n && strncmp(l, name, n) == 0) {
			*ret = (gid_t)strtoul(c2 + 1, NULL, 10);
			return 0;
		}
	}
	return -1;
}

/* --chown=USER[:GROUP]: numbers, or names in the image's own files. */
static int resolve_chown(struct copier *cp)
{
	const char *spec = cp->c->chown;
	char user[256], *group;
	size_t len;
	if (!spec)
		return 0;
	snprintf(user, sizeof(user), "%s", spec);
	if ((group = strchr(user, ':')))
		*group++ = '\0';
	_cleanup_free_ char *pw = below_text(cp, "etc/passwd", &len);
	struct passwd_entry e;
	if (!pw || passwd_lookup(pw, len, user, &e) < 0)
		return err_set(cp->err, COVE_EINVAL, "line %d: --chown: no user '%s' in the image", cp->c->line, user);
	cp->uid = e.uid;
	cp->gid = e.uid; /* as Docker: a user alone is its own number as the group too */
	if (group && strspn(group, "0123456789") == strlen(group) && *group) {
		cp->gid = (gid_t)strtoul(group, NULL, 10);
	} else if (group) {
		_cleanup_free_ char *gr = below_text(cp, "etc/group", &len);
		if (!gr || group_lookup(gr, group, &cp->gid) < 0)
			return err_set(cp->err, COVE_EINVAL, "line %d: --chown: no group '%s' in the image",
				       cp->c->line, group);
	}
	if (cp->uid >= 65536 || cp->gid >= 65536)
		return err_set(cp->err, COVE_EINVAL, "line %d: --chown: ids under 65536 only", cp->c->line);
	return 0;
}

static int copy_entry(struct copier *cp, const char *rel, const char *target, bool top);

static bool ignored(const struct copier *cp, const char *rel)
{
	return *rel && dockerignore_excluded(&cp->fs->ignore, rel);
}

/* What folder rel holds, sorted (the tar, and so the cache key, does not
 * depend on the order the context was unpacked in). */
static int copy_children(struct copier *cp, const char *rel, const char *target)
{
	_cleanup_close_ int fd = open_in(cp->ctx, rel, O_RDONLY | O_DIRECTORY);
	struct dirent **names = NULL;
	int n = fd < 0 ? -1 : scandirat(fd, ".", &names, NULL, alphasort), r = 0;
	if (n < 0)
		return err_sys(cp->err, errno, "read '%s' of the build context", rel);
	for (int i = 0; i < n; i++) {
		char crel[PATH_MAX], ctarget[PATH_MAX];
		const char *name = names[i]->d_name;
		if (r == 0 && strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
			snprintf(crel, sizeof(crel), "%s%s%s", rel, *rel ? "/" : "", name);
			snprintf(ctarget, sizeof(ctarget), "%s%s%s", target, *target ? "/" : "", name);
			r = copy_entry(cp, crel, ctarget, false);
		}
		free(names[i]);
	}
	free(names);
	return r;
}

/* ADD of a local tar: its entries under target, as the archive has them. */
static int add_archive(struct copier *cp, struct archive *in, const char *target)
{
	static __thread char buf[TAR_BUF];
	struct archive_entry *e;
	int h;
	while ((h = archive_read_next_header(in, &e)) == ARCHIVE_OK) {
		char clean[PATH_MAX], name[PATH_MAX * 2];
		const char *hl = archive_entry_hardlink(e);
		if (dockerfile_clean_path(archive_entry_pathname(e), clean, sizeof(clean)) < 0 || !clean[0])
			continue;
		snprintf(name, sizeof(name), "%s%s%s", target, *target ? "/" : "", clean);
		archive_entry_set_pathname(e, name);
		if (hl && dockerfile_clean_path(hl, clean, sizeof(clean)) == 0) {
			snprintf(name, sizeof(name), "%s%s%s", target, *target ? "/" : "", clean);
			archive_entry_set_hardlink(e, name);
		}
		if (archive_write_header(cp->t.a, e) < ARCHIVE_WARN)
			return err_set(cp->err, COVE_EINVAL, "line %d: ADD: %s", cp->c->line,
				       archive_error_string(cp->t.a));
		cp->t.entries++;
		la_ssize_t n;
		while ((n = archive_read_data(in, buf, sizeof(buf))) > 0)
			if (archive_write_data(cp->t.a, buf, (size_t)n) != n)
				return err_set(cp->err, COVE_EINTERNAL, "ADD: %s", archive_error_string(cp->t.a));
		if (n < 0)
			return err_set(cp->err, COVE_EINVAL, "line %d: ADD: %s", cp->c->line, archive_error_string(in));
	}
	return h == ARCHIVE_EOF
		       ? 0
		       : err_set(cp->err, COVE_EINVAL, "line %d: ADD: %s", cp->c->line, archive_error_string(in));
}

/* ADD of rel, a regular file: 1 when it was a tar (unpacked into
 * target_dir), 0 when it is not one. */
static int add_maybe_archive(struct copier *cp, const char *rel, const char *target_dir)
{
	_cleanup_close_ int fd = open_in(cp->ctx, rel, O_RDONLY);
	struct archive *in = archive_read_new();
	struct archive_entry *e;
	int r = 0;
	if (fd < 0 || !in || archive_read_support_filter_all(in) != ARCHIVE_OK ||
	    archive_read_support_format_tar(in) != ARCHIVE_OK || archive_read_open_fd(in, fd, TAR_BUF) != ARCHIVE_OK ||
	    archive_read_next_header(in, &e) != ARCHIVE_OK) {
		archive_read_free(in);
		return 0;
	}
	archive_read_free(in);
	in = archive_read_new();
	if (lseek(fd, 0, SEEK_SET) < 0 || !in || archive_read_support_filter_all(in) != ARCHIVE_OK ||
	    archive_read_support_format_tar(in) != ARCHIVE_OK || archive_read_open_fd(in, fd, TAR_BUF) != ARCHIVE_OK)
		r = err_set(cp->err, COVE_EINVAL, "line %d: ADD '%s': unreadable", cp->c->line, rel);
	char below_dest[PATH_MAX + 2];
	snprintf(below_dest, sizeof(below_dest), "%s%sx", target_dir, *target_dir ? "/" : "");
	if (r == 0 && (add_parents(cp, below_dest) < 0 || add_archive(cp, in, target_dir) < 0))
		r = -1;
	archive_read_free(in);
	return r < 0 ? -1 : 1;
}

/* rel of the context (a file, folder or symlink) as target; top: a
 * source itself, whose folder is dest (made only if missing). */
static int copy_entry(struct copier *cp, const char *rel, const char *target, bool top)
{
	struct stat st;
	if (ignored(cp, rel))
		return 0;
	_cleanup_close_ int fd = open_in(cp->ctx, rel, O_PATH);
	if (fd < 0 || fstat(fd, &st) < 0)
		return err_set(cp->err, COVE_EINVAL, "line %d: '%s' is not in the build context", cp->c->line, rel);
	struct stat below;
	char link[PATH_MAX];
	st.st_uid = cp->uid;
	st.st_gid = cp->gid;
	if (cp->c->chmod >= 0 && !S_ISLNK(st.st_mode))
		st.st_mode = (st.st_mode & S_IFMT) | (mode_t)cp->c->chmod;
	if (S_ISDIR(st.st_mode)) {
		st.st_mtime = 0; /* unpacking the context changed it: it would be a different tar each time */
		if ((!top || (*target && !below_stat(cp, target, &below))) && *target &&
		    tarw_add(&cp->t, target, &st, NULL, -1) < 0)
			return -1;
		return copy_children(cp, rel, target);
	}
	if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlinkat(fd, "", link, sizeof(link) - 1);
		if (n < 0)
			return err_sys(cp->err, errno, "readlink '%s'", rel);
		link[n] = '\0';
		return tarw_add(&cp->t, target, &st, link, -1);
	}
	if (!S_ISREG(st.st_mode))
		return 0;
	_cleanup_close_ int data = open_in(cp->ctx, rel, O_RDONLY);
	if (data < 0)
		return err_sys(cp->err, -data, "open '%s' of the build context", rel);
	return tarw_add(&cp->t, target, &st, NULL, data);
}

/* The names under rel that pattern matches (a folder's, not what it holds). */
static int glob_walk(struct copier *cp, const char *pattern, const char *rel, json_t *found, int depth)
{
	_cleanup_close_ int fd = open_in(cp->ctx, rel, O_RDONLY | O_DIRECTORY);
	struct dirent **names = NULL;
	int n = fd < 0 || depth > LAYER_DEPTH_MAX ? -1 : scandirat(fd, ".", &names, NULL, alphasort), r = 0;
	for (int i = 0; i < n; i++) {
		char crel[PATH_MAX];
		struct stat st;
		const char *name = names[i]->d_name;
		snprintf(crel, sizeof(crel), "%s%s%s", rel, *rel ? "/" : "", name);
		if (r < 0 || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || ignored(cp, crel)) {
			/* skipped */
		} else if (dockerfile_glob(pattern, crel)) {
			r = json_array_append_new(found, json_string(crel));
		} else if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
			r = glob_walk(cp, pattern, crel, found, depth + 1);
		}
		free(names[i]);
	}
	free(names);
	return r;
}

static int sources(struct copier *cp, json_t *out)
{
	for (size_t i = 0; i < cp->c->n_srcs; i++) {
		char clean[PATH_MAX];
		const char *src = cp->c->srcs[i];
		size_t before = json_array_size(out);
		if (dockerfile_clean_path(src, clean, sizeof(clean)) < 0)
			return err_set(cp->err, COVE_EINVAL, "line %d: '%s' is outside the build context", cp->c->line,
				       src);
		if (!strpbrk(clean, "*?[")) {
			if (ignored(cp, clean))
				return err_set(cp->err, COVE_EINVAL, "line %d: '%s' is excluded by .dockerignore",
					       cp->c->line, src);
			json_array_append_new(out, json_string(clean));
		} else if (glob_walk(cp, clean, "", out, 0) < 0 || json_array_size(out) == before) {
			return err_set(cp->err, COVE_EINVAL, "line %d: no file of the build context matches '%s'",
				       cp->c->line, src);
		}
	}
	return 0;
}

static int copy_sources(struct copier *cp, json_t *list)
{
	const char *dest = cp->c->dest + strspn(cp->c->dest, "/");
	struct stat st;
	bool dest_dir = cp->c->dest_dir || !*dest || json_array_size(list) > 1 ||
			(below_stat(cp, dest, &st) && S_ISDIR(st.st_mode));
	size_t i;
	json_t *v;
	json_array_foreach(list, i, v)
	{
		const char *rel = json_string_value(v), *base = strrchr(rel, '/');
		char target[PATH_MAX * 2];
		_cleanup_close_ int fd = open_in(cp->ctx, rel, O_PATH);
		if (fd < 0 || fstat(fd, &st) < 0)
			return err_set(cp->err, COVE_EINVAL, "line %d: '%s' is not in the build context", cp->c->line,
				       rel);
		if (S_ISDIR(st.st_mode)) {
			snprintf(target, sizeof(target), "%s", dest);
			if (add_parents(cp, target) < 0 || copy_entry(cp, rel, target, true) < 0)
				return -1;
			continue;
		}
		int r = cp->c->add && S_ISREG(st.st_mode) ? add_maybe_archive(cp, rel, dest) : 0;
		if (r < 0)
			return -1;
		if (r == 1)
			continue;
		if (dest_dir)
			snprintf(target, sizeof(target), "%s%s%s", dest, *dest ? "/" : "", base ? base + 1 : rel);
		else
			snprintf(target, sizeof(target), "%s", dest);
		if (add_parents(cp, target) < 0 || copy_entry(cp, rel, target, true) < 0)
			return -1;
	}
	return 0;
}

static int copier_open(struct copier *cp, const struct build_fs *fs, const struct build_copy *c, const char *below,
		       struct cove_err *err)
{
	char root[PATH_MAX + 8];
	*cp = (struct copier){ .fs = fs, .c = c, .ctx = -1, .below = -1, .err = err };
	cp->ctx = open(fs->context, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (cp->ctx < 0)
		return err_sys(err, errno, "open '%s'", fs->context);
	snprintf(root, sizeof(root), "%s/rootfs", below ? below : "");
	if (below && (cp->below = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return err_sys(err, errno, "open '%s'", root);
	return 0;
}

static void copier_close(struct copier *cp)
{
	tarw_free(&cp->t);
	if (cp->ctx >= 0)
		close(cp->ctx);
	if (cp->below >= 0)
		close(cp->below);
}

int build_fs_copy(const struct build_fs *fs, const struct build_copy *c, struct build_tar *ret, struct cove_err *err)
{
	struct copier cp;
	json_t *list = json_array();
	int r = !list ? err_set(err, COVE_EINTERNAL, "out of memory")
		: copier_open(&cp, fs, c, c->below, err) < 0 || resolve_chown(&cp) < 0 || sources(&cp, list) < 0 ||
				tarw_open(&cp.t, fs, err) < 0 || copy_sources(&cp, list) < 0
			? -1
			: tarw_close(&cp.t, ret);
	if (list)
		copier_close(&cp);
	json_decref(list);
	return r;
}

int build_fs_mkdir(const struct build_fs *fs, const char *path, const char *below, struct build_tar *ret,
		   struct cove_err *err)
{
	struct copier cp;
	struct build_copy c = { .chmod = -1 };
	char inside[PATH_MAX + 2];
	snprintf(inside, sizeof(inside), "%s/x", path + strspn(path, "/"));
	int r = copier_open(&cp, fs, &c, below, err) < 0 || tarw_open(&cp.t, fs, err) < 0 ||
				add_parents(&cp, inside) < 0
			? -1
			: 0;
	if (r == 0 && cp.t.entries == 0)
		ret->diff_id[0] = '\0';
	else if (r == 0)
		r = tarw_close(&cp.t, ret);
	copier_close(&cp);
	return r;
}

/* ---- RUN ---- */

/* Where a changed path is in the upper layers (upper: <subvol>/upper):
 * in root/, or with host layers, under /usr and /opt, in usr/ and opt/. */
static void upper_name(const char *path, bool host_layers, char out[PATH_MAX])
{
	size_t n = strcspn(path, "/");
	for (int i = 0; host_layers && runtime_host_layers[i]; i++)
		if (strlen(runtime_host_layers[i]) == n && strncmp(path, runtime_host_layers[i], n) == 0) {
			snprintf(out, PATH_MAX, "%s", path);
			return;
		}
	snprintf(out, PATH_MAX, "root/%s", path);
}

/* One changed path of the upper layers into the tar. */
static int add_upper(struct tarw *t, int upper, const char *path, bool host_layers)
{
	char name[PATH_MAX];
	upper_name(path, host_layers, name);
	const char *slash = strrchr(name, '/'), *leaf = slash ? slash + 1 : name;
	char dir[PATH_MAX], link[PATH_MAX];
	struct stat st;
	if (!slash)
		return 0; /* a host layer's top: its mount point, no change */
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - name), name);
	_cleanup_close_ int pfd = open_in(upper, dir, O_PATH | O_DIRECTORY);
	if (pfd < 0 || fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0; /* gone meanwhile */
	if (S_ISLNK(st.st_mode)) {
		ssize_t n = readlinkat(pfd, leaf, link, sizeof(link) - 1);
		if (n < 0)
			return err_sys(t->err, errno, "readlink '%s'", path);
		link[n] = '\0';
		return tarw_add(t, path, &st, link, -1);
	}
	if (S_ISDIR(st.st_mode))
		return tarw_add(t, path, &st, NULL, -1);
	if (!S_ISREG(st.st_mode))
		return 0; /* sockets, fifos, devices: not kept */
	_cleanup_close_ int fd = openat(pfd, leaf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? err_sys(t->err, errno, "open '%s'", path) : tarw_add(t, path, &st, NULL, fd);
}

/* "/a/b" deleted as "a/.wh.b", "/d" made opaque as "d/.wh..wh..opq". */
static int add_whiteouts(struct tarw *t, json_t *paths, bool opaque)
{
	size_t i;
	json_t *v;
	json_array_foreach(paths, i, v)
	{
		const char *p = json_string_value(v) + 1, *slash = strrchr(p, '/');
		char name[PATH_MAX + 16];
		if (opaque)
			snprintf(name, sizeof(name), "%s/.wh..wh..opq", p);
		else
			snprintf(name, sizeof(name), "%.*s%s.wh.%s", slash ? (int)(slash - p) : 0, p, slash ? "/" : "",
				 slash ? slash + 1 : p);
		if (tarw_mark(t, name, S_IFREG | 0644) < 0)
			return -1;
	}
	return 0;
}

int build_fs_changes(const struct build_fs *fs, const char *subvol, const char *image, bool host_layers,
		     struct build_tar *ret, struct cove_err *err)
{
	struct changes *c = NULL;
	struct tarw t = { 0 };
	char upper_path[PATH_MAX + 16], *path = NULL;
	size_t cap = 0;
	snprintf(upper_path, sizeof(upper_path), "%s/upper", subvol);
	if (changes_collect(subvol, image, host_layers, fs->dir, &c, err) < 0)
		return -1;
	int upper = open(upper_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	int dup_fd = fcntl(c->list_fd, F_DUPFD_CLOEXEC, 3);
	FILE *list = dup_fd >= 0 ? fdopen(dup_fd, "r") : NULL;
	int r = upper < 0 || !list ? err_sys(err, errno, "read the changes of '%s'", subvol) : tarw_open(&t, fs, err);
	while (r == 0 && getdelim(&path, &cap, '\0', list) > 0)
		r = add_upper(&t, upper, path, host_layers);
	if (r == 0)
		r = add_whiteouts(&t, c->deleted, false) < 0 || add_whiteouts(&t, c->opaque, true) < 0
			    ? -1
			    : tarw_close(&t, ret);
	tarw_free(&t);
	free(path);
	if (list)
		fclose(list);
	else if (dup_fd >= 0)
		close(dup_fd);
	if (upper >= 0)
		close(upper);
	changes_free(c);
	return r;
}

/* ---- layers ---- */

void build_chain_next(const char *parent, const char *diff_id, char out[DIGEST_STR_MAX])
{
	char buf[2 * DIGEST_STR_MAX + 2];
	if (!*parent) {
		snprintf(out, DIGEST_STR_MAX, "%s", diff_id);
		return;
	}
	snprintf(buf, sizeof(buf), "%s %s", parent, diff_id);
	digest_of(buf, strlen(buf), out);
}

/* tree made under the import lock unless it is there: the layer of
 * diff_id over below (or none), or with host_tree the host's first layer. */
static int layer_ensure(const struct build_fs *fs, const char *tree, const char *below, const char *diff_id,
			const char *host_tree, bool *made, struct cove_err *err)
{
	enum storage_driver drv = fs->store->pool->driver;
	*made = false;
	if (storage_is_tree(drv, tree) == 1)
		return 0;
	int lock = image_lock_imports(fs->store, err);
	if (lock < 0)
		return -1;
	int r = 0;
	if (storage_is_tree(drv, tree) != 1) {
		r = host_tree ? image_host_layer_make(fs->store, host_tree, tree, err)
			      : image_layer_make(fs->store, below, diff_id, diff_id, tree, err);
		*made = r == 0;
	}
	close(lock);
	return r;
}

int build_fs_commit(const struct build_fs *fs, const char *parent, const char *diff_id, char chain[DIGEST_STR_MAX],
		    bool *made, struct cove_err *err)
{
	char tree[PATH_MAX], below[PATH_MAX];
	build_chain_next(parent, diff_id, chain);
	image_layer_path(fs->store, chain, tree);
	if (*parent)
		image_layer_path(fs->store, parent, below);
	return layer_ensure(fs, tree, *parent ? below : NULL, diff_id, NULL, made, err);
}

int build_fs_host_base(const struct build_fs *fs, const char *host_tree, const char *chain, struct cove_err *err)
{
	char tree[PATH_MAX];
	bool made;
	image_layer_path(fs->store, chain, tree);
	return layer_ensure(fs, tree, NULL, NULL, host_tree, &made, err);
}

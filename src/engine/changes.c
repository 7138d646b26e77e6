/* A sandbox's changes from its upper layers (changes.h). */
#include "engine/changes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/io.h"
#include "sandbox/runtime.h"

#define CHANGES_MAX_DEPTH 256

struct walk {
	struct changes *c;
	FILE *list;
	bool host_layers;    /* /usr and /opt are layers of their own (upper/usr, upper/opt) */
	char path[PATH_MAX]; /* relative, of the directory being read */
};

/* name beneath dirfd, never through a symlink, never out of it. */
static int open_beneath(int dirfd, const char *name)
{
	struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
					   RESOLVE_NO_XDEV };
	return io_openat2(dirfd, name, &how);
}

static bool is_opaque(int fd)
{
	static const char *const names[] = { "trusted.overlay.opaque", "user.overlay.opaque" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char v[4];
		ssize_t n = fgetxattr(fd, names[i], v, sizeof(v));
		if (n == 1 && v[0] == 'y')
			return true;
	}
	return false;
}

/* At the top of the root layer: what is not the root overlay's own (the
 * pseudo file systems, and the host layers' mount points when it has them). */
static bool left_out(const struct walk *w, bool root_layer, const char *name)
{
	if (w->path[0])
		return false;
	if (strcmp(name, "dev") == 0 || strcmp(name, "proc") == 0 || strcmp(name, "sys") == 0)
		return true;
	for (int i = 0; root_layer && w->host_layers && runtime_host_layers[i]; i++)
		if (strcmp(name, runtime_host_layers[i]) == 0)
			return true;
	return false;
}

/* The files cove writes itself into a new sandbox (its name for itself:
 * sandboxes.c, write_identity; its resolver: network.c), which are not the
 * sandbox's work. */
static bool is_identity(const char *path)
{
	return strcmp(path, "etc/hostname") == 0 || strcmp(path, "etc/hosts") == 0 ||
	       strcmp(path, "etc/resolv.conf") == 0;
}

static int add_path(json_t *a, const char *path)
{
	char abs[PATH_MAX + 1];
	snprintf(abs, sizeof(abs), "/%s", path);
	return json_array_append_new(a, json_string(abs)) < 0 ? -ENOMEM : 0;
}

static int walk_dir(struct walk *w, int fd, int lower, int depth, bool root_layer);

/* A directory of the upper layer that is only the overlay's copy of the
 * image's (made when something beneath it changed): not opaque, and the
 * same kind, mode and owner as below. Its entry is no change; what it
 * holds may be. *ret_lower: the directory below, or -1. */
static bool copied_up(int lower, const char *name, const struct stat *st, bool opaque, int *ret_lower)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	struct stat below;
	*ret_lower = lower >= 0 && !opaque ? io_openat2(lower, name, &how) : -1;
	if (*ret_lower < 0 || fstat(*ret_lower, &below) < 0)
		return false;
	return below.st_mode == st->st_mode && below.st_uid == st->st_uid && below.st_gid == st->st_gid;
}

static int add_change(struct walk *w)
{
	w->c->entries++;
	return fwrite(w->path, 1, strlen(w->path) + 1, w->list) == strlen(w->path) + 1 ? 0 : -EIO;
}

/* A directory's entry (unless copied up), then what it holds. */
static int walk_subdir(struct walk *w, int dirfd, int lower, const char *name, const struct stat *st, int depth,
		       bool root_layer)
{
	int sub = open_beneath(dirfd, name), below = -1;
	bool opaque = sub >= 0 && is_opaque(sub);
	int r = opaque ? add_path(w->c->opaque, w->path) : 0;
	if (r == 0 && !copied_up(lower, name, st, opaque, &below))
		r = add_change(w);
	if (r == 0 && sub >= 0 && depth + 1 < CHANGES_MAX_DEPTH)
		r = walk_dir(w, TAKE_FD(sub), below, depth + 1, root_layer);
	if (sub >= 0)
		close(sub);
	if (below >= 0)
		close(below);
	return r;
}

/* One name of an upper layer: a deletion, or a change (and, for a
 * directory, what it holds). lower: the same directory in the layer below
 * (the image, or the host's), -1 if none. */
static int walk_entry(struct walk *w, int dirfd, int lower, const char *name, int depth, bool root_layer)
{
	struct stat st;
	size_t len = strlen(w->path);
	if (left_out(w, root_layer, name) || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (len + 1 + strlen(name) >= sizeof(w->path))
		return -ENAMETOOLONG;
	snprintf(w->path + len, sizeof(w->path) - len, "%s%s", len ? "/" : "", name);
	int r;
	if (S_ISCHR(st.st_mode) && st.st_rdev == 0)
		r = add_path(w->c->deleted, w->path);
	else if (S_ISDIR(st.st_mode))
		r = walk_subdir(w, dirfd, lower, name, &st, depth, root_layer);
	else
		r = is_identity(w->path) ? 0 : add_change(w);
	w->path[len] = '\0';
	return r;
}

/* Takes fd; lower is borrowed. */
static int walk_dir(struct walk *w, int fd, int lower, int depth, bool root_layer)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	struct dirent *de;
	int r = 0;
	while (r == 0 && (de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			r = walk_entry(w, dirfd(d), lower, de->d_name, depth, root_layer);
	closedir(d);
	return r;
}

/* upper/<layer> over lower, standing for /<prefix>. A layer not there
 * holds nothing. */
static int walk_layer(struct walk *w, int subvol, const char *layer, const char *lower, const char *prefix)
{
	char rel[64];
	snprintf(rel, sizeof(rel), "upper/%s", layer);
	int fd = open_beneath(subvol, rel);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return fd;
	_cleanup_close_ int below = open(lower, O_PATH | O_DIRECTORY | O_CLOEXEC);
	snprintf(w->path, sizeof(w->path), "%s", prefix);
	int r = walk_dir(w, fd, below, 0, !*prefix);
	w->path[0] = '\0';
	return r;
}

void changes_free(struct changes *c)
{
	if (!c)
		return;
	if (c->list_fd >= 0)
		close(c->list_fd);
	json_decref(c->deleted);
	json_decref(c->opaque);
	free(c);
}

static int collect(struct walk *w, const char *subvol, const char *image)
{
	char lower[PATH_MAX];
	_cleanup_close_ int fd = open(subvol, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	snprintf(lower, sizeof(lower), "%s/rootfs", image);
	int r = walk_layer(w, fd, "root", lower, "");
	for (int i = 0; r == 0 && w->host_layers && runtime_host_layers[i]; i++) {
		snprintf(lower, sizeof(lower), "/%s", runtime_host_layers[i]);
		r = walk_layer(w, fd, runtime_host_layers[i], lower, runtime_host_layers[i]);
	}
	return r;
}

int changes_collect(const char *subvol, const char *image, bool host_layers, const char *tmp_dir, struct changes **ret,
		    struct cove_err *err)
{
	struct changes *c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	c->deleted = json_array();
	c->opaque = json_array();
	c->list_fd = open(tmp_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	int dup_fd = c->list_fd >= 0 ? fcntl(c->list_fd, F_DUPFD_CLOEXEC, 3) : -1;
	struct walk w = { .c = c, .list = dup_fd >= 0 ? fdopen(dup_fd, "w") : NULL, .host_layers = host_layers };
	int r = !c->deleted || !c->opaque ? -ENOMEM : !w.list ? -errno : collect(&w, subvol, image);
	if (!w.list && dup_fd >= 0)
		close(dup_fd);
	if (w.list && fclose(w.list) != 0 && r == 0)
		r = -errno;
	if (r == 0 && lseek(c->list_fd, 0, SEEK_SET) < 0)
		r = -errno;
	if (r < 0) {
		changes_free(c);
		return err_sys(err, -r, "the changes of '%s'", subvol);
	}
	*ret = c;
	return 0;
}

char *changes_manifest(const struct changes *c)
{
	json_t *j = json_pack("{sOsO}", "deleted", c->deleted, "opaque", c->opaque);
	char *s = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
	json_decref(j);
	return s;
}

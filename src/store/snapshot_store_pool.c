/* The snapshot store in the pool (snapshot_store.h): <pool>/snapshots/<id>/
 * holding files/ and manifest.json. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/io.h"
#include "common/log.h"
#include "store/snapshot_store.h"
#include "sys/tree.h"

#define MANIFEST "manifest.json"

struct pool_store {
	struct snapshot_store base; /* first */
	enum storage_driver driver;
	char pool_dir[512];
	char dir[560]; /* <pool>/snapshots */
};

static struct pool_store *pool_of(struct snapshot_store *s)
{
	return (struct pool_store *)s;
}

static void entry_dir(struct pool_store *p, const char *id, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%s", p->dir, id);
}

static void pool_files_path(struct snapshot_store *s, const char *id, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%s/files", pool_of(s)->dir, id);
}

static int pool_begin(struct snapshot_store *s, const char *id, struct cove_err *err)
{
	char dir[600];
	entry_dir(pool_of(s), id, dir, sizeof(dir));
	return mkdir(dir, 0700) < 0 ? err_sys(err, errno, "mkdir '%s'", dir) : 0;
}

static int pool_manifest_create(struct snapshot_store *s, const char *id, const char *text, struct cove_err *err)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/%s/" MANIFEST, pool_of(s)->dir, id);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int r = fd < 0 ? -errno : io_write_all(fd, text, strlen(text));
	if (r == 0)
		return fd;
	if (fd >= 0)
		close(fd);
	return err_sys(err, -r, "write '%s'", path);
}

/* A manifest on disk is always whole: a synced temporary, renamed. */
static int pool_write_manifest(struct snapshot_store *s, const char *id, const char *text, struct cove_err *err)
{
	char dir[600], tmp[700], path[700];
	entry_dir(pool_of(s), id, dir, sizeof(dir));
	snprintf(tmp, sizeof(tmp), "%s/" MANIFEST ".tmp", dir);
	snprintf(path, sizeof(path), "%s/" MANIFEST, dir);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int r = fd < 0 ? -errno : io_write_all(fd, text, strlen(text));
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		return err_sys(err, -r, "write '%s'", path);
	_cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0)
		return err_sys(err, errno, "sync '%s'", dir);
	return 0;
}

static int pool_take(struct snapshot_store *s, const char *id, const char *root, struct cove_err *err)
{
	char files[700];
	pool_files_path(s, id, files, sizeof(files));
	int r = storage_snapshot(pool_of(s)->driver, root, files, true);
	return r < 0 ? err_sys(err, -r, "snapshot '%s' to '%s'", root, files) : 0;
}

/* On btrfs the files are on disk once the snapshot ioctl has returned: it
 * writes the source subvolume's dirty data out, then commits the
 * transaction that holds the snapshot, and (since Linux 5.7 dropped
 * BTRFS_SUBVOL_CREATE_ASYNC) always waits for that commit. A syncfs would
 * only add the rest of the pool (other sandboxes' dirty data) and a second
 * commit. The overlay driver's copy is plain writes: a syncfs of the pool. */
static int pool_files_durable(struct snapshot_store *s, struct cove_err *err)
{
	struct pool_store *p = pool_of(s);
	if (p->driver == STORAGE_BTRFS)
		return 0;
	_cleanup_close_ int fd = open(p->pool_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || syncfs(fd) < 0)
		return err_sys(err, errno, "sync the pool '%s'", p->pool_dir);
	return 0;
}

static bool pool_has_files(struct snapshot_store *s, const char *id)
{
	char path[700];
	pool_files_path(s, id, path, sizeof(path));
	return storage_is_tree(pool_of(s)->driver, path) == 1;
}

static bool pool_is_complete(struct snapshot_store *s, const char *id)
{
	char path[700];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s/" MANIFEST, pool_of(s)->dir, id);
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && pool_has_files(s, id);
}

/* The files tree, the manifest and its temporary, the directory. */
static int remove_dir(struct pool_store *p, const char *dir)
{
	char path[700];
	snprintf(path, sizeof(path), "%s/files", dir);
	int r = storage_delete(p->driver, path);
	if (r < 0 && r != -ENOENT && !(r == -EINVAL && rmdir(path) == 0))
		return r;
	/* A memory snapshot's images. Looked for first: tree_remove opens it,
	 * and an entry removed while coved is out of descriptors (a fork's
	 * failed copy) has none, and must still go. */
	snprintf(path, sizeof(path), "%s/criu", dir);
	r = access(path, F_OK) == 0 ? tree_remove(path) : -errno;
	if (r < 0 && r != -ENOENT)
		return r;
	snprintf(path, sizeof(path), "%s/" MANIFEST, dir);
	(void)unlink(path);
	snprintf(path, sizeof(path), "%s/" MANIFEST ".tmp", dir);
	(void)unlink(path);
	return rmdir(dir) < 0 && errno != ENOENT ? -errno : 0;
}

static int pool_remove(struct snapshot_store *s, const char *id)
{
	char dir[600];
	entry_dir(pool_of(s), id, dir, sizeof(dir));
	return remove_dir(pool_of(s), dir);
}

static void pool_sweep(struct snapshot_store *s, bool (*keep)(void *arg, const char *id), void *arg)
{
	struct pool_store *p = pool_of(s);
	DIR *dh = opendir(p->dir);
	struct dirent *e;
	char path[700];
	while (dh && (e = readdir(dh))) {
		if (e->d_name[0] == '.' || keep(arg, e->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", p->dir, e->d_name);
		int r = remove_dir(p, path);
		if (r < 0)
			log_error("delete '%s', an unfinished snapshot: %s", path, strerror(-r));
		else
			log_info("deleted '%s', an unfinished snapshot", path);
	}
	if (dh)
		closedir(dh);
}

static void pool_close(struct snapshot_store *s)
{
	free(s);
}

static const struct snapshot_store_ops pool_ops = {
	.begin = pool_begin,
	.manifest_create = pool_manifest_create,
	.write_manifest = pool_write_manifest,
	.take = pool_take,
	.files_durable = pool_files_durable,
	.files_path = pool_files_path,
	.has_files = pool_has_files,
	.is_complete = pool_is_complete,
	.remove = pool_remove,
	.sweep = pool_sweep,
	.close = pool_close,
};

int snapshot_store_pool_open(struct snapshot_store **ret, const char *pool_dir, enum storage_driver driver,
			     struct cove_err *err)
{
	struct pool_store *p = calloc(1, sizeof(*p));
	if (!p)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	p->base.ops = &pool_ops;
	p->driver = driver;
	snprintf(p->pool_dir, sizeof(p->pool_dir), "%s", pool_dir);
	snprintf(p->dir, sizeof(p->dir), "%s/snapshots", pool_dir);
	if (mkdir(p->dir, 0700) < 0 && errno != EEXIST) {
		int r = err_sys(err, errno, "mkdir '%s'", p->dir);
		free(p);
		return r;
	}
	*ret = &p->base;
	return 0;
}

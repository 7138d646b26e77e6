/* The engine's life: what it stands on, opened in order (engine.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/io.h"
#include "common/log.h"
#include "engine/disk.h"
#include "engine/engine.h"
#include "engine/images.h"
#include "engine/template.h"
#include "engine/network.h"
#include "image/host_image.h"
#include "store/snapshot_store.h"
#include "store/store.h"
#include "sys/seccomp.h"

/* A new pool file's size (less when the host has less room); it grows
 * while the host has room (disk.c). */
#define POOL_INITIAL (1ull << 30)

struct engine *engine_ctx;


/* cove-init runs from a sealed memfd: what the sandbox can reach through
 * /proc/1/exe is a private copy it cannot change, never the host's file. */
static int load_init(const char *path, struct cove_err *err)
{
	_cleanup_close_ int src = open(path, O_RDONLY | O_CLOEXEC);
	if (src < 0)
		return err_sys(err, errno, "open cove-init '%s'", path);
	int fd = memfd_create("cove-init", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return err_sys(err, errno, "memfd_create");
	char buf[65536];
	ssize_t n;
	while ((n = read(src, buf, sizeof(buf))) > 0)
		if (write(fd, buf, n) != n) {
			close(fd);
			return err_sys(err, errno, "copy cove-init");
		}
	/* F_SEAL_WRITE answers EBUSY while the kernel still holds a page of
	 * the copy (seen once on a restart right after a SIGKILL): it is tried
	 * again, briefly. */
	int sealed = -1;
	for (int i = 0; n >= 0 && sealed < 0 && i < 50; i++) {
		sealed = fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
		if (sealed < 0 && errno != EBUSY)
			break;
		if (sealed < 0)
			usleep(2000);
	}
	if (sealed < 0) {
		close(fd);
		return err_sys(err, errno, "seal cove-init");
	}
	return fd;
}

/* Whether the file at path holds exactly what fd (the memfd) holds. */
static bool same_content(const char *path, int fd)
{
	_cleanup_close_ int f = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	char a[65536], b[65536];
	ssize_t n, m;
	off_t off = 0;
	if (f < 0)
		return false;
	do {
		n = pread(fd, a, sizeof(a), off);
		m = pread(f, b, sizeof(b), off);
		if (n < 0 || n != m || memcmp(a, b, (size_t)n) != 0)
			return false;
		off += n;
	} while (n > 0);
	return true;
}

/* The file an isolated sandbox's cove-init runs from (runtime.h,
 * RUNTIME_INIT_PATH): <run>/cove-init, a root-owned read-only copy of the
 * memfd. Kept when it holds the same cove-init (running sandboxes' bind
 * mounts name it, and a memory snapshot's restore binds it by path), else
 * replaced whole (a new inode: running sandboxes keep theirs, but their
 * memory snapshots cannot be restored with another cove-init). */
static int write_init_file(struct engine *d, struct cove_err *err)
{
	char tmp[720];
	const char *path = d->init_file;
	snprintf(d->init_file, sizeof(d->init_file), "%s/cove-init", d->run_dir);
	if (same_content(path, d->init_exe_fd))
		return 0;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	(void)unlink(tmp);
	_cleanup_close_ int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0555);
	char buf[65536];
	ssize_t n = 0;
	for (off_t off = 0; out >= 0 && (n = pread(d->init_exe_fd, buf, sizeof(buf), off)) > 0; off += n)
		if (write(out, buf, (size_t)n) != n) {
			n = -1;
			break;
		}
	if (out < 0 || n < 0 || fsync(out) < 0 || rename(tmp, path) < 0)
		return err_sys(err, errno, "write '%s'", path);
	return 0;
}

int engine_open(struct engine *d, const char *init_path, struct cove_err *err)
{
	char path[1024];
	if (pool_open(&d->pool, d->data_dir, d->storage, POOL_INITIAL, err) < 0 || disk_open(d, err) < 0)
		return -1;
	if (d->pool.fallback)
		log_warn("coved: no btrfs pool can be had here (%s): the overlay storage driver is in use, "
			 "snapshots copy a sandbox's changes",
			 d->pool.fallback);
	if (host_image_ensure(&d->pool, d->host_image, err) < 0 || images_open(d, err) < 0)
		return -1;
	if (snapshot_store_pool_open(&d->snapshot_store, d->pool.dir, d->pool.driver, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/sandboxes", d->pool.dir);
	if (io_mkdir_p(path, 0700) < 0)
		return err_sys(err, errno, "mkdir '%s'", path);
	snprintf(d->run_dir, sizeof(d->run_dir), "%s/run", d->data_dir);
	if (io_mkdir_p(d->run_dir, 0700) < 0)
		return err_sys(err, errno, "mkdir '%s'", d->run_dir);
	if (cgroup_detect(&d->cgroups, "/sys/fs/cgroup", err) < 0)
		return -1;
	if ((d->init_exe_fd = load_init(init_path, err)) < 0 || write_init_file(d, err) < 0)
		return -1;
	int r = seccomp_compile_sandbox_filter(&d->seccomp);
	if (r < 0)
		return err_sys(err, -r, "compile the seccomp filter");
	if (network_open(d, d->subnet, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/state.db", d->data_dir);
	return store_sqlite_open(&d->store, path, err);
}

void engine_close(struct engine *d)
{
	events_close_all(d);
	disk_close(d);
	templates_close(d);
	images_close(d);
	network_close(d);
	store_close(d->store);
	d->store = NULL;
	if (d->snapshot_store)
		d->snapshot_store->ops->close(d->snapshot_store);
	d->snapshot_store = NULL;
}

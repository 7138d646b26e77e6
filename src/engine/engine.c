/* The engine's life: what it stands on, opened in order (engine.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/io.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/images.h"
#include "engine/template.h"
#include "engine/network.h"
#include "image/host_image.h"
#include "store/snapshot_store.h"
#include "store/store.h"
#include "sys/seccomp.h"

#define POOL_SIZE (256ull << 30) /* sparse: only what is written takes space */

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

int engine_open(struct engine *d, const char *init_path, struct cove_err *err)
{
	char path[1024];
	if (pool_open(&d->pool, d->data_dir, d->storage, POOL_SIZE, err) < 0)
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
	if ((d->init_exe_fd = load_init(init_path, err)) < 0)
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
	templates_close(d);
	images_close(d);
	network_close(d);
	store_close(d->store);
	d->store = NULL;
	if (d->snapshot_store)
		d->snapshot_store->ops->close(d->snapshot_store);
	d->snapshot_store = NULL;
}

/* Disk: each sandbox's limit (a btrfs simple quota on its subvolume), and
 * the pool held to what the host's disk has (sys/pool_size.c).
 *
 * Simple quotas charge an extent to the subvolume that wrote it first, so
 * a sandbox's figure is what it wrote itself: a restore or a fork starts
 * at 0 over what it shares with its source, and a snapshot costs nothing
 * (full qgroups would make each one walk the shared extents). A new
 * subvolume, a snapshot's included, has no limit of its own: every create,
 * restore and fork sets it (disk_limit_apply), and the spec keeps it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/log.h"
#include "engine/disk.h"
#include "engine/engine.h"
#include "sys/btrfs.h"

#define POOL_MAX (1ull << 40)  /* 1 TiB: the most a pool grows to */
#define POOL_CHECK_MS 50 /* how often the pool's free space is looked at (a statvfs, a sysfs read): a writer at 1 GB/s uses 50 MB between two looks, well inside the headroom */
#define DISK_MIN (16ull << 20) /* the smallest limit: an empty root takes some */

static void subvol_of(const struct engine *d, const char *id, char *buf, size_t n)
{
	snprintf(buf, n, "%s/sandboxes/%s", d->pool.dir, id);
}

int disk_check(const struct engine *d, struct sandbox_spec *spec, bool asked, struct cove_err *err)
{
	if (asked && !d->pool.quotas)
		return err_set(err, COVE_EINVAL, "'disk' cannot be limited here: %s (see GET /v1/capabilities)",
			       d->pool.no_quotas);
	if (asked && spec->disk < DISK_MIN)
		return err_set(err, COVE_EINVAL, "'disk' must be at least 16M");
	if (!d->pool.quotas)
		spec->disk = 0;
	else if (!spec->disk)
		spec->disk = d->default_disk;
	return 0;
}

int disk_limit_set(const struct engine *d, const char *id, uint64_t bytes, struct cove_err *err)
{
	char subvol[600];
	if (!d->pool.quotas)
		return 0;
	subvol_of(d, id, subvol, sizeof(subvol));
	int r = btrfs_qgroup_limit(subvol, bytes);
	return r < 0 ? err_sys(err, -r, "limit the disk of '%s'", subvol) : 0;
}

int disk_limit_apply(const struct engine *d, const struct sandbox *sb, struct cove_err *err)
{
	return disk_limit_set(d, sb->id, sb->spec.disk, err);
}

int disk_usage(const struct engine *d, const struct sandbox *sb, uint64_t *ret_used)
{
	char subvol[600];
	if (!d->pool.quotas)
		return -EOPNOTSUPP;
	subvol_of(d, sb->id, subvol, sizeof(subvol));
	return btrfs_qgroup_usage(subvol, ret_used, NULL);
}

/* Grow the pool when it runs short, and say once when it cannot. */
static void pool_check(struct engine *d)
{
	struct cove_err err = { 0 };
	struct pool_growth g;
	uint64_t reserved = 0;
	if (d->pool_reserved_fd >= 0)
		(void)btrfs_data_reserved(d->pool_reserved_fd, &reserved);
	if (pool_grow(&d->pool, POOL_MAX, reserved, &g, &err) < 0) {
		log_error("coved: pool: %s", err.msg);
		return;
	}
	if (g.grown)
		log_info("coved: pool grown by %llu MiB to %llu MiB (the host's disk has %llu MiB more free)",
			 (unsigned long long)(g.grown >> 20), (unsigned long long)(g.size >> 20),
			 (unsigned long long)((g.host_avail - g.grown) >> 20));
	if (g.stuck && !d->pool_stuck)
		log_warn("coved: the pool (%llu MiB, %llu MiB free) cannot grow: the host's disk has %llu MiB "
			 "free and keeps %llu MiB for itself; sandboxes' writes will fail with ENOSPC when the pool "
			 "is full, the host's disk stays as it is",
			 (unsigned long long)(g.size >> 20), (unsigned long long)(g.free >> 20),
			 (unsigned long long)(g.host_avail >> 20), (unsigned long long)(g.host_reserve >> 20));
	d->pool_stuck = g.stuck;
}

static void on_pool_check(evutil_socket_t fd, short what, void *arg)
{
	pool_check(arg);
}

int disk_open(struct engine *d, struct cove_err *err)
{
	d->pool_reserved_fd = -1;
	pool_quotas(&d->pool, !d->no_disk_quota);
	if (!d->pool.quotas)
		log_info("coved: no disk limits: %s", d->pool.no_quotas);
	if (!d->pool.loop_backed)
		return 0;
	uint64_t missing;
	int r = pool_fill(&d->pool, &missing);
	if (r < 0)
		log_error("coved: pool '%s': %s", d->pool.img, strerror(-r));
	else if (missing)
		log_warn("coved: '%s' is sparse, and %llu MiB of it have no space on the host's disk, which has not "
			 "that much room: sandboxes may fill the host's disk (move the data root to a larger disk)",
			 d->pool.img, (unsigned long long)(missing >> 20));
	/* A coved that died between a growth's allocation and its resize
	 * left the file larger than the file system: it takes it now. */
	if ((r = pool_take_new_size(&d->pool)) < 0)
		log_error("coved: resize the pool at '%s': %s", d->pool.dir, strerror(-r));
	d->pool_reserved_fd = btrfs_data_reserved_open(d->pool.dir);
	pool_check(d);
	d->pool_ev = event_new(d->base, -1, EV_PERSIST, on_pool_check, d);
	struct timeval tv = { 0, POOL_CHECK_MS * 1000 };
	if (!d->pool_ev || event_add(d->pool_ev, &tv) < 0)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	return 0;
}

void disk_close(struct engine *d)
{
	/* pool_ev: a loop-backed pool's, which opened pool_reserved_fd. */
	if (!d->pool_ev)
		return;
	event_free(d->pool_ev);
	d->pool_ev = NULL;
	if (d->pool_reserved_fd >= 0)
		close(d->pool_reserved_fd);
	d->pool_reserved_fd = -1;
}

json_t *disk_capabilities_json(const struct engine *d)
{
	json_t *j = json_pack("{s:b, s:I}", "limits", d->pool.quotas, "default",
			      (json_int_t)(d->pool.quotas ? d->default_disk : 0));
	json_object_set_new(j, "reason", d->pool.quotas ? json_null() : json_string(d->pool.no_quotas));
	/* The pool: how large, how much is left, and whether the host's disk
	 * stopped its growth (its sandboxes' writes fail when it is full). */
	struct statvfs sv;
	struct stat st;
	bool known = statvfs(d->pool.dir, &sv) == 0;
	json_object_set_new(j, "pool_bytes",
			    d->pool.loop_backed && stat(d->pool.img, &st) == 0 ? json_integer((json_int_t)st.st_size)
			    : known ? json_integer((json_int_t)(sv.f_blocks * sv.f_frsize))
				    : json_null());
	json_object_set_new(j, "pool_free_bytes",
			    known ? json_integer((json_int_t)(sv.f_bavail * sv.f_frsize)) : json_null());
	json_object_set_new(j, "pool_cannot_grow", json_boolean(d->pool_stuck));
	return j;
}

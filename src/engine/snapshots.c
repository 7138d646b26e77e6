/* Snapshots of sandboxes, restores and forks.
 *
 * A sandbox's subvolume holds only its own changes over a shared read-only
 * image, so a snapshot is one read-only subvolume snapshot of it plus its
 * spec (which names the image):
 *
 *   <pool>/snapshots/<id>/files          read-only snapshot of the sandbox's subvolume
 *   <pool>/snapshots/<id>/manifest.json  id, sandbox, name, image_dir, created_at, spec
 *
 * and a row in state.db. A snapshot is listed from its row on.
 *
 * wait_durable (snapshot_create) lists it once it is on disk whole, with
 * as few syncs as that takes (each one flushes the pool's disk, which costs
 * milliseconds here): the manifest written to its place; the subvolume
 * snapshot (atomic: whole or absent), whose btrfs transaction commit makes
 * the files, the directory and the manifest's name durable (the overlay
 * driver's copy gets a syncfs instead); the manifest's data synced; then the
 * row, durable = 1, with whatever rows go with it (a checkpoint's), in one
 * transaction committed with a WAL sync. Until that commit nothing of it is
 * listed, and a crash leaves a directory without a row.
 *
 * snapshot_create_nowait answers right after the subvolume snapshot and
 * its row (durable = 0) and has a worker thread write the manifest (synced,
 * renamed into place, its directory synced), the row being marked durable
 * back on the loop.
 *
 * After a crash, the start finishes what it finds: a directory without a
 * row is the rest of a snapshot never listed and is deleted; a row not
 * durable whose files are there is made durable (or dropped if that
 * fails), one whose files are gone is dropped; a durable row whose files or
 * manifest are gone is dropped. So nothing is ever listed durable that is
 * not, and nothing half made is listed at all. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/io.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/parse.h"
#include "engine/engine.h"
#include "engine/memsnap.h"
#include "sys/criu.h"
#include "engine/template.h"
#include "store/store.h"
#include "store/snapshot_store.h"
#include "sys/storage.h"

/* A fork with memory restores this many copies at once: their criu
 * overlap their waits (on the disk, on each other's notifications). */
#define FORK_PARALLEL 4



struct snapshot *snapshot_find(struct engine *d, const char *id)
{
	if (!snapshot_id_valid(id))
		return NULL;
	for (struct snapshot *sn = d->snapshots; sn; sn = sn->next)
		if (strcmp(sn->id, id) == 0)
			return sn;
	return NULL;
}

static void snapshot_free(struct snapshot *sn)
{
	if (!sn)
		return;
	json_decref(sn->spec);
	free(sn);
}

static void list_append(struct engine *d, struct snapshot *sn)
{
	struct snapshot **p = &d->snapshots;
	while (*p)
		p = &(*p)->next;
	*p = sn;
}

static void list_remove(struct engine *d, struct snapshot *sn)
{
	for (struct snapshot **p = &d->snapshots; *p; p = &(*p)->next)
		if (*p == sn) {
			*p = sn->next;
			return;
		}
}

json_t *snapshot_to_json(const struct snapshot *sn)
{
	return json_pack("{s:s, s:s, s:s, s:I, s:b, s:s, s:O, s:b, s:I}", "id", sn->id, "sandbox", sn->sandbox, "name",
			 sn->name, "created_at", (json_int_t)sn->created_at, "durable", sn->durable, "image_dir",
			 sn->image_dir, "spec", sn->spec, "memory", sn->memory, "memory_bytes",
			 (json_int_t)sn->memory_bytes);
}

static double mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void snapshot_criu_dir(const struct engine *d, const char *id, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/snapshots/%s/criu", d->pool.dir, id);
}

/* Whether sn has images (a memory snapshot: its row is committed only
 * once they are whole on disk), and their size. */
static void set_memory_bytes(const struct engine *d, struct snapshot *sn)
{
	char dir[700], inv[720];
	snapshot_criu_dir(d, sn->id, dir, sizeof(dir));
	snprintf(inv, sizeof(inv), "%s/inventory.img", dir);
	sn->memory = access(inv, F_OK) == 0;
	sn->memory_bytes = sn->memory ? criu_images_size(dir) : 0;
}

/* A memory snapshot's images on disk: the subvolume snapshot's commit
 * does not carry the data of files outside the subvolume. */
static int images_durable(const struct engine *d, const struct snapshot *sn, struct cove_err *err)
{
	char dir[700];
	if (!sn->memory)
		return 0;
	snapshot_criu_dir(d, sn->id, dir, sizeof(dir));
	double t0 = mono_ms();
	int r = memsnap_sync(dir, err);
	log_debug("snapshot %s: images synced in %.1f ms", sn->id, mono_ms() - t0);
	return r;
}

/* Snapshot sb's subvolume read-only as snapshot id's files, with its
 * processes frozen for that instant, so that the copy is what they had
 * written at one point in time (no write half in, no file ahead of
 * another). The sandbox is thawed whatever happens. On failure there is
 * no files. */
static int freeze_and_snapshot(struct engine *d, struct sandbox *sb, const char *id, bool memory, struct cove_err *err)
{
	char subvol[600], images[700];
	snprintf(subvol, sizeof(subvol), "%s/sandboxes/%s", d->pool.dir, sb->id);
	snapshot_criu_dir(d, id, images, sizeof(images));
	double t[6] = { mono_ms() };
	if (memory && (memsnap_check(d, sb, err) < 0 || sandbox_init_detach(sb, err) < 0))
		return -1;
	/* A sandbox whose init is gone has nothing running to freeze. */
	bool frozen = sb->state == SB_RUNNING;
	t[1] = mono_ms();
	int r = frozen ? cgroup_freeze(&d->cgroups, sb->id, true, err) : 0;
	t[2] = mono_ms();
	if (r == 0 && memory)
		r = memsnap_dump(d, sb, images, err);
	t[3] = mono_ms();
	if (r == 0)
		r = d->snapshot_store->ops->take(d->snapshot_store, id, subvol, err);
	t[4] = mono_ms();
	struct cove_err thaw = { 0 };
	if (frozen && cgroup_freeze(&d->cgroups, sb->id, false, &thaw) < 0 &&
	    cgroup_freeze(&d->cgroups, sb->id, false, &thaw) < 0)
		log_error("sandbox %s: after a snapshot: %s", sb->id, thaw.msg);
	if (memory && sb->state == SB_RUNNING && sandbox_init_reattach(d, sb, &thaw) < 0)
		log_error("sandbox %s: after a memory snapshot: %s", sb->id, thaw.msg);
	t[5] = mono_ms();
	log_debug("sandbox %s: snapshot %s: detach %.1f, freeze %.1f, dump %.1f, files %.1f, thaw+attach %.1f ms",
		  sb->id, id, t[1] - t[0], t[2] - t[1], t[3] - t[2], t[4] - t[3], t[5] - t[4]);
	return r;
}

static int64_t now_unix_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Files, then manifest, on disk, for a snapshot taken without its
 * manifest. A worker thread may run it: the snapshot store's calls read
 * nothing but their arguments. */
static int persist(struct snapshot_store *st, const char *id, const char *manifest, struct cove_err *err)
{
	return st->ops->files_durable(st, err) < 0 || st->ops->write_manifest(st, id, manifest, err) < 0 ? -1 : 0;
}

/* What the manifest holds: the snapshot as the API shows it, less the
 * flag (a manifest in place means durable files). */
static char *manifest_text(const struct snapshot *sn)
{
	json_t *m = snapshot_to_json(sn);
	json_object_del(m, "durable");
	char *text = m ? json_dumps(m, JSON_INDENT(2)) : NULL;
	json_decref(m);
	return text;
}

/* The commit point: the row says durable. */
static int mark_durable(struct engine *d, struct snapshot *sn, struct cove_err *err)
{
	if (store_set_snapshot_durable(d->store, sn->id, err) < 0)
		return -1;
	sn->durable = true;
	return 0;
}

/* The durable step, on the loop. */
static int make_durable(struct engine *d, struct snapshot *sn, struct cove_err *err)
{
	_cleanup_free_ char *text = manifest_text(sn);
	if (!text)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	return persist(d->snapshot_store, sn->id, text, err) < 0 || mark_durable(d, sn, err) < 0 ? -1 : 0;
}

/* Its row, durable as sn->durable says. */
static int put_row(struct engine *d, const struct snapshot *sn, struct cove_err *err)
{
	_cleanup_free_ char *spec = json_dumps(sn->spec, JSON_COMPACT);
	struct store_snapshot row = { .id = sn->id,
				      .sandbox = sn->sandbox,
				      .name = sn->name,
				      .image_dir = sn->image_dir,
				      .created_at = sn->created_at,
				      .spec = spec,
				      .durable = sn->durable };
	if (!spec)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	return store_put_snapshot(d->store, &row, err);
}

/* A snapshot of sb as it is now, not taken yet (not listed), and its
 * entry in the snapshot store, made here: NULL with err on failure, with
 * nothing made. */
static struct snapshot *snapshot_begin(struct engine *d, struct sandbox *sb, const char *name, bool memory,
				       struct cove_err *err)
{
	if (sandbox_ready(sb, err) < 0)
		return NULL;
	struct snapshot *sn = calloc(1, sizeof(*sn));
	if (!sn || snapshot_id_new(sn->id) < 0) {
		free(sn);
		err_set(err, COVE_EINTERNAL, "out of memory");
		return NULL;
	}
	snprintf(sn->sandbox, sizeof(sn->sandbox), "%s", sb->id);
	snprintf(sn->name, sizeof(sn->name), "%s", name ? name : "");
	snprintf(sn->image_dir, sizeof(sn->image_dir), "%s", sb->spec.image_dir);
	sn->created_at = now_unix_ms();
	sn->memory = memory;
	sn->spec = sandbox_spec_to_json(&sb->spec);
	if (!sn->spec) {
		snapshot_free(sn);
		err_set(err, COVE_EINTERNAL, "out of memory");
		return NULL;
	}
	if (d->snapshot_store->ops->begin(d->snapshot_store, sn->id, err) < 0) {
		snapshot_free(sn);
		return NULL;
	}
	return sn;
}

/* snapshot_create_nowait's first step: the subvolume snapshot and its row,
 * durable = 0. Listed from here on. */
static int take(struct engine *d, struct sandbox *sb, const char *name, bool memory, struct snapshot **ret,
		struct cove_err *err)
{
	struct snapshot *sn = snapshot_begin(d, sb, name, memory, err);
	if (!sn)
		return -1;
	/* A memory snapshot's images are synced by the durable step: a start
	 * drops a memory snapshot that is not durable (see snapshots_load). */
	int r = freeze_and_snapshot(d, sb, sn->id, memory, err);
	if (r == 0)
		set_memory_bytes(d, sn);
	if (r < 0 || put_row(d, sn, err) < 0) {
		(void)d->snapshot_store->ops->remove(d->snapshot_store, sn->id);
		snapshot_free(sn);
		return -1;
	}
	list_append(d, sn);
	*ret = sn;
	return 0;
}

/* A snapshot that could not be made durable, when its caller is told so:
 * nothing of it stays. */
static void discard(struct engine *d, struct snapshot *sn)
{
	struct cove_err e = { 0 };
	if (snapshot_delete(d, sn, &e) < 0)
		log_error("snapshot %s: %s (the next start deals with it)", sn->id, e.msg);
}

/* sn's row, durable, and what rows() adds, in one transaction committed
 * with a WAL sync: the commit point of a wait_durable snapshot. */
static int put_durable_row(struct engine *d, struct snapshot *sn, snapshot_rows_fn rows, void *arg,
			   struct cove_err *err)
{
	if (store_begin_durable(d->store, err) < 0)
		return -1;
	sn->durable = true;
	if (put_row(d, sn, err) < 0 || (rows && rows(d, sn, arg, err) < 0)) {
		store_rollback(d->store);
		return -1;
	}
	return store_commit(d->store, err);
}


/* After the files: on btrfs the manifest's inode and name were committed
 * with them, so this fsync only logs its data (a log tree write, where
 * syncing it before the files, a new file in a new directory, can cost a
 * whole transaction commit). */
static int manifest_sync(int fd, const char *id, struct cove_err *err)
{
	return fsync(fd) < 0 ? err_sys(err, errno, "sync snapshot %s's manifest", id) : 0;
}

int snapshot_create_mem(struct engine *d, struct sandbox *sb, const char *name, bool memory, snapshot_rows_fn rows,
			void *arg, struct snapshot **ret, struct cove_err *err)
{
	struct snapshot_store *st = d->snapshot_store;
	struct snapshot *sn = snapshot_begin(d, sb, name, memory, err);
	if (!sn)
		return -1;
	/* The manifest is written after the dump: it counts the images. */
	_cleanup_close_ int mfd = -1;
	if (freeze_and_snapshot(d, sb, sn->id, memory, err) == 0) {
		set_memory_bytes(d, sn);
		_cleanup_free_ char *text = manifest_text(sn);
		mfd = text ? st->ops->manifest_create(st, sn->id, text, err)
			   : err_set(err, COVE_EINTERNAL, "out of memory");
	}
	double t0 = mono_ms();
	if (mfd < 0 || st->ops->files_durable(st, err) < 0 || images_durable(d, sn, err) < 0 ||
	    manifest_sync(mfd, sn->id, err) < 0 || put_durable_row(d, sn, rows, arg, err) < 0) {
		(void)st->ops->remove(st, sn->id);
		snapshot_free(sn);
		return -1;
	}
	list_append(d, sn);
	log_debug("snapshot %s: durable (files, images, manifest, row) in %.1f ms", sn->id, mono_ms() - t0);
	log_info("sandbox %s: snapshot %s taken", sb->id, sn->id);
	*ret = sn;
	return 0;
}

int snapshot_create_with(struct engine *d, struct sandbox *sb, const char *name, snapshot_rows_fn rows, void *arg,
			 struct snapshot **ret, struct cove_err *err)
{
	return snapshot_create_mem(d, sb, name, false, rows, arg, ret, err);
}

int snapshot_create(struct engine *d, struct sandbox *sb, const char *name, struct snapshot **ret, struct cove_err *err)
{
	return snapshot_create_with(d, sb, name, NULL, NULL, ret, err);
}

/* The durable step of snapshot_create_nowait: persist() on a worker
 * thread, with copies of what it needs; then, on the loop, the row. */
struct durable_job {
	struct snapshot *sn; /* the loop's: the thread never touches it */
	bool deleted;        /* snapshot_delete ran meanwhile: the directory goes here */
	struct snapshot_store *store;
	char id[16];
	char images[700]; /* a memory snapshot's images, synced here; else "" */
	char *manifest;
	int r;
	struct cove_err err;
};

static void durable_work(void *arg)
{
	struct durable_job *j = arg;
	j->r = j->images[0] && memsnap_sync(j->images, &j->err) < 0 ? -1
								   : persist(j->store, j->id, j->manifest, &j->err);
}

static void durable_done(void *arg)
{
	struct durable_job *j = arg;
	struct engine *d = engine_ctx;
	struct snapshot *sn = j->sn;
	sn->job = NULL;
	if (j->deleted) {
		int r = j->store->ops->remove(j->store, j->id);
		if (r < 0)
			log_error("snapshot %s: delete: %s (the next start tries again)", sn->id, strerror(-r));
		snapshot_free(sn);
	} else if (j->r < 0 || mark_durable(d, sn, &j->err) < 0) {
		/* Listed, not durable: the next start tries again or drops it. */
		log_error("snapshot %s: not made durable: %s", sn->id, j->err.msg);
	} else {
		log_debug("snapshot %s: durable", sn->id);
	}
	free(j->manifest);
	free(j);
	sandboxes_stop_if_idle(d);
}

int snapshot_create_nowait(struct engine *d, struct sandbox *sb, const char *name, bool memory, struct snapshot **ret,
			   struct cove_err *err)
{
	struct snapshot *sn;
	if (take(d, sb, name, memory, &sn, err) < 0)
		return -1;
	struct durable_job *j = calloc(1, sizeof(*j));
	if (!j || !(j->manifest = manifest_text(sn))) {
		free(j);
		discard(d, sn);
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	j->sn = sn;
	j->store = d->snapshot_store;
	snprintf(j->id, sizeof(j->id), "%s", sn->id);
	if (sn->memory)
		snapshot_criu_dir(d, sn->id, j->images, sizeof(j->images));
	if (worker_start(d->base, durable_work, durable_done, j, err) < 0) {
		free(j->manifest);
		free(j);
		discard(d, sn);
		return -1;
	}
	sn->job = j;
	log_info("sandbox %s: snapshot %s taken (durable in the background)", sb->id, sn->id);
	*ret = sn;
	return 0;
}

/* The row goes first: from then on the snapshot is gone from the API and
 * from the next start's view, which deletes whatever files are left. */
int snapshot_delete(struct engine *d, struct snapshot *sn, struct cove_err *err)
{
	if (history_check_unused(d, sn->id, err) < 0 || templates_check_snapshot_unused(d, sn->id, err) < 0)
		return -1;
	if (store_delete_snapshot(d->store, sn->id, err) < 0)
		return -1;
	list_remove(d, sn);
	/* A worker thread still writes into its entry: its job removes it. */
	if (sn->job) {
		sn->job->deleted = true;
		return 0;
	}
	int r = d->snapshot_store->ops->remove(d->snapshot_store, sn->id);
	if (r < 0)
		log_error("snapshot %s: delete: %s (the next start tries again)", sn->id, strerror(-r));
	snapshot_free(sn);
	return 0;
}

/* The spec of a restore of sn: its own, with overrides' (may be NULL). */
static int restore_spec(const struct snapshot *sn, const struct sandbox_spec *overrides, struct sandbox_spec *spec,
			struct cove_err *err)
{
	_cleanup_free_ char *text = json_dumps(sn->spec, JSON_COMPACT);
	*spec = (struct sandbox_spec){ 0 };
	if (!text || sandbox_spec_from_json(text, spec) < 0)
		return err_set(err, COVE_EINTERNAL, "snapshot %s: unreadable spec", sn->id);
	/* The files are only meaningful over the image they were made on. */
	snprintf(spec->image_dir, sizeof(spec->image_dir), "%s", sn->image_dir);
	if (overrides && overrides->name[0])
		snprintf(spec->name, sizeof(spec->name), "%s", overrides->name);
	if (overrides && overrides->memory)
		spec->memory = overrides->memory;
	if (overrides && overrides->cpu_millis)
		spec->cpu_millis = overrides->cpu_millis;
	if (overrides && overrides->pids)
		spec->pids = overrides->pids;
	if (overrides && overrides->disk)
		spec->disk = overrides->disk;
	if (overrides && overrides->env && json_object_update(spec->env, overrides->env) < 0)
		return sandbox_spec_free(spec), err_set(err, COVE_EINTERNAL, "out of memory");
	if (overrides && overrides->metadata) {
		json_decref(spec->metadata);
		spec->metadata = json_deep_copy(overrides->metadata);
	}
	return 0;
}

int snapshot_restore(struct engine *d, const struct snapshot *sn, const struct sandbox_spec *overrides,
		     struct sandbox **ret, struct cove_err *err)
{
	struct sandbox_spec spec;
	if (restore_spec(sn, overrides, &spec, err) < 0)
		return -1;
	char files[700], images[700];
	d->snapshot_store->ops->files_path(d->snapshot_store, sn->id, files, sizeof(files));
	snapshot_criu_dir(d, sn->id, images, sizeof(images));
	if (sn->memory && memsnap_check(d, NULL, err) < 0) {
		sandbox_spec_free(&spec);
		return -1;
	}
	/* A memory snapshot's processes are restored, not started. */
	d->mem_from = sn->memory ? images : NULL;
	int r = sandbox_create(d, &spec, files, ret, err);
	d->mem_from = NULL;
	sandbox_spec_free(&spec);
	return r;
}

/* Delete the roots ids[from..to), taken for a fork's copies. */
static void delete_roots(struct engine *d, char (*ids)[16], int from, int to)
{
	char path[600];
	for (int i = from; i < to; i++) {
		snprintf(path, sizeof(path), "%s/sandboxes/%s", d->pool.dir, ids[i]);
		int r = storage_delete(d->pool.driver, path);
		if (r < 0)
			log_error("fork: delete '%s': %s (the next start tries again)", path, strerror(-r));
	}
}

/* One copy's root, taken on a thread of its own. A btrfs snapshot holds
 * its destination directory locked until its transaction is committed, so
 * snapshots into one directory take a commit each, one after the other;
 * into directories of their own they run at once and share commits. So
 * each is taken into an entry of the snapshot store of its own, as its
 * files (what a crash leaves there is swept at the next start, as an
 * unfinished snapshot's is), then renamed to <pool>/sandboxes/<id> (a root
 * without a row, which the next start deletes). It reads nothing but its
 * job. */
struct root_job {
	enum storage_driver driver;
	struct snapshot_store *store;
	const char *from;
	char sid[16];   /* the store's entry */
	char root[600]; /* <pool>/sandboxes/<id> */
	pthread_t thread;
	int r;
};

static void *take_root_work(void *arg)
{
	struct root_job *j = arg;
	char files[700];
	j->store->ops->files_path(j->store, j->sid, files, sizeof(files));
	j->r = storage_snapshot(j->driver, j->from, files, false);
	if (j->r == 0 && rename(files, j->root) < 0)
		j->r = -errno;
	(void)j->store->ops->remove(j->store, j->sid);
	return NULL;
}

/* The copies' roots: count writable snapshots of sb's subvolume, all taken
 * in one frozen instant, into ids' roots. Snapshots of the live subvolume,
 * not of a read-only snapshot of it, which would cost one commit more. On
 * failure none is left. */
static int take_roots(struct engine *d, struct sandbox *sb, char (*ids)[16], int count, struct cove_err *err)
{
	char subvol[600];
	snprintf(subvol, sizeof(subvol), "%s/sandboxes/%s", d->pool.dir, sb->id);
	struct root_job *jobs = calloc((size_t)count, sizeof(*jobs));
	if (!jobs)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	bool frozen = sb->state == SB_RUNNING;
	if (frozen && cgroup_freeze(&d->cgroups, sb->id, true, err) < 0) {
		(void)cgroup_freeze(&d->cgroups, sb->id, false, NULL);
		free(jobs);
		return -1;
	}
	int started = 0, r = 0;
	for (; started < count; started++) {
		struct root_job *j = &jobs[started];
		if (sandbox_id_new(ids[started]) < 0 || snapshot_id_new(j->sid) < 0) {
			r = err_set(err, COVE_EINTERNAL, "no random bytes");
			break;
		}
		j->driver = d->pool.driver;
		j->store = d->snapshot_store;
		j->from = subvol;
		snprintf(j->root, sizeof(j->root), "%s/sandboxes/%s", d->pool.dir, ids[started]);
		if (j->store->ops->begin(j->store, j->sid, err) < 0) {
			r = -1;
			break;
		}
		int e = pthread_create(&j->thread, NULL, take_root_work, j);
		if (e != 0) {
			(void)j->store->ops->remove(j->store, j->sid);
			r = err_sys(err, e, "start a thread");
			break;
		}
	}
	for (int i = 0; i < started; i++)
		(void)pthread_join(jobs[i].thread, NULL);
	struct cove_err thaw = { 0 };
	if (frozen && cgroup_freeze(&d->cgroups, sb->id, false, &thaw) < 0 &&
	    cgroup_freeze(&d->cgroups, sb->id, false, &thaw) < 0)
		log_error("sandbox %s: after a fork: %s", sb->id, thaw.msg);
	for (int i = 0; i < started && r == 0; i++)
		if (jobs[i].r < 0)
			r = err_sys(err, -jobs[i].r, "snapshot '%s' to '%s'", subvol, jobs[i].root);
	if (r < 0)
		for (int i = 0; i < started; i++)
			if (jobs[i].r == 0)
				delete_roots(d, ids, i, i + 1);
	free(jobs);
	return r < 0 ? -1 : 0;
}

/* The copies' roots are taken first, in one frozen instant; a crash leaves
 * roots without rows, which the next start deletes. The copies' rows are
 * one transaction, committed once all copies run: a crash before that
 * leaves copies without rows, which the next start removes (their
 * processes with them), so a fork is all or nothing across a crash too. */

/* A fork with memory: one memory snapshot of sb, never listed (no row: a
 * crash leaves an entry the next start sweeps), restored count times, then
 * deleted. The copies' rows commit together, as a fork's do. */
static int fork_memory(struct engine *d, struct sandbox *sb, int count, struct sandbox **ret, struct cove_err *err)
{
	if (memsnap_check(d, sb, err) < 0)
		return -1;
	struct snapshot *sn = snapshot_begin(d, sb, "", true, err);
	if (!sn)
		return -1;
	struct sandbox_spec spec = { 0 };
	char files[700], images[700];
	d->snapshot_store->ops->files_path(d->snapshot_store, sn->id, files, sizeof(files));
	snapshot_criu_dir(d, sn->id, images, sizeof(images));
	int made = 0, r = freeze_and_snapshot(d, sb, sn->id, true, err);
	bool in_tx = false;
	if (r == 0)
		set_memory_bytes(d, sn);
	if (r == 0)
		r = restore_spec(sn, NULL, &spec, err);
	if (r == 0)
		in_tx = (r = store_begin(d->store, err)) == 0;
	/* The copies are restored FORK_PARALLEL at a time: their criu run at
	 * once (memsnap_restore_begin). A batch that fails leaves none of its
	 * own. */
	d->mem_from = images;
	while (r == 0 && made < count) {
		int n = count - made < FORK_PARALLEL ? count - made : FORK_PARALLEL;
		if ((r = sandboxes_create_taken(d, &spec, files, NULL, n, ret + made, err)) == 0)
			made += n;
	}
	d->mem_from = NULL;
	/* The copies' rows commit together; a failed fork's copies go below. */
	if (in_tx && store_commit(d->store, r == 0 ? err : NULL) < 0 && r == 0)
		r = -1;
	sandbox_spec_free(&spec);
	for (int i = 0; r < 0 && i < made; i++)
		(void)sandbox_delete(d, ret[i], NULL);
	(void)d->snapshot_store->ops->remove(d->snapshot_store, sn->id);
	snapshot_free(sn);
	return r;
}

int sandbox_fork(struct engine *d, struct sandbox *sb, int count, bool memory, struct sandbox **ret,
		 struct cove_err *err)
{
	if (memory)
		return fork_memory(d, sb, count, ret, err);
	char subvol[600];
	double t0 = mono_ms();
	char(*ids)[16] = calloc((size_t)count, sizeof(*ids));
	if (!ids)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	if (sandbox_ready(sb, err) < 0) {
		free(ids);
		return -1;
	}
	snprintf(subvol, sizeof(subvol), "%s/sandboxes/%s", d->pool.dir, sb->id);
	if (take_roots(d, sb, ids, count, err) < 0) {
		free(ids);
		return -1;
	}
	if (store_begin(d->store, err) < 0) {
		delete_roots(d, ids, 0, count);
		free(ids);
		return -1;
	}
	double t1 = mono_ms();
	bool ok = sandboxes_create_taken(d, &sb->spec, subvol, ids, count, ret, err) == 0;
	free(ids);
	double t2 = mono_ms();
	/* The copies, or their deletions. A commit that fails wrote none of
	 * the copies' rows: they go as a failed fork's do. */
	if (store_commit(d->store, ok ? err : NULL) < 0 && ok) {
		ok = false;
		for (int i = 0; i < count; i++)
			(void)sandbox_delete(d, ret[i], NULL);
	}
	log_debug("sandbox %s: fork into %d: roots %.2f ms, copies %.2f ms, commit %.2f ms", sb->id, count, t1 - t0,
		  t2 - t1, mono_ms() - t2);
	if (ok)
		histogram_observe(&d->metrics.fork, (mono_ms() - t0) / 1e3);
	return ok ? 0 : -1;
}

struct load_ctx {
	struct engine *d;
	int bad;          /* rows that could not be read */
	char (*drop)[16]; /* rows whose snapshot is not whole on disk */
	size_t ndrop;
};

static void load_one(void *arg, const struct store_snapshot *row)
{
	struct load_ctx *ctx = arg;
	struct engine *d = ctx->d;
	struct snapshot *sn = calloc(1, sizeof(*sn));
	if (!sn || !snapshot_id_valid(row->id) || !row->sandbox || !row->name || !row->image_dir || !row->spec ||
	    !(sn->spec = json_loads(row->spec, 0, NULL))) {
		log_error("state.db: bad snapshot row '%s'", row->id ? row->id : "");
		snapshot_free(sn);
		ctx->bad++;
		return;
	}
	snprintf(sn->id, sizeof(sn->id), "%s", row->id);
	snprintf(sn->sandbox, sizeof(sn->sandbox), "%s", row->sandbox);
	snprintf(sn->name, sizeof(sn->name), "%s", row->name);
	snprintf(sn->image_dir, sizeof(sn->image_dir), "%s", row->image_dir);
	sn->created_at = row->created_at;
	sn->durable = row->durable;
	set_memory_bytes(d, sn);
	/* A durable row is kept only when its files and manifest are there. */
	struct snapshot_store *st = d->snapshot_store;
	if (sn->durable ? st->ops->is_complete(st, sn->id) : st->ops->has_files(st, sn->id)) {
		list_append(d, sn);
		return;
	}
	/* Dropped after the walk: its statement is still reading the rows. */
	char(*more)[16] = realloc(ctx->drop, (ctx->ndrop + 1) * sizeof(*more));
	if (more) {
		ctx->drop = more;
		memcpy(ctx->drop[ctx->ndrop++], sn->id, sizeof(sn->id));
	}
	snapshot_free(sn);
}

/* What sweep keeps: a loaded snapshot, and whatever is no snapshot's. */
static bool is_loaded(void *arg, const char *id)
{
	return !snapshot_id_valid(id) || snapshot_find(arg, id);
}

int snapshots_load(struct engine *d, struct cove_err *err)
{
	struct load_ctx ctx = { .d = d };
	int r = store_each_snapshot(d->store, load_one, &ctx, err);
	for (size_t i = 0; r == 0 && i < ctx.ndrop; i++) {
		log_warn("snapshot %s: its files or manifest are missing: dropped", ctx.drop[i]);
		r = store_delete_snapshot(d->store, ctx.drop[i], err);
	}
	free(ctx.drop);
	if (r < 0)
		return -1;
	/* Taken, not durable yet when coved died: the files are whole (a
	 * subvolume snapshot is atomic), so the rest is done now, before
	 * anything is served. */
	for (struct snapshot *sn = d->snapshots, *next; sn; sn = next) {
		struct cove_err e = { 0 };
		next = sn->next;
		if (sn->durable)
			continue;
		/* Its images may not have reached the disk whole, and nothing in
		 * them would tell: it goes (a memory snapshot's durable step syncs
		 * them first). */
		if (sn->memory) {
			log_warn("snapshot %s: a memory snapshot not durable when coved died: dropped", sn->id);
			if (snapshot_delete(d, sn, err) < 0)
				return -1;
			continue;
		}
		if (make_durable(d, sn, &e) == 0) {
			log_info("snapshot %s: made durable at start", sn->id);
			continue;
		}
		log_error("snapshot %s: cannot be made durable: %s: dropped", sn->id, e.msg);
		if (snapshot_delete(d, sn, err) < 0)
			return -1;
	}
	/* Entries that no loaded snapshot names: a snapshot or fork
	 * interrupted before its row, a delete interrupted after it. An
	 * unreadable row may own one: then nothing is swept. */
	if (ctx.bad == 0)
		d->snapshot_store->ops->sweep(d->snapshot_store, is_loaded, d);
	return ctx.bad;
}

/* An archive with memory (memarchive.h): the sandbox's processes dumped
 * with CRIU as a memory snapshot's are (memsnap.c), but into
 * <pool>/archives/<id> (beside the pool's sandboxes/<id>, outside the
 * subvolume: its disk limit does not count them, its file snapshots do
 * not carry them), and restored in place by its wake (lifecycle.c).
 *
 * The order makes a crash anywhere safe (lifecycle.c records the state
 * after the images are committed, before the processes are ended):
 *   dump into <id>.part, sync it, rename to <id>, sync archives/ (commit)
 *   record "archived"                   → the next start ends what runs
 *   end the processes (still frozen since the dump: nothing they do after
 *   the dump reaches the files)
 * and for the wake:
 *   record "running", restore, record its init, remove the images.
 * A start (memarchive_on_loaded) reads the row with the images: archived
 * with images is an archive with memory; running or paused with a live
 * init, images that were not (or no longer) needed; running or paused
 * with no live init, a wake (or an archive just committed) that a crash
 * cut short: archived again, the next wake restores the images. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/parse.h"
#include "engine/engine.h"
#include "engine/memarchive.h"
#include "engine/memsnap.h"
#include "sys/tree.h"

static void archives_path(const struct engine *d, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/archives", d->pool.dir);
}

void memarchive_dir(const struct engine *d, const char *id, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/archives/%s", d->pool.dir, id);
}

bool memarchive_has(const struct engine *d, const char *id)
{
	char dir[700];
	struct stat st;
	memarchive_dir(d, id, dir, sizeof(dir));
	return stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

int memarchive_wanted(const struct engine *d, const struct sandbox *sb, int mode, char *note, size_t cap,
		      struct cove_err *err)
{
	struct cove_err why = { 0 };
	if (mode == ARCHIVE_MEMORY_NO) {
		snprintf(note, cap, "not asked for (\"memory\": false)");
		return 0;
	}
	if (!d->native_snapshot || sb->spec.external) {
		/* memsnap_check says why, as a memory snapshot's 409 does (its
		 * state is looked at last). */
		(void)memsnap_check(d, sb, &why);
		snprintf(note, cap, "%s", why.msg);
		if (mode == ARCHIVE_MEMORY_YES) {
			*err = why;
			return -1;
		}
		return 0;
	}
	/* Stopped: its init died, nothing runs. Running or paused: more than
	 * cove-init in its cgroup. */
	bool running = sb->state == SB_RUNNING || sb->state == SB_PAUSED;
	if (!running || sb->init_pid <= 0 || cgroup_count_procs(&d->cgroups, sb->id) <= 1) {
		snprintf(note, cap, "nothing ran in it but cove-init");
		return 0;
	}
	return 1;
}

static int sync_dir(const char *dir, struct cove_err *err)
{
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		return err_sys(err, errno, "sync '%s'", dir);
	return 0;
}

/* Back to what sb was before memarchive_save: thawed (unless paused), its
 * cove-init connected again. */
static void resume(struct engine *d, struct sandbox *sb, bool was_paused)
{
	struct cove_err e = { 0 };
	if (cgroup_freeze(&d->cgroups, sb->id, was_paused, &e) < 0)
		log_error("sandbox %s: after an archive's dump: %s", sb->id, e.msg);
	memset(&e, 0, sizeof(e));
	if (sb->conn_fd < 0 && sandbox_init_reattach(d, sb, &e) < 0)
		log_error("sandbox %s: after an archive's dump: %s", sb->id, e.msg);
}

/* The images in part, whole on disk, renamed to dir: the commit. */
static int commit(struct engine *d, const char *part, const char *dir, struct cove_err *err)
{
	char parent[600];
	archives_path(d, parent, sizeof(parent));
	if (memsnap_sync(part, err) < 0)
		return -1;
	if (rename(part, dir) < 0)
		return err_sys(err, errno, "rename '%s'", part);
	return sync_dir(parent, err);
}

int memarchive_save(struct engine *d, struct sandbox *sb, struct cove_err *err)
{
	char parent[600], dir[700], part[720];
	archives_path(d, parent, sizeof(parent));
	memarchive_dir(d, sb->id, dir, sizeof(dir));
	snprintf(part, sizeof(part), "%s.part", dir);
	if (mkdir(parent, 0700) < 0 && errno != EEXIST)
		return err_sys(err, errno, "mkdir '%s'", parent);
	memarchive_drop(d, sb->id);
	bool paused = sb->state == SB_PAUSED;
	/* cove-init closes its end of the connection only if it runs. */
	if (paused && cgroup_freeze(&d->cgroups, sb->id, false, err) < 0)
		return -1;
	int r = sandbox_init_detach(sb, err);
	if (r == 0)
		r = cgroup_freeze(&d->cgroups, sb->id, true, err);
	if (r == 0)
		r = memsnap_dump(d, sb, part, err);
	if (r == 0)
		r = commit(d, part, dir, err);
	if (r < 0) {
		memarchive_drop(d, sb->id);
		resume(d, sb, paused);
		return -1;
	}
	return 0;
}

void memarchive_undo(struct engine *d, struct sandbox *sb, bool was_paused)
{
	memarchive_drop(d, sb->id);
	resume(d, sb, was_paused);
}

void memarchive_drop(const struct engine *d, const char *id)
{
	char dir[700], part[720];
	memarchive_dir(d, id, dir, sizeof(dir));
	snprintf(part, sizeof(part), "%s.part", dir);
	int r = tree_remove(part);
	if (r < 0 && r != -ENOENT)
		log_error("sandbox %s: remove '%s': %s", id, part, strerror(-r));
	r = tree_remove(dir);
	if (r < 0 && r != -ENOENT)
		log_error("sandbox %s: remove '%s': %s", id, dir, strerror(-r));
}

bool memarchive_on_loaded(struct engine *d, struct sandbox *sb, bool alive)
{
	if (!memarchive_has(d, sb->id))
		return false;
	if (alive) {
		log_info("sandbox %s: its processes run: the images of an archive not recorded (or of a wake "
			 "recorded) go",
			 sb->id);
		memarchive_drop(d, sb->id);
		return false;
	}
	struct cove_err err = { 0 };
	log_warn("sandbox %s: a wake from its archive with memory was cut short: archived again (the next "
		 "wake restores its processes)",
		 sb->id);
	sb->state = SB_ARCHIVED;
	sb->mem_kept = true;
	if (sandbox_save(d, sb, &err) < 0)
		log_error("sandbox %s: %s", sb->id, err.msg);
	return true;
}

void memarchive_sweep(struct engine *d)
{
	char parent[600];
	archives_path(d, parent, sizeof(parent));
	DIR *dh = opendir(parent);
	struct dirent *e;
	while (dh && (e = readdir(dh))) {
		if (e->d_name[0] == '.')
			continue;
		char id[16] = "";
		size_t n = strcspn(e->d_name, ".");
		if (n < sizeof(id))
			memcpy(id, e->d_name, n);
		bool part = e->d_name[n] != '\0';
		struct sandbox *sb = sandbox_id_valid(id) ? sandbox_find(d, id) : NULL;
		if (!part && sb && sb->state == SB_ARCHIVED)
			continue;
		char path[900];
		snprintf(path, sizeof(path), "%s/%s", parent, e->d_name);
		int r = tree_remove(path);
		if (r == -ENOTDIR)
			r = unlink(path) < 0 ? -errno : 0;
		if (r < 0 && r != -ENOENT)
			log_error("remove '%s': %s", path, strerror(-r));
		else
			log_info("removed '%s': %s", path,
				 part ? "an archive's images cut short" : "no archived sandbox has them");
	}
	if (dh)
		closedir(dh);
}

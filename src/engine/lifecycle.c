/* A sandbox's lifecycle: pause, resume, archive, wake, reboot, and the
 * gate every operation that needs a sandbox goes through (lifecycle.h).
 *
 * Each transition is recorded first (the row's state, state_changed_at,
 * state_reason), then made, then announced on the event stream. A coved
 * killed between the record and the deed leaves a row that the next start
 * makes true (sandboxes_load, lifecycle_on_loaded): a paused row is frozen,
 * an archived one's processes and cgroups are removed, a running one whose
 * init is gone is booted. A deed that fails is recorded back. Files are
 * never touched by any of them: they stay in the sandbox's subvolume. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/files.h"
#include "engine/memarchive.h"
#include "engine/memsnap.h"
#include "engine/network.h"
#include "engine/process.h"
#include "engine/template.h"
#include "engine/watch.h"

static const char *const state_names[] = {
	[SB_STOPPED] = "stopped", [SB_RUNNING] = "running",   [SB_DELETING] = "deleting",
	[SB_PAUSED] = "paused",   [SB_ARCHIVED] = "archived",
};
static const char *const reason_names[] = { "user", "request", "idle", "timeout", "slots" };
static const char *const on_timeout_names[] = { "delete", "pause", "archive" };

const char *sandbox_state_name(int state)
{
	return state >= 0 && (size_t)state < ARRAY_SIZE(state_names) ? state_names[state] : "stopped";
}

const char *sandbox_reason_name(int reason)
{
	return reason >= 0 && (size_t)reason < ARRAY_SIZE(reason_names) ? reason_names[reason] : "user";
}

int sandbox_reason_parse(const char *name)
{
	for (size_t i = 0; name && i < ARRAY_SIZE(reason_names); i++)
		if (strcmp(name, reason_names[i]) == 0)
			return (int)i;
	return SB_REASON_USER;
}

const char *sandbox_on_timeout_name(int on_timeout)
{
	return on_timeout >= 0 && (size_t)on_timeout < ARRAY_SIZE(on_timeout_names) ? on_timeout_names[on_timeout]
										    : "delete";
}

int sandbox_on_timeout_parse(const char *name)
{
	for (size_t i = 0; name && i < ARRAY_SIZE(on_timeout_names); i++)
		if (strcmp(name, on_timeout_names[i]) == 0)
			return (int)i;
	return -1;
}

int64_t lifecycle_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* What record changed, to put back. */
struct was {
	enum sandbox_state state;
	int reason;
	int64_t at;
};

/* Record sb as state for why, before it is made so. On failure nothing
 * changed. */
static int record(struct engine *d, struct sandbox *sb, enum sandbox_state state, enum sandbox_reason why,
		  struct was *was, struct cove_err *err)
{
	*was = (struct was){ sb->state, sb->state_reason, sb->state_changed_at };
	sb->state = state;
	sb->state_reason = (int)why;
	sb->state_changed_at = sandbox_now_ms();
	if (sandbox_save(d, sb, err) < 0) {
		sb->state = was->state;
		sb->state_reason = was->reason;
		sb->state_changed_at = was->at;
		return -1;
	}
	return 0;
}

/* The deed failed: the row says what is true again. */
static void unrecord(struct engine *d, struct sandbox *sb, const struct was *was)
{
	struct cove_err err = { 0 };
	sb->state = was->state;
	sb->state_reason = was->reason;
	sb->state_changed_at = was->at;
	if (sandbox_save(d, sb, &err) < 0)
		log_error("sandbox %s: %s", sb->id, err.msg);
}

/* The transition is made: announce it, arm the timer of the new state. */
static void done(struct engine *d, struct sandbox *sb, enum sandbox_state from)
{
	events_emit(d, sb, (int)from);
	idle_arm(d, sb);
}

static int refuse(const struct sandbox *sb, const char *what, struct cove_err *err)
{
	return err_set(err, COVE_ESTATE, "cannot %s sandbox %s: it is %s", what, sb->id, sandbox_state_name(sb->state));
}

/* End every process of sb and release its cgroups and network; its files
 * stay. The row forgets the init first: a restart from here on must not
 * attach to an init that is dying. Every process gets its SIGKILL at once
 * (a frozen sandbox too: the kill thaws it), so none runs again before the
 * network's rules go; the kernel tears them down meanwhile, and the init's
 * pidfd turns readable once all of them are gone (a pid 1 dies last). */
static int halt(struct engine *d, struct sandbox *sb, const char *why, struct cove_err *err)
{
	pid_t pid = sb->init_pid;
	int64_t t0 = lifecycle_mono_ms();
	exec_abort_all(sb, why);
	files_abort_all(sb, why);
	procs_abort_all(sb);
	watch_abort_all(sb, why);
	launch_abort(sb, why);
	sb->init_pid = 0;
	sb->init_start = 0;
	if (pid > 0)
		(void)sandbox_save(d, sb, NULL);
	(void)cgroup_kill(&d->cgroups, sb->id);
	network_release(d, sb);
	int64_t t1 = lifecycle_mono_ms();
	if (sb->init_pidfd >= 0) {
		struct pollfd p = { sb->init_pidfd, POLLIN, 0 };
		(void)poll(&p, 1, 5000);
	}
	int64_t t2 = lifecycle_mono_ms();
	sandbox_detach(sb);
	int r = cgroup_destroy(&d->cgroups, sb->id, 5000, err);
	log_debug("sandbox %s: halt: kill and network %" PRId64 " ms, the rest's end %" PRId64 " ms, cgroups %" PRId64
		  " ms",
		  sb->id, t1 - t0, t2 - t1, lifecycle_mono_ms() - t2);
	return r;
}

/* cove-init on sb's files again, with a network: new addresses from the
 * pool (an archived sandbox gave its own back, and another coved of the
 * host may hold them now), recorded before init runs with them so that a
 * restart attaches to what it has; the policy is the spec's. On failure
 * nothing of it runs. */
static int start(struct engine *d, struct sandbox *sb, const char *images, struct cove_err *err)
{
	if (network_prepare(d, sb, false, NULL, err) < 0)
		return -1;
	/* With images, cove-init and its processes are restored from them
	 * (memsnap_restore), not started. */
	d->mem_from = images;
	int r = sandbox_save(d, sb, err) < 0 ? -1 : sandbox_boot(d, sb, err);
	d->mem_from = NULL;
	if (r < 0) {
		network_release(d, sb);
		return -1;
	}
	if (network_attach(d, sb, false, err) < 0) {
		(void)halt(d, sb, "its start failed", NULL);
		return -1;
	}
	return 0;
}

/* Pause (frozen) or resume: running and paused differ by the freezer only. */
static int set_frozen(struct engine *d, struct sandbox *sb, bool frozen, enum sandbox_reason why, struct cove_err *err)
{
	struct was was;
	if (sb->state != (frozen ? SB_RUNNING : SB_PAUSED))
		return refuse(sb, frozen ? "pause" : "resume", err);
	if (record(d, sb, frozen ? SB_PAUSED : SB_RUNNING, why, &was, err) < 0)
		return -1;
	if (cgroup_freeze(&d->cgroups, sb->id, frozen, err) < 0) {
		(void)cgroup_freeze(&d->cgroups, sb->id, !frozen, NULL);
		unrecord(d, sb, &was);
		return -1;
	}
	if (!frozen)
		sb->last_active = lifecycle_mono_ms();
	done(d, sb, was.state);
	return 0;
}

int engine_sandbox_pause(struct engine *d, struct sandbox *sb, enum sandbox_reason why, struct cove_err *err)
{
	return set_frozen(d, sb, true, why, err);
}

int engine_sandbox_resume(struct engine *d, struct sandbox *sb, enum sandbox_reason why, struct cove_err *err)
{
	return set_frozen(d, sb, false, why, err);
}

/* The memory of sb's processes into its archive's images, as mode says:
 * 1 saved (sb frozen and detached until halt ends it), 0 not (note says
 * why), -1 a 409 for an explicit memory: true (nothing changed). */
static int save_memory(struct engine *d, struct sandbox *sb, enum archive_memory mode, char *note, size_t cap,
		       struct cove_err *err)
{
	int want = memarchive_wanted(d, sb, (int)mode, note, cap, err);
	if (want <= 0)
		return want;
	struct cove_err e = { 0 };
	int64_t t0 = lifecycle_mono_ms();
	if (memarchive_save(d, sb, &e) == 0) {
		log_debug("sandbox %s: archive: its processes dumped in %" PRId64 " ms", sb->id,
			  lifecycle_mono_ms() - t0);
		note[0] = '\0';
		return 1;
	}
	if (mode == ARCHIVE_MEMORY_YES) {
		*err = e;
		return -1;
	}
	/* Archived all the same: the slot freed, the files kept come first. */
	log_warn("sandbox %s: archived without its processes' memory: %s", sb->id, e.msg);
	snprintf(note, cap, "%s", e.msg);
	return 0;
}

int engine_sandbox_archive_mem(struct engine *d, struct sandbox *sb, enum sandbox_reason why, enum archive_memory mem,
			       struct cove_err *err)
{
	struct was was;
	struct cove_err later = { 0 };
	char note[sizeof(sb->mem_note)] = "";
	if (sb->state != SB_RUNNING && sb->state != SB_PAUSED && sb->state != SB_STOPPED)
		return refuse(sb, "archive", err);
	bool paused = sb->state == SB_PAUSED;
	int kept = save_memory(d, sb, mem, note, sizeof(note), err);
	if (kept < 0)
		return -1;
	/* With images committed: recorded, the next start restores them at the
	 * wake; not recorded, they go (memarchive_on_loaded). */
	if (record(d, sb, SB_ARCHIVED, why, &was, err) < 0) {
		if (kept)
			memarchive_undo(d, sb, paused);
		return -1;
	}
	/* Recorded: whatever is left of its processes now is the next start's
	 * to remove (lifecycle_on_loaded), never to boot. */
	if (halt(d, sb, "sandbox archived", &later) < 0)
		log_error("sandbox %s: archive: %s (the next start finishes it)", sb->id, later.msg);
	memset(&later, 0, sizeof(later));
	if (sandbox_save(d, sb, &later) < 0)
		log_error("sandbox %s: %s", sb->id, later.msg);
	sb->mem_kept = kept;
	snprintf(sb->mem_note, sizeof(sb->mem_note), "%s", note);
	done(d, sb, was.state);
	return 0;
}

int engine_sandbox_archive(struct engine *d, struct sandbox *sb, enum sandbox_reason why, struct cove_err *err)
{
	return engine_sandbox_archive_mem(d, sb, why, ARCHIVE_MEMORY_AUTO, err);
}

/* A launch's output whose only reader is the log. */
struct relaunch {
	struct output out;
	char id[16];
};

static void relaunch_write(struct output *o, const struct out_event *ev)
{
}

static void relaunch_close(struct output *o, const struct cove_err *err)
{
	struct relaunch *r = (struct relaunch *)o;
	if (err)
		log_warn("sandbox %s: its start command, again: %s", r->id, err->msg);
	free(r);
}

static const struct output_ops relaunch_ops = { .write = relaunch_write, .close = relaunch_close };

/* A new init runs: its pid recorded (without it the next start would boot
 * another), the change announced, and its start command (template.h) run
 * again as its create ran it; the request that woke it does not wait for
 * its readiness. */
static void started(struct engine *d, struct sandbox *sb, enum sandbox_state from, bool restored)
{
	struct cove_err later = { 0 };
	if (sandbox_save(d, sb, &later) < 0)
		log_error("sandbox %s: %s", sb->id, later.msg);
	sb->last_active = sb->last_used = lifecycle_mono_ms();
	done(d, sb, from);
	/* Restored, its start command runs on where it was. */
	struct relaunch *r = !restored && launch_needed(sb) ? calloc(1, sizeof(*r)) : NULL;
	if (!r)
		return;
	r->out.ops = &relaunch_ops;
	snprintf(r->id, sizeof(r->id), "%s", sb->id);
	memset(&later, 0, sizeof(later));
	if (launch_start(d, sb, &r->out, &later) < 0) {
		log_warn("sandbox %s: its start command, again: %s", sb->id, later.msg);
		free(r);
	}
}

/* An archive's processes back from its images: 0, or -1 with why in
 * sb->mem_note (nothing of them runs; the images stay). */
static int restore(struct engine *d, struct sandbox *sb)
{
	char images[700];
	struct cove_err e = { 0 };
	memarchive_dir(d, sb->id, images, sizeof(images));
	int64_t t0 = lifecycle_mono_ms();
	if (memsnap_check(d, NULL, &e) == 0 && start(d, sb, images, &e) == 0) {
		log_debug("sandbox %s: wake: its processes restored in %" PRId64 " ms", sb->id,
			  lifecycle_mono_ms() - t0);
		return 0;
	}
	log_warn("sandbox %s: its archived processes could not be restored; started afresh: %s", sb->id, e.msg);
	snprintf(sb->mem_note, sizeof(sb->mem_note), "its archived processes could not be restored: %s", e.msg);
	return -1;
}

/* Archived (or stopped) to running: a slot, the row, then cove-init, its
 * processes restored from the archive's images when there are and resume
 * is true (a wake; a reboot starts afresh). */
static int boot_again(struct engine *d, struct sandbox *sb, enum sandbox_reason why, bool resume,
		      struct cove_err *err)
{
	struct was was;
	bool stopped = sb->state == SB_STOPPED;
	bool images = sb->state == SB_ARCHIVED && memarchive_has(d, sb->id);
	if (lifecycle_make_room(d, sb, err) < 0 || record(d, sb, SB_RUNNING, why, &was, err) < 0)
		return -1;
	/* A stopped sandbox's init died by itself: what it left goes first. */
	if (stopped)
		(void)halt(d, sb, "sandbox started again", NULL);
	sb->mem_note[0] = '\0';
	bool restored = images && resume && restore(d, sb) == 0;
	if (!restored && start(d, sb, NULL, err) < 0) {
		unrecord(d, sb, &was);
		return -1;
	}
	sb->mem_kept = restored;
	started(d, sb, was.state, restored);
	/* Its init recorded: the images are no more needed. */
	if (images)
		memarchive_drop(d, sb->id);
	return 0;
}

int engine_sandbox_wake(struct engine *d, struct sandbox *sb, enum sandbox_reason why, struct cove_err *err)
{
	if (sb->state == SB_RUNNING)
		return 0;
	if (sb->state == SB_PAUSED)
		return engine_sandbox_resume(d, sb, why, err);
	if (sb->state != SB_ARCHIVED && sb->state != SB_STOPPED)
		return refuse(sb, "wake", err);
	return boot_again(d, sb, why, true, err);
}

int engine_sandbox_reboot(struct engine *d, struct sandbox *sb, enum sandbox_reason why, struct cove_err *err)
{
	if (sb->state == SB_DELETING)
		return refuse(sb, "reboot", err);
	if (sb->state == SB_ARCHIVED || sb->state == SB_STOPPED)
		return boot_again(d, sb, why, false, err);
	struct was was;
	/* Recorded running first: a crash from here on leaves a row whose init
	 * is gone or going, which the next start boots anew. */
	if (record(d, sb, SB_RUNNING, why, &was, err) < 0)
		return -1;
	if (halt(d, sb, "sandbox rebooted", err) < 0 || start(d, sb, NULL, err) < 0) {
		sb->state = SB_STOPPED; /* nothing runs: the next request (or start) boots it */
		(void)sandbox_save(d, sb, NULL);
		return -1;
	}
	started(d, sb, was.state, false);
	return 0;
}

int sandbox_ready(struct sandbox *sb, struct cove_err *err)
{
	sb->last_active = sb->last_used = lifecycle_mono_ms();
	if ((sb->state == SB_PAUSED || sb->state == SB_ARCHIVED || sb->state == SB_STOPPED) &&
	    engine_sandbox_wake(engine_ctx, sb, SB_REASON_REQUEST, err) < 0)
		return -1;
	if (sb->state != SB_RUNNING || sb->conn_fd < 0)
		return err_set(err, COVE_ESTATE, "sandbox %s is not running", sb->id);
	return 0;
}

int sandbox_activity_begin(struct sandbox *sb, struct cove_err *err)
{
	if (sandbox_ready(sb, err) < 0)
		return -1;
	sb->activity++;
	return 0;
}

void sandbox_activity_end(struct sandbox *sb)
{
	if (sb->activity > 0)
		sb->activity--;
	sb->last_active = lifecycle_mono_ms();
}

/* Counted active: all but archived and deleting ones (a sandbox being
 * created is in the table, stopped, before it runs). */
static bool holds_slot(const struct sandbox *sb)
{
	return sb->state != SB_ARCHIVED && sb->state != SB_DELETING;
}

int lifecycle_make_room(struct engine *d, const struct sandbox *except, struct cove_err *err)
{
	if (!d->max_active)
		return 0;
	for (;;) {
		int active = 0;
		struct sandbox *lru = NULL;
		for (int i = 0; i < MAX_SANDBOXES; i++) {
			struct sandbox *sb = d->sandboxes[i];
			if (!sb || sb == except || !holds_slot(sb))
				continue;
			active++;
			if (sb->state == SB_PAUSED && (!lru || sb->last_used < lru->last_used))
				lru = sb;
		}
		if (active < d->max_active)
			return 0;
		struct cove_err why = { 0 };
		if (!lru)
			return err_set(err, COVE_EFULL,
				       "all %d active slots are in use and none of them is paused (archive or delete "
				       "one, or try again in %d s)",
				       d->max_active, LIFECYCLE_RETRY_AFTER);
		log_info("sandbox %s: archived: its active slot is needed (--max-active %d)", lru->id, d->max_active);
		if (engine_sandbox_archive(d, lru, SB_REASON_SLOTS, &why) < 0)
			return err_set(err, COVE_EFULL, "no active slot: archiving %s: %s", lru->id, why.msg);
	}
}

void lifecycle_spec_defaults(const struct engine *d, struct sandbox_spec *s)
{
	if (s->idle_timeout < 0)
		s->idle_timeout = d->default_idle_timeout;
	if (s->archive_after < 0)
		s->archive_after = d->default_archive_after;
}

void lifecycle_spec_to_json(const struct sandbox_spec *s, json_t *j)
{
	json_object_set_new(j, "idle_timeout", json_integer(s->idle_timeout));
	json_object_set_new(j, "archive_after", json_integer(s->archive_after));
	json_object_set_new(j, "on_timeout", json_string(sandbox_on_timeout_name(s->on_timeout)));
}

void lifecycle_spec_from_json(json_t *j, struct sandbox_spec *s)
{
	const char *on_timeout = json_string_value(json_object_get(j, "on_timeout"));
	s->idle_timeout = (int)json_integer_value(json_object_get(j, "idle_timeout"));
	s->archive_after = (int)json_integer_value(json_object_get(j, "archive_after"));
	s->on_timeout = on_timeout ? sandbox_on_timeout_parse(on_timeout) : SB_ON_TIMEOUT_DELETE;
	if (s->on_timeout < 0)
		s->on_timeout = SB_ON_TIMEOUT_DELETE;
}

/* A new sandbox, or one a warm pool hands out (a pool's own are not
 * announced, nor put to sleep: nobody has them yet). */
void lifecycle_on_created(struct engine *d, struct sandbox *sb)
{
	sb->last_active = sb->last_used = lifecycle_mono_ms();
	done(d, sb, (enum sandbox_state) - 1);
}

void lifecycle_on_deleted(struct engine *d, struct sandbox *sb, int was)
{
	lifecycle_forget(sb);
	/* A frozen task keeps a SIGKILL pending until it is thawed (v1): the
	 * kill first, then the thaw, so that nothing runs another instruction
	 * of its own. */
	if (was == SB_PAUSED && sb->init_pidfd >= 0) {
		(void)syscall(SYS_pidfd_send_signal, sb->init_pidfd, SIGKILL, NULL, 0);
		(void)cgroup_freeze(&d->cgroups, sb->id, false, NULL);
	}
	/* Deleted at its timeout (lifecycle_on_timeout), or asked for. */
	bool timed_out =
		sb->state_reason == SB_REASON_TIMEOUT && sb->spec.expires_at && sb->spec.expires_at <= sandbox_now_ms();
	if (!timed_out)
		sb->state_reason = SB_REASON_USER;
	events_emit(d, sb, was);
}

void lifecycle_on_loaded(struct engine *d, struct sandbox *sb)
{
	struct cove_err err = { 0 };
	if (sb->state == SB_PAUSED && cgroup_freeze(&d->cgroups, sb->id, true, &err) < 0)
		log_error("sandbox %s: paused, but: %s", sb->id, err.msg);
	if (sb->state == SB_ARCHIVED) {
		/* An archive a crash cut short: what still runs goes now (with
		 * memory, its images were committed before the row). */
		sb->mem_kept = memarchive_has(d, sb->id);
		sb->init_pid = 0;
		if (cgroup_destroy(&d->cgroups, sb->id, 5000, &err) < 0)
			log_error("sandbox %s: archived, but: %s", sb->id, err.msg);
		network_release(d, sb);
	}
	idle_arm(d, sb);
}

void lifecycle_on_timeout(struct engine *d, struct sandbox *sb)
{
	struct cove_err err = { 0 };
	int r = 0;
	if (sb->spec.on_timeout == SB_ON_TIMEOUT_DELETE) {
		log_info("sandbox %s: deleting: its timeout ran out", sb->id);
		sb->state_reason = SB_REASON_TIMEOUT; /* the deletion's event says so */
		if (sandbox_delete(d, sb, &err) < 0)
			log_error("sandbox %s: delete: %s", sb->id, err.msg);
		return;
	}
	/* The deadline is spent: saved with the transition's row (or alone). */
	sb->spec.expires_at = 0;
	if (sb->spec.on_timeout == SB_ON_TIMEOUT_PAUSE && sb->state == SB_RUNNING)
		r = engine_sandbox_pause(d, sb, SB_REASON_TIMEOUT, &err);
	else if (sb->spec.on_timeout == SB_ON_TIMEOUT_ARCHIVE && sb->state != SB_ARCHIVED)
		r = engine_sandbox_archive(d, sb, SB_REASON_TIMEOUT, &err);
	else
		r = sandbox_save(d, sb, &err);
	if (r < 0)
		log_error("sandbox %s: at its timeout: %s", sb->id, err.msg);
	else
		log_info("sandbox %s: its timeout ran out: %s", sb->id, sandbox_state_name(sb->state));
}

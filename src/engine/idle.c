/* Idle sleep and archive_after (lifecycle.h): one timer per sandbox, for
 * its state. Running, it checks now and then whether anything keeps the
 * sandbox awake: a request (sandbox_ready) or a lasting activity
 * (sandbox_activity_begin; the port proxy's connections, ports_active),
 * an exec or a file
 * operation under way, a client attached to a kept process (a terminal, a
 * stream), a file watch, a kept process started with keep_awake, a
 * session's command; and its CPU time:
 * processes that used more than IDLE_CPU_PERMILLE of one CPU since the last
 * check (a build, a busy loop) are activity, a server waiting in accept()
 * is not. After idle_timeout seconds without any, it is paused (reason
 * "idle"). Paused, the timer archives it after archive_after seconds. */
#include <event2/event.h>

#include "common/log.h"
#include "engine/engine.h"
#include "engine/ports.h"
#include "engine/process.h"
#include "engine/watch.h"

/* Checks at most this far apart, so that CPU use is seen over windows no
 * longer than this, whatever idle_timeout is. */
#define IDLE_CHECK_MAX_MS 30000
#define IDLE_CHECK_MIN_MS 250
/* 1% of one CPU: a shell prompt, a waiting server or a sleeping job use
 * far less; anything that computes, far more. */
#define IDLE_CPU_PERMILLE 10

bool idle_busy(const struct sandbox *sb)
{
	return sb->activity > 0 || ports_active(sb) > 0 || sb->execs || sb->file_ops || procs_keep_awake(sb) ||
	       sessions_busy(sb) || watch_active(sb);
}

/* Whether sb used more than its share of CPU since the last look (which
 * this one becomes). A sandbox whose CPU time cannot be read (a v1 host
 * without cpuacct, a sandbox from before) is judged by the rest alone. */
static bool cpu_busy(struct engine *d, struct sandbox *sb, int64_t now)
{
	uint64_t ns = 0;
	if (cgroup_cpu_usage(&d->cgroups, sb->id, &ns) < 0)
		return false;
	bool known = sb->cpu_seen_at && ns >= sb->cpu_seen_ns && now > sb->cpu_seen_at;
	uint64_t used = ns - sb->cpu_seen_ns;
	uint64_t span_ms = (uint64_t)(now - sb->cpu_seen_at);
	sb->cpu_seen_ns = ns;
	sb->cpu_seen_at = now;
	return known && used * 1000 > span_ms * 1000000 * IDLE_CPU_PERMILLE;
}

static void arm_in(struct engine *d, struct sandbox *sb, event_callback_fn fn, int64_t ms)
{
	if (!sb->life_ev && !(sb->life_ev = evtimer_new(d->base, fn, sb))) {
		log_error("sandbox %s: cannot arm its idle timer: out of memory", sb->id);
		return;
	}
	event_assign(sb->life_ev, d->base, -1, 0, fn, sb);
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
	evtimer_add(sb->life_ev, &tv);
}

static void on_idle_check(evutil_socket_t fd, short what, void *arg);
static void on_archive_due(evutil_socket_t fd, short what, void *arg);

/* The next idle check: when idle_timeout runs out from the last activity,
 * but at most IDLE_CHECK_MAX_MS from now. */
static void arm_check(struct engine *d, struct sandbox *sb, int64_t now)
{
	int64_t left = sb->last_active + (int64_t)sb->spec.idle_timeout * 1000 - now;
	if (left > IDLE_CHECK_MAX_MS)
		left = IDLE_CHECK_MAX_MS;
	arm_in(d, sb, on_idle_check, left < IDLE_CHECK_MIN_MS ? IDLE_CHECK_MIN_MS : left);
}

static void on_idle_check(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *sb = arg;
	struct engine *d = engine_ctx;
	int64_t now = lifecycle_mono_ms();
	if (sb->state != SB_RUNNING || sb->spec.idle_timeout <= 0)
		return;
	if (cpu_busy(d, sb, now) || idle_busy(sb))
		sb->last_active = now;
	if (now - sb->last_active < (int64_t)sb->spec.idle_timeout * 1000) {
		arm_check(d, sb, now);
		return;
	}
	struct cove_err err = { 0 };
	log_info("sandbox %s: pausing: nothing active for %d s", sb->id, sb->spec.idle_timeout);
	if (engine_sandbox_pause(d, sb, SB_REASON_IDLE, &err) < 0) {
		log_error("sandbox %s: idle pause: %s", sb->id, err.msg);
		sb->last_active = now; /* try again after another idle_timeout */
		arm_check(d, sb, now);
	}
}

static void on_archive_due(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *sb = arg;
	struct cove_err err = { 0 };
	if (sb->state != SB_PAUSED)
		return;
	log_info("sandbox %s: archiving: paused for %d s", sb->id, sb->spec.archive_after);
	if (engine_sandbox_archive(engine_ctx, sb, SB_REASON_IDLE, &err) < 0)
		log_error("sandbox %s: archive: %s", sb->id, err.msg);
}

void idle_arm(struct engine *d, struct sandbox *sb)
{
	int64_t now = lifecycle_mono_ms();
	if (sb->life_ev)
		evtimer_del(sb->life_ev);
	if (sb->spec.pooled) /* a warm pool's: nobody uses it yet */
		return;
	if (sb->state == SB_RUNNING && sb->spec.idle_timeout > 0) {
		if (!sb->last_active)
			sb->last_active = now;
		sb->cpu_seen_at = 0;
		(void)cpu_busy(d, sb, now); /* the first look: what it used before counts for nothing */
		arm_check(d, sb, now);
	} else if (sb->state == SB_PAUSED && sb->spec.archive_after > 0) {
		/* From the pause (state_changed_at, unix ms: a restart keeps it). */
		int64_t left = sb->state_changed_at + (int64_t)sb->spec.archive_after * 1000 - sandbox_now_ms();
		arm_in(d, sb, on_archive_due, left > 0 ? left : 0);
	}
}

void lifecycle_forget(struct sandbox *sb)
{
	if (sb->life_ev)
		event_free(sb->life_ev);
	sb->life_ev = NULL;
}

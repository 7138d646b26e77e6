/* A sandbox's lifecycle (lifecycle.c, idle.c; DESIGN.md "Lifecycle"):
 *
 *   running ──pause──► paused ──resume / wake──► running
 *      │                  │
 *      └──── archive ─────┴──► archived ──wake──► running
 *   reboot: every process ended, cove-init started again (files kept)
 *
 * paused: the sandbox's cgroup frozen (v1 freezer.state, v2 cgroup.freeze),
 * its memory kept. archived: its files, where they always are, and (when
 * something ran and CRIU could save it) its processes' memory as CRIU's
 * images beside them, which the wake restores; no process, cgroup nor
 * active slot (--max-active). Every change is
 * recorded in state.db (state, state_changed_at, state_reason) before it
 * is made, so that a coved killed in the middle is finished by the next
 * start (sandboxes_load) in the recorded state, and then sent to the
 * subscribers of the event stream.
 *
 * Any engine operation that needs the sandbox's processes (an exec, a file,
 * an attach, terminal input, a session, a snapshot, a fork...) goes through
 * sandbox_ready first, the one place that wakes it: front ends never do.
 * Metadata (sandbox_to_json, locks, the timeout, the network policy) does
 * not wake it. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

struct engine;
struct sandbox;
struct sandbox_spec;
struct output;

/* Why a sandbox's state changed. */
enum sandbox_reason {
	SB_REASON_USER,    /* asked for: create, POST .../pause, /resume, /archive, /reboot */
	SB_REASON_REQUEST, /* woken by a request that needed it */
	SB_REASON_IDLE,    /* idle_timeout with nothing active; archive_after paused */
	SB_REASON_TIMEOUT, /* its timeout, with on_timeout pause or archive */
	SB_REASON_SLOTS,   /* archived to free an active slot (--max-active) */
};

/* What a sandbox's timeout does. */
enum sandbox_on_timeout { SB_ON_TIMEOUT_DELETE, SB_ON_TIMEOUT_PAUSE, SB_ON_TIMEOUT_ARCHIVE };

#define LIFECYCLE_MAX_SECONDS (365 * 86400) /* idle_timeout, archive_after */

const char *sandbox_state_name(int state);
const char *sandbox_reason_name(int reason);
const char *sandbox_on_timeout_name(int on_timeout);
/* -1 for a name that is none. */
int sandbox_on_timeout_parse(const char *name);
/* SB_REASON_USER for a name that is none (rows from before the lifecycle). */
int sandbox_reason_parse(const char *name);

/* The transitions. Each is refused with 409 (COVE_ESTATE) and changes
 * nothing from a state it does not start from: pause from running, resume
 * from paused, archive from running, paused or stopped, wake from paused,
 * archived or stopped (its init died; running: nothing to do, 0), reboot
 * from any state but deleting. Waking an archived sandbox takes an active slot: at the limit
 * the least recently used paused sandbox is archived (reason "slots"), and
 * with none a 429 (COVE_EFULL) is the answer. */
int engine_sandbox_pause(struct engine *d, struct sandbox *sb, enum sandbox_reason why, struct cove_err *err);
int engine_sandbox_resume(struct engine *d, struct sandbox *sb, enum sandbox_reason why, struct cove_err *err);
int engine_sandbox_archive(struct engine *d, struct sandbox *sb, enum sandbox_reason why, struct cove_err *err);
/* Whether an archive keeps the memory of the sandbox's processes
 * (memarchive.h): AUTO (engine_sandbox_archive, and the automatic ones:
 * archive_after, slots, on_timeout) when it can, and if the dump fails
 * the processes are ended all the same, sb->mem_note saying why; YES, or
 * a 409 that says why and nothing changed; NO, the processes are ended.
 * A sandbox with nothing running but cove-init has no memory to keep. Its
 * wake restores them (the start command is not run again); a restore that
 * fails starts it afresh (mem_note says why). */
enum archive_memory { ARCHIVE_MEMORY_AUTO, ARCHIVE_MEMORY_YES, ARCHIVE_MEMORY_NO };
int engine_sandbox_archive_mem(struct engine *d, struct sandbox *sb, enum sandbox_reason why, enum archive_memory mem,
			       struct cove_err *err);
int engine_sandbox_wake(struct engine *d, struct sandbox *sb, enum sandbox_reason why, struct cove_err *err);
int engine_sandbox_reboot(struct engine *d, struct sandbox *sb, enum sandbox_reason why, struct cove_err *err);

/* The gate of every operation that needs sb's processes: wakes it (reason
 * "request") when paused, archived or stopped, and counts as activity. 0
 * when it runs, else -1 with err. */
int sandbox_ready(struct sandbox *sb, struct cove_err *err);

/* Activity that lasts, for a front end that has its own (the port proxy
 * counts its connections with ports_activity, ports.h, which idle.c reads
 * too): while begun more than ended, the sandbox is not idle. Each begin wakes
 * it as sandbox_ready does; 0, or -1 with err (and nothing begun). */
int sandbox_activity_begin(struct sandbox *sb, struct cove_err *err);
void sandbox_activity_end(struct sandbox *sb);

/* A free active slot for one more running sandbox (a create, a wake),
 * archiving the least recently used paused one (not except) when there is
 * none: 0, or -1 with a 429 (COVE_EFULL) that says when to try again. */
int lifecycle_make_room(struct engine *d, const struct sandbox *except, struct cove_err *err);
#define LIFECYCLE_RETRY_AFTER 5 /* seconds: what a 429 for slots suggests */

/* The event stream (GET /v1/events). Each transition is an OUT_EVENT whose
 * event is a struct sandbox_event; an OUT_KEEPALIVE after keepalive seconds
 * of silence. A consumer that lags (paused) loses events, counted in the
 * next one's lost. The stream lasts until cancelled or coved stops. */
struct sandbox_event {
	const char *id;
	const char *state;  /* running, paused, archived, deleted */
	const char *from;   /* the state before, or NULL for a new sandbox */
	const char *reason; /* sandbox_reason_name */
	int64_t at;         /* unix ms */
	int memory_kept;    /* archived, or running from archived: sandbox.mem_kept; else -1 */
	const char *note;   /* sandbox.mem_note, or NULL */
	uint64_t lost;      /* events this consumer missed just before this one */
};
#define EVENTS_MAX_KEEPALIVE 3600
#define EVENTS_MAX_STREAMS 256
/* id: only that sandbox's events (NULL: every sandbox's). */
int events_subscribe(struct engine *d, const char *id, int keepalive, struct output *o, struct cove_err *err);
/* Close every stream (coved stops). */
void events_close_all(struct engine *d);

/* ---- inside the engine ---- */

/* A spec's idle_timeout and archive_after, when not given (< 0): coved's
 * defaults. At create, and when a warm pool hands a sandbox out. */
void lifecycle_spec_defaults(const struct engine *d, struct sandbox_spec *s);
/* The spec's lifecycle fields into its JSON (state.db's row, the API's
 * object), and back (a row from before them: never idle, deleted at its
 * timeout). */
void lifecycle_spec_to_json(const struct sandbox_spec *s, json_t *j);
void lifecycle_spec_from_json(json_t *j, struct sandbox_spec *s);

/* sandboxes.c calls these. */
void lifecycle_on_created(struct engine *d, struct sandbox *sb);
/* Before its init is killed; was: its state until then. */
void lifecycle_on_deleted(struct engine *d, struct sandbox *sb, int was);
/* At load, after the row's state was read into sb->state: make the
 * sandbox what it says (freeze a paused one; an archived one's leftovers
 * killed) and arm its timers. */
void lifecycle_on_loaded(struct engine *d, struct sandbox *sb);
/* The timeout ran out: what on_timeout says. */
void lifecycle_on_timeout(struct engine *d, struct sandbox *sb);
/* Stop sb's timers (a deletion). */
void lifecycle_forget(struct sandbox *sb);
/* Emit sb's change from state from (-1: a new sandbox; SB_DELETING: gone). */
void events_emit(struct engine *d, const struct sandbox *sb, int from);

/* idle.c: (re)arm sb's timer for its state: the idle check while running,
 * archive_after while paused, none otherwise. */
void idle_arm(struct engine *d, struct sandbox *sb);
/* Whether anything keeps sb awake now (not counting CPU use). */
bool idle_busy(const struct sandbox *sb);
int64_t lifecycle_mono_ms(void);

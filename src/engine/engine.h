/* coved's shared state. One libevent loop owns everything here; nothing is
 * touched from another thread. */
#pragma once
#include <event2/event.h>
#include <jansson.h>
#include <limits.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "sys/cgroup.h"
#include "sys/pool.h"

/* TRANSITIONAL, while the operations move out of the HTTP layer: the engine
 * must include nothing of daemon/ (issue 9). Each converted module drops
 * its use of these; the last one removes the includes. */
#include "daemon/api/reply.h"
#include "daemon/api/request.h"
#include "daemon/http/access.h"
#include "daemon/http/conn.h"

#define MAX_SANDBOXES 4096 /* uid slots: 65536 host ids each */
#define UID_BASE 0x10000000u

struct exec;
struct file_op;
struct proc;
struct lock;
struct durable_job;

struct sandbox_spec {
	char name[64];
	char image[64];     /* what was asked for: "host" */
	char image_dir[64]; /* the image subvolume it was made from: "host-<fingerprint>" */
	uint64_t memory;
	uint32_t cpu_millis;
	uint32_t pids;
	json_t *env; /* object: name -> value */
	char cwd[1024];
	char user[64];
	int64_t created_at; /* unix ms */
	int64_t expires_at; /* unix ms; 0 = never */
	bool ephemeral;     /* deleted when the connection that created it closes */
	/* isolation "external", the host backend: no image; its subvolume is a
	 * workspace on the host, and init a plain host process in it. */
	bool external;
	bool inherit_env; /* external only: coved's own environment is execs' base */
};

enum sandbox_state { SB_STOPPED, SB_RUNNING, SB_DELETING };

struct sandbox {
	char id[16];
	struct sandbox_spec spec;
	int slot;
	enum sandbox_state state;
	pid_t init_pid;
	uint64_t init_start;
	int init_pidfd;
	struct event *init_exit_ev;
	int conn_fd; /* SOCK_SEQPACKET to cove-init */
	struct event *conn_ev;
	uint32_t next_seq;
	struct exec *execs;       /* this sandbox's execs, linked by exec->next */
	struct proc *procs;       /* background and terminal processes, newest first */
	struct session *sessions; /* persistent shells (their procs are in procs) */
	struct file_op *file_ops; /* Files API requests waiting for cove-init */
	struct event *expire_ev;  /* deletes it at spec.expires_at (or, at load, an ephemeral one) */
	struct lock *locks;       /* named locks held or waited for (locks.c), in memory only */
};

/* A snapshot: <pool>/snapshots/<id>/files, a read-only snapshot of a
 * sandbox's subvolume (its changes only), over image_dir. */
struct snapshot {
	char id[16];
	char sandbox[16];
	char name[64];
	char image_dir[64];
	int64_t created_at; /* unix ms */
	json_t *spec;       /* the sandbox's spec when it was taken */
	struct snapshot *next;
	bool durable;            /* files, manifest and row on disk (see snapshots.c) */
	struct durable_job *job; /* the work making it durable off the loop, or NULL */
};

/* The engine: every sandbox, snapshot and history, and what they stand
 * on. One per coved; its front ends (daemon/) drive it. */
struct engine {
	struct event_base *base;
	char data_dir[512];
	char run_dir[600];
	struct pool pool;
	struct cgroup_layout cgroups;
	char host_image[64]; /* the current host image's subvolume name */
	struct store *store;
	int init_exe_fd;
	struct sock_fprog seccomp;
	struct sandbox *sandboxes[MAX_SANDBOXES]; /* indexed by slot; deleting ones too, until cleaned up */
	int count;                                /* not counting deleting ones */
	struct snapshot *snapshots;               /* complete ones only, oldest first */
	bool stopping; /* SIGTERM: exit once no deletion or worker job is under way */
	enum storage_driver storage; /* --storage: what was asked for (STORAGE_AUTO by default) */
};

extern struct engine *engine_ctx;

/* sandboxes.c */
int sandboxes_load(struct engine *d, struct cove_err *err);
/* When stopping and no deletion or worker job is under way, leave the loop. */
void sandboxes_stop_if_idle(struct engine *d);
struct sandbox *sandbox_find(struct engine *d, const char *id);
/* sandbox_find, or NULL with a 404 "no sandbox 'ID'" in err. */
struct sandbox *sandbox_lookup(struct engine *d, const char *id, struct cove_err *err);
/* Create and boot a sandbox from spec (its env is moved out). Its root is
 * a new, empty one, or, when from is not NULL, a writable snapshot of the
 * subvolume from (a snapshot's files), whose image spec->image_dir names. */
int sandbox_create(struct engine *d, struct sandbox_spec *spec, const char *from, struct sandbox **ret,
		   struct cove_err *err);
/* Create and boot count sandboxes from spec (copied), each on a root
 * already taken: <pool>/sandboxes/<ids[i]>, a writable snapshot of from
 * made by the caller (a fork takes all its copies' roots in one frozen
 * instant). Their runtimes start at once. All or nothing: on failure no
 * sandbox is left and every root is deleted. */
int sandboxes_create_taken(struct engine *d, const struct sandbox_spec *spec, const char *from, char (*ids)[16],
			   int count, struct sandbox **ret, struct cove_err *err);
/* Deletion is two steps: at once the sandbox is gone from the API and its
 * init is killed; its cgroups, subvolume and uid slot are released when the
 * init has died (a row in state "deleting" finishes it after a crash). */
int sandbox_delete(struct engine *d, struct sandbox *sb, struct cove_err *err);
/* A new deadline (unix ms, > 0): recorded, then armed. */
int sandbox_set_expiry(struct engine *d, struct sandbox *sb, int64_t expires_at, struct cove_err *err);
int64_t sandbox_now_ms(void); /* unix ms */
json_t *sandbox_to_json(const struct sandbox *sb);
int sandbox_send(struct sandbox *sb, const void *buf, size_t len, const int *fds, int nfds);
void sandbox_spec_free(struct sandbox_spec *spec);
json_t *sandbox_spec_to_json(const struct sandbox_spec *s);
/* 0, or -1 for text that is not a spec. */
int sandbox_spec_from_json(const char *text, struct sandbox_spec *s);

/* snapshots.c */
/* Load the snapshots state.db records, after finishing what a crash left
 * half done. The number of rows it could not read, or -1 with err. */
int snapshots_load(struct engine *d, struct cove_err *err);
struct snapshot *snapshot_find(struct engine *d, const char *id);
json_t *snapshot_to_json(const struct snapshot *sn);
/* Take a durable snapshot of sb: frozen for the instant of the subvolume
 * snapshot; on return its files, manifest and row are on disk. */
int snapshot_create(struct engine *d, struct sandbox *sb, const char *name, struct snapshot **ret,
		    struct cove_err *err);
/* More rows for a snapshot's durable commit (a checkpoint's): 0, or -1 with
 * err, which rolls the snapshot back. */
typedef int (*snapshot_rows_fn)(struct engine *d, const struct snapshot *sn, void *arg, struct cove_err *err);
/* snapshot_create, with rows(d, sn, arg) written in the transaction that
 * commits the snapshot's row: both are on disk on return, or neither. */
int snapshot_create_with(struct engine *d, struct sandbox *sb, const char *name, snapshot_rows_fn rows, void *arg,
			 struct snapshot **ret, struct cove_err *err);
/* The same, returning right after the subvolume snapshot and its row: the
 * snapshot is listed, durable false, until a worker thread has made it
 * durable (wait_durable false). */
int snapshot_create_nowait(struct engine *d, struct sandbox *sb, const char *name, struct snapshot **ret,
			   struct cove_err *err);
/* Refused (409) while a checkpoint names it (history.c). */
int snapshot_delete(struct engine *d, struct snapshot *sn, struct cove_err *err);
/* A new sandbox from sn; overrides (name, memory, cpu_millis, pids when
 * set, i.e. non-empty or non-zero) replace the snapshot's. */
int snapshot_restore(struct engine *d, const struct snapshot *sn, const struct sandbox_spec *overrides,
		     struct sandbox **ret, struct cove_err *err);
/* count independent copies of sb, from one frozen instant: ret (count
 * entries) gets them. All or nothing. */
int sandbox_fork(struct engine *d, struct sandbox *sb, int count, struct sandbox **ret, struct cove_err *err);

/* exec.c */
struct exec_request {
	json_t *argv; /* array of strings */
	json_t *cmd;  /* as the request gave it: argv, or a shell string */
	json_t *env;  /* object or NULL */
	const char *cwd;
	const char *user;
	const unsigned char *stdin_data;
	size_t stdin_len;
	bool has_stdin;
	double timeout; /* seconds; 0 = none */
	bool stream;
	size_t max_output;
	/* Background and terminal processes (procs.c) */
	bool background; /* outlives the request: answered with its pid at once */
	const char *tag; /* a name to select it by, unique among running ones */
	bool tty;        /* a pty as stdio */
	int rows, cols;  /* its size */
	bool stdin_open; /* a stdin pipe that stays open for later input */
};
int exec_start(struct sandbox *sb, struct http_req *req, const struct exec_request *er, struct cove_err *err);
/* Encode er (argv, environment, user, cwd) into a WIRE_SPAWN with h's seq,
 * flags, value and pid, and send it with fds. */
struct wire_hdr;
int exec_send_spawn(struct sandbox *sb, struct wire_hdr *h, const struct exec_request *er, const int *fds, int nfds,
		    struct cove_err *err);
/* One NDJSON line (event is consumed) on a started reply; done, if not
 * NULL, is called with arg once it has been handed to the socket. */
void exec_send_event(struct http_req *req, json_t *event, void (*done)(struct http_conn *, void *), void *arg);
/* Bytes of the reply still waiting in coved for the client to take. */
size_t exec_unsent_bytes(struct http_req *req);
/* j[name] = buf's bytes as text (or null and j[name_b64]), j[name_truncated]. */
json_t *exec_collected_json(json_t *j, const char *name, struct evbuffer *buf, bool truncated);
/* {"type":type,"data":"..."} for UTF-8 text, else "data_b64". */
json_t *exec_data_event(const char *type, const char *buf, size_t n);
/* exit_code, signal, timed_out and (when >= 0) duration_ms into j. */
json_t *exec_exit_fields(json_t *j, int status, bool timed_out, double duration_ms);
/* From the init connection. */
void exec_on_spawned(struct sandbox *sb, uint32_t seq, pid_t pid);
void exec_on_spawn_failed(struct sandbox *sb, uint32_t seq, int stage, int errnum);
void exec_on_exited(struct sandbox *sb, pid_t pid, int status);
/* The sandbox is going away: fail and free all its execs. */
void exec_abort_all(struct sandbox *sb, const char *why);

/* procs.c: background and terminal processes (kept by init, see wire.h) */
int procs_start(struct sandbox *sb, struct http_req *req, const struct exec_request *er, struct cove_err *err);
int procs_list(struct http_req *req, const char *id, struct cove_err *err);
int procs_get(struct http_req *req, const char *id, struct cove_err *err); /* ?wait=S */
int procs_attach(struct http_req *req, const char *id, struct cove_err *err);
int procs_stdin(struct http_req *req, const char *id, struct cove_err *err);
int procs_signal(struct http_req *req, const char *id, struct cove_err *err);
int procs_resize(struct http_req *req, const char *id, struct cove_err *err);
/* From the init connection: true if the message was about a kept process. */
bool procs_on_spawned(struct sandbox *sb, uint32_t seq, pid_t pid, int fd);
bool procs_on_spawn_failed(struct sandbox *sb, uint32_t seq, int stage, int errnum);
bool procs_on_exited(struct sandbox *sb, pid_t pid, int status);
void procs_on_kept(struct sandbox *sb, const struct wire_hdr *h, int *fds, int nfds);
/* Ask a re-attached init for the kept processes of the previous coved. */
void procs_reattach(struct sandbox *sb);
/* The sandbox stopped or is going away: end every stream, free all. */
void procs_abort_all(struct sandbox *sb);

/* For sessions.c: a kept process without a request; meta is merged into
 * its description (which a restarted coved reads back). */
struct session;
struct evbuffer;
/* req, if not NULL, is answered with an error if the spawn fails, else
 * by sessions_on_started. */
int proc_spawn_kept(struct sandbox *sb, struct http_req *req, const struct exec_request *er, json_t *meta,
		    struct proc **ret, struct cove_err *err);
/* Append stream's output from *pos (at most max bytes) to to, moving *pos;
 * returns how many bytes the ring had already dropped past *pos. */
uint64_t proc_read_output(struct proc *p, int stream, uint64_t *pos, struct evbuffer *to, size_t max);
uint64_t proc_output_end(struct proc *p, int stream); /* bytes written so far */
int proc_write_stdin(struct proc *p, const void *buf, size_t n, struct cove_err *err);
void proc_signal(struct proc *p, int sig, uint32_t flags); /* WIRE_FLAG_* */
bool proc_ended(const struct proc *p, int *status);
pid_t proc_pid(const struct proc *p);
json_t *proc_meta(const struct proc *p);
void proc_set_session(struct proc *p, struct session *s);
/* Read the output again if a reader that held it back has caught up. */
void proc_update_flow(struct proc *p);

/* sessions.c: persistent shells; a command in one is an exec with "session" */
int sessions_create(struct http_req *req, const char *id, struct cove_err *err);
int sessions_list(struct http_req *req, const char *id, struct cove_err *err);
int sessions_delete(struct http_req *req, const char *id, struct cove_err *err);
int sessions_exec(struct sandbox *sb, struct http_req *req, const struct exec_request *er, const char *session,
		  struct cove_err *err);
/* From procs.c: new output (or the end) of the session's shell; the shell
 * is gone (its proc is being freed); a kept shell came back after a restart. */
void sessions_on_output(struct session *s);
void sessions_on_started(struct session *s, struct http_req *req); /* answers the create */
void sessions_on_gone(struct session *s);
void sessions_on_kept(struct sandbox *sb, struct proc *p);
/* How far the session has read its shell's stream (0 stdout, 1 stderr). */
uint64_t sessions_read_position(const struct session *s, int stream);

/* files.c, files_tar.c, export.c: engine/files.h; watch.c: engine/watch.h */

/* locks.c: named locks of a sandbox, in memory (see there). Leases and
 * waits are in seconds, > 0 and >= 0; names are checked here. */
#define LOCK_MAX_NAME 255
/* Grant the lock at once (200 with its token), queue req until it comes
 * free or wait runs out (then 409 lock_held), or fail; 0 when an answer was
 * or will be sent. */
int lock_acquire(struct sandbox *sb, struct http_req *req, const char *name, double lease, double wait,
		 struct cove_err *err);
/* Both need the holder's token (else 409, nothing changes). */
int lock_release(struct sandbox *sb, const char *name, const char *token, struct cove_err *err);
int lock_renew(struct sandbox *sb, const char *name, const char *token, double lease, int64_t *ret_expires_at,
	       struct cove_err *err);
/* [{name, expires_at, waiters}], never a token. */
json_t *locks_to_json(const struct sandbox *sb);
/* The sandbox is going away: fail the waiters, forget the locks. */
void locks_drop_all(struct sandbox *sb, const char *why);
/* history.c: a sandbox's ordered checkpoints, kept in state.db after the
 * sandbox is deleted (see there). id may name a deleted sandbox wherever
 * it is a const char *. */
/* Append a checkpoint to sb's history: a snapshot as snapshot_create takes
 * it, and a row; *ret is the checkpoint as JSON. */
int history_checkpoint(struct engine *d, struct sandbox *sb, const char *label, json_t **ret, struct cove_err *err);
/* id's history as JSON (empty for a live sandbox without one); 404 when id
 * is neither a sandbox nor a history. */
int history_get(struct engine *d, const char *id, json_t **ret, struct cove_err *err);
/* count new sandboxes (ret gets them) from checkpoint seq of id's history,
 * each with a history of its own that starts as id's up to seq, recorded
 * as kind ("rollback" or "branch"). All or nothing. */
int history_restore(struct engine *d, const char *id, int seq, const char *kind, int count, struct sandbox **ret,
		    struct cove_err *err);
/* Forget id's history, and delete its snapshots that no other history
 * names; *ret says what went. */
int history_delete(struct engine *d, const char *id, json_t **ret, struct cove_err *err);
/* 0 when no checkpoint names the snapshot, else -1 with a 409 that says
 * which history does. */
int history_check_unused(struct engine *d, const char *snapshot, struct cove_err *err);

/* worker.c: slow work off the loop. work(arg) runs on a thread of its own
 * and may touch only what arg holds; then done(arg) runs on the loop. */
typedef void (*worker_fn)(void *arg);
int worker_start(struct event_base *base, worker_fn work, worker_fn done, void *arg, struct cove_err *err);
/* Some job's done has not run yet. */
bool worker_busy(void);

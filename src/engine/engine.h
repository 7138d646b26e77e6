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
#include "common/metrics.h"
#include "sys/cgroup.h"
#include "sys/pool.h"

#define MAX_SANDBOXES 8192 /* uid slots: 65536 host ids each, from UID_BASE (2^28) to 2^28 + 2^29 */
#define UID_BASE 0x10000000u

struct exec;
struct file_op;
struct proc;
struct lock;
struct durable_job;
struct engine_net;
struct engine_events;
struct sandbox_net;
struct launch;
struct template;
struct warm;

/* Latencies, observed where each operation completes (usage.h). */
struct engine_metrics {
	struct histogram create;  /* a new sandbox, from the request to running */
	struct histogram restore; /* a sandbox from a snapshot */
	struct histogram fork;    /* all copies of one fork */
	struct histogram warm;    /* a create handed out from a warm pool */
	struct histogram exec;    /* an exec, from its start to its exit */
	uint64_t execs_failed;    /* execs whose command could not start */
};

struct sandbox_spec {
	char name[64];
	char image[320];    /* what was asked for: "host", or an image's reference or ID */
	char image_dir[96]; /* the image tree it was made from, under <pool>/images:
			     * "host-<fingerprint>", or "layers/<chain id hex>" (images.h) */
	char image_id[80];  /* an OCI image's ID (its manifest digest); "" for host */
	/* What an OCI image's config gave it besides env, cwd, user and start,
	 * shown at the top of its JSON: "exposed_ports", "labels"; NULL for
	 * host (images.c). */
	json_t *image_meta;
	uint64_t memory;
	uint32_t cpu_millis;
	uint32_t pids;
	uint64_t disk; /* bytes its files may take (a btrfs simple quota, disk.c); 0 = no limit */
	json_t *env;   /* object: name -> value */
	char cwd[1024];
	/* The workspace folder, resolved at create: cwd (or "workdir") when
	 * given, else the user's home in the image's /etc/passwd ("/" if
	 * none), or an external sandbox's workspace. Where commands start. */
	char workdir[1024];
	char user[64];
	int64_t created_at; /* unix ms */
	int64_t expires_at; /* unix ms; 0 = never */
	bool ephemeral;     /* deleted when the connection that created it closes */
	/* isolation "external", the host backend: no image; its subvolume is a
	 * workspace on the host, and init a plain host process in it. */
	bool external;
	bool inherit_env; /* external only: coved's own environment is execs' base */
	bool egress;        /* network "egress" (else "none": loopback only); network.h */
	json_t *allow_out, *deny_out; /* arrays of strings, CIDRs and domains; NULL: empty */
	int net_slot;                 /* egress: its addresses' slot in the pool (network.c); a new
				       * sandbox (restores and forks too) gets its own */
	/* A front end's labels (E2B's metadata): an object of strings, or NULL
	 * (none). Kept with the spec, shown in it only when not empty. */
	json_t *metadata;
	/* Lifecycle (lifecycle.h), resolved at create from the request or
	 * coved's defaults: seconds with nothing active before an idle pause
	 * (0: never), seconds paused before an archive (0: never), and what
	 * the timeout (expires_at) does. */
	int idle_timeout;
	int archive_after;
	int on_timeout; /* enum sandbox_on_timeout */
	/* At create only (not kept): make user, a name, in the new root when
	 * its image has none (E2B's 'user'); see sandbox_user_make. */
	bool make_user;
	/* The start command, a kept process started at create (an argv array;
	 * NULL: none; an OCI image's Entrypoint + Cmd unless given), and the readiness check that create waits for
	 * (launch.c; NULL: none): {"port": N | "url": U | "cmd": argv,
	 * "timeout": seconds}. */
	json_t *start, *ready;
	char template[64]; /* the template it was made from ("": none) */
	/* A sandbox of a warm pool (warm.c), not handed out yet: neither
	 * listed nor found by ID, deleted at stop and at the next start. */
	bool pooled;
	bool from_pool; /* it was handed out from a warm pool */
	/* Every port reachable through the port proxy without a token, opened
	 * (public) at its first request: E2B's sandboxes (ports.h). Kept. */
	bool ports_public;
};

/* STOPPED: its init died (it is booted again at coved's next start).
 * PAUSED: its cgroup frozen, memory kept. ARCHIVED: files only, no
 * process, cgroup, memory nor active slot (lifecycle.h). */
enum sandbox_state { SB_STOPPED, SB_RUNNING, SB_DELETING, SB_PAUSED, SB_ARCHIVED };

struct sandbox {
	char id[16];
	struct sandbox *id_next; /* the next in its chain of engine.by_id */
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
	struct sandbox_net *net;  /* an egress sandbox's addresses, policy, resolver (network.c) */
	/* lifecycle.c, idle.c */
	int64_t state_changed_at; /* unix ms */
	int state_reason;         /* enum sandbox_reason */
	int64_t last_active;      /* monotonic ms: the last request, or sign of activity */
	int64_t last_used;        /* monotonic ms: the last request (least recently used goes first) */
	uint64_t cpu_seen_ns;     /* its CPU time at the last idle check, and when */
	int64_t cpu_seen_at;
	int activity;          /* sandbox_activity_begin minus _end: proxied connections, terminals */
	struct event *life_ev; /* running: the idle check; paused: archive_after */
	struct sandbox_port *ports; /* opened to the proxy, by port (ports.c) */
	int port_conns;             /* front ends' open connections to its ports (ports_activity) */
	bool listing;               /* kept processes asked for (procs_reattach), not all listed yet */
	struct launch *launch;    /* its start command and readiness wait, while under way (launch.c) */
	struct memsnap_restore *restoring; /* its processes' restore, while under way (memsnap.c) */
	/* Archived: whether its processes' memory was kept (memarchive.h);
	 * woken from there: whether they came back. mem_note: why not, or "". */
	bool mem_kept;
	char mem_note[320];
};

/* A snapshot: <pool>/snapshots/<id>/files, a read-only snapshot of a
 * sandbox's subvolume (its changes only), over image_dir. */
struct snapshot {
	char id[16];
	char sandbox[16];
	char name[64];
	char image_dir[96];
	int64_t created_at; /* unix ms */
	json_t *spec;       /* the sandbox's spec when it was taken */
	struct snapshot *next;
	bool durable;            /* files, manifest and row on disk (see snapshots.c) */
	bool memory;             /* with its processes: CRIU's images in <pool>/snapshots/<id>/criu */
	long long memory_bytes;  /* their size on disk */
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
	struct store *store;                   /* the state store */
	struct snapshot_store *snapshot_store; /* where snapshots' files live */
	int init_exe_fd;
	char init_file[700]; /* <run>/cove-init, which isolated sandboxes run (runtime.h) */
	struct sock_fprog seccomp;
	struct sandbox *sandboxes[MAX_SANDBOXES]; /* indexed by slot; deleting ones too, until cleaned up */
	struct sandbox *by_id[MAX_SANDBOXES]; /* the same sandboxes chained by a hash of their ID: sandbox_find */
	int count;                                /* not counting deleting ones */
	int max_active;                           /* --max-active: 0 = no limit */
	int default_idle_timeout;                 /* --default-idle-timeout, seconds (0: never) */
	int default_archive_after;                /* --default-archive-after, seconds (0: never) */
	struct engine_events *events;             /* lifecycle.c: subscribers of GET /v1/events */
	struct snapshot *snapshots;               /* complete ones only, oldest first */
	bool stopping; /* SIGTERM: exit once no deletion or worker job is under way */
	enum storage_driver storage; /* --storage: what was asked for (STORAGE_AUTO by default) */
	char subnet[64];             /* --subnet: the sandboxes' address pool ("": the default) */
	char resolv_conf[512];       /* --resolv-conf: the host's resolvers ("": /etc/resolv.conf) */
	struct engine_net *net;      /* network.c */
	/* Memory snapshots (memsnap.c): the criu found, whether the self-test
	 * passed, else why not; during a create from a memory snapshot, its
	 * images (the new sandbox's processes are restored, not started). */
	char criu[PATH_MAX];
	bool native_snapshot;
	char native_why[400];
	const char *mem_from;
	uint64_t default_disk;       /* --default-disk: a new sandbox's disk limit (0: none) */
	bool no_disk_quota;          /* --no-disk-quota: a new pool gets no quotas, sandboxes no limit */
	struct event *pool_ev;       /* disk.c: the pool's growth check */
	bool pool_stuck;             /* the pool should grow and the host has no room (logged once) */
	int pool_reserved_fd;        /* disk.c: btrfs_data_reserved's sysfs file, or < 0 */
	struct engine_metrics metrics; /* usage.c: how long operations took */
	struct template *templates;  /* templates.c, by name */
	int warm;                    /* --warm: the default pool's size (plain creates of "host") */
	struct warm *default_pool;   /* its pool (warm.c), or NULL */
	/* A front end's: a sandbox is being deleted (its ID is gone from the
	 * engine on return). */
	void (*on_sandbox_deleted)(const char *id);
	/* A front end's: port of sandbox id was closed (0: all of its ports,
	 * the sandbox is being deleted); its connections to them must end. */
	void (*on_port_closed)(const char *id, int port);
	/* A front end's: the URL of port of sandbox id into buf (the port
	 * proxy's), -1 if none; shown with the sandbox's open ports. */
	int (*port_url)(const char *id, int port, char *buf, size_t cap);
	struct engine_images *images; /* images.c */
	char image_helper[1024];      /* cove-image (default: next to coved) */
	char registry_auth[1024];     /* --registry-auth: Docker's config.json form, or "" */
	json_t *insecure_registries;  /* --insecure-registry: array of "host[:port]", or NULL */
};

extern struct engine *engine_ctx;

/* engine.c. Before engine_open, the caller fills data_dir and storage, and
 * base (the loop everything runs on). engine_open opens the pool (made on
 * first use), the host image, the snapshot and state stores, the cgroup
 * layout, cove-init (from init_path) and the seccomp filter; then
 * sandboxes_load re-attaches the sandboxes of a previous run. One engine
 * per data root: the caller holds the root's lock. */
int engine_open(struct engine *d, const char *init_path, struct cove_err *err);
void engine_close(struct engine *d);

/* sandboxes.c */
int sandboxes_load(struct engine *d, struct cove_err *err);
/* When stopping and no deletion or worker job is under way, leave the loop. */
void sandboxes_stop_if_idle(struct engine *d);
struct sandbox *sandbox_find(struct engine *d, const char *id);
/* sandbox_find, or NULL with a 404 "no sandbox 'ID'" in err. */
struct sandbox *sandbox_lookup(struct engine *d, const char *id, struct cove_err *err);
/* A sandbox a listing shows: not being deleted, not in a warm pool. */
bool sandbox_listed(const struct sandbox *sb);
/* Create and boot a sandbox from spec (its env is moved out). Its root is
 * a new, empty one, or, when from is not NULL, a writable snapshot of the
 * subvolume from (a snapshot's files), whose image spec->image_dir names. */
int sandbox_create(struct engine *d, struct sandbox_spec *spec, const char *from, struct sandbox **ret,
		   struct cove_err *err);
/* Create and boot count sandboxes from spec (copied), each on a root
 * already taken: <pool>/sandboxes/<ids[i]>, a writable snapshot of from
 * made by the caller (a fork takes all its copies' roots in one frozen
 * instant), or, ids NULL, each on a snapshot of from taken here. Their
 * runtimes (or, with d->mem_from, their restores) start at once. All or
 * nothing: on failure no sandbox is left and every root is deleted. */
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
/* Copy a spec (its JSON values deep): 0, or -1 out of memory (to freed). */
int sandbox_spec_copy(const struct sandbox_spec *from, struct sandbox_spec *to);
/* Record sb's row (its spec and state) in state.db. */
int sandbox_save(struct engine *d, struct sandbox *sb, struct cove_err *err);
/* For lifecycle.c: start cove-init on sb's files (its cgroups made, the
 * runtime started, the connection attached); and the other way, forget
 * the connection to it (nothing killed). */
int sandbox_boot(struct engine *d, struct sandbox *sb, struct cove_err *err);
void sandbox_detach(struct sandbox *sb);
/* Whether pid is still the process that started at start (its pid not reused). */
bool sandbox_pid_is(pid_t pid, uint64_t start);
int sandbox_send(struct sandbox *sb, const void *buf, size_t len, const int *fds, int nfds);
/* Close the connection to sb's cove-init, once init has closed its end
 * (what it sent meanwhile is handled): for a memory snapshot's dump. */
int sandbox_init_detach(struct sandbox *sb, struct cove_err *err);
/* Take back the kept processes and sessions of sb's cove-init (WIRE_LIST)
 * before returning: a restored sandbox's, whose answer lists them. */
int sandbox_init_take_kept(struct sandbox *sb, struct cove_err *err);
/* Connect to sb's cove-init again after sandbox_init_detach. */
int sandbox_init_reattach(struct engine *d, struct sandbox *sb, struct cove_err *err);
void sandbox_spec_free(struct sandbox_spec *spec);
json_t *sandbox_spec_to_json(const struct sandbox_spec *s);
/* A new root's user s->user (a name), with a home /home/<name> (mode
 * 0750, its own) and a group of the same name and id (the first id from
 * 1000 that the image's passwd and group leave free), written into the
 * root's upper layer before it is mounted: when s->make_user is set and the
 * image has no such user (workdir.c). */
int sandbox_user_make(const struct sandbox_spec *s, const char *image, const char *subvol, struct cove_err *err);
/* s->workdir, unless set, from what was asked (workdir.c). */
void sandbox_workdir_resolve(struct sandbox_spec *s, const char *image, const char *subvol);
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
/* snapshot_create_with, and with memory its processes too (memsnap.c):
 * files and memory of one frozen instant, both on disk before the row
 * commits. A sandbox memory snapshots cannot hold is a 409, nothing made. */
int snapshot_create_mem(struct engine *d, struct sandbox *sb, const char *name, bool memory, snapshot_rows_fn rows,
			void *arg, struct snapshot **ret, struct cove_err *err);
/* The same, returning right after the subvolume snapshot and its row: the
 * snapshot is listed, durable false, until a worker thread has made it
 * durable (wait_durable false). A memory snapshot's images are synced
 * before its row. */
int snapshot_create_nowait(struct engine *d, struct sandbox *sb, const char *name, bool memory, struct snapshot **ret,
			   struct cove_err *err);
/* Where snapshot id's memory images are (a memory snapshot's):
 * <pool>/snapshots/<id>/criu. */
void snapshot_criu_dir(const struct engine *d, const char *id, char *buf, size_t cap);
/* Refused (409) while a checkpoint names it (history.c). */
int snapshot_delete(struct engine *d, struct snapshot *sn, struct cove_err *err);
/* A new sandbox from sn; overrides (name, memory, cpu_millis, pids, disk
 * when set, i.e. non-empty or non-zero; metadata when not NULL) replace the
 * snapshot's, and overrides' env (when not NULL) goes over its env. */
int snapshot_restore(struct engine *d, const struct snapshot *sn, const struct sandbox_spec *overrides,
		     struct sandbox **ret, struct cove_err *err);
/* count independent copies of sb, from one frozen instant: ret (count
 * entries) gets them. All or nothing. With memory, its processes go on
 * running in each copy (memsnap.c). */
int sandbox_fork(struct engine *d, struct sandbox *sb, int count, bool memory, struct sandbox **ret,
		 struct cove_err *err);

/* exec.c, procs.c, procs_attach.c, sessions.c: engine/process.h */

/* files.c, files_tar.c, export.c: engine/files.h; watch.c: engine/watch.h */

#include "engine/locks.h"
#include "engine/lifecycle.h"

/* history.c: a sandbox's ordered checkpoints, kept in state.db after the
 * sandbox is deleted (see there). id may name a deleted sandbox wherever
 * it is a const char *. */
/* Append a checkpoint to sb's history: a snapshot as snapshot_create takes
 * it (with memory, its processes too: rollback and branch resume them),
 * and a row; *ret is the checkpoint as JSON. */
int history_checkpoint(struct engine *d, struct sandbox *sb, const char *label, bool memory, json_t **ret,
		       struct cove_err *err);
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

/* templates.c, launch.c, warm.c: engine/template.h */

/* worker.c: slow work off the loop. work(arg) runs on a thread of its own
 * and may touch only what arg holds; then done(arg) runs on the loop. */
typedef void (*worker_fn)(void *arg);
int worker_start(struct event_base *base, worker_fn work, worker_fn done, void *arg, struct cove_err *err);
/* Some job's done has not run yet. */
bool worker_busy(void);

/* coved's shared state. One libevent loop owns everything here; nothing is
 * touched from another thread. */
#pragma once
#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>
#include <limits.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "sys/cgroup.h"
#include "sys/pool.h"

#define MAX_SANDBOXES 4096 /* uid slots: 65536 host ids each */
#define UID_BASE 0x10000000u

struct exec;
struct file_op;

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
	struct file_op *file_ops; /* Files API requests waiting for cove-init */
	struct event *expire_ev;  /* deletes it at spec.expires_at (or, at load, an ephemeral one) */
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
};

struct daemon {
	struct event_base *base;
	struct evhttp *http;
	int api_fd;                             /* the API's listening socket */
	struct evhttp_bound_socket *api_handle; /* NULL once stopping */
	char data_dir[512];
	char socket_path[512];
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
	uint64_t requests;
	bool stopping; /* SIGTERM: exit once no deletion is under way */
};

extern struct daemon *daemon_ctx;

/* sandboxes.c */
int sandboxes_load(struct daemon *d, struct cove_err *err);
/* When stopping and no deletion is under way, leave the loop. */
void sandboxes_stop_if_idle(struct daemon *d);
struct sandbox *sandbox_find(struct daemon *d, const char *id);
/* Create and boot a sandbox from spec (its env is moved out). Its root is
 * a new, empty one, or, when from is not NULL, a writable snapshot of the
 * subvolume from (a snapshot's files), whose image spec->image_dir names. */
int sandbox_create(struct daemon *d, struct sandbox_spec *spec, const char *from, struct sandbox **ret,
		   struct cove_err *err);
/* Deletion is two steps: at once the sandbox is gone from the API and its
 * init is killed; its cgroups, subvolume and uid slot are released when the
 * init has died (a row in state "deleting" finishes it after a crash). */
int sandbox_delete(struct daemon *d, struct sandbox *sb, struct cove_err *err);
/* A new deadline (unix ms, > 0): recorded, then armed. */
int sandbox_set_expiry(struct daemon *d, struct sandbox *sb, int64_t expires_at, struct cove_err *err);
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
int snapshots_load(struct daemon *d, struct cove_err *err);
struct snapshot *snapshot_find(struct daemon *d, const char *id);
json_t *snapshot_to_json(const struct snapshot *sn);
/* Take a durable snapshot of sb: frozen for the instant of the subvolume
 * snapshot; on return its files, manifest and row are on disk. */
int snapshot_create(struct daemon *d, struct sandbox *sb, const char *name, struct snapshot **ret,
		    struct cove_err *err);
int snapshot_delete(struct daemon *d, struct snapshot *sn, struct cove_err *err);
/* A new sandbox from sn; overrides (name, memory, cpu_millis, pids when
 * set, i.e. non-empty or non-zero) replace the snapshot's. */
int snapshot_restore(struct daemon *d, const struct snapshot *sn, const struct sandbox_spec *overrides,
		     struct sandbox **ret, struct cove_err *err);
/* count independent copies of sb, from one frozen instant: ret (count
 * entries) gets them. All or nothing. */
int sandbox_fork(struct daemon *d, struct sandbox *sb, int count, struct sandbox **ret, struct cove_err *err);

/* exec.c */
struct exec_request {
	json_t *argv; /* array of strings */
	json_t *env;  /* object or NULL */
	const char *cwd;
	const char *user;
	const unsigned char *stdin_data;
	size_t stdin_len;
	bool has_stdin;
	double timeout; /* seconds; 0 = none */
	bool stream;
	size_t max_output;
};
int exec_start(struct sandbox *sb, struct evhttp_request *req, const struct exec_request *er, struct cove_err *err);
/* From the init connection. */
void exec_on_spawned(struct sandbox *sb, uint32_t seq, pid_t pid);
void exec_on_spawn_failed(struct sandbox *sb, uint32_t seq, int stage, int errnum);
void exec_on_exited(struct sandbox *sb, pid_t pid, int status);
/* The sandbox is going away: fail and free all its execs. */
void exec_abort_all(struct sandbox *sb, const char *why);

/* files.c: the Files API's handlers (routes in api.c) */
int files_get(struct evhttp_request *req, const char *id, struct cove_err *err);
int files_put(struct evhttp_request *req, const char *id, struct cove_err *err);
int files_delete(struct evhttp_request *req, const char *id, struct cove_err *err);
int files_mkdir(struct evhttp_request *req, const char *id, struct cove_err *err);
int files_move(struct evhttp_request *req, const char *id, struct cove_err *err);
/* From the init connection; files_on_opened takes fd (-1 if none came). */
void files_on_opened(struct sandbox *sb, uint32_t seq, uint32_t flags, int fd);
void files_on_failed(struct sandbox *sb, uint32_t seq, int errnum);
void files_on_done(struct sandbox *sb, uint32_t seq, int errnum, bool changed);
/* The sandbox is going away: fail and free all its file requests. */
void files_abort_all(struct sandbox *sb, const char *why);

/* conn.c: what hangs on a client's connection, behind its one close
 * callback: the request in progress's hook (one at a time: libevent serves
 * a connection's requests in turn) and the ephemeral sandboxes it created.
 * A hook is called when the connection closes, before libevent frees it. */
typedef void (*conn_close_fn)(struct evhttp_connection *conn, void *arg);
int conn_set_hook(struct evhttp_connection *conn, conn_close_fn fn, void *arg);
/* Detach the hook whose arg is arg (no-op if another one replaced it). */
void conn_clear_hook(struct evhttp_connection *conn, void *arg);
int conn_add_ephemeral(struct evhttp_connection *conn, const char *id);
/* Sandbox id is being deleted: no connection owns it any more. */
void conn_forget_sandbox(const char *id);

/* api.c */
void api_handle(struct evhttp_request *req, void *arg);
void api_send_error(struct evhttp_request *req, const struct cove_err *err);
void api_send_json(struct evhttp_request *req, int status, json_t *body);

/* files.c: query parameters of the Files API, shared with watch.c. */
const char *query_of(struct evhttp_request *req); /* "" when there is none */
/* One parameter, percent-decoded: 1 when present, 0 when absent, -1 (err
 * set) when malformed or holding a NUL byte. */
int query_param(const char *query, const char *name, char *out, size_t cap, struct cove_err *err);
/* Every parameter's name must be in allowed (NULL-terminated). */
int check_params(const char *query, const char *const *allowed, struct cove_err *err);
/* A required absolute path. */
int get_path(const char *query, const char *name, char out[PATH_MAX], struct cove_err *err);
/* 1, true, 0 or false; *ret untouched when absent. */
int get_flag(const char *query, const char *name, bool *ret, struct cove_err *err);

/* watch.c: file-change events under a folder, streamed (route in api.c) */
int watch_start(struct evhttp_request *req, const char *id, struct cove_err *err);
/* From the init connection: a WIRE_OPENED (fd, or -1 if none came) or
 * WIRE_OPEN_FAILED (errnum) reply. Returns false, touching nothing, when seq
 * is not a watch's; true when it was (fd taken). */
bool watch_on_init_reply(struct sandbox *sb, uint32_t seq, bool opened, int errnum, int fd);
/* The sandbox is going away: end all its watches with an error event. */
void watch_abort_all(struct sandbox *sb, const char *why);

/* libcove: the C client of coved.
 *
 * A client talks to one coved over its unix socket:
 *
 *     struct cove_error e;
 *     struct cove *c;
 *     if (cove_open("/run/cove/cove.sock", &c, &e) < 0) { puts(e.message); ... }
 *     char id[16];
 *     cove_create(c, "{\"memory\": \"512M\"}", id, &e);       // JSON spec, see the API
 *     struct cove_exec_result r;
 *     cove_exec(c, id, "{\"cmd\": \"echo hi\"}", &events, &r, &e);
 *     cove_delete(c, id, &e);
 *     cove_close(c);
 *
 * Requests and answers are the API's JSON, as text: libcove adds no model of
 * its own that could drift from the daemon's. Every call returns 0 or -1
 * with *err filled (HTTP status, error code such as "not_found", message).
 * A struct cove is one connection: use it from one thread at a time. */
#ifndef COVE_H
#define COVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COVE_DEFAULT_SOCKET "/run/cove/cove.sock"

struct cove;

struct cove_error {
	int status;    /* HTTP status; 0 when the daemon could not be reached */
	char code[32]; /* "invalid_argument", "not_found", "unreachable", ... */
	char message[512];
};

int cove_open(const char *socket_path, struct cove **ret, struct cove_error *err);
/* Or over TCP, to a coved started with --listen: host is "ADDR:PORT"
 * ("127.0.0.1:7070", "[::1]:7070"; no name lookup), token the API token
 * (coved's --token-file), sent with every request. Plain HTTP: the token is
 * as safe as the path to coved (loopback, or a tunnel). */
int cove_open_tcp(const char *host, const char *token, struct cove **ret, struct cove_error *err);
void cove_close(struct cove *c);

/* Any API call: method, path ("/v1/sandboxes"), JSON body or NULL. On
 * success *ret_json (if not NULL) receives the response body (free it). */
int cove_call(struct cove *c, const char *method, const char *path, const char *body, char **ret_json,
	      struct cove_error *err);

/* Create a sandbox from a JSON spec (NULL = defaults); its ID goes to id. */
int cove_create(struct cove *c, const char *spec_json, char id[16], struct cove_error *err);
int cove_delete(struct cove *c, const char *id, struct cove_error *err);

struct cove_exec_events {
	void (*on_start)(void *arg, int pid);
	/* fd is 1 for stdout, 2 for stderr; the bytes are exact. */
	void (*on_output)(void *arg, int fd, const char *buf, size_t len);
	void *arg;
	/* Attach streams only: lost bytes of fd's output that came before
	 * what the process's retained tail (1 MiB per stream) still holds. */
	void (*on_gap)(void *arg, int fd, unsigned long long lost);
};

struct cove_exec_result {
	int exit_code; /* -1 when killed by a signal */
	int signal;    /* 0 unless killed by a signal */
	bool timed_out;
};

/* Run a command (an exec request as JSON: cmd, env, cwd, user, stdin,
 * timeout), streaming its output to events as it is produced. */
int cove_exec(struct cove *c, const char *id, const char *request_json, const struct cove_exec_events *events,
	      struct cove_exec_result *ret, struct cove_error *err);

/* A regular file of a sandbox, whole, into *ret_data (free it; a NUL
 * follows the bytes). Bounded by libcove's maximum response (64 MiB). The
 * path is resolved inside the sandbox, never on the host. */
int cove_read_file(struct cove *c, const char *id, const char *path, char **ret_data, size_t *ret_len,
		   struct cove_error *err);
/* Create or replace a sandbox's file with len bytes, owned by the
 * sandbox's user; mode like "0755", or NULL for 0644 (new files). */
int cove_write_file(struct cove *c, const char *id, const char *path, const void *data, size_t len, const char *mode,
		    struct cove_error *err);

/* Named locks of a sandbox: mutual exclusion between the clients that work
 * in it, with a lease. Held in coved's memory (a coved restart forgets
 * them); the lease bounds how long a holder that died keeps the others out. */
struct cove_lock {
	char name[256];       /* 1 to 255 bytes, often a path; compared byte for byte */
	char token[65];       /* the holder's proof */
	long long expires_at; /* unix ms: when the lease runs out unless renewed */
};
/* Take lock name of sandbox id for lease seconds (<= 3600), waiting up to
 * wait seconds (0: try once, <= 3600) behind earlier waiters, first come,
 * first served. Not granted in time: -1 with err->code "lock_held". */
int cove_lock_acquire(struct cove *c, const char *id, const char *name, double lease, double wait,
		      struct cove_lock *ret, struct cove_error *err);
/* Extend a held lock's lease to lease seconds from now (lock->expires_at
 * follows). A lock no longer held with this token: code "wrong_state". */
int cove_lock_renew(struct cove *c, const char *id, struct cove_lock *lock, double lease, struct cove_error *err);
/* Release a held lock: the first waiter gets it. */
int cove_lock_release(struct cove *c, const char *id, const struct cove_lock *lock, struct cove_error *err);
/* The rest of the Files API; every path is the sandbox's, resolved inside
 * it as its user. A stat: {name, path, type, size, mode, mtime, uid, gid
 * [, target]} into *ret_json (free it). */
int cove_stat(struct cove *c, const char *id, const char *path, char **ret_json, struct cove_error *err);
/* A folder's entries, depth levels down (1: its own), as {path, entries,
 * truncated}; each entry is shaped like a stat. */
int cove_list(struct cove *c, const char *id, const char *path, int depth, char **ret_json, struct cove_error *err);
/* Remove a file, a symlink or an empty folder; with recursive, a folder and
 * all it holds. A missing path is no error: *ret_deleted (if not NULL)
 * says whether something was there. */
int cove_remove(struct cove *c, const char *id, const char *path, bool recursive, bool *ret_deleted,
		struct cove_error *err);
int cove_mkdir(struct cove *c, const char *id, const char *path, struct cove_error *err); /* mkdir -p */
int cove_move(struct cove *c, const char *id, const char *from, const char *to, bool overwrite, struct cove_error *err);
int cove_chmod(struct cove *c, const char *id, const char *path, const char *mode, struct cove_error *err);

/* Receives a download's bytes as they arrive; a non-zero return stops it. */
typedef int (*cove_data_fn)(void *arg, const char *buf, size_t len);
/* A regular file, streamed to on_data: no size bound, unlike cove_read_file. */
int cove_read_file_stream(struct cove *c, const char *id, const char *path, cove_data_fn on_data, void *arg,
			  struct cove_error *err);
/* A folder as an uncompressed tar, streamed to on_data; member names are
 * relative to the folder. */
int cove_read_tar(struct cove *c, const char *id, const char *path, cove_data_fn on_data, void *arg,
		  struct cove_error *err);
/* Extract an uncompressed tar (len bytes) into a folder of the sandbox,
 * made if missing; what it makes belongs to the sandbox's user. *ret_json
 * (if not NULL): {path, entries, skipped, created}. */
int cove_write_tar(struct cove *c, const char *id, const char *path, const void *tar, size_t len, char **ret_json,
		   struct cove_error *err);

/* An upload's bytes, read from fd as they are sent (libcove holds 64
 * KiB of them at a time, whatever the size): len bytes from fd's
 * offset, or, when len < 0, until EOF (a pipe; sent chunked). progress
 * (may be NULL) hears how many bytes went so far, after each piece. */
struct cove_source {
	int fd;
	long long len;
	void (*progress)(void *arg, unsigned long long sent);
	void *arg;
};
/* As cove_write_file and cove_write_tar, streaming: no size bound. A
 * source that ends before len bytes fails the call ("invalid_argument");
 * as with any upload cut short, the file keeps what was sent. */
int cove_write_file_from(struct cove *c, const char *id, const char *path, const struct cove_source *src,
			 const char *mode, struct cove_error *err);
int cove_write_tar_from(struct cove *c, const char *id, const char *path, const struct cove_source *src,
			char **ret_json, struct cove_error *err);

/* Sessions: a persistent shell in a sandbox whose cwd, variables, functions
 * and aliases carry over between commands. options_json: {"cwd","env",
 * "user"} or NULL. A command runs in one with cove_exec and a request that
 * names it: {"cmd": "cd /src && make", "session": "<session_id>"}. */
int cove_session_create(struct cove *c, const char *id, const char *options_json, char session_id[24],
			struct cove_error *err);
int cove_session_delete(struct cove *c, const char *id, const char *session_id, struct cove_error *err);
/* ---- Kept processes: background jobs and terminals ----
 *
 * A kept process is started by an exec request with "background": true (or
 * "tty": true): coved answers with its pid at once, keeps its output (the
 * last 1 MiB of each stream), and the process outlives the client, and
 * coved. It is named by its pid or by the "tag" given at its start, both as
 * text here ("42", "web"): proc below is either.
 *
 *     int pid;
 *     cove_proc_start(c, id, "{\"cmd\": \"make\", \"tag\": \"build\"}", &pid, &e);
 *     cove_proc_attach(c, id, "build", true, &events, &r, &e);  // replay, follow, exit status
 */

/* Start a kept process. request_json is an exec request (cmd, env, cwd,
 * user, stdin, timeout, tag, stdin_open, tty, rows, cols); libcove adds
 * "background": true. */
int cove_proc_start(struct cove *c, const char *id, const char *request_json, int *ret_pid, struct cove_error *err);
/* The sandbox's kept processes, as the API's JSON {"processes": [...]}
 * (free it): running ones and the last ended ones. */
int cove_proc_list(struct cove *c, const char *id, char **ret_json, struct cove_error *err);
/* One process as JSON (pid, tag, cmd, state "running" or "exited",
 * exit_code, signal, ...; free it). With wait > 0, the answer comes when
 * the process has ended or after wait seconds (at most 86400), whichever is
 * first: its state tells which. */
int cove_proc_get(struct cove *c, const char *id, const char *proc, double wait, char **ret_json,
		  struct cove_error *err);
/* Wait for the process's end, however long that takes; its exit status
 * goes to *ret. */
int cove_proc_wait(struct cove *c, const char *id, const char *proc, struct cove_exec_result *ret,
		   struct cove_error *err);
/* Write len bytes to the process's stdin (a pipe it was started with
 * "stdin_open": true, or a terminal's input); eof then closes it (a
 * terminal gets its EOF character, ^D). Returns once coved has written
 * the bytes: a process that does not read holds the call. */
int cove_proc_stdin(struct cove *c, const char *id, const char *proc, const void *data, size_t len, bool eof,
		    struct cove_error *err);
/* Send a signal: a name ("TERM", "SIGTERM"), a number as text ("15"), or
 * NULL for KILL; tree: to all of its descendants too. */
int cove_proc_signal(struct cove *c, const char *id, const char *proc, const char *signal, bool tree,
		     struct cove_error *err);
/* A terminal's new window size; its foreground processes get SIGWINCH. */
int cove_proc_resize(struct cove *c, const char *id, const char *proc, int rows, int cols, struct cove_error *err);
/* Follow a process's output: the retained tail first (when replay), then
 * live output, until it has ended; its exit status goes to *ret. */
int cove_proc_attach(struct cove *c, const char *id, const char *proc, bool replay,
		     const struct cove_exec_events *events, struct cove_exec_result *ret, struct cove_error *err);

/* ---- Streams read at the caller's pace ----
 *
 * For programs that wait on several things at once, like a terminal (the
 * user's keys, the window size, the output): a stream has its own
 * connection, so c stays free for stdin and resize calls meanwhile, and an
 * fd to poll. A terminal is an exec stream of a request with "tty": true
 * and no "background": coved kills it when the stream's connection closes,
 * and its output waits for the stream's reader.
 *
 *     cove_stream_exec(c, id, "{\"cmd\": \"bash\", \"tty\": true}", &events, &s, &e);
 *     // poll cove_stream_fd(s) with the rest; when it is readable:
 *     //     r = cove_stream_read(s, &result, &e);   // 1: ended, 0: more to come
 *     cove_stream_close(s);
 */
struct cove_stream;

/* Start an exec (request as for cove_exec) and stream its events. */
int cove_stream_exec(struct cove *c, const char *id, const char *request_json, const struct cove_exec_events *events,
		     struct cove_stream **ret, struct cove_error *err);
/* Attach to a kept process, as cove_proc_attach does. */
int cove_stream_attach(struct cove *c, const char *id, const char *proc, bool replay,
		       const struct cove_exec_events *events, struct cove_stream **ret, struct cove_error *err);
int cove_stream_fd(const struct cove_stream *s);
/* Read what has arrived (waiting for something if nothing has) and call the
 * events. 1 once the process's exit came (*ret filled), 0 when more is to
 * come (also after a signal interrupted the wait), -1 on an error: the
 * request's own (an unknown process is a 404), or the stream's end without
 * an exit. After 1 or -1 the stream is over: close it. */
int cove_stream_read(struct cove_stream *s, struct cove_exec_result *ret, struct cove_error *err);
void cove_stream_close(struct cove_stream *s);

/* A terminal's own connection, switched to its raw bytes (an HTTP upgrade,
 * as docker attach): *ret_fd is a socket (close it when done) that reads
 * the terminal's output, the retained tail first when replay, then live,
 * until coved closes it once the process has ended; what is written to it
 * is typed into the terminal; shutdown(fd, SHUT_WR) types its EOF (^D).
 * foreground: the process goes with this connection (killed, with its
 * descendants, if it closes first) and its output waits for this reader,
 * as a terminal waits for its user. The exit status: cove_proc_wait; the
 * window size: cove_proc_resize. A process that is not a terminal is a
 * 409 (attach to its NDJSON stream instead).
 *
 *     cove_proc_start(c, id, "{\"cmd\": \"bash\", \"tty\": true}", &pid, &e);
 *     cove_proc_attach_tty(c, id, "42", true, true, &fd, &e);
 *     // poll fd with the user's keys; read until EOF
 *     cove_proc_wait(c, id, "42", &result, &e);
 */
int cove_proc_attach_tty(struct cove *c, const char *id, const char *proc, bool replay, bool foreground, int *ret_fd,
			 struct cove_error *err);

/* A raw TCP stream to port of sandbox id, over coved's API connection (an
 * HTTP upgrade, as attach): *ret_fd is a socket whose bytes are the
 * port's, both ways; shutdown(fd, SHUT_WR) is the port's EOF; coved closes
 * it when the port does. What cove port-forward runs for each local
 * connection. A port where nothing listens: the stream ends at once. Ports
 * as URLs (HTTP through coved's port proxy) are cove_call's:
 *
 *     cove_call(c, "POST", "/v1/sandboxes/<id>/ports", "{\"port\": 8000}", &json, &err);
 */
int cove_port_forward(struct cove *c, const char *id, int port, int *ret_fd, struct cove_error *err);

/* Checkpoints: a sandbox's ordered history of durable snapshots, numbered
 * 1, 2, 3..., which coved keeps after the sandbox is deleted (until
 * DELETE /v1/sandboxes/<id>/checkpoints). Take one (label may be NULL, at
 * most 255 bytes); its number goes to *ret_seq. */
int cove_checkpoint(struct cove *c, const char *id, const char *label, int *ret_seq, struct cove_error *err);
/* A new sandbox (its ID into ret_id) from checkpoint seq of id's history;
 * id may be a deleted sandbox. The original is left as it is. The new
 * sandbox's history starts as id's up to seq: its next checkpoint is
 * seq + 1, with parent seq. */
int cove_rollback(struct cove *c, const char *id, int seq, char ret_id[16], struct cove_error *err);
/* As cove_rollback, count (1 to 100) new sandboxes, each a branch of its
 * own beside the original's line; ret_ids has count entries. */
int cove_branch(struct cove *c, const char *id, int seq, int count, char (*ret_ids)[16], struct cove_error *err);
/* The history itself is JSON, {sandbox, live, origin, checkpoints: [{seq,
 * parent, label, snapshot, sandbox, created_at}], derived}, from
 *     cove_call(c, "GET", "/v1/sandboxes/<id>/checkpoints", NULL, &json, &err);
 * and DELETE on that path forgets it, with the snapshots only it needed. */
/* One file-change event of a watch. type: "start" (once, first: from then
 * on no change is missed), "create", "write", "remove", "rename", "chmod",
 * or "overflow" (events were lost); name: relative to the watched folder
 * ("" for start and overflow). A rename comes in two halves: moved "from"
 * the old name, then "to" the new one (the json's "cookie" pairs them; a
 * half alone moved out of or into the folder). json is the whole event as
 * the API sent it. All borrowed for the callback's duration. */
struct cove_watch_event {
	const char *type;
	const char *name;
	bool is_dir;
	const char *moved; /* renames: "from" or "to"; else NULL */
	const char *json;
};

/* Return non-zero to stop watching. */
typedef int (*cove_watch_fn)(void *arg, const struct cove_watch_event *ev);

/* Watch a folder of a sandbox (recursive: and every folder below it, made
 * before or after), calling fn for each event as it comes; keepalives are
 * not passed on. Blocks until fn returns non-zero (then 0: the connection
 * is closed, which frees the watch in coved) or the stream ends: -1 with
 * err, e.g. "not_found" when the folder was removed, "wrong_state" when the
 * sandbox was deleted. A missing folder is "not_found", a file
 * "invalid_argument", as for the other calls. */
int cove_watch(struct cove *c, const char *id, const char *path, bool recursive, cove_watch_fn fn, void *arg,
	       struct cove_error *err);

/* Take the work home: a folder, or (path NULL) everything the sandbox
 * changed over its image (a tar or zip ends with .cove-manifest.json, the
 * deletions; an external sandbox: its workspace folder), as format "tar",
 * "zip" or "json" (the portable snapshot {"version": 1, "files": [...]},
 * which has no deletions), streamed to on_data. */
int cove_export(struct cove *c, const char *id, const char *path, const char *format, cove_data_fn on_data, void *arg,
		struct cove_error *err);
/* What an export of the changes held: the changed paths and the deletions
 * (the portable snapshot leaves those out); -1 when not told (a folder). */
struct cove_export_info {
	int64_t entries;
	int64_t deleted;
};
/* cove_export, and its counts into *info (when not NULL). */
int cove_export_counted(struct cove *c, const char *id, const char *path, const char *format, cove_data_fn on_data,
			void *arg, struct cove_export_info *info, struct cove_error *err);
/* Make a portable snapshot's files (json, len bytes) in a folder (path
 * NULL: the workspace) as the sandbox's user. Validated whole first: a bad
 * document changes nothing. *ret_json (if not NULL): {path, entries,
 * skipped, created}. */
int cove_import_portable(struct cove *c, const char *id, const char *path, const void *json, size_t len,
			 char **ret_json, struct cove_error *err);

/* Images. An OCI image layout or a docker archive, as a tar read from src
 * (see cove_source), imported and named name (may be NULL); *ret_json (if
 * not NULL): the image. */
int cove_image_import_from(struct cove *c, const struct cove_source *src, const char *name, char **ret_json,
			   struct cove_error *err);
/* A pull's progress: a layer's bytes (status "waiting", "downloading",
 * "verified", "exists", "unpacked"). */
struct cove_image_event {
	const char *digest;
	const char *status;
	unsigned long long done, total;
};
/* Non-zero from it stops the pull (the connection is closed). */
typedef int (*cove_image_fn)(void *arg, const struct cove_image_event *ev);
/* Pull ref from its registry (as coved's --registry-auth logs in), fn (may
 * be NULL) hearing of each layer; *ret_json (if not NULL): the image. The
 * rest of the image API (GET/DELETE /v1/images/...) is cove_call's. */
int cove_image_pull(struct cove *c, const char *ref, cove_image_fn fn, void *arg, char **ret_json,
		    struct cove_error *err);

#ifdef __cplusplus
}
#endif
#endif

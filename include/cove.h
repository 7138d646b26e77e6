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

#ifdef __cplusplus
}
#endif
#endif

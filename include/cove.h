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

#ifdef __cplusplus
}
#endif
#endif

/* Inside E2B's front end: its shared replies and the envd request's
 * context. */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "common/error.h"
#include "daemon/api/reply.h"
#include "daemon/http/httpd.h"

struct sandbox;

#define E2B_ENVD_VERSION "0.5.7"
#define E2B_ENVD_PORT "49983"
#define E2B_USER "user" /* E2B's default user, with home /home/user */

/* body (consumed) as the answer, application/json. */
void e2b_json(struct http_req *req, int status, json_t *body);
/* The control plane's and envd REST's error: {"code": status, "message"}. */
void e2b_error(struct http_req *req, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* err as that error, its status from its code. */
void e2b_error_of(struct http_req *req, const struct cove_err *err);
/* The port proxy's "DOMAIN:PORT" (E2B's sandbox domain), false when it
 * does not serve. */
bool e2b_proxy_domain(char *out, size_t cap);
/* unix ms as RFC 3339 with milliseconds, UTC. */
void e2b_iso_time(int64_t ms, char out[32]);
/* The sandbox's envd access token. */
void e2b_envd_token(const struct sandbox *sb, char out[64]);

/* control.c */
void e2b_control(struct http_req *req);
/* The SDK's Sandbox (with_token: create's and connect's answer) or its
 * ListedSandbox and info; the template it shows. */
json_t *e2b_sandbox_json(const struct sandbox *sb, bool with_token);
const char *e2b_template_of(const struct sandbox *sb);
/* list.c: GET /v2/sandboxes: 0 answered, or -1 with err. */
int e2b_list(struct http_req *req, struct cove_err *err);
/* snapshots.c: 0 answered, or -1 with err (restore: nothing answered). */
struct snapshot;
struct sandbox_spec;
int e2b_snapshot_create(struct http_req *req, struct sandbox *sb, struct cove_err *err);
int e2b_snapshots_list(struct http_req *req, struct cove_err *err);
int e2b_template_delete(struct http_req *req, const char *id, struct cove_err *err);
/* A sandbox from sn for a create's spec (its env over the snapshot's, its
 * metadata and deadline). */
int e2b_snapshot_restore(struct http_req *req, const struct snapshot *sn, struct sandbox_spec *spec,
			 struct sandbox **ret, struct cove_err *err);
/* metrics.c: GET /sandboxes/{id}/metrics: 0 answered, or -1 with err. */
int e2b_metrics(struct http_req *req, const struct sandbox *sb, struct cove_err *err);

/* An envd request, once routed and authorized. */
struct envd_req {
	struct http_req *req;
	struct sandbox *sb;
	char user[64];    /* "" = the sandbox's default */
	const char *path; /* after the host part */
};

/* envd.c: /health, /files */
void envd_files_get(struct envd_req *er);
void envd_files_post(struct envd_req *er);
/* A path as envd takes it: relative ones (and ~) against the user's home.
 * -1 with err when it cannot be made absolute within cap. */
int envd_abs_path(const struct envd_req *er, const char *path, char *out, size_t cap, struct cove_err *err);

/* e2b.c: Connect's unary answers; stream.c: its streams */
void connect_reply_error(struct http_req *req, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void connect_reply_err(struct http_req *req, const struct cove_err *err);
void connect_reply(struct http_req *req, json_t *msg);
/* A server stream's answer: http_output with Connect envelopes. */
struct connect_stream {
	struct http_output ho;
	struct event *keepalive;
	struct timeval interval;
	bool process; /* process events ({"event":{...}}) rather than WatchDir's */
	bool pty;
	void *arg; /* the service's */
	void (*free_arg)(void *arg);
	/* The engine's events and its close (NULL: EOS with err's code). */
	void (*on_event)(struct connect_stream *cs, const struct out_event *ev);
	void (*on_close)(struct connect_stream *cs, const struct cove_err *err);
};
struct connect_stream *connect_stream_new(struct http_req *req, bool process, struct cove_err *err);
void connect_stream_abandon(struct connect_stream *cs);
/* A stream that fails before it began: 200 and its end only. */
void connect_stream_fail(struct http_req *req, const char *code, const char *msg);
/* A client stream's answer: 200, msg (consumed), then its end ({}). */
void connect_stream_reply(struct http_req *req, json_t *msg);
/* One message (consumed) on the stream; the answer starts at the first. */
void connect_stream_send(struct connect_stream *cs, json_t *msg);
/* The stream's end: EOS with the error code and msg (code NULL: {}). */
void connect_stream_end(struct connect_stream *cs, const char *code, const char *msg);

/* process.c, filesystem.c: the services. method is after the '/'. */
void process_service(struct envd_req *er, const char *method);
void filesystem_service(struct envd_req *er, const char *method);
/* filesystem.c: a request's path (key, required), absolute, into out
 * (PATH_MAX); a watch event as envd's FilesystemEvent (NULL: not a change). */
struct watch_event;
int fs_request_path(struct envd_req *er, json_t *j, const char *key, char *out, struct cove_err *err);
json_t *fs_event_json(const struct watch_event *w);
/* watcher.c: CreateWatcher, GetWatcherEvents, RemoveWatcher (method): 0
 * answered, or -1 with err. */
int watcher_call(struct envd_req *er, const char *method, json_t *j, struct cove_err *err);
/* The request's JSON: 0, or -1 answered. */
int connect_read(struct envd_req *er, bool stream, json_t **ret);

/* libcove's internals, shared by its files (cove.c: connections, requests,
 * exec, processes, streams, history; files.c: the Files API, watch and
 * export). Not installed: the public API is include/cove.h. */
#pragma once
#include <jansson.h>
#include <stddef.h>

#include "client/http.h"
#include "cove.h"

#define MAX_RESPONSE (64u << 20)
#define MAX_EVENT_LINE (16u << 20) /* one NDJSON event of a stream */

struct cove {
	char socket_path[108];
	int fd;
	int requests_on_fd; /* > 0: the connection is a reused keep-alive one */
	char host[64];      /* TCP "ADDR:PORT" instead of the socket, or "" */
	char *auth;         /* "Authorization: Bearer <token>\r\n" with host */
};

/* Where the daemon is, for messages. */
const char *client_daemon_address(const struct cove *c);
/* Fill err (if not NULL); returns -1. */
int client_set_error(struct cove_error *err, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* c->fd connected (a kept-alive connection, or a new one); 0 or -1. */
int client_connect(struct cove *c, struct cove_error *err);
/* An error response's {"error": {"code", "message"}} into err; -1. */
int client_error_from_body(int status, const char *body, struct cove_error *err);
/* One request, retried once on a new connection when a kept-alive one
 * was closed by the daemon meanwhile (and only then). */
int client_request_raw(struct cove *c, const char *method, const char *path, const char *body, size_t body_len,
		       http_body_cb on_body, void *arg, struct http_response *res, struct cove_error *err);
/* A JSON answer to *ret_json (when not NULL), or its error to err. */
int client_take_json(struct http_response *res, char **ret_json, struct cove_error *err);
/* Append "<sep>name=<value, percent-encoded>" to the NUL-terminated buf. */
int client_add_param(char *buf, size_t cap, char sep, const char *name, const char *value, struct cove_error *err);

/* An NDJSON body's lines, gathered (up to MAX_EVENT_LINE) and handed to fn
 * one at a time, without the newline; fn's non-zero stops the stream. */
struct client_lines {
	int (*fn)(void *arg, const char *line, size_t len);
	void *arg;
	char *line; /* free it after the request */
	size_t len, cap;
};
/* An http_body_cb: 0 to go on, 1 to stop (fn said so, or a line too long). */
int client_lines_feed(void *lines, const char *buf, size_t n);
/* An NDJSON line's "type" (j may be NULL: then NULL). An error, a line
 * {"type":"error","error":{code,message}} or an error answer instead of
 * the stream, is "error", its code and message copied (32 and 512 bytes). */
const char *client_line_type(json_t *j, char *code, char *message);
/* The HTTP status an error code ("not_found") stands for. */
int client_status_of_code(const char *code);

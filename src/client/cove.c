/* libcove: see include/cove.h. */
#include "cove.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/http.h"
#include "common/encoding.h"

#define MAX_RESPONSE (64u << 20)
#define MAX_EVENT_LINE (16u << 20)

struct cove {
	char socket_path[108];
	int fd;
	int requests_on_fd; /* > 0: the connection is a reused keep-alive one */
};

static int set_error(struct cove_error *err, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int set_error(struct cove_error *err, int status, const char *code, const char *fmt, ...)
{
	if (!err)
		return -1;
	err->status = status;
	snprintf(err->code, sizeof(err->code), "%s", code);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return -1;
}

static int connect_daemon(struct cove *c, struct cove_error *err)
{
	if (c->fd >= 0)
		return 0;
	c->fd = http_connect_unix(c->socket_path);
	c->requests_on_fd = 0;
	if (c->fd < 0)
		return set_error(err, 0, "unreachable", "cannot reach coved at '%s': %s", c->socket_path,
				 strerror(-c->fd));
	return 0;
}

int cove_open(const char *socket_path, struct cove **ret, struct cove_error *err)
{
	struct cove *c = calloc(1, sizeof(*c));
	if (!c)
		return set_error(err, 0, "internal", "out of memory");
	if (strlen(socket_path) >= sizeof(c->socket_path)) {
		free(c);
		return set_error(err, 0, "invalid_argument", "socket path too long");
	}
	strcpy(c->socket_path, socket_path);
	c->fd = -1;
	if (connect_daemon(c, err) < 0) {
		free(c);
		return -1;
	}
	*ret = c;
	return 0;
}

void cove_close(struct cove *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

/* An error response's {"error": {"code", "message"}} into err. */
static int error_from_body(int status, const char *body, struct cove_error *err)
{
	json_t *j = body ? json_loads(body, 0, NULL) : NULL;
	const char *code = "internal", *message = "no message";
	json_unpack(j, "{s:{s?s, s?s}}", "error", "code", &code, "message", &message);
	set_error(err, status, code, "%s", message);
	json_decref(j);
	return -1;
}

static int request_raw(struct cove *c, const char *method, const char *path, const char *body, size_t body_len,
		       http_body_cb on_body, void *arg, struct http_response *res, struct cove_error *err)
{
	struct cove_err e = { 0 };
	/* A kept-alive connection may have been closed by the daemon since the
	 * last call: then, and only then, the request is sent again on a new
	 * one. Any other failure is final: a POST must never run twice. */
	for (int attempt = 0; attempt < 2; attempt++) {
		if (connect_daemon(c, err) < 0)
			return -1;
		memset(&e, 0, sizeof(e));
		memset(res, 0, sizeof(*res));
		bool reused = c->requests_on_fd++ > 0;
		if (http_request(c->fd, method, path, NULL, body, body_len, on_body, arg, MAX_RESPONSE, res, &e) == 0)
			return 0;
		close(c->fd);
		c->fd = -1;
		if (!reused || e.code != ECONNRESET)
			break;
	}
	return set_error(err, 0, "unreachable", "coved at '%s': %s", c->socket_path, e.msg);
}

static int request(struct cove *c, const char *method, const char *path, const char *body, http_body_cb on_body,
		   void *arg, struct http_response *res, struct cove_error *err)
{
	return request_raw(c, method, path, body, body ? strlen(body) : 0, on_body, arg, res, err);
}

int cove_call(struct cove *c, const char *method, const char *path, const char *body, char **ret_json,
	      struct cove_error *err)
{
	struct http_response res;
	if (request(c, method, path, body, NULL, NULL, &res, err) < 0)
		return -1;
	if (res.status >= 300) {
		error_from_body(res.status, res.body, err);
		free(res.body);
		return -1;
	}
	if (ret_json)
		*ret_json = res.body;
	else
		free(res.body);
	return 0;
}

int cove_create(struct cove *c, const char *spec_json, char id[16], struct cove_error *err)
{
	char *body = NULL;
	if (cove_call(c, "POST", "/v1/sandboxes", spec_json ? spec_json : "{}", &body, err) < 0)
		return -1;
	json_t *j = json_loads(body, 0, NULL);
	const char *s = json_string_value(json_object_get(j, "id"));
	int r = s && strlen(s) < 16 ? (strcpy(id, s), 0) : set_error(err, 500, "internal", "no id in the answer");
	json_decref(j);
	free(body);
	return r;
}

int cove_delete(struct cove *c, const char *id, struct cove_error *err)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	return cove_call(c, "DELETE", path, NULL, NULL, err);
}

/* NDJSON event stream of an exec, split into lines. */
struct exec_stream {
	const struct cove_exec_events *events;
	struct cove_exec_result *result;
	char *line;
	size_t len, cap;
	bool ended;
	char error_code[32], error_message[512];
};

static void output_event(struct exec_stream *s, int fd, json_t *j)
{
	const char *text = json_string_value(json_object_get(j, "data"));
	const char *b64 = json_string_value(json_object_get(j, "data_b64"));
	if (text && s->events && s->events->on_output)
		s->events->on_output(s->events->arg, fd, text, json_string_length(json_object_get(j, "data")));
	if (b64 && s->events && s->events->on_output) {
		size_t n = strlen(b64);
		unsigned char *buf = malloc(n / 4 * 3 + 3);
		long m = buf ? base64_decode(b64, n, buf) : -1;
		if (m >= 0)
			s->events->on_output(s->events->arg, fd, (char *)buf, (size_t)m);
		free(buf);
	}
}

static int signal_number(const char *name)
{
	for (int i = 1; i < NSIG; i++) {
		const char *n = sigabbrev_np(i);
		if (n && strcmp(n, name) == 0)
			return i;
	}
	return 0;
}

static void handle_event(struct exec_stream *s, json_t *j)
{
	const char *type = json_string_value(json_object_get(j, "type"));
	if (!type)
		type = json_object_get(j, "error") ? "error" : "";
	if (strcmp(type, "start") == 0 && s->events && s->events->on_start)
		s->events->on_start(s->events->arg, (int)json_integer_value(json_object_get(j, "pid")));
	else if (strcmp(type, "stdout") == 0)
		output_event(s, 1, j);
	else if (strcmp(type, "stderr") == 0)
		output_event(s, 2, j);
	else if (strcmp(type, "exit") == 0) {
		json_t *code = json_object_get(j, "exit_code");
		const char *sig = json_string_value(json_object_get(j, "signal"));
		s->result->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : -1;
		s->result->signal = sig ? signal_number(sig) : 0;
		s->result->timed_out = json_is_true(json_object_get(j, "timed_out"));
		s->ended = true;
	} else if (strcmp(type, "error") == 0) {
		const char *code = "internal", *message = "";
		json_unpack(j, "{s:{s?s, s?s}}", "error", "code", &code, "message", &message);
		snprintf(s->error_code, sizeof(s->error_code), "%s", code);
		snprintf(s->error_message, sizeof(s->error_message), "%s", message);
	}
}

static int on_exec_body(void *arg, const char *buf, size_t n)
{
	struct exec_stream *s = arg;
	for (size_t i = 0; i < n; i++) {
		if (buf[i] != '\n') {
			if (s->len + 2 > s->cap) {
				s->cap = s->cap ? s->cap * 2 : 4096;
				if (s->cap > MAX_EVENT_LINE * 2)
					return 1;
				s->line = realloc(s->line, s->cap);
			}
			s->line[s->len++] = buf[i];
			continue;
		}
		json_t *j = json_loadb(s->line, s->len, 0, NULL);
		if (j)
			handle_event(s, j);
		json_decref(j);
		s->len = 0;
	}
	return 0;
}

int cove_exec(struct cove *c, const char *id, const char *request_json, const struct cove_exec_events *events,
	      struct cove_exec_result *ret, struct cove_error *err)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec?stream=1", id);
	struct cove_exec_result result = { .exit_code = -1 };
	struct exec_stream s = { .events = events, .result = &result };
	struct http_response res;
	int r = request(c, "POST", path, request_json, on_exec_body, &s, &res, err);
	if (r == 0 && s.error_code[0])
		r = set_error(err, res.status >= 300 ? res.status : 409, s.error_code, "%s", s.error_message);
	else if (r == 0 && !s.ended)
		r = set_error(err, 0, "unreachable", "the exec stream ended early");
	free(s.line);
	if (r == 0)
		*ret = result;
	return r;
}

/* "/v1/sandboxes/<id>/files?path=<path, percent-encoded>" into buf. */
static int files_target(char *buf, size_t cap, const char *id, const char *path, struct cove_error *err)
{
	static const char hex[] = "0123456789ABCDEF";
	int n = snprintf(buf, cap, "/v1/sandboxes/%s/files?path=", id);
	size_t off = n < 0 ? cap : (size_t)n;
	for (const unsigned char *p = (const unsigned char *)path; *p && off + 4 < cap; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		    strchr("/-_.~", *p)) {
			buf[off++] = (char)*p;
		} else {
			buf[off++] = '%';
			buf[off++] = hex[*p >> 4];
			buf[off++] = hex[*p & 15];
		}
	}
	if (off + 4 >= cap)
		return set_error(err, 0, "invalid_argument", "path too long");
	buf[off] = '\0';
	return 0;
}

int cove_read_file(struct cove *c, const char *id, const char *path, char **ret_data, size_t *ret_len,
		   struct cove_error *err)
{
	char target[3 * 4096 + 128];
	struct http_response res;
	if (files_target(target, sizeof(target), id, path, err) < 0 ||
	    request_raw(c, "GET", target, NULL, 0, NULL, NULL, &res, err) < 0)
		return -1;
	if (res.status >= 300 || strncmp(res.content_type, "application/octet-stream", 24) != 0) {
		if (res.status < 300)
			set_error(err, res.status, "invalid_argument", "'%s' is a directory", path);
		else
			error_from_body(res.status, res.body, err);
		free(res.body);
		return -1;
	}
	*ret_data = res.body;
	*ret_len = res.body_len;
	return 0;
}

int cove_write_file(struct cove *c, const char *id, const char *path, const void *data, size_t len, const char *mode,
		    struct cove_error *err)
{
	char target[3 * 4096 + 160];
	struct http_response res;
	if (files_target(target, sizeof(target) - 32, id, path, err) < 0)
		return -1;
	if (mode)
		snprintf(target + strlen(target), 32, "&mode=%.8s", mode);
	if (request_raw(c, "PUT", target, data, len, NULL, NULL, &res, err) < 0)
		return -1;
	int r = res.status >= 300 ? error_from_body(res.status, res.body, err) : 0;
	free(res.body);
	return r;
}

/* A watch's NDJSON stream: lines are gathered in line, each handed to fn. */
struct watch_stream {
	cove_watch_fn fn;
	void *arg;
	char *line;
	size_t len, cap;
	bool stopped;
	char error_code[32], error_message[512];
};

static void watch_line(struct watch_stream *s)
{
	json_t *j = json_loadb(s->line, s->len, 0, NULL);
	const char *type = json_string_value(json_object_get(j, "type"));
	if (!type && json_object_get(j, "error"))
		type = "error"; /* an error answer instead of the stream */
	if (type && strcmp(type, "error") == 0) {
		const char *code = "internal", *message = "";
		json_unpack(j, "{s:{s?s, s?s}}", "error", "code", &code, "message", &message);
		snprintf(s->error_code, sizeof(s->error_code), "%s", code);
		snprintf(s->error_message, sizeof(s->error_message), "%s", message);
	} else if (type && strcmp(type, "keepalive") != 0) {
		const char *name = json_string_value(json_object_get(j, "name"));
		struct cove_watch_event ev = { .type = type,
					       .name = name ? name : "",
					       .is_dir = json_is_true(json_object_get(j, "is_dir")),
					       .moved = json_string_value(json_object_get(j, "moved")),
					       .json = s->line };
		s->stopped = s->fn(s->arg, &ev) != 0;
	}
	json_decref(j);
}

static int on_watch_body(void *arg, const char *buf, size_t n)
{
	struct watch_stream *s = arg;
	while (n > 0 && !s->stopped) {
		const char *nl = memchr(buf, '\n', n);
		size_t take = nl ? (size_t)(nl - buf) : n;
		if (s->len + take + 1 > s->cap) {
			size_t cap = (s->len + take + 1) * 2;
			char *bigger = cap <= MAX_EVENT_LINE ? realloc(s->line, cap) : NULL;
			if (!bigger)
				return 1;
			s->line = bigger;
			s->cap = cap;
		}
		memcpy(s->line + s->len, buf, take);
		s->len += take;
		if (!nl)
			break;
		s->line[s->len] = '\0';
		watch_line(s);
		s->len = 0;
		buf += take + 1;
		n -= take + 1;
	}
	return s->stopped ? 1 : 0;
}

static int status_of_code(const char *code)
{
	static const struct {
		const char *code;
		int status;
	} map[] = { { "invalid_argument", 400 }, { "permission_denied", 403 }, { "not_found", 404 },
		    { "wrong_state", 409 },      { "too_large", 413 },         { "no_capacity", 429 } };
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(code, map[i].code) == 0)
			return map[i].status;
	return 500;
}

int cove_watch(struct cove *c, const char *id, const char *path, bool recursive, cove_watch_fn fn, void *arg,
	       struct cove_error *err)
{
	char target[3 * 4096 + 128], files[3 * 4096 + 128];
	if (files_target(files, sizeof(files) - 32, id, path, err) < 0)
		return -1;
	/* ".../files?path=P" becomes ".../files/watch?path=P[&recursive=1]" */
	const char *query = strchr(files, '?');
	snprintf(target, sizeof(target), "%.*s/watch%s%s", (int)(query - files), files, query,
		 recursive ? "&recursive=1" : "");
	struct watch_stream s = { .fn = fn, .arg = arg };
	struct http_response res;
	int r = request_raw(c, "GET", target, NULL, 0, on_watch_body, &s, &res, err);
	if (s.stopped) {
		r = 0; /* our own doing: the connection is closed, coved frees the watch */
		if (err)
			memset(err, 0, sizeof(*err));
	} else if (r == 0 && s.error_code[0]) {
		r = set_error(err, res.status >= 300 ? res.status : status_of_code(s.error_code), s.error_code, "%s",
			      s.error_message);
	} else if (r == 0) {
		r = set_error(err, res.status >= 300 ? res.status : 0, "unreachable", "the watch stream ended early");
	}
	free(s.line);
	return r;
}

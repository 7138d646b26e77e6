/* libcove: see include/cove.h. */
#include "cove.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"
#include "client/http.h"
#include "common/encoding.h"
#include "common/netaddr.h"

#define MAX_TOKEN 4096

/* Where the daemon is, for messages. */
const char *client_daemon_address(const struct cove *c)
{
	return c->host[0] ? c->host : c->socket_path;
}

int client_set_error(struct cove_error *err, int status, const char *code, const char *fmt, ...)
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

/* A new connection to the daemon: its fd, or -1 with err set. */
static int new_connection(const struct cove *c, struct cove_error *err)
{
	int fd = c->host[0] ? http_connect_tcp(c->host) : http_connect_unix(c->socket_path);
	if (fd < 0)
		return client_set_error(err, 0, "unreachable", "cannot reach coved at '%s': %s",
					client_daemon_address(c), strerror(-fd));
	return fd;
}

int client_connect(struct cove *c, struct cove_error *err)
{
	if (c->fd >= 0)
		return 0;
	c->fd = new_connection(c, err);
	c->requests_on_fd = 0;
	return c->fd < 0 ? -1 : 0;
}

/* Connect c, a new client, and hand it to *ret; on failure it is freed. */
static int open_client(struct cove *c, struct cove **ret, struct cove_error *err)
{
	c->fd = -1;
	if (client_connect(c, err) < 0) {
		cove_close(c);
		return -1;
	}
	*ret = c;
	return 0;
}

int cove_open(const char *socket_path, struct cove **ret, struct cove_error *err)
{
	struct cove *c = calloc(1, sizeof(*c));
	if (!c)
		return client_set_error(err, 0, "internal", "out of memory");
	if (strlen(socket_path) >= sizeof(c->socket_path)) {
		free(c);
		return client_set_error(err, 0, "invalid_argument", "socket path too long");
	}
	strcpy(c->socket_path, socket_path);
	return open_client(c, ret, err);
}

int cove_open_tcp(const char *host, const char *token, struct cove **ret, struct cove_error *err)
{
	struct sockaddr_storage ss;
	socklen_t len;
	size_t n = token ? strlen(token) : 0;
	if (!host || strlen(host) >= sizeof(((struct cove *)0)->host) || netaddr_parse(host, &ss, &len) < 0)
		return client_set_error(
			err, 0, "invalid_argument",
			"bad host '%s': want ADDR:PORT with a numeric address, like 127.0.0.1:7070 or [::1]:7070",
			host ? host : "");
	/* It goes in a header: no byte may end the line or the header. */
	if (n == 0 || n > MAX_TOKEN)
		return client_set_error(err, 0, "invalid_argument", "the API token must be 1 to %d bytes", MAX_TOKEN);
	for (size_t i = 0; i < n; i++)
		if (token[i] < 0x21 || token[i] > 0x7e)
			return client_set_error(err, 0, "invalid_argument", "the API token must be visible ASCII");
	struct cove *c = calloc(1, sizeof(*c));
	if (!c || asprintf(&c->auth, "Authorization: Bearer %s\r\n", token) < 0) {
		free(c);
		return client_set_error(err, 0, "internal", "out of memory");
	}
	strcpy(c->host, host);
	return open_client(c, ret, err);
}

void cove_close(struct cove *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->auth);
	free(c);
}

/* An error response's {"error": {"code", "message"}} into err. */
int client_error_from_body(int status, const char *body, struct cove_error *err)
{
	json_t *j = body ? json_loads(body, 0, NULL) : NULL;
	const char *code = "internal", *message = "no message";
	json_unpack(j, "{s:{s?s, s?s}}", "error", "code", &code, "message", &message);
	client_set_error(err, status, code, "%s", message);
	json_decref(j);
	return -1;
}

int client_request_raw(struct cove *c, const char *method, const char *path, const char *body, size_t body_len,
		       http_body_cb on_body, void *arg, struct http_response *res, struct cove_error *err)
{
	struct cove_err e = { 0 };
	/* A kept-alive connection may have been closed by the daemon since the
	 * last call: then, and only then, the request is sent again on a new
	 * one. Any other failure is final: a POST must never run twice. */
	for (int attempt = 0; attempt < 2; attempt++) {
		if (client_connect(c, err) < 0)
			return -1;
		memset(&e, 0, sizeof(e));
		memset(res, 0, sizeof(*res));
		bool reused = c->requests_on_fd++ > 0;
		if (http_request(c->fd, method, path, c->auth, body, body_len, on_body, arg, MAX_RESPONSE, res, &e) ==
		    0)
			return 0;
		close(c->fd);
		c->fd = -1;
		if (!reused || e.code != ECONNRESET)
			break;
	}
	return client_set_error(err, 0, "unreachable", "coved at '%s': %s", client_daemon_address(c), e.msg);
}

static int request(struct cove *c, const char *method, const char *path, const char *body, http_body_cb on_body,
		   void *arg, struct http_response *res, struct cove_error *err)
{
	return client_request_raw(c, method, path, body, body ? strlen(body) : 0, on_body, arg, res, err);
}

/* A JSON answer to *ret_json (when not NULL), or its error to err. */
int client_take_json(struct http_response *res, char **ret_json, struct cove_error *err)
{
	if (res->status >= 300) {
		client_error_from_body(res->status, res->body, err);
		free(res->body);
		return -1;
	}
	if (ret_json)
		*ret_json = res->body;
	else
		free(res->body);
	return 0;
}

int cove_call(struct cove *c, const char *method, const char *path, const char *body, char **ret_json,
	      struct cove_error *err)
{
	struct http_response res;
	if (request(c, method, path, body, NULL, NULL, &res, err) < 0)
		return -1;
	return client_take_json(&res, ret_json, err);
}

int cove_create(struct cove *c, const char *spec_json, char id[16], struct cove_error *err)
{
	char *body = NULL;
	if (cove_call(c, "POST", "/v1/sandboxes", spec_json ? spec_json : "{}", &body, err) < 0)
		return -1;
	json_t *j = json_loads(body, 0, NULL);
	const char *s = json_string_value(json_object_get(j, "id"));
	int r = s && strlen(s) < 16 ? (strcpy(id, s), 0)
				    : client_set_error(err, 500, "internal", "no id in the answer");
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

int cove_session_create(struct cove *c, const char *id, const char *options_json, char session_id[24],
			struct cove_error *err)
{
	char path[128], *answer = NULL;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/sessions", id);
	if (cove_call(c, "POST", path, options_json ? options_json : "{}", &answer, err) < 0)
		return -1;
	json_t *j = json_loads(answer, 0, NULL);
	const char *sid = json_string_value(json_object_get(j, "id"));
	int r = sid && strlen(sid) < 24 ? 0 : -1;
	if (r == 0)
		snprintf(session_id, 24, "%s", sid);
	else
		client_set_error(err, 0, "protocol", "no session id in the answer");
	json_decref(j);
	free(answer);
	return r;
}

int cove_session_delete(struct cove *c, const char *id, const char *session_id, struct cove_error *err)
{
	char path[160];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/sessions/%s", id, session_id);
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

/* exit_code, signal and timed_out of an exit event or of an ended process. */
static void exit_status_from_json(json_t *j, struct cove_exec_result *ret)
{
	json_t *code = json_object_get(j, "exit_code");
	const char *sig = json_string_value(json_object_get(j, "signal"));
	ret->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : -1;
	ret->signal = sig ? signal_number(sig) : 0;
	ret->timed_out = json_is_true(json_object_get(j, "timed_out"));
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
		exit_status_from_json(j, s->result);
		s->ended = true;
	} else if (strcmp(type, "error") == 0) {
		const char *code = "internal", *message = "";
		json_unpack(j, "{s:{s?s, s?s}}", "error", "code", &code, "message", &message);
		snprintf(s->error_code, sizeof(s->error_code), "%s", code);
		snprintf(s->error_message, sizeof(s->error_message), "%s", message);
	} else if (strcmp(type, "gap") == 0 && s->events && s->events->on_gap) {
		const char *stream = json_string_value(json_object_get(j, "stream"));
		s->events->on_gap(s->events->arg, stream && strcmp(stream, "stderr") == 0 ? 2 : 1,
				  (unsigned long long)json_integer_value(json_object_get(j, "lost")));
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
		r = client_set_error(err, res.status >= 300 ? res.status : 409, s.error_code, "%s", s.error_message);
	else if (r == 0 && !s.ended)
		r = client_set_error(err, 0, "unreachable", "the exec stream ended early");
	free(s.line);
	if (r == 0)
		*ret = result;
	return r;
}

/* Append "<sep>name=<value, percent-encoded>" to the NUL-terminated buf. */
int client_add_param(char *buf, size_t cap, char sep, const char *name, const char *value, struct cove_error *err)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t off = strlen(buf);
	int n = snprintf(buf + off, cap - off, "%c%s=", sep, name);
	off = n < 0 || (size_t)n >= cap - off ? cap : off + (size_t)n;
	for (const unsigned char *p = (const unsigned char *)value; *p && off + 4 < cap; p++) {
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
		return client_set_error(err, 0, "invalid_argument", "path too long");
	buf[off] = '\0';
	return 0;
}

/* POST body (a jansson object, taken; NULL: a string that is not UTF-8) to
 * /v1/sandboxes/<id>/<verb>; the answer's object into *ret. */
static int sandbox_post(struct cove *c, const char *id, const char *verb, json_t *body, json_t **ret,
			struct cove_error *err)
{
	char path[160], *text = body ? json_dumps(body, JSON_COMPACT) : NULL, *answer = NULL;
	json_decref(body);
	if (!text)
		return client_set_error(err, 0, "invalid_argument", "a name, label or token that is not UTF-8");
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/%s", id, verb);
	int r = cove_call(c, "POST", path, text, &answer, err);
	free(text);
	if (r < 0)
		return -1;
	*ret = json_loads(answer, 0, NULL);
	free(answer);
	return *ret ? 0 : client_set_error(err, 500, "internal", "malformed answer from coved");
}

/* POST a locks request (body given as a jansson object, taken) to
 * /v1/sandboxes/<id>/locks<suffix>; the answer's object into *ret. */
static int lock_call(struct cove *c, const char *id, const char *suffix, json_t *body, json_t **ret,
		     struct cove_error *err)
{
	char verb[32];
	snprintf(verb, sizeof(verb), "locks%s", suffix);
	return sandbox_post(c, id, verb, body, ret, err);
}

int cove_lock_acquire(struct cove *c, const char *id, const char *name, double lease, double wait,
		      struct cove_lock *ret, struct cove_error *err)
{
	json_t *j;
	if (strlen(name) >= sizeof(ret->name))
		return client_set_error(err, 0, "invalid_argument", "a lock name must have 1 to 255 bytes");
	if (lock_call(c, id, "", json_pack("{s:s, s:f, s:f}", "name", name, "lease", lease, "wait", wait), &j, err) < 0)
		return -1;
	const char *token = json_string_value(json_object_get(j, "token"));
	json_t *expires = json_object_get(j, "expires_at");
	int r = token && strlen(token) < sizeof(ret->token) && json_is_integer(expires)
			? 0
			: client_set_error(err, 500, "internal", "no token in coved's answer");
	if (r == 0) {
		snprintf(ret->name, sizeof(ret->name), "%s", name);
		snprintf(ret->token, sizeof(ret->token), "%s", token);
		ret->expires_at = json_integer_value(expires);
	}
	json_decref(j);
	return r;
}

int cove_lock_renew(struct cove *c, const char *id, struct cove_lock *lock, double lease, struct cove_error *err)
{
	json_t *j;
	if (lock_call(c, id, "/renew",
		      json_pack("{s:s, s:s, s:f}", "name", lock->name, "token", lock->token, "lease", lease), &j,
		      err) < 0)
		return -1;
	json_t *expires = json_object_get(j, "expires_at");
	if (json_is_integer(expires))
		lock->expires_at = json_integer_value(expires);
	json_decref(j);
	return 0;
}

int cove_lock_release(struct cove *c, const char *id, const struct cove_lock *lock, struct cove_error *err)
{
	json_t *j;
	if (lock_call(c, id, "/release", json_pack("{s:s, s:s}", "name", lock->name, "token", lock->token), &j, err) <
	    0)
		return -1;
	json_decref(j);
	return 0;
}
/* ---- kept processes ---- */

/* "/v1/sandboxes/<id>/processes/<proc><suffix>" into buf. A pid or a tag
 * needs no escaping; anything else is refused here, before it could make
 * another path. */
static int proc_path(char *buf, size_t cap, const char *id, const char *proc, const char *suffix,
		     struct cove_error *err)
{
	static const char allowed[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
	size_t n = strlen(proc);
	if (n == 0 || n > 63 || strspn(proc, allowed) != n || strcmp(proc, ".") == 0 || strcmp(proc, "..") == 0)
		return client_set_error(err, 0, "invalid_argument", "bad process '%.63s' (want a pid or a tag)", proc);
	snprintf(buf, cap, "/v1/sandboxes/%s/processes/%s%s", id, proc, suffix);
	return 0;
}

/* cove_call with a JSON body, which it takes. */
static int call_json(struct cove *c, const char *method, const char *path, json_t *body, char **ret_json,
		     struct cove_error *err)
{
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!text)
		return client_set_error(err, 0, "internal", "out of memory");
	int r = cove_call(c, method, path, text, ret_json, err);
	free(text);
	return r;
}

int cove_proc_start(struct cove *c, const char *id, const char *request_json, int *ret_pid, struct cove_error *err)
{
	json_t *req = json_loads(request_json ? request_json : "{}", 0, NULL);
	if (!json_is_object(req)) {
		json_decref(req);
		return client_set_error(err, 0, "invalid_argument", "the request is not a JSON object");
	}
	json_object_set_new(req, "background", json_true());
	json_object_del(req, "stream"); /* the answer is the pid, not a stream */
	char path[128], *answer = NULL;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", id);
	if (call_json(c, "POST", path, req, &answer, err) < 0)
		return -1;
	json_t *j = json_loads(answer, 0, NULL);
	json_t *pid = json_object_get(j, "pid");
	int r = json_is_integer(pid) ? 0 : client_set_error(err, 500, "internal", "no pid in the answer");
	if (r == 0)
		*ret_pid = (int)json_integer_value(pid);
	json_decref(j);
	free(answer);
	return r;
}

int cove_proc_list(struct cove *c, const char *id, char **ret_json, struct cove_error *err)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/processes", id);
	return cove_call(c, "GET", path, NULL, ret_json, err);
}

int cove_proc_get(struct cove *c, const char *id, const char *proc, double wait, char **ret_json,
		  struct cove_error *err)
{
	char path[192], query[48] = "";
	if (wait > 0)
		snprintf(query, sizeof(query), "?wait=%.3f", wait);
	if (proc_path(path, sizeof(path), id, proc, query, err) < 0)
		return -1;
	return cove_call(c, "GET", path, NULL, ret_json, err);
}

int cove_proc_wait(struct cove *c, const char *id, const char *proc, struct cove_exec_result *ret,
		   struct cove_error *err)
{
	for (;;) {
		char *answer;
		/* An hour a request: well under coved's limit on a wait. */
		if (cove_proc_get(c, id, proc, 3600, &answer, err) < 0)
			return -1;
		json_t *j = json_loads(answer, 0, NULL);
		free(answer);
		const char *state = json_string_value(json_object_get(j, "state"));
		bool ended = state && strcmp(state, "exited") == 0;
		if (ended)
			exit_status_from_json(j, ret);
		json_decref(j);
		if (ended)
			return 0;
	}
}

int cove_proc_stdin(struct cove *c, const char *id, const char *proc, const void *data, size_t len, bool eof,
		    struct cove_error *err)
{
	char path[192];
	if (proc_path(path, sizeof(path), id, proc, "/stdin", err) < 0)
		return -1;
	char *b64 = malloc(base64_encoded_len(len) + 1);
	if (!b64)
		return client_set_error(err, 0, "internal", "out of memory");
	base64_encode(data, len, b64);
	json_t *req = json_pack("{s:s}", "data_b64", b64);
	free(b64);
	if (eof)
		json_object_set_new(req, "eof", json_true());
	return call_json(c, "POST", path, req, NULL, err);
}

int cove_proc_signal(struct cove *c, const char *id, const char *proc, const char *signal, bool tree,
		     struct cove_error *err)
{
	char path[192];
	if (proc_path(path, sizeof(path), id, proc, "/signal", err) < 0)
		return -1;
	json_t *req = json_pack("{s:b}", "tree", tree);
	if (signal && *signal && strspn(signal, "0123456789") == strlen(signal))
		json_object_set_new(req, "signal", json_integer(atoi(signal)));
	else if (signal)
		json_object_set_new(req, "signal", json_string(signal));
	return call_json(c, "POST", path, req, NULL, err);
}

int cove_proc_resize(struct cove *c, const char *id, const char *proc, int rows, int cols, struct cove_error *err)
{
	char path[192];
	if (proc_path(path, sizeof(path), id, proc, "/resize", err) < 0)
		return -1;
	return call_json(c, "POST", path, json_pack("{s:i, s:i}", "rows", rows, "cols", cols), NULL, err);
}

/* ---- streams ---- */

struct cove_stream {
	int fd; /* its own connection: the struct cove stays free for other calls */
	struct http_parser parser;
	struct exec_stream events;
	struct cove_exec_result result;
	char buf[65536];
};

static int stream_open(struct cove *c, const char *method, const char *path, const char *body,
		       const struct cove_exec_events *events, struct cove_stream **ret, struct cove_error *err)
{
	struct cove_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return client_set_error(err, 0, "internal", "out of memory");
	s->fd = new_connection(c, err);
	if (s->fd < 0) {
		free(s);
		return -1;
	}
	s->result.exit_code = -1;
	s->events = (struct exec_stream){ .events = events, .result = &s->result };
	http_parser_init(&s->parser, on_exec_body, &s->events);
	struct cove_err e = { 0 };
	if (http_send_request(s->fd, method, path, c->auth, body, body ? strlen(body) : 0, &e) < 0) {
		client_set_error(err, 0, "unreachable", "coved at '%s': %s", client_daemon_address(c), e.msg);
		cove_stream_close(s);
		return -1;
	}
	*ret = s;
	return 0;
}

int cove_stream_exec(struct cove *c, const char *id, const char *request_json, const struct cove_exec_events *events,
		     struct cove_stream **ret, struct cove_error *err)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec?stream=1", id);
	return stream_open(c, "POST", path, request_json, events, ret, err);
}

int cove_stream_attach(struct cove *c, const char *id, const char *proc, bool replay,
		       const struct cove_exec_events *events, struct cove_stream **ret, struct cove_error *err)
{
	char path[192];
	if (proc_path(path, sizeof(path), id, proc, replay ? "/attach" : "/attach?replay=0", err) < 0)
		return -1;
	return stream_open(c, "GET", path, NULL, events, ret, err);
}

int cove_stream_fd(const struct cove_stream *s)
{
	return s->fd;
}

int cove_stream_read(struct cove_stream *s, struct cove_exec_result *ret, struct cove_error *err)
{
	ssize_t n = read(s->fd, s->buf, sizeof(s->buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n < 0)
		return client_set_error(err, 0, "unreachable", "reading from coved: %s", strerror(errno));
	if (n > 0 && http_parser_feed(&s->parser, s->buf, (size_t)n) < 0)
		return client_set_error(err, 0, "internal", "malformed stream from coved: %s", s->parser.why);
	/* The exit and an error are each the last event of a stream, and an
	 * error answer's body is one such line. */
	if (s->events.ended) {
		*ret = s->result;
		return 1;
	}
	if (s->events.error_code[0])
		return client_set_error(err, s->parser.status >= 300 ? s->parser.status : 409, s->events.error_code,
					"%s", s->events.error_message);
	if (n == 0 || s->parser.state == HTTP_PARSE_DONE)
		return client_set_error(err, 0, "unreachable", "the stream ended early");
	return 0;
}

void cove_stream_close(struct cove_stream *s)
{
	if (!s)
		return;
	close(s->fd);
	free(s->events.line);
	free(s);
}

int cove_proc_attach(struct cove *c, const char *id, const char *proc, bool replay,
		     const struct cove_exec_events *events, struct cove_exec_result *ret, struct cove_error *err)
{
	struct cove_stream *s;
	if (cove_stream_attach(c, id, proc, replay, events, &s, err) < 0)
		return -1;
	int r;
	while ((r = cove_stream_read(s, ret, err)) == 0)
		;
	cove_stream_close(s);
	return r < 0 ? -1 : 0;
}

static int upgrade_tcp(struct cove *c, const char *path, int *ret_fd, struct cove_error *err);

int cove_proc_attach_tty(struct cove *c, const char *id, const char *proc, bool replay, bool foreground, int *ret_fd,
			 struct cove_error *err)
{
	char path[192], query[32];
	snprintf(query, sizeof(query), "/attach?replay=%d&foreground=%d", replay, foreground);
	if (proc_path(path, sizeof(path), id, proc, query, err) < 0)
		return -1;
	return upgrade_tcp(c, path, ret_fd, err);
}

int cove_port_forward(struct cove *c, const char *id, int port, int *ret_fd, struct cove_error *err)
{
	char path[128];
	if (!id || strlen(id) > 64 || strchr(id, '/') || port < 1 || port > 65535)
		return client_set_error(err, 400, "invalid_argument", "a sandbox ID and a port from 1 to 65535");
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/ports/%d/forward", id, port);
	return upgrade_tcp(c, path, ret_fd, err);
}

/* GET path upgraded to a raw TCP stream: the socket into *ret_fd. */
static int upgrade_tcp(struct cove *c, const char *path, int *ret_fd, struct cove_error *err)
{
	int fd = new_connection(c, err);
	if (fd < 0)
		return -1;
	struct http_response res = { 0 };
	struct cove_err e = { 0 };
	if (http_request_upgrade(fd, path, "tcp", c->auth, &res, &e) < 0) {
		close(fd);
		return client_set_error(err, 0, "unreachable", "coved at '%s': %s", client_daemon_address(c), e.msg);
	}
	if (res.status != 101) {
		if (res.status < 300)
			client_set_error(err, res.status, "internal", "coved answered %d to an upgrade", res.status);
		else
			client_error_from_body(res.status, res.body, err);
		free(res.body);
		close(fd);
		return -1;
	}
	free(res.body);
	*ret_fd = fd;
	return 0;
}

/* A sandbox's ID from its JSON into id. */
static int copy_id(json_t *sandbox, char id[16], struct cove_error *err)
{
	const char *s = json_string_value(json_object_get(sandbox, "id"));
	if (!s || strlen(s) >= 16)
		return client_set_error(err, 500, "internal", "no sandbox ID in coved's answer");
	strcpy(id, s);
	return 0;
}

int cove_checkpoint(struct cove *c, const char *id, const char *label, int *ret_seq, struct cove_error *err)
{
	json_t *j;
	if (sandbox_post(c, id, "checkpoints", json_pack("{s:s}", "label", label ? label : ""), &j, err) < 0)
		return -1;
	json_t *seq = json_object_get(j, "seq");
	int r = json_is_integer(seq) ? 0 : client_set_error(err, 500, "internal", "no seq in coved's answer");
	if (r == 0)
		*ret_seq = (int)json_integer_value(seq);
	json_decref(j);
	return r;
}

int cove_rollback(struct cove *c, const char *id, int seq, char ret_id[16], struct cove_error *err)
{
	json_t *j;
	if (sandbox_post(c, id, "rollback", json_pack("{s:i}", "seq", seq), &j, err) < 0)
		return -1;
	int r = copy_id(j, ret_id, err);
	json_decref(j);
	return r;
}

int cove_branch(struct cove *c, const char *id, int seq, int count, char (*ret_ids)[16], struct cove_error *err)
{
	json_t *j;
	if (sandbox_post(c, id, "branch", json_pack("{s:i, s:i}", "seq", seq, "count", count), &j, err) < 0)
		return -1;
	json_t *made = json_object_get(j, "sandboxes");
	int r = json_array_size(made) == (size_t)count
			? 0
			: client_set_error(err, 500, "internal", "coved made another count");
	for (int i = 0; r == 0 && i < count; i++)
		r = copy_id(json_array_get(made, i), ret_ids[i], err);
	json_decref(j);
	return r;
}

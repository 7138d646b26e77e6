/* cove's REST API for processes (processes.h): each request parsed into
 * the engine's typed request (engine/process.h), and the engine's answer
 * encoded: one JSON object, or NDJSON events (start, stdout, stderr, gap,
 * exit, error) as they come, or, for a terminal over an upgraded
 * connection, its bytes as they are. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>

#include "common/cleanup.h"
#include "common/encoding.h"
#include "daemon/api/processes.h"
#include "daemon/api/reply.h"
#include "daemon/api/request.h"
#include "engine/engine.h"
#include "engine/process.h"

#define API_DEFAULT_MAX_OUTPUT (16u << 20)
#define API_MAX_STDIN (64u << 20)
#define STDIN_MAX (16u << 20) /* of one request to a kept process */

static const char *const stream_names[] = { "stdout", "stderr" };

/* ---- the engine's answers over HTTP ---- */

enum answer_kind {
	ANS_EXEC,    /* an exec's or a kept process's stream, or a collected exec */
	ANS_STARTED, /* a background process's pid and tag */
	ANS_SESSION, /* a new session */
	ANS_PROC,    /* a waited-for process */
	ANS_DONE,    /* {} once done */
	ANS_RAW,     /* a terminal over an upgraded connection */
};

struct answer {
	struct http_output ho;
	enum answer_kind kind;
	bool with_pid;              /* a collected exec's answer has its pid; a session command's none */
	char session[32];           /* a session command's stream names its session */
	struct proc_attach *attach; /* ANS_RAW */
};

/* {"type":type,"data":"..."} for UTF-8 text, else "data_b64". */
static json_t *data_event(const char *type, const char *buf, size_t n)
{
	int valid;
	if (utf8_valid_prefix(buf, n, &valid) == n && valid)
		return json_pack("{s:s, s:s%}", "type", type, "data", buf, n);
	_cleanup_free_ char *b64 = malloc(base64_encoded_len(n) + 1);
	if (!b64)
		return json_pack("{s:s, s:s}", "type", "error", "message", "out of memory");
	base64_encode((const unsigned char *)buf, n, b64);
	return json_pack("{s:s, s:s}", "type", type, "data_b64", b64);
}

/* exit_code, signal, timed_out and (when >= 0) duration_ms into j. */
static json_t *exit_fields(json_t *j, const struct out_exit *x)
{
	bool signaled = WIFSIGNALED(x->status);
	json_object_set_new(j, "exit_code", signaled ? json_null() : json_integer(WEXITSTATUS(x->status)));
	json_object_set_new(j, "signal",
			    signaled ? json_string(sigabbrev_np(WTERMSIG(x->status)) ?: "?") : json_null());
	json_object_set_new(j, "timed_out", json_boolean(x->timed_out));
	if (x->duration_ms >= 0)
		json_object_set_new(j, "duration_ms", json_real(x->duration_ms));
	return j;
}

/* j[name] = buf's bytes as text (or null and j[name_b64]), j[name_truncated]. */
static void collected_json(json_t *j, const char *name, struct evbuffer *buf, bool truncated)
{
	size_t n = evbuffer_get_length(buf);
	const char *p = (const char *)evbuffer_pullup(buf, -1);
	char key[32];
	int valid;
	if (n == 0 || (utf8_valid_prefix(p, n, &valid) == n && valid)) {
		json_object_set_new(j, name, json_stringn(n ? p : "", n));
	} else {
		_cleanup_free_ char *b64 = malloc(base64_encoded_len(n) + 1);
		if (b64)
			base64_encode((const unsigned char *)p, n, b64);
		json_object_set_new(j, name, json_null());
		snprintf(key, sizeof(key), "%s_b64", name);
		json_object_set_new(j, key, b64 ? json_string(b64) : json_null());
	}
	snprintf(key, sizeof(key), "%s_truncated", name);
	json_object_set_new(j, key, json_boolean(truncated));
}

static void encode_start(struct answer *a, const struct out_event *ev)
{
	json_t *j = json_pack("{s:s, s:i}", "type", "start", "pid", ev->pid);
	if (ev->tag)
		json_object_set_new(j, "tag", json_string(ev->tag));
	if (a->session[0])
		json_object_set_new(j, "session", json_string(a->session));
	reply_start(&a->ho, "application/x-ndjson");
	reply_line(&a->ho, j);
}

static void encode_exit(struct answer *a, const struct out_exit *x)
{
	if (a->ho.started) {
		reply_line(&a->ho, exit_fields(json_pack("{s:s}", "type", "exit"), x));
		return;
	}
	json_t *j = exit_fields(json_object(), x);
	if (a->with_pid)
		json_object_set_new(j, "pid", json_integer(x->pid));
	for (int i = 0; i < 2; i++)
		collected_json(j, stream_names[i], x->collected[i], x->truncated[i]);
	reply_json(a->ho.req, 200, j);
	a->ho.req = NULL;
}

/* One whole answer for an event. */
static void encode_whole(struct answer *a, const struct out_event *ev)
{
	json_t *j = NULL;
	int status = 200;
	if (a->kind == ANS_STARTED && ev->type == OUT_START) {
		j = json_pack("{s:i}", "pid", ev->pid);
		if (ev->tag)
			json_object_set_new(j, "tag", json_string(ev->tag));
	} else if (a->kind == ANS_SESSION && ev->type == OUT_EVENT) {
		j = session_to_json(ev->event);
		status = 201;
	} else if (a->kind == ANS_PROC && ev->type == OUT_EVENT) {
		j = proc_to_json(ev->event);
	}
	if (!j)
		return;
	reply_json(a->ho.req, status, j);
	a->ho.req = NULL;
}

static void answer_encode(struct http_output *ho, const struct out_event *ev)
{
	struct answer *a = ho->arg;
	if (a->kind == ANS_RAW && ev->type == OUT_BYTES) {
		evbuffer_add(bufferevent_get_output(http_conn_bev(ho->conn)), ev->data, ev->len);
	} else if (a->kind != ANS_EXEC) {
		encode_whole(a, ev);
	} else if (ev->type == OUT_START) {
		encode_start(a, ev);
	} else if ((ev->type == OUT_STDOUT || ev->type == OUT_STDERR) && ho->started) {
		reply_line(ho, data_event(stream_names[ev->type == OUT_STDERR], ev->data, ev->len));
	} else if (ev->type == OUT_GAP && ho->started) {
		reply_line(ho, json_pack("{s:s, s:s, s:I}", "type", "gap", "stream", stream_names[ev->stream ? 1 : 0],
					 "lost", (json_int_t)ev->lost));
	} else if (ev->type == OUT_EXIT) {
		encode_exit(a, ev->exit);
	}
}

static void answer_finish(struct http_output *ho, const struct cove_err *err)
{
	struct answer *a = ho->arg;
	struct cove_err internal = { .code = COVE_EINTERNAL };
	if (!ho->req)
		return;
	if (a->kind == ANS_RAW) { /* the client's sign to ask for the exit status */
		http_conn_close_when_sent(ho->conn);
	} else if (ho->started) {
		if (err)
			reply_line(ho, json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "code",
						 err_code_name(err->code), "message", err->msg));
		reply_end(ho);
	} else if (!err && a->kind == ANS_DONE) {
		reply_json(ho->req, 200, json_object());
	} else {
		reply_error(ho->req, err ? err : &internal);
	}
	ho->req = NULL;
}

static void answer_free(struct http_output *ho)
{
	free(ho->arg);
}

static const struct http_output_route answer_route = {
	.encode = answer_encode,
	.finish = answer_finish,
	.free = answer_free,
};

/* A collected exec: its client hanging up before the answer kills it. */
static const struct http_output_route answer_route_hangup = {
	.encode = answer_encode,
	.finish = answer_finish,
	.free = answer_free,
	.watch_hangup = true,
};

static struct answer *answer_new(struct http_req *req, enum answer_kind kind, bool watch_hangup, struct cove_err *err)
{
	struct answer *a = calloc(1, sizeof(*a));
	if (!a) {
		err_set(err, COVE_EINTERNAL, "out of memory");
		return NULL;
	}
	a->kind = kind;
	if (http_output_init(&a->ho, req, watch_hangup ? &answer_route_hangup : &answer_route, a, err) < 0) {
		free(a);
		return NULL;
	}
	return a;
}

/* The engine did not take a's output (r < 0): a goes. */
static int answer_check(struct answer *a, int r)
{
	if (r < 0) {
		http_output_abandon(&a->ho);
		free(a);
	}
	return r;
}

/* ---- exec ---- */

static int parse_stdin(json_t *j, struct exec_request *er, unsigned char **store, struct cove_err *err)
{
	json_t *text = json_object_get(j, "stdin"), *b64 = json_object_get(j, "stdin_b64");
	if (text && b64)
		return err_set(err, COVE_EINVAL, "give 'stdin' or 'stdin_b64', not both");
	if (text) {
		if (!json_is_string(text))
			return err_set(err, COVE_EINVAL, "'stdin' must be a string");
		er->stdin_data = (const unsigned char *)json_string_value(text);
		er->stdin_len = json_string_length(text);
		er->has_stdin = true;
	} else if (b64) {
		if (!json_is_string(b64))
			return err_set(err, COVE_EINVAL, "'stdin_b64' must be a base64 string");
		*store = malloc(json_string_length(b64) / 4 * 3 + 3);
		if (!*store)
			return err_set(err, COVE_EINTERNAL, "out of memory");
		long n = base64_decode(json_string_value(b64), json_string_length(b64), *store);
		if (n < 0)
			return err_set(err, COVE_EINVAL, "'stdin_b64' is not valid base64");
		er->stdin_data = *store;
		er->stdin_len = (size_t)n;
		er->has_stdin = true;
	}
	if (er->stdin_len > API_MAX_STDIN)
		return err_set(err, COVE_ETOOBIG, "stdin is larger than %u bytes", API_MAX_STDIN);
	return 0;
}

/* The fields of an exec for a kept process: background, tty and its size,
 * stdin_open, tag. */
static int parse_kept(json_t *j, struct exec_request *er, struct cove_err *err)
{
	double rows = 24, cols = 80;
	if (get_bool(j, "background", &er->background, err) < 0 || get_bool(j, "tty", &er->tty, err) < 0 ||
	    get_bool(j, "stdin_open", &er->stdin_open, err) < 0 || get_string(j, "tag", &er->tag, 63, err) < 0 ||
	    get_number(j, "rows", 1, 9999, &rows, err) < 0 || get_number(j, "cols", 1, 9999, &cols, err) < 0)
		return -1;
	er->rows = (int)rows;
	er->cols = (int)cols;
	return 0;
}

/* The exec's body into er; *session is its session's id, or NULL. */
static int parse_exec(struct http_req *req, json_t *j, struct exec_request *er, const char **session,
		      unsigned char **stdin_store, struct cove_err *err)
{
	static const char *const fields[] = { "cmd",     "env",    "cwd",        "user",       "stdin", "stdin_b64",
					      "timeout", "stream", "max_output", "background", "tag",   "tty",
					      "rows",    "cols",   "stdin_open", "session",    NULL };
	double max_output = API_DEFAULT_MAX_OUTPUT;
	json_t *stream = json_object_get(j, "stream");
	int r = get_flag(query_of(req), "stream", &er->stream, err);
	if (r == 0)
		r = check_fields(j, fields, err);
	if (r == 0 && stream && !json_is_boolean(stream))
		r = err_set(err, COVE_EINVAL, "'stream' must be a boolean");
	if (r == 0 && !json_object_get(j, "cmd"))
		r = err_set(err, COVE_EINVAL, "'cmd' is required");
	if (r == 0)
		r = get_argv(json_object_get(j, "cmd"), "cmd", &er->argv, err);
	er->cmd = json_object_get(j, "cmd");
	if (r == 0 &&
	    (check_env(json_object_get(j, "env"), err) < 0 || get_string(j, "cwd", &er->cwd, 4095, err) < 0 ||
	     get_string(j, "user", &er->user, 63, err) < 0 ||
	     get_number(j, "timeout", 0, 86400 * 365, &er->timeout, err) < 0 ||
	     get_number(j, "max_output", 0, 1 << 30, &max_output, err) < 0 || parse_stdin(j, er, stdin_store, err) < 0))
		r = -1;
	if (r == 0 && (get_string(j, "session", session, 31, err) < 0 || parse_kept(j, er, err) < 0))
		r = -1;
	if (r == 0 && er->cwd && *er->cwd != '/')
		r = err_set(err, COVE_EINVAL, "'cwd' must be an absolute path");
	er->env = json_object_get(j, "env");
	if (json_is_null(er->env))
		er->env = NULL;
	er->stream = er->stream || json_is_true(stream);
	er->max_output = (size_t)max_output;
	if (r == 0 && er->tag && !er->background && !er->tty)
		r = err_set(err, COVE_EINVAL, "'tag' is for background or terminal processes");
	if (r == 0 && er->max_output != API_DEFAULT_MAX_OUTPUT && (er->background || er->tty))
		r = err_set(err, COVE_EINVAL, "'max_output' is for collected output, not kept processes");
	return r;
}

/* A command in a session, a kept process, or an exec. */
static int run_exec(struct http_req *req, struct sandbox *sb, const struct exec_request *er, const char *session,
		    struct cove_err *err)
{
	bool kept = !session && (er->background || er->tty);
	enum answer_kind kind = kept && !er->stream ? ANS_STARTED : ANS_EXEC;
	struct answer *a = answer_new(req, kind, !session && !kept && !er->stream, err);
	if (!a)
		return -1;
	a->with_pid = !session;
	if (session) {
		snprintf(a->session, sizeof(a->session), "%s", session);
		return answer_check(a, sessions_exec(sb, er, session, &a->ho.out, err));
	}
	if (kept)
		return answer_check(a, procs_start(sb, er, &a->ho.out, err));
	return answer_check(a, exec_start(sb, er, &a->ho.out, err));
}

int api_exec(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb = sandbox_lookup(engine_ctx, id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	struct exec_request er = { .max_output = API_DEFAULT_MAX_OUTPUT };
	_cleanup_free_ unsigned char *stdin_store = NULL;
	const char *session = NULL;
	int r = parse_exec(req, j, &er, &session, &stdin_store, err);
	if (r == 0)
		r = run_exec(req, sb, &er, session, err);
	json_decref(er.argv);
	json_decref(j);
	return r;
}

/* ---- kept processes ---- */

/* The {pid or tag} segment after /processes/ in the request's path. */
static struct proc *lookup_proc(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb = sandbox_lookup(engine_ctx, id, err);
	if (!sb)
		return NULL;
	const char *s = strstr(http_req_path(req), "/processes/");
	char sel[80] = "";
	if (s)
		sscanf(s + strlen("/processes/"), "%79[^/]", sel);
	return procs_find(sb, sel, err);
}

int api_procs_list(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb = sandbox_lookup(engine_ctx, id, err);
	if (!sb)
		return -1;
	reply_json(req, 200, json_pack("{s:o}", "processes", procs_to_json(sb)));
	return 0;
}

/* ?name=S, seconds from 0 to 86400; *ret untouched when absent. */
static int get_seconds(const char *query, const char *name, double *ret, struct cove_err *err)
{
	char v[32], *end;
	int r = query_param(query, name, v, sizeof(v), err);
	if (r <= 0)
		return r;
	double d = strtod(v, &end);
	if (end == v || *end || !(d >= 0) || d > 86400)
		return err_set(err, COVE_EINVAL, "'%s' must be a number of seconds from 0 to 86400", name);
	*ret = d;
	return 0;
}

int api_proc_get(struct http_req *req, const char *id, struct cove_err *err)
{
	struct proc *p = lookup_proc(req, id, err);
	if (!p)
		return -1;
	double wait = 0;
	if (get_seconds(query_of(req), "wait", &wait, err) < 0)
		return -1;
	if (proc_ended(p, NULL) || wait == 0) {
		reply_json(req, 200, proc_to_json(p));
		return 0;
	}
	struct answer *a = answer_new(req, ANS_PROC, false, err);
	return a ? answer_check(a, procs_wait(p, wait, &a->ho.out, err)) : -1;
}

/* ---- a terminal over an upgraded connection ----
 *
 * GET .../attach with "Connection: Upgrade" and "Upgrade: tcp" is answered
 * 101, and from then on the connection is the terminal's, raw: the
 * client's bytes are typed into it, its output is sent as it is, and a
 * half-close of the client is the terminal's EOF character. Flow control
 * both ways is the sockets': the client's bytes wait in the connection's
 * input while the terminal takes none, and the terminal's output is paused
 * while the client does not read. */

static void on_raw_input(struct http_conn *conn, void *arg)
{
	struct answer *a = arg;
	if (a->attach)
		proc_attach_input(a->attach, http_conn_input(conn));
}

static void on_raw_input_end(struct http_conn *conn, void *arg)
{
	struct answer *a = arg;
	if (a->attach)
		proc_attach_input_end(a->attach, http_conn_input(conn));
}

static void on_raw_drained(struct http_conn *conn, void *arg)
{
	struct answer *a = arg;
	http_output_drained(&a->ho);
}

static void on_raw_input_ready(void *arg)
{
	struct answer *a = arg;
	if (a->attach && a->ho.conn)
		proc_attach_input(a->attach, http_conn_input(a->ho.conn));
}

static int raw_attach(struct http_req *req, struct proc *p, struct attach_request *r, struct cove_err *err)
{
	static const struct http_raw_callbacks cbs = { .on_input = on_raw_input,
						       .on_input_end = on_raw_input_end,
						       .on_drained = on_raw_drained };
	struct answer *a = answer_new(req, ANS_RAW, false, err);
	if (!a)
		return -1;
	if (http_upgrade(req, "tcp", &cbs, a) < 0) {
		answer_check(a, -1);
		return err_set(err, COVE_EINTERNAL, "the connection cannot be upgraded");
	}
	r->raw = true;
	r->input_ready = on_raw_input_ready;
	r->input_arg = a;
	struct http_conn *conn = a->ho.conn;
	if (procs_attach(p, r, &a->ho.out, &a->attach, err) < 0) {
		answer_check(a, -1); /* upgraded: nothing can be answered any more */
		http_conn_close(conn);
	}
	return 0;
}

int api_proc_attach(struct http_req *req, const char *id, struct cove_err *err)
{
	struct proc *p = lookup_proc(req, id, err);
	if (!p)
		return -1;
	struct attach_request r = { .replay = true };
	const char *protocol = NULL;
	int upgrade = http_req_upgrade(req, &protocol);
	if (get_flag(query_of(req), "replay", &r.replay, err) < 0 ||
	    get_flag(query_of(req), "foreground", &r.foreground, err) < 0)
		return -1;
	if (upgrade < 0)
		return err_set(err, COVE_EINVAL, "an upgrade needs both 'Connection: Upgrade' and 'Upgrade: tcp'");
	if (upgrade > 0 && strcasecmp(protocol, "tcp") != 0)
		return err_set(err, COVE_EINVAL, "cannot upgrade to '%.64s': only to 'tcp'", protocol);
	if (upgrade > 0 && !proc_is_tty(p))
		return err_set(err, COVE_ESTATE,
			       "process %d is not a terminal: attach without an upgrade, for its output as NDJSON",
			       proc_pid(p));
	if (upgrade > 0)
		return raw_attach(req, p, &r, err);
	struct answer *a = answer_new(req, ANS_EXEC, false, err);
	return a ? answer_check(a, procs_attach(p, &r, &a->ho.out, NULL, err)) : -1;
}

/* ---- input and control ---- */

/* "data" (text) or "data_b64" into in; *store holds decoded bytes. */
static int parse_stdin_data(json_t *j, struct proc *p, struct stdin_request *in, unsigned char **store,
			    struct cove_err *err)
{
	static const char *const fields[] = { "data", "data_b64", "eof", NULL };
	const char *data = NULL, *b64 = NULL;
	if (check_fields(j, fields, err) < 0 || get_string(j, "data", &data, STDIN_MAX, err) < 0 ||
	    get_string(j, "data_b64", &b64, STDIN_MAX / 3 * 4 + 4, err) < 0 || get_bool(j, "eof", &in->eof, err) < 0)
		return -1;
	if (data && b64)
		return err_set(err, COVE_EINVAL, "give 'data' or 'data_b64', not both");
	if (proc_stdin_check(p, err) < 0)
		return -1;
	in->data = data;
	in->len = data ? strlen(data) : 0;
	if (b64) {
		*store = malloc(strlen(b64) / 4 * 3 + 3);
		long m = *store ? base64_decode(b64, strlen(b64), *store) : -1;
		if (m < 0)
			return err_set(err, COVE_EINVAL, "'data_b64' is not valid base64");
		in->data = *store;
		in->len = (size_t)m;
	}
	return 0;
}

int api_proc_stdin(struct http_req *req, const char *id, struct cove_err *err)
{
	struct proc *p = lookup_proc(req, id, err);
	json_t *j = p ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	_cleanup_free_ unsigned char *bytes = NULL;
	struct stdin_request in = { 0 };
	struct answer *a = NULL;
	int r = parse_stdin_data(j, p, &in, &bytes, err);
	if (r == 0 && !(a = answer_new(req, ANS_DONE, false, err)))
		r = -1;
	if (r == 0)
		r = answer_check(a, proc_write_stdin(p, &in, &a->ho.out, err));
	json_decref(j);
	return r;
}

static int parse_signal(json_t *v, int *ret)
{
	if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) < 65) {
		*ret = (int)json_integer_value(v);
		return 0;
	}
	const char *s = json_string_value(v);
	if (!s)
		return -1;
	if (strncmp(s, "SIG", 3) == 0)
		s += 3;
	for (int sig = 1; sig < 32; sig++)
		if (sigabbrev_np(sig) && strcmp(sigabbrev_np(sig), s) == 0) {
			*ret = sig;
			return 0;
		}
	return -1;
}

int api_proc_signal(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "signal", "tree", NULL };
	struct proc *p = lookup_proc(req, id, err);
	json_t *j = p ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	struct signal_request sr = { .sig = SIGKILL };
	json_t *v = json_object_get(j, "signal");
	int r = check_fields(j, fields, err) < 0 || get_bool(j, "tree", &sr.tree, err) < 0 ? -1 : 0;
	if (r == 0 && v && parse_signal(v, &sr.sig) < 0)
		r = err_set(err, COVE_EINVAL, "'signal' must be a signal name (\"SIGTERM\", \"TERM\") or number");
	if (r == 0)
		r = proc_send_signal(p, &sr, err);
	if (r == 0)
		reply_json(req, 200, json_object());
	json_decref(j);
	return r;
}

int api_proc_resize(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "rows", "cols", NULL };
	struct proc *p = lookup_proc(req, id, err);
	json_t *j = p ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	double rows = 0, cols = 0;
	int r = check_fields(j, fields, err) < 0 || get_number(j, "rows", 1, 9999, &rows, err) < 0 ||
				get_number(j, "cols", 1, 9999, &cols, err) < 0
			? -1
			: 0;
	if (r == 0 && (!rows || !cols))
		r = err_set(err, COVE_EINVAL, "'rows' and 'cols' are required");
	if (r == 0)
		r = proc_resize(p, (int)rows, (int)cols, err);
	if (r == 0)
		reply_json(req, 200, json_object());
	json_decref(j);
	return r;
}

/* ---- sessions ---- */

static int parse_session(json_t *j, struct session_request *sr, struct cove_err *err)
{
	static const char *const fields[] = { "cwd", "env", "user", NULL };
	json_t *env = json_object_get(j, "env");
	if (check_fields(j, fields, err) < 0 || get_string(j, "cwd", &sr->cwd, 4095, err) < 0 ||
	    get_string(j, "user", &sr->user, 63, err) < 0)
		return -1;
	if (env && !json_is_null(env)) {
		const char *k;
		json_t *v;
		if (!json_is_object(env))
			return err_set(err, COVE_EINVAL, "'env' must be an object of strings");
		json_object_foreach(env, k, v)
		{
			if (!json_is_string(v) || !*k || strchr(k, '='))
				return err_set(err, COVE_EINVAL, "'env' must map names (without '=') to strings");
		}
		sr->env = env;
	}
	if (sr->cwd && *sr->cwd != '/')
		return err_set(err, COVE_EINVAL, "'cwd' must be an absolute path");
	return 0;
}

int api_sessions_create(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb = sandbox_lookup(engine_ctx, id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	struct session_request sr = { 0 };
	struct answer *a = NULL;
	int r = parse_session(j, &sr, err);
	if (r == 0 && !(a = answer_new(req, ANS_SESSION, false, err)))
		r = -1;
	if (r == 0)
		r = answer_check(a, sessions_create(sb, &sr, &a->ho.out, err));
	json_decref(j);
	return r;
}

int api_sessions_list(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb = sandbox_lookup(engine_ctx, id, err);
	if (!sb)
		return -1;
	reply_json(req, 200, json_pack("{s:o}", "sessions", sessions_to_json(sb)));
	return 0;
}

int api_session_delete(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb = sandbox_lookup(engine_ctx, id, err);
	if (!sb)
		return -1;
	const char *s = strstr(http_req_path(req), "/sessions/");
	char sid[32] = "";
	if (s)
		sscanf(s + strlen("/sessions/"), "%31[^/]", sid);
	if (sessions_delete(sb, sid, err) < 0)
		return -1;
	reply_json(req, 200, json_object());
	return 0;
}

/* envd's process.Process service over the engine's kept processes
 * (engine/process.h): every E2B process outlives its Start stream (the SDK
 * re-attaches with Connect), dies at the stream's Connect-Timeout-Ms, and
 * is selected by pid or tag. StreamInput, a client stream, is taken
 * whole: the body holds all its messages (E2B's SDK cannot send it: fetch
 * has no streaming request bodies). */
#include <ctype.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <event2/buffer.h>

#include "common/cleanup.h"
#include "common/encoding.h"
#include "daemon/api/request.h"
#include "daemon/e2b/connect.h"
#include "daemon/e2b/e2b_private.h"
#include "engine/engine.h"
#include "engine/process.h"

#define E2B_MAX_INPUT (16u << 20)

/* ---- the stream: start, data, end, EOS ---- */

static json_t *b64(const void *data, size_t n)
{
	_cleanup_free_ char *s = malloc(base64_encoded_len(n) + 1);
	if (!s)
		return json_string("");
	base64_encode(data, n, s);
	return json_string(s);
}

/* Go's ProcessState, as envd reports it. */
static json_t *end_event(const struct out_exit *x)
{
	char status[64];
	if (WIFSIGNALED(x->status)) {
		snprintf(status, sizeof(status), "signal: %s", strsignal(WTERMSIG(x->status)));
		for (char *c = status + 8; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		return json_pack("{s:i, s:b, s:s, s:s}", "exitCode", -1, "exited", 0, "status", status, "error",
				 status);
	}
	int code = WEXITSTATUS(x->status);
	snprintf(status, sizeof(status), "exit status %d", code);
	if (code == 0)
		return json_pack("{s:b, s:s}", "exited", 1, "status", status);
	return json_pack("{s:i, s:b, s:s, s:s}", "exitCode", code, "exited", 1, "status", status, "error", status);
}

struct proc_stream {
	bool timed_out;
};

static void on_event(struct connect_stream *cs, const struct out_event *ev)
{
	struct proc_stream *ps = cs->arg;
	json_t *e = NULL;
	if (ev->type == OUT_START) {
		e = json_pack("{s:{s:i}}", "start", "pid", ev->pid);
	} else if (ev->type == OUT_STDOUT || ev->type == OUT_STDERR) {
		const char *name = cs->pty ? "pty" : ev->type == OUT_STDOUT ? "stdout" : "stderr";
		e = json_pack("{s:{s:o}}", "data", name, b64(ev->data, ev->len));
	} else if (ev->type == OUT_EXIT) {
		ps->timed_out = ev->exit->timed_out;
		e = json_pack("{s:o}", "end", end_event(ev->exit));
	}
	if (e)
		connect_stream_send(cs, json_pack("{s:o}", "event", e));
}

static void on_close(struct connect_stream *cs, const struct cove_err *err)
{
	struct proc_stream *ps = cs->arg;
	if (ps->timed_out)
		connect_stream_end(cs, "deadline_exceeded", "the process was killed at the request's deadline");
	else
		connect_stream_end(cs, err ? connect_code_of(err->code) : NULL, err ? err->msg : NULL);
}

static struct connect_stream *proc_stream_new(struct envd_req *er, bool pty, struct cove_err *err)
{
	struct proc_stream *ps = calloc(1, sizeof(*ps));
	struct connect_stream *cs = ps ? connect_stream_new(er->req, true, err) : NULL;
	if (!cs) {
		free(ps);
		if (!ps)
			err_set(err, COVE_EINTERNAL, "out of memory");
		return NULL;
	}
	cs->arg = ps;
	cs->free_arg = free;
	cs->on_event = on_event;
	cs->on_close = on_close;
	cs->pty = pty;
	return cs;
}

/* ---- Start ---- */

/* Connect-Timeout-Ms: the process's deadline (0: none). */
static double deadline(struct http_req *req)
{
	const char *h = evhttp_find_header(http_req_in_headers(req), "Connect-Timeout-Ms");
	char *end;
	double ms = h ? strtod(h, &end) : 0;
	return h && !*end && ms > 0 && ms < 1e11 ? ms / 1000 : 0;
}

static int parse_pty(json_t *pty, struct exec_request *x, struct cove_err *err)
{
	json_t *size = json_object_get(pty, "size");
	double rows = 24, cols = 80;
	if (!json_is_object(pty) || (size && !json_is_object(size)) ||
	    get_number(size, "rows", 1, 9999, &rows, err) < 0 || get_number(size, "cols", 1, 9999, &cols, err) < 0)
		return err_set(err, COVE_EINVAL, "'pty' must be {\"size\": {\"cols\", \"rows\"}}");
	x->tty = true;
	x->rows = (int)rows;
	x->cols = (int)cols;
	return 0;
}

/* StartRequest into x (argv into *argv, the cwd into cwd). */
static int parse_start(struct envd_req *er, json_t *j, struct exec_request *x, json_t **argv, char *cwd,
		       struct cove_err *err)
{
	json_t *proc = json_object_get(j, "process"), *args, *v, *pty = json_object_get(j, "pty");
	const char *cmd = NULL, *dir = NULL;
	size_t i;
	if (!json_is_object(proc) || get_string(proc, "cmd", &cmd, 4095, err) < 0 || !cmd || !*cmd)
		return err_set(err, COVE_EINVAL, "'process.cmd' is required");
	*argv = json_pack("[s]", cmd);
	args = json_object_get(proc, "args");
	if (args && !json_is_array(args))
		return err_set(err, COVE_EINVAL, "'process.args' must be an array of strings");
	json_array_foreach(args, i, v)
	{
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return err_set(err, COVE_EINVAL, "'process.args' must hold strings without NUL bytes");
		json_array_append(*argv, v);
	}
	x->env = json_object_get(proc, "envs");
	if (check_env(x->env, err) < 0 || get_string(proc, "cwd", &dir, 4095, err) < 0 ||
	    get_string(j, "tag", &x->tag, 63, err) < 0 || get_bool(j, "stdin", &x->stdin_open, err) < 0)
		return -1;
	if (pty && !json_is_null(pty) && parse_pty(pty, x, err) < 0)
		return -1;
	if (dir && *dir && envd_abs_path(er, dir, cwd, PATH_MAX, err) < 0)
		return -1;
	x->cwd = dir && *dir ? cwd : NULL;
	x->argv = x->cmd = *argv;
	x->user = er->user[0] ? er->user : NULL;
	x->background = x->stream = true;
	x->timeout = deadline(er->req);
	return 0;
}

static void start(struct envd_req *er)
{
	json_t *j, *argv = NULL;
	if (connect_read(er, true, &j) < 0)
		return;
	struct cove_err err = { 0 };
	struct exec_request x = { 0 };
	char cwd[PATH_MAX];
	struct connect_stream *cs = NULL;
	int r = parse_start(er, j, &x, &argv, cwd, &err);
	if (r == 0 && !(cs = proc_stream_new(er, x.tty, &err)))
		r = -1;
	if (r == 0 && (r = procs_start(er->sb, &x, &cs->ho.out, &err)) < 0)
		connect_stream_abandon(cs);
	if (r < 0)
		connect_stream_fail(er->req, connect_code_of(err.code), err.msg);
	json_decref(argv);
	json_decref(j);
}

/* ---- the others: by selector ---- */

/* j's 'process' selector: a running (or, with ended, any) process. */
static struct proc *select_proc(struct envd_req *er, json_t *j, bool ended, struct cove_err *err)
{
	json_t *sel = json_object_get(j, "process"), *pid = json_object_get(sel, "pid");
	const char *tag = NULL;
	char s[80] = "";
	if (!json_is_object(sel) || get_string(sel, "tag", &tag, 63, err) < 0)
		return err_set(err, COVE_EINVAL, "'process' must select a process by 'pid' or 'tag'"), NULL;
	if (json_is_integer(pid) && json_integer_value(pid) > 0 && json_integer_value(pid) < 1 << 30)
		snprintf(s, sizeof(s), "%d", (int)json_integer_value(pid));
	else if (tag && !pid)
		snprintf(s, sizeof(s), "%s", tag);
	else
		return err_set(err, COVE_EINVAL, "'process' must select a process by 'pid' or 'tag'"), NULL;
	struct proc *p = procs_find(er->sb, s, err);
	if (p && !ended && proc_ended(p, NULL))
		return err_set(err, COVE_ENOTFOUND, "process with %s %s not found", pid ? "pid" : "tag", s), NULL;
	if (!p)
		err_set(err, COVE_ENOTFOUND, "process with %s %s not found", pid ? "pid" : "tag", s);
	return p;
}

static void reconnect(struct envd_req *er)
{
	json_t *j;
	if (connect_read(er, true, &j) < 0)
		return;
	struct cove_err err = { 0 };
	struct attach_request ar = { 0 };
	struct proc *p = select_proc(er, j, false, &err);
	struct connect_stream *cs = p ? proc_stream_new(er, proc_is_tty(p), &err) : NULL;
	int r = cs ? procs_attach(p, &ar, &cs->ho.out, NULL, &err) : -1;
	if (r < 0 && cs)
		connect_stream_abandon(cs);
	if (r < 0)
		connect_stream_fail(er->req, connect_code_of(err.code), err.msg);
	json_decref(j);
}

/* ProcessInfo of a kept process's description (proc_to_json). */
static json_t *process_info(json_t *d)
{
	json_t *cmd = json_object_get(d, "cmd"), *args = json_array(), *v;
	size_t i;
	json_array_foreach(cmd, i, v)
	{
		if (i > 0)
			json_array_append(args, v);
	}
	json_t *config = json_pack("{s:O, s:o, s:{}}", "cmd", json_is_array(cmd) ? json_array_get(cmd, 0) : cmd, "args",
				   args, "envs");
	if (json_is_string(json_object_get(d, "cwd")))
		json_object_set(config, "cwd", json_object_get(d, "cwd"));
	json_t *info = json_pack("{s:o, s:O}", "config", config, "pid", json_object_get(d, "pid"));
	if (json_is_string(json_object_get(d, "tag")))
		json_object_set(info, "tag", json_object_get(d, "tag"));
	return info;
}

static int list(struct envd_req *er, json_t *j, struct cove_err *err)
{
	json_t *all = procs_to_json(er->sb), *out = json_array(), *d;
	size_t i;
	json_array_foreach(all, i, d)
	{
		const char *state = json_string_value(json_object_get(d, "state"));
		if (state && strcmp(state, "running") == 0)
			json_array_append_new(out, process_info(d));
	}
	json_decref(all);
	connect_reply(er->req, json_pack("{s:o}", "processes", out));
	return 0;
}

/* ProcessInput's bytes ('stdin' or 'pty', base64) appended to out. */
static int decode_input(json_t *in, struct evbuffer *out, struct cove_err *err)
{
	json_t *data = json_object_get(in, "stdin") ? json_object_get(in, "stdin") : json_object_get(in, "pty");
	if (!json_is_string(data) || json_string_length(data) > E2B_MAX_INPUT)
		return err_set(err, COVE_EINVAL, "'input' must hold 'stdin' or 'pty' bytes (base64, at most 16M)");
	_cleanup_free_ unsigned char *buf = malloc(json_string_length(data) / 4 * 3 + 3);
	long n = buf ? base64_decode(json_string_value(data), json_string_length(data), buf) : -1;
	if (n < 0)
		return err_set(err, COVE_EINVAL, "'input' is not valid base64");
	if (evbuffer_add(out, buf, (size_t)n) < 0)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	return 0;
}

/* in's bytes to p's stdin (or terminal). */
static int write_input(struct proc *p, struct evbuffer *in, struct cove_err *err)
{
	size_t n = evbuffer_get_length(in);
	struct stdin_request sr = { .data = n ? evbuffer_pullup(in, -1) : (const void *)"", .len = n };
	return proc_stdin_check(p, err) < 0 || proc_write_stdin(p, &sr, NULL, err) < 0 ? -1 : 0;
}

static int send_input(struct envd_req *er, json_t *j, struct cove_err *err)
{
	struct proc *p = select_proc(er, j, false, err);
	struct evbuffer *in = p ? evbuffer_new() : NULL;
	int r = !p ? -1 : !in ? err_set(err, COVE_EINTERNAL, "out of memory") : 0;
	if (r == 0 && (proc_stdin_check(p, err) < 0 || decode_input(json_object_get(j, "input"), in, err) < 0 ||
		       write_input(p, in, err) < 0))
		r = -1;
	if (in)
		evbuffer_free(in);
	if (r == 0)
		connect_reply(er->req, json_object());
	return r;
}

/* ---- StreamInput: a client stream, whole in the request's body ---- */

/* One StreamInputRequest: start (its selector into *p, first and once),
 * data (its bytes onto in) or keepalive. */
static int input_message(struct envd_req *er, json_t *m, struct proc **p, struct evbuffer *in, struct cove_err *err)
{
	json_t *start = json_object_get(m, "start"), *data = json_object_get(m, "data");
	if (json_object_size(m) != 1 || !(start || data || json_object_get(m, "keepalive")))
		return err_set(err, COVE_EINVAL, "a message must be one of 'start', 'data' and 'keepalive'");
	if (start && *p)
		return err_set(err, COVE_EINVAL, "'start' must come once, first");
	if (start)
		return (*p = select_proc(er, start, false, err)) ? 0 : -1;
	if (!*p)
		return err_set(err, COVE_EINVAL, "the first message must be 'start'");
	return data ? decode_input(json_object_get(data, "input"), in, err) : 0;
}

/* Every message is checked before a byte goes in: a bad one changes
 * nothing. */
static void stream_input(struct envd_req *er)
{
	struct evbuffer *body = http_req_body(er->req);
	size_t n = body ? evbuffer_get_length(body) : 0, off = 0;
	const uint8_t *b = n ? evbuffer_pullup(body, -1) : (const uint8_t *)"";
	struct evbuffer *in = evbuffer_new();
	struct cove_err err = { 0 };
	struct proc *p = NULL;
	int r = in ? 0 : err_set(&err, COVE_EINTERNAL, "out of memory");
	while (r == 0 && off < n) {
		uint8_t flags = 0;
		json_t *m = NULL;
		r = connect_next(b, n, &off, &flags, &m, &err);
		if (r == 0 && flags)
			r = err_set(&err, COVE_EINVAL, "a request's envelope has flags 0x%02x, not a message", flags);
		if (r == 0)
			r = input_message(er, m, &p, in, &err);
		json_decref(m);
	}
	if (r == 0 && !p)
		r = err_set(&err, COVE_EINVAL, "the first message must be 'start'");
	if (r == 0 && evbuffer_get_length(in))
		r = write_input(p, in, &err);
	if (in)
		evbuffer_free(in);
	if (r < 0)
		connect_stream_fail(er->req, connect_code_of(err.code), err.msg);
	else
		connect_stream_reply(er->req, json_object());
}

static int send_signal(struct envd_req *er, json_t *j, struct cove_err *err)
{
	struct proc *p = select_proc(er, j, false, err);
	json_t *s = json_object_get(j, "signal");
	const char *name = json_string_value(s);
	int sig = json_is_integer(s) ? (int)json_integer_value(s) : 0;
	if (name)
		sig = !strcmp(name, "SIGNAL_SIGKILL") ? SIGKILL : !strcmp(name, "SIGNAL_SIGTERM") ? SIGTERM : 0;
	if (!p)
		return -1;
	if (sig != SIGKILL && sig != SIGTERM)
		return err_set(err, COVE_EINVAL, "'signal' must be SIGNAL_SIGKILL or SIGNAL_SIGTERM");
	struct signal_request sr = { .sig = sig };
	if (proc_send_signal(p, &sr, err) < 0)
		return -1;
	connect_reply(er->req, json_object());
	return 0;
}

static int close_stdin(struct envd_req *er, json_t *j, struct cove_err *err)
{
	struct proc *p = select_proc(er, j, false, err);
	struct stdin_request sr = { .eof = true };
	if (!p || proc_stdin_check(p, err) < 0 || proc_write_stdin(p, &sr, NULL, err) < 0)
		return -1;
	connect_reply(er->req, json_object());
	return 0;
}

static int update(struct envd_req *er, json_t *j, struct cove_err *err)
{
	struct proc *p = select_proc(er, j, false, err);
	struct exec_request x = { 0 };
	json_t *pty = json_object_get(j, "pty");
	if (!p)
		return -1;
	if (pty && !json_is_null(pty) && (parse_pty(pty, &x, err) < 0 || proc_resize(p, x.rows, x.cols, err) < 0))
		return -1;
	connect_reply(er->req, json_object());
	return 0;
}

void process_service(struct envd_req *er, const char *method)
{
	static const struct {
		const char *name;
		int (*fn)(struct envd_req *er, json_t *j, struct cove_err *err);
	} unary[] = {
		{ "List", list },
		{ "SendInput", send_input },
		{ "SendSignal", send_signal },
		{ "CloseStdin", close_stdin },
		{ "Update", update },
	};
	if (strcmp(method, "Start") == 0)
		return start(er);
	if (strcmp(method, "Connect") == 0)
		return reconnect(er);
	if (strcmp(method, "StreamInput") == 0)
		return stream_input(er);
	for (size_t i = 0; i < sizeof(unary) / sizeof(unary[0]); i++) {
		if (strcmp(method, unary[i].name) != 0)
			continue;
		json_t *j;
		struct cove_err err = { 0 };
		if (connect_read(er, false, &j) < 0)
			return;
		if (unary[i].fn(er, j, &err) < 0)
			connect_reply_err(er->req, &err);
		json_decref(j);
		return;
	}
	connect_reply_error(er->req, "unimplemented", "process.Process has no method '%s'", method);
}

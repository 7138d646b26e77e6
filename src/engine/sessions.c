/* Sessions: a long-lived bash in the sandbox whose cwd, variables,
 * functions and aliases carry over between commands.
 *
 * The shell is a kept process (procs.c): it outlives its clients and coved.
 * coved writes each command to its stdin as one line,
 *
 *     eval $'<command>' </dev/null; __cove_end <seq> "$?"
 *
 * (the command quoted byte for byte as an ANSI-C string, so heredocs,
 * quotes and newlines in it reach eval unchanged; its stdin is /dev/null or
 * the request's bytes, never the shell's own input), and __cove_end prints
 * a marker, \036<token>:<seq>:<status>\036, to both stdout and stderr. A
 * command's output is exactly what its streams carry before their marker:
 * no trailing newline is needed, and a subprocess it leaves running does
 * not hold it open (only the marker ends a command, never EOF). The token
 * is random per session. Commands sent to one session are queued and run
 * one at a time, in order.
 *
 * A timeout (or the client leaving) kills the command's processes, the
 * shell's descendants; a command that is all shell builtins cannot be
 * stopped that way, so after a grace period the whole session goes. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>

#include "common/log.h"
#include "common/parse.h"
#include "common/wire.h"
#include "engine/engine.h"
#include "engine/process.h"

#define SESSIONS_MAX 32 /* per sandbox */
#define SESSION_QUEUE_MAX 64
#define SESSION_GRACE_S 2 /* after a timeout, before the whole session is killed */
#define MARKER_SEP '\036'

enum { OUT, ERR, NSTREAMS };
static const char *const stream_names[NSTREAMS] = { "stdout", "stderr" };

struct session_cmd {
	struct session_cmd *next;
	struct session *s;
	struct output *answer; /* NULL once answered, or the client is gone */
	uint32_t seq;
	bool stream;
	bool started; /* written to the shell */
	bool done[NSTREAMS];
	int status; /* from the marker, as a wait status */
	bool timed_out;
	size_t max_output;
	struct evbuffer *out[NSTREAMS]; /* collected output */
	bool truncated[NSTREAMS];
	struct evbuffer *line; /* the command line for the shell */
	double timeout;
	struct event *timer; /* the timeout */
	struct event *grace; /* after it: the whole session goes */
	struct timespec began;
};

struct session {
	struct session *next;
	struct sandbox *sb;
	struct proc *p;
	char id[24];
	char token[33];
	int64_t created_at;
	uint64_t pos[NSTREAMS];          /* how far the shell's output has been read */
	struct evbuffer *pend[NSTREAMS]; /* read, not yet given to a command */
	struct session_cmd *queue;       /* the first one runs */
	uint32_t next_seq;
	/* After a restart: each stream's output up to this marker is stale
	 * (stale[i] until it came on stream i: the two streams are read
	 * apart, and a command sent meanwhile has its output behind it). */
	uint32_t sync_seq;
	bool stale[NSTREAMS];
	bool paused; /* the running command's streaming client is behind */
};

static struct session *find_session(struct sandbox *sb, const char *id)
{
	for (struct session *s = sb->sessions; s; s = s->next)
		if (strcmp(s->id, id) == 0)
			return s;
	return NULL;
}

/* Quote bytes as a bash ANSI-C string $'...': printable ASCII as is
 * (escaping \ and '), everything else as \xHH. */
static void ansi_c_quote(struct evbuffer *b, const char *s, size_t n)
{
	evbuffer_add(b, "$'", 2);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == '\\' || c == '\'')
			evbuffer_add_printf(b, "\\%c", c);
		else if (c >= 0x20 && c < 0x7f)
			evbuffer_add(b, &c, 1);
		else
			evbuffer_add_printf(b, "\\x%02x", c);
	}
	evbuffer_add(b, "'", 1);
}

static double elapsed_ms(const struct timespec *t0)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - t0->tv_sec) * 1e3 + (now.tv_nsec - t0->tv_nsec) / 1e6;
}

/* ---- commands ---- */

static void cmd_free(struct session_cmd *c)
{
	for (int i = 0; i < NSTREAMS; i++)
		if (c->out[i])
			evbuffer_free(c->out[i]);
	if (c->line)
		evbuffer_free(c->line);
	if (c->timer)
		event_free(c->timer);
	if (c->grace)
		event_free(c->grace);
	free(c);
}

/* The command is over: answer, and run the next one. */
static void start_next(struct session *s);

/* The command's answer: its exit, or error. */
static void cmd_answer(struct session_cmd *c, const char *error)
{
	struct output *o = c->answer;
	c->answer = NULL;
	if (!o)
		return;
	struct cove_err err = { 0 };
	if (error) {
		err_set(&err, COVE_ESTATE, "%s", error);
		output_close(o, &err);
		return;
	}
	struct out_exit x = { .status = c->status, .timed_out = c->timed_out, .duration_ms = elapsed_ms(&c->began) };
	for (int i = 0; i < NSTREAMS && !c->stream; i++) {
		x.collected[i] = c->out[i];
		x.truncated[i] = c->truncated[i];
	}
	struct out_event ev = { .type = OUT_EXIT, .exit = &x };
	output_write(o, &ev);
	output_close(o, NULL);
}

static void cmd_finish(struct session_cmd *c, const char *error)
{
	struct session *s = c->s;
	cmd_answer(c, error);
	if (s && s->queue == c) {
		s->queue = c->next;
		s->paused = false;
	}
	cmd_free(c);
	if (s)
		start_next(s);
}

static void on_grace_over(evutil_socket_t fd, short what, void *arg)
{
	struct session_cmd *c = arg;
	log_warn("sandbox %s: session %s: command %u outlived its timeout; killing the session", c->s->sb->id, c->s->id,
		 c->seq);
	proc_signal(c->s->p, SIGKILL, WIRE_FLAG_TREE);
}

/* Kill what the command started (the shell's descendants); if the shell
 * itself is busy (builtins), the session goes after a grace period. */
static void interrupt(struct session_cmd *c)
{
	proc_signal(c->s->p, SIGKILL, WIRE_FLAG_CHILDREN);
	struct timeval tv = { SESSION_GRACE_S, 0 };
	if (!c->grace)
		c->grace = evtimer_new(engine_ctx->base, on_grace_over, c);
	if (c->grace)
		evtimer_add(c->grace, &tv);
}

static void on_cmd_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct session_cmd *c = arg;
	c->timed_out = true;
	interrupt(c);
}

/* The command's client is gone. */
static void on_cmd_cancel(void *arg)
{
	struct session_cmd *c = arg;
	c->answer = NULL;
	if (c->started && c->s && c->s->queue == c) {
		c->s->paused = false;
		interrupt(c);
		sessions_on_output(c->s);
	}
	/* a queued one stays queued and runs unseen: it was sent */
}

/* Its front end's back-pressure: the shell's output is read on while the
 * client keeps up (a running command's only: its stream is the one). */
static void on_cmd_pause(void *arg)
{
	struct session_cmd *c = arg;
	if (c->s && c->s->queue == c)
		c->s->paused = true;
}

static void on_cmd_resume(void *arg)
{
	struct session_cmd *c = arg;
	struct session *s = c->s;
	if (s && s->paused && s->queue == c) {
		s->paused = false;
		sessions_on_output(s);
	}
}

static const struct output_producer cmd_producer = { .pause = on_cmd_pause,
						     .resume = on_cmd_resume,
						     .cancel = on_cmd_cancel };

static void deliver(struct session_cmd *c, int i, struct evbuffer *from, size_t n)
{
	if (n == 0)
		return;
	if (!c->answer) {
		evbuffer_drain(from, n);
		return;
	}
	if (!c->stream) {
		size_t have = evbuffer_get_length(c->out[i]);
		size_t room = c->max_output > have ? c->max_output - have : 0, take = n < room ? n : room;
		evbuffer_remove_buffer(from, c->out[i], take);
		evbuffer_drain(from, n - take);
		c->truncated[i] |= take < n;
		return;
	}
	struct out_event ev = { .type = i == OUT ? OUT_STDOUT : OUT_STDERR,
				.data = (const char *)evbuffer_pullup(from, n),
				.len = n };
	output_write(c->answer, &ev);
	evbuffer_drain(from, n);
}

static void start_next(struct session *s)
{
	struct session_cmd *c = s->queue;
	if (!c || c->started)
		return;
	struct cove_err err = { 0 };
	struct stdin_request in = { .data = evbuffer_pullup(c->line, -1), .len = evbuffer_get_length(c->line) };
	if (proc_write_stdin(s->p, &in, NULL, &err) < 0) {
		cmd_finish(c, err.msg);
		return;
	}
	c->started = true;
	clock_gettime(CLOCK_MONOTONIC, &c->began);
	if (c->answer && c->stream) {
		struct out_event ev = { .type = OUT_START, .pid = proc_pid(s->p) };
		output_write(c->answer, &ev);
	}
	if (c->timeout > 0) {
		struct timeval tv = { (time_t)c->timeout, (suseconds_t)((c->timeout - (time_t)c->timeout) * 1e6) };
		c->timer = evtimer_new(engine_ctx->base, on_cmd_timeout, c);
		if (c->timer)
			evtimer_add(c->timer, &tv);
	}
}

/* ---- reading the shell's output ---- */

/* Find a complete marker of this session in b: its offset and length, and
 * its seq and status. 0 if there is one; else *hold gets how many bytes at
 * the end could be the start of one (to keep for the next read). */
static int find_marker(struct session *s, struct evbuffer *b, size_t *at, size_t *len, uint32_t *seq, int *status,
		       size_t *hold)
{
	char prefix[40];
	int plen = snprintf(prefix, sizeof(prefix), "%c%s:", MARKER_SEP, s->token);
	struct evbuffer_ptr p = evbuffer_search(b, prefix, plen, NULL);
	size_t total = evbuffer_get_length(b);
	if (p.pos < 0) {
		/* keep a tail that starts with the separator */
		*hold = 0;
		size_t from = total > (size_t)plen ? total - plen : 0;
		struct evbuffer_ptr q;
		evbuffer_ptr_set(b, &q, from, EVBUFFER_PTR_SET);
		q = evbuffer_search(b, prefix, 1, &q);
		if (q.pos >= 0)
			*hold = total - q.pos;
		return -1;
	}
	char tail[48];
	size_t n = total - p.pos - plen < sizeof(tail) - 1 ? total - p.pos - plen : sizeof(tail) - 1;
	struct evbuffer_ptr t = p;
	evbuffer_ptr_set(b, &t, plen, EVBUFFER_PTR_ADD);
	evbuffer_copyout_from(b, &t, tail, n);
	tail[n] = '\0';
	char *end = memchr(tail, MARKER_SEP, n);
	unsigned sq;
	int st;
	if (!end) {
		*hold = total - p.pos; /* the rest of it is on its way */
		return n < sizeof(tail) - 1 ? -1 : -2;
	}
	*end = '\0';
	if (sscanf(tail, "%u:%d", &sq, &st) != 2)
		return -2;
	*at = p.pos;
	*len = plen + (size_t)(end - tail) + 1;
	*seq = sq;
	*status = st;
	return 0;
}

static void process_stream(struct session *s, int i)
{
	struct evbuffer *b = s->pend[i];
	for (;;) {
		struct session_cmd *c = s->queue && s->queue->started ? s->queue : NULL;
		if (c && c->done[i])
			return; /* the rest is the next command's */
		size_t at, len, hold = 0;
		uint32_t seq;
		int status;
		int r = find_marker(s, b, &at, &len, &seq, &status, &hold);
		if (r == -2) { /* not our marker after all (a lookalike): pass its separator on */
			struct evbuffer_ptr p = evbuffer_search(b, "\036", 1, NULL);
			if (c && !s->stale[i])
				deliver(c, i, b, p.pos + 1);
			else
				evbuffer_drain(b, p.pos + 1);
			continue;
		}
		if (r < 0) {
			size_t n = evbuffer_get_length(b) - hold;
			if (c && !s->stale[i])
				deliver(c, i, b, n);
			else
				evbuffer_drain(b, n); /* between commands, or stale: nobody's */
			return;
		}
		if (c && !s->stale[i])
			deliver(c, i, b, at);
		else
			evbuffer_drain(b, at);
		evbuffer_drain(b, len);
		if (s->stale[i]) {
			if (seq == s->sync_seq)
				s->stale[i] = false;
			continue;
		}
		if (c && seq == c->seq) {
			c->done[i] = true;
			c->status = (status & 0xff) << 8; /* as a wait status: exited with it */
		}
	}
}

uint64_t sessions_read_position(const struct session *s, int stream)
{
	return s->pos[stream];
}

void sessions_on_output(struct session *s)
{
	int ended_status;
	bool ended = proc_ended(s->p, &ended_status);
	for (int i = 0; i < NSTREAMS && !s->paused; i++) {
		while (!s->paused && s->pos[i] < proc_output_end(s->p, i)) {
			uint64_t lost = proc_read_output(s->p, i, &s->pos[i], s->pend[i], 65536);
			if (lost)
				log_warn("sandbox %s: session %s lost %llu bytes of %s", s->sb->id, s->id,
					 (unsigned long long)lost, stream_names[i]);
			process_stream(s, i);
		}
	}
	if (!ended)
		proc_update_flow(s->p);
	struct session_cmd *c = s->queue;
	if (c && c->started && c->done[OUT] && c->done[ERR]) {
		cmd_finish(c, NULL);
		if (!ended)
			return;
		c = s->queue;
	}
	if (ended) {
		/* The shell is gone (exit, or killed): the running command ends
		 * with it, the queued ones never run. */
		if (c && c->started) {
			for (int i = 0; i < NSTREAMS; i++)
				deliver(c, i, s->pend[i], evbuffer_get_length(s->pend[i]));
			c->status = ended_status;
			s->queue = c->next;
			c->s = NULL;
			cmd_finish(c, NULL);
		}
		sessions_on_gone(s);
	}
}

/* ---- lifetime ---- */

static struct session *session_new(struct sandbox *sb)
{
	struct session *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->sb = sb;
	for (int i = 0; i < NSTREAMS; i++)
		s->pend[i] = evbuffer_new();
	s->next_seq = 1;
	s->next = sb->sessions;
	sb->sessions = s;
	return s;
}

void sessions_on_gone(struct session *s)
{
	struct session **pp = &s->sb->sessions;
	while (*pp && *pp != s)
		pp = &(*pp)->next;
	if (*pp)
		*pp = s->next;
	if (s->p)
		proc_set_session(s->p, NULL);
	while (s->queue) {
		struct session_cmd *c = s->queue;
		s->queue = c->next;
		c->s = NULL;
		cmd_finish(c, "the session has ended");
	}
	for (int i = 0; i < NSTREAMS; i++)
		evbuffer_free(s->pend[i]);
	free(s);
}

/* The prologue every session's shell runs first. */
static void prologue(struct session *s, struct evbuffer *b)
{
	evbuffer_add_printf(b,
			    "shopt -s expand_aliases\n"
			    "__cove_end() { printf '\\036%s:%%s:%%s\\036' \"$1\" \"$2\"; "
			    "printf '\\036%s:%%s:%%s\\036' \"$1\" \"$2\" >&2; return \"$2\"; }\n",
			    s->token, s->token);
}

void sessions_on_kept(struct sandbox *sb, struct proc *p)
{
	json_t *m = json_object_get(proc_meta(p), "session");
	const char *id = json_string_value(json_object_get(m, "id"));
	const char *token = json_string_value(json_object_get(m, "token"));
	struct session *s = NULL;
	if (!id || !token || strlen(id) >= sizeof(s->id) || strlen(token) >= sizeof(s->token) || !(s = session_new(sb)))
		return;
	snprintf(s->id, sizeof(s->id), "%s", id);
	snprintf(s->token, sizeof(s->token), "%s", token);
	s->created_at = json_integer_value(json_object_get(proc_meta(p), "started_at"));
	s->p = p;
	proc_set_session(p, s);
	/* Whatever ran when the last coved went is over for its client: skip
	 * to a fresh marker, and go on from there. */
	uint32_t r;
	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)time(NULL);
	s->sync_seq = (r & 0x3fffffff) + 1;
	s->next_seq = s->sync_seq + 1;
	s->stale[OUT] = s->stale[ERR] = true;
	struct cove_err err = { 0 };
	char line[64];
	snprintf(line, sizeof(line), "__cove_end %u 0\n", s->sync_seq);
	struct stdin_request in = { .data = line, .len = strlen(line) };
	if (proc_write_stdin(p, &in, NULL, &err) < 0)
		log_warn("sandbox %s: session %s: %s", sb->id, s->id, err.msg);
}

bool sessions_busy(const struct sandbox *sb)
{
	for (const struct session *s = sb->sessions; s; s = s->next)
		if (s->queue)
			return true;
	return false;
}

json_t *session_to_json(const struct session *s)
{
	int n = 0;
	for (struct session_cmd *c = s->queue; c; c = c->next)
		n++;
	return json_pack("{s:s, s:i, s:I, s:b, s:i}", "id", s->id, "pid", proc_pid(s->p), "created_at",
			 (json_int_t)s->created_at, "busy", s->queue != NULL, "queued", n);
}

static int count_sessions(struct sandbox *sb)
{
	int n = 0;
	for (struct session *x = sb->sessions; x; x = x->next)
		n++;
	return n;
}

/* The shell's first lines, which define __cove_end. */
static int write_prologue(struct session *s, struct cove_err *err)
{
	struct evbuffer *b = evbuffer_new();
	if (!b)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	prologue(s, b);
	struct stdin_request in = { .data = evbuffer_pullup(b, -1), .len = evbuffer_get_length(b) };
	int r = proc_write_stdin(s->p, &in, NULL, err);
	evbuffer_free(b);
	return r;
}

int sessions_create(struct sandbox *sb, const struct session_request *req, struct output *out, struct cove_err *err)
{
	if (sandbox_ready(sb, err) < 0)
		return -1;
	if (count_sessions(sb) >= SESSIONS_MAX)
		return err_set(err, COVE_EFULL, "sandbox %s has %d sessions already", sb->id, SESSIONS_MAX);
	char hex[13], token[33];
	if (random_hex(hex, 6) < 0 || random_hex(token, 16) < 0)
		return err_set(err, COVE_EINTERNAL, "no random bytes for a session");
	struct session *s = session_new(sb);
	if (!s)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	snprintf(s->id, sizeof(s->id), "ss_%s", hex);
	snprintf(s->token, sizeof(s->token), "%s", token);
	s->created_at = sandbox_now_ms();
	struct exec_request er = {
		.stdin_open = true, .background = true, .cwd = req->cwd, .user = req->user, .env = req->env
	};
	er.argv = json_pack("[s, s, s]", "/bin/bash", "--noprofile", "--norc");
	er.cmd = er.argv;
	json_t *meta = json_pack("{s:{s:s, s:s}}", "session", "id", s->id, "token", s->token);
	struct proc *p = NULL;
	int r = proc_spawn_kept(sb, &er, meta, out, &p, err);
	json_decref(meta);
	json_decref(er.argv);
	if (r < 0) {
		sessions_on_gone(s);
		return -1;
	}
	s->p = p;
	proc_set_session(p, s);
	if (write_prologue(s, err) < 0) /* spawn was sent: its answer goes to out */
		proc_signal(s->p, SIGKILL, WIRE_FLAG_TREE);
	return 0;
}

json_t *sessions_to_json(struct sandbox *sb)
{
	json_t *a = json_array();
	for (struct session *s = sb->sessions; s; s = s->next)
		json_array_insert_new(a, 0, session_to_json(s));
	return a;
}

int sessions_delete(struct sandbox *sb, const char *id, struct cove_err *err)
{
	struct session *s = find_session(sb, id);
	if (!s)
		return err_set(err, COVE_ENOTFOUND, "no session '%s' in sandbox %s", id, sb->id);
	proc_signal(s->p, SIGKILL, WIRE_FLAG_TREE);
	sessions_on_gone(s);
	return 0;
}

/* The command as one shell line: a string as it is, argv quoted word by word. */
static int command_text(const struct exec_request *er, struct evbuffer *b, struct cove_err *err)
{
	if (json_is_string(er->cmd)) {
		evbuffer_add(b, json_string_value(er->cmd), json_string_length(er->cmd));
		return 0;
	}
	size_t i;
	json_t *v;
	json_array_foreach(er->cmd, i, v)
	{
		struct evbuffer *w = evbuffer_new();
		ansi_c_quote(w, json_string_value(v), json_string_length(v));
		if (i)
			evbuffer_add(b, " ", 1);
		evbuffer_add_buffer(b, w);
		evbuffer_free(w);
	}
	return 0;
}

int sessions_exec(struct sandbox *sb, const struct exec_request *er, const char *session, struct output *out,
		  struct cove_err *err)
{
	struct session *s = find_session(sb, session);
	if (!s)
		return err_set(err, COVE_ENOTFOUND, "no session '%s' in sandbox %s", session, sb->id);
	if (sandbox_ready(sb, err) < 0)
		return -1;
	if (er->env || er->cwd || er->user || er->background || er->tty || er->tag || er->stdin_open)
		return err_set(err, COVE_EINVAL,
			       "a session command takes only cmd, stdin, timeout, stream and max_output "
			       "(cwd, env and user are the session's: use cd and export)");
	int n = 0;
	for (struct session_cmd *x = s->queue; x; x = x->next)
		n++;
	if (n >= SESSION_QUEUE_MAX)
		return err_set(err, COVE_EFULL, "session %s has %d commands queued", s->id, n);
	struct session_cmd *c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	c->s = s;
	c->seq = s->next_seq++;
	c->stream = er->stream;
	c->max_output = er->max_output;
	c->timeout = er->timeout;
	c->line = evbuffer_new();
	for (int i = 0; i < NSTREAMS; i++)
		c->out[i] = evbuffer_new();
	struct evbuffer *text = evbuffer_new();
	command_text(er, text, err);
	evbuffer_add(c->line, "eval ", 5);
	ansi_c_quote(c->line, (const char *)evbuffer_pullup(text, -1), evbuffer_get_length(text));
	evbuffer_free(text);
	if (er->has_stdin) {
		evbuffer_add(c->line, " < <(printf %s ", 15);
		ansi_c_quote(c->line, (const char *)er->stdin_data, er->stdin_len);
		evbuffer_add(c->line, ")", 1);
	} else {
		evbuffer_add(c->line, " </dev/null", 11);
	}
	evbuffer_add_printf(c->line, "; __cove_end %u \"$?\"\n", c->seq);
	c->answer = out;
	output_attach(out, &cmd_producer, c);
	struct session_cmd **pp = &s->queue;
	while (*pp)
		pp = &(*pp)->next;
	*pp = c;
	start_next(s);
	return 0;
}

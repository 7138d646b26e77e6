/* Exec: one command in a sandbox, spawned by its cove-init with pipes whose
 * other ends coved reads on its loop. Output is either collected (capped,
 * with a truncation flag) and given whole with the exit, or streamed to the
 * output while it is produced. Streaming has backpressure: when the
 * consumer reads slower than the process writes, its front end pauses the
 * output, coved stops reading the pipes, the pipes fill, and the process
 * blocks; coved's memory stays bounded whatever the process prints.
 *
 * An exec ends when its process has exited (reported by cove-init) and the
 * pipes have been drained of what it wrote. Descendants that keep the pipes
 * open do not hold the exec open. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/encoding.h"
#include "common/wire.h"
#include "engine/engine.h"
#include "engine/process.h"

extern char **environ;

#define PIPE_READ_CHUNK 65536

enum { OUT, ERR, NSTREAMS };

struct exec_stream {
	int fd;
	struct event *ev;
	struct evbuffer *buf; /* collected output, or a held-back partial UTF-8 tail */
	size_t collected;
	bool truncated;
	bool eof;
};

struct exec {
	struct exec *next;
	struct sandbox *sb;
	struct output *out; /* NULL once closed or cancelled */
	bool stream;
	bool paused;
	size_t max_output;
	uint32_t seq;
	pid_t pid; /* 0 until spawned */
	struct exec_stream s[NSTREAMS];
	int stdin_fd;
	struct event *stdin_ev;
	struct evbuffer *stdin_buf;
	struct event *timeout_ev;
	bool timed_out;
	bool exited;
	int status;
	struct timespec started;
};

static void stream_close(struct exec_stream *s)
{
	if (s->ev)
		event_free(s->ev);
	if (s->fd >= 0)
		close(s->fd);
	s->ev = NULL;
	s->fd = -1;
}

static void exec_free(struct exec *e)
{
	struct exec **pp = &e->sb->execs;
	while (*pp && *pp != e)
		pp = &(*pp)->next;
	if (*pp)
		*pp = e->next;
	for (int i = 0; i < NSTREAMS; i++) {
		stream_close(&e->s[i]);
		if (e->s[i].buf)
			evbuffer_free(e->s[i].buf);
	}
	if (e->stdin_ev)
		event_free(e->stdin_ev);
	if (e->stdin_fd >= 0)
		close(e->stdin_fd);
	if (e->stdin_buf)
		evbuffer_free(e->stdin_buf);
	if (e->timeout_ev)
		event_free(e->timeout_ev);
	free(e);
}

static double elapsed_ms(const struct exec *e)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (now.tv_sec - e->started.tv_sec) * 1e3 + (now.tv_nsec - e->started.tv_nsec) / 1e6;
}

/* The end of the engine's use of e's output (err NULL: answered whole). */
static void close_output(struct exec *e, const struct cove_err *err)
{
	struct output *o = e->out;
	e->out = NULL;
	if (o)
		output_close(o, err);
}

static void send_data(struct exec *e, int i, const char *buf, size_t n)
{
	struct out_event ev = { .type = i == OUT ? OUT_STDOUT : OUT_STDERR, .data = buf, .len = n };
	output_write(e->out, &ev);
}

static void finish(struct exec *e)
{
	histogram_observe(&engine_ctx->metrics.exec, elapsed_ms(e) / 1e3);
	if (e->out) {
		struct out_exit x = {
			.pid = e->pid, .status = e->status, .timed_out = e->timed_out, .duration_ms = elapsed_ms(e)
		};
		for (int i = 0; i < NSTREAMS && !e->stream; i++) {
			x.collected[i] = e->s[i].buf;
			x.truncated[i] = e->s[i].truncated;
		}
		struct out_event ev = { .type = OUT_EXIT, .pid = e->pid, .exit = &x };
		output_write(e->out, &ev);
		close_output(e, NULL);
	}
	exec_free(e);
}

static bool streams_done(const struct exec *e)
{
	return e->s[OUT].eof && e->s[ERR].eof;
}

static void deliver(struct exec *e, int i, const char *buf, size_t n);

/* Read what the pipe holds now. Returns false at EOF or error. */
static bool drain(struct exec *e, int i)
{
	char buf[PIPE_READ_CHUNK];
	struct exec_stream *s = &e->s[i];
	while (s->fd >= 0 && !e->paused) {
		ssize_t n = read(s->fd, buf, sizeof(buf));
		if (n > 0) {
			deliver(e, i, buf, n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		s->eof = true;
		stream_close(s);
		return false;
	}
	return true;
}

static void maybe_finish(struct exec *e)
{
	if (!e->exited)
		return;
	/* The process is gone: what it wrote is in the pipes now. Take it and
	 * stop, even if a descendant still holds the write ends. */
	for (int i = 0; i < NSTREAMS && !e->paused; i++) {
		drain(e, i);
		e->s[i].eof = true;
		stream_close(&e->s[i]);
	}
	if (streams_done(e)) {
		for (int i = 0; i < NSTREAMS && e->stream && e->out; i++)
			if (evbuffer_get_length(e->s[i].buf)) { /* a dangling partial UTF-8 tail */
				size_t n = evbuffer_get_length(e->s[i].buf);
				send_data(e, i, (char *)evbuffer_pullup(e->s[i].buf, -1), n);
			}
		finish(e);
	}
}

static void set_paused(struct exec *e, bool paused)
{
	e->paused = paused;
	for (int i = 0; i < NSTREAMS; i++)
		if (e->s[i].ev) {
			if (paused)
				event_del(e->s[i].ev);
			else
				event_add(e->s[i].ev, NULL);
		}
}

/* The output's producer: its front end's back-pressure, and its consumer
 * gone. */
static void on_pause(void *arg)
{
	set_paused(arg, true);
}

static void on_resume(void *arg)
{
	struct exec *e = arg;
	if (!e->paused)
		return;
	set_paused(e, false);
	for (int i = 0; i < NSTREAMS; i++)
		drain(e, i);
	maybe_finish(e);
}

static void signal_process(struct exec *e, int sig);

/* The consumer went away: the process is killed; its exit frees the exec. */
static void on_cancel(void *arg)
{
	struct exec *e = arg;
	e->out = NULL;
	signal_process(e, SIGKILL);
	if (e->paused)
		set_paused(e, false);
}

static const struct output_producer exec_producer = { .pause = on_pause, .resume = on_resume, .cancel = on_cancel };

static void deliver(struct exec *e, int i, const char *buf, size_t n)
{
	struct exec_stream *s = &e->s[i];
	if (!e->out)
		return; /* nobody to tell: keep the pipe flowing */
	if (!e->stream) {
		size_t room = e->max_output > s->collected ? e->max_output - s->collected : 0;
		size_t take = n < room ? n : room;
		evbuffer_add(s->buf, buf, take);
		s->collected += take;
		s->truncated |= take < n;
		return;
	}
	/* Hold back an incomplete UTF-8 sequence so that text stays text. */
	evbuffer_add(s->buf, buf, n);
	size_t len = evbuffer_get_length(s->buf);
	const char *p = (const char *)evbuffer_pullup(s->buf, -1);
	int valid;
	size_t ok = utf8_valid_prefix(p, len, &valid);
	size_t send = (!valid || ok == 0) ? len : ok;
	if (!valid || len - ok > 3)
		send = len;
	send_data(e, i, p, send);
	evbuffer_drain(s->buf, send);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct exec *e = arg;
	int i = e->s[OUT].fd == fd ? OUT : ERR;
	drain(e, i);
	maybe_finish(e);
}

static void on_stdin_writable(evutil_socket_t fd, short what, void *arg)
{
	struct exec *e = arg;
	if (evbuffer_write(e->stdin_buf, fd) < 0 && errno != EAGAIN && errno != EINTR)
		evbuffer_drain(e->stdin_buf, evbuffer_get_length(e->stdin_buf)); /* reader gone */
	if (evbuffer_get_length(e->stdin_buf) == 0) {
		event_free(e->stdin_ev);
		e->stdin_ev = NULL;
		close(e->stdin_fd);
		e->stdin_fd = -1;
	}
}

static void signal_process(struct exec *e, int sig)
{
	if (e->pid <= 0 || e->exited)
		return;
	struct wire_hdr h = { .type = WIRE_SIGNAL, .pid = e->pid, .value = sig, .flags = WIRE_FLAG_TREE };
	(void)sandbox_send(e->sb, &h, sizeof(h), NULL, 0);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct exec *e = arg;
	e->timed_out = true;
	signal_process(e, SIGKILL);
}

static struct exec *find_exec(struct sandbox *sb, uint32_t seq, pid_t pid)
{
	for (struct exec *e = sb->execs; e; e = e->next)
		if (seq ? e->seq == seq : e->pid == pid)
			return e;
	return NULL;
}

void exec_on_spawned(struct sandbox *sb, uint32_t seq, pid_t pid)
{
	struct exec *e = find_exec(sb, seq, 0);
	if (!e)
		return;
	e->pid = pid;
	for (int i = 0; i < NSTREAMS; i++)
		event_add(e->s[i].ev, NULL);
	if (!e->out) { /* the consumer left before the spawn completed */
		signal_process(e, SIGKILL);
		return;
	}
	if (e->stream) {
		struct out_event ev = { .type = OUT_START, .pid = pid };
		output_write(e->out, &ev);
	}
}

void exec_on_spawn_failed(struct sandbox *sb, uint32_t seq, int stage, int errnum)
{
	struct exec *e = find_exec(sb, seq, 0);
	if (!e)
		return;
	struct cove_err err = { 0 };
	int code = (stage == WIRE_STAGE_EXEC || stage == WIRE_STAGE_CWD || stage == WIRE_STAGE_USER) ? COVE_EINVAL
												     : COVE_EINTERNAL;
	err_set(&err, code, "%s: %s", wire_stage_name(stage), strerror(errnum));
	engine_ctx->metrics.execs_failed++;
	close_output(e, &err);
	exec_free(e);
}

void exec_on_exited(struct sandbox *sb, pid_t pid, int status)
{
	struct exec *e = find_exec(sb, 0, pid);
	if (!e)
		return;
	e->exited = true;
	e->status = status;
	if (e->timeout_ev)
		event_del(e->timeout_ev);
	maybe_finish(e);
}

void exec_abort_all(struct sandbox *sb, const char *why)
{
	while (sb->execs) {
		struct exec *e = sb->execs;
		struct cove_err err = { 0 };
		err_set(&err, COVE_ESTATE, "%s", why);
		close_output(e, &err);
		exec_free(e);
	}
}

static int make_pipe(int fds[2], struct cove_err *err)
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return err_sys(err, errno, "pipe");
	return 0;
}

/* Build argv and envp for the wire from the request. The environment is
 * exactly the sandbox's defaults, then the sandbox spec's env, then the
 * request's: never coved's own, unless an external sandbox asked for it
 * with inherit_env (then coved's environment replaces the defaults). */
static int build_env(struct sandbox *sb, const struct exec_request *er, const char **envp, char *store, size_t cap)
{
	static const char *const defaults[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
						"LANG=C.UTF-8", "TERM=xterm", "TMPDIR=/tmp" };
	json_t *layers[2] = { sb->spec.env, er->env };
	size_t n = 0, off = 0;
	for (char **e = environ; sb->spec.inherit_env && *e; e++) {
		if (n >= WIRE_MAX_ARGS)
			return -1;
		if (strchr(*e, '='))
			envp[n++] = *e;
	}
	for (size_t i = 0; !sb->spec.inherit_env && i < ARRAY_SIZE(defaults); i++)
		envp[n++] = defaults[i];
	for (int l = 0; l < 2; l++) {
		const char *k;
		json_t *v;
		json_object_foreach(layers[l], k, v)
		{
			size_t need = strlen(k) + 1 + strlen(json_string_value(v)) + 1;
			if (n >= WIRE_MAX_ARGS || off + need > cap)
				return -1;
			snprintf(store + off, need, "%s=%s", k, json_string_value(v));
			/* A later layer replaces an earlier value of the same name. */
			size_t klen = strlen(k), j;
			for (j = 0; j < n; j++)
				if (strncmp(envp[j], k, klen) == 0 && envp[j][klen] == '=')
					break;
			envp[j] = store + off;
			if (j == n)
				n++;
			off += need;
		}
	}
	envp[n] = NULL;
	return 0;
}

int exec_send_spawn(struct sandbox *sb, struct wire_hdr *h, const struct exec_request *er, const int *fds, int nfds,
		    struct cove_err *err)
{
	static const char *argv[WIRE_MAX_ARGS + 1], *envp[WIRE_MAX_ARGS + 1];
	static char env_store[WIRE_MAX_PACKET], pkt[WIRE_MAX_PACKET];
	size_t argc = json_array_size(er->argv);
	if (argc > WIRE_MAX_ARGS)
		return err_set(err, COVE_ETOOBIG, "too many arguments");
	for (size_t i = 0; i < argc; i++)
		argv[i] = json_string_value(json_array_get(er->argv, i));
	argv[argc] = NULL;
	if (build_env(sb, er, envp, env_store, sizeof(env_store)) < 0)
		return err_set(err, COVE_ETOOBIG, "environment too large");
	const char *user = er->user ? er->user : sb->spec.user;
	const char *cwd = er->cwd ? er->cwd : sb->spec.cwd;
	long len = wire_encode_spawn(pkt, sizeof(pkt), h, user, cwd, argv, envp);
	if (len < 0)
		return err_set(err, COVE_ETOOBIG, "command and environment too large (max %d bytes)", WIRE_MAX_PACKET);
	int r = sandbox_send(sb, pkt, len, fds, nfds);
	if (r < 0)
		return err_sys(err, -r, "send to cove-init of sandbox %s", sb->id);
	return 0;
}

static int setup_stdin(struct exec *e, const struct exec_request *er, int *child_fd, struct cove_err *err)
{
	int p[2];
	if (make_pipe(p, err) < 0)
		return -1;
	*child_fd = p[0];
	e->stdin_fd = p[1];
	evutil_make_socket_nonblocking(e->stdin_fd);
	e->stdin_buf = evbuffer_new();
	evbuffer_add(e->stdin_buf, er->stdin_data, er->stdin_len);
	e->stdin_ev = event_new(engine_ctx->base, e->stdin_fd, EV_WRITE | EV_PERSIST, on_stdin_writable, e);
	event_add(e->stdin_ev, NULL);
	return 0;
}

int exec_start(struct sandbox *sb, const struct exec_request *er, struct output *out, struct cove_err *err)
{
	if (sandbox_ready(sb, err) < 0)
		return -1;
	struct exec *e = calloc(1, sizeof(*e));
	if (!e)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	e->sb = sb;
	e->stream = er->stream;
	e->max_output = er->max_output;
	e->seq = sb->next_seq++ ?: sb->next_seq++;
	e->stdin_fd = -1;
	clock_gettime(CLOCK_MONOTONIC, &e->started);
	e->next = sb->execs;
	sb->execs = e;

	int child[WIRE_MAX_FDS], nfds = 0, p[2];
	for (int i = 0; i < NSTREAMS; i++)
		e->s[i].fd = -1;
	if (er->has_stdin && setup_stdin(e, er, &child[nfds++], err) < 0)
		goto fail;
	for (int i = 0; i < NSTREAMS; i++) {
		if (make_pipe(p, err) < 0)
			goto fail;
		e->s[i].fd = p[0];
		child[nfds++] = p[1];
		evutil_make_socket_nonblocking(p[0]);
		e->s[i].buf = evbuffer_new();
		/* Read only once spawned: the reply must start before any output. */
		e->s[i].ev = event_new(engine_ctx->base, p[0], EV_READ | EV_PERSIST, on_readable, e);
	}
	struct wire_hdr h = { .seq = e->seq, .flags = er->has_stdin ? WIRE_FLAG_STDIN : 0 };
	int r = exec_send_spawn(sb, &h, er, child, nfds, err);
	for (int i = 0; i < nfds; i++)
		close(child[i]);
	nfds = 0;
	if (r < 0)
		goto fail;
	if (er->timeout > 0) {
		struct timeval tv = { (time_t)er->timeout, (suseconds_t)((er->timeout - (time_t)er->timeout) * 1e6) };
		e->timeout_ev = evtimer_new(engine_ctx->base, on_timeout, e);
		evtimer_add(e->timeout_ev, &tv);
	}
	e->out = out;
	output_attach(out, &exec_producer, e);
	return 0;
fail:
	for (int i = 0; i < nfds; i++)
		close(child[i]);
	exec_free(e);
	return -1;
}

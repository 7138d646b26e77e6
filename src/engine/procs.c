/* Background and terminal processes: spawned like an exec, but kept.
 *
 * A kept process outlives the request that started it, and coved itself.
 * Its output goes into a ring (1 MiB per stream) in a memfd that coved maps;
 * cove-init holds a copy of the memfd and of coved's ends of the pipes (or
 * of the pty's master), so that the pipes never break while coved is away
 * and a restarted coved takes everything back (WIRE_LIST) with the tail
 * intact. coved always drains the pipes into the ring: a process never
 * blocks on a slow or absent reader; an attached client reads from the ring
 * at its own pace, and is told when it fell behind by more than the ring.
 *
 * The memfd starts with a header: the write counts of both rings and the
 * process's description (JSON), which is what a restarted coved knows of it.
 * Kept fds, in init's order: the memfd, then stdout and stderr read ends and
 * the stdin write end (pipes), or the pty's master (a terminal). */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include "daemon/http/httpd.h"
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/encoding.h"
#include "common/log.h"
#include "common/wire.h"
#include "engine/engine.h"

#define RING_CAP (1u << 20)
#define RING_HDR 4096u
#define RING_MAGIC 0x31676e72u /* "rng1" */
#define PROCS_MAX_RUNNING 128
#define PROCS_MAX_ENDED 32 /* ended ones kept listed and attachable, per sandbox */
#define ATTACH_CHUNK 65536
#define ATTACH_HIGH_WATER (1u << 20)
#define STDIN_MAX (16u << 20)

enum { OUT, ERR, NSTREAMS };
static const char *const stream_names[NSTREAMS] = { "stdout", "stderr" };
enum { KEPT_RING, KEPT_OUT, KEPT_ERR, KEPT_STDIN };
enum { KEPT_TTY_MASTER = 1 };

struct ring_header {
	uint32_t magic;
	uint32_t meta_len;
	uint64_t cap;
	uint64_t written[NSTREAMS]; /* bytes ever written to each ring */
	char meta[RING_HDR - 32];   /* the process's description, JSON */
};

struct attach {
	struct attach *next;
	struct proc *p;
	struct http_req *req;
	struct http_conn *conn;
	uint64_t pos[NSTREAMS];
	bool kill_on_close; /* a foreground client: the process goes with it */
	bool raw;           /* an upgraded connection: the terminal's bytes both ways, no NDJSON */
	bool eof_pending;   /* raw: its client's half-close, to be typed as ^D */
};

struct stdin_req {
	struct stdin_req *next;
	struct http_req *req; /* answered once its bytes are in the pipe */
	struct http_conn *conn;
	struct evbuffer *buf;
	bool eof;
};

struct waiter {
	struct waiter *next;
	struct proc *p;
	struct http_req *req;
	struct http_conn *conn;
	struct event *timer;
};

struct proc {
	struct proc *next;
	struct sandbox *sb;
	pid_t pid;
	uint32_t seq;
	json_t *meta; /* cmd, tag, cwd, user, tty, stdin, background, started_at */
	bool tty;
	int ring_fd;
	struct ring_header *ring;
	int out_fd[NSTREAMS];
	struct event *out_ev[NSTREAMS];
	int in_fd; /* stdin pipe or pty master, -1 when closed */
	struct event *in_ev;
	struct stdin_req *in_queue;
	struct http_req *start_req;  /* the exec waiting for the spawn */
	struct attach *start_attach; /* its stream, when it asked for one */
	struct attach *attachers;
	struct waiter *waiters;
	struct event *timeout_ev;
	bool timed_out;
	struct session *session; /* the shell behind a session (sessions.c), or NULL */
	bool exited;             /* init reported the exit */
	bool ended;              /* and the output is in the ring */
	int status;
	int64_t ended_at;
};

static const char *proc_tag(const struct proc *p)
{
	return json_string_value(json_object_get(p->meta, "tag"));
}

static char *ring_data(struct proc *p, int i)
{
	return (char *)p->ring + RING_HDR + (size_t)i * RING_CAP;
}

static void ring_append(struct proc *p, int i, const char *buf, size_t n)
{
	if (n > RING_CAP) { /* only the last RING_CAP bytes can stay */
		p->ring->written[i] += n - RING_CAP;
		buf += n - RING_CAP;
		n = RING_CAP;
	}
	size_t off = p->ring->written[i] % RING_CAP, first = n < RING_CAP - off ? n : RING_CAP - off;
	memcpy(ring_data(p, i) + off, buf, first);
	memcpy(ring_data(p, i), buf + first, n - first);
	/* The count moves after the bytes: a coved that dies in between loses
	 * them, and never reads bytes that are not there. */
	__atomic_store_n(&p->ring->written[i], p->ring->written[i] + n, __ATOMIC_RELEASE);
}

/* pid, tag, state, exit fields: what the API shows of a process. */
static json_t *proc_to_json(const struct proc *p)
{
	json_t *j = json_deep_copy(p->meta);
	json_object_set_new(j, "pid", json_integer(p->pid));
	json_object_set_new(j, "state", json_string(p->ended ? "exited" : "running"));
	bool signaled = p->ended && WIFSIGNALED(p->status);
	json_object_set_new(j, "exit_code", p->ended && !signaled ? json_integer(WEXITSTATUS(p->status)) : json_null());
	json_object_set_new(j, "signal",
			    signaled ? json_string(sigabbrev_np(WTERMSIG(p->status)) ?: "?") : json_null());
	json_object_set_new(j, "timed_out", json_boolean(p->timed_out));
	json_object_set_new(j, "ended_at", p->ended_at ? json_integer(p->ended_at) : json_null());
	return j;
}

/* ---- attached streams ---- */

static void attach_free(struct attach *a)
{
	struct attach **pp = &a->p->attachers;
	while (*pp && *pp != a)
		pp = &(*pp)->next;
	if (*pp)
		*pp = a->next;
	if (a->conn)
		conn_clear_hook(a->conn, a);
	if (a->p->start_attach == a)
		a->p->start_attach = NULL;
	free(a);
}

static void attach_pump(struct attach *a);
static void update_flow(struct proc *p);
static void raw_feed_all(struct proc *p);

static void on_attach_sent(struct http_conn *conn, void *arg)
{
	struct attach *a = arg;
	struct proc *p = a->p; /* a may be freed by its last pump */
	if (a->req && exec_unsent_bytes(a->req) < ATTACH_HIGH_WATER / 2) {
		attach_pump(a);
		update_flow(p);
	}
}

static void signal_proc(struct proc *p, int sig, uint32_t flags)
{
	if (p->exited || p->pid <= 0)
		return;
	struct wire_hdr h = { .type = WIRE_SIGNAL, .pid = p->pid, .value = sig, .flags = flags };
	(void)sandbox_send(p->sb, &h, sizeof(h), NULL, 0);
}

static void on_attach_closed(struct http_conn *conn, void *arg)
{
	struct attach *a = arg;
	a->conn = NULL; /* being freed by libevent */
	a->req = NULL;
	if (a->kill_on_close)
		signal_proc(a->p, SIGKILL, WIRE_FLAG_TREE);
	attach_free(a);
}

/* An upgraded connection's share of the terminal's output: the ring's bytes
 * as they are, up to ATTACH_HIGH_WATER queued on the connection (the rest
 * when it has drained). What the ring lost before a slow client read it is
 * skipped: a raw stream has no way to say so, and a foreground client loses
 * nothing (its terminal waits for it). Once the process has ended and
 * everything is out, the connection closes: that is the client's sign to
 * ask for the exit status. */
static void raw_pump(struct attach *a)
{
	struct proc *p = a->p;
	struct evbuffer *out = bufferevent_get_output(http_conn_bev(a->conn));
	size_t queued = evbuffer_get_length(out);
	if (queued < ATTACH_HIGH_WATER)
		(void)proc_read_output(p, OUT, &a->pos[OUT], out, ATTACH_HIGH_WATER - queued);
	if (p->ended && a->pos[OUT] == proc_output_end(p, OUT)) {
		http_conn_close_when_sent(a->conn);
		a->req = NULL;
		attach_free(a);
	}
}

/* Send what the ring holds beyond the client's position, as far as the
 * connection takes it; then, once the process has ended and everything is
 * out, the exit event. */
static void attach_pump(struct attach *a)
{
	struct proc *p = a->p;
	if (!a->req)
		return;
	if (a->raw) {
		raw_pump(a);
		return;
	}
	for (int i = 0; i < NSTREAMS; i++) {
		uint64_t written = __atomic_load_n(&p->ring->written[i], __ATOMIC_ACQUIRE);
		while (a->pos[i] < written && exec_unsent_bytes(a->req) < ATTACH_HIGH_WATER) {
			if (written - a->pos[i] > RING_CAP) {
				exec_send_event(a->req,
						json_pack("{s:s, s:s, s:I}", "type", "gap", "stream", stream_names[i],
							  "lost", (json_int_t)(written - RING_CAP - a->pos[i])),
						NULL, NULL);
				a->pos[i] = written - RING_CAP;
			}
			size_t off = a->pos[i] % RING_CAP, n = written - a->pos[i];
			if (n > ATTACH_CHUNK)
				n = ATTACH_CHUNK;
			if (n > RING_CAP - off)
				n = RING_CAP - off;
			const char *d = ring_data(p, i) + off;
			/* At the live end, hold back an incomplete UTF-8 sequence:
			 * the rest of it is on its way. */
			int valid;
			size_t ok = utf8_valid_prefix(d, n, &valid);
			if (!p->ended && a->pos[i] + n == written && valid && ok < n && n - ok <= 3) {
				if (ok == 0)
					break;
				n = ok;
			}
			exec_send_event(a->req, exec_data_event(stream_names[i], d, n), on_attach_sent, a);
			a->pos[i] += n;
		}
	}
	if (p->ended && a->pos[OUT] == p->ring->written[OUT] && a->pos[ERR] == p->ring->written[ERR]) {
		json_t *j = exec_exit_fields(json_pack("{s:s}", "type", "exit"), p->status, p->timed_out, -1);
		exec_send_event(a->req, j, NULL, NULL);
		http_reply_end(a->req);
		a->req = NULL;
		attach_free(a);
	}
}

static void pump_all(struct proc *p)
{
	for (struct attach *a = p->attachers, *next; a; a = next) {
		next = a->next;
		attach_pump(a);
	}
}

/* A client of p on req's connection, which it leaves when it closes. */
static struct attach *attach_new(struct proc *p, struct http_req *req, struct cove_err *err)
{
	struct attach *a = calloc(1, sizeof(*a));
	if (!a) {
		err_set(err, COVE_EINTERNAL, "out of memory");
		return NULL;
	}
	a->p = p;
	a->req = req;
	a->conn = http_req_conn(req);
	if (conn_set_hook(a->conn, on_attach_closed, a) < 0) {
		free(a);
		err_set(err, COVE_EINTERNAL, "out of memory");
		return NULL;
	}
	a->next = p->attachers;
	p->attachers = a;
	return a;
}

/* Start an NDJSON stream on req from the ring positions given. */
static struct attach *attach_start(struct proc *p, struct http_req *req, bool replay, struct cove_err *err)
{
	struct attach *a = attach_new(p, req, err);
	if (!a)
		return NULL;
	for (int i = 0; i < NSTREAMS; i++) {
		uint64_t w = p->ring->written[i];
		a->pos[i] = replay ? 0 : w; /* what the ring lost is reported as a gap */
	}
	evhttp_add_header(http_req_out_headers(req), "Content-Type", "application/x-ndjson");
	http_reply_start(req, 200, "OK");
	json_t *start = json_pack("{s:s, s:i}", "type", "start", "pid", p->pid);
	if (proc_tag(p))
		json_object_set_new(start, "tag", json_string(proc_tag(p)));
	exec_send_event(req, start, NULL, NULL);
	return a;
}

/* ---- stdin ---- */

static void stdin_answer(struct stdin_req *s, int status, const char *code, const char *msg)
{
	if (s->req) {
		if (status == 200) {
			reply_json(s->req, 200, json_object());
		} else {
			struct cove_err err = { 0 };
			err_set(&err, COVE_ESTATE, "%s", msg);
			reply_error(s->req, &err);
		}
		conn_clear_hook(s->conn, s);
	}
	evbuffer_free(s->buf);
	free(s);
}

static void release_kept(struct proc *p, int index)
{
	struct wire_hdr h = { .type = WIRE_RELEASE, .pid = p->pid, .value = index };
	(void)sandbox_send(p->sb, &h, sizeof(h), NULL, 0);
}

/* A pipe's end. (A terminal's end of input is its EOF character, as typed,
 * queued with the bytes: see queue_stdin.) */
static void close_stdin(struct proc *p)
{
	if (p->in_ev)
		event_free(p->in_ev);
	p->in_ev = NULL;
	if (p->in_fd >= 0)
		close(p->in_fd);
	p->in_fd = -1;
	if (!p->exited)
		release_kept(p, KEPT_STDIN);
}

static void stdin_fail_all(struct proc *p, const char *why)
{
	while (p->in_queue) {
		struct stdin_req *s = p->in_queue;
		p->in_queue = s->next;
		stdin_answer(s, 409, "wrong_state", why);
	}
}

static void on_stdin_writable(evutil_socket_t fd, short what, void *arg)
{
	struct proc *p = arg;
	while (p->in_queue) {
		struct stdin_req *s = p->in_queue;
		if (evbuffer_get_length(s->buf) > 0 && evbuffer_write(s->buf, p->in_fd) < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			stdin_fail_all(p, "the process no longer reads its input");
			break;
		}
		if (evbuffer_get_length(s->buf) > 0)
			return;
		p->in_queue = s->next;
		bool eof = s->eof;
		stdin_answer(s, 200, NULL, NULL);
		if (eof) {
			close_stdin(p);
			stdin_fail_all(p, "stdin was closed");
			break;
		}
	}
	if (p->in_ev)
		event_del(p->in_ev);
	/* Upgraded connections' bytes go after the requests': their turn. */
	raw_feed_all(p);
}

static void on_stdin_client_closed(struct http_conn *conn, void *arg)
{
	struct stdin_req *s = arg;
	s->req = NULL; /* the bytes still go in: they were sent */
	s->conn = NULL;
}

/* ---- terminals over an upgraded connection ----
 *
 * GET .../attach with "Connection: Upgrade" and "Upgrade: tcp" is answered
 * 101, and from then on the connection is the terminal's, raw: the
 * client's bytes are typed into it, its output is sent as it is (see
 * raw_pump), and a half-close of the client is the terminal's EOF
 * character. Flow control both ways is the sockets': the client's bytes
 * wait in the connection's input while the terminal takes none, and a
 * foreground client's terminal waits for it to read (held_back). */

/* Some of what the client typed into the terminal fd: its bytes, then, once
 * they are all in, the EOF character of its half-close. What write returns;
 * 0 when nothing waits. */
static int raw_write_some(struct attach *a, struct evbuffer *in, int fd)
{
	if (evbuffer_get_length(in) > 0)
		return evbuffer_write(in, fd);
	if (!a->eof_pending)
		return 0;
	ssize_t n = write(fd, "\x04", 1);
	if (n == 1)
		a->eof_pending = false;
	return (int)n;
}

/* The client's input into the terminal, as far as it takes it now (the
 * rest waits for on_stdin_writable); none while stdin requests are queued,
 * which came first. A terminal that no longer takes input drops it. */
static void raw_feed_stdin(struct attach *a)
{
	struct proc *p = a->p;
	struct evbuffer *in = http_conn_input(a->conn);
	if (p->ended || p->in_fd < 0 || !p->in_ev) {
		evbuffer_drain(in, evbuffer_get_length(in));
		a->eof_pending = false;
		return;
	}
	int n;
	while (!p->in_queue && (n = raw_write_some(a, in, p->in_fd)) != 0) {
		if (n > 0 || errno == EINTR)
			continue;
		if (errno == EAGAIN)
			event_add(p->in_ev, NULL);
		return; /* else EIO: the terminal's last user is gone; its end comes */
	}
}

static void raw_feed_all(struct proc *p)
{
	for (struct attach *a = p->attachers; a; a = a->next)
		if (a->raw && a->req)
			raw_feed_stdin(a);
}

static void on_raw_input(struct http_conn *conn, void *arg)
{
	raw_feed_stdin(arg);
}

static void on_raw_input_end(struct http_conn *conn, void *arg)
{
	struct attach *a = arg;
	a->eof_pending = true;
	raw_feed_stdin(a);
}

static void on_raw_drained(struct http_conn *conn, void *arg)
{
	struct attach *a = arg;
	struct proc *p = a->p; /* a may be freed by its last pump */
	attach_pump(a);
	update_flow(p);
}

static int raw_attach_start(struct proc *p, struct http_req *req, bool replay, bool foreground, struct cove_err *err)
{
	static const struct http_raw_callbacks cbs = { .on_input = on_raw_input,
						       .on_input_end = on_raw_input_end,
						       .on_drained = on_raw_drained };
	struct attach *a = attach_new(p, req, err);
	if (!a)
		return -1;
	a->raw = true;
	a->kill_on_close = foreground;
	uint64_t end = proc_output_end(p, OUT);
	a->pos[OUT] = !replay ? end : end > RING_CAP ? end - RING_CAP : 0;
	a->pos[ERR] = proc_output_end(p, ERR); /* a terminal writes no stderr */
	if (http_upgrade(req, "tcp", &cbs, a) < 0) {
		a->req = NULL;
		attach_free(a);
		return err_set(err, COVE_EINTERNAL, "the connection cannot be upgraded");
	}
	attach_pump(a);
	update_flow(p);
	return 0;
}

/* ---- waiters ---- */

static void waiter_free(struct waiter *w, bool answer)
{
	struct waiter **pp = &w->p->waiters;
	while (*pp && *pp != w)
		pp = &(*pp)->next;
	if (*pp)
		*pp = w->next;
	if (answer && w->req)
		reply_json(w->req, 200, proc_to_json(w->p));
	if (w->conn)
		conn_clear_hook(w->conn, w);
	if (w->timer)
		event_free(w->timer);
	free(w);
}

static void on_wait_timer(evutil_socket_t fd, short what, void *arg)
{
	waiter_free(arg, true);
}

static void on_waiter_closed(struct http_conn *conn, void *arg)
{
	struct waiter *w = arg;
	w->conn = NULL;
	w->req = NULL;
	waiter_free(w, false);
}

/* ---- lifetime ---- */

static void close_output(struct proc *p, int i)
{
	if (p->out_ev[i])
		event_free(p->out_ev[i]);
	if (p->out_fd[i] >= 0 && !(p->tty && p->out_fd[i] == p->in_fd))
		close(p->out_fd[i]);
	p->out_ev[i] = NULL;
	p->out_fd[i] = -1;
}

static void proc_free(struct proc *p)
{
	if (p->session)
		sessions_on_gone(p->session);
	struct proc **pp = &p->sb->procs;
	while (*pp && *pp != p)
		pp = &(*pp)->next;
	if (*pp)
		*pp = p->next;
	while (p->attachers) {
		struct attach *a = p->attachers;
		if (a->req && a->raw) {
			http_conn_close_when_sent(a->conn);
		} else if (a->req) {
			exec_send_event(a->req,
					json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "code",
						  "wrong_state", "message", "the process is gone"),
					NULL, NULL);
			http_reply_end(a->req);
		}
		a->req = NULL;
		attach_free(a);
	}
	while (p->waiters)
		waiter_free(p->waiters, true);
	stdin_fail_all(p, "the process is gone");
	for (int i = 0; i < NSTREAMS; i++)
		close_output(p, i);
	if (p->in_ev)
		event_free(p->in_ev);
	if (p->in_fd >= 0)
		close(p->in_fd);
	if (p->timeout_ev)
		event_free(p->timeout_ev);
	if (p->ring)
		munmap(p->ring, RING_HDR + NSTREAMS * (size_t)RING_CAP);
	if (p->ring_fd >= 0)
		close(p->ring_fd);
	json_decref(p->meta);
	free(p);
}

/* Keep only the newest PROCS_MAX_ENDED ended processes of a sandbox. */
static void trim_ended(struct sandbox *sb)
{
	int n = 0;
	for (struct proc *p = sb->procs, *next; p; p = next) {
		next = p->next;
		if (p->ended && ++n > PROCS_MAX_ENDED && !p->attachers && !p->waiters)
			proc_free(p);
	}
}

/* A foreground terminal's (or a session's) client is its one reader, and the terminal goes
 * with it: there a slow client slows the process (its writes to the pty
 * block once coved stops reading), as a local terminal or ssh does, rather
 * than lose output past the ring. A process that is gone is read whole. */
static bool held_back(const struct proc *p, int i)
{
	if (p->exited)
		return false;
	for (const struct attach *a = p->attachers; a; a = a->next)
		if (a->kill_on_close && a->req && p->ring->written[i] - a->pos[i] >= RING_CAP / 2)
			return true;
	/* A session's shell likewise waits for the command's client. */
	return p->session && p->ring->written[i] - sessions_read_position(p->session, i) >= RING_CAP / 2;
}

/* Read each output fd only while it is not held back. */
static void update_flow(struct proc *p)
{
	for (int i = 0; i < NSTREAMS; i++) {
		if (p->out_ev[i] && held_back(p, i))
			event_del(p->out_ev[i]);
		else if (p->out_ev[i])
			event_add(p->out_ev[i], NULL);
	}
}

static bool drain(struct proc *p, int i)
{
	char buf[ATTACH_CHUNK];
	for (int rounds = 0; p->out_fd[i] >= 0 && rounds < 64 && !held_back(p, i); rounds++) {
		ssize_t n = read(p->out_fd[i], buf, sizeof(buf));
		if (n > 0) {
			ring_append(p, i, buf, n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return true;
		close_output(p, i); /* EOF, or EIO: a pty whose last user is gone */
		return false;
	}
	return true;
}

static void maybe_end(struct proc *p)
{
	if (!p->exited || p->ended)
		return;
	/* The process is gone: what it wrote is in the pipes. Take it, and
	 * stop, even if a descendant still holds the write ends. */
	for (int i = 0; i < NSTREAMS; i++) {
		drain(p, i);
		close_output(p, i);
	}
	p->ended = true;
	p->ended_at = sandbox_now_ms();
	if (p->timeout_ev)
		event_del(p->timeout_ev);
	if (p->in_ev)
		event_free(p->in_ev);
	p->in_ev = NULL;
	if (p->in_fd >= 0)
		close(p->in_fd);
	p->in_fd = -1;
	stdin_fail_all(p, "the process has ended");
	release_kept(p, -1);
	pump_all(p);
	if (p->session)
		sessions_on_output(p->session);
	while (p->waiters)
		waiter_free(p->waiters, true);
	trim_ended(p->sb);
}

static void on_output(evutil_socket_t fd, short what, void *arg)
{
	struct proc *p = arg;
	int i = p->out_fd[OUT] == fd ? OUT : ERR;
	drain(p, i);
	pump_all(p);
	update_flow(p);
	if (p->session)
		sessions_on_output(p->session);
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct proc *p = arg;
	p->timed_out = true;
	signal_proc(p, SIGKILL, WIRE_FLAG_TREE);
}

static struct proc *proc_new(struct sandbox *sb)
{
	struct proc *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->sb = sb;
	p->ring_fd = p->in_fd = -1;
	for (int i = 0; i < NSTREAMS; i++)
		p->out_fd[i] = -1;
	p->next = sb->procs;
	sb->procs = p;
	return p;
}

static int map_ring(struct proc *p)
{
	void *m = mmap(NULL, RING_HDR + NSTREAMS * (size_t)RING_CAP, PROT_READ | PROT_WRITE, MAP_SHARED, p->ring_fd, 0);
	if (m == MAP_FAILED)
		return -1;
	p->ring = m;
	return 0;
}

/* Watch the output fds and the stdin fd (nonblocking, owned by p). */
static void watch_fds(struct proc *p)
{
	for (int i = 0; i < NSTREAMS; i++)
		if (p->out_fd[i] >= 0) {
			evutil_make_socket_nonblocking(p->out_fd[i]);
			p->out_ev[i] = event_new(engine_ctx->base, p->out_fd[i], EV_READ | EV_PERSIST, on_output, p);
			event_add(p->out_ev[i], NULL);
		}
	if (p->in_fd >= 0) {
		evutil_make_socket_nonblocking(p->in_fd);
		p->in_ev = event_new(engine_ctx->base, p->in_fd, EV_WRITE | EV_PERSIST, on_stdin_writable, p);
	}
}

static int count_running(struct sandbox *sb)
{
	int n = 0;
	for (struct proc *p = sb->procs; p; p = p->next)
		n += !p->ended;
	return n;
}

static struct proc *find_tag(struct sandbox *sb, const char *tag)
{
	for (struct proc *p = sb->procs; p; p = p->next)
		if (proc_tag(p) && strcmp(proc_tag(p), tag) == 0)
			return p; /* newest first: a running one before ended ones */
	return NULL;
}

static bool tag_valid(const char *t)
{
	size_t n = strlen(t);
	if (n == 0 || n > 63 || strspn(t, "0123456789") == n)
		return false;
	return strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static int queue_stdin(struct proc *p, struct http_req *req, const void *data, size_t n, bool eof, struct cove_err *err)
{
	struct stdin_req *s = calloc(1, sizeof(*s));
	if (!s || !(s->buf = evbuffer_new())) {
		free(s);
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	evbuffer_add(s->buf, data, n);
	/* A terminal has no end of input, only the EOF character (^D), which
	 * ends a read in canonical mode and is a byte like any in raw mode;
	 * the terminal stays open for what comes next. */
	if (p->tty && eof)
		evbuffer_add(s->buf, "\x04", 1);
	s->eof = eof && !p->tty;
	s->req = req;
	if (req) {
		s->conn = http_req_conn(req);
		if (conn_set_hook(s->conn, on_stdin_client_closed, s) < 0) {
			evbuffer_free(s->buf);
			free(s);
			return err_set(err, COVE_EINTERNAL, "out of memory");
		}
	}
	struct stdin_req **pp = &p->in_queue;
	while (*pp)
		pp = &(*pp)->next;
	*pp = s;
	if (p->pid) /* else once spawned: closing stdin tells init the pid */
		event_add(p->in_ev, NULL);
	return 0;
}

static int spawn(struct sandbox *sb, struct http_req *req, const struct exec_request *er, json_t *extra,
		 struct proc **ret, struct cove_err *err)
{
	if (sb->state != SB_RUNNING || sb->conn_fd < 0)
		return err_set(err, COVE_ESTATE, "sandbox %s is not running", sb->id);
	if (er->tag && !tag_valid(er->tag))
		return err_set(err, COVE_EINVAL, "'tag' must be 1 to 63 of A-Z a-z 0-9 . _ - and not only digits");
	struct proc *same = er->tag ? find_tag(sb, er->tag) : NULL;
	if (same && !same->ended)
		return err_set(err, COVE_ESTATE, "a running process is already tagged '%s'", er->tag);
	if (count_running(sb) >= PROCS_MAX_RUNNING)
		return err_set(err, COVE_EFULL, "sandbox %s runs %d kept processes already", sb->id, PROCS_MAX_RUNNING);
	struct proc *p = proc_new(sb);
	if (!p)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	int child[WIRE_MAX_FDS], nchild = 0, kept[WIRE_MAX_FDS], nkept = 0;
	p->tty = er->tty;
	p->meta =
		json_pack("{s:O, s:s?, s:s?, s:s?, s:b, s:b, s:b, s:I}", "cmd", er->cmd ? er->cmd : er->argv, "tag",
			  er->tag, "cwd", er->cwd, "user", er->user, "tty", er->tty, "stdin", er->stdin_open || er->tty,
			  "background", er->background, "started_at", (json_int_t)sandbox_now_ms());
	if (extra)
		json_object_update(p->meta, extra);
	char *meta = json_dumps(p->meta, JSON_COMPACT);
	p->ring_fd = memfd_create("cove-proc-output", MFD_CLOEXEC);
	if (!meta || strlen(meta) >= sizeof(p->ring->meta) || p->ring_fd < 0 ||
	    ftruncate(p->ring_fd, RING_HDR + NSTREAMS * (off_t)RING_CAP) < 0 || map_ring(p) < 0) {
		err_set(err, meta && strlen(meta) >= sizeof(p->ring->meta) ? COVE_ETOOBIG : COVE_EINTERNAL,
			meta ? "the command is too long for a kept process (at most %zu bytes of JSON)"
			     : "out of memory",
			sizeof(p->ring->meta) - 1);
		free(meta);
		goto fail;
	}
	*p->ring = (struct ring_header){ .magic = RING_MAGIC, .cap = RING_CAP, .meta_len = strlen(meta) };
	memcpy(p->ring->meta, meta, strlen(meta));
	free(meta);
	kept[nkept++] = p->ring_fd;
	struct wire_hdr h = { .seq = sb->next_seq++ ?: sb->next_seq++, .flags = WIRE_FLAG_KEEP };
	if (er->tty) {
		h.flags |= WIRE_FLAG_TTY;
		h.pid = (er->rows << 16) | (er->cols & 0xffff);
	} else {
		int pipes[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } };
		bool want_stdin = er->stdin_open || er->has_stdin;
		for (int i = 0; i < 3; i++)
			if ((i < 2 || want_stdin) && pipe2(pipes[i], O_CLOEXEC) < 0) {
				err_sys(err, errno, "pipe");
				for (int j = 0; j < 3; j++)
					for (int k = 0; k < 2; k++)
						if (pipes[j][k] >= 0)
							close(pipes[j][k]);
				goto fail;
			}
		for (int i = 0; i < 2; i++) /* hold what a process writes while coved is away */
			(void)fcntl(pipes[i][0], F_SETPIPE_SZ, RING_CAP);
		if (want_stdin) {
			h.flags |= WIRE_FLAG_STDIN;
			child[nchild++] = pipes[2][0];
		}
		child[nchild++] = pipes[OUT][1];
		child[nchild++] = pipes[ERR][1];
		p->out_fd[OUT] = kept[nkept++] = pipes[OUT][0];
		p->out_fd[ERR] = kept[nkept++] = pipes[ERR][0];
		if (want_stdin)
			p->in_fd = kept[nkept++] = pipes[2][1];
	}
	h.value = nkept;
	int all[WIRE_MAX_FDS], n = 0;
	for (int i = 0; i < nchild; i++)
		all[n++] = child[i];
	for (int i = 0; i < nkept; i++)
		all[n++] = kept[i];
	p->seq = h.seq;
	watch_fds(p);
	if (er->has_stdin && queue_stdin(p, NULL, er->stdin_data, er->stdin_len, !er->stdin_open, err) < 0)
		goto fail_child;
	if (er->stream) {
		p->start_attach = calloc(1, sizeof(struct attach)); /* a placeholder until spawned */
		if (!p->start_attach) {
			err_set(err, COVE_EINTERNAL, "out of memory");
			goto fail_child;
		}
		p->start_attach->kill_on_close = !er->background;
	}
	int r = exec_send_spawn(sb, &h, er, all, n, err);
	for (int i = 0; i < nchild; i++)
		close(child[i]);
	nchild = 0;
	if (r < 0)
		goto fail;
	p->start_req = req;
	if (er->timeout > 0) {
		struct timeval tv = { (time_t)er->timeout, (suseconds_t)((er->timeout - (time_t)er->timeout) * 1e6) };
		p->timeout_ev = evtimer_new(engine_ctx->base, on_timeout, p);
		evtimer_add(p->timeout_ev, &tv);
	}
	if (ret)
		*ret = p;
	return 0;
fail_child:
	for (int i = 0; i < nchild; i++)
		close(child[i]);
fail:
	free(p->start_attach);
	p->start_attach = NULL;
	proc_free(p);
	return -1;
}

int procs_start(struct sandbox *sb, struct http_req *req, const struct exec_request *er, struct cove_err *err)
{
	return spawn(sb, req, er, NULL, NULL, err);
}

int proc_spawn_kept(struct sandbox *sb, struct http_req *req, const struct exec_request *er, json_t *meta,
		    struct proc **ret, struct cove_err *err)
{
	return spawn(sb, req, er, meta, ret, err);
}

uint64_t proc_read_output(struct proc *p, int stream, uint64_t *pos, struct evbuffer *to, size_t max)
{
	uint64_t written = __atomic_load_n(&p->ring->written[stream], __ATOMIC_ACQUIRE), lost = 0;
	if (written - *pos > RING_CAP) {
		lost = written - RING_CAP - *pos;
		*pos = written - RING_CAP;
	}
	while (*pos < written && max > 0) {
		size_t off = *pos % RING_CAP, n = written - *pos;
		if (n > RING_CAP - off)
			n = RING_CAP - off;
		if (n > max)
			n = max;
		evbuffer_add(to, ring_data(p, stream) + off, n);
		*pos += n;
		max -= n;
	}
	return lost;
}

uint64_t proc_output_end(struct proc *p, int stream)
{
	return __atomic_load_n(&p->ring->written[stream], __ATOMIC_ACQUIRE);
}

int proc_write_stdin(struct proc *p, const void *buf, size_t n, struct cove_err *err)
{
	if (p->ended || p->in_fd < 0)
		return err_set(err, COVE_ESTATE, "process %d has ended", p->pid);
	return queue_stdin(p, NULL, buf, n, false, err);
}

void proc_signal(struct proc *p, int sig, uint32_t flags)
{
	signal_proc(p, sig, flags);
}

bool proc_ended(const struct proc *p, int *status)
{
	if (p->ended && status)
		*status = p->status;
	return p->ended;
}

pid_t proc_pid(const struct proc *p)
{
	return p->pid;
}

json_t *proc_meta(const struct proc *p)
{
	return p->meta;
}

void proc_set_session(struct proc *p, struct session *s)
{
	p->session = s;
}

void proc_update_flow(struct proc *p)
{
	update_flow(p);
}

static struct proc *find_seq(struct sandbox *sb, uint32_t seq)
{
	for (struct proc *p = sb->procs; p; p = p->next)
		if (p->seq == seq && !p->pid)
			return p;
	return NULL;
}

static struct proc *find_pid(struct sandbox *sb, pid_t pid)
{
	for (struct proc *p = sb->procs; p; p = p->next)
		if (p->pid == pid && !p->ended)
			return p;
	return NULL;
}

bool procs_on_spawned(struct sandbox *sb, uint32_t seq, pid_t pid, int fd)
{
	struct proc *p = find_seq(sb, seq);
	if (!p)
		return false;
	p->pid = pid;
	if (p->tty) {
		if (fd < 0) { /* cannot happen with this init; fail loudly rather than hang */
			log_error("sandbox %s: terminal process %d came without its pty", sb->id, pid);
			signal_proc(p, SIGKILL, WIRE_FLAG_TREE);
		} else {
			p->in_fd = p->out_fd[OUT] = fd;
			watch_fds(p);
		}
	} else if (fd >= 0) {
		close(fd);
	}
	if (p->in_queue && p->in_ev)
		event_add(p->in_ev, NULL);
	struct http_req *req = p->start_req;
	p->start_req = NULL;
	struct attach *placeholder = p->start_attach;
	p->start_attach = NULL;
	if (req && placeholder) {
		struct cove_err err = { 0 };
		struct attach *a = attach_start(p, req, true, &err);
		if (a)
			a->kill_on_close = placeholder->kill_on_close;
		else
			reply_error(req, &err);
	} else if (req && p->session) {
		sessions_on_started(p->session, req);
	} else if (req) {
		json_t *j = json_pack("{s:i}", "pid", pid);
		if (proc_tag(p))
			json_object_set_new(j, "tag", json_string(proc_tag(p)));
		reply_json(req, 200, j);
	}
	free(placeholder);
	return true;
}

bool procs_on_spawn_failed(struct sandbox *sb, uint32_t seq, int stage, int errnum)
{
	struct proc *p = find_seq(sb, seq);
	if (!p)
		return false;
	if (p->start_req) {
		struct cove_err err = { 0 };
		int code = (stage == WIRE_STAGE_EXEC || stage == WIRE_STAGE_CWD || stage == WIRE_STAGE_USER)
				   ? COVE_EINVAL
				   : COVE_EINTERNAL;
		err_set(&err, code, "%s: %s", wire_stage_name(stage), strerror(errnum));
		reply_error(p->start_req, &err);
	}
	free(p->start_attach);
	p->start_attach = NULL;
	p->exited = p->ended = true; /* nothing to release: init kept nothing */
	proc_free(p);
	return true;
}

bool procs_on_exited(struct sandbox *sb, pid_t pid, int status)
{
	struct proc *p = find_pid(sb, pid);
	if (!p)
		return false;
	p->exited = true;
	p->status = status;
	maybe_end(p);
	return true;
}

/* A kept process that a previous coved started, handed back by init. */
void procs_on_kept(struct sandbox *sb, const struct wire_hdr *h, int *fds, int nfds)
{
	uint32_t present = h->flags >> 16;
	int at[WIRE_MAX_FDS], k = 0;
	for (int i = 0; i < WIRE_MAX_FDS; i++)
		at[i] = (present & (1u << i)) && k < nfds ? fds[k++] : -1;
	struct proc *p = NULL;
	if (at[KEPT_RING] < 0 || find_pid(sb, h->pid) || !(p = proc_new(sb)))
		goto bad;
	p->ring_fd = at[KEPT_RING];
	at[KEPT_RING] = -1;
	json_error_t je;
	if (map_ring(p) < 0 || p->ring->magic != RING_MAGIC || p->ring->cap != RING_CAP ||
	    p->ring->meta_len >= sizeof(p->ring->meta) ||
	    !(p->meta = json_loadb(p->ring->meta, p->ring->meta_len, 0, &je)) || !json_is_object(p->meta))
		goto bad;
	p->pid = h->pid;
	p->tty = json_is_true(json_object_get(p->meta, "tty"));
	if (p->tty) {
		p->in_fd = p->out_fd[OUT] = at[KEPT_TTY_MASTER];
		at[KEPT_TTY_MASTER] = -1;
	} else {
		p->out_fd[OUT] = at[KEPT_OUT];
		p->out_fd[ERR] = at[KEPT_ERR];
		p->in_fd = at[KEPT_STDIN];
		at[KEPT_OUT] = at[KEPT_ERR] = at[KEPT_STDIN] = -1;
	}
	watch_fds(p);
	for (int i = 0; i < NSTREAMS; i++)
		drain(p, i);
	log_info("sandbox %s: took back kept process %d", sb->id, p->pid);
	if (json_object_get(p->meta, "session"))
		sessions_on_kept(sb, p);
	if (h->flags & WIRE_FLAG_EXITED) {
		p->exited = true;
		p->status = h->value;
		maybe_end(p);
	}
	p = NULL;
bad:
	if (p) {
		log_error("sandbox %s: kept process %d: unreadable output ring; killing it", sb->id, h->pid);
		p->exited = p->ended = true;
		proc_free(p);
		struct wire_hdr kill_h = {
			.type = WIRE_SIGNAL, .pid = h->pid, .value = SIGKILL, .flags = WIRE_FLAG_TREE
		};
		(void)sandbox_send(sb, &kill_h, sizeof(kill_h), NULL, 0);
	}
	for (int i = 0; i < WIRE_MAX_FDS; i++)
		if (at[i] >= 0)
			close(at[i]);
}

void procs_reattach(struct sandbox *sb)
{
	struct wire_hdr h = { .type = WIRE_LIST };
	(void)sandbox_send(sb, &h, sizeof(h), NULL, 0);
}

void procs_abort_all(struct sandbox *sb)
{
	while (sb->procs) {
		struct proc *p = sb->procs;
		if (p->start_req) {
			struct cove_err err = { 0 };
			err_set(&err, COVE_ESTATE, "sandbox %s stopped", sb->id);
			reply_error(p->start_req, &err);
			p->start_req = NULL;
		}
		free(p->start_attach);
		p->start_attach = NULL;
		p->exited = true;
		proc_free(p);
	}
}

/* ---- handlers ---- */

/* The {pid or tag} segment after /processes/ in the request's path. */
static struct proc *lookup_proc(struct http_req *req, const char *id, struct sandbox **sbp, struct cove_err *err)
{
	struct sandbox *sb = sandbox_find(engine_ctx, id);
	if (!sb) {
		err_set(err, COVE_ENOTFOUND, "no sandbox '%s'", id ? id : "");
		return NULL;
	}
	*sbp = sb;
	const char *path = http_req_path(req);
	const char *s = strstr(path, "/processes/");
	char sel[80] = "";
	if (s)
		sscanf(s + strlen("/processes/"), "%79[^/]", sel);
	struct proc *p = NULL;
	char *end;
	long pid = strtol(sel, &end, 10);
	if (*sel && *end == '\0') {
		for (p = sb->procs; p && p->pid != pid; p = p->next)
			;
	} else if (*sel) {
		p = find_tag(sb, sel);
	}
	if (!p || !p->pid)
		err_set(err, COVE_ENOTFOUND, "no process '%s' in sandbox %s", sel, sb->id);
	return p && p->pid ? p : NULL;
}

int procs_list(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb = sandbox_find(engine_ctx, id);
	if (!sb)
		return err_set(err, COVE_ENOTFOUND, "no sandbox '%s'", id ? id : "");
	json_t *a = json_array();
	for (struct proc *p = sb->procs; p; p = p->next)
		if (p->pid)
			json_array_insert_new(a, 0, proc_to_json(p)); /* oldest first */
	reply_json(req, 200, json_pack("{s:o}", "processes", a));
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

int procs_get(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb;
	struct proc *p = lookup_proc(req, id, &sb, err);
	if (!p)
		return -1;
	double wait = 0;
	if (get_seconds(query_of(req), "wait", &wait, err) < 0)
		return -1;
	if (p->ended || wait == 0) {
		reply_json(req, 200, proc_to_json(p));
		return 0;
	}
	struct waiter *w = calloc(1, sizeof(*w));
	if (!w)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	w->p = p;
	w->req = req;
	w->conn = http_req_conn(req);
	w->timer = evtimer_new(engine_ctx->base, on_wait_timer, w);
	if (!w->timer || conn_set_hook(w->conn, on_waiter_closed, w) < 0) {
		if (w->timer)
			event_free(w->timer);
		free(w);
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	struct timeval tv = { (time_t)wait, (suseconds_t)((wait - (time_t)wait) * 1e6) };
	evtimer_add(w->timer, &tv);
	w->next = p->waiters;
	p->waiters = w;
	return 0;
}

int procs_attach(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb;
	struct proc *p = lookup_proc(req, id, &sb, err);
	if (!p)
		return -1;
	bool replay = true, foreground = false;
	const char *protocol = NULL;
	int upgrade = http_req_upgrade(req, &protocol);
	if (get_flag(query_of(req), "replay", &replay, err) < 0 ||
	    get_flag(query_of(req), "foreground", &foreground, err) < 0)
		return -1;
	if (upgrade < 0)
		return err_set(err, COVE_EINVAL, "an upgrade needs both 'Connection: Upgrade' and 'Upgrade: tcp'");
	if (upgrade > 0 && strcasecmp(protocol, "tcp") != 0)
		return err_set(err, COVE_EINVAL, "cannot upgrade to '%.64s': only to 'tcp'", protocol);
	if (upgrade > 0 && !p->tty)
		return err_set(err, COVE_ESTATE,
			       "process %d is not a terminal: attach without an upgrade, for its output as NDJSON",
			       p->pid);
	if (upgrade > 0)
		return raw_attach_start(p, req, replay, foreground, err);
	struct attach *a = attach_start(p, req, replay, err);
	if (!a)
		return -1;
	a->kill_on_close = foreground;
	attach_pump(a);
	update_flow(p);
	return 0;
}

int procs_stdin(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "data", "data_b64", "eof", NULL };
	struct sandbox *sb;
	struct proc *p = lookup_proc(req, id, &sb, err);
	json_t *j = p ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	const char *data = NULL, *b64 = NULL;
	bool eof = false;
	int r = check_fields(j, fields, err) < 0 || get_string(j, "data", &data, STDIN_MAX, err) < 0 ||
				get_string(j, "data_b64", &b64, STDIN_MAX / 3 * 4 + 4, err) < 0 ||
				get_bool(j, "eof", &eof, err) < 0
			? -1
			: 0;
	if (r == 0 && data && b64)
		r = err_set(err, COVE_EINVAL, "give 'data' or 'data_b64', not both");
	if (r == 0 && (p->ended || p->in_fd < 0))
		r = err_set(err, COVE_ESTATE, "process %d %s", p->pid,
			    p->ended ? "has ended" : "has no open stdin (start it with \"stdin_open\": true)");
	_cleanup_free_ unsigned char *bytes = NULL;
	size_t n = data ? strlen(data) : 0;
	if (r == 0 && b64) {
		bytes = malloc(strlen(b64) / 4 * 3 + 3);
		long m = bytes ? base64_decode(b64, strlen(b64), bytes) : -1;
		if (m < 0)
			r = err_set(err, COVE_EINVAL, "'data_b64' is not valid base64");
		n = m < 0 ? 0 : (size_t)m;
	}
	if (r == 0)
		r = queue_stdin(p, req, b64 ? (const void *)bytes : data, n, eof, err);
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

int procs_signal(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "signal", "tree", NULL };
	struct sandbox *sb;
	struct proc *p = lookup_proc(req, id, &sb, err);
	json_t *j = p ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	int sig = SIGKILL;
	bool tree = false;
	json_t *v = json_object_get(j, "signal");
	int r = check_fields(j, fields, err) < 0 || get_bool(j, "tree", &tree, err) < 0 ? -1 : 0;
	if (r == 0 && v && parse_signal(v, &sig) < 0)
		r = err_set(err, COVE_EINVAL, "'signal' must be a signal name (\"SIGTERM\", \"TERM\") or number");
	if (r == 0 && p->exited)
		r = err_set(err, COVE_ESTATE, "process %d has ended", p->pid);
	if (r == 0) {
		signal_proc(p, sig, tree ? WIRE_FLAG_TREE : 0);
		reply_json(req, 200, json_object());
	}
	json_decref(j);
	return r;
}

int procs_resize(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "rows", "cols", NULL };
	struct sandbox *sb;
	struct proc *p = lookup_proc(req, id, &sb, err);
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
	if (r == 0 && (!p->tty || p->ended || p->in_fd < 0))
		r = err_set(err, COVE_ESTATE, "process %d is not a running terminal", p->pid);
	struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
	if (r == 0 && ioctl(p->in_fd, TIOCSWINSZ, &ws) < 0)
		r = err_sys(err, errno, "resize");
	if (r == 0)
		reply_json(req, 200, json_object());
	json_decref(j);
	return r;
}

/* A kept process's clients (procs.c keeps the process): its output to
 * attached ones, its input from stdin requests and raw attaches, and those
 * who wait for its end.
 *
 * Each attached client reads the ring (procs.c) from a position of its own,
 * at its own pace: its front end pauses its output while the client lags
 * and resumes it once drained; what the ring dropped before the client read
 * it is told as a gap. A foreground client is the process's one reader:
 * the process waits for it rather than lose output (attach_holds_back),
 * and goes when it leaves.
 *
 * A raw attach is a terminal over a connection of its own: the client's
 * bytes are typed into the terminal (proc_attach_input), its output is
 * given as it is, and once the process has ended and everything is out,
 * the output is closed: the client's sign to ask for the exit status.
 * Input flow control is the front end's buffer: what the terminal does not
 * take now stays there, and input_ready says when to offer it again. */
#include <errno.h>
#include <event2/buffer.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/encoding.h"
#include "common/wire.h"
#include "engine/engine.h"
#include "engine/procs_private.h"

struct stdin_req {
	struct stdin_req *next;
	struct output *out; /* closed once its bytes are in the pipe; NULL if none, or cancelled */
	struct evbuffer *buf;
	bool eof;
};

struct waiter {
	struct waiter *next;
	struct proc *p;
	struct output *out;
	struct event *timer;
};

struct proc_attach {
	struct proc_attach *next;
	struct proc *p;
	struct output *out;
	uint64_t pos[NSTREAMS];
	bool kill_on_close; /* a foreground client: the process goes with it */
	bool paused;        /* by its front end: the client lags */
	bool raw;           /* a terminal's bytes both ways, nothing else */
	bool eof_pending;   /* raw: its client's end of input, to be typed as ^D */
	void (*input_ready)(void *arg);
	void *input_arg;
};

static void attach_free(struct proc_attach *a)
{
	struct proc_attach **pp = &a->p->attachers;
	while (*pp && *pp != a)
		pp = &(*pp)->next;
	if (*pp)
		*pp = a->next;
	free(a);
}

/* The end of a's stream: err NULL when it is whole. */
static void attach_close(struct proc_attach *a, const struct cove_err *err)
{
	struct output *o = a->out;
	attach_free(a);
	output_close(o, err);
}

/* The terminal's output as it is, while the client keeps up. What the ring
 * lost before a slow client read it is skipped: a raw stream has no way to
 * say so, and a foreground client loses nothing (its terminal waits). */
static void raw_pump(struct proc_attach *a)
{
	struct proc *p = a->p;
	uint64_t end = proc_output_end(p, OUT);
	if (end - a->pos[OUT] > RING_CAP)
		a->pos[OUT] = end - RING_CAP;
	while (!a->paused && a->pos[OUT] < end) {
		size_t off = a->pos[OUT] % RING_CAP, n = end - a->pos[OUT];
		if (n > ATTACH_CHUNK)
			n = ATTACH_CHUNK;
		if (n > RING_CAP - off)
			n = RING_CAP - off;
		struct out_event ev = { .type = OUT_BYTES, .data = proc_ring_data(p, OUT) + off, .len = n };
		a->pos[OUT] += n;
		output_write(a->out, &ev);
	}
	if (p->ended && a->pos[OUT] == end)
		attach_close(a, NULL);
}

/* What the ring holds of stream i beyond the client's position, while the
 * client keeps up. */
static void pump_stream(struct proc_attach *a, int i)
{
	struct proc *p = a->p;
	uint64_t written = __atomic_load_n(&p->ring->written[i], __ATOMIC_ACQUIRE);
	while (a->pos[i] < written && !a->paused) {
		if (written - a->pos[i] > RING_CAP) {
			struct out_event gap = { .type = OUT_GAP, .stream = i, .lost = written - RING_CAP - a->pos[i] };
			a->pos[i] = written - RING_CAP;
			output_write(a->out, &gap);
		}
		size_t off = a->pos[i] % RING_CAP, n = written - a->pos[i];
		if (n > ATTACH_CHUNK)
			n = ATTACH_CHUNK;
		if (n > RING_CAP - off)
			n = RING_CAP - off;
		const char *d = proc_ring_data(p, i) + off;
		/* At the live end, hold back an incomplete UTF-8 sequence: the
		 * rest of it is on its way. */
		int valid;
		size_t ok = utf8_valid_prefix(d, n, &valid);
		if (!p->ended && a->pos[i] + n == written && valid && ok < n && n - ok <= 3) {
			if (ok == 0)
				break;
			n = ok;
		}
		struct out_event ev = { .type = i == OUT ? OUT_STDOUT : OUT_STDERR, .data = d, .len = n };
		a->pos[i] += n;
		output_write(a->out, &ev);
	}
}

/* Send what is new, as far as the client takes it; then, once the process
 * has ended and everything is out, the exit. */
static void attach_pump(struct proc_attach *a)
{
	struct proc *p = a->p;
	if (a->raw) {
		raw_pump(a);
		return;
	}
	for (int i = 0; i < NSTREAMS; i++)
		pump_stream(a, i);
	if (p->ended && a->pos[OUT] == p->ring->written[OUT] && a->pos[ERR] == p->ring->written[ERR]) {
		struct out_exit x = {
			.pid = p->pid, .status = p->status, .timed_out = p->timed_out, .duration_ms = -1
		};
		struct out_event ev = { .type = OUT_EXIT, .pid = p->pid, .exit = &x };
		output_write(a->out, &ev);
		attach_close(a, NULL);
	}
}

void attach_pump_all(struct proc *p)
{
	for (struct proc_attach *a = p->attachers, *next; a; a = next) {
		next = a->next;
		attach_pump(a);
	}
}

void attach_end_all(struct proc *p)
{
	struct cove_err err = { 0 };
	err_set(&err, COVE_ESTATE, "the process is gone");
	while (p->attachers)
		attach_close(p->attachers, &err);
}

bool attach_holds_back(const struct proc *p, int i)
{
	for (const struct proc_attach *a = p->attachers; a; a = a->next)
		if (a->kill_on_close && p->ring->written[i] - a->pos[i] >= RING_CAP / 2)
			return true;
	return false;
}

/* ---- the front end's side ---- */

static void on_pause(void *arg)
{
	struct proc_attach *a = arg;
	a->paused = true;
}

static void on_resume(void *arg)
{
	struct proc_attach *a = arg;
	struct proc *p = a->p; /* a may be freed by its last pump */
	a->paused = false;
	attach_pump(a);
	procs_update_flow(p);
}

static void on_cancel(void *arg)
{
	struct proc_attach *a = arg;
	if (a->kill_on_close)
		proc_signal(a->p, SIGKILL, WIRE_FLAG_TREE);
	attach_free(a);
}

static const struct output_producer attach_producer = { .pause = on_pause, .resume = on_resume, .cancel = on_cancel };

/* A client of p, from the ring positions r asks for. */
static struct proc_attach *attach_new(struct proc *p, const struct attach_request *r, struct output *out,
				      struct cove_err *err)
{
	struct proc_attach *a = calloc(1, sizeof(*a));
	if (!a) {
		err_set(err, COVE_EINTERNAL, "out of memory");
		return NULL;
	}
	a->p = p;
	a->out = out;
	a->kill_on_close = r->foreground;
	a->raw = r->raw;
	a->input_ready = r->input_ready;
	a->input_arg = r->input_arg;
	if (r->raw) {
		uint64_t end = proc_output_end(p, OUT);
		a->pos[OUT] = !r->replay ? end : end > RING_CAP ? end - RING_CAP : 0;
		a->pos[ERR] = proc_output_end(p, ERR); /* a terminal writes no stderr */
	} else {
		for (int i = 0; i < NSTREAMS; i++) /* what the ring lost is reported as a gap */
			a->pos[i] = r->replay ? 0 : proc_output_end(p, i);
	}
	a->next = p->attachers;
	p->attachers = a;
	output_attach(out, &attach_producer, a);
	if (!r->raw) {
		struct out_event ev = { .type = OUT_START, .pid = p->pid, .tag = proc_tag(p) };
		output_write(out, &ev);
	}
	return a;
}

int attach_start(struct proc *p, struct output *out, bool foreground, struct cove_err *err)
{
	struct attach_request r = { .replay = true, .foreground = foreground };
	return attach_new(p, &r, out, err) ? 0 : -1;
}

int procs_attach(struct proc *p, const struct attach_request *r, struct output *out, struct proc_attach **ret,
		 struct cove_err *err)
{
	if (r->raw && !p->tty)
		return err_set(err, COVE_ESTATE, "process %d is not a terminal", p->pid);
	if (sandbox_ready(p->sb, err) < 0)
		return -1;
	struct proc_attach *a = attach_new(p, r, out, err);
	if (!a)
		return -1;
	if (ret)
		*ret = a;
	attach_pump(a);
	procs_update_flow(p);
	return 0;
}

/* Some of the client's input into the terminal fd: its bytes, then, once
 * they are all in, the EOF character of its end. What write returns; 0
 * when nothing waits. */
static int raw_write_some(struct proc_attach *a, struct evbuffer *in, int fd)
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

/* As far as the terminal takes it now (the rest waits for input_ready);
 * none while stdin requests are queued, which came first. */
void proc_attach_input(struct proc_attach *a, struct evbuffer *in)
{
	struct proc *p = a->p;
	/* Typing into a paused sandbox's terminal wakes it. */
	if (p->sb->state != SB_RUNNING)
		(void)sandbox_ready(p->sb, NULL);
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

void proc_attach_input_end(struct proc_attach *a, struct evbuffer *in)
{
	a->eof_pending = true;
	proc_attach_input(a, in);
}

void attach_input_ready_all(struct proc *p)
{
	for (struct proc_attach *a = p->attachers, *next; a; a = next) {
		next = a->next;
		if (a->raw && a->input_ready)
			a->input_ready(a->input_arg);
	}
}

/* ---- stdin requests ---- */

/* msg NULL: the bytes are in. */
static void stdin_answer(struct stdin_req *s, const char *msg)
{
	if (s->out) {
		struct cove_err err = { 0 };
		err_set(&err, COVE_ESTATE, "%s", msg ? msg : "");
		output_close(s->out, msg ? &err : NULL);
	}
	evbuffer_free(s->buf);
	free(s);
}

/* A pipe's end. (A terminal's end of input is its EOF character, as typed,
 * queued with the bytes: see queue_stdin.) */
static void close_stdin(struct proc *p)
{
	proc_close_input(p);
	if (!p->exited)
		proc_release_kept(p, KEPT_STDIN);
}

void stdin_fail_all(struct proc *p, const char *why)
{
	while (p->in_queue) {
		struct stdin_req *s = p->in_queue;
		p->in_queue = s->next;
		stdin_answer(s, why);
	}
}

void procs_on_stdin_writable(evutil_socket_t fd, short what, void *arg)
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
		stdin_answer(s, NULL);
		if (eof) {
			close_stdin(p);
			stdin_fail_all(p, "stdin was closed");
			break;
		}
	}
	if (p->in_ev)
		event_del(p->in_ev);
	/* Raw attaches' bytes go after the requests': their turn. */
	attach_input_ready_all(p);
}

static void on_stdin_cancel(void *arg)
{
	struct stdin_req *s = arg;
	s->out = NULL; /* the bytes still go in: they were sent */
}

static const struct output_producer stdin_producer = { .cancel = on_stdin_cancel };

/* ---- waiters ---- */

static void waiter_free(struct waiter *w, bool answer)
{
	struct waiter **pp = &w->p->waiters;
	while (*pp && *pp != w)
		pp = &(*pp)->next;
	if (*pp)
		*pp = w->next;
	if (answer && w->out) {
		struct out_event ev = { .type = OUT_EVENT, .pid = w->p->pid, .event = w->p };
		output_write(w->out, &ev);
		output_close(w->out, NULL);
	}
	if (w->timer)
		event_free(w->timer);
	free(w);
}

static void on_wait_timer(evutil_socket_t fd, short what, void *arg)
{
	waiter_free(arg, true);
}

static void on_waiter_cancel(void *arg)
{
	struct waiter *w = arg;
	w->out = NULL;
	waiter_free(w, false);
}

static const struct output_producer waiter_producer = { .cancel = on_waiter_cancel };

int procs_wait(struct proc *p, double wait, struct output *out, struct cove_err *err)
{
	if (!p->ended && sandbox_ready(p->sb, err) < 0)
		return -1;
	struct waiter *w = calloc(1, sizeof(*w));
	if (!w)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	w->p = p;
	w->out = out;
	w->timer = evtimer_new(engine_ctx->base, on_wait_timer, w);
	if (!w->timer) {
		free(w);
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	struct timeval tv = { (time_t)wait, (suseconds_t)((wait - (time_t)wait) * 1e6) };
	evtimer_add(w->timer, &tv);
	w->next = p->waiters;
	p->waiters = w;
	output_attach(out, &waiter_producer, w);
	return 0;
}

void waiters_answer_all(struct proc *p)
{
	while (p->waiters)
		waiter_free(p->waiters, true);
}

int queue_stdin(struct proc *p, struct output *out, const void *data, size_t n, bool eof, struct cove_err *err)
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
	s->out = out;
	if (out)
		output_attach(out, &stdin_producer, s);
	struct stdin_req **pp = &p->in_queue;
	while (*pp)
		pp = &(*pp)->next;
	*pp = s;
	if (p->pid) /* else once spawned: closing stdin tells init the pid */
		event_add(p->in_ev, NULL);
	return 0;
}

int proc_stdin_check(const struct proc *p, struct cove_err *err)
{
	if (p->ended || p->in_fd < 0)
		return err_set(err, COVE_ESTATE, "process %d %s", p->pid,
			       p->ended ? "has ended" : "has no open stdin (start it with \"stdin_open\": true)");
	return 0;
}

int proc_write_stdin(struct proc *p, const struct stdin_request *r, struct output *out, struct cove_err *err)
{
	if (proc_stdin_check(p, err) < 0 || sandbox_ready(p->sb, err) < 0)
		return -1;
	return queue_stdin(p, out, r->data, r->len, r->eof, err);
}

/* ---- reading the ring ---- */

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
		evbuffer_add(to, proc_ring_data(p, stream) + off, n);
		*pos += n;
		max -= n;
	}
	return lost;
}

uint64_t proc_output_end(struct proc *p, int stream)
{
	return __atomic_load_n(&p->ring->written[stream], __ATOMIC_ACQUIRE);
}

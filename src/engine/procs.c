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
 * the stdin write end (pipes), or the pty's master (a terminal).
 *
 * Its clients (attached streams, stdin, waiters for its end) are in
 * procs_attach.c; here are the process's life and its control. */
#include <errno.h>
#include <event2/buffer.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "common/log.h"
#include "common/wire.h"
#include "engine/engine.h"
#include "engine/procs_private.h"
#include "sandbox/runtime.h"

#define RING_MAGIC 0x31676e72u /* "rng1" */
#define PROCS_MAX_RUNNING 128
#define PROCS_LIST_WAIT_MS 2000 /* at start, for re-attached inits' lists of kept processes */
#define PROCS_MAX_ENDED 32      /* ended ones kept listed and attachable, per sandbox */

const char *proc_tag(const struct proc *p)
{
	return json_string_value(json_object_get(p->meta, "tag"));
}

char *proc_ring_data(struct proc *p, int i)
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
	memcpy(proc_ring_data(p, i) + off, buf, first);
	memcpy(proc_ring_data(p, i), buf + first, n - first);
	/* The count moves after the bytes: a coved that dies in between loses
	 * them, and never reads bytes that are not there. */
	__atomic_store_n(&p->ring->written[i], p->ring->written[i] + n, __ATOMIC_RELEASE);
}

json_t *proc_to_json(const struct proc *p)
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

static void signal_proc(struct proc *p, int sig, uint32_t flags)
{
	if (p->exited || p->pid <= 0)
		return;
	struct wire_hdr h = { .type = WIRE_SIGNAL, .pid = p->pid, .value = sig, .flags = flags };
	(void)sandbox_send(p->sb, &h, sizeof(h), NULL, 0);
}

/* ---- lifetime ---- */

void proc_close_input(struct proc *p)
{
	if (p->in_ev)
		event_free(p->in_ev);
	p->in_ev = NULL;
	if (p->in_fd >= 0)
		close(p->in_fd);
	p->in_fd = -1;
}

void proc_release_kept(struct proc *p, int index)
{
	struct wire_hdr h = { .type = WIRE_RELEASE, .pid = p->pid, .value = index };
	(void)sandbox_send(p->sb, &h, sizeof(h), NULL, 0);
}

static void close_output(struct proc *p, int i)
{
	if (p->out_ev[i])
		event_free(p->out_ev[i]);
	if (p->out_fd[i] >= 0 && !(p->tty && p->out_fd[i] == p->in_fd))
		close(p->out_fd[i]);
	p->out_ev[i] = NULL;
	p->out_fd[i] = -1;
}

static void fail_start(struct proc *p, const struct cove_err *err);

static void proc_free(struct proc *p)
{
	if (p->session)
		sessions_on_gone(p->session);
	struct proc **pp = &p->sb->procs;
	while (*pp && *pp != p)
		pp = &(*pp)->next;
	if (*pp)
		*pp = p->next;
	if (p->start_out) { /* not answered yet (the process never ran) */
		struct cove_err err = { 0 };
		err_set(&err, COVE_ESTATE, "the process is gone");
		fail_start(p, &err);
	}
	attach_end_all(p);
	waiters_answer_all(p);
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
	if (attach_holds_back(p, i))
		return true;
	/* A session's shell likewise waits for the command's client. */
	return p->session && p->ring->written[i] - sessions_read_position(p->session, i) >= RING_CAP / 2;
}

void procs_update_flow(struct proc *p)
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
	proc_close_input(p);
	stdin_fail_all(p, "the process has ended");
	proc_release_kept(p, -1);
	attach_pump_all(p);
	if (p->session)
		sessions_on_output(p->session);
	waiters_answer_all(p);
	trim_ended(p->sb);
}

static void on_output(evutil_socket_t fd, short what, void *arg)
{
	struct proc *p = arg;
	int i = p->out_fd[OUT] == fd ? OUT : ERR;
	drain(p, i);
	attach_pump_all(p);
	procs_update_flow(p);
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
		p->in_ev = event_new(engine_ctx->base, p->in_fd, EV_WRITE | EV_PERSIST, procs_on_stdin_writable, p);
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

/* p's description, in its ring's header too. */
static int make_ring(struct proc *p, const struct exec_request *er, json_t *extra, struct cove_err *err)
{
	p->meta =
		json_pack("{s:O, s:s?, s:s?, s:s?, s:b, s:b, s:b, s:I}", "cmd", er->cmd ? er->cmd : er->argv, "tag",
			  er->tag, "cwd", er->cwd, "user", er->user, "tty", er->tty, "stdin", er->stdin_open || er->tty,
			  "background", er->background, "started_at", (json_int_t)sandbox_now_ms());
	if (p->meta && er->keep_awake)
		json_object_set_new(p->meta, "keep_awake", json_true());
	if (extra)
		json_object_update(p->meta, extra);
	char *meta = json_dumps(p->meta, JSON_COMPACT);
	p->ring_fd = memfd_create("cove-proc-output", MFD_CLOEXEC);
	/* The sandbox's root owns it (init holds it, and a memory snapshot
	 * restores it with its owner, which must have an id in there). */
	uid_t root = UID_BASE + (uid_t)p->sb->slot * RUNTIME_UID_COUNT;
	if (!meta || strlen(meta) >= sizeof(p->ring->meta) || p->ring_fd < 0 ||
	    (!p->sb->spec.external && fchown(p->ring_fd, root, root) < 0) ||
	    ftruncate(p->ring_fd, RING_HDR + NSTREAMS * (off_t)RING_CAP) < 0 || map_ring(p) < 0) {
		err_set(err, meta && strlen(meta) >= sizeof(p->ring->meta) ? COVE_ETOOBIG : COVE_EINTERNAL,
			meta ? "the command is too long for a kept process (at most %zu bytes of JSON)"
			     : "out of memory",
			sizeof(p->ring->meta) - 1);
		free(meta);
		return -1;
	}
	*p->ring = (struct ring_header){ .magic = RING_MAGIC, .cap = RING_CAP, .meta_len = strlen(meta) };
	memcpy(p->ring->meta, meta, strlen(meta));
	free(meta);
	return 0;
}

/* The pipes of a process without a terminal: the child's ends into child,
 * coved's (after the ring) into kept, and h's flags. */
static int make_pipes(struct proc *p, const struct exec_request *er, struct wire_hdr *h, int *child, int *nchild,
		      int *kept, int *nkept, struct cove_err *err)
{
	int pipes[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } };
	bool want_stdin = er->stdin_open || er->has_stdin;
	for (int i = 0; i < 3; i++)
		if ((i < 2 || want_stdin) && pipe2(pipes[i], O_CLOEXEC) < 0) {
			err_sys(err, errno, "pipe");
			for (int j = 0; j < 3; j++)
				for (int k = 0; k < 2; k++)
					if (pipes[j][k] >= 0)
						close(pipes[j][k]);
			return -1;
		}
	for (int i = 0; i < 2; i++) /* hold what a process writes while coved is away */
		(void)fcntl(pipes[i][0], F_SETPIPE_SZ, RING_CAP);
	if (want_stdin) {
		h->flags |= WIRE_FLAG_STDIN;
		child[(*nchild)++] = pipes[2][0];
	}
	child[(*nchild)++] = pipes[OUT][1];
	child[(*nchild)++] = pipes[ERR][1];
	p->out_fd[OUT] = kept[(*nkept)++] = pipes[OUT][0];
	p->out_fd[ERR] = kept[(*nkept)++] = pipes[ERR][0];
	if (want_stdin)
		p->in_fd = kept[(*nkept)++] = pipes[2][1];
	return 0;
}

static int check_spawn(struct sandbox *sb, const struct exec_request *er, struct cove_err *err)
{
	if (sandbox_ready(sb, err) < 0)
		return -1;
	if (er->tag && !tag_valid(er->tag))
		return err_set(err, COVE_EINVAL, "'tag' must be 1 to 63 of A-Z a-z 0-9 . _ - and not only digits");
	struct proc *same = er->tag ? find_tag(sb, er->tag) : NULL;
	if (same && !same->ended)
		return err_set(err, COVE_ESTATE, "a running process is already tagged '%s'", er->tag);
	if (count_running(sb) >= PROCS_MAX_RUNNING)
		return err_set(err, COVE_EFULL, "sandbox %s runs %d kept processes already", sb->id, PROCS_MAX_RUNNING);
	return 0;
}

/* The start's answer, before the spawn: its consumer gone. */
static void on_start_cancel(void *arg)
{
	struct proc *p = arg;
	p->start_out = NULL;
	p->kill_at_spawn = p->start_stream && p->start_foreground;
}

static const struct output_producer start_producer = { .cancel = on_start_cancel };

static void arm_timeout(struct proc *p, double timeout)
{
	if (timeout <= 0)
		return;
	struct timeval tv = { (time_t)timeout, (suseconds_t)((timeout - (time_t)timeout) * 1e6) };
	p->timeout_ev = evtimer_new(engine_ctx->base, on_timeout, p);
	evtimer_add(p->timeout_ev, &tv);
}

static int spawn(struct sandbox *sb, const struct exec_request *er, json_t *extra, struct output *out,
		 struct proc **ret, struct cove_err *err)
{
	if (check_spawn(sb, er, err) < 0)
		return -1;
	struct proc *p = proc_new(sb);
	if (!p)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	int child[WIRE_MAX_FDS], nchild = 0, kept[WIRE_MAX_FDS], nkept = 0;
	p->tty = er->tty;
	if (make_ring(p, er, extra, err) < 0)
		goto fail;
	kept[nkept++] = p->ring_fd;
	struct wire_hdr h = { .seq = sb->next_seq++ ?: sb->next_seq++, .flags = WIRE_FLAG_KEEP };
	if (er->tty) {
		h.flags |= WIRE_FLAG_TTY;
		h.pid = (er->rows << 16) | (er->cols & 0xffff);
	} else if (make_pipes(p, er, &h, child, &nchild, kept, &nkept, err) < 0) {
		goto fail;
	}
	h.value = nkept;
	int all[WIRE_MAX_FDS], n = 0;
	for (int i = 0; i < nchild; i++)
		all[n++] = child[i];
	for (int i = 0; i < nkept; i++)
		all[n++] = kept[i];
	p->seq = h.seq;
	watch_fds(p);
	int r = er->has_stdin ? queue_stdin(p, NULL, er->stdin_data, er->stdin_len, !er->stdin_open, err) : 0;
	if (r == 0)
		r = exec_send_spawn(sb, &h, er, all, n, err);
	for (int i = 0; i < nchild; i++)
		close(child[i]);
	if (r < 0)
		goto fail;
	p->start_stream = er->stream;
	p->start_foreground = !er->background;
	p->start_out = out;
	if (out)
		output_attach(out, &start_producer, p);
	arm_timeout(p, er->timeout);
	if (ret)
		*ret = p;
	return 0;
fail:
	proc_free(p);
	return -1;
}

int procs_start(struct sandbox *sb, const struct exec_request *er, struct output *out, struct cove_err *err)
{
	return spawn(sb, er, NULL, out, NULL, err);
}

int proc_spawn_kept(struct sandbox *sb, const struct exec_request *er, json_t *meta, struct output *out,
		    struct proc **ret, struct cove_err *err)
{
	return spawn(sb, er, meta, out, ret, err);
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
	procs_update_flow(p);
}

bool proc_is_tty(const struct proc *p)
{
	return p->tty;
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

/* The start's answer, now that the process runs: its stream, the session
 * it is the shell of, or its pid and tag. */
static void answer_start(struct proc *p)
{
	struct output *out = p->start_out;
	p->start_out = NULL;
	if (!out)
		return;
	output_attach(out, NULL, NULL);
	struct cove_err err = { 0 };
	if (p->start_stream) {
		if (attach_start(p, out, p->start_foreground, &err) < 0)
			output_close(out, &err);
		return;
	}
	struct out_event ev = {
		.type = p->session ? OUT_EVENT : OUT_START, .pid = p->pid, .tag = proc_tag(p), .event = p->session
	};
	output_write(out, &ev);
	output_close(out, NULL);
}

/* The start's answer, when the process does not run (after all). */
static void fail_start(struct proc *p, const struct cove_err *err)
{
	struct output *out = p->start_out;
	p->start_out = NULL;
	if (out)
		output_close(out, err);
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
	if (p->kill_at_spawn)
		signal_proc(p, SIGKILL, WIRE_FLAG_TREE);
	answer_start(p);
	return true;
}

bool procs_on_spawn_failed(struct sandbox *sb, uint32_t seq, int stage, int errnum)
{
	struct proc *p = find_seq(sb, seq);
	if (!p)
		return false;
	struct cove_err err = { 0 };
	int code = (stage == WIRE_STAGE_EXEC || stage == WIRE_STAGE_CWD || stage == WIRE_STAGE_USER) ? COVE_EINVAL
												     : COVE_EINTERNAL;
	err_set(&err, code, "%s: %s", wire_stage_name(stage), strerror(errnum));
	fail_start(p, &err);
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
	if (h->type == WIRE_LIST_END) {
		sb->listing = false;
		return;
	}
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
	sb->listing = sandbox_send(sb, &h, sizeof(h), NULL, 0) == 0;
}

static void on_list_wait(evutil_socket_t fd, short what, void *arg)
{
}

void procs_wait_listed(struct engine *d)
{
	struct event *tick = evtimer_new(d->base, on_list_wait, NULL);
	for (int round = 0; tick && round < PROCS_LIST_WAIT_MS / 10; round++) {
		bool waiting = false;
		for (int i = 0; i < MAX_SANDBOXES && !waiting; i++) {
			const struct sandbox *sb = d->sandboxes[i];
			waiting = sb && sb->listing && sb->state == SB_RUNNING && sb->conn_fd >= 0;
		}
		if (!waiting)
			break;
		struct timeval tv = { 0, 10000 };
		evtimer_add(tick, &tv);
		event_base_loop(d->base, EVLOOP_ONCE);
	}
	if (tick)
		event_free(tick);
}

void procs_abort_all(struct sandbox *sb)
{
	while (sb->procs) {
		struct proc *p = sb->procs;
		struct cove_err err = { 0 };
		err_set(&err, COVE_ESTATE, "sandbox %s stopped", sb->id);
		fail_start(p, &err);
		p->exited = true;
		proc_free(p);
	}
}

bool procs_keep_awake(const struct sandbox *sb)
{
	for (const struct proc *p = sb->procs; p; p = p->next)
		if (!p->ended && (p->attachers || json_is_true(json_object_get(p->meta, "keep_awake"))))
			return true;
	return false;
}

/* ---- control ---- */

struct proc *procs_find(struct sandbox *sb, const char *sel, struct cove_err *err)
{
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

json_t *procs_to_json(struct sandbox *sb)
{
	json_t *a = json_array();
	for (struct proc *p = sb->procs; p; p = p->next)
		if (p->pid)
			json_array_insert_new(a, 0, proc_to_json(p)); /* oldest first */
	return a;
}

int proc_send_signal(struct proc *p, const struct signal_request *r, struct cove_err *err)
{
	if (p->exited)
		return err_set(err, COVE_ESTATE, "process %d has ended", p->pid);
	if (sandbox_ready(p->sb, err) < 0)
		return -1;
	signal_proc(p, r->sig, r->tree ? WIRE_FLAG_TREE : 0);
	return 0;
}

int proc_resize(struct proc *p, int rows, int cols, struct cove_err *err)
{
	if (!p->tty || p->ended || p->in_fd < 0)
		return err_set(err, COVE_ESTATE, "process %d is not a running terminal", p->pid);
	if (sandbox_ready(p->sb, err) < 0)
		return -1;
	struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
	if (ioctl(p->in_fd, TIOCSWINSZ, &ws) < 0)
		return err_sys(err, errno, "resize");
	return 0;
}

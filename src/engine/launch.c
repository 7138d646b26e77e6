/* A sandbox's launch: its start command, then its readiness check
 * (template.h).
 *
 * The check runs on the loop every LAUNCH_TICK_MS until it passes or its
 * timeout runs out:
 *   port: the sandbox's /proc/<init>/net/tcp and tcp6 (read on the host:
 *         they show the sandbox's own network namespace) list the port
 *         LISTENing; no tool of the image is needed, and no packet is sent;
 *   url:  a GET from a worker thread that joined the sandbox's network
 *         namespace (setns is per thread), answered 2xx or 3xx;
 *   cmd:  an exec in the sandbox, as its user, exiting 0.
 * A start command that ends before the check passes fails the launch at
 * once: nothing would make it pass any more. Without a check, the launch
 * ends once the start command runs, whatever it does next. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "engine/engine.h"
#include "engine/process.h"
#include "engine/template.h"

#define LAUNCH_TICK_MS 50
#define PROBE_TIMEOUT 5 /* seconds, for one command or one GET */

struct url_probe;

struct launch {
	struct engine *d;
	struct sandbox *sb;
	struct output *out;      /* the caller's */
	struct output start_out; /* the start command's spawn answer */
	struct output probe_out; /* a readiness command's */
	struct event *tick;
	double started, deadline; /* monotonic ms */
	pid_t start_pid;          /* the start command, once it runs */
	bool start_pending;       /* its spawn not answered yet */
	bool probing;             /* a command or a GET under way */
	int last_status;          /* the last command's wait status (-1: none yet) */
	char last_error[160];     /* the last GET's failure */
	struct url_probe *job;    /* a GET on a worker thread */
};

struct url_probe {
	struct launch *l; /* NULL once the launch is gone: done only frees */
	int netns;
	struct sockaddr_in addr;
	char request[1200];
	int status; /* the HTTP status, or -errno */
};

static double mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

bool launch_needed(const struct sandbox *sb)
{
	return sb->spec.start || sb->spec.ready;
}

static void launch_free(struct launch *l)
{
	if (l->sb->launch == l)
		l->sb->launch = NULL;
	if (l->start_pending)
		output_cancel(&l->start_out);
	if (l->probing && !l->job)
		output_cancel(&l->probe_out);
	if (l->job)
		l->job->l = NULL;
	if (l->tick)
		event_free(l->tick);
	free(l);
}

/* The end: the caller's output closed with err (NULL: ready). */
static void launch_end(struct launch *l, const struct cove_err *err)
{
	struct output *out = l->out;
	if (err)
		log_info("sandbox %s: not ready: %s", l->sb->id, err->msg);
	else
		log_debug("sandbox %s: ready after %.1f ms", l->sb->id, mono_ms() - l->started);
	launch_free(l);
	output_close(out, err);
}

static void schedule(struct launch *l, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	evtimer_add(l->tick, &tv);
}

/* ---- the start command ---- */

static void start_write(struct output *o, const struct out_event *ev)
{
	struct launch *l = (struct launch *)((char *)o - offsetof(struct launch, start_out));
	if (ev->type == OUT_START)
		l->start_pid = ev->pid;
}

static void start_close(struct output *o, const struct cove_err *err)
{
	struct launch *l = (struct launch *)((char *)o - offsetof(struct launch, start_out));
	l->start_pending = false;
	if (err) {
		struct cove_err e = { 0 };
		err_set(&e, COVE_ENOTREADY, "the start command did not start: %s", err->msg);
		launch_end(l, &e);
		return;
	}
	schedule(l, 0);
}

static const struct output_ops start_ops = { .write = start_write, .close = start_close };

/* ---- the checks ---- */

/* Whether /proc/<pid>/net/<file> lists port in state LISTEN (0A). */
static bool listens_in(pid_t pid, const char *file, int port)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/net/%s", pid, file);
	FILE *f = fopen(path, "re");
	bool found = false;
	while (f && !found && fgets(line, sizeof(line), f)) {
		unsigned lport, state;
		if (sscanf(line, " %*u: %*[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x", &lport, &state) == 2)
			found = lport == (unsigned)port && state == 0x0A;
	}
	if (f)
		fclose(f);
	return found;
}

static void probe_write(struct output *o, const struct out_event *ev)
{
	struct launch *l = (struct launch *)((char *)o - offsetof(struct launch, probe_out));
	if (ev->type == OUT_EXIT)
		l->last_status = ev->exit->status;
}

static void probe_close(struct output *o, const struct cove_err *err)
{
	struct launch *l = (struct launch *)((char *)o - offsetof(struct launch, probe_out));
	l->probing = false;
	if (!err && WIFEXITED(l->last_status) && WEXITSTATUS(l->last_status) == 0) {
		launch_end(l, NULL);
		return;
	}
	if (err)
		snprintf(l->last_error, sizeof(l->last_error), "%s", err->msg);
	schedule(l, LAUNCH_TICK_MS);
}

static const struct output_ops probe_ops = { .write = probe_write, .close = probe_close };

static int probe_cmd(struct launch *l, json_t *cmd, struct cove_err *err)
{
	struct exec_request er = { .argv = cmd, .timeout = PROBE_TIMEOUT, .max_output = 4096 };
	l->probe_out = (struct output){ .ops = &probe_ops };
	l->probing = true;
	if (exec_start(l->sb, &er, &l->probe_out, err) < 0) {
		l->probing = false;
		return -1;
	}
	return 0;
}

/* On a worker thread: one GET in the sandbox's network namespace. */
static void url_work(void *arg)
{
	struct url_probe *p = arg;
	char buf[64] = "";
	int fd = -1;
	struct timeval tv = { PROBE_TIMEOUT, 0 };
	if (setns(p->netns, CLONE_NEWNET) < 0 || (fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		p->status = -errno;
		return;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	ssize_t n = -1;
	if (connect(fd, (struct sockaddr *)&p->addr, sizeof(p->addr)) == 0 &&
	    send(fd, p->request, strlen(p->request), MSG_NOSIGNAL) == (ssize_t)strlen(p->request))
		n = recv(fd, buf, sizeof(buf) - 1, MSG_WAITALL);
	p->status = n < 0 ? -errno : 0;
	close(fd);
	int code;
	if (n > 0 && (buf[n] = '\0', sscanf(buf, "HTTP/%*d.%*d %d", &code) == 1))
		p->status = code;
	else if (n >= 0)
		p->status = -EPROTO;
}

static void url_done(void *arg)
{
	struct url_probe *p = arg;
	struct launch *l = p->l;
	close(p->netns);
	if (l) {
		l->job = NULL;
		l->probing = false;
		if (p->status >= 200 && p->status < 400) {
			free(p);
			launch_end(l, NULL);
			return;
		}
		if (p->status < 0)
			snprintf(l->last_error, sizeof(l->last_error), "%s", strerror(-p->status));
		else
			snprintf(l->last_error, sizeof(l->last_error), "HTTP status %d", p->status);
		schedule(l, LAUNCH_TICK_MS);
	}
	free(p);
}

/* url: "http://HOST[:PORT][/PATH]", HOST an IPv4 address or "localhost":
 * no name is looked up. 0, or -1 when it is not such a URL. */
static int parse_url(const char *url, struct sockaddr_in *addr, char host[256], char path[1024])
{
	long port = 80;
	const char *rest = strncmp(url, "http://", 7) == 0 ? url + 7 : "";
	size_t n = strcspn(rest, ":/");
	if (n == 0 || n > 255)
		return -1;
	snprintf(host, 256, "%.*s", (int)n, rest);
	rest += n;
	if (*rest == ':') {
		char *end;
		port = strtol(rest + 1, &end, 10);
		if (end == rest + 1 || port < 1 || port > 65535)
			return -1;
		rest = end;
	}
	if (*rest && *rest != '/')
		return -1;
	snprintf(path, 1024, "%s", *rest ? rest : "/");
	if (strlen(rest) >= 1024 || strpbrk(path, " \r\n"))
		return -1;
	*addr = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	return inet_pton(AF_INET, strcmp(host, "localhost") == 0 ? "127.0.0.1" : host, &addr->sin_addr) == 1 ? 0 : -1;
}

int launch_check_url(const char *url, struct cove_err *err)
{
	struct sockaddr_in addr;
	char host[256], path[1024];
	if (parse_url(url, &addr, host, path) < 0)
		return err_set(err, COVE_EINVAL,
			       "readiness 'url' must be http://HOST[:PORT][/PATH] with HOST an IPv4 address or "
			       "localhost, not '%s'",
			       url);
	return 0;
}

static int probe_url(struct launch *l, const char *url, struct cove_err *err)
{
	char host[256], path[1024];
	struct url_probe *p = calloc(1, sizeof(*p));
	if (!p)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	if (parse_url(url, &p->addr, host, path) < 0) {
		free(p);
		return launch_check_url(url, err);
	}
	snprintf(p->request, sizeof(p->request), "GET %s HTTP/1.0\r\nHost: %s\r\nConnection: close\r\n\r\n", path,
		 host);
	char ns[64];
	snprintf(ns, sizeof(ns), "/proc/%d/ns/net", l->sb->init_pid);
	p->netns = open(ns, O_RDONLY | O_CLOEXEC);
	if (p->netns < 0) {
		int r = err_sys(err, errno, "open '%s'", ns);
		free(p);
		return r;
	}
	p->l = l;
	if (worker_start(l->d->base, url_work, url_done, p, err) < 0) {
		close(p->netns);
		free(p);
		return -1;
	}
	l->job = p;
	l->probing = true;
	return 0;
}

/* Why the check has not passed, for the error at the deadline. */
static void describe(struct launch *l, char *buf, size_t cap)
{
	json_t *ready = l->sb->spec.ready;
	json_t *port = json_object_get(ready, "port"), *url = json_object_get(ready, "url");
	if (port)
		snprintf(buf, cap, "nothing listens on port %d inside", (int)json_integer_value(port));
	else if (url)
		snprintf(buf, cap, "'%s' did not answer 2xx or 3xx (%s)", json_string_value(url),
			 l->last_error[0] ? l->last_error : "no answer yet");
	else if (l->last_status >= 0 && WIFEXITED(l->last_status))
		snprintf(buf, cap, "the readiness command exited with status %d", WEXITSTATUS(l->last_status));
	else
		snprintf(buf, cap, "the readiness command did not succeed%s%s", l->last_error[0] ? ": " : "",
			 l->last_error);
}

/* The start command ended: 1 (err set), else 0. */
static int start_ended(struct launch *l, struct cove_err *err)
{
	char pid[16];
	int status;
	if (!l->sb->spec.start || !l->start_pid)
		return 0;
	snprintf(pid, sizeof(pid), "%d", l->start_pid);
	struct proc *p = procs_find(l->sb, pid, NULL);
	if (p && !proc_ended(p, &status))
		return 0;
	if (!p)
		err_set(err, COVE_ENOTREADY, "the start command is gone before the sandbox was ready");
	else if (WIFSIGNALED(status))
		err_set(err, COVE_ENOTREADY, "the start command was killed by signal %d before the sandbox was ready",
			WTERMSIG(status));
	else
		err_set(err, COVE_ENOTREADY, "the start command exited with status %d before the sandbox was ready",
			WEXITSTATUS(status));
	return 1;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct launch *l = arg;
	struct cove_err err = { 0 };
	json_t *ready = l->sb->spec.ready;
	if (l->start_pending || l->probing)
		return; /* their answers schedule the next tick */
	/* Without a check, the start command running is the launch (one that
	 * ends at once, an image's `sh` Cmd, is no failure: nothing waits on it). */
	if (!ready || start_ended(l, &err)) {
		launch_end(l, err.code ? &err : NULL);
		return;
	}
	json_t *port = json_object_get(ready, "port"), *url = json_object_get(ready, "url");
	int n = (int)json_integer_value(port);
	if (port && (listens_in(l->sb->init_pid, "tcp", n) || listens_in(l->sb->init_pid, "tcp6", n))) {
		launch_end(l, NULL);
		return;
	}
	if (mono_ms() >= l->deadline) {
		char why[400];
		describe(l, why, sizeof(why));
		err_set(&err, COVE_ENOTREADY, "not ready after %g s: %s",
			json_number_value(json_object_get(ready, "timeout")), why);
		launch_end(l, &err);
		return;
	}
	int r = port  ? 0
		: url ? probe_url(l, json_string_value(url), &err)
		      : probe_cmd(l, json_object_get(ready, "cmd"), &err);
	if (r < 0) {
		launch_end(l, &err);
		return;
	}
	if (port)
		schedule(l, LAUNCH_TICK_MS);
}

/* The caller's output is gone (its client hung up): stop, say nothing. */
static void launch_cancel(void *arg)
{
	launch_free(arg);
}

static const struct output_producer launch_producer = { .cancel = launch_cancel };

int launch_start(struct engine *d, struct sandbox *sb, struct output *out, struct cove_err *err)
{
	if (sb->launch)
		return err_set(err, COVE_ESTATE, "sandbox %s is launching already", sb->id);
	struct launch *l = calloc(1, sizeof(*l));
	if (!l || !(l->tick = evtimer_new(d->base, on_tick, l))) {
		free(l);
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	double timeout = json_number_value(json_object_get(sb->spec.ready, "timeout"));
	l->d = d;
	l->sb = sb;
	l->out = out;
	l->last_status = -1;
	l->started = mono_ms();
	l->deadline = l->started + (timeout > 0 ? timeout : 30) * 1000;
	if (sb->spec.start) {
		struct exec_request er = { .argv = sb->spec.start, .background = true, .tag = "start" };
		l->start_out = (struct output){ .ops = &start_ops };
		l->start_pending = true;
		if (procs_start(sb, &er, &l->start_out, err) < 0) {
			l->start_pending = false;
			event_free(l->tick);
			free(l);
			return -1;
		}
	}
	sb->launch = l;
	output_attach(out, &launch_producer, l);
	schedule(l, 0);
	return 0;
}

void launch_abort(struct sandbox *sb, const char *why)
{
	struct cove_err err = { 0 };
	if (!sb->launch)
		return;
	err_set(&err, COVE_ESTATE, "%s", why);
	launch_end(sb->launch, &err);
}

#include "sys/nftables.h"

#include <dlfcn.h>
#include <errno.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* libnftables is loaded on first use, not linked: it is a shared library
 * only (with four more under it), and every shared library coved has
 * mapped makes each of its forks, i.e. every sandbox start, slower (see
 * the Makefile). A coved whose sandboxes all have network "none" never
 * loads it. */
static struct {
	struct nft_ctx *(*ctx_new)(uint32_t);
	void (*ctx_free)(struct nft_ctx *);
	void (*set_flags)(struct nft_ctx *, unsigned int);
	int (*buffer_output)(struct nft_ctx *);
	int (*buffer_error)(struct nft_ctx *);
	const char *(*output)(struct nft_ctx *);
	const char *(*error)(struct nft_ctx *);
	int (*run)(struct nft_ctx *, const char *);
} nft;
static char load_error[256];

static void load(void)
{
	void *h = dlopen("libnftables.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(load_error, sizeof(load_error), "%s", dlerror());
		return;
	}
	*(void **)&nft.ctx_free = dlsym(h, "nft_ctx_free");
	*(void **)&nft.set_flags = dlsym(h, "nft_ctx_output_set_flags");
	*(void **)&nft.buffer_output = dlsym(h, "nft_ctx_buffer_output");
	*(void **)&nft.buffer_error = dlsym(h, "nft_ctx_buffer_error");
	*(void **)&nft.output = dlsym(h, "nft_ctx_get_output_buffer");
	*(void **)&nft.error = dlsym(h, "nft_ctx_get_error_buffer");
	*(void **)&nft.run = dlsym(h, "nft_run_cmd_from_buffer");
	if (!nft.ctx_free || !nft.set_flags || !nft.buffer_output || !nft.buffer_error || !nft.output || !nft.error ||
	    !nft.run) {
		snprintf(load_error, sizeof(load_error), "libnftables.so.1 lacks a function cove needs");
		return;
	}
	/* Last: it is what says the table is whole. */
	*(void **)&nft.ctx_new = dlsym(h, "nft_ctx_new");
	if (!nft.ctx_new)
		snprintf(load_error, sizeof(load_error), "libnftables.so.1 lacks nft_ctx_new");
}

/* Runs cmd in a fresh context with buffered output and errors, handing the
 * output to *ret_out (if not NULL). On the thread below only. */
static int run_once(const char *cmd, unsigned flags, char **ret_out, struct cove_err *err)
{
	if (!nft.ctx_new)
		return err_set(err, COVE_EINTERNAL, "nftables: cannot load libnftables: %s", load_error);
	struct nft_ctx *ctx = nft.ctx_new(NFT_CTX_DEFAULT);
	if (!ctx)
		return err_set(err, COVE_EINTERNAL, "nftables: cannot make a context");
	nft.set_flags(ctx, flags);
	int ret = -1;
	if (nft.buffer_output(ctx) < 0 || nft.buffer_error(ctx) < 0) {
		err_set(err, COVE_EINTERNAL, "nftables: cannot buffer output");
		goto out;
	}
	if (nft.run(ctx, cmd) != 0) {
		const char *e = nft.error(ctx);
		/* nft's message quotes the failing line and marks the spot with
		 * carets on the next lines: the first line says what failed. */
		size_t n = e ? strcspn(e, "\n") : 0;
		err_set(err, COVE_EINTERNAL, "nftables: %.*s", (int)(n > 400 ? 400 : n), n ? e : "failed");
		goto out;
	}
	if (ret_out) {
		const char *o = nft.output(ctx);
		*ret_out = strdup(o ? o : "");
		if (!*ret_out) {
			err_set(err, COVE_EINTERNAL, "out of memory");
			goto out;
		}
	}
	ret = 0;
out:
	nft.ctx_free(ctx);
	return ret;
}

/* A signal (coved's SIGCHLD, as sandboxes' processes end) that lands
 * while libnftables waits on its netlink socket fails the command with
 * EINTR, whatever SA_RESTART says: libnftables does not retry. A failed
 * command is a transaction not applied, so it is run again. */
#define NFT_EINTR_TRIES 8

static int run(const char *cmd, unsigned flags, char **ret_out, struct cove_err *err)
{
	struct cove_err e = { 0 };
	for (int i = 0; i < NFT_EINTR_TRIES; i++) {
		memset(&e, 0, sizeof(e));
		if (run_once(cmd, flags, ret_out, &e) == 0)
			return 0;
		if (!strstr(e.msg, "Interrupted system call"))
			break;
	}
	if (err && !err->msg[0])
		*err = e; /* as err_set: the first error stands */
	return -1;
}

/* libnftables waits on its netlink socket with select(), which (built
 * with _FORTIFY_SOURCE, as distributions build it) aborts the process for
 * an fd of FD_SETSIZE (1024) or more. A coved with a few hundred
 * sandboxes holds more fds than that (each has its init's socket and
 * pidfd, an egress one more), so the socket of a new context would be
 * numbered above it and coved would die on the next sandbox with a
 * network, or at its start. So libnftables runs on a thread of its own
 * whose fd table is its own (unshare(CLONE_FILES)) and holds only 0-2:
 * its sockets get small numbers whatever coved holds. The caller waits
 * for each call, as when it ran in place. The thread blocks every signal,
 * which then go to the other threads and cannot interrupt its waits. */
static struct {
	pthread_mutex_t lock; /* the fields below */
	pthread_cond_t cond;
	pthread_mutex_t calls; /* one call at a time */
	bool started, asked, answered;
	int start_errno;
	const char *cmd;
	unsigned flags;
	char **ret_out;
	struct cove_err *err;
	int r;
} th = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .calls = PTHREAD_MUTEX_INITIALIZER };

static void *thread_main(void *arg)
{
	int e = unshare(CLONE_FILES) == 0 && close_range(3, ~0U, 0) == 0 ? 0 : errno;
	pthread_mutex_lock(&th.lock);
	th.start_errno = e;
	th.started = true;
	pthread_cond_broadcast(&th.cond);
	while (!e) {
		while (!th.asked)
			pthread_cond_wait(&th.cond, &th.lock);
		pthread_mutex_unlock(&th.lock);
		int r = run(th.cmd, th.flags, th.ret_out, th.err);
		pthread_mutex_lock(&th.lock);
		th.r = r;
		th.asked = false;
		th.answered = true;
		pthread_cond_broadcast(&th.cond);
	}
	pthread_mutex_unlock(&th.lock);
	return NULL;
}

static void start(void)
{
	load();
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t t;
	int r = pthread_create(&t, NULL, thread_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_mutex_lock(&th.lock);
	if (r != 0) {
		th.start_errno = r;
		th.started = true;
	}
	while (!th.started)
		pthread_cond_wait(&th.cond, &th.lock);
	pthread_mutex_unlock(&th.lock);
	if (r == 0)
		pthread_detach(t);
}

static int call(const char *cmd, unsigned flags, char **ret_out, struct cove_err *err)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, start);
	if (th.start_errno)
		return err_set(err, COVE_EINTERNAL, "nftables: cannot start its thread: %s", strerror(th.start_errno));
	pthread_mutex_lock(&th.calls);
	pthread_mutex_lock(&th.lock);
	th.cmd = cmd;
	th.flags = flags;
	th.ret_out = ret_out;
	th.err = err;
	th.answered = false;
	th.asked = true;
	pthread_cond_broadcast(&th.cond);
	while (!th.answered)
		pthread_cond_wait(&th.cond, &th.lock);
	int r = th.r;
	pthread_mutex_unlock(&th.lock);
	pthread_mutex_unlock(&th.calls);
	return r;
}

int nftables_run(const char *script, struct cove_err *err)
{
	return call(script, 0, NULL, err);
}

int nftables_list_json(const char *cmd, char **ret_json, struct cove_err *err)
{
	return call(cmd, NFT_CTX_OUTPUT_JSON | NFT_CTX_OUTPUT_HANDLE, ret_json, err);
}

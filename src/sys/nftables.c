#include "sys/nftables.h"

#include <dlfcn.h>
#include <nftables/libnftables.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
 * output to *ret_out (if not NULL). */
static int run_once(const char *cmd, unsigned flags, char **ret_out, struct cove_err *err)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, load);
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

int nftables_run(const char *script, struct cove_err *err)
{
	return run(script, 0, NULL, err);
}

int nftables_list_json(const char *cmd, char **ret_json, struct cove_err *err)
{
	return run(cmd, NFT_CTX_OUTPUT_JSON | NFT_CTX_OUTPUT_HANDLE, ret_json, err);
}

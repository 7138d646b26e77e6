#include "sys/nftables.h"

#include <nftables/libnftables.h>
#include <stdlib.h>
#include <string.h>

/* Runs cmd in a fresh context with buffered output and errors, handing the
 * output to *ret_out (if not NULL). */
static int run(const char *cmd, unsigned flags, char **ret_out, struct cove_err *err)
{
	struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!ctx)
		return err_set(err, COVE_EINTERNAL, "nftables: cannot make a context");
	nft_ctx_output_set_flags(ctx, flags);
	int ret = -1;
	if (nft_ctx_buffer_output(ctx) < 0 || nft_ctx_buffer_error(ctx) < 0) {
		err_set(err, COVE_EINTERNAL, "nftables: cannot buffer output");
		goto out;
	}
	if (nft_run_cmd_from_buffer(ctx, cmd) != 0) {
		const char *e = nft_ctx_get_error_buffer(ctx);
		/* nft's message quotes the failing line and marks the spot with
		 * carets on the next lines: the first line says what failed. */
		size_t n = e ? strcspn(e, "\n") : 0;
		err_set(err, COVE_EINTERNAL, "nftables: %.*s", (int)(n > 400 ? 400 : n), n ? e : "failed");
		goto out;
	}
	if (ret_out) {
		const char *o = nft_ctx_get_output_buffer(ctx);
		*ret_out = strdup(o ? o : "");
		if (!*ret_out) {
			err_set(err, COVE_EINTERNAL, "out of memory");
			goto out;
		}
	}
	ret = 0;
out:
	nft_ctx_free(ctx);
	return ret;
}

int nftables_run(const char *script, struct cove_err *err)
{
	return run(script, 0, NULL, err);
}

int nftables_list_json(const char *cmd, char **ret_json, struct cove_err *err)
{
	return run(cmd, NFT_CTX_OUTPUT_JSON | NFT_CTX_OUTPUT_HANDLE, ret_json, err);
}

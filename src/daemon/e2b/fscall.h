/* A Files operation of envd waiting for the engine (envd.c, filesystem.c):
 * its answer comes in done; the connection's close cancels it. */
#pragma once
#include <limits.h>
#include <stdbool.h>

#include "daemon/e2b/e2b_private.h"
#include "daemon/e2b/multipart.h"
#include "engine/files.h"

struct fscall {
	struct http_req *req; /* NULL once answered */
	struct http_conn *conn;
	struct sandbox *sb;
	struct file_op *op;
	char user[64];
	char path[PATH_MAX], path2[PATH_MAX];
	files_done_fn done; /* the service's, with the fscall */
	/* a POST /files: its parts, written one after the other */
	struct part *parts;
	int nparts, next;
	struct evbuffer *plain; /* a gunzipped body the parts point into */
	json_t *written;
	void *arg;
};

/* Bound to er's connection; NULL (answered) when out of memory. */
struct fscall *fscall_new(struct envd_req *er, files_done_fn done);
/* The operation's result came: fc is unbound (fc->req stays until answered). */
void fscall_unbind(struct fscall *fc);
void fscall_free(struct fscall *fc);
const char *fscall_user(const struct fscall *fc); /* NULL: the sandbox's */
/* envd's EntryInfo. */
json_t *entry_info(const struct files_entry *e);
/* envd's REST error for a Files error about path: 404, 507 for no space
 * (the SDK's NotEnoughSpaceError), else by its code. */
void envd_files_error(struct http_req *req, const char *path, const struct cove_err *err);
/* The /files query: path (absolute; "" when absent and not need_path)
 * and username (into er->user). */
int envd_files_query(struct envd_req *er, bool need_path, char *path, struct cove_err *err);

/* The state store: what coved must remember across restarts, in SQLite
 * (WAL). An interface with one implementation today; a fleet would put
 * PostgreSQL behind the same calls. Every call is one transaction, but
 * between store_begin and store_commit, where all are one. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

struct store;

struct store_sandbox {
	const char *id;
	const char *state;
	int slot;
	pid_t init_pid;
	uint64_t init_start; /* /proc/<pid>/stat starttime: tells a reused pid apart */
	const char *spec;    /* JSON: image, limits, env, cwd, user, name, created_at */
};

struct store_snapshot {
	const char *id;
	const char *sandbox; /* the sandbox it was taken of (which may be gone) */
	const char *name;
	const char *image_dir;
	int64_t created_at; /* unix ms */
	const char *spec;   /* JSON: the sandbox's spec, as in store_sandbox */
	bool durable;       /* its files and manifest are on disk (see snapshots.c) */
};

int store_open(struct store **ret, const char *path, struct cove_err *err);
void store_close(struct store *s);
/* Insert or replace a sandbox's row. */
int store_put_sandbox(struct store *s, const struct store_sandbox *sb, struct cove_err *err);
int store_delete_sandbox(struct store *s, const char *id, struct cove_err *err);
/* Calls cb for every sandbox, in creation order; cb's strings are borrowed. */
int store_each_sandbox(struct store *s, void (*cb)(void *arg, const struct store_sandbox *sb), void *arg,
		       struct cove_err *err);
/* Insert a snapshot's row, not durable (sn->durable is not read). */
int store_put_snapshot(struct store *s, const struct store_snapshot *sn, struct cove_err *err);
/* Mark it durable, committed durably (a WAL sync, whatever the store's
 * default). */
int store_set_snapshot_durable(struct store *s, const char *id, struct cove_err *err);
int store_delete_snapshot(struct store *s, const char *id, struct cove_err *err);
/* Calls cb for every snapshot, oldest first; cb's strings are borrowed. */
int store_each_snapshot(struct store *s, void (*cb)(void *arg, const struct store_snapshot *sn), void *arg,
			struct cove_err *err);
/* One transaction of every call until store_commit: a crash before the
 * commit, or a commit that fails (it then rolls back), leaves none of
 * them. Not nested. */
int store_begin(struct store *s, struct cove_err *err);
int store_commit(struct store *s, struct cove_err *err);

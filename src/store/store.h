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
/* Insert a snapshot's row, durable as sn->durable says: true only inside
 * a store_begin_durable transaction, and only once its files and manifest
 * are on disk. */
int store_put_snapshot(struct store *s, const struct store_snapshot *sn, struct cove_err *err);
/* Mark it durable, committed durably (a WAL sync, whatever the store's
 * default). */
int store_set_snapshot_durable(struct store *s, const char *id, struct cove_err *err);
int store_delete_snapshot(struct store *s, const char *id, struct cove_err *err);
/* Calls cb for every snapshot, oldest first; cb's strings are borrowed. */
int store_each_snapshot(struct store *s, void (*cb)(void *arg, const struct store_snapshot *sn), void *arg,
			struct cove_err *err);

/* Histories: a sandbox's ordered checkpoints, each naming a snapshot. A
 * history is keyed by its sandbox's ID and outlives the sandbox. */
struct store_history {
	const char *sandbox;     /* whose line it is */
	const char *origin;      /* the history it was rolled back or branched from, or NULL */
	int origin_seq;          /* ... at that checkpoint */
	const char *origin_kind; /* "rollback" or "branch"; NULL without origin */
	int64_t created_at;      /* unix ms */
};

struct store_checkpoint {
	const char *history;
	int seq; /* 1, 2, 3... in its history */
	const char *label;
	const char *snapshot;
	const char *sandbox; /* the sandbox it was taken of (another's for an inherited one) */
	int64_t created_at;  /* unix ms */
};

/* Append c to c->history, created without origin when it has none yet.
 * Inside the caller's transaction (store_begin_durable), which commits it
 * with its snapshot's row. */
int store_put_checkpoint(struct store *s, const struct store_checkpoint *c, struct cove_err *err);
/* The highest seq of history, 0 when it has none. */
int store_last_checkpoint(struct store *s, const char *history, int *ret_seq, struct cove_err *err);
/* Calls cb with sandbox's history, if it has one: returns 1, 0 without
 * one, or -1. cb's strings are borrowed. */
int store_get_history(struct store *s, const char *sandbox, void (*cb)(void *arg, const struct store_history *h),
		      void *arg, struct cove_err *err);
/* Calls cb for every history whose origin is origin, oldest first: returns
 * how many, or -1. */
int store_each_derived(struct store *s, const char *origin, void (*cb)(void *arg, const struct store_history *h),
		       void *arg, struct cove_err *err);
/* Calls cb for every checkpoint of history, by seq. */
int store_each_checkpoint(struct store *s, const char *history, void (*cb)(void *arg, const struct store_checkpoint *c),
			  void *arg, struct cove_err *err);
/* A new history h->sandbox (from h->origin at h->origin_seq, as
 * h->origin_kind) holding origin's checkpoints 1..origin_seq: one durable
 * transaction. */
int store_copy_history(struct store *s, const struct store_history *h, struct cove_err *err);
/* Forget sandbox's history and its checkpoints (not their snapshots). */
int store_delete_history(struct store *s, const char *sandbox, struct cove_err *err);
/* How many checkpoints name snapshot (0 or more, -1 on failure); when
 * some do, the first one's history and seq. */
int store_snapshot_users(struct store *s, const char *snapshot, char ret_history[16], int *ret_seq,
			 struct cove_err *err);
/* One transaction of every call until store_commit: a crash before the
 * commit, or a commit that fails (it then rolls back), leaves none of
 * them. Not nested. */
int store_begin(struct store *s, struct cove_err *err);
/* store_begin, for what is answered as done: its commit is a WAL sync
 * (synchronous=FULL), so it survives a power failure too. */
int store_begin_durable(struct store *s, struct cove_err *err);
/* On failure it rolls back (and says why in err). */
int store_commit(struct store *s, struct cove_err *err);
/* Drop the open transaction. */
void store_rollback(struct store *s);

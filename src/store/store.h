/* The state store: what coved must remember across restarts. An interface
 * (struct store_ops) with one implementation today, SQLite (WAL, in
 * store_sqlite.c); a fleet would put PostgreSQL behind the same table
 * without a change to the engine. Every call is one transaction, but
 * between store_begin and store_commit, where all are one. */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

struct store;
struct store_sandbox;
struct store_snapshot;
struct store_history;
struct store_checkpoint;
struct store_template;
struct store_port;

/* An implementation: a table of these, in a struct it begins with a
 * struct store. Each is the function of the same name below. */
struct store_ops {
	void (*close)(struct store *s);
	int (*put_sandbox)(struct store *s, const struct store_sandbox *sb, struct cove_err *err);
	int (*delete_sandbox)(struct store *s, const char *id, struct cove_err *err);
	int (*each_sandbox)(struct store *s, void (*cb)(void *arg, const struct store_sandbox *sb), void *arg, struct cove_err *err);
	int (*put_snapshot)(struct store *s, const struct store_snapshot *sn, struct cove_err *err);
	int (*set_snapshot_durable)(struct store *s, const char *id, struct cove_err *err);
	int (*delete_snapshot)(struct store *s, const char *id, struct cove_err *err);
	int (*each_snapshot)(struct store *s, void (*cb)(void *arg, const struct store_snapshot *sn), void *arg, struct cove_err *err);
	int (*put_checkpoint)(struct store *s, const struct store_checkpoint *c, struct cove_err *err);
	int (*last_checkpoint)(struct store *s, const char *history, int *ret_seq, struct cove_err *err);
	int (*get_history)(struct store *s, const char *sandbox, void (*cb)(void *arg, const struct store_history *h), void *arg, struct cove_err *err);
	int (*each_derived)(struct store *s, const char *origin, void (*cb)(void *arg, const struct store_history *h), void *arg, struct cove_err *err);
	int (*each_checkpoint)(struct store *s, const char *history, void (*cb)(void *arg, const struct store_checkpoint *c), void *arg, struct cove_err *err);
	int (*copy_history)(struct store *s, const struct store_history *h, struct cove_err *err);
	int (*delete_history)(struct store *s, const char *sandbox, struct cove_err *err);
	int (*snapshot_users)(struct store *s, const char *snapshot, char ret_history[16], int *ret_seq, struct cove_err *err);
	int (*put_template)(struct store *s, const char *name, const char *data, struct cove_err *err);
	int (*delete_template)(struct store *s, const char *name, struct cove_err *err);
	int (*each_template)(struct store *s, void (*cb)(void *arg, const struct store_template *t), void *arg,
			     struct cove_err *err);
	int (*put_port)(struct store *s, const struct store_port *p, struct cove_err *err);
	int (*delete_port)(struct store *s, const char *sandbox, int port, struct cove_err *err);
	int (*each_port)(struct store *s, void (*cb)(void *arg, const struct store_port *p), void *arg,
			 struct cove_err *err);
	int (*begin)(struct store *s, struct cove_err *err);
	int (*begin_durable)(struct store *s, struct cove_err *err);
	int (*commit)(struct store *s, struct cove_err *err);
	void (*rollback)(struct store *s);
};

struct store {
	const struct store_ops *ops;
};

struct store_sandbox {
	const char *id;
	const char *state;
	int slot;
	pid_t init_pid;
	uint64_t init_start; /* /proc/<pid>/stat starttime: tells a reused pid apart */
	const char *spec;    /* JSON: image, limits, env, cwd, user, name, created_at */
	int64_t state_changed_at; /* unix ms (0 in rows from before the lifecycle) */
	const char *state_reason; /* why: user, request, idle, timeout, slots */
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

/* The SQLite store (store_sqlite.c) at path: made if missing, its schema
 * brought up to date. */
int store_sqlite_open(struct store **ret, const char *path, struct cove_err *err);
static inline void store_close(struct store *s)
{
	if (s)
		s->ops->close(s);
}
/* Insert or replace a sandbox's row. */
static inline int store_put_sandbox(struct store *s, const struct store_sandbox *sb, struct cove_err *err)
{
	return s->ops->put_sandbox(s, sb, err);
}
static inline int store_delete_sandbox(struct store *s, const char *id, struct cove_err *err)
{
	return s->ops->delete_sandbox(s, id, err);
}
/* Calls cb for every sandbox, in creation order; cb's strings are borrowed. */
static inline int store_each_sandbox(struct store *s, void (*cb)(void *arg, const struct store_sandbox *sb), void *arg, struct cove_err *err)
{
	return s->ops->each_sandbox(s, cb, arg, err);
}
/* Insert a snapshot's row, durable as sn->durable says: true only inside
 * a store_begin_durable transaction, and only once its files and manifest
 * are on disk. */
static inline int store_put_snapshot(struct store *s, const struct store_snapshot *sn, struct cove_err *err)
{
	return s->ops->put_snapshot(s, sn, err);
}
/* Mark it durable, committed durably (a WAL sync, whatever the store's
 * default). */
static inline int store_set_snapshot_durable(struct store *s, const char *id, struct cove_err *err)
{
	return s->ops->set_snapshot_durable(s, id, err);
}
static inline int store_delete_snapshot(struct store *s, const char *id, struct cove_err *err)
{
	return s->ops->delete_snapshot(s, id, err);
}
/* Calls cb for every snapshot, oldest first; cb's strings are borrowed. */
static inline int store_each_snapshot(struct store *s, void (*cb)(void *arg, const struct store_snapshot *sn), void *arg, struct cove_err *err)
{
	return s->ops->each_snapshot(s, cb, arg, err);
}

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
static inline int store_put_checkpoint(struct store *s, const struct store_checkpoint *c, struct cove_err *err)
{
	return s->ops->put_checkpoint(s, c, err);
}
/* The highest seq of history, 0 when it has none. */
static inline int store_last_checkpoint(struct store *s, const char *history, int *ret_seq, struct cove_err *err)
{
	return s->ops->last_checkpoint(s, history, ret_seq, err);
}
/* Calls cb with sandbox's history, if it has one: returns 1, 0 without
 * one, or -1. cb's strings are borrowed. */
static inline int store_get_history(struct store *s, const char *sandbox, void (*cb)(void *arg, const struct store_history *h), void *arg, struct cove_err *err)
{
	return s->ops->get_history(s, sandbox, cb, arg, err);
}
/* Calls cb for every history whose origin is origin, oldest first: returns
 * how many, or -1. */
static inline int store_each_derived(struct store *s, const char *origin, void (*cb)(void *arg, const struct store_history *h), void *arg, struct cove_err *err)
{
	return s->ops->each_derived(s, origin, cb, arg, err);
}
/* Calls cb for every checkpoint of history, by seq. */
static inline int store_each_checkpoint(struct store *s, const char *history, void (*cb)(void *arg, const struct store_checkpoint *c), void *arg, struct cove_err *err)
{
	return s->ops->each_checkpoint(s, history, cb, arg, err);
}
/* A new history h->sandbox (from h->origin at h->origin_seq, as
 * h->origin_kind) holding origin's checkpoints 1..origin_seq: one durable
 * transaction, or part of the caller's when one is open. */
static inline int store_copy_history(struct store *s, const struct store_history *h, struct cove_err *err)
{
	return s->ops->copy_history(s, h, err);
}
/* Forget sandbox's history and its checkpoints (not their snapshots). */
static inline int store_delete_history(struct store *s, const char *sandbox, struct cove_err *err)
{
	return s->ops->delete_history(s, sandbox, err);
}
/* How many checkpoints name snapshot (0 or more, -1 on failure); when
 * some do, the first one's history and seq. */
static inline int store_snapshot_users(struct store *s, const char *snapshot, char ret_history[16], int *ret_seq, struct cove_err *err)
{
	return s->ops->snapshot_users(s, snapshot, ret_history, ret_seq, err);
}
/* Templates (engine/templates.c): a name and its JSON document. */
struct store_template {
	const char *name;
	const char *data;
};
/* Insert or replace, committed durably (a template is answered as made). */
static inline int store_put_template(struct store *s, const char *name, const char *data, struct cove_err *err)
{
	return s->ops->put_template(s, name, data, err);
}
static inline int store_delete_template(struct store *s, const char *name, struct cove_err *err)
{
	return s->ops->delete_template(s, name, err);
}
/* Calls cb for every template, by name; cb's strings are borrowed. */
static inline int store_each_template(struct store *s, void (*cb)(void *arg, const struct store_template *t), void *arg,
				      struct cove_err *err)
{
	return s->ops->each_template(s, cb, arg, err);
}

/* A sandbox's port opened to the proxy, with its traffic token. */
struct store_port {
	const char *sandbox;
	int port;
	const char *token;
	bool public;
	int64_t created_at; /* unix ms */
};
/* Insert or replace (sandbox, port)'s row. store_delete_sandbox deletes a
 * sandbox's ports with it. */
static inline int store_put_port(struct store *s, const struct store_port *p, struct cove_err *err)
{
	return s->ops->put_port(s, p, err);
}
static inline int store_delete_port(struct store *s, const char *sandbox, int port, struct cove_err *err)
{
	return s->ops->delete_port(s, sandbox, port, err);
}
/* Calls cb for every port, by sandbox and port; cb's strings are borrowed. */
static inline int store_each_port(struct store *s, void (*cb)(void *arg, const struct store_port *p), void *arg,
				  struct cove_err *err)
{
	return s->ops->each_port(s, cb, arg, err);
}
/* One transaction of every call until store_commit: a crash before the
 * commit, or a commit that fails (it then rolls back), leaves none of
 * them. Not nested. */
static inline int store_begin(struct store *s, struct cove_err *err)
{
	return s->ops->begin(s, err);
}
/* store_begin, for what is answered as done: its commit is a WAL sync
 * (synchronous=FULL), so it survives a power failure too. */
static inline int store_begin_durable(struct store *s, struct cove_err *err)
{
	return s->ops->begin_durable(s, err);
}
/* On failure it rolls back (and says why in err). */
static inline int store_commit(struct store *s, struct cove_err *err)
{
	return s->ops->commit(s, err);
}
/* Drop the open transaction. */
static inline void store_rollback(struct store *s)
{
	s->ops->rollback(s);
}

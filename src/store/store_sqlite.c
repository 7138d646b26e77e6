/* The state store in SQLite (WAL): store.h's one implementation today. */
#include "store/store.h"

#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/cleanup.h"

struct sqlite_store {
	struct store base; /* first: what the engine holds */
	sqlite3 *db;
	sqlite3_stmt *put, *del, *each;
	sqlite3_stmt *snap_put, *snap_del, *snap_each;
	sqlite3_stmt *snap_durable;
	bool synced; /* a store_begin_durable transaction is open: synchronous=FULL until its end */
};

static const char schema[] = "PRAGMA journal_mode=WAL;"
			     "PRAGMA synchronous=NORMAL;"
			     "CREATE TABLE IF NOT EXISTS sandboxes ("
			     " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
			     " id TEXT UNIQUE NOT NULL,"
			     " state TEXT NOT NULL,"
			     " slot INTEGER NOT NULL,"
			     " init_pid INTEGER NOT NULL,"
			     " init_start INTEGER NOT NULL,"
			     " spec TEXT NOT NULL);"
			     "CREATE TABLE IF NOT EXISTS snapshots ("
			     " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
			     " id TEXT UNIQUE NOT NULL,"
			     " sandbox TEXT NOT NULL,"
			     " name TEXT NOT NULL,"
			     " image_dir TEXT NOT NULL,"
			     " created_at INTEGER NOT NULL,"
			     " spec TEXT NOT NULL);";

/* Schema changes after the first tables, in order: migrations[i] takes a
 * database from user_version i to i + 1. A database made before any of them
 * is at version 0, so every existing state.db is brought up to date at
 * start, each step in its own transaction. Only ever append. */
static const char *const migrations[] = {
	/* 1: histories of checkpoints (history.c). A history is keyed by the
	 * sandbox whose line it is and outlives it; origin is the history it
	 * was rolled back or branched from. A checkpoint names a snapshot,
	 * which DELETE /v1/snapshots leaves alone while a row names it. */
	"CREATE TABLE histories ("
	" sandbox TEXT PRIMARY KEY,"
	" origin TEXT,"
	" origin_seq INTEGER,"
	" origin_kind TEXT,"
	" created_at INTEGER NOT NULL);"
	"CREATE TABLE checkpoints ("
	" history TEXT NOT NULL,"
	" seq INTEGER NOT NULL,"
	" label TEXT NOT NULL,"
	" snapshot TEXT NOT NULL,"
	" sandbox TEXT NOT NULL,"
	" created_at INTEGER NOT NULL,"
	" PRIMARY KEY (history, seq));"
	"CREATE INDEX checkpoints_by_snapshot ON checkpoints(snapshot);",
	/* 2: a snapshot's durable flag (wait_durable false answers before its
	 * files are on disk). The rows of older databases were all written
	 * durable. */
	"ALTER TABLE snapshots ADD COLUMN durable INTEGER NOT NULL DEFAULT 1;",
	/* 3: templates (engine/templates.c), one JSON document each. */
	"CREATE TABLE IF NOT EXISTS templates (name TEXT PRIMARY KEY, data TEXT NOT NULL);",
	/* 4: a sandbox's ports opened to the proxy (engine/ports.c), each
	 * with its traffic token. They go with their sandbox's row. */
	"CREATE TABLE IF NOT EXISTS ports ("
	" sandbox TEXT NOT NULL,"
	" port INTEGER NOT NULL,"
	" token TEXT NOT NULL,"
	" public INTEGER NOT NULL,"
	" created_at INTEGER NOT NULL,"
	" PRIMARY KEY (sandbox, port));",
	/* 5: the lifecycle (engine/lifecycle.h): when a sandbox's state last
	 * changed and why. Its state column now also says paused, archived. */
	"ALTER TABLE sandboxes ADD COLUMN state_changed_at INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN state_reason TEXT NOT NULL DEFAULT 'user';",
};

static int migrate(sqlite3 *db, const char *path, struct cove_err *err)
{
	sqlite3_stmt *st = NULL;
	int version = -1;
	if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
		version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (version < 0)
		return err_set(err, COVE_EINTERNAL, "state store '%s': read its version: %s", path, sqlite3_errmsg(db));
	/* A newer coved's database: its tables may mean what this one does not know. */
	if (version > (int)ARRAY_SIZE(migrations))
		return err_set(err, COVE_EINTERNAL,
			       "state store '%s' is at schema version %d, newer than this coved's %d", path, version,
			       (int)ARRAY_SIZE(migrations));
	for (; version < (int)ARRAY_SIZE(migrations); version++) {
		char bump[64];
		snprintf(bump, sizeof(bump), "PRAGMA user_version = %d;", version + 1);
		if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK ||
		    sqlite3_exec(db, migrations[version], NULL, NULL, NULL) != SQLITE_OK ||
		    sqlite3_exec(db, bump, NULL, NULL, NULL) != SQLITE_OK ||
		    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
			int r = err_set(err, COVE_EINTERNAL, "state store '%s': migrate to version %d: %s", path,
					version + 1, sqlite3_errmsg(db));
			(void)sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			return r;
		}
	}
	return 0;
}

/* A full disk under state.db (SQLITE_FULL) is the user's to fix: 507. */
static int db_err(struct sqlite_store *s, struct cove_err *err, const char *what)
{
	int code = (sqlite3_errcode(s->db) & 0xff) == SQLITE_FULL ? COVE_ENOSPACE : COVE_EINTERNAL;
	return err_set(err, code, "state store: %s: %s", what, sqlite3_errmsg(s->db));
}

static const struct store_ops sqlite_ops;
static sqlite3_stmt *prepare(struct sqlite_store *s, const char *sql, const char *types, ...);
static int run(struct sqlite_store *s, sqlite3_stmt *st, const char *what, struct cove_err *err);
static void sqlite_close(struct store *store);
static int sqlite_commit(struct store *store, struct cove_err *err);
static void sqlite_rollback(struct store *store);

int store_sqlite_open(struct store **ret, const char *path, struct cove_err *err)
{
	struct sqlite_store *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	s->base.ops = &sqlite_ops;
	if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL) !=
		    SQLITE_OK ||
	    sqlite3_exec(s->db, schema, NULL, NULL, NULL) != SQLITE_OK) {
		int r = err_set(err, COVE_EINTERNAL, "open state store '%s': %s", path,
				s->db ? sqlite3_errmsg(s->db) : "out of memory");
		sqlite_close(&s->base);
		return r;
	}
	/* Tables first, then the statements that name their columns. */
	if (migrate(s->db, path, err) < 0) {
		sqlite_close(&s->base);
		return -1;
	}
	if (sqlite3_prepare_v2(s->db,
			       "INSERT INTO sandboxes (id, state, slot, init_pid, init_start, spec, state_changed_at, "
			       "state_reason)"
			       " VALUES (?,?,?,?,?,?,?,?)"
			       " ON CONFLICT(id) DO UPDATE SET state=excluded.state, slot=excluded.slot,"
			       " init_pid=excluded.init_pid, init_start=excluded.init_start, spec=excluded.spec,"
			       " state_changed_at=excluded.state_changed_at, state_reason=excluded.state_reason",
			       -1, &s->put, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "DELETE FROM sandboxes WHERE id = ?", -1, &s->del, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db,
			       "SELECT id, state, slot, init_pid, init_start, spec, state_changed_at, state_reason"
			       " FROM sandboxes ORDER BY seq",
			       -1, &s->each, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db,
			       "INSERT INTO snapshots (id, sandbox, name, image_dir, created_at, spec, durable)"
			       " VALUES (?,?,?,?,?,?,?)",
			       -1, &s->snap_put, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "DELETE FROM snapshots WHERE id = ?", -1, &s->snap_del, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(
		    s->db, "SELECT id, sandbox, name, image_dir, created_at, spec, durable FROM snapshots ORDER BY seq",
		    -1, &s->snap_each, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "UPDATE snapshots SET durable = 1 WHERE id = ?", -1, &s->snap_durable, NULL) !=
		    SQLITE_OK) {
		int r = err_set(err, COVE_EINTERNAL, "open state store '%s': %s", path,
				s->db ? sqlite3_errmsg(s->db) : "out of memory");
		sqlite_close(&s->base);
		return r;
	}
	sqlite3_busy_timeout(s->db, 5000);
	*ret = &s->base;
	return 0;
}

static void sqlite_close(struct store *store)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	if (!s)
		return;
	sqlite3_finalize(s->put);
	sqlite3_finalize(s->del);
	sqlite3_finalize(s->each);
	sqlite3_finalize(s->snap_put);
	sqlite3_finalize(s->snap_del);
	sqlite3_finalize(s->snap_each);
	sqlite3_finalize(s->snap_durable);
	sqlite3_close(s->db);
	free(s);
}

static int sqlite_put_sandbox(struct store *store, const struct store_sandbox *sb, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	sqlite3_reset(s->put);
	sqlite3_bind_text(s->put, 1, sb->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s->put, 2, sb->state, -1, SQLITE_STATIC);
	sqlite3_bind_int(s->put, 3, sb->slot);
	sqlite3_bind_int(s->put, 4, sb->init_pid);
	sqlite3_bind_int64(s->put, 5, (sqlite3_int64)sb->init_start);
	sqlite3_bind_text(s->put, 6, sb->spec, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s->put, 7, (sqlite3_int64)sb->state_changed_at);
	sqlite3_bind_text(s->put, 8, sb->state_reason ? sb->state_reason : "user", -1, SQLITE_STATIC);
	int r = sqlite3_step(s->put) == SQLITE_DONE ? 0 : db_err(s, err, "save sandbox");
	sqlite3_reset(s->put);
	return r;
}

static int sqlite_delete_sandbox(struct store *store, const char *id, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	sqlite3_reset(s->del);
	sqlite3_bind_text(s->del, 1, id, -1, SQLITE_STATIC);
	int r = sqlite3_step(s->del) == SQLITE_DONE ? 0 : db_err(s, err, "delete sandbox");
	sqlite3_reset(s->del);
	/* Its ports go with it (a crash between the two leaves rows that
	 * ports_load drops: no sandbox names them). */
	if (r == 0)
		r = run(s, prepare(s, "DELETE FROM ports WHERE sandbox = ?", "s", id), "delete sandbox's ports", err);
	return r;
}

static int sqlite_each_sandbox(struct store *store, void (*cb)(void *arg, const struct store_sandbox *sb), void *arg,
		       struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	int rc;
	sqlite3_reset(s->each);
	while ((rc = sqlite3_step(s->each)) == SQLITE_ROW) {
		struct store_sandbox sb = {
			.id = (const char *)sqlite3_column_text(s->each, 0),
			.state = (const char *)sqlite3_column_text(s->each, 1),
			.slot = sqlite3_column_int(s->each, 2),
			.init_pid = sqlite3_column_int(s->each, 3),
			.init_start = (uint64_t)sqlite3_column_int64(s->each, 4),
			.spec = (const char *)sqlite3_column_text(s->each, 5),
			.state_changed_at = sqlite3_column_int64(s->each, 6),
			.state_reason = (const char *)sqlite3_column_text(s->each, 7),
		};
		cb(arg, &sb);
	}
	int r = rc == SQLITE_DONE ? 0 : db_err(s, err, "list sandboxes");
	sqlite3_reset(s->each);
	return r;
}

/* A row that is not durable yet may be lost to a power cut with the
 * store's default synchronous=NORMAL: the next start then finds its
 * directory without a row and deletes it. A durable one is written in a
 * store_begin_durable transaction. */
static int sqlite_put_snapshot(struct store *store, const struct store_snapshot *sn, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	sqlite3_reset(s->snap_put);
	sqlite3_bind_text(s->snap_put, 1, sn->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s->snap_put, 2, sn->sandbox, -1, SQLITE_STATIC);
	sqlite3_bind_text(s->snap_put, 3, sn->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(s->snap_put, 4, sn->image_dir, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s->snap_put, 5, (sqlite3_int64)sn->created_at);
	sqlite3_bind_text(s->snap_put, 6, sn->spec, -1, SQLITE_STATIC);
	sqlite3_bind_int(s->snap_put, 7, sn->durable);
	int r = sqlite3_step(s->snap_put) == SQLITE_DONE ? 0 : db_err(s, err, "save snapshot");
	sqlite3_reset(s->snap_put);
	return r;
}

/* synchronous=NORMAL may lose the last commits in a power failure, which a
 * snapshot reported durable must not: this commit is a WAL sync. */
static int sqlite_set_snapshot_durable(struct store *store, const char *id, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	if (sqlite3_exec(s->db, "PRAGMA synchronous=FULL", NULL, NULL, NULL) != SQLITE_OK)
		return db_err(s, err, "mark snapshot durable");
	sqlite3_reset(s->snap_durable);
	sqlite3_bind_text(s->snap_durable, 1, id, -1, SQLITE_STATIC);
	int r = sqlite3_step(s->snap_durable) == SQLITE_DONE ? 0 : db_err(s, err, "mark snapshot durable");
	if (r == 0 && sqlite3_changes(s->db) != 1)
		r = err_set(err, COVE_EINTERNAL, "state store: no snapshot row '%s'", id);
	sqlite3_reset(s->snap_durable);
	(void)sqlite3_exec(s->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
	return r;
}

static int sqlite_delete_snapshot(struct store *store, const char *id, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	sqlite3_reset(s->snap_del);
	sqlite3_bind_text(s->snap_del, 1, id, -1, SQLITE_STATIC);
	int r = sqlite3_step(s->snap_del) == SQLITE_DONE ? 0 : db_err(s, err, "delete snapshot");
	sqlite3_reset(s->snap_del);
	return r;
}

static int sqlite_each_snapshot(struct store *store, void (*cb)(void *arg, const struct store_snapshot *sn), void *arg,
			struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	int rc;
	sqlite3_reset(s->snap_each);
	while ((rc = sqlite3_step(s->snap_each)) == SQLITE_ROW) {
		struct store_snapshot sn = {
			.id = (const char *)sqlite3_column_text(s->snap_each, 0),
			.sandbox = (const char *)sqlite3_column_text(s->snap_each, 1),
			.name = (const char *)sqlite3_column_text(s->snap_each, 2),
			.image_dir = (const char *)sqlite3_column_text(s->snap_each, 3),
			.created_at = (int64_t)sqlite3_column_int64(s->snap_each, 4),
			.spec = (const char *)sqlite3_column_text(s->snap_each, 5),
			.durable = sqlite3_column_int(s->snap_each, 6) != 0,
		};
		cb(arg, &sn);
	}
	int r = rc == SQLITE_DONE ? 0 : db_err(s, err, "list snapshots");
	sqlite3_reset(s->snap_each);
	return r;
}

/* Histories of checkpoints. Statements are prepared per call: these are
 * rare next to the snapshot each checkpoint takes. */

/* A statement with its parameters bound: types has one letter a parameter,
 * 's' (const char *; NULL binds NULL), 'i' (int), 'I' (int64_t). NULL on
 * failure (sqlite3_errmsg says why). */
static sqlite3_stmt *prepare(struct sqlite_store *s, const char *sql, const char *types, ...)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return NULL;
	va_list ap;
	va_start(ap, types);
	for (int i = 1; types[i - 1]; i++) {
		if (types[i - 1] == 's')
			sqlite3_bind_text(st, i, va_arg(ap, const char *), -1, SQLITE_TRANSIENT);
		else if (types[i - 1] == 'i')
			sqlite3_bind_int(st, i, va_arg(ap, int));
		else
			sqlite3_bind_int64(st, i, (sqlite3_int64)va_arg(ap, int64_t));
	}
	va_end(ap);
	return st;
}

/* Steps a statement without rows to its end, and finalizes it. */
static int run(struct sqlite_store *s, sqlite3_stmt *st, const char *what, struct cove_err *err)
{
	int r = st && sqlite3_step(st) == SQLITE_DONE ? 0 : db_err(s, err, what);
	sqlite3_finalize(st);
	return r;
}

/* Back to the store's default once a durable transaction is over. */
static void end_synced(struct sqlite_store *s)
{
	if (s->synced)
		(void)sqlite3_exec(s->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
	s->synced = false;
}

/* A write that is answered as done must survive a power failure, as a
 * snapshot's row does: one transaction, committed with a WAL sync. A BEGIN
 * that fails leaves whatever transaction is open alone. */
static int begin_durable(struct sqlite_store *s, const char *what, struct cove_err *err)
{
	if (sqlite3_exec(s->db, "PRAGMA synchronous=FULL", NULL, NULL, NULL) == SQLITE_OK) {
		s->synced = true;
		if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK)
			return 0;
	}
	int r = db_err(s, err, what);
	end_synced(s);
	return r;
}

/* Commit when r is 0, else roll back; r, or -1 when the commit failed. */
static int end_durable(struct sqlite_store *s, int r, struct cove_err *err)
{
	if (r == 0)
		return sqlite_commit(&s->base, err);
	sqlite_rollback(&s->base);
	return r;
}

static int sqlite_put_checkpoint(struct store *store, const struct store_checkpoint *c, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	static const char what[] = "save checkpoint";
	int r = run(s,
		    prepare(s, "INSERT OR IGNORE INTO histories (sandbox, created_at) VALUES (?, ?)", "sI", c->history,
			    c->created_at),
		    what, err);
	if (r == 0)
		r = run(s,
			prepare(s,
				"INSERT INTO checkpoints (history, seq, label, snapshot, sandbox, created_at)"
				" VALUES (?, ?, ?, ?, ?, ?)",
				"sisssI", c->history, c->seq, c->label, c->snapshot, c->sandbox, c->created_at),
			what, err);
	return r;
}

static int sqlite_last_checkpoint(struct store *store, const char *history, int *ret_seq, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	sqlite3_stmt *st = prepare(s, "SELECT coalesce(max(seq), 0) FROM checkpoints WHERE history = ?", "s", history);
	int r = st && sqlite3_step(st) == SQLITE_ROW ? 0 : db_err(s, err, "read history");
	if (r == 0)
		*ret_seq = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return r;
}

static void history_of_row(sqlite3_stmt *st, struct store_history *h)
{
	h->sandbox = (const char *)sqlite3_column_text(st, 0);
	h->origin = (const char *)sqlite3_column_text(st, 1);
	h->origin_seq = sqlite3_column_int(st, 2);
	h->origin_kind = (const char *)sqlite3_column_text(st, 3);
	h->created_at = (int64_t)sqlite3_column_int64(st, 4);
}

/* Calls cb for every row of st, a SELECT of histories' columns in order. */
static int each_history(struct sqlite_store *s, sqlite3_stmt *st, void (*cb)(void *arg, const struct store_history *h),
			void *arg, struct cove_err *err)
{
	int rc = SQLITE_ERROR, n = 0;
	while (st && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_history h;
		history_of_row(st, &h);
		cb(arg, &h);
		n++;
	}
	int r = st && rc == SQLITE_DONE ? n : db_err(s, err, "read history");
	sqlite3_finalize(st);
	return r;
}

static int sqlite_get_history(struct store *store, const char *sandbox, void (*cb)(void *arg, const struct store_history *h),
		      void *arg, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	return each_history(s,
			    prepare(s,
				    "SELECT sandbox, origin, origin_seq, origin_kind, created_at FROM histories"
				    " WHERE sandbox = ?",
				    "s", sandbox),
			    cb, arg, err);
}

static int sqlite_each_derived(struct store *store, const char *origin, void (*cb)(void *arg, const struct store_history *h),
		       void *arg, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	return each_history(s,
			    prepare(s,
				    "SELECT sandbox, origin, origin_seq, origin_kind, created_at FROM histories"
				    " WHERE origin = ? ORDER BY created_at, sandbox",
				    "s", origin),
			    cb, arg, err);
}

static int sqlite_each_checkpoint(struct store *store, const char *history, void (*cb)(void *arg, const struct store_checkpoint *c),
			  void *arg, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	sqlite3_stmt *st = prepare(s,
				   "SELECT history, seq, label, snapshot, sandbox, created_at FROM checkpoints"
				   " WHERE history = ? ORDER BY seq",
				   "s", history);
	int rc = SQLITE_ERROR;
	while (st && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_checkpoint c = {
			.history = (const char *)sqlite3_column_text(st, 0),
			.seq = sqlite3_column_int(st, 1),
			.label = (const char *)sqlite3_column_text(st, 2),
			.snapshot = (const char *)sqlite3_column_text(st, 3),
			.sandbox = (const char *)sqlite3_column_text(st, 4),
			.created_at = (int64_t)sqlite3_column_int64(st, 5),
		};
		cb(arg, &c);
	}
	int r = st && rc == SQLITE_DONE ? 0 : db_err(s, err, "read history");
	sqlite3_finalize(st);
	return r;
}

static int sqlite_copy_history(struct store *store, const struct store_history *h, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	static const char what[] = "save history";
	bool own = sqlite3_get_autocommit(s->db) != 0; /* else the caller's transaction */
	if (own && begin_durable(s, what, err) < 0)
		return -1;
	int r = run(s,
		    prepare(s,
			    "INSERT INTO histories (sandbox, origin, origin_seq, origin_kind, created_at)"
			    " VALUES (?, ?, ?, ?, ?)",
			    "ssisI", h->sandbox, h->origin, h->origin_seq, h->origin_kind, h->created_at),
		    what, err);
	if (r == 0)
		r = run(s,
			prepare(s,
				"INSERT INTO checkpoints (history, seq, label, snapshot, sandbox, created_at)"
				" SELECT ?, seq, label, snapshot, sandbox, created_at FROM checkpoints"
				" WHERE history = ? AND seq <= ?",
				"ssi", h->sandbox, h->origin, h->origin_seq),
			what, err);
	return own ? end_durable(s, r, err) : r;
}

static int sqlite_delete_history(struct store *store, const char *sandbox, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	static const char what[] = "delete history";
	if (begin_durable(s, what, err) < 0)
		return -1;
	int r = run(s, prepare(s, "DELETE FROM checkpoints WHERE history = ?", "s", sandbox), what, err);
	if (r == 0)
		r = run(s, prepare(s, "DELETE FROM histories WHERE sandbox = ?", "s", sandbox), what, err);
	return end_durable(s, r, err);
}

static int sqlite_snapshot_users(struct store *store, const char *snapshot, char ret_history[16], int *ret_seq,
			 struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	sqlite3_stmt *st = prepare(s,
				   "SELECT history, seq, (SELECT count(*) FROM checkpoints WHERE snapshot = ?1)"
				   " FROM checkpoints WHERE snapshot = ?1 ORDER BY history, seq LIMIT 1",
				   "s", snapshot);
	int rc = st ? sqlite3_step(st) : SQLITE_ERROR;
	int r = rc == SQLITE_DONE ? 0 : rc == SQLITE_ROW ? sqlite3_column_int(st, 2) : db_err(s, err, "read history");
	if (rc == SQLITE_ROW) {
		snprintf(ret_history, 16, "%s", (const char *)sqlite3_column_text(st, 0));
		*ret_seq = sqlite3_column_int(st, 1);
	}
	sqlite3_finalize(st);
	return r;
}

static int sqlite_put_template(struct store *store, const char *name, const char *data, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	static const char what[] = "save template";
	if (begin_durable(s, what, err) < 0)
		return -1;
	int r = run(s, prepare(s, "INSERT OR REPLACE INTO templates (name, data) VALUES (?, ?)", "ss", name, data),
		    what, err);
	return end_durable(s, r, err);
}

static int sqlite_delete_template(struct store *store, const char *name, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	return run(s, prepare(s, "DELETE FROM templates WHERE name = ?", "s", name), "delete template", err);
}

static int sqlite_each_template(struct store *store, void (*cb)(void *arg, const struct store_template *t), void *arg,
				struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	sqlite3_stmt *st = prepare(s, "SELECT name, data FROM templates ORDER BY name", "");
	int rc = SQLITE_ERROR;
	while (st && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_template t = { .name = (const char *)sqlite3_column_text(st, 0),
					    .data = (const char *)sqlite3_column_text(st, 1) };
		cb(arg, &t);
	}
	int r = st && rc == SQLITE_DONE ? 0 : db_err(s, err, "list templates");
	sqlite3_finalize(st);
	return r;
}

static int sqlite_begin(struct store *store, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	return sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK ? 0 : db_err(s, err, "begin");
}

static int sqlite_begin_durable(struct store *store, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	return begin_durable(s, "begin", err);
}

static int sqlite_commit(struct store *store, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	int r = 0;
	if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
		r = db_err(s, err, "commit");
		(void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	}
	end_synced(s);
	return r;
}

static void sqlite_rollback(struct store *store)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	(void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	end_synced(s);
}

/* Ports: few and rare, prepared per call. */
static int sqlite_put_port(struct store *store, const struct store_port *p, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	return run(s,
		   prepare(s,
			   "INSERT INTO ports (sandbox, port, token, public, created_at) VALUES (?,?,?,?,?)"
			   " ON CONFLICT(sandbox, port) DO UPDATE SET token=excluded.token, public=excluded.public",
			   "sisiI", p->sandbox, p->port, p->token, (int)p->public, p->created_at),
		   "save port", err);
}

static int sqlite_delete_port(struct store *store, const char *sandbox, int port, struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	return run(s, prepare(s, "DELETE FROM ports WHERE sandbox = ? AND port = ?", "si", sandbox, port),
		   "delete port", err);
}

static int sqlite_each_port(struct store *store, void (*cb)(void *arg, const struct store_port *p), void *arg,
			    struct cove_err *err)
{
	struct sqlite_store *s = (struct sqlite_store *)store;
	sqlite3_stmt *st =
		prepare(s, "SELECT sandbox, port, token, public, created_at FROM ports ORDER BY sandbox, port", "");
	int rc = st ? SQLITE_ROW : SQLITE_ERROR;
	while (st && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_port p = {
			.sandbox = (const char *)sqlite3_column_text(st, 0),
			.port = sqlite3_column_int(st, 1),
			.token = (const char *)sqlite3_column_text(st, 2),
			.public = sqlite3_column_int(st, 3) != 0,
			.created_at = sqlite3_column_int64(st, 4),
		};
		cb(arg, &p);
	}
	int r = rc == SQLITE_DONE ? 0 : db_err(s, err, "list ports");
	sqlite3_finalize(st);
	return r;
}

static const struct store_ops sqlite_ops = {
	.close = sqlite_close,
	.put_sandbox = sqlite_put_sandbox,
	.delete_sandbox = sqlite_delete_sandbox,
	.each_sandbox = sqlite_each_sandbox,
	.put_snapshot = sqlite_put_snapshot,
	.set_snapshot_durable = sqlite_set_snapshot_durable,
	.delete_snapshot = sqlite_delete_snapshot,
	.each_snapshot = sqlite_each_snapshot,
	.put_checkpoint = sqlite_put_checkpoint,
	.last_checkpoint = sqlite_last_checkpoint,
	.get_history = sqlite_get_history,
	.each_derived = sqlite_each_derived,
	.each_checkpoint = sqlite_each_checkpoint,
	.copy_history = sqlite_copy_history,
	.delete_history = sqlite_delete_history,
	.snapshot_users = sqlite_snapshot_users,
	.put_template = sqlite_put_template,
	.delete_template = sqlite_delete_template,
	.each_template = sqlite_each_template,
	.put_port = sqlite_put_port,
	.delete_port = sqlite_delete_port,
	.each_port = sqlite_each_port,
	.begin = sqlite_begin,
	.begin_durable = sqlite_begin_durable,
	.commit = sqlite_commit,
	.rollback = sqlite_rollback,
};

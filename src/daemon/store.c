#include "daemon/store.h"

#include <sqlite3.h>
#include <stdlib.h>

struct store {
	sqlite3 *db;
	sqlite3_stmt *put, *del, *each;
	sqlite3_stmt *snap_put, *snap_del, *snap_each;
	sqlite3_stmt *snap_durable;
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
			     " spec TEXT NOT NULL,"
			     " durable INTEGER NOT NULL DEFAULT 1);";

/* state.db files from before snapshots had a durable flag: all their rows
 * were written durable. */
static int migrate(sqlite3 *db)
{
	sqlite3_stmt *probe;
	if (sqlite3_prepare_v2(db, "SELECT durable FROM snapshots", -1, &probe, NULL) == SQLITE_OK) {
		sqlite3_finalize(probe);
		return SQLITE_OK;
	}
	return sqlite3_exec(db, "ALTER TABLE snapshots ADD COLUMN durable INTEGER NOT NULL DEFAULT 1", NULL, NULL,
			    NULL);
}

static int db_err(struct store *s, struct cove_err *err, const char *what)
{
	return err_set(err, COVE_EINTERNAL, "state store: %s: %s", what, sqlite3_errmsg(s->db));
}

int store_open(struct store **ret, const char *path, struct cove_err *err)
{
	struct store *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL) !=
		    SQLITE_OK ||
	    sqlite3_exec(s->db, schema, NULL, NULL, NULL) != SQLITE_OK || migrate(s->db) != SQLITE_OK ||
	    sqlite3_prepare_v2(
		    s->db,
		    "INSERT INTO sandboxes (id, state, slot, init_pid, init_start, spec) VALUES (?,?,?,?,?,?)"
		    " ON CONFLICT(id) DO UPDATE SET state=excluded.state, slot=excluded.slot,"
		    " init_pid=excluded.init_pid, init_start=excluded.init_start, spec=excluded.spec",
		    -1, &s->put, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "DELETE FROM sandboxes WHERE id = ?", -1, &s->del, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "SELECT id, state, slot, init_pid, init_start, spec FROM sandboxes ORDER BY seq",
			       -1, &s->each, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db,
			       "INSERT INTO snapshots (id, sandbox, name, image_dir, created_at, spec, durable)"
			       " VALUES (?,?,?,?,?,?,0)",
			       -1, &s->snap_put, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "DELETE FROM snapshots WHERE id = ?", -1, &s->snap_del, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(
		    s->db, "SELECT id, sandbox, name, image_dir, created_at, spec, durable FROM snapshots ORDER BY seq",
		    -1, &s->snap_each, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "UPDATE snapshots SET durable = 1 WHERE id = ?", -1, &s->snap_durable, NULL) !=
		    SQLITE_OK) {
		int r = err_set(err, COVE_EINTERNAL, "open state store '%s': %s", path,
				s->db ? sqlite3_errmsg(s->db) : "out of memory");
		store_close(s);
		return r;
	}
	sqlite3_busy_timeout(s->db, 5000);
	*ret = s;
	return 0;
}

void store_close(struct store *s)
{
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

int store_put_sandbox(struct store *s, const struct store_sandbox *sb, struct cove_err *err)
{
	sqlite3_reset(s->put);
	sqlite3_bind_text(s->put, 1, sb->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s->put, 2, sb->state, -1, SQLITE_STATIC);
	sqlite3_bind_int(s->put, 3, sb->slot);
	sqlite3_bind_int(s->put, 4, sb->init_pid);
	sqlite3_bind_int64(s->put, 5, (sqlite3_int64)sb->init_start);
	sqlite3_bind_text(s->put, 6, sb->spec, -1, SQLITE_STATIC);
	int r = sqlite3_step(s->put) == SQLITE_DONE ? 0 : db_err(s, err, "save sandbox");
	sqlite3_reset(s->put);
	return r;
}

int store_delete_sandbox(struct store *s, const char *id, struct cove_err *err)
{
	sqlite3_reset(s->del);
	sqlite3_bind_text(s->del, 1, id, -1, SQLITE_STATIC);
	int r = sqlite3_step(s->del) == SQLITE_DONE ? 0 : db_err(s, err, "delete sandbox");
	sqlite3_reset(s->del);
	return r;
}

int store_each_sandbox(struct store *s, void (*cb)(void *arg, const struct store_sandbox *sb), void *arg,
		       struct cove_err *err)
{
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
		};
		cb(arg, &sb);
	}
	int r = rc == SQLITE_DONE ? 0 : db_err(s, err, "list sandboxes");
	sqlite3_reset(s->each);
	return r;
}

/* A row that is not durable yet may be lost to a power cut with the
 * store's default synchronous=NORMAL: the next start then finds its
 * directory without a row and deletes it. */
int store_put_snapshot(struct store *s, const struct store_snapshot *sn, struct cove_err *err)
{
	sqlite3_reset(s->snap_put);
	sqlite3_bind_text(s->snap_put, 1, sn->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s->snap_put, 2, sn->sandbox, -1, SQLITE_STATIC);
	sqlite3_bind_text(s->snap_put, 3, sn->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(s->snap_put, 4, sn->image_dir, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s->snap_put, 5, (sqlite3_int64)sn->created_at);
	sqlite3_bind_text(s->snap_put, 6, sn->spec, -1, SQLITE_STATIC);
	int r = sqlite3_step(s->snap_put) == SQLITE_DONE ? 0 : db_err(s, err, "save snapshot");
	sqlite3_reset(s->snap_put);
	return r;
}

/* synchronous=NORMAL may lose the last commits in a power failure, which a
 * snapshot reported durable must not: this commit is a WAL sync. */
int store_set_snapshot_durable(struct store *s, const char *id, struct cove_err *err)
{
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

int store_delete_snapshot(struct store *s, const char *id, struct cove_err *err)
{
	sqlite3_reset(s->snap_del);
	sqlite3_bind_text(s->snap_del, 1, id, -1, SQLITE_STATIC);
	int r = sqlite3_step(s->snap_del) == SQLITE_DONE ? 0 : db_err(s, err, "delete snapshot");
	sqlite3_reset(s->snap_del);
	return r;
}

int store_each_snapshot(struct store *s, void (*cb)(void *arg, const struct store_snapshot *sn), void *arg,
			struct cove_err *err)
{
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

int store_begin(struct store *s, struct cove_err *err)
{
	return sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK ? 0 : db_err(s, err, "begin");
}

int store_commit(struct store *s, struct cove_err *err)
{
	if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK)
		return 0;
	int r = db_err(s, err, "commit");
	(void)sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return r;
}

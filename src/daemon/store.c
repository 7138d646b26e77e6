#include "daemon/store.h"

#include <sqlite3.h>
#include <stdlib.h>

struct store {
	sqlite3 *db;
	sqlite3_stmt *put, *del, *each;
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
			     " spec TEXT NOT NULL);";

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
	    sqlite3_exec(s->db, schema, NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(
		    s->db,
		    "INSERT INTO sandboxes (id, state, slot, init_pid, init_start, spec) VALUES (?,?,?,?,?,?)"
		    " ON CONFLICT(id) DO UPDATE SET state=excluded.state, slot=excluded.slot,"
		    " init_pid=excluded.init_pid, init_start=excluded.init_start, spec=excluded.spec",
		    -1, &s->put, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "DELETE FROM sandboxes WHERE id = ?", -1, &s->del, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "SELECT id, state, slot, init_pid, init_start, spec FROM sandboxes ORDER BY seq",
			       -1, &s->each, NULL) != SQLITE_OK) {
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

/* Histories: checkpoints, rollback and branch.
 *
 * A sandbox's history is its ordered list of checkpoints 1, 2, 3...: each is
 * a snapshot taken by snapshot_create (so consistent and durable) and a row
 * in state.db's checkpoints table. A history is keyed by its sandbox's ID and
 * is kept when the sandbox is deleted, until it is deleted itself.
 *
 * Rollback and branch make new sandboxes from checkpoint k and leave the
 * original, and its history, as they are. Each new sandbox gets a history of
 * its own that starts as a copy of the original's checkpoints 1..k (the rows;
 * the snapshots are shared), so that its next checkpoint is k + 1 with
 * parent k. Copying makes every history whole by itself: it can be read,
 * rolled back or deleted whatever becomes of the others. The two differ in
 * intent, which the new history records as its origin's kind: a rollback is
 * one sandbox that carries the line on from step k (what came after k stays
 * in the original's history only); a branch is count sandboxes, each a line
 * of its own from k, beside the original's, which goes on.
 *
 * Crashes: a checkpoint's rows are committed in the one transaction that
 * commits its snapshot's row, once the snapshot's files and manifest are on
 * disk (snapshot_create_with), so a crash leaves the checkpoint whole or
 * nothing of it listed, never a checkpoint without its files. A rollback's
 * or branch's sandboxes are committed with their histories, in one
 * transaction, once all run (history_restore). A snapshot that a
 * checkpoint names is not deleted (snapshot_delete asks
 * history_check_unused); deleting a history deletes,
 * after its rows, the snapshots that no other history names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/parse.h"
#include "engine/engine.h"
#include "store/store.h"

static json_t *checkpoint_to_json(const struct store_checkpoint *c)
{
	return json_pack("{s:i, s:o, s:s, s:s, s:s, s:I}", "seq", c->seq, "parent",
			 c->seq > 1 ? json_integer(c->seq - 1) : json_null(), "label", c->label, "snapshot",
			 c->snapshot, "sandbox", c->sandbox, "created_at", (json_int_t)c->created_at);
}

static json_t *origin_to_json(const struct store_history *h)
{
	return json_pack("{s:s, s:i, s:s}", "sandbox", h->origin, "seq", h->origin_seq, "kind",
			 h->origin_kind ? h->origin_kind : "");
}

static void ignore_history(void *arg, const struct store_history *h)
{
}

/* 0 when id is a live sandbox or has a history (*ret_stored then says
 * whether it has one), else -1 with a 404. */
static int history_find(struct engine *d, const char *id, bool *ret_stored, struct cove_err *err)
{
	if (!sandbox_id_valid(id))
		return err_set(err, COVE_ENOTFOUND, "no sandbox or history '%s'", id ? id : "");
	int r = store_get_history(d->store, id, ignore_history, NULL, err);
	if (r < 0)
		return -1;
	if (r == 0 && !sandbox_find(d, id))
		return err_set(err, COVE_ENOTFOUND, "no sandbox or history '%s'", id);
	*ret_stored = r > 0;
	return 0;
}

/* The checkpoint's rows, in its snapshot's transaction. */
static int put_checkpoint(struct engine *d, const struct snapshot *sn, void *arg, struct cove_err *err)
{
	struct store_checkpoint *c = arg;
	c->snapshot = sn->id;
	c->created_at = sn->created_at;
	return store_put_checkpoint(d->store, c, err);
}

int history_checkpoint(struct engine *d, struct sandbox *sb, const char *label, bool memory, json_t **ret,
		       struct cove_err *err)
{
	int last;
	if (store_last_checkpoint(d->store, sb->id, &last, err) < 0)
		return -1;
	char name[64];
	snprintf(name, sizeof(name), "checkpoint %d", last + 1);
	struct store_checkpoint c = { .history = sb->id, .seq = last + 1, .label = label, .sandbox = sb->id };
	struct snapshot *sn;
	if (snapshot_create_mem(d, sb, name, memory, put_checkpoint, &c, &sn, err) < 0)
		return -1;
	log_info("sandbox %s: checkpoint %d (snapshot %s)", sb->id, c.seq, c.snapshot);
	*ret = checkpoint_to_json(&c);
	return 0;
}

static void add_checkpoint(void *arg, const struct store_checkpoint *c)
{
	json_array_append_new(arg, checkpoint_to_json(c));
}

static void set_origin(void *arg, const struct store_history *h)
{
	if (h->origin)
		json_object_set_new(arg, "origin", origin_to_json(h));
}

static void add_derived(void *arg, const struct store_history *h)
{
	json_array_append_new(arg, json_pack("{s:s, s:i, s:s}", "sandbox", h->sandbox, "seq", h->origin_seq, "kind",
					     h->origin_kind ? h->origin_kind : ""));
}

int history_get(struct engine *d, const char *id, json_t **ret, struct cove_err *err)
{
	bool stored;
	if (history_find(d, id, &stored, err) < 0)
		return -1;
	json_t *checkpoints = json_array(), *derived = json_array();
	json_t *j = json_pack("{s:s, s:b, s:n, s:o, s:o}", "sandbox", id, "live", sandbox_find(d, id) != NULL, "origin",
			      "checkpoints", checkpoints, "derived", derived);
	if (stored && (store_get_history(d->store, id, set_origin, j, err) < 0 ||
		       store_each_checkpoint(d->store, id, add_checkpoint, checkpoints, err) < 0 ||
		       store_each_derived(d->store, id, add_derived, derived, err) < 0)) {
		json_decref(j);
		return -1;
	}
	*ret = j;
	return 0;
}

struct find_ctx {
	int seq;           /* wanted */
	int last;          /* the history's last seq */
	char snapshot[16]; /* seq's, once found */
};

static void find_checkpoint(void *arg, const struct store_checkpoint *c)
{
	struct find_ctx *f = arg;
	f->last = c->seq;
	if (c->seq == f->seq)
		snprintf(f->snapshot, sizeof(f->snapshot), "%s", c->snapshot);
}

/* The snapshot of checkpoint seq of id's history, or NULL with err. */
static struct snapshot *checkpoint_snapshot(struct engine *d, const char *id, int seq, struct cove_err *err)
{
	bool stored;
	struct find_ctx f = { .seq = seq };
	if (history_find(d, id, &stored, err) < 0 ||
	    (stored && store_each_checkpoint(d->store, id, find_checkpoint, &f, err) < 0))
		return NULL;
	if (!f.snapshot[0]) {
		if (f.last == 0)
			err_set(err, COVE_ENOTFOUND, "%s has no checkpoint %d: its history is empty", id, seq);
		else
			err_set(err, COVE_ENOTFOUND, "%s has no checkpoint %d: its last is %d", id, seq, f.last);
		return NULL;
	}
	struct snapshot *sn = snapshot_find(d, f.snapshot);
	if (!sn)
		err_set(err, COVE_ESTATE, "checkpoint %d of %s: its snapshot %s is gone from the pool", seq, id,
			f.snapshot);
	return sn;
}

/* Undo the first n sandboxes of a rollback or branch, histories and all. */
static void undo_restores(struct engine *d, struct sandbox **made, int n)
{
	for (int i = 0; i < n; i++) {
		(void)store_delete_history(d->store, made[i]->id, NULL);
		(void)sandbox_delete(d, made[i], NULL);
	}
}

/* The new sandboxes' rows and their histories are one transaction,
 * committed once all of them run: a crash before leaves roots without rows,
 * which the next start removes, processes and all; so a branch is all or
 * nothing across a crash too, as a fork is, and a rollback's sandbox is
 * never left without its history. */
int history_restore(struct engine *d, const char *id, int seq, const char *kind, int count, struct sandbox **ret,
		    struct cove_err *err)
{
	struct snapshot *sn = checkpoint_snapshot(d, id, seq, err);
	if (!sn || store_begin_durable(d->store, err) < 0)
		return -1;
	int made = 0, r = 0;
	while (r == 0 && made < count && (r = snapshot_restore(d, sn, NULL, &ret[made], err)) == 0) {
		struct store_history h = { .sandbox = ret[made++]->id,
					   .origin = id,
					   .origin_seq = seq,
					   .origin_kind = kind,
					   .created_at = sandbox_now_ms() };
		r = store_copy_history(d->store, &h, err);
	}
	if (r == 0 && store_commit(d->store, err) == 0) {
		for (int n = 0; n < count; n++)
			log_info("sandbox %s: %s of %s at checkpoint %d", ret[n]->id, kind, id, seq);
		return 0;
	}
	if (r < 0)
		store_rollback(d->store);
	undo_restores(d, ret, made);
	return -1;
}

struct snapshot_list {
	char (*ids)[16];
	size_t n;
	bool oom;
};

static void collect_snapshot(void *arg, const struct store_checkpoint *c)
{
	struct snapshot_list *l = arg;
	char(*more)[16] = realloc(l->ids, (l->n + 1) * sizeof(*more));
	if (!more) {
		l->oom = true;
		return;
	}
	l->ids = more;
	snprintf(l->ids[l->n++], sizeof(*more), "%s", c->snapshot);
}

/* The rows go first, in one transaction: from then on the history is gone.
 * Its snapshots are deleted after, each once nothing names it: a crash in
 * between leaves them as plain snapshots. */
int history_delete(struct engine *d, const char *id, json_t **ret, struct cove_err *err)
{
	struct snapshot_list l = { 0 };
	int r = sandbox_id_valid(id) ? store_get_history(d->store, id, ignore_history, NULL, err) : 0;
	if (r == 0)
		return err_set(err, COVE_ENOTFOUND, "no history of '%s'", id ? id : "");
	if (r > 0 && store_each_checkpoint(d->store, id, collect_snapshot, &l, err) < 0)
		r = -1;
	if (r > 0 && l.oom)
		r = err_set(err, COVE_EINTERNAL, "out of memory");
	if (r > 0 && store_delete_history(d->store, id, err) < 0)
		r = -1;
	if (r < 0) {
		free(l.ids);
		return -1;
	}
	json_t *gone = json_array();
	for (size_t i = 0; i < l.n; i++) {
		struct cove_err e = { 0 };
		struct snapshot *sn = snapshot_find(d, l.ids[i]);
		if (sn && snapshot_delete(d, sn, &e) == 0)
			json_array_append_new(gone, json_string(l.ids[i]));
		else if (sn && e.code != COVE_ESTATE)
			log_error("history of %s: delete snapshot %s: %s", id, l.ids[i], e.msg);
	}
	log_info("history of %s deleted (%zu checkpoints, %zu snapshots)", id, l.n, json_array_size(gone));
	*ret = json_pack("{s:s, s:b, s:i, s:o}", "sandbox", id, "deleted", 1, "checkpoints", (int)l.n,
			 "snapshots_deleted", gone);
	free(l.ids);
	return 0;
}

int history_check_unused(struct engine *d, const char *snapshot, struct cove_err *err)
{
	char history[16];
	int seq;
	int n = store_snapshot_users(d->store, snapshot, history, &seq, err);
	if (n <= 0)
		return n;
	return err_set(err, COVE_ESTATE,
		       "snapshot %s is checkpoint %d of %s's history (%d checkpoint%s name it) and stays while a "
		       "history needs it: delete the histories that do (DELETE /v1/sandboxes/%s/checkpoints)",
		       snapshot, seq, history, n, n > 1 ? "s" : "", history);
}

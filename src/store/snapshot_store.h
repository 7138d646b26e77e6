/* The snapshot store: where a snapshot's files and manifest live, by
 * snapshot ID. An interface (struct snapshot_store_ops) with one
 * implementation today, the pool (snapshot_store_pool.c): a snapshot is
 * <pool>/snapshots/<id>/ holding files/ (a read-only tree of the storage
 * driver: a btrfs subvolume, or an overlay diff copy) and manifest.json.
 * An object store would keep the same entries remotely, with a local cache
 * for the files a restore or fork starts from, without a change to the
 * engine.
 *
 * Durability is the engine's to order (snapshots.c): take, then
 * files_durable, then the manifest; an entry without its manifest is
 * unfinished and sweep removes it. take, files_durable, write_manifest and
 * remove read nothing but their arguments and the store's constant fields,
 * so a worker thread may call them. */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "sys/storage.h"

struct snapshot_store;

struct snapshot_store_ops {
	/* A new, empty entry for id; -1 with err if it cannot be made. */
	int (*begin)(struct snapshot_store *s, const char *id, struct cove_err *err);
	/* The manifest written straight to its place before the files are
	 * taken (their commit makes its name durable on btrfs): the open
	 * file, for manifest_sync after the files, or -1 with err. */
	int (*manifest_create)(struct snapshot_store *s, const char *id, const char *text, struct cove_err *err);
	/* The manifest written whole to a temporary, synced, renamed into
	 * place, the entry synced: for an entry whose files are on disk. */
	int (*write_manifest)(struct snapshot_store *s, const char *id, const char *text, struct cove_err *err);
	/* A read-only copy of the tree root as id's files (root's writers
	 * frozen by the caller). On failure there are no files. */
	int (*take)(struct snapshot_store *s, const char *id, const char *root, struct cove_err *err);
	/* Every entry's files taken so far, on disk. */
	int (*files_durable)(struct snapshot_store *s, struct cove_err *err);
	/* The local tree a sandbox is made from (a writable copy of it). */
	void (*files_path)(struct snapshot_store *s, const char *id, char *buf, size_t cap);
	/* Whether id's files are there, and whether its manifest is too. */
	bool (*has_files)(struct snapshot_store *s, const char *id);
	bool (*is_complete)(struct snapshot_store *s, const char *id);
	/* Everything of the entry, whatever state a crash left it in. -errno. */
	int (*remove)(struct snapshot_store *s, const char *id);
	/* Remove every entry that keep(arg, id) does not want. */
	void (*sweep)(struct snapshot_store *s, bool (*keep)(void *arg, const char *id), void *arg);
	void (*close)(struct snapshot_store *s);
};

struct snapshot_store {
	const struct snapshot_store_ops *ops;
};

/* The pool's store, in <pool_dir>/snapshots (made if missing). */
int snapshot_store_pool_open(struct snapshot_store **ret, const char *pool_dir, enum storage_driver driver,
			     struct cove_err *err);

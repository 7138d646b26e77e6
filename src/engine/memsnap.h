/* Memory snapshots (memsnap.c): a sandbox's processes dumped with CRIU
 * next to its files, and restored in a new sandbox. */
#pragma once
#include "engine/engine.h"

/* 0 when sb (or, sb NULL, this host) can have memory snapshots, else a 409
 * that says why: no working CRIU (the self-test's reason), an external
 * sandbox, one not running. */
int memsnap_check(const struct engine *d, const struct sandbox *sb, struct cove_err *err);
/* Dump sb's process tree into dir (made here), leaving it running; sb's
 * cgroup is frozen by the caller and stays so; its connection to cove-init
 * is closed (sandbox_init_detach). */
int memsnap_dump(struct engine *d, struct sandbox *sb, const char *dir, struct cove_err *err);
/* Every image in dir, and dir, synced (with the rest of its file system). */
int memsnap_sync(const char *dir, struct cove_err *err);
/* Bring back the tree dumped in images as sb's (a new sandbox whose root
 * is a copy of the snapshot's files, whose cgroups exist), in two halves:
 * the begin starts criu (sb->restoring), the end waits for it, answering
 * the other restores' criu meanwhile, so that several restores run at
 * once. Every restore begun is ended. On success sb->init_pid is the
 * restored cove-init, a child of coved. */
int memsnap_restore_begin(struct engine *d, struct sandbox *sb, const char *images, struct cove_err *err);
int memsnap_restore_end(struct engine *d, struct sandbox *sb, struct cove_err *err);
/* At start, before what a crash left is cleaned up: wait (30 s at most
 * each) for the criu dumps a killed coved left working on this data root:
 * they would write into what is swept, or freeze a sandbox again after its
 * thaw. (A restore's criu died with that coved.) */
void memsnap_wait_leftovers(struct engine *d);
/* Find criu and run the self-test (a small sandbox snapshotted with memory
 * and restored): sets d->native_snapshot, or d->native_why. On the loop. */
void memsnap_selftest(struct engine *d);

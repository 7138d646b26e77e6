/* An archive with memory (memarchive.c): an archived sandbox's processes
 * dumped with CRIU into <pool>/archives/<id>, next to its files, and
 * restored by its wake, so that they go on where they were.
 *
 * Crash safety rests on one rule: images are used only from
 * <pool>/archives/<id>, which appears whole (written into <id>.part,
 * synced, renamed into place, the folder synced). What the row says
 * decides what they are worth at the next start (memarchive_on_loaded). */
#pragma once
#include <stdbool.h>

#include "engine/engine.h"

/* <pool>/archives/<id>: the committed images of sb's archive. */
void memarchive_dir(const struct engine *d, const char *id, char *buf, size_t cap);
/* Whether committed images of id's archive are there. */
bool memarchive_has(const struct engine *d, const char *id);

/* Whether sb's archive would save its processes, by mode
 * (ARCHIVE_MEMORY_*): it runs (or is paused), memory snapshots work here,
 * it is not external, and something runs in it besides cove-init (a
 * sandbox with nothing running has nothing to save: its archive stays a
 * plain one). When not, why goes into note (cap bytes); with
 * ARCHIVE_MEMORY_YES a reason that makes the archive impossible (no CRIU,
 * external) is also err's 409 and -1 is returned. 1: save, 0: don't. */
int memarchive_wanted(const struct engine *d, const struct sandbox *sb, int mode, char *note, size_t cap,
		      struct cove_err *err);
/* Dump sb's process tree (running or paused) into its committed images.
 * On success the cgroup stays frozen and cove-init's connection closed:
 * nothing of it runs again before the archive ends it. On failure nothing
 * of the images is left and sb is as it was (running or paused, attached). */
int memarchive_save(struct engine *d, struct sandbox *sb, struct cove_err *err);
/* After a memarchive_save whose archive could not be recorded: the images
 * go, sb is running (or paused, was_paused) and attached again. */
void memarchive_undo(struct engine *d, struct sandbox *sb, bool was_paused);
/* Remove id's images (and a half-written folder of them). */
void memarchive_drop(const struct engine *d, const char *id);
/* At load, for a row whose init is gone (alive false) or running: a
 * running or paused row whose init is gone but whose archive's images are
 * committed was being woken when coved died: it is archived again (the
 * next wake restores it); one whose init runs has stale images (an archive
 * that was not recorded, or a wake that was): they go. true when sb was
 * made archived. */
bool memarchive_on_loaded(struct engine *d, struct sandbox *sb, bool alive);
/* After every row is loaded: half-written image folders, and those of no
 * archived sandbox, go. */
void memarchive_sweep(struct engine *d);

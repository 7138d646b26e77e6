/* Spare sandbox roots: writable snapshots of the host image made ahead of
 * time by a worker thread, so that creating a sandbox renames one into place
 * instead of waiting for a btrfs snapshot (which commits a transaction:
 * about 1.5 ms idle, far more under write load). A spare is a pristine copy
 * of the immutable image, so spares left by a crash are simply reused. */
#pragma once
#include <stdbool.h>

#define SPARES_TARGET 4

/* Start the worker for <pool>/images/<image> with spares in <pool>/sandboxes.
 * Spares left by an earlier run are reused unless the image changed. */
int spares_start(const char *pool_dir, const char *image, bool image_changed);
/* Move a spare to dst (a path in the same directory tree). true if done;
 * false when none is ready (the caller snapshots the image itself). */
bool spares_take(const char *image, const char *dst);
void spares_stop(void);

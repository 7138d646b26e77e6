/* Disk limits and the pool's size (disk.c). */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

struct engine;
struct sandbox;
struct sandbox_spec;

/* At engine_open, after the pool: quotas (unless --no-disk-quota), and
 * for a loop-backed pool its growth check, every few seconds on the loop. */
int disk_open(struct engine *d, struct cove_err *err);
void disk_close(struct engine *d);
/* A create's disk: asked (the request named one, spec->disk) is a 400 when
 * the pool cannot limit, or below 16M; else spec->disk gets the default
 * (--default-disk) when unset, 0 when the pool cannot limit. */
int disk_check(const struct engine *d, struct sandbox_spec *spec, bool asked, struct cove_err *err);
/* Set sb's limit (spec.disk) on its subvolume: at every create, restore and
 * fork (a new subvolume has none of its own), and at load. */
int disk_limit_apply(const struct engine *d, const struct sandbox *sb, struct cove_err *err);
/* The same with a limit of bytes on sandbox id's subvolume (a warm pool's
 * sandbox handed out with a create's limit). */
int disk_limit_set(const struct engine *d, const char *id, uint64_t bytes, struct cove_err *err);
/* The bytes sb wrote itself (its qgroup's); -EOPNOTSUPP without quotas. */
int disk_usage(const struct engine *d, const struct sandbox *sb, uint64_t *ret_used);
/* capabilities' "disk": {limits, default, reason}. */
json_t *disk_capabilities_json(const struct engine *d);

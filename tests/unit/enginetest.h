/* An engine on a data root of its own, for the tests that drive the engine
 * with no server (test_engine.c, test_images.c). Needs root. */
#pragma once
#include <event2/event.h>
#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <sys/mount.h>
#include <unistd.h>

#include "engine/engine.h"

static inline int enginetest_remove(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

/* mkdtemp(root), then an engine on it (cove-init from next to the test's
 * binary's folder); 0, or -1 with err set. */
static inline int enginetest_open(struct engine *e, char *root, struct cove_err *err)
{
	char init_path[1024], self[1024];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = '\0';
	snprintf(init_path, sizeof(init_path), "%s/../cove-init", dirname(self));
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return -1;
	}
	snprintf(e->data_dir, sizeof(e->data_dir), "%s", root);
	e->base = event_base_new();
	engine_ctx = e;
	return engine_open(e, init_path, err);
}

/* The engine closed, its pool unmounted, root removed. */
static inline void enginetest_close(struct engine *e, const char *root)
{
	char pool[600];
	engine_close(e);
	snprintf(pool, sizeof(pool), "%s/pool", root);
	(void)umount2(pool, MNT_DETACH);
	(void)nftw(root, enginetest_remove, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	event_base_free(e->base);
}

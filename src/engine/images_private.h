/* Inside the engine's image code (images.c, images_store.c, image_jobs.c). */
#pragma once
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>

#include "engine/engine.h"
#include "image/image.h"

struct engine_images {
	struct image_store store;
	json_t *index; /* [entry], as index.json holds it (images.h) */
	char index_path[PATH_MAX];
	int jobs;     /* imports and pulls under way: no collection meanwhile */
	bool pending; /* a collection is owed (it could not run, or a deleting sandbox held a tree) */
};

/* The index entry ref names, or NULL with a 404 (or 400 when ambiguous). */
json_t *images_find(struct engine *d, const char *ref, struct cove_err *err);
/* The index written (a synced temporary, renamed). */
int images_index_save(struct engine_images *im, struct cove_err *err);

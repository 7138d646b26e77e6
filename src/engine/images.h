/* OCI images in the engine (images.c, image_jobs.c): the named images of
 * the image store (image/image.h), what a create needs of one, and imports
 * and pulls run by the cove-image helper.
 *
 * The store's blobs and layer trees are the helper's to write; which
 * images exist and their names are coved's, in <pool>/images/index.json
 * (one entry per image: its ID, the manifest's digest, its names, when it
 * came, its layer count, top chain id and config as JSON). The file is
 * replaced whole (a synced temporary, renamed), so a crash leaves the old
 * or the new one. An image the helper made but that no entry names (a
 * crash between) is garbage the next prune or delete collects.
 *
 * An image's users: sandboxes and snapshots whose spec names its ID, and
 * templates whose image resolves to it. An image with users is
 * not deleted (409). Blobs and layer trees no image, sandbox or snapshot
 * needs are removed after a delete or prune, under the store's import lock
 * (taken without waiting: an import under way defers the collection). */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "common/error.h"
#include "engine/engine.h"
#include "engine/output.h"

struct evbuffer;

/* At engine_open: the store opened, the index read. */
int images_open(struct engine *d, struct cove_err *err);
void images_close(struct engine *d);

/* What a create needs of an image: the tree under <pool>/images
 * (runtime_config.image) and its config. "host" is the built-in image. */
struct image_resolved {
	bool host;
	char id[80];        /* the manifest digest; "" for host */
	char image_dir[96]; /* "host-<fingerprint>" or "layers/<chain id hex>" */
	/* {"env": ["K=V"], "working_dir", "user", "entrypoint": [], "cmd": [],
	 * "exposed_ports": ["80/tcp"], "labels": {}}: a new reference; NULL
	 * for host. */
	json_t *config;
};
/* ref: "host", a name ("python:3.12", normalized as image/ref.h says),
 * an ID ("sha256:HEX") or a unique prefix of 12+ hex digits of one. 404
 * when no image matches. */
int image_resolve(struct engine *d, const char *ref, struct image_resolved *ret, struct cove_err *err);
void image_resolved_free(struct image_resolved *r);

/* Fill a new sandbox's spec from its image (s->image): image_dir, image_id
 * and, for an OCI image, what the spec leaves unset: env (the image's Env
 * under the request's), cwd (WorkingDir), user (User, its part before
 * ':'), start (Entrypoint + Cmd: launch.c runs it at create as the kept
 * process tagged "start"), and image_meta (exposed_ports, labels). */
int image_spec_apply(struct engine *d, struct sandbox_spec *s, struct cove_err *err);
/* A new root over an OCI image: the mount points the runtime needs (/dev,
 * /proc, /sys, /tmp) made in its upper layer where the image has none. */
int image_root_prepare(const struct sandbox_spec *s, const char *image, const char *subvol, struct cove_err *err);
/* The spec's image fields into its JSON, and back. (image: the image's
 * tree, <pool>/images/<image_dir>.) */
void image_spec_to_json(const struct sandbox_spec *s, json_t *j);
void image_spec_from_json(json_t *j, struct sandbox_spec *s);
/* [image JSON, newest first]. */
json_t *images_to_json(struct engine *d);
/* One image as JSON, with its users. */
int image_get(struct engine *d, const char *ref, json_t **ret, struct cove_err *err);
/* Delete an image with no users (409 otherwise); *ret: its JSON. */
int image_delete(struct engine *d, const char *ref, json_t **ret, struct cove_err *err);
/* Delete every image without users (all: named ones too, else only those
 * without a name), then collect; *ret: {"deleted": [IDs]}. */
int images_prune(struct engine *d, bool all, json_t **ret, struct cove_err *err);
/* The collection a delete or prune could not finish (an import under way,
 * a sandbox being deleted on a tree), when it can run now: after a job
 * and a sandbox's deletion. */
void images_collect_pending(struct engine *d);
/* A finished import or pull (the helper's "done" line): recorded with its
 * names (moved from any image that had them), *ret its JSON. */
int images_add(struct engine *d, const char *id, json_t *names, const char *source, json_t **ret, struct cove_err *err);
/* Number of users of image id (sandboxes, snapshots, templates). */
int image_users(struct engine *d, const char *id, json_t **ret_detail);

/* ---- image_jobs.c: imports and pulls through the cove-image helper ---- */

/* Events on a job's output: OUT_EVENT with event a struct image_event. */
struct image_event {
	json_t *json; /* {"type":"layer", digest, done, total, status}, or {"type":"image","image":{...}} */
};

struct image_job;
struct image_import_request {
	const char *name;   /* a name to give the image, or NULL */
	const char *select; /* which image of an archive holding several, or NULL */
};
/* An import of a tar that comes in pieces (image_import_data, then
 * image_import_end); out gets the events, the image last, then close. The
 * body is spooled to the pool, then the helper reads it. */
int image_import_start(struct engine *d, const struct image_import_request *rq, struct output *out,
		       struct image_job **ret, struct cove_err *err);
/* -1: the job failed (out was closed). */
int image_import_data(struct image_job *j, struct evbuffer *buf);
void image_import_end(struct image_job *j);
/* A pull of ref from its registry, with progress events on out. */
int image_pull_start(struct engine *d, const char *ref, struct output *out, struct cove_err *err);

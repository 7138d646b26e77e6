/* The image index's changes: add, delete, prune, and the collection of
 * blobs and layer trees nothing needs any more (images.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "engine/images.h"
#include "engine/images_private.h"
#include "engine/template.h"
#include "image/oci.h"
#include "image/ref.h"
#include "sys/storage.h"

static json_t *strv_json(char *const *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *config_json(const struct image_config *c)
{
	json_t *ports = json_array(), *labels = json_object();
	for (size_t i = 0; i < c->n_ports; i++) {
		char p[32];
		snprintf(p, sizeof(p), "%u/%s", (unsigned)c->ports[i].port, c->ports[i].proto);
		json_array_append_new(ports, json_string(p));
	}
	for (size_t i = 0; i < c->n_labels; i++)
		json_object_set_new(labels, c->label_keys[i], json_string(c->label_values[i]));
	return json_pack("{s:o, s:s?, s:s?, s:o, s:o, s:o, s:o}", "env", strv_json(c->env, c->n_env), "working_dir",
			 c->working_dir, "user", c->user, "entrypoint", strv_json(c->entrypoint, c->n_entrypoint),
			 "cmd", strv_json(c->cmd, c->n_cmd), "exposed_ports", ports, "labels", labels);
}

/* Templates standing on image id (their image, resolved now). */
static int templates_using_image(struct engine *d, const char *id)
{
	int n = 0;
	for (const struct template *t = d->templates; t; t = t->next) {
		struct image_resolved r;
		if (t->snapshot[0] || t->spec->external || image_resolve(d, t->spec->image, &r, NULL) < 0)
			continue;
		n += strcmp(r.id, id) == 0;
		image_resolved_free(&r);
	}
	return n;
}

static bool spec_names(json_t *spec, const char *id)
{
	const char *v = json_string_value(json_object_get(spec, "image_id"));
	return v && strcmp(v, id) == 0;
}

int image_users(struct engine *d, const char *id, json_t **ret_detail)
{
	json_t *sandboxes = json_array(), *snapshots = json_array();
	for (int i = 0; i < MAX_SANDBOXES; i++) {
		const struct sandbox *sb = d->sandboxes[i];
		/* One being deleted is gone for its users; its tree is kept
		 * until it is (collect's spec_trees). */
		if (sb && sb->state != SB_DELETING && strcmp(sb->spec.image_id, id) == 0)
			json_array_append_new(sandboxes, json_string(sb->id));
	}
	for (const struct snapshot *sn = d->snapshots; sn; sn = sn->next)
		if (spec_names(sn->spec, id))
			json_array_append_new(snapshots, json_string(sn->id));
	int templates = templates_using_image(d, id);
	int n = (int)(json_array_size(sandboxes) + json_array_size(snapshots)) + templates;
	if (ret_detail)
		*ret_detail = json_pack("{s:o, s:o, s:i}", "sandboxes", sandboxes, "snapshots", snapshots, "templates",
					templates);
	else {
		json_decref(sandboxes);
		json_decref(snapshots);
	}
	return n;
}

static json_t *entry_json(struct engine *d, json_t *e, bool users)
{
	json_t *j = json_deep_copy(e);
	if (users) {
		json_t *detail;
		int n = image_users(d, json_string_value(json_object_get(e, "id")), &detail);
		json_object_set_new(j, "users", detail);
		json_object_set_new(j, "in_use", json_boolean(n > 0));
	}
	return j;
}

json_t *images_to_json(struct engine *d)
{
	json_t *a = json_array(), *e;
	size_t n = json_array_size(d->images->index);
	for (size_t i = n; i-- > 0;) {
		e = json_array_get(d->images->index, i);
		json_array_append_new(a, entry_json(d, e, true));
	}
	return a;
}

int image_get(struct engine *d, const char *ref, json_t **ret, struct cove_err *err)
{
	json_t *e = images_find(d, ref, err);
	if (!e)
		return -1;
	*ret = entry_json(d, e, true);
	return 0;
}

/* Take names off every entry but keep. */
static void take_names(json_t *index, json_t *keep, json_t *names)
{
	size_t i, k, m;
	json_t *e, *n, *v;
	json_array_foreach(index, i, e)
	{
		if (e == keep)
			continue;
		json_t *have = json_object_get(e, "names");
		for (k = json_array_size(have); k-- > 0;) {
			v = json_array_get(have, k);
			json_array_foreach(names, m, n)
			{
				if (json_equal(n, v)) {
					json_array_remove(have, k);
					break;
				}
			}
		}
	}
}

static bool has_name_json(json_t *names, json_t *name)
{
	size_t i;
	json_t *v;
	json_array_foreach(names, i, v)
	{
		if (json_equal(v, name))
			return true;
	}
	return false;
}

static json_t *new_entry(const struct image_info *info, const char *source)
{
	return json_pack("{s:s, s:[], s:I, s:s, s:I, s:s, s:o}", "id", info->manifest, "names", "created_at",
			 (json_int_t)sandbox_now_ms(), "source", source, "layers", (json_int_t)info->n_layers,
			 "chain_id", info->chain_id, "config", config_json(&info->config));
}

int images_add(struct engine *d, const char *id, json_t *names, const char *source, json_t **ret, struct cove_err *err)
{
	struct engine_images *im = d->images;
	struct image_info info;
	if (image_open(&im->store, id, &info, err) < 0)
		return -1;
	json_t *e = images_find(d, id, NULL), *n;
	if (!e) {
		e = new_entry(&info, source);
		json_array_append_new(im->index, e);
	}
	image_info_free(&info);
	if (!e)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	size_t i;
	json_t *have = json_object_get(e, "names");
	json_array_foreach(names, i, n)
	{
		char full[600];
		struct image_ref r;
		if (!json_is_string(n) || image_ref_parse(json_string_value(n), &r, NULL) < 0 ||
		    image_ref_format(&r, full, sizeof(full)) < 0)
			continue;
		json_t *name = json_string(full);
		if (!has_name_json(have, name))
			json_array_append(have, name);
		json_t *one = json_pack("[o]", name);
		take_names(im->index, e, one);
		json_decref(one);
	}
	if (images_index_save(im, err) < 0)
		return -1;
	*ret = entry_json(d, e, true);
	return 0;
}

/* ---- collection ---- */

struct needed {
	char (*v)[DIGEST_STR_MAX];
	size_t n, cap;
};

static void need(struct needed *n, const char *digest)
{
	if (n->n == n->cap) {
		size_t cap = n->cap ? 2 * n->cap : 64;
		void *p = realloc(n->v, cap * sizeof(*n->v));
		if (!p)
			return;
		n->v = p;
		n->cap = cap;
	}
	snprintf(n->v[n->n++], DIGEST_STR_MAX, "%s", digest);
}

static bool needed_has(const struct needed *n, const char *hex)
{
	for (size_t i = 0; i < n->n; i++)
		if (strcmp(digest_hex(n->v[i]), hex) == 0)
			return true;
	return false;
}

/* What image id needs: its blobs (manifest, config, layers) and the
 * trees of each of its layer prefixes. -1 if it cannot be read (then
 * nothing is collected: better to keep garbage than lose an image). */
static int image_needs(struct engine_images *im, const char *id, struct needed *blobs, struct needed *trees)
{
	_cleanup_free_ char *buf = NULL;
	size_t len;
	struct oci_manifest m = { 0 };
	struct image_info info;
	if (blob_read_all(&im->store.blobs, id, OCI_DOC_MAX, &buf, &len, NULL) < 0 ||
	    oci_parse_manifest(buf, len, &m, NULL) < 0)
		return -1;
	need(blobs, id);
	need(blobs, m.config.digest);
	for (size_t i = 0; i < m.n_layers; i++)
		need(blobs, m.layers[i].digest);
	oci_manifest_free(&m);
	if (image_open(&im->store, id, &info, NULL) < 0)
		return -1;
	for (size_t i = 1; i <= info.config.n_diff_ids; i++) {
		char chain[DIGEST_STR_MAX];
		oci_chain_id(info.config.diff_ids, i, chain);
		need(trees, chain);
	}
	image_info_free(&info);
	return 0;
}

/* The layer trees sandboxes and snapshots stand on ("layers/HEX"). One
 * that a sandbox being deleted holds is collected once it is gone
 * (pending). */
static void spec_trees(struct engine *d, struct needed *trees)
{
	char digest[DIGEST_STR_MAX];
	for (int i = 0; i < MAX_SANDBOXES; i++) {
		const struct sandbox *sb = d->sandboxes[i];
		if (sb && strncmp(sb->spec.image_dir, "layers/", 7) == 0) {
			d->images->pending |= sb->state == SB_DELETING;
			snprintf(digest, sizeof(digest), "sha256:%s", sb->spec.image_dir + 7);
			need(trees, digest);
		}
	}
	for (const struct snapshot *sn = d->snapshots; sn; sn = sn->next)
		if (strncmp(sn->image_dir, "layers/", 7) == 0) {
			snprintf(digest, sizeof(digest), "sha256:%s", sn->image_dir + 7);
			need(trees, digest);
		}
}

static void sweep(struct engine *d, const char *dir, const struct needed *keep, bool trees)
{
	DIR *dh = opendir(dir);
	struct dirent *e;
	char path[PATH_MAX + 300];
	while (dh && (e = readdir(dh))) {
		if (e->d_name[0] == '.' || needed_has(keep, e->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		int r = trees ? storage_delete(d->pool.driver, path) : unlink(path) < 0 ? -errno : 0;
		if (r < 0)
			log_warn("images: remove '%s': %s", path, strerror(-r));
	}
	if (dh)
		closedir(dh);
}

/* Remove the blobs and trees no image, sandbox or snapshot needs: only
 * when no import or pull is under way (in coved or in a helper of another
 * run: the import lock, not waited for). */
static void collect(struct engine *d)
{
	struct engine_images *im = d->images;
	char dir[PATH_MAX + 32];
	struct needed blobs = { 0 }, trees = { 0 };
	_cleanup_close_ int fd = im->jobs ? -1 : image_try_lock_imports(&im->store);
	im->pending = true; /* until it is done */
	if (fd < 0)
		return; /* the next delete, prune, finished job or deletion collects */
	im->pending = false;
	/* The sweep passes over dot names: the scratch trees (.tmp-*) a
	 * build cut short by a kill of coved left, or a helper killed when
	 * its client went, went with the lock (image_try_lock_imports). */
	size_t i;
	json_t *e;
	bool ok = true;
	json_array_foreach(im->index, i, e)
	{
		if (image_needs(im, json_string_value(json_object_get(e, "id")), &blobs, &trees) < 0)
			ok = false;
	}
	spec_trees(d, &trees);
	if (ok) {
		snprintf(dir, sizeof(dir), "%s/blobs/sha256", im->store.images);
		sweep(d, dir, &blobs, false);
		sweep(d, im->store.layers, &trees, true);
	}
	free(blobs.v);
	free(trees.v);
}

void images_collect_pending(struct engine *d)
{
	if (d->images && d->images->pending && !d->images->jobs)
		collect(d);
}

static int remove_entry(struct engine *d, json_t *e, struct cove_err *err)
{
	struct engine_images *im = d->images;
	size_t i;
	json_t *v;
	json_array_foreach(im->index, i, v)
	{
		if (v == e) {
			json_array_remove(im->index, i);
			break;
		}
	}
	return images_index_save(im, err);
}

int image_delete(struct engine *d, const char *ref, json_t **ret, struct cove_err *err)
{
	json_t *e = images_find(d, ref, err), *detail;
	if (!e)
		return -1;
	const char *id = json_string_value(json_object_get(e, "id"));
	int n = image_users(d, id, &detail);
	if (n > 0) {
		_cleanup_free_ char *who = json_dumps(detail, JSON_COMPACT);
		json_decref(detail);
		return err_set(err, COVE_ESTATE, "image %s is in use (%s)", id, who ? who : "");
	}
	json_decref(detail);
	json_t *j = entry_json(d, e, false);
	if (remove_entry(d, e, err) < 0) {
		json_decref(j);
		return -1;
	}
	collect(d);
	*ret = j;
	return 0;
}

int images_prune(struct engine *d, bool all, json_t **ret, struct cove_err *err)
{
	struct engine_images *im = d->images;
	json_t *deleted = json_array();
	for (size_t i = json_array_size(im->index); i-- > 0;) {
		json_t *e = json_array_get(im->index, i);
		const char *id = json_string_value(json_object_get(e, "id"));
		if ((!all && json_array_size(json_object_get(e, "names")) > 0) || image_users(d, id, NULL) > 0)
			continue;
		json_array_append_new(deleted, json_string(id));
		json_array_remove(im->index, i);
	}
	if (json_array_size(deleted) && images_index_save(im, err) < 0) {
		json_decref(deleted);
		return -1;
	}
	collect(d);
	*ret = json_pack("{s:o}", "deleted", deleted);
	return 0;
}

/* Templates (template.h): named starting points, kept in state.db as one
 * JSON document each: {name, body, snapshot, warm, created_at, spec}. The
 * body is what a create inherits (the front end merges the create's own
 * fields over it); the spec, parsed from it by the front end when the
 * template was made, is what its warm pool's sandboxes are made with. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/images.h"
#include "engine/template.h"
#include "store/snapshot_store.h"
#include "store/store.h"
#include "sys/storage.h"

struct template *template_find(struct engine *d, const char *name)
{
	for (struct template *t = d->templates; t; t = t->next)
		if (name && strcmp(t->name, name) == 0)
			return t;
	return NULL;
}

struct template *template_lookup(struct engine *d, const char *name, struct cove_err *err)
{
	struct template *t = template_find(d, name);
	if (!t)
		err_set(err, COVE_ENOTFOUND, "no template '%s'", name ? name : "");
	return t;
}

static void template_free(struct engine *d, struct template *t)
{
	if (!t)
		return;
	warm_close(d, t->pool);
	json_decref(t->body);
	if (t->spec)
		sandbox_spec_free(t->spec);
	free(t->spec);
	free(t);
}

json_t *template_to_json(const struct template *t)
{
	json_t *j = json_deep_copy(t->body);
	json_object_set_new(j, "name", json_string(t->name));
	json_object_set_new(j, "from_snapshot", t->snapshot[0] ? json_string(t->snapshot) : json_null());
	json_object_set_new(j, "warm", json_integer(t->warm));
	json_object_set_new(j, "created_at", json_integer(t->created_at));
	json_object_set_new(j, "pool", warm_to_json(t->pool));
	return j;
}

/* The row: everything a restart needs to make it again. */
static char *template_row(const struct template *t)
{
	json_t *spec = sandbox_spec_to_json(t->spec);
	json_t *j = json_pack("{s:s, s:O, s:s, s:i, s:I, s:o}", "name", t->name, "body", t->body, "snapshot",
			      t->snapshot, "warm", t->warm, "created_at", (json_int_t)t->created_at, "spec", spec);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	return text;
}

/* The image a template stands on must exist now: "host", or an image of
 * the pool's (images.h: by name, ID or ID prefix). */
static int check_image(struct engine *d, const struct sandbox_spec *spec, struct cove_err *err)
{
	struct image_resolved r;
	if (spec->external)
		return 0;
	if (image_resolve(d, spec->image, &r, err) < 0)
		return -1;
	image_resolved_free(&r);
	return 0;
}

static int template_start_pool(struct engine *d, struct template *t, struct cove_err *err)
{
	return t->warm > 0 ? warm_open(d, t, t->warm, t->spec, &t->pool, err) : 0;
}

int template_add(struct engine *d, const char *name, json_t *body, const char *snapshot, int warm,
		 const struct sandbox_spec *spec, struct template **ret, struct cove_err *err)
{
	if (template_find(d, name))
		return err_set(err, COVE_ESTATE, "a template '%s' exists already", name);
	if (*snapshot && !snapshot_find(d, snapshot))
		return err_set(err, COVE_ENOTFOUND, "no snapshot '%s'", snapshot);
	if (!*snapshot && check_image(d, spec, err) < 0)
		return -1;
	struct template *t = calloc(1, sizeof(*t));
	if (!t || !(t->spec = calloc(1, sizeof(*t->spec))) || sandbox_spec_copy(spec, t->spec) < 0) {
		if (t)
			free(t->spec);
		free(t);
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	snprintf(t->name, sizeof(t->name), "%s", name);
	snprintf(t->snapshot, sizeof(t->snapshot), "%s", snapshot);
	t->body = json_incref(body);
	t->warm = warm;
	t->created_at = sandbox_now_ms();
	t->spec->expires_at = 0;
	_cleanup_free_ char *row = template_row(t);
	if (!row || store_put_template(d->store, t->name, row, err) < 0) {
		template_free(d, t);
		return row ? -1 : err_set(err, COVE_EINTERNAL, "out of memory");
	}
	t->next = d->templates;
	d->templates = t;
	if (template_start_pool(d, t, err) < 0)
		log_error("template %s: warm pool: %s", t->name, err->msg);
	memset(err, 0, sizeof(*err));
	*ret = t;
	return 0;
}

int template_delete(struct engine *d, struct template *t, struct cove_err *err)
{
	if (store_delete_template(d->store, t->name, err) < 0)
		return -1;
	for (struct template **p = &d->templates; *p; p = &(*p)->next)
		if (*p == t) {
			*p = t->next;
			break;
		}
	template_free(d, t);
	return 0;
}

void templates_close(struct engine *d)
{
	while (d->templates) {
		struct template *t = d->templates;
		d->templates = t->next;
		template_free(d, t);
	}
	warm_close(d, d->default_pool);
	d->default_pool = NULL;
}

struct load_ctx {
	struct engine *d;
	int failed;
};

static void load_one(void *arg, const struct store_template *row)
{
	struct load_ctx *ctx = arg;
	json_t *j = json_loads(row->data, 0, NULL), *body = json_object_get(j, "body");
	const char *snapshot = json_string_value(json_object_get(j, "snapshot"));
	_cleanup_free_ char *spec = json_dumps(json_object_get(j, "spec"), JSON_COMPACT);
	struct template *t = calloc(1, sizeof(*t));
	if (t)
		t->spec = calloc(1, sizeof(*t->spec));
	if (!t || !t->spec || !json_is_object(body) || !spec || sandbox_spec_from_json(spec, t->spec) < 0) {
		log_error("state.db: bad template row '%s'", row->name);
		ctx->failed++;
		if (t)
			free(t->spec);
		free(t);
		json_decref(j);
		return;
	}
	snprintf(t->name, sizeof(t->name), "%s", row->name);
	snprintf(t->snapshot, sizeof(t->snapshot), "%s", snapshot ? snapshot : "");
	t->body = json_incref(body);
	t->warm = (int)json_integer_value(json_object_get(j, "warm"));
	t->created_at = json_integer_value(json_object_get(j, "created_at"));
	json_decref(j);
	t->next = ctx->d->templates;
	ctx->d->templates = t;
}

int templates_load(struct engine *d, struct cove_err *err)
{
	struct load_ctx ctx = { .d = d };
	if (store_each_template(d->store, load_one, &ctx, err) < 0)
		return -1;
	for (struct template *t = d->templates; t; t = t->next) {
		struct cove_err e = { 0 };
		if (template_start_pool(d, t, &e) < 0)
			log_error("template %s: warm pool: %s", t->name, e.msg);
	}
	return 0;
}

int templates_check_snapshot_unused(struct engine *d, const char *snapshot, struct cove_err *err)
{
	for (struct template *t = d->templates; t; t = t->next)
		if (strcmp(t->snapshot, snapshot) == 0)
			return err_set(err, COVE_ESTATE, "snapshot %s is template '%s''s: delete the template first",
				       snapshot, t->name);
	return 0;
}

int template_create_cold(struct engine *d, struct template *t, struct sandbox_spec *spec, struct sandbox **ret,
			 struct cove_err *err)
{
	const struct snapshot *sn = t && t->snapshot[0] ? snapshot_find(d, t->snapshot) : NULL;
	char files[700] = "";
	if (t && t->snapshot[0] && !sn)
		return err_set(err, COVE_ENOTFOUND, "template '%s': its snapshot %s is gone", t->name, t->snapshot);
	if (sn) {
		/* The files are only meaningful over the image they were made on. */
		snprintf(spec->image_dir, sizeof(spec->image_dir), "%s", sn->image_dir);
		d->snapshot_store->ops->files_path(d->snapshot_store, sn->id, files, sizeof(files));
	}
	/* A restore drops its source's deadline and connection: these are the
	 * create's own, set again once it runs. */
	int64_t expires_at = spec->expires_at;
	bool ephemeral = spec->ephemeral;
	if (sandbox_create(d, spec, sn ? files : NULL, ret, err) < 0)
		return -1;
	if (sn && (ephemeral || expires_at)) {
		(*ret)->spec.ephemeral = ephemeral;
		if ((expires_at ? sandbox_set_expiry(d, *ret, expires_at, err) : sandbox_save(d, *ret, err)) < 0) {
			(void)sandbox_delete(d, *ret, NULL);
			return -1;
		}
	}
	return 0;
}

int template_create_sandbox(struct engine *d, struct template *t, struct sandbox_spec *spec, struct sandbox **ret,
			    bool *ret_pooled, struct cove_err *err)
{
	struct warm *w = t ? t->pool : d->default_pool;
	snprintf(spec->template, sizeof(spec->template), "%s", t ? t->name : "");
	int r = warm_take(d, w, spec, ret, err);
	*ret_pooled = r == 1;
	if (r != 0)
		return r < 0 ? -1 : 0;
	return template_create_cold(d, t, spec, ret, err);
}

/* The engine's images: the index of named images, resolution for create,
 * reference counts, delete and prune (images.h). */
#include "engine/images.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/io.h"
#include "common/log.h"
#include "engine/images_private.h"
#include "image/image.h"
#include "image/ref.h"
#include "sys/storage.h"
#include "sys/tree.h"

#define ID_PREFIX_MIN 12

static struct engine_images *imgs(struct engine *d)
{
	return d->images;
}

int images_index_save(struct engine_images *im, struct cove_err *err)
{
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", im->index_path);
	_cleanup_free_ char *text = json_dumps(im->index, JSON_COMPACT);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	int r = !text ? -ENOMEM : fd < 0 ? -errno : io_write_all(fd, text, strlen(text));
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	if (r == 0 && rename(tmp, im->index_path) < 0)
		r = -errno;
	if (r < 0)
		return err_sys(err, -r, "write '%s'", im->index_path);
	_cleanup_close_ int dfd = open(im->store.images, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0)
		return err_sys(err, errno, "sync '%s'", im->store.images);
	return 0;
}

int images_open(struct engine *d, struct cove_err *err)
{
	struct engine_images *im = calloc(1, sizeof(*im));
	if (!im)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	if (image_store_open(&im->store, &d->pool, err) < 0) {
		free(im);
		return -1;
	}
	snprintf(im->index_path, sizeof(im->index_path), "%s/index.json", im->store.images);
	char builds[PATH_MAX + 16];
	snprintf(builds, sizeof(builds), "%s/builds", im->store.images);
	(void)tree_remove(builds); /* the scratch files of builds a crash or restart cut short (build.h) */
	/* and the scratch trees of their layers (a build's are made in coved,
	 * so a kill of coved cuts them short): no prune needed to see them go.
	 * A helper of the previous run may still hold the lock (it goes on
	 * after coved's end): then the next collection takes them. */
	int lock = image_try_lock_imports(&im->store);
	if (lock >= 0)
		close(lock);
	json_error_t je;
	im->index = json_load_file(im->index_path, 0, &je);
	if (!im->index && access(im->index_path, F_OK) == 0)
		log_warn("images: '%s' unreadable (%s): no image is listed", im->index_path, je.text);
	if (!json_is_array(im->index)) {
		json_decref(im->index);
		im->index = json_array();
	}
	d->images = im;
	return 0;
}

void images_close(struct engine *d)
{
	struct engine_images *im = imgs(d);
	if (!im)
		return;
	json_decref(im->index);
	image_store_close(&im->store);
	free(im);
	d->images = NULL;
}

/* A name in the form it is stored in: image_ref_format's. */
static int normalize(const char *name, char *out, size_t n)
{
	struct image_ref r;
	return image_ref_parse(name, &r, NULL) < 0 || image_ref_format(&r, out, n) < 0 ? -1 : 0;
}

static bool has_name(json_t *e, const char *name)
{
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(e, "names"), i, v)
	{
		if (strcmp(json_string_value(v), name) == 0)
			return true;
	}
	return false;
}

static bool hex_prefix(const char *s)
{
	size_t n = strlen(s);
	if (n < ID_PREFIX_MIN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return false;
	return true;
}

/* The index entry ref names, or NULL with a 404 (or 400 when ambiguous). */
json_t *images_find(struct engine *d, const char *ref, struct cove_err *err)
{
	struct engine_images *im = imgs(d);
	char full[2 * IMAGE_REF_NAME_MAX];
	bool named = normalize(ref, full, sizeof(full)) == 0;
	const char *hex = strncmp(ref, "sha256:", 7) == 0 ? ref + 7 : ref;
	bool prefix = hex_prefix(hex);
	json_t *e, *found = NULL;
	size_t i;
	int matches = 0;
	json_array_foreach(im->index, i, e)
	{
		const char *id = json_string_value(json_object_get(e, "id"));
		if (strcmp(id, ref) == 0 || has_name(e, ref) || (named && has_name(e, full)))
			return e;
		if (prefix && strncmp(id + 7, hex, strlen(hex)) == 0) {
			found = e;
			matches++;
		}
	}
	if (matches == 1)
		return found;
	if (matches > 1)
		err_set(err, COVE_EINVAL, "'%s' is the start of more than one image's ID", ref);
	else
		err_set(err, COVE_ENOTFOUND, "no image '%s'", ref);
	return NULL;
}

int image_resolve(struct engine *d, const char *ref, struct image_resolved *ret, struct cove_err *err)
{
	memset(ret, 0, sizeof(*ret));
	if (!ref || !*ref || strcmp(ref, "host") == 0) {
		ret->host = true;
		snprintf(ret->image_dir, sizeof(ret->image_dir), "%s", d->host_image);
		return 0;
	}
	json_t *e = images_find(d, ref, err);
	if (!e)
		return -1;
	snprintf(ret->id, sizeof(ret->id), "%s", json_string_value(json_object_get(e, "id")));
	snprintf(ret->image_dir, sizeof(ret->image_dir), "layers/%s",
		 digest_hex(json_string_value(json_object_get(e, "chain_id"))));
	ret->config = json_incref(json_object_get(e, "config"));
	return 0;
}

void image_resolved_free(struct image_resolved *r)
{
	json_decref(r->config);
	r->config = NULL;
}

/* The image's Env under the spec's own. */
static void apply_env(struct sandbox_spec *s, json_t *env)
{
	size_t i;
	json_t *v;
	if (!s->env)
		s->env = json_object();
	json_array_foreach(env, i, v)
	{
		const char *kv = json_string_value(v), *eq = kv ? strchr(kv, '=') : NULL;
		if (!eq || eq == kv)
			continue;
		char name[256];
		snprintf(name, sizeof(name), "%.*s", (int)(eq - kv), kv);
		if (!json_object_get(s->env, name))
			json_object_set_new(s->env, name, json_string(eq + 1));
	}
}

static json_t *start_command(json_t *config)
{
	json_t *start = json_array(), *v;
	size_t i;
	json_array_foreach(json_object_get(config, "entrypoint"), i, v)
	{
		json_array_append(start, v);
	}
	json_array_foreach(json_object_get(config, "cmd"), i, v)
	{
		json_array_append(start, v);
	}
	return start;
}

int image_spec_apply(struct engine *d, struct sandbox_spec *s, struct cove_err *err)
{
	struct image_resolved r;
	/* A build's step (build.c) names its tree itself: a layer of an image
	 * being built, not an image of the index (no API request can leave
	 * image empty). */
	if (!s->image[0] && strncmp(s->image_dir, "layers/", 7) == 0)
		return 0;
	if (image_resolve(d, s->image, &r, err) < 0) {
		/* An unknown image in a create's body is bad input (400), not an
		 * unknown URL (404); err_set keeps a first error, so the code is
		 * changed in place, its message kept. */
		if (err->code == COVE_ENOTFOUND)
			err->code = COVE_EINVAL;
		return -1;
	}
	snprintf(s->image_dir, sizeof(s->image_dir), "%s", r.image_dir);
	snprintf(s->image_id, sizeof(s->image_id), "%s", r.id);
	if (r.host)
		return 0;
	json_t *c = r.config;
	const char *wd = json_string_value(json_object_get(c, "working_dir"));
	const char *user = json_string_value(json_object_get(c, "user"));
	apply_env(s, json_object_get(c, "env"));
	if (!s->cwd[0] && wd && wd[0] == '/')
		snprintf(s->cwd, sizeof(s->cwd), "%s", wd);
	if (!s->user[0] && user && *user)
		snprintf(s->user, sizeof(s->user), "%.*s", (int)strcspn(user, ":"), user);
	/* Entrypoint + Cmd: the start command, unless one was given (a
	 * template's, a request's); launch.c runs it at create. */
	json_t *start = start_command(c);
	if (!s->start && json_array_size(start))
		s->start = json_incref(start);
	json_decref(start);
	json_decref(s->image_meta);
	s->image_meta = json_pack("{s:O, s:O}", "exposed_ports", json_object_get(c, "exposed_ports"), "labels",
				  json_object_get(c, "labels"));
	image_resolved_free(&r);
	return s->image_meta ? 0 : err_set(err, COVE_EINTERNAL, "out of memory");
}

int image_root_prepare(const struct sandbox_spec *s, const char *image, const char *subvol, struct cove_err *err)
{
	static const struct {
		const char *name;
		mode_t mode;
	} dirs[] = { { "dev", 0755 }, { "proc", 0555 }, { "sys", 0555 }, { "tmp", 01777 } };
	if (!s->image_id[0])
		return 0;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char lower[PATH_MAX], upper[PATH_MAX];
		snprintf(lower, sizeof(lower), "%s/rootfs/%s", image, dirs[i].name);
		snprintf(upper, sizeof(upper), "%s/upper/root/%s", subvol, dirs[i].name);
		struct stat st;
		if (lstat(lower, &st) == 0)
			continue;
		if (mkdir(upper, dirs[i].mode) < 0 && errno != EEXIST)
			return err_sys(err, errno, "mkdir '%s'", upper);
		(void)chmod(upper, dirs[i].mode);
	}
	return 0;
}

void image_spec_to_json(const struct sandbox_spec *s, json_t *j)
{
	if (s->image_id[0])
		json_object_set_new(j, "image_id", json_string(s->image_id));
	const char *key;
	json_t *v;
	json_object_foreach(s->image_meta, key, v)
	{
		json_object_set(j, key, v);
	}
}

void image_spec_from_json(json_t *j, struct sandbox_spec *s)
{
	const char *id = json_string_value(json_object_get(j, "image_id"));
	snprintf(s->image_id, sizeof(s->image_id), "%s", id ? id : "");
	json_t *ports = json_object_get(j, "exposed_ports"), *labels = json_object_get(j, "labels");
	s->image_meta = NULL;
	if (json_is_array(ports) && json_is_object(labels))
		s->image_meta = json_pack("{s:O, s:O}", "exposed_ports", ports, "labels", labels);
}

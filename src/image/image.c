/* Image import (image.h): read the documents, verify every blob, then
 * unpack the layers bottom up into trees keyed by chain id. */
#include "image/image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "image/layer.h"
#include "image/source.h"
#include "sys/storage.h"

#define INDEX_DEPTH_MAX 4
#define TMP_PREFIX ".tmp-"

int image_store_open(struct image_store *s, const struct pool *pool, struct cove_err *err)
{
	s->pool = pool;
	s->progress = NULL;
	s->progress_arg = NULL;
	snprintf(s->images, sizeof(s->images), "%s/images", pool->dir);
	snprintf(s->layers, sizeof(s->layers), "%s/layers", s->images);
	if (blobs_open(&s->blobs, s->images, err) < 0)
		return -1;
	if (mkdir(s->layers, 0700) < 0 && errno != EEXIST) {
		blobs_close(&s->blobs);
		return err_sys(err, errno, "mkdir '%s'", s->layers);
	}
	return 0;
}

void image_store_close(struct image_store *s)
{
	blobs_close(&s->blobs);
}

void image_layer_path(const struct image_store *s, const char *chain_id, char out[PATH_MAX])
{
	snprintf(out, PATH_MAX, "%s/%s", s->layers, digest_hex(chain_id));
}

void image_report(const struct image_store *s, const char *digest, uint64_t done, uint64_t total, const char *status)
{
	if (s->progress)
		s->progress(s->progress_arg, &(struct image_progress){ digest, done, total, status });
}

static void strv_free(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

void image_info_free(struct image_info *info)
{
	image_config_free(&info->config);
	strv_free(info->tags);
	memset(info, 0, sizeof(*info));
}

struct import {
	struct image_store *s;
	struct source src;
	struct oci_manifest manifest;
	char manifest_digest[DIGEST_STR_MAX];
	struct image_config config;
	char **tags;
	size_t n_tags;
	/* Layer trees this import made, removed again if it fails. */
	char (*made)[PATH_MAX];
	size_t n_made;
};

static int read_blob(struct import *im, const char *digest, size_t max, char **buf, size_t *len, struct cove_err *err)
{
	return blob_read_all(&im->s->blobs, digest, max, buf, len, err);
}

/* The member name as a blob, read whole (a JSON document). */
static int read_member(struct import *im, const char *name, size_t max, char ret_digest[DIGEST_STR_MAX], char **buf,
		       size_t *len, struct cove_err *err)
{
	char digest[DIGEST_STR_MAX];
	if (source_blob(&im->src, name, digest, err) < 0 || read_blob(im, digest, max, buf, len, err) < 0)
		return -1;
	if (ret_digest)
		memcpy(ret_digest, digest, DIGEST_STR_MAX);
	return 0;
}

/* The blob a descriptor names, from the layout's blobs/ folder: it must
 * hash to the descriptor's digest and be of its size. */
static int fetch(struct import *im, const struct oci_descriptor *d, struct cove_err *err)
{
	char name[64 + DIGEST_STR_MAX], got[DIGEST_STR_MAX];
	snprintf(name, sizeof(name), "blobs/sha256/%s", digest_hex(d->digest));
	if (source_blob(&im->src, name, got, err) < 0)
		return -1;
	if (strcmp(got, d->digest) != 0)
		return err_set(err, COVE_EINVAL, "digest mismatch: %s holds %s", name, got);
	_cleanup_close_ int fd = blob_open(&im->s->blobs, got);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return err_sys(err, fd < 0 ? -fd : errno, "open blob %s", got);
	if (st.st_size != d->size)
		return err_set(err, COVE_EINVAL, "size mismatch: %s is %lld bytes, the descriptor says %lld", d->digest,
			       (long long)st.st_size, (long long)d->size);
	return 0;
}

static int read_config(struct import *im, const char *digest, struct cove_err *err)
{
	_cleanup_free_ char *buf = NULL;
	size_t len;
	if (read_blob(im, digest, OCI_CONFIG_MAX, &buf, &len, err) < 0 ||
	    oci_parse_config(buf, len, &im->config, err) < 0)
		return -1;
	const struct image_config *c = &im->config;
	if ((c->os && strcmp(c->os, IMAGE_OS) != 0) || (c->architecture && strcmp(c->architecture, IMAGE_ARCH) != 0))
		return err_set(err, COVE_EINVAL, "the image is for %s/%s, not %s/%s", c->os ? c->os : "?",
			       c->architecture ? c->architecture : "?", IMAGE_OS, IMAGE_ARCH);
	if (c->n_diff_ids != im->manifest.n_layers)
		return err_set(err, COVE_EINVAL, "the manifest has %zu layers, the config %zu diff ids",
			       im->manifest.n_layers, c->n_diff_ids);
	return 0;
}

/* The manifest the layout's index.json leads to, for linux/amd64. */
static int find_manifest(struct import *im, const char *ref, struct cove_err *err)
{
	_cleanup_free_ char *buf = NULL;
	size_t len;
	struct oci_descriptor d;
	if (read_member(im, "oci-layout", OCI_DOC_MAX, NULL, &buf, &len, err) < 0 ||
	    oci_parse_layout(buf, len, err) < 0)
		return -1;
	free(TAKE_PTR(buf));
	if (read_member(im, "index.json", OCI_DOC_MAX, NULL, &buf, &len, err) < 0 ||
	    oci_parse_index(buf, len, IMAGE_OS, IMAGE_ARCH, ref, &d, err) < 0)
		return -1;
	for (int depth = 0;; depth++) {
		free(TAKE_PTR(buf));
		if (fetch(im, &d, err) < 0 || read_blob(im, d.digest, OCI_DOC_MAX, &buf, &len, err) < 0)
			return -1;
		if (oci_media_kind(d.media_type) == OCI_KIND_MANIFEST)
			break;
		if (depth == INDEX_DEPTH_MAX)
			return err_set(err, COVE_EINVAL, "image index: nested more than %d deep", INDEX_DEPTH_MAX);
		if (oci_parse_index(buf, len, IMAGE_OS, IMAGE_ARCH, NULL, &d, err) < 0)
			return -1;
	}
	memcpy(im->manifest_digest, d.digest, DIGEST_STR_MAX);
	return oci_parse_manifest(buf, len, &im->manifest, err);
}

static int read_oci(struct import *im, const char *ref, struct cove_err *err)
{
	if (find_manifest(im, ref, err) < 0 || fetch(im, &im->manifest.config, err) < 0)
		return -1;
	for (size_t i = 0; i < im->manifest.n_layers; i++)
		if (fetch(im, &im->manifest.layers[i], err) < 0)
			return -1;
	if (ref && (!(im->tags = calloc(2, sizeof(char *))) || !(im->tags[0] = strdup(ref))))
		return err_sys(err, ENOMEM, "import");
	im->n_tags = ref ? 1 : 0;
	return read_config(im, im->manifest.config.digest, err);
}

/* A descriptor of a blob already in the store. */
static int describe(struct import *im, const char *media_type, const char *digest, struct oci_descriptor *d,
		    struct cove_err *err)
{
	_cleanup_close_ int fd = blob_open(&im->s->blobs, digest);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return err_sys(err, fd < 0 ? -fd : errno, "open blob %s", digest);
	snprintf(d->media_type, sizeof(d->media_type), "%s", media_type);
	memcpy(d->digest, digest, DIGEST_STR_MAX);
	d->size = st.st_size;
	return 0;
}

/* The OCI manifest of a docker archive's image, stored as a blob: it names
 * the image, and image_open reads it as any other. */
static int store_manifest(struct import *im, struct cove_err *err)
{
	_cleanup_free_ char *json = oci_manifest_json(&im->manifest);
	struct blob_writer w;
	bool fresh;
	if (!json)
		return err_sys(err, ENOMEM, "import");
	if (blob_writer_begin(&im->s->blobs, &w, OCI_DOC_MAX, err) < 0)
		return -1;
	if (blob_writer_write(&w, json, strlen(json), err) < 0) {
		blob_writer_abort(&w);
		return -1;
	}
	if (blob_writer_commit(&im->s->blobs, &w, NULL, -1, im->manifest_digest, &fresh, err) < 0)
		return -1;
	return fresh && source_note_added(&im->src, im->manifest_digest) < 0 ? err_sys(err, ENOMEM, "import") : 0;
}

static int read_docker(struct import *im, const char *ref, struct cove_err *err)
{
	_cleanup_free_ char *buf = NULL;
	size_t len;
	char digest[DIGEST_STR_MAX];
	struct docker_manifest dm = { 0 };
	if (read_member(im, "manifest.json", OCI_DOC_MAX, NULL, &buf, &len, err) < 0 ||
	    docker_parse_manifest(buf, len, ref, &dm, err) < 0)
		return -1;
	int r = -1;
	struct oci_manifest *m = &im->manifest;
	m->n_layers = dm.n_layers;
	if (!(m->layers = calloc(dm.n_layers, sizeof(*m->layers)))) {
		err_sys(err, ENOMEM, "import");
		goto out;
	}
	if (source_blob(&im->src, dm.config, digest, err) < 0 ||
	    describe(im, "application/vnd.oci.image.config.v1+json", digest, &m->config, err) < 0)
		goto out;
	for (size_t i = 0; i < dm.n_layers; i++)
		if (source_blob(&im->src, dm.layers[i], digest, err) < 0 ||
		    describe(im, "application/vnd.oci.image.layer.v1.tar", digest, &m->layers[i], err) < 0)
			goto out;
	if (read_config(im, m->config.digest, err) < 0 || store_manifest(im, err) < 0)
		goto out;
	im->tags = TAKE_PTR(dm.repo_tags);
	im->n_tags = dm.n_tags;
	r = 0;
out:
	docker_manifest_free(&dm);
	return r;
}

void image_remove_scratch(const struct image_store *s)
{
	char path[PATH_MAX + 256];
	DIR *d = opendir(s->layers);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0) {
			snprintf(path, sizeof(path), "%s/%s", s->layers, e->d_name);
			(void)storage_delete(s->pool->driver, path);
		}
	if (d)
		closedir(d);
}

int image_layer_make(const struct image_store *s, const char *below, const char *blob, const char *diff_id,
		     const char *tree, struct cove_err *err)
{
	enum storage_driver drv = s->pool->driver;
	char tmp[PATH_MAX + 64], rootfs[PATH_MAX + 80];
	snprintf(tmp, sizeof(tmp), "%s/" TMP_PREFIX "%s", s->layers, strrchr(tree, '/') + 1);
	snprintf(rootfs, sizeof(rootfs), "%s/rootfs", tmp);
	int r = below ? storage_snapshot(drv, below, tmp, false) : storage_create(drv, tmp);
	if (r < 0)
		return err_sys(err, -r, "make '%s'", tmp);
	if (!below && mkdir(rootfs, 0755) < 0) {
		(void)storage_delete(drv, tmp);
		return err_sys(err, errno, "mkdir '%s'", rootfs);
	}
	_cleanup_close_ int rootfd = open(rootfs, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int fd = blob_open(&s->blobs, blob);
	if (rootfd < 0 || fd < 0)
		err_sys(err, rootfd < 0 ? errno : -fd, "open");
	else if (layer_apply(rootfd, fd, diff_id, NULL, NULL, err) == 0 && syncfs(rootfd) < 0)
		err_sys(err, errno, "sync");
	if (!err->code && (r = storage_publish(drv, tmp, tree)) < 0 && r != -EEXIST)
		err_sys(err, -r, "publish '%s'", tree);
	if (err->code || r == -EEXIST)
		(void)storage_delete(drv, tmp);
	return err->code ? -1 : 0;
}

int image_host_layer_make(const struct image_store *s, const char *host_tree, const char *tree, struct cove_err *err)
{
	enum storage_driver drv = s->pool->driver;
	char tmp[PATH_MAX + 64], mark[PATH_MAX + 96];
	if (storage_is_tree(drv, tree) == 1)
		return 0;
	snprintf(tmp, sizeof(tmp), "%s/" TMP_PREFIX "%s", s->layers, strrchr(tree, '/') + 1);
	snprintf(mark, sizeof(mark), "%s/" IMAGE_HOST_MARK, tmp);
	int r = storage_snapshot(drv, host_tree, tmp, false);
	if (r < 0)
		return err_sys(err, -r, "snapshot '%s'", host_tree);
	_cleanup_close_ int fd = open(mark, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 || syncfs(fd) < 0)
		err_sys(err, errno, "mark '%s'", tmp);
	else if ((r = storage_publish(drv, tmp, tree)) < 0 && r != -EEXIST)
		err_sys(err, -r, "publish '%s'", tree);
	if (err->code || r == -EEXIST)
		(void)storage_delete(drv, tmp);
	return err->code ? -1 : 0;
}

bool image_tree_host_layers(const char *tree)
{
	const char *base = strrchr(tree, '/');
	char mark[PATH_MAX + 32];
	if (strncmp(base ? base + 1 : tree, "host-", 5) == 0)
		return true;
	snprintf(mark, sizeof(mark), "%s/" IMAGE_HOST_MARK, tree);
	return access(mark, F_OK) == 0;
}

/* Layer i applied onto a scratch copy of the tree below (or an empty
 * one), published as the tree of its chain id. */
static int unpack_one(struct import *im, size_t i, const char *below, const char *tree, struct cove_err *err)
{
	const struct oci_descriptor *l = &im->manifest.layers[i];
	struct cove_err lerr = { 0 };
	if (image_layer_make(im->s, below, l->digest, im->config.diff_ids[i], tree, &lerr) < 0)
		return err_set(err, lerr.code, "layer %zu of %zu (%s): %s", i + 1, im->manifest.n_layers, l->digest,
			       lerr.msg);
	return 0;
}

static int unpack_layers(struct import *im, char top[DIGEST_STR_MAX], struct cove_err *err)
{
	char below[PATH_MAX] = "", tree[PATH_MAX];
	if (!(im->made = calloc(im->manifest.n_layers, sizeof(*im->made))))
		return err_sys(err, ENOMEM, "import");
	for (size_t i = 0; i < im->manifest.n_layers; i++) {
		oci_chain_id(im->config.diff_ids, i + 1, top);
		image_layer_path(im->s, top, tree);
		const struct oci_descriptor *l = &im->manifest.layers[i];
		if (storage_is_tree(im->s->pool->driver, tree) != 1) {
			if (unpack_one(im, i, *below ? below : NULL, tree, err) < 0)
				return -1;
			memcpy(im->made[im->n_made++], tree, PATH_MAX);
		}
		image_report(im->s, l->digest, (uint64_t)l->size, (uint64_t)l->size, "unpacked");
		memcpy(below, tree, PATH_MAX);
	}
	return 0;
}

/* A blob the image refers to. */
static bool referenced(const struct import *im, const char *digest)
{
	if (strcmp(digest, im->manifest_digest) == 0 || strcmp(digest, im->manifest.config.digest) == 0)
		return true;
	for (size_t i = 0; i < im->manifest.n_layers; i++)
		if (strcmp(digest, im->manifest.layers[i].digest) == 0)
			return true;
	return false;
}

/* Drop what the import added that the image does not need: on failure
 * everything, on success the archive's other members. */
static void drop_added(struct import *im, bool failed)
{
	for (size_t i = 0; failed && i < im->n_made; i++)
		(void)storage_delete(im->s->pool->driver, im->made[i]);
	for (size_t i = 0; i < im->src.n_added; i++)
		if (failed || !referenced(im, im->src.added[i]))
			(void)blob_remove(&im->s->blobs, im->src.added[i]);
}

/* After the documents were read (r: how that went): the layers unpacked,
 * what is not needed dropped, ret filled. */
static int finish(struct import *im, int r, struct image_info *ret, struct cove_err *err)
{
	char top[DIGEST_STR_MAX];
	if (r == 0)
		r = unpack_layers(im, top, err);
	drop_added(im, r < 0);
	if (r < 0)
		return -1;
	/* The config and tags move to ret. */
	*ret = (struct image_info){
		.n_layers = im->manifest.n_layers, .config = im->config, .tags = im->tags, .n_tags = im->n_tags
	};
	im->tags = NULL;
	memset(&im->config, 0, sizeof(im->config));
	memcpy(ret->manifest, im->manifest_digest, DIGEST_STR_MAX);
	memcpy(ret->config_digest, im->manifest.config.digest, DIGEST_STR_MAX);
	memcpy(ret->chain_id, top, DIGEST_STR_MAX);
	image_layer_path(im->s, top, ret->tree);
	return 0;
}

static int import_source(struct import *im, const char *ref, struct image_info *ret, struct cove_err *err)
{
	int r = source_has(&im->src, "oci-layout") ? read_oci(im, ref, err)
		: source_has(&im->src, "manifest.json")
			? read_docker(im, ref, err)
			: err_set(err, COVE_EINVAL,
				  "neither an OCI image layout (oci-layout) nor a docker archive "
				  "(manifest.json)");
	return finish(im, r, ret, err);
}

static void import_free(struct import *im)
{
	source_free(&im->src);
	oci_manifest_free(&im->manifest);
	image_config_free(&im->config);
	strv_free(im->tags);
	free(im->made);
}

/* Serialize imports: each removes the scratch trees it finds, which only a
 * crashed import can have left while this lock is held. */
int image_lock_imports(struct image_store *s, struct cove_err *err)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/import.lock", s->images);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) < 0) {
		err_sys(err, errno, "lock '%s'", path);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	image_remove_scratch(s);
	return fd;
}

int image_try_lock_imports(struct image_store *s)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/import.lock", s->images);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return -1;
	}
	if (fd >= 0)
		image_remove_scratch(s);
	return fd;
}

static int import_with(struct image_store *s, const char *path, int tar_fd, const char *ref, struct image_info *ret,
		       struct cove_err *err)
{
	_cleanup_close_ int lock = image_lock_imports(s, err);
	if (lock < 0)
		return -1;
	struct import im = { .s = s };
	int r;
	if (path)
		r = source_open_dir(&im.src, &s->blobs, path, err);
	else
		r = source_open_tar(&im.src, &s->blobs, tar_fd, err);
	if (r == 0)
		r = import_source(&im, ref, ret, err);
	else
		drop_added(&im, true);
	import_free(&im);
	return r;
}

int image_import_tar_fd(struct image_store *s, int fd, const char *ref, struct image_info *ret, struct cove_err *err)
{
	return import_with(s, NULL, fd, ref, ret, err);
}

int image_import_path(struct image_store *s, const char *path, const char *ref, struct image_info *ret,
		      struct cove_err *err)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return err_sys(err, errno, "'%s'", path);
	if (S_ISDIR(st.st_mode))
		return import_with(s, path, -1, ref, ret, err);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_sys(err, errno, "open '%s'", path);
	return import_with(s, NULL, fd, ref, ret, err);
}

int image_finish_stored(struct image_store *s, struct source *src, const char *manifest, const char *tag,
			struct image_info *ret, struct cove_err *err)
{
	struct import im = { .s = s, .src = *src };
	*src = (struct source){ .dirfd = -1 };
	_cleanup_free_ char *buf = NULL;
	size_t len;
	memcpy(im.manifest_digest, manifest, DIGEST_STR_MAX);
	int r = read_blob(&im, manifest, OCI_DOC_MAX, &buf, &len, err) < 0 ||
				oci_parse_manifest(buf, len, &im.manifest, err) < 0 ||
				read_config(&im, im.manifest.config.digest, err) < 0
			? -1
			: 0;
	if (r == 0 && tag && (!(im.tags = calloc(2, sizeof(char *))) || !(im.tags[0] = strdup(tag))))
		r = err_sys(err, ENOMEM, "pull");
	im.n_tags = im.tags ? 1 : 0;
	r = finish(&im, r, ret, err);
	import_free(&im);
	return r;
}

int image_open(struct image_store *s, const char *manifest, struct image_info *ret, struct cove_err *err)
{
	struct import im = { .s = s, .src = { .dirfd = -1 } };
	_cleanup_free_ char *buf = NULL;
	size_t len;
	int r = -1;
	if (!blob_exists(&s->blobs, manifest)) {
		err_set(err, COVE_ENOTFOUND, "no image %s", manifest);
		goto out;
	}
	if (read_blob(&im, manifest, OCI_DOC_MAX, &buf, &len, err) < 0 ||
	    oci_parse_manifest(buf, len, &im.manifest, err) < 0 || read_config(&im, im.manifest.config.digest, err) < 0)
		goto out;
	*ret = (struct image_info){ .n_layers = im.manifest.n_layers };
	memcpy(ret->manifest, manifest, DIGEST_STR_MAX);
	memcpy(ret->config_digest, im.manifest.config.digest, DIGEST_STR_MAX);
	oci_chain_id(im.config.diff_ids, im.config.n_diff_ids, ret->chain_id);
	image_layer_path(s, ret->chain_id, ret->tree);
	if (storage_is_tree(s->pool->driver, ret->tree) != 1) {
		err_set(err, COVE_ENOTFOUND, "image %s: its tree %s is missing", manifest, ret->tree);
		goto out;
	}
	ret->config = im.config;
	memset(&im.config, 0, sizeof(im.config));
	r = 0;
out:
	import_free(&im);
	return r;
}

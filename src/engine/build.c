/* Dockerfile builds, on the engine's loop: the context's intake, the
 * steps in order, a RUN's sandbox and output, the image at the end
 * (build.h). File work runs on a worker thread (build_fs.c), one job at a
 * time; the loop touches b->job only when none runs. */
#include "engine/build.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/io.h"
#include "common/log.h"
#include "engine/build_fs.h"
#include "engine/images.h"
#include "engine/images_private.h"
#include "engine/process.h"
#include "engine/template.h"
#include "image/ref.h"
#include "sys/storage.h"

#define LAYER_TAR "application/vnd.oci.image.layer.v1.tar"
#define RUN_MEMORY (2ull << 30)

enum job_kind { JOB_UNPACK, JOB_BASE, JOB_COPY, JOB_MKDIR, JOB_RUN };

struct build_job {
	enum job_kind kind;
	struct build_copy copy;
	char path[PATH_MAX];      /* JOB_MKDIR: the folder; JOB_BASE: the host image's tree */
	char below[PATH_MAX];     /* the tree below, or "" */
	char subvol[PATH_MAX];    /* JOB_RUN: the sandbox's subvolume */
	char image[PATH_MAX];     /* JOB_RUN: the tree it ran on */
	char key[DIGEST_STR_MAX]; /* JOB_RUN: its cache key */
	bool host_layers;         /* JOB_RUN: its sandbox had the host's /usr and /opt */
	char chown[256];          /* JOB_COPY: --chown, expanded */
	char parent[DIGEST_STR_MAX];
	struct build_tar tar;
	char chain[DIGEST_STR_MAX];
	bool made;
	int spool_fd; /* JOB_UNPACK */
	struct cove_err err;
};

struct build {
	struct engine *d;
	struct output *out; /* NULL once the client is gone */
	struct build_fs fs;
	int spool_fd;
	struct dockerfile df;
	size_t step;
	json_t *build_args; /* given */
	json_t *args;       /* declared ARGs: name -> value (or null) */
	json_t *outer;      /* the ARGs declared before FROM (FROM's own) */
	size_t from_step;   /* FROM's index */
	json_t *env;        /* ["K=V"] */
	char workdir[PATH_MAX], user[256];
	json_t *cmd, *entrypoint, *ports, *labels;
	bool cmd_set;
	char chain[DIGEST_STR_MAX]; /* the top layer's, "" for none */
	json_t *diff_ids, *layers, *made;
	char tag[320], dockerfile[PATH_MAX];
	char sb_id[16];        /* a RUN's sandbox, or "" */
	struct output run_out; /* its exec's output */
	int run_status;
	bool running, in_worker, cancelled;
	bool from_host; /* FROM host: the first layer's tree is made before the first step */
	struct build_job job;
};

static void advance(struct build *b);

/* err's message after "line N: WHAT: ". */
static int err_prefix(struct cove_err *err, const char *what, int line)
{
	char msg[sizeof(err->msg)];
	int code = err->code;
	snprintf(msg, sizeof(msg), "%s", err->msg);
	err->code = 0; /* err_set keeps a first error */
	return err_set(err, code, "line %d: %s: %s", line, what, msg);
}

static void emit(struct build *b, json_t *ev)
{
	if (b->out && ev) {
		struct image_event e = { ev };
		output_write(b->out, &(struct out_event){ .type = OUT_EVENT, .event = &e });
	}
	json_decref(ev);
}

static void delete_sandbox(struct build *b)
{
	struct sandbox *sb = b->sb_id[0] ? sandbox_find(b->d, b->sb_id) : NULL;
	struct cove_err err = { 0 };
	if (sb && sb->state != SB_DELETING && sandbox_delete(b->d, sb, &err) < 0)
		log_warn("build: delete sandbox %s: %s", b->sb_id, err.msg);
	b->sb_id[0] = '\0';
}

/* The end, whatever it is: no sandbox, no scratch file; after a failure
 * no layer this build made. */
static void teardown(struct build *b, bool failed)
{
	size_t i;
	json_t *v;
	delete_sandbox(b);
	json_array_foreach(failed ? b->made : NULL, i, v)
	{
		char tree[PATH_MAX];
		image_layer_path(&b->d->images->store, json_string_value(v), tree);
		if (storage_delete(b->d->pool.driver, tree) < 0)
			log_warn("build: could not delete layer %s", tree);
	}
	build_fs_remove(&b->fs);
	if (b->spool_fd >= 0)
		close(b->spool_fd);
	dockerfile_free(&b->df);
	json_decref(b->build_args);
	json_decref(b->args);
	json_decref(b->outer);
	json_decref(b->env);
	json_decref(b->cmd);
	json_decref(b->entrypoint);
	json_decref(b->ports);
	json_decref(b->labels);
	json_decref(b->diff_ids);
	json_decref(b->layers);
	json_decref(b->made);
	b->d->images->jobs--;
	free(b);
}

static void fail(struct build *b, const struct cove_err *err)
{
	if (b->out)
		output_close(b->out, err);
	b->out = NULL;
	teardown(b, true);
}

/* ---- the client ---- */

static void build_cancel(void *arg)
{
	struct build *b = arg;
	b->out = NULL;
	b->cancelled = true;
	if (b->running) {
		b->running = false;
		output_cancel(&b->run_out); /* kills the RUN: its output hears no more */
	}
	if (!b->in_worker)
		teardown(b, true);
}

/* A client that lags holds the RUN's pipes (its output waits in them). */
static void build_pause(void *arg)
{
	struct build *b = arg;
	if (b->running)
		output_pause(&b->run_out);
}

static void build_resume(void *arg)
{
	struct build *b = arg;
	if (b->running)
		output_resume(&b->run_out);
}

static const struct output_producer build_producer = { .pause = build_pause,
						       .resume = build_resume,
						       .cancel = build_cancel };

int build_start(struct engine *d, const struct build_request *rq, struct output *out, struct build **ret,
		struct cove_err *err)
{
	struct image_ref parsed;
	if (rq->tag && image_ref_parse(rq->tag, &parsed, err) < 0)
		return -1;
	struct build *b = calloc(1, sizeof(*b));
	if (!b)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	b->d = d;
	b->spool_fd = -1;
	d->images->jobs++; /* no collection while it runs */
	snprintf(b->tag, sizeof(b->tag), "%s", rq->tag ? rq->tag : "");
	snprintf(b->dockerfile, sizeof(b->dockerfile), "%s", rq->dockerfile ? rq->dockerfile : "Dockerfile");
	b->build_args = rq->build_args ? json_deep_copy(rq->build_args) : json_object();
	b->args = json_object();
	b->env = json_array();
	b->ports = json_object();
	b->labels = json_object();
	b->diff_ids = json_array();
	b->layers = json_array();
	b->made = json_array();
	if (build_fs_open(&b->fs, &d->images->store, err) < 0 ||
	    (b->spool_fd = open(b->fs.dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) < 0) {
		if (!err->code)
			err_sys(err, errno, "spool in '%s'", b->fs.dir);
		teardown(b, true);
		return -1;
	}
	b->out = out;
	output_attach(out, &build_producer, b);
	*ret = b;
	return 0;
}

int build_data(struct build *b, struct evbuffer *buf)
{
	while (!b->cancelled && evbuffer_get_length(buf) > 0) {
		int n = evbuffer_write(buf, b->spool_fd);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			struct cove_err err = { 0 };
			err_sys(&err, errno, "spool the build context");
			fail(b, &err);
			return -1;
		}
	}
	return 0;
}

/* ---- worker jobs ---- */

/* The entry is written in the build's scratch folder, then renamed into
 * place: one a kill cuts short is removed with the folder at the next
 * start (images_open). */
static void run_cache_save(const struct build_fs *fs, const struct build_job *j)
{
	char dir[PATH_MAX], path[PATH_MAX + 80], tmp[PATH_MAX + 96];
	snprintf(dir, sizeof(dir), "%s/build-cache", fs->store->images);
	snprintf(path, sizeof(path), "%s/%s", dir, digest_hex(j->key));
	snprintf(tmp, sizeof(tmp), "%s/cache-entry", fs->dir);
	(void)mkdir(dir, 0700);
	_cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || io_write_all(fd, j->tar.diff_id, strlen(j->tar.diff_id)) < 0 || rename(tmp, path) < 0)
		(void)unlink(tmp);
}

static void job_work(void *arg)
{
	struct build *b = arg;
	struct build_job *j = &b->job;
	const char *below = j->below[0] ? j->below : NULL;
	int r = 0;
	switch (j->kind) {
	case JOB_UNPACK:
		r = build_fs_unpack(&b->fs, j->spool_fd, &j->err);
		break;
	case JOB_BASE:
		r = build_fs_host_base(&b->fs, j->path, j->chain, &j->err);
		break;
	case JOB_COPY:
		j->copy.below = below;
		r = build_fs_copy(&b->fs, &j->copy, &j->tar, &j->err);
		break;
	case JOB_MKDIR:
		r = build_fs_mkdir(&b->fs, j->path, below, &j->tar, &j->err);
		break;
	case JOB_RUN:
		r = build_fs_changes(&b->fs, j->subvol, j->image, j->host_layers, &j->tar, &j->err);
		break;
	}
	if (r == 0 && j->kind != JOB_UNPACK && j->tar.diff_id[0])
		r = build_fs_commit(&b->fs, j->parent, j->tar.diff_id, j->chain, &j->made, &j->err);
	if (r == 0 && j->kind == JOB_RUN)
		run_cache_save(&b->fs, j);
}

static void after_unpack(struct build *b);

/* A layer on top: the image's diff ids and manifest layers grow. */
static void push_layer(struct build *b, const char *diff_id, int64_t size, const char *chain, bool made)
{
	snprintf(b->chain, sizeof(b->chain), "%s", chain);
	json_array_append_new(b->diff_ids, json_string(diff_id));
	json_array_append_new(b->layers, json_pack("{s:s, s:s, s:I}", "mediaType", LAYER_TAR, "digest", diff_id, "size",
						   (json_int_t)size));
	if (made)
		json_array_append_new(b->made, json_string(chain));
}

static void step_done(struct build *b, bool layer, bool cached)
{
	json_t *ev = json_pack("{s:s, s:I}", "type", "step_done", "step", (json_int_t)b->step + 1);
	if (layer) {
		json_object_set_new(ev, "cached", json_boolean(cached));
		json_object_set_new(ev, "layer", json_string(b->chain));
	}
	emit(b, ev);
	b->step++;
}

static void job_done(void *arg)
{
	struct build *b = arg;
	struct build_job *j = &b->job;
	b->in_worker = false;
	if (j->kind == JOB_COPY)
		dockerfile_strv_free(j->copy.srcs);
	j->copy.srcs = NULL;
	if (j->kind == JOB_RUN)
		delete_sandbox(b);
	if (b->cancelled) {
		if (j->made)
			json_array_append_new(b->made, json_string(j->chain));
		teardown(b, true);
		return;
	}
	if (j->err.code) {
		fail(b, &j->err);
		return;
	}
	if (j->kind == JOB_UNPACK) {
		after_unpack(b);
		return;
	}
	if (j->kind == JOB_BASE) {
		advance(b);
		return;
	}
	bool layer = j->tar.diff_id[0] != '\0';
	if (layer)
		push_layer(b, j->tar.diff_id, j->tar.size, j->chain, j->made);
	step_done(b, true, !j->made);
	advance(b);
}

static int job_start(struct build *b, enum job_kind kind, struct cove_err *err)
{
	struct build_job *j = &b->job;
	j->kind = kind;
	memset(&j->err, 0, sizeof(j->err));
	memset(&j->tar, 0, sizeof(j->tar));
	j->made = false;
	snprintf(j->parent, sizeof(j->parent), "%s", b->chain);
	if (b->chain[0])
		image_layer_path(&b->d->images->store, b->chain, j->below);
	else
		j->below[0] = '\0';
	if (worker_start(b->d->base, job_work, job_done, b, err) < 0)
		return -1;
	b->in_worker = true;
	return 0;
}

void build_end(struct build *b)
{
	struct cove_err err = { 0 };
	if (b->cancelled)
		return;
	if (lseek(b->spool_fd, 0, SEEK_SET) < 0) {
		err_sys(&err, errno, "rewind the build context");
		fail(b, &err);
		return;
	}
	b->job.spool_fd = b->spool_fd;
	if (job_start(b, JOB_UNPACK, &err) < 0)
		fail(b, &err);
}

/* ---- variables ---- */

static const char *lookup(void *arg, const char *name)
{
	struct build *b = arg;
	size_t i, n = strlen(name);
	json_t *v;
	json_array_foreach(b->env, i, v)
	{
		const char *kv = json_string_value(v);
		if (strncmp(kv, name, n) == 0 && kv[n] == '=')
			return kv + n + 1;
	}
	return json_string_value(json_object_get(b->args, name));
}

/* s expanded; NULL (err set, naming the line) when malformed. */
static char *expand(struct build *b, const char *s, struct cove_err *err)
{
	char *r = dockerfile_expand(s, lookup, b);
	if (!r)
		err_set(err, COVE_EINVAL, "line %d: a malformed ${...} in '%.80s'", b->df.v[b->step].line, s);
	return r;
}

static void env_set(json_t *env, const char *kv)
{
	size_t i, n = strcspn(kv, "=");
	json_t *v;
	json_array_foreach(env, i, v)
	{
		if (strncmp(json_string_value(v), kv, n + 1) == 0) {
			json_array_set_new(env, i, json_string(kv));
			return;
		}
	}
	json_array_append_new(env, json_string(kv));
}

/* An absolute, clean path: p, or p under the workdir. */
static int abs_path(struct build *b, const char *p, char *out, size_t n, struct cove_err *err)
{
	char joined[PATH_MAX * 2];
	snprintf(joined, sizeof(joined), "%s/%s", *p == '/' ? "" : b->workdir, p);
	out[0] = '/';
	if (dockerfile_clean_path(joined, out + 1, n - 1) < 0)
		return err_set(err, COVE_EINVAL, "line %d: bad path '%s'", b->df.v[b->step].line, p);
	return 0;
}

static int arg_step(struct build *b, const struct df_instr *in, struct cove_err *err)
{
	const char *a = in->args[0], *eq = strchr(a, '=');
	char name[256];
	snprintf(name, sizeof(name), "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
	json_t *given = json_object_get(b->build_args, name), *outer = json_object_get(b->outer, name);
	if (given || (!eq && json_is_string(outer))) { /* ARG NAME after FROM: the value from before it */
		json_object_set(b->args, name, given ? given : outer);
		return 0;
	}
	char *v = eq ? expand(b, eq + 1, err) : NULL;
	if (eq && !v)
		return -1;
	json_object_set_new(b->args, name, v ? json_string(v) : json_null());
	free(v);
	return 0;
}

static int from_image(struct build *b, const char *ref, struct cove_err *err);
static int put_text(struct build *b, const char *text, char digest[DIGEST_STR_MAX], int64_t *size,
		    struct cove_err *err);

/* FROM host: the host image as the first layer (image/image.h), a blob
 * that names it; its tree is made before the first step (JOB_BASE). The
 * host's /usr and /opt are not in it: they are layered in at run time. */
static int from_host(struct build *b, struct cove_err *err)
{
	char text[128], digest[DIGEST_STR_MAX];
	int64_t size;
	snprintf(text, sizeof(text), "cove host image %s\n", b->d->host_image);
	if (put_text(b, text, digest, &size, err) < 0)
		return -1;
	b->from_host = true;
	snprintf(b->chain, sizeof(b->chain), "%s", digest);
	json_array_append_new(b->diff_ids, json_string(digest));
	json_array_append_new(b->layers, json_pack("{s:s, s:s, s:I}", "mediaType", OCI_HOST_LAYER_TYPE, "digest",
						   digest, "size", (json_int_t)size));
	return 0;
}

/* A template's image, with the template's env, cwd and user over its
 * config's. */
static int from_template(struct build *b, const struct template *t, struct cove_err *err)
{
	const struct sandbox_spec *s = t->spec;
	if (t->snapshot[0] || !s)
		return err_set(err, COVE_EINVAL, "line %d: FROM %s: a template of an image (not of a snapshot)",
			       b->df.v[b->step].line, t->name);
	if (from_image(b, s->image[0] ? s->image : "host", err) < 0)
		return -1;
	const char *k;
	json_t *v;
	json_object_foreach(s->env, k, v)
	{
		char kv[4096];
		snprintf(kv, sizeof(kv), "%s=%s", k, json_string_value(v) ?: "");
		env_set(b->env, kv);
	}
	if (s->cwd[0])
		snprintf(b->workdir, sizeof(b->workdir), "%s", s->cwd);
	if (s->user[0])
		snprintf(b->user, sizeof(b->user), "%s", s->user);
	return 0;
}

/* The base image's config and layers. */
static int from_image(struct build *b, const char *ref, struct cove_err *err)
{
	struct engine_images *im = b->d->images;
	struct image_resolved r;
	struct image_info info;
	_cleanup_free_ char *buf = NULL;
	size_t len;
	if (strcmp(ref, "scratch") == 0)
		return 0;
	if (strcmp(ref, "host") == 0)
		return from_host(b, err);
	if (image_resolve(b->d, ref, &r, err) < 0) {
		struct template *t = err->code == COVE_ENOTFOUND ? template_find(b->d, ref) : NULL;
		if (t) {
			memset(err, 0, sizeof(*err));
			return from_template(b, t, err);
		}
		return err_prefix(err, "FROM", b->df.v[b->step].line);
	}
	int rc = image_open(&im->store, r.id, &info, err);
	json_t *m = NULL, *c = r.config;
	if (rc == 0 && blob_read_all(&im->store.blobs, r.id, OCI_DOC_MAX, &buf, &len, err) == 0)
		m = json_loadb(buf, len, 0, NULL);
	if (rc == 0) {
		for (size_t i = 0; i < info.config.n_diff_ids; i++)
			json_array_append_new(b->diff_ids, json_string(info.config.diff_ids[i]));
		snprintf(b->chain, sizeof(b->chain), "%s", info.chain_id);
		image_info_free(&info);
	}
	json_array_extend(b->layers, json_object_get(m, "layers"));
	json_array_extend(b->env, json_object_get(c, "env"));
	json_object_update(b->labels, json_object_get(c, "labels"));
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(c, "exposed_ports"), i, p)
	{
		json_object_set_new(b->ports, json_string_value(p), json_object());
	}
	snprintf(b->workdir, sizeof(b->workdir), "%s", json_string_value(json_object_get(c, "working_dir")) ?: "");
	snprintf(b->user, sizeof(b->user), "%s", json_string_value(json_object_get(c, "user")) ?: "");
	b->cmd = json_incref(json_object_get(c, "cmd"));
	b->entrypoint = json_incref(json_object_get(c, "entrypoint"));
	json_decref(m);
	image_resolved_free(&r);
	if (rc == 0 && json_array_size(b->layers) != json_array_size(b->diff_ids))
		return err_set(err, COVE_EINTERNAL, "image '%s': its manifest and config disagree", ref);
	return rc;
}

/* The Dockerfile read and parsed, ARGs before FROM and FROM done: all
 * before the first event, so that a bad one is the request's error. */
static void after_unpack(struct build *b)
{
	struct cove_err err = { 0 };
	char clean[PATH_MAX], *text = NULL, *ref = NULL;
	size_t len;
	if (dockerfile_clean_path(b->dockerfile, clean, sizeof(clean)) < 0 || !clean[0])
		err_set(&err, COVE_EINVAL, "the Dockerfile '%s' is outside the build context", b->dockerfile);
	else if (build_fs_read(&b->fs, clean, DOCKERFILE_MAX, &text, &len, &err) == 0 &&
		 dockerfile_parse(text, len, &b->df, &err) == 0)
		while (b->df.v[b->step].cmd == DF_ARG && arg_step(b, &b->df.v[b->step], &err) == 0)
			b->step++;
	free(text);
	if (!err.code && (ref = expand(b, b->df.v[b->step].args[0], &err)))
		from_image(b, ref, &err);
	free(ref);
	if (err.code) {
		fail(b, &err);
		return;
	}
	/* ARGs before FROM are FROM's: after it, an ARG NAME takes their value */
	b->from_step = b->step;
	b->outer = b->args;
	b->args = json_object();
	b->step = 0;
	if (!b->from_host) {
		advance(b);
		return;
	}
	snprintf(b->job.path, sizeof(b->job.path), "%s/%s", b->d->images->store.images, b->d->host_image);
	snprintf(b->job.chain, sizeof(b->job.chain), "%s", b->chain);
	if (job_start(b, JOB_BASE, &err) < 0)
		fail(b, &err);
}

/* ---- the steps ---- */

static json_t *command_of(const struct df_instr *in)
{
	if (!in->json)
		return json_pack("[s, s, s]", "/bin/sh", "-c", in->n_args ? in->args[0] : "");
	json_t *a = json_array();
	for (size_t i = 0; i < in->n_args; i++)
		json_array_append_new(a, json_string(in->args[i]));
	return a;
}

static int expose(struct build *b, const char *w, struct cove_err *err)
{
	char *end, key[32];
	long port = strtol(w, &end, 10);
	const char *proto = *end == '/' ? end + 1 : "tcp";
	if (end == w || port < 1 || port > 65535 || (*end && *end != '/') ||
	    (strcmp(proto, "tcp") != 0 && strcmp(proto, "udp") != 0 && strcmp(proto, "sctp") != 0))
		return err_set(err, COVE_EINVAL, "line %d: EXPOSE '%s': a port (1-65535) with /tcp, /udp or /sctp",
			       b->df.v[b->step].line, w);
	snprintf(key, sizeof(key), "%ld/%s", port, proto);
	json_object_set_new(b->ports, key, json_object());
	return 0;
}

/* ENV (into env), LABEL, EXPOSE: each argument expanded, then applied. */
static int each_value(struct build *b, const struct df_instr *in, json_t *env, struct cove_err *err)
{
	for (size_t i = 0; i < in->n_args; i++) {
		_cleanup_free_ char *v = expand(b, in->args[i], err);
		char *eq = v ? strchr(v, '=') : NULL;
		if (!v)
			return -1;
		if (in->cmd == DF_EXPOSE) {
			if (expose(b, v, err) < 0)
				return -1;
		} else if (in->cmd == DF_ENV) {
			env_set(env, v);
		} else if (eq) {
			*eq = '\0';
			json_object_set_new(b->labels, v, json_string(eq + 1));
		}
	}
	return 0;
}

/* ENV's values see the env before it, as Docker's: they are expanded
 * against b->env and set in a copy that replaces it. */
static int each_arg(struct build *b, const struct df_instr *in, struct cove_err *err)
{
	json_t *next = in->cmd == DF_ENV ? json_copy(b->env) : NULL;
	int r = each_value(b, in, next, err);
	if (next && r == 0) {
		json_decref(b->env);
		b->env = next;
	} else {
		json_decref(next);
	}
	return r;
}

static int meta_step(struct build *b, const struct df_instr *in, struct cove_err *err)
{
	_cleanup_free_ char *v = NULL;
	switch (in->cmd) {
	case DF_ARG:
		return b->step < b->from_step ? 0 : arg_step(b, in, err); /* before FROM: done */
	case DF_USER:
		if (!(v = expand(b, in->rest, err)))
			return -1;
		snprintf(b->user, sizeof(b->user), "%s", v);
		return 0;
	case DF_CMD:
		json_decref(b->cmd);
		b->cmd = command_of(in);
		b->cmd_set = true;
		return 0;
	case DF_ENTRYPOINT:
		json_decref(b->entrypoint);
		b->entrypoint = command_of(in);
		if (!b->cmd_set) { /* an inherited CMD goes with the old ENTRYPOINT */
			json_decref(b->cmd);
			b->cmd = NULL;
		}
		return 0;
	case DF_ENV:
	case DF_LABEL:
	case DF_EXPOSE:
		return each_arg(b, in, err);
	default:
		return 0; /* FROM: done before the first step */
	}
}

static int copy_step(struct build *b, const struct df_instr *in, struct cove_err *err)
{
	struct build_copy *c = &b->job.copy;
	_cleanup_free_ char *dest = expand(b, in->args[in->n_args - 1], err);
	_cleanup_free_ char *chown = in->chown ? expand(b, in->chown, err) : NULL;
	*c = (struct build_copy){ .chmod = in->chmod, .add = in->cmd == DF_ADD, .line = in->line };
	if (!dest || (in->chown && !chown) || abs_path(b, dest, c->dest, sizeof(c->dest), err) < 0)
		return -1;
	c->dest_dir = dest[strlen(dest) - 1] == '/';
	if (chown) {
		snprintf(b->job.chown, sizeof(b->job.chown), "%s", chown);
		c->chown = b->job.chown;
	}
	c->srcs = calloc(in->n_args, sizeof(char *));
	for (size_t i = 0; c->srcs && i + 1 < in->n_args; i++) {
		if (!(c->srcs[i] = expand(b, in->args[i], err))) {
			dockerfile_strv_free(c->srcs);
			c->srcs = NULL;
			return -1;
		}
		c->n_srcs++;
	}
	if (!c->srcs)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	if (job_start(b, JOB_COPY, err) < 0) {
		dockerfile_strv_free(c->srcs);
		c->srcs = NULL;
		return -1;
	}
	return 1;
}

static int workdir_step(struct build *b, const struct df_instr *in, struct cove_err *err)
{
	_cleanup_free_ char *v = expand(b, in->rest, err);
	if (!v || abs_path(b, v, b->workdir, sizeof(b->workdir), err) < 0)
		return -1;
	snprintf(b->job.path, sizeof(b->job.path), "%s", b->workdir);
	return job_start(b, JOB_MKDIR, err) < 0 ? -1 : 1;
}

/* ---- RUN ---- */

static struct build *of_run(struct output *o)
{
	return (struct build *)(void *)((char *)o - offsetof(struct build, run_out));
}

static void run_write(struct output *o, const struct out_event *ev)
{
	struct build *b = of_run(o);
	const char *stream = ev->type == OUT_STDOUT ? "stdout" : "stderr";
	if (ev->type == OUT_EXIT) {
		b->run_status = ev->exit->status;
		return;
	}
	if (ev->type != OUT_STDOUT && ev->type != OUT_STDERR)
		return;
	json_t *e = json_pack("{s:s, s:s, s:s%}", "type", "output", "stream", stream, "data", ev->data, ev->len);
	if (!e) { /* not UTF-8: shown with '?' for what is not ASCII */
		_cleanup_free_ char *ascii = strndup(ev->data, ev->len);
		for (char *p = ascii; p && *p; p++)
			*p = (unsigned char)*p >= 0x80 ? '?' : *p;
		e = json_pack("{s:s, s:s, s:s}", "type", "output", "stream", stream, "data", ascii ? ascii : "");
	}
	emit(b, e);
}

static void fail_later(evutil_socket_t fd, short what, void *arg)
{
	struct build *b = arg;
	b->in_worker = false;
	if (b->cancelled)
		teardown(b, true);
	else
		fail(b, &b->job.err);
}

static void run_close(struct output *o, const struct cove_err *err)
{
	struct build *b = of_run(o);
	struct cove_err e = { 0 };
	int line = b->df.v[b->step].line, st = b->run_status;
	b->running = false;
	if (err) {
		err_set(&e, err->code, "line %d: RUN: %s", line, err->msg);
	} else if (st != 0) {
		err_set(&e, COVE_EINVAL, "line %d: RUN %s %d", line,
			WIFSIGNALED(st) ? "was killed by signal" : "exited with status",
			WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	} else {
		snprintf(b->job.subvol, sizeof(b->job.subvol), "%s/sandboxes/%s", b->d->pool.dir, b->sb_id);
		image_layer_path(&b->d->images->store, b->chain, b->job.image);
		b->job.host_layers = image_tree_host_layers(b->job.image);
		if (job_start(b, JOB_RUN, &e) == 0)
			return;
	}
	/* Not from inside the exec's close: deleting its sandbox frees it. */
	b->job.err = e;
	b->in_worker = true; /* a cancel meanwhile leaves the end to fail_later */
	if (event_base_once(b->d->base, -1, EV_TIMEOUT, fail_later, b, &(struct timeval){ 0 }) < 0)
		log_warn("build: cannot schedule its end");
}

static const struct output_ops run_ops = { .write = run_write, .close = run_close };

/* What a RUN sees: the ENV, and the ARGs that no ENV hides. */
static json_t *run_env(struct build *b)
{
	json_t *env = json_object(), *v;
	const char *k;
	size_t i;
	json_object_foreach(b->args, k, v)
	{
		if (json_is_string(v))
			json_object_set(env, k, v);
	}
	json_array_foreach(b->env, i, v)
	{
		const char *kv = json_string_value(v), *eq = strchr(kv, '=');
		char name[256];
		snprintf(name, sizeof(name), "%.*s", (int)(eq - kv), kv);
		json_object_set_new(env, name, json_string(eq + 1));
	}
	return env;
}

/* A RUN's result from the cache: its diff id, when the layer is still there. */
static bool run_cached(struct build *b, const char *key, char diff_id[DIGEST_STR_MAX], int64_t *size)
{
	struct engine_images *im = b->d->images;
	char path[PATH_MAX + 96], chain[DIGEST_STR_MAX], tree[PATH_MAX];
	snprintf(path, sizeof(path), "%s/build-cache/%s", im->store.images, digest_hex(key));
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, diff_id, DIGEST_STR_MAX - 1);
	struct stat st;
	if (n <= 0)
		return false;
	diff_id[n] = '\0';
	_cleanup_close_ int blob = digest_valid(diff_id) ? blob_open(&im->store.blobs, diff_id) : -1;
	if (blob < 0 || fstat(blob, &st) < 0)
		return false;
	*size = st.st_size;
	build_chain_next(b->chain, diff_id, chain);
	image_layer_path(&im->store, chain, tree);
	return storage_is_tree(b->d->pool.driver, tree) == 1;
}

static int run_start(struct build *b, json_t *argv, json_t *env, struct cove_err *err)
{
	struct sandbox_spec spec = {
		.memory = RUN_MEMORY, .cpu_millis = 2000, .pids = 4096, .egress = true, .ephemeral = true
	};
	struct sandbox *sb;
	snprintf(spec.image_dir, sizeof(spec.image_dir), "layers/%s", digest_hex(b->chain));
	snprintf(spec.image_id, sizeof(spec.image_id), "%s", b->chain);
	spec.env = json_object();
	int r = sandbox_create(b->d, &spec, NULL, &sb, err);
	sandbox_spec_free(&spec);
	if (r < 0)
		return err_prefix(err, "RUN: a sandbox", b->df.v[b->step].line);
	snprintf(b->sb_id, sizeof(b->sb_id), "%s", sb->id);
	char user[256];
	snprintf(user, sizeof(user), "%.*s", (int)strcspn(b->user, ":"), b->user);
	struct exec_request er = { .argv = argv,
				   .cmd = argv,
				   .env = env,
				   .cwd = b->workdir[0] ? b->workdir : "/",
				   .user = user[0] ? user : NULL,
				   .stream = true };
	b->run_out = (struct output){ .ops = &run_ops };
	b->run_status = 0;
	if (exec_start(sb, &er, &b->run_out, err) < 0) {
		delete_sandbox(b);
		return -1;
	}
	b->running = true;
	return 1;
}

static int run_step(struct build *b, const struct df_instr *in, struct cove_err *err)
{
	if (!b->chain[0])
		return err_set(err, COVE_EINVAL, "line %d: RUN needs an image below it (FROM scratch has no shell)",
			       in->line);
	json_t *argv = command_of(in), *env = run_env(b);
	json_t *k = json_pack("{s:s, s:O, s:O, s:s, s:s}", "parent", b->chain, "argv", argv, "env", env, "workdir",
			      b->workdir, "user", b->user);
	_cleanup_free_ char *text = k ? json_dumps(k, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	char diff_id[DIGEST_STR_MAX], chain[DIGEST_STR_MAX];
	int64_t size;
	int r = 0;
	json_decref(k);
	if (!text) {
		r = err_set(err, COVE_EINTERNAL, "out of memory");
	} else {
		digest_of(text, strlen(text), b->job.key);
		if (run_cached(b, b->job.key, diff_id, &size)) {
			build_chain_next(b->chain, diff_id, chain);
			push_layer(b, diff_id, size, chain, false);
			step_done(b, true, true);
		} else {
			r = run_start(b, argv, env, err);
		}
	}
	json_decref(argv);
	json_decref(env);
	return r;
}

/* ---- the image ---- */

static int put_text(struct build *b, const char *text, char digest[DIGEST_STR_MAX], int64_t *size, struct cove_err *err)
{
	const struct blob_store *bs = &b->d->images->store.blobs;
	struct blob_writer w;
	*size = (int64_t)strlen(text);
	if (blob_writer_begin(bs, &w, OCI_DOC_MAX, err) < 0)
		return -1;
	if (blob_writer_write(&w, text, strlen(text), err) < 0) {
		blob_writer_abort(&w);
		return -1;
	}
	return blob_writer_commit(bs, &w, NULL, -1, digest, NULL, err);
}

static int put_json(struct build *b, json_t *j, char digest[DIGEST_STR_MAX], int64_t *size, struct cove_err *err)
{
	_cleanup_free_ char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(j);
	return text ? put_text(b, text, digest, size, err) : err_set(err, COVE_EINTERNAL, "out of memory");
}

static json_t *image_config(struct build *b)
{
	json_t *c = json_object();
	if (json_array_size(b->env))
		json_object_set(c, "Env", b->env);
	if (b->workdir[0])
		json_object_set_new(c, "WorkingDir", json_string(b->workdir));
	if (b->user[0])
		json_object_set_new(c, "User", json_string(b->user));
	if (b->cmd)
		json_object_set(c, "Cmd", b->cmd);
	if (b->entrypoint)
		json_object_set(c, "Entrypoint", b->entrypoint);
	if (json_object_size(b->ports))
		json_object_set(c, "ExposedPorts", b->ports);
	if (json_object_size(b->labels))
		json_object_set(c, "Labels", b->labels);
	return json_pack("{s:s, s:s, s:o, s:{s:s, s:O}}", "architecture", IMAGE_ARCH, "os", IMAGE_OS, "config", c,
			 "rootfs", "type", "layers", "diff_ids", b->diff_ids);
}

static void finish(struct build *b)
{
	struct cove_err err = { 0 };
	char config[DIGEST_STR_MAX], manifest[DIGEST_STR_MAX];
	int64_t csize, msize;
	json_t *image = NULL, *names = json_array();
	if (json_array_size(b->layers) == 0)
		err_set(&err, COVE_EINVAL, "the image has no layer: FROM scratch needs a COPY, ADD or RUN");
	else if (put_json(b, image_config(b), config, &csize, &err) == 0 &&
		 put_json(b,
			  json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:O}", "schemaVersion", 2, "mediaType",
				    "application/vnd.oci.image.manifest.v1+json", "config", "mediaType",
				    "application/vnd.oci.image.config.v1+json", "digest", config, "size",
				    (json_int_t)csize, "layers", b->layers),
			  manifest, &msize, &err) == 0) {
		if (b->tag[0])
			json_array_append_new(names, json_string(b->tag));
		images_add(b->d, manifest, names, "build", &image, &err);
	}
	json_decref(names);
	if (err.code) {
		fail(b, &err);
		return;
	}
	emit(b, json_pack("{s:s, s:o}", "type", "image", "image", image));
	if (b->out)
		output_close(b->out, NULL);
	b->out = NULL;
	teardown(b, false);
}

static void advance(struct build *b)
{
	struct cove_err err = { 0 };
	while (b->step < b->df.n) {
		const struct df_instr *in = &b->df.v[b->step];
		emit(b, json_pack("{s:s, s:I, s:I, s:i, s:s}", "type", "step", "step", (json_int_t)b->step + 1, "total",
				  (json_int_t)b->df.n, "line", in->line, "instruction", in->text));
		int r;
		switch (in->cmd) {
		case DF_COPY:
		case DF_ADD:
			r = copy_step(b, in, &err);
			break;
		case DF_WORKDIR:
			r = workdir_step(b, in, &err);
			break;
		case DF_RUN:
			r = run_step(b, in, &err);
			break;
		default:
			r = meta_step(b, in, &err);
			if (r == 0)
				step_done(b, false, false);
		}
		if (r < 0) {
			fail(b, &err);
			return;
		}
		if (r == 1)
			return;
	}
	finish(b);
}

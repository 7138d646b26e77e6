/* cove-image: coved's helper for the slow, network-facing half of images.
 * coved runs it next to itself for every import and pull, so that libcurl
 * (and its TLS stack) is never mapped into coved, whose every fork would
 * copy those mappings, and so that a registry or an archive can never stall
 * coved's loop. It writes into the image store under the pool and reports
 * on stdout, one JSON object a line:
 *
 *   {"type":"layer","digest":D,"done":N,"total":N,"status":S}
 *       S: "waiting", "downloading", "verified", "exists", "unpacked"
 *   {"type":"done","id":MANIFEST,"names":[...],"layers":N}
 *   {"type":"error","code":CODE,"message":TEXT}      (exit status 1)
 *
 * Usage:
 *   cove-image import --pool DIR --driver btrfs|overlay [--ref NAME] [PATH]
 *       an OCI layout or docker archive: PATH (folder or tar), else a tar
 *       on stdin; --ref picks one image of several
 *   cove-image pull --pool DIR --driver D [--auth FILE] [--insecure HOST]... REF
 *       FILE is Docker's config.json form: {"auths": {HOST: {"auth":
 *       base64(user:password)} or {"username", "password"}}} */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/encoding.h"
#include "common/error.h"
#include "image/image.h"
#include "image/ref.h"
#include "image/registry.h"

#define INSECURE_MAX 32

struct args {
	const char *cmd, *pool, *driver, *ref, *auth, *target;
	const char *insecure[INSECURE_MAX];
	int n_insecure;
};

static void emit(json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT);
	if (s) {
		fputs(s, stdout);
		fputc('\n', stdout);
		fflush(stdout);
	}
	free(s);
	json_decref(j);
}

static void on_progress(void *arg, const struct image_progress *p)
{
	emit(json_pack("{s:s, s:s, s:I, s:I, s:s}", "type", "layer", "digest", p->digest, "done", (json_int_t)p->done,
		       "total", (json_int_t)p->total, "status", p->status));
}

static int fail(const struct cove_err *err)
{
	emit(json_pack("{s:s, s:s, s:s}", "type", "error", "code", err_code_name(err->code), "message", err->msg));
	return 1;
}

static int usage(void)
{
	struct cove_err err = { 0 };
	err_set(&err, COVE_EINVAL, "usage: cove-image import|pull --pool DIR --driver D [options] [PATH|REF]");
	return fail(&err);
}

static int parse_args(int argc, char **argv, struct args *a)
{
	if (argc < 2)
		return -1;
	a->cmd = argv[1];
	for (int i = 2; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (strcmp(argv[i], "--pool") == 0 && v)
			a->pool = argv[++i];
		else if (strcmp(argv[i], "--driver") == 0 && v)
			a->driver = argv[++i];
		else if (strcmp(argv[i], "--ref") == 0 && v)
			a->ref = argv[++i];
		else if (strcmp(argv[i], "--auth") == 0 && v)
			a->auth = argv[++i];
		else if (strcmp(argv[i], "--insecure") == 0 && v && a->n_insecure < INSECURE_MAX)
			a->insecure[a->n_insecure++] = argv[++i];
		else if (argv[i][0] != '-' && !a->target)
			a->target = argv[i];
		else
			return -1;
	}
	return a->pool && a->driver ? 0 : -1;
}

/* The login for registry from the auth file: user and password malloc'd
 * into *user, *password, or both NULL (anonymous). */
static int find_login(const char *file, const char *registry, char **user, char **password, struct cove_err *err)
{
	json_error_t je;
	*user = *password = NULL;
	if (!file)
		return 0;
	json_t *j = json_load_file(file, 0, &je);
	if (!j)
		return err_set(err, COVE_EINVAL, "registry auth file '%s': %s", file, je.text);
	json_t *e = json_object_get(json_object_get(j, "auths"), registry);
	const char *u = json_string_value(json_object_get(e, "username"));
	const char *p = json_string_value(json_object_get(e, "password"));
	const char *b64 = json_string_value(json_object_get(e, "auth"));
	int r = 0;
	if (u) {
		*user = strdup(u);
		*password = strdup(p ? p : "");
	} else if (b64) {
		size_t n = strlen(b64);
		char *buf = calloc(1, n / 4 * 3 + 4);
		long len = buf ? base64_decode(b64, n, (unsigned char *)buf) : -1;
		char *colon = len > 0 ? memchr(buf, ':', (size_t)len) : NULL;
		if (colon) {
			*colon = '\0';
			*user = strdup(buf);
			*password = strdup(colon + 1);
		} else {
			r = err_set(err, COVE_EINVAL, "registry auth file '%s': a bad \"auth\" for %s", file, registry);
		}
		free(buf);
	}
	json_decref(j);
	return r;
}

static bool is_insecure(const struct args *a, const char *registry)
{
	for (int i = 0; i < a->n_insecure; i++)
		if (strcmp(a->insecure[i], registry) == 0)
			return true;
	return false;
}

static int pull(struct image_store *s, const struct args *a, struct image_info *info, struct cove_err *err)
{
	struct image_ref ref;
	if (!a->target || image_ref_parse(a->target, &ref, err) < 0)
		return err_set(err, COVE_EINVAL, "pull: a reference is needed");
	struct registry_opts o = { .insecure = is_insecure(a, ref.registry) };
	char *user, *password;
	if (find_login(a->auth, ref.registry, &user, &password, err) < 0)
		return -1;
	o.user = user;
	o.password = password;
	int r = image_pull(s, a->target, &o, info, err);
	free(user);
	free(password);
	return r;
}

int main(int argc, char **argv)
{
	struct args a = { 0 };
	struct cove_err err = { 0 };
	signal(SIGPIPE, SIG_IGN);
	if (parse_args(argc, argv, &a) < 0)
		return usage();
	struct pool pool = { 0 };
	snprintf(pool.dir, sizeof(pool.dir), "%s", a.pool);
	if (storage_driver_parse(a.driver, &pool.driver) < 0 || pool.driver == STORAGE_AUTO)
		return usage();
	struct image_store s;
	if (image_store_open(&s, &pool, &err) < 0)
		return fail(&err);
	s.progress = on_progress;
	struct image_info info = { 0 };
	int r;
	if (strcmp(a.cmd, "import") == 0)
		r = a.target ? image_import_path(&s, a.target, a.ref, &info, &err)
			     : image_import_tar_fd(&s, 0, a.ref, &info, &err);
	else if (strcmp(a.cmd, "pull") == 0)
		r = pull(&s, &a, &info, &err);
	else
		r = err_set(&err, COVE_EINVAL, "cove-image: unknown command '%s'", a.cmd);
	image_store_close(&s);
	if (r < 0)
		return fail(&err);
	json_t *names = json_array();
	for (size_t i = 0; i < info.n_tags; i++)
		json_array_append_new(names, json_string(info.tags[i]));
	emit(json_pack("{s:s, s:s, s:o, s:I}", "type", "done", "id", info.manifest, "names", names, "layers",
		       (json_int_t)info.n_layers));
	image_info_free(&info);
	return 0;
}

/* The engine's images (engine/images.h) with no server: an engine on a
 * data root of its own, two images imported into its store and recorded
 * (images_add), then resolution by name (normalized), ID and ID prefix,
 * names moving between images, what a spec takes from an image's config
 * (image_spec_apply: env under the spec's own, cwd, user, start, ports,
 * labels), the spec's JSON round trip, and delete with the collection of
 * blobs and layer trees. Needs root (the loop-backed btrfs pool). */
#include <event2/event.h>
#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/images.h"
#include "engine/images_private.h"
#include "enginetest.h"
#include "tap.h"
#include "imagetest.h"

static char root[] = "/var/tmp/cove-test-images-XXXXXX";
static struct engine eng;

static void write_file(const char *path, const char *text, size_t n)
{
	FILE *f = fopen(path, "wb");
	fwrite(text, 1, n, f);
	fclose(f);
}

/* A docker archive folder at dir: one layer holding /hello (text), the
 * config below; its image ID (the manifest coved makes) to id. */
static int docker_folder(const char *dir, const char *text, const char *tag, char id[80])
{
	char cfg[2048], d[DIGEST_STR_MAX];
	mkdir(dir, 0755);
	struct member ms[] = { { "hello", S_IFREG, 0644, 0, 0, text }, { NULL } };
	struct buf l = layer_at(pathf("%s/layer.tmp", dir), ms, 0);
	write_file(pathf("%s/layer.tar", dir), l.p, l.n);
	diff_id(l, d);
	free(l.p);
	int n = snprintf(cfg, sizeof(cfg),
			 "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[\"A=image\",\"B=image\"],"
			 "\"WorkingDir\":\"/srv\",\"User\":\"1000:1000\",\"Entrypoint\":[\"/bin/sh\",\"-c\"],"
			 "\"Cmd\":[\"echo hi\"],\"ExposedPorts\":{\"8080/tcp\":{}},\"Labels\":{\"team\":\"x\"}},"
			 "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"%s\"]}}",
			 d);
	write_file(pathf("%s/config.json", dir), cfg, (size_t)n);
	char man[512];
	n = snprintf(man, sizeof(man),
		     "[{\"Config\":\"config.json\",\"RepoTags\":[\"%s\"],\"Layers\":[\"layer.tar\"]}]", tag);
	write_file(pathf("%s/manifest.json", dir), man, (size_t)n);
	struct image_info info;
	struct cove_err err = { 0 };
	if (image_import_path(&eng.images->store, dir, NULL, &info, &err) < 0) {
		printf("# import: %s\n", err.msg);
		return -1;
	}
	json_t *names = json_pack("[s]", tag), *j = NULL;
	int r = images_add(&eng, info.manifest, names, "import", &j, &err);
	snprintf(id, 80, "%s", info.manifest);
	json_decref(names);
	json_decref(j);
	image_info_free(&info);
	return r;
}

static bool resolves(const char *ref, const char *id)
{
	struct image_resolved r;
	struct cove_err err = { 0 };
	bool ok = image_resolve(&eng, ref, &r, &err) == 0 && strcmp(r.id, id) == 0;
	image_resolved_free(&r);
	return ok;
}

static void test_resolve(const char *a, const char *b)
{
	char prefix[32], shorter[32];
	snprintf(prefix, sizeof(prefix), "%.12s", a + 7);
	snprintf(shorter, sizeof(shorter), "%.11s", a + 7);
	CHECK(resolves("app:1", a) && resolves("docker.io/library/app:1", a), "a name, short and in full");
	CHECK(resolves("registry.example:5000/team/other:2", b), "a name with a registry");
	CHECK(resolves(a, a) && resolves(prefix, a), "the ID, and 12 hex digits of it");
	struct image_resolved r;
	struct cove_err err = { 0 };
	CHECK(image_resolve(&eng, shorter, &r, &err) < 0 && err.code == COVE_ENOTFOUND, "11 digits are not enough");
	memset(&err, 0, sizeof(err));
	CHECK(image_resolve(&eng, "app", &r, &err) < 0 && err.code == COVE_ENOTFOUND, "app is app:latest: none");
	CHECK(image_resolve(&eng, "host", &r, NULL) == 0 && r.host && strcmp(r.image_dir, eng.host_image) == 0,
	      "host is the host image");
}

static void test_apply(const char *a)
{
	struct sandbox_spec s = { .image = "app:1", .env = json_pack("{s:s}", "A", "mine") };
	struct cove_err err = { 0 };
	CHECK(image_spec_apply(&eng, &s, &err) == 0, "apply: %s", err.msg);
	CHECK(strcmp(s.image_id, a) == 0 && strncmp(s.image_dir, "layers/", 7) == 0, "its ID and tree");
	CHECK_STR(json_string_value(json_object_get(s.env, "A")), "mine", "the spec's env wins");
	CHECK_STR(json_string_value(json_object_get(s.env, "B")), "image", "the image's env under it");
	CHECK(strcmp(s.cwd, "/srv") == 0 && strcmp(s.user, "1000") == 0, "cwd from WorkingDir, user from User");
	json_t *j = sandbox_spec_to_json(&s);
	char *text = json_dumps(j, 0);
	CHECK(json_array_size(json_object_get(j, "start")) == 3 &&
		      strcmp(json_string_value(json_array_get(json_object_get(j, "start"), 2)), "echo hi") == 0,
	      "start: Entrypoint + Cmd");
	CHECK_STR(json_string_value(json_array_get(json_object_get(j, "exposed_ports"), 0)), "8080/tcp", "ports");
	struct sandbox_spec back = { 0 };
	CHECK(sandbox_spec_from_json(text, &back) == 0 && strcmp(back.image_id, a) == 0 &&
		      json_equal(back.image_meta, s.image_meta),
	      "the image's fields survive the spec's JSON");
	free(text);
	json_decref(j);
	sandbox_spec_free(&back);
	sandbox_spec_free(&s);
}

static size_t count_dir(const char *path)
{
	size_t n = 0;
	DIR *d = opendir(path);
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static void test_names_and_delete(const char *a, const char *b)
{
	char c[80], blobs[700];
	json_t *j = NULL;
	struct cove_err err = { 0 };
	snprintf(blobs, sizeof(blobs), "%s/images/blobs/sha256", eng.pool.dir);
	CHECK(docker_folder(pathf("%s/third", root), "third\n", "app:1", c) == 0, "a third image named app:1");
	CHECK(resolves("app:1", c) && resolves(a, a), "the name moved to it; the first keeps its ID");
	CHECK(image_delete(&eng, a, &j, &err) == 0, "delete the first: %s", err.msg);
	json_decref(j);
	CHECK(!resolves(a, a), "gone");
	CHECK(image_delete(&eng, b, &j, &err) == 0, "delete the second: %s", err.msg);
	json_decref(j);
	CHECK(image_delete(&eng, c, &j, &err) == 0, "delete the third: %s", err.msg);
	json_decref(j);
	char layers[700];
	snprintf(layers, sizeof(layers), "%s/images/layers", eng.pool.dir);
	CHECK(count_dir(blobs) == 0 && count_dir(layers) == 0, "no blob nor layer tree left (%zu, %zu)",
	      count_dir(blobs), count_dir(layers));
	memset(&err, 0, sizeof(err));
	CHECK(image_delete(&eng, a, &j, &err) < 0 && err.code == COVE_ENOTFOUND, "a second delete: 404");
}

int main(int argc, char **argv)
{
	if (getuid() != 0) {
		SKIP("needs root, as coved does");
		return tap_done();
	}
	struct cove_err err = { 0 };
	int rc = enginetest_open(&eng, root, &err);
	CHECK(rc == 0, "engine_open: %s", err.msg);
	char a[80] = "", b[80] = "";
	if (rc == 0) {
		CHECK(docker_folder(pathf("%s/first", root), "first\n", "app:1", a) == 0, "import and record app:1");
		CHECK(docker_folder(pathf("%s/second", root), "second\n", "registry.example:5000/team/other:2", b) == 0,
		      "import and record a second image");
		test_resolve(a, b);
		test_apply(a);
		test_names_and_delete(a, b);
	}
	enginetest_close(&eng, root);
	return tap_done();
}

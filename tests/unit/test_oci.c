/* The OCI document parsers (src/image/oci.c) and digests (digest.c): what
 * they accept, what they pick from an index, and what they refuse. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/digest.h"
#include "image/oci.h"
#include "image/ref.h"
#include "tap.h"

#define A64 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define B64 "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define C64 "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
#define MT_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_LAYER "application/vnd.oci.image.layer.v1.tar+gzip"

static int parse_index(const char *json, const char *ref, struct oci_descriptor *d, struct cove_err *err)
{
	memset(err, 0, sizeof(*err));
	return oci_parse_index(json, strlen(json), "linux", "amd64", ref, d, err);
}

static void test_digest(void)
{
	char d[DIGEST_STR_MAX];
	digest_of("", 0, d);
	CHECK(strcmp(d, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0,
	      "sha256 of nothing");
	CHECK(digest_valid("sha256:" A64), "a valid digest");
	CHECK(!digest_valid("sha256:"
			    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
	      "uppercase hex refused (one digest, one file name)");
	CHECK(!digest_valid("sha256:abc"), "a short digest refused");
	CHECK(!digest_valid("sha512:" A64 A64), "sha512 refused");
	CHECK(!digest_valid("sha256:" A64 "/.."), "a digest with a path after it refused");
	char *ids[] = { "sha256:" A64, "sha256:" B64, "sha256:" C64 };
	oci_chain_id(ids, 1, d);
	CHECK(strcmp(d, "sha256:" A64) == 0, "the first chain id is the diff id");
	oci_chain_id(ids, 2, d);
	CHECK(strcmp(d, "sha256:ccd722928bd92476ba1745586fed6e45a102504185ad88cd89e01ff116fd146c") == 0,
	      "chain id of 2");
	oci_chain_id(ids, 3, d);
	CHECK(strcmp(d, "sha256:c1377126441fb2f5ec2c21ae2a60255331d639e830f0ee1b40a36e52d4c40588") == 0,
	      "chain id of 3");
}

static void test_index(void)
{
	struct oci_descriptor d;
	struct cove_err err;
	const char *multi = "{\"schemaVersion\":2,\"manifests\":["
			    "{\"mediaType\":\"" MT_MANIFEST "\",\"digest\":\"sha256:" A64 "\",\"size\":10,"
			    "\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}},"
			    "{\"mediaType\":\"" MT_MANIFEST "\",\"digest\":\"sha256:" B64 "\",\"size\":11,"
			    "\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"},"
			    "\"annotations\":{\"org.opencontainers.image.ref.name\":\"latest\"}},"
			    "{\"mediaType\":\"" MT_MANIFEST "\",\"digest\":\"sha256:" C64 "\",\"size\":12}]}";
	CHECK(parse_index(multi, NULL, &d, &err) == 0 && strcmp(d.digest, "sha256:" B64) == 0 && d.size == 11,
	      "the linux/amd64 entry chosen over arm64 and one without a platform");
	CHECK(parse_index(multi, "latest", &d, &err) == 0 && strcmp(d.digest, "sha256:" B64) == 0, "by ref name");
	CHECK(parse_index(multi, "v2", &d, &err) < 0 && err.code == COVE_ENOTFOUND, "an unknown ref name: not found");
	const char *plain = "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" MT_MANIFEST
			    "\",\"digest\":\"sha256:" C64 "\",\"size\":5}]}";
	CHECK(parse_index(plain, NULL, &d, &err) == 0 && strcmp(d.digest, "sha256:" C64) == 0,
	      "an entry without a platform is taken when it is the only one");
	const char *arm =
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" MT_MANIFEST "\",\"digest\":\"sha256:" A64
		"\",\"size\":5,\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}}]}";
	CHECK(parse_index(arm, NULL, &d, &err) < 0 && err.code == COVE_ENOTFOUND && strstr(err.msg, "amd64"),
	      "no amd64 image: not found (%s)", err.msg);
	const char *cfg = "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" MT_CONFIG
			  "\",\"digest\":\"sha256:" A64 "\",\"size\":5}]}";
	CHECK(parse_index(cfg, NULL, &d, &err) < 0 && err.code == COVE_EINVAL, "an entry that is not a manifest");
	const char *bad[] = {
		"{\"schemaVersion\":1,\"manifests\":[]}",
		"{\"schemaVersion\":2}",
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" MT_MANIFEST "\",\"digest\":\"sha256:" A64
		"\",\"size\":-1}]}",
		"{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"" MT_MANIFEST
		"\",\"digest\":\"md5:abc\",\"size\":1}]}",
		"{\"schemaVersion\":2,\"schemaVersion\":2,\"manifests\":[]}",
		"[1,2]",
		"{\"schemaVersion\":2,\"manifests\":[",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(parse_index(bad[i], NULL, &d, &err) < 0 && err.code == COVE_EINVAL && err.msg[0],
		      "bad index %zu refused (%s)", i, err.msg);
}

static const char manifest_fmt[] = "{\"schemaVersion\":2,\"mediaType\":\"" MT_MANIFEST "\","
				   "\"config\":{\"mediaType\":\"%s\",\"digest\":\"sha256:" A64 "\",\"size\":7},"
				   "\"layers\":[%s]}";

static int parse_manifest(const char *config_type, const char *layers, struct oci_manifest *m, struct cove_err *err)
{
	char buf[2048];
	snprintf(buf, sizeof(buf), manifest_fmt, config_type, layers);
	memset(err, 0, sizeof(*err));
	return oci_parse_manifest(buf, strlen(buf), m, err);
}

static void test_manifest(void)
{
	struct oci_manifest m;
	struct cove_err err;
	const char *two = "{\"mediaType\":\"" MT_LAYER "\",\"digest\":\"sha256:" B64 "\",\"size\":100},"
			  "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+zstd\",\"digest\":\"sha256:" C64
			  "\",\"size\":200}";
	int r = parse_manifest(MT_CONFIG, two, &m, &err);
	CHECK(r == 0 && m.n_layers == 2 && m.layers[1].size == 200 && strcmp(m.config.digest, "sha256:" A64) == 0,
	      "a manifest of two layers (%s)", err.msg);
	if (r == 0) {
		char *json = oci_manifest_json(&m);
		struct oci_manifest again;
		CHECK(json && oci_parse_manifest(json, strlen(json), &again, &err) == 0 && again.n_layers == 2 &&
			      strcmp(again.layers[1].digest, m.layers[1].digest) == 0,
		      "oci_manifest_json reads back as the same manifest");
		if (json)
			oci_manifest_free(&again);
		free(json);
		oci_manifest_free(&m);
	}
	CHECK(parse_manifest("application/vnd.docker.container.image.v1+json", two, &m, &err) == 0,
	      "a Docker config media type");
	oci_manifest_free(&m);
	CHECK(parse_manifest("application/octet-stream", two, &m, &err) < 0 && err.code == COVE_EINVAL,
	      "a config of another media type refused (%s)", err.msg);
	CHECK(parse_manifest(MT_CONFIG, "", &m, &err) < 0 && err.code == COVE_EINVAL, "no layers refused");
	CHECK(parse_manifest(
		      MT_CONFIG,
		      "{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+encrypted\",\"digest\":\"sha256:" B64
		      "\",\"size\":1}",
		      &m, &err) < 0 &&
		      strstr(err.msg, "not a tar layer"),
	      "an encrypted layer refused (%s)", err.msg);
	CHECK(parse_manifest(MT_CONFIG, "{\"mediaType\":\"" MT_LAYER "\",\"digest\":\"sha256:" B64 "\"}", &m, &err) < 0,
	      "a layer without a size refused");
}

static const char config_fmt[] = "{\"os\":\"linux\",\"architecture\":\"amd64\",\"config\":%s,"
				 "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:" A64 "\"]}}";

static int parse_config(const char *cfg, struct image_config *c, struct cove_err *err)
{
	char buf[2048];
	snprintf(buf, sizeof(buf), config_fmt, cfg);
	memset(err, 0, sizeof(*err));
	memset(c, 0, sizeof(*c));
	int r = oci_parse_config(buf, strlen(buf), c, err);
	if (r < 0 && c->env)
		printf("# a refused config left fields set\n");
	return r;
}

static void test_config(void)
{
	struct image_config c;
	struct cove_err err;
	int r = parse_config("{\"Env\":[\"A=1\",\"B==2\"],\"WorkingDir\":\"/app\",\"User\":\"app:staff\","
			     "\"Entrypoint\":null,\"Cmd\":[\"python3\",\"-m\",\"http.server\"],"
			     "\"ExposedPorts\":{\"8000\":{},\"9000/sctp\":{}},\"Labels\":{\"k\":\"v\",\"k2\":\"\"}}",
			     &c, &err);
	CHECK(r == 0, "a config (%s)", err.msg);
	if (r == 0) {
		CHECK(c.n_env == 2 && strcmp(c.env[1], "B==2") == 0 && c.env[2] == NULL, "Env, NULL-terminated");
		CHECK_STR(c.working_dir, "/app", "WorkingDir");
		CHECK_STR(c.user, "app:staff", "User");
		CHECK(c.n_entrypoint == 0 && c.entrypoint == NULL, "a null Entrypoint is none");
		CHECK(c.n_cmd == 3 && strcmp(c.cmd[2], "http.server") == 0, "Cmd");
		CHECK(c.n_ports == 2 && c.ports[0].port == 8000 && strcmp(c.ports[0].proto, "tcp") == 0 &&
			      c.ports[1].port == 9000 && strcmp(c.ports[1].proto, "sctp") == 0,
		      "ExposedPorts, tcp when unsaid");
		CHECK(c.n_labels == 2 && strcmp(c.label_values[1], "") == 0, "Labels");
		CHECK(c.n_diff_ids == 1 && strcmp(c.os, "linux") == 0 && strcmp(c.architecture, "amd64") == 0,
		      "diff ids and platform");
		image_config_free(&c);
	}
	CHECK(parse_config("null", &c, &err) == 0 && c.n_env == 0 && c.cmd == NULL, "no run config at all");
	image_config_free(&c);
	const char *bad[] = {
		"{\"Env\":[\"NOEQUALS\"]}",
		"{\"Env\":[\"=x\"]}",
		"{\"Env\":\"A=1\"}",
		"{\"Env\":[1]}",
		"{\"WorkingDir\":\"rel\"}",
		"{\"User\":7}",
		"{\"ExposedPorts\":{\"70000/tcp\":{}}}",
		"{\"ExposedPorts\":{\"80/icmp\":{}}}",
		"{\"ExposedPorts\":{\"-1\":{}}}",
		"{\"ExposedPorts\":[\"80\"]}",
		"{\"Labels\":{\"k\":1}}",
		"{\"Cmd\":\"sh\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK(parse_config(bad[i], &c, &err) < 0 && err.code == COVE_EINVAL, "%s refused (%s)", bad[i],
		      err.msg);
	}
	const char *rootfs_bad[] = {
		"{\"config\":{}}",
		"{\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}",
		"{\"rootfs\":{\"type\":\"other\",\"diff_ids\":[\"sha256:" A64 "\"]}}",
		"{\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:xyz\"]}}",
	};
	for (size_t i = 0; i < sizeof(rootfs_bad) / sizeof(rootfs_bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		CHECK(oci_parse_config(rootfs_bad[i], strlen(rootfs_bad[i]), &c, &err) < 0 && err.code == COVE_EINVAL,
		      "rootfs %zu refused (%s)", i, err.msg);
	}
}

static void test_docker_manifest(void)
{
	struct docker_manifest m;
	struct cove_err err = { 0 };
	const char *one = "[{\"Config\":\"abc.json\",\"RepoTags\":[\"app:1\",\"app:latest\"],"
			  "\"Layers\":[\"l1/layer.tar\",\"l2/layer.tar\"]}]";
	int r = docker_parse_manifest(one, strlen(one), NULL, &m, &err);
	CHECK(r == 0 && strcmp(m.config, "abc.json") == 0 && m.n_layers == 2 && m.n_tags == 2, "one image (%s)",
	      err.msg);
	if (r == 0)
		docker_manifest_free(&m);
	const char *two = "[{\"Config\":\"a.json\",\"RepoTags\":[\"a:1\"],\"Layers\":[\"a.tar\"]},"
			  "{\"Config\":\"b.json\",\"RepoTags\":[\"b:1\"],\"Layers\":[\"b.tar\"]}]";
	memset(&err, 0, sizeof(err));
	CHECK(docker_parse_manifest(two, strlen(two), NULL, &m, &err) < 0 && strstr(err.msg, "name the one"),
	      "two images and no name: refused (%s)", err.msg);
	r = docker_parse_manifest(two, strlen(two), "b:1", &m, &err);
	CHECK(r == 0 && strcmp(m.config, "b.json") == 0, "two images, one named");
	if (r == 0)
		docker_manifest_free(&m);
	memset(&err, 0, sizeof(err));
	CHECK(docker_parse_manifest(two, strlen(two), "c:1", &m, &err) < 0 && err.code == COVE_ENOTFOUND,
	      "an unknown name: not found");
	const char *none = "[{\"Config\":\"a.json\",\"Layers\":[]}]";
	memset(&err, 0, sizeof(err));
	CHECK(docker_parse_manifest(none, strlen(none), NULL, &m, &err) < 0 && err.code == COVE_EINVAL,
	      "no layers: refused");
}

static void check_ref(const char *s, const char *registry, const char *repo, const char *tag, const char *digest,
		      bool loopback)
{
	struct image_ref r, again;
	struct cove_err err = { 0 };
	char full[600];
	int ok = image_ref_parse(s, &r, &err) == 0;
	CHECK(ok && strcmp(r.registry, registry) == 0 && strcmp(r.repository, repo) == 0 && strcmp(r.tag, tag) == 0 &&
		      strcmp(r.digest, digest) == 0 && image_ref_is_loopback(&r) == loopback,
	      "reference '%.40s' (%s)", s, err.msg);
	ok = ok && image_ref_format(&r, full, sizeof(full)) == 0 && image_ref_parse(full, &again, &err) == 0 &&
	     memcmp(&r, &again, sizeof(r)) == 0;
	CHECK(ok, "'%.40s' written out in full (%s) reads back the same", s, ok ? full : "");
}

static void test_refs(void)
{
	const char *d = "sha256:" A64;
	check_ref("python:3.12-slim", "docker.io", "library/python", "3.12-slim", "", false);
	check_ref("python", "docker.io", "library/python", "latest", "", false);
	check_ref("user/repo", "docker.io", "user/repo", "latest", "", false);
	check_ref("ghcr.io/org/sub/app:v1.2_x", "ghcr.io", "org/sub/app", "v1.2_x", "", false);
	check_ref("localhost:5000/app", "localhost:5000", "app", "latest", "", true);
	check_ref("localhost/app", "localhost", "app", "latest", "", true);
	check_ref("127.0.0.1:5000/a/b@sha256:" A64, "127.0.0.1:5000", "a/b", "", d, true);
	check_ref("[::1]:5000/x:1", "[::1]:5000", "x", "1", "", true);
	check_ref("a.b-c__d--e:t@sha256:" A64, "docker.io", "library/a.b-c__d--e", "t", d, false);
	check_ref("127.0.0.1.example.com/a", "127.0.0.1.example.com", "a", "latest", "", false);
	struct image_ref r;
	struct cove_err err = { 0 };
	CHECK(image_ref_parse("python", &r, &err) == 0 && strcmp(image_ref_api_host(&r), "registry-1.docker.io") == 0,
	      "docker.io's API host");
	const char *bad[] = { "",
			      "Python",
			      "a//b",
			      "a:",
			      "a:-x",
			      "-a",
			      "a@sha256:xyz",
			      "a b",
			      "a/",
			      "a_/b",
			      "a..b",
			      "host:99999x/a",
			      "ex ample.com/a",
			      "[zz]:1/a",
			      "a:tag:tag",
			      "a@sha256:" A64 "x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&err, 0, sizeof(err));
		CHECK(image_ref_parse(bad[i], &r, &err) < 0 && err.code == COVE_EINVAL, "reference '%s' refused (%s)",
		      bad[i], err.msg);
	}
}

int main(void)
{
	test_refs();
	test_digest();
	test_index();
	test_manifest();
	test_config();
	test_docker_manifest();
	return tap_done();
}

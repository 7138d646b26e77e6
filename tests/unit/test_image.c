/* OCI image import into a loop-backed btrfs pool: OCI layouts (folder and
 * tar) and docker archives built here by hand with libarchive, unpacked
 * into one subvolume per layer prefix; the unpacked trees checked (owners,
 * modes, whiteouts, opaque folders, hard links, xattrs, capabilities,
 * skipped devices), shared layers stored and unpacked once, and hostile
 * layers refused with nothing left behind. Needs root, /dev/loop-control
 * and mkfs.btrfs; everything lives in a mkdtemp directory removed at the end. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "image/digest.h"
#include "image/image.h"
#include "sys/btrfs.h"
#include "sys/pool.h"
#include "tap.h"
#include "imagetest.h"

static char base[] = "/var/tmp/cove-test-image-XXXXXX";

#define PATH_VAR(name, ...)  \
	char name[PATH_MAX]; \
	snprintf(name, sizeof(name), __VA_ARGS__)

static struct buf layer(const struct member *ms, int filter)
{
	PATH_VAR(file, "%s/layer.tmp", base);
	return layer_at(file, ms, filter);
}

/* ---- OCI layouts ---- */

static void write_all(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	fwrite(p, 1, n, f);
	fclose(f);
}

/* Put a blob into layout dir; its digest to out. */
static void put_blob(const char *dir, const void *p, size_t n, char out[DIGEST_STR_MAX])
{
	digest_of(p, n, out);
	PATH_VAR(path, "%s/blobs/sha256/%s", dir, digest_hex(out));
	write_all(path, p, n);
}

struct image_spec {
	struct buf layers[4];
	size_t n;
	const char *corrupt_diff_id; /* a wrong diff id for the last layer */
	bool corrupt_blob;           /* the last layer's blob altered after hashing */
};

static const char config_fmt[] =
	"{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Env\":[\"PATH=/usr/bin:/bin\",\"GREETING=hi\"],"
	"\"WorkingDir\":\"/srv\",\"User\":\"1000:1000\",\"Entrypoint\":[\"/bin/sh\",\"-c\"],\"Cmd\":[\"echo hi\"],"
	"\"ExposedPorts\":{\"8080/tcp\":{},\"53/udp\":{}},\"Labels\":{\"org.example.a\":\"b\"}},"
	"\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[%s]}}";

/* The config's JSON for the spec's layers, into out. */
static void make_config(const struct image_spec *s, char *out, size_t cap)
{
	char ids[1024] = "", d[DIGEST_STR_MAX];
	for (size_t i = 0; i < s->n; i++) {
		diff_id(s->layers[i], d);
		if (i == s->n - 1 && s->corrupt_diff_id)
			snprintf(d, sizeof(d), "%s", s->corrupt_diff_id);
		snprintf(ids + strlen(ids), sizeof(ids) - strlen(ids), "%s\"%s\"", i ? "," : "", d);
	}
	snprintf(out, cap, config_fmt, ids);
}

/* An OCI layout folder at dir for the spec; the manifest's digest to ret. */
static void make_layout(const char *dir, const struct image_spec *s, char ret[DIGEST_STR_MAX])
{
	char cfg[4096], man[4096], idx[1024], cd[DIGEST_STR_MAX], ld[DIGEST_STR_MAX];
	mkdir(dir, 0755);
	mkdir(pathf("%s/blobs", dir), 0755);
	mkdir(pathf("%s/blobs/sha256", dir), 0755);
	write_all(pathf("%s/oci-layout", dir), "{\"imageLayoutVersion\":\"1.0.0\"}", 30);
	make_config(s, cfg, sizeof(cfg));
	put_blob(dir, cfg, strlen(cfg), cd);
	int n = snprintf(man, sizeof(man),
			 "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
			 "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"%s\","
			 "\"size\":%zu},\"layers\":[",
			 cd, strlen(cfg));
	for (size_t i = 0; i < s->n; i++) {
		put_blob(dir, s->layers[i].p, s->layers[i].n, ld);
		if (i == s->n - 1 && s->corrupt_blob) {
			PATH_VAR(p, "%s/blobs/sha256/%s", dir, digest_hex(ld));
			s->layers[i].p[s->layers[i].n / 2] ^= 1;
			write_all(p, s->layers[i].p, s->layers[i].n);
			s->layers[i].p[s->layers[i].n / 2] ^= 1;
		}
		n += snprintf(man + n, sizeof(man) - n,
			      "%s{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"%s\","
			      "\"size\":%zu}",
			      i ? "," : "", ld, s->layers[i].n);
	}
	snprintf(man + n, sizeof(man) - n, "]}");
	put_blob(dir, man, strlen(man), ret);
	/* An arm64 image first: the amd64 one must be chosen. */
	snprintf(idx, sizeof(idx),
		 "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		 "\"digest\":\"sha256:%064d\",\"size\":1,\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}},"
		 "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"%s\",\"size\":%zu,"
		 "\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"},"
		 "\"annotations\":{\"org.opencontainers.image.ref.name\":\"v1\"}}]}",
		 0, ret, strlen(man));
	write_all(pathf("%s/index.json", dir), idx, strlen(idx));
}

/* A tar of folder dir (its files, by relative names) at file. */
static void tar_folder(const char *dir, const char *file)
{
	struct archive *a = tar_new(file, 0);
	const char *names[] = { "oci-layout", "index.json", NULL };
	for (int i = 0; names[i]; i++) {
		struct buf b = slurp(pathf("%s/%s", dir, names[i]));
		tar_add(a, &(struct member){ names[i], S_IFREG, 0644, 0, 0, b.p });
		free(b.p);
	}
	DIR *d = opendir(pathf("%s/blobs/sha256", dir));
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		struct buf b = slurp(pathf("%s/blobs/sha256/%s", dir, e->d_name));
		struct archive_entry *ae = archive_entry_new();
		archive_entry_set_pathname(ae, pathf("blobs/sha256/%s", e->d_name));
		archive_entry_set_filetype(ae, AE_IFREG);
		archive_entry_set_perm(ae, 0644);
		archive_entry_set_size(ae, (la_int64_t)b.n);
		archive_write_header(a, ae);
		archive_write_data(a, b.p, b.n);
		archive_entry_free(ae);
		free(b.p);
	}
	closedir(d);
	archive_write_close(a);
	archive_write_free(a);
}

/* A docker archive (`docker save`) of the spec at file, tagged tag. */
static void make_docker_archive(const struct image_spec *s, const char *tag, const char *file)
{
	char cfg[4096], man[2048], cd[DIGEST_STR_MAX];
	struct archive *a = tar_new(file, 0);
	make_config(s, cfg, sizeof(cfg));
	digest_of(cfg, strlen(cfg), cd);
	PATH_VAR(cfgname, "%s.json", digest_hex(cd));
	int n = snprintf(man, sizeof(man), "[{\"Config\":\"%s\",\"RepoTags\":[\"%s\"],\"Layers\":[", cfgname, tag);
	for (size_t i = 0; i < s->n; i++) {
		char name[64];
		snprintf(name, sizeof(name), "layer%zu/layer.tar", i);
		struct archive_entry *ae = archive_entry_new();
		archive_entry_set_pathname(ae, name);
		archive_entry_set_filetype(ae, AE_IFREG);
		archive_entry_set_perm(ae, 0644);
		archive_entry_set_size(ae, (la_int64_t)s->layers[i].n);
		archive_write_header(a, ae);
		archive_write_data(a, s->layers[i].p, s->layers[i].n);
		archive_entry_free(ae);
		/* Layer 0 by the symlink below. */
		n += snprintf(man + n, sizeof(man) - n, "%s\"%s\"", i ? "," : "", i ? name : "dup/layer.tar");
	}
	snprintf(man + n, sizeof(man) - n, "]}]");
	tar_add(a, &(struct member){ cfgname, S_IFREG, 0644, 0, 0, cfg });
	tar_add(a, &(struct member){ "manifest.json", S_IFREG, 0644, 0, 0, man });
	/* A repeated layer as a symlink, as docker save writes one. */
	tar_add(a, &(struct member){ "dup/layer.tar", S_IFLNK, 0777, 0, 0, "../layer0/layer.tar" });
	archive_write_close(a);
	archive_write_free(a);
}

/* ---- the layers ---- */

/* cap_net_raw+ep, as v2 and as v3 (rootid 0). */
static const unsigned char cap_v2[20] = { 0x01, 0x00, 0x00, 0x02, 0x00, 0x20, 0x00, 0x00, 0x00, 0x20 };
static const unsigned char cap_v3[24] = { 0x01, 0x00, 0x00, 0x03, 0x00, 0x20, 0x00, 0x00, 0x00, 0x20 };

static const struct member layer1[] = {
	{ "./", S_IFDIR, 0755 },
	{ "etc/", S_IFDIR, 0755 },
	{ "etc/a", S_IFREG, 0644, 0, 0, "alpha\n" },
	{ "etc/b", S_IFREG, 0600, 0, 42, "bravo\n" },
	{ "etc/a-link", 0, 0644, 0, 0, "etc/a" },
	{ "etc/sl", S_IFLNK, 0777, 0, 0, "a" },
	{ "bin/tool", S_IFREG, 04755, 1000, 1000, "#!/bin/sh\n" }, /* bin/ not in the archive */
	{ "bin/ping", S_IFREG, 0755, 0, 0, "ping", "security.capability", cap_v2, sizeof(cap_v2) },
	{ "bin/tagged", S_IFREG, 0644, 0, 0, "t", "user.cove.test", "yes", 3 },
	{ "bin/trusted", S_IFREG, 0644, 0, 0, "t", "trusted.cove", "no", 2 },
	{ "dev/null", S_IFCHR, 0666 },
	{ "run/fifo", S_IFIFO, 0600, 5, 5 },
	{ "opq/", S_IFDIR, 0755 },
	{ "opq/x", S_IFREG, 0644, 0, 0, "x" },
	{ "opq/sub/y", S_IFREG, 0644, 0, 0, "y" },
	{ "del/deep/f", S_IFREG, 0644, 0, 0, "f" },
	{ NULL },
};

static const struct member layer2[] = {
	{ "etc/.wh.b", S_IFREG, 0644 },        { "etc/a", S_IFREG, 0644, 0, 0, "alpha 2\n" },
	{ "opq/z", S_IFREG, 0644, 0, 0, "z" }, /* before the marker: this layer's own, kept */
	{ "opq/.wh..wh..opq", S_IFREG, 0644 }, { ".wh.del", S_IFREG, 0644 },
	{ "srv/", S_IFDIR, 0750, 1000, 1000 }, { NULL },
};

static const struct member layer3[] = {
	{ "bin/ping3", S_IFREG, 0755, 0, 0, "p3", "security.capability", cap_v3, sizeof(cap_v3) },
	{ "home/nobody/f", S_IFREG, 0640, 65534, 65534, "n" },
	{ NULL },
};

static const struct member layer3b[] = {
	{ "other", S_IFREG, 0644, 0, 0, "another top layer\n" },
	{ NULL },
};

/* ---- checks ---- */

static const char *slurp_str(const char *path)
{
	static char s[256];
	s[0] = '\0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return "(missing)";
	ssize_t n = read(fd, s, sizeof(s) - 1);
	s[n > 0 ? n : 0] = '\0';
	close(fd);
	return s;
}

static bool has_mode(const char *path, mode_t type, mode_t mode, uid_t uid, gid_t gid)
{
	struct stat st;
	return lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == type && (st.st_mode & 07777) == mode &&
	       st.st_uid == uid && st.st_gid == gid;
}

static bool missing(const char *path)
{
	struct stat st;
	return lstat(path, &st) < 0 && errno == ENOENT;
}

static int count(const char *dir)
{
	struct dirent **es;
	int n = scandir(dir, &es, NULL, NULL), k = 0;
	for (int i = 0; i < n; i++) {
		k += es[i]->d_name[0] != '.';
		free(es[i]);
	}
	free(es);
	return n < 0 ? -1 : k;
}

static void check_tree(const char *root)
{
	PATH_VAR(r, "%s", root); /* root is one of pathf's rotating buffers */
	char x[64];
	ssize_t n;
	struct stat a, b;
	CHECK_STR(slurp_str(pathf("%s/etc/a", r)), "alpha 2\n", "layer 2 replaced etc/a");
	CHECK_STR(slurp_str(pathf("%s/etc/a-link", r)), "alpha\n", "the hard link kept layer 1's file");
	CHECK1(lstat(pathf("%s/etc/a-link", r), &a) == 0 && a.st_nlink == 1, "and is its only name now");
	CHECK1(missing(pathf("%s/etc/b", r)), "etc/b whited out");
	CHECK1(has_mode(pathf("%s/etc/sl", r), S_IFLNK, 0777, 0, 0), "symlink kept");
	CHECK1(has_mode(pathf("%s/bin", r), S_IFDIR, 0755, 0, 0), "a missing parent folder made 0755 root's");
	CHECK1(has_mode(pathf("%s/bin/tool", r), S_IFREG, 04755, 1000, 1000), "setuid file owned 1000:1000");
	n = getxattr(pathf("%s/bin/ping", r), "security.capability", x, sizeof(x));
	CHECK1(n == 20 && memcmp(x, cap_v2, 20) == 0, "file capability kept (%zd)", n);
	n = getxattr(pathf("%s/bin/ping3", r), "security.capability", x, sizeof(x));
	CHECK1(n == 20 && memcmp(x, cap_v2, 20) == 0, "a v3 capability stored as v2 (%zd)", n);
	n = getxattr(pathf("%s/bin/tagged", r), "user.cove.test", x, sizeof(x));
	CHECK1(n == 3 && memcmp(x, "yes", 3) == 0, "user xattr kept");
	CHECK1(getxattr(pathf("%s/bin/trusted", r), "trusted.cove", x, sizeof(x)) < 0 && errno == ENODATA,
	       "trusted xattr dropped");
	CHECK1(missing(pathf("%s/dev/null", r)), "device node skipped");
	CHECK1(has_mode(pathf("%s/run/fifo", r), S_IFIFO, 0600, 5, 5), "FIFO made, owned 5:5");
	CHECK1(missing(pathf("%s/opq/x", r)) && missing(pathf("%s/opq/sub", r)), "opaque folder hid layer 1's files");
	CHECK_STR(slurp_str(pathf("%s/opq/z", r)), "z", "and kept its own layer's");
	CHECK1(missing(pathf("%s/del", r)), "a whited out folder removed with its contents");
	CHECK1(has_mode(pathf("%s/srv", r), S_IFDIR, 0750, 1000, 1000), "folder mode and owner");
	CHECK1(has_mode(pathf("%s/home/nobody/f", r), S_IFREG, 0640, 65534, 65534), "owned by 65534");
	CHECK1(lstat(pathf("%s/etc/a", r), &a) == 0 && a.st_mtime == 1700000000, "mtime kept");
	CHECK1(stat(r, &b) == 0 && (b.st_mode & 07777) == 0755, "rootfs 0755");
}

static void check_config(const struct image_info *info)
{
	const struct image_config *c = &info->config;
	CHECK1(c->n_env == 2 && strcmp(c->env[1], "GREETING=hi") == 0, "Env");
	CHECK_STR(c->working_dir, "/srv", "WorkingDir");
	CHECK_STR(c->user, "1000:1000", "User");
	CHECK1(c->n_entrypoint == 2 && strcmp(c->entrypoint[0], "/bin/sh") == 0 && c->n_cmd == 1 &&
		       strcmp(c->cmd[0], "echo hi") == 0,
	       "Entrypoint and Cmd");
	bool p8080 = false, p53 = false;
	for (size_t i = 0; i < c->n_ports; i++) {
		p8080 |= c->ports[i].port == 8080 && strcmp(c->ports[i].proto, "tcp") == 0;
		p53 |= c->ports[i].port == 53 && strcmp(c->ports[i].proto, "udp") == 0;
	}
	CHECK1(c->n_ports == 2 && p8080 && p53, "ExposedPorts");
	CHECK1(c->n_labels == 1 && strcmp(c->label_keys[0], "org.example.a") == 0 &&
		       strcmp(c->label_values[0], "b") == 0,
	       "Labels");
}

static struct image_store store;
static struct buf l1, l2, l3, l3b;

static void test_layout(void)
{
	struct image_spec spec = { { l1, l2, l3 }, 3 };
	struct image_info info = { 0 };
	struct cove_err err = { 0 };
	char want[DIGEST_STR_MAX];
	PATH_VAR(dir, "%s/layout", base);
	make_layout(dir, &spec, want);
	int r = image_import_path(&store, dir, NULL, &info, &err);
	CHECK1(r == 0, "import an OCI layout folder of 3 layers (%s)", err.msg);
	if (r < 0)
		return;
	CHECK1(strcmp(info.manifest, want) == 0, "the amd64 manifest of the index chosen");
	CHECK1(info.n_layers == 3, "3 layers");
	CHECK1(count(store.layers) == 3, "one tree per layer (%d)", count(store.layers));
	CHECK1(count(pathf("%s/blobs/sha256", store.images)) == 5, "5 blobs: manifest, config, 3 layers (%d)",
	       count(pathf("%s/blobs/sha256", store.images)));
	CHECK1(btrfs_is_subvol(info.tree) == 1, "the top layer is a subvolume");
	CHECK1(open(pathf("%s/rootfs/new", info.tree), O_CREAT | O_WRONLY | O_CLOEXEC, 0644) < 0 && errno == EROFS,
	       "and read-only");
	check_tree(pathf("%s/rootfs", info.tree));
	check_config(&info);
	char below[PATH_MAX];
	char *ids[2] = { info.config.diff_ids[0], NULL };
	char chain[DIGEST_STR_MAX];
	oci_chain_id(ids, 1, chain);
	image_layer_path(&store, chain, below);
	CHECK_STR(slurp_str(pathf("%s/rootfs/etc/b", below)), "bravo\n", "layer 1's tree still has etc/b");

	struct image_info again = { 0 };
	r = image_open(&store, info.manifest, &again, &err);
	CHECK1(r == 0 && strcmp(again.tree, info.tree) == 0 && again.config.n_env == 2,
	       "image_open finds it by its manifest digest (%s)", err.msg);
	image_info_free(&again);
	image_info_free(&info);

	/* The same image as a tar of the layout: nothing new. */
	PATH_VAR(tarfile, "%s/layout.tar", base);
	tar_folder(dir, tarfile);
	char *before = store_names(&store);
	r = image_import_path(&store, tarfile, "v1", &info, &err);
	char *after = store_names(&store);
	CHECK1(r == 0 && strcmp(info.manifest, want) == 0, "import the layout as a tar, by ref name (%s)", err.msg);
	CHECK1(strcmp(before, after) == 0, "no blob added, the tar's other members dropped");
	CHECK1(count(store.layers) == 3, "no tree added");
	free(before);
	free(after);
	image_info_free(&info);
}

static void test_shared_and_docker(void)
{
	struct image_spec spec = { { l1, l2, l3b }, 3 };
	struct image_info info = { 0 };
	struct cove_err err = { 0 };
	PATH_VAR(file, "%s/docker.tar", base);
	make_docker_archive(&spec, "example/app:1", file);
	int r = image_import_path(&store, file, NULL, &info, &err);
	CHECK1(r == 0, "import a docker archive sharing 2 layers (%s)", err.msg);
	if (r < 0)
		return;
	CHECK1(count(store.layers) == 4, "one tree added, the shared 2 unpacked once (%d)", count(store.layers));
	CHECK1(info.n_tags == 1 && strcmp(info.tags[0], "example/app:1") == 0, "its RepoTag");
	CHECK_STR(slurp_str(pathf("%s/rootfs/other", info.tree)), "another top layer\n", "its top layer");
	CHECK_STR(slurp_str(pathf("%s/rootfs/etc/a", info.tree)), "alpha 2\n", "on the shared ones");
	CHECK1(blob_exists(&store.blobs, info.manifest), "a manifest stored for it");
	struct image_info again = { 0 };
	r = image_open(&store, info.manifest, &again, &err);
	CHECK1(r == 0 && strcmp(again.chain_id, info.chain_id) == 0, "image_open on it (%s)", err.msg);
	image_info_free(&again);
	image_info_free(&info);
}

/* A hostile or broken image is refused, and the store is as before. */
static void refused(const char *what, struct image_spec *spec, const char *expect)
{
	static int seq;
	struct image_info info = { 0 };
	struct cove_err err = { 0 };
	char m[DIGEST_STR_MAX];
	PATH_VAR(dir, "%s/bad%d", base, seq++);
	make_layout(dir, spec, m);
	char *before = store_names(&store);
	int r = image_import_path(&store, dir, NULL, &info, &err);
	check_refused(what, r, &err, COVE_EINVAL, expect, &store, before);
	if (r == 0)
		image_info_free(&info);
}

/* A tar of one raw header block of type type (a pax 'x' or GNU 'L' header)
 * that claims size bytes of header data, followed by only a little. */
static struct buf huge_header(char type, const char *size)
{
	struct buf b = { calloc(1, 2048), 2048 };
	char *h = b.p;
	strcpy(h, "././@LongLink");
	strcpy(h + 100, "0000644");
	strcpy(h + 108, "0000000");
	strcpy(h + 116, "0000000");
	snprintf(h + 124, 12, "%s", size);
	strcpy(h + 136, "00000000000");
	h[156] = type;
	memcpy(h + 257, "ustar\00000", 8);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < 512; i++)
		sum += (unsigned char)h[i];
	snprintf(h + 148, 8, "%06o", sum);
	memset(h + 512, 'a', 1024);
	return b;
}

static void test_hostile(void)
{
	PATH_VAR(outside, "%s/outside", base);
	mkdir(outside, 0755);
	char huge[1 << 17];
	memset(huge, 'a', sizeof(huge) - 1);
	huge[sizeof(huge) - 1] = '\0';
	struct {
		const char *what, *expect;
		struct member ms[3];
	} cases[] = {
		{ "'..' in a name", "'..'", { { "a/../../evil", S_IFREG, 0644, 0, 0, "x" } } },
		{ "an absolute name", "absolute", { { "/etc/evil", S_IFREG, 0644, 0, 0, "x" } } },
		{ "a write through a symlink of the layer",
		  "symlink",
		  { { "esc", S_IFLNK, 0777, 0, 0, outside }, { "esc/x", S_IFREG, 0644, 0, 0, "x" } } },
		{ "a write through a lower layer's symlink", "symlink", { { "etc/sl/x", S_IFREG, 0644, 0, 0, "x" } } },
		{ "a hard link out of the tree", "'..'", { { "hl", 0, 0644, 0, 0, "../../../etc/passwd" } } },
		{ "an absolute hard link", "absolute", { { "hl", 0, 0644, 0, 0, "/etc/passwd" } } },
		{ "a hard link to nothing", "not in the layer", { { "hl", 0, 0644, 0, 0, "no/such" } } },
		{ "a hard link through a symlink",
		  "not in the layer",
		  { { "esc", S_IFLNK, 0777, 0, 0, "/etc" }, { "hl", 0, 0644, 0, 0, "esc/passwd" } } },
		{ "a huge name", "longer than", { { huge, S_IFREG, 0644, 0, 0, "x" } } },
		{ "an owner no sandbox maps", "outside the", { { "f", S_IFREG, 0644, 70000, 0, "x" } } },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct buf bad = layer(cases[i].ms, GZ);
		struct image_spec spec = { { l1, bad }, 2 };
		refused(cases[i].what, &spec, cases[i].expect);
		free(bad.p);
	}
	CHECK1(count(outside) == 0 && missing("/etc/evil"), "nothing written outside");

	/* Headers that claim 8 GiB - 1 of pax data or of a GNU long name. */
	struct buf pax = huge_header('x', "77777777777"), gnu = huge_header('L', "77777777777");
	struct image_spec hs = { { l1, pax }, 2 };
	refused("a pax header of 8 GiB", &hs, "too large");
	hs = (struct image_spec){ { l1, gnu }, 2 };
	refused("a GNU long name of 8 GiB", &hs, "too large");
	free(pax.p);
	free(gnu.p);

	struct buf ok = layer(layer3b, GZ);
	struct image_spec spec = { { l1, ok }, 2, .corrupt_blob = true };
	refused("a layer blob that does not match its digest", &spec, "digest mismatch");
	spec = (struct image_spec){ { l1, ok },
				    2,
				    .corrupt_diff_id =
					    "sha256:"
					    "0000000000000000000000000000000000000000000000000000000000000000" };
	refused("a layer that does not match its diff id", &spec, "diff id");
	/* Cut in the middle of a member's data. */
	struct buf cut = uncompressed(ok);
	cut.n = 520;
	spec = (struct image_spec){ { l1, cut }, 2 };
	refused("a truncated layer", &spec, "");
	free(cut.p);
	free(ok.p);
}

/* The overlay driver (plain folders, copies for snapshots) makes the same
 * trees from the same layout. */
static void test_overlay_driver(void)
{
	struct pool pool;
	struct image_store s2;
	struct image_info info = { 0 };
	struct cove_err err = { 0 };
	int r = pool_open(&pool, pathf("%s/odata", base), STORAGE_OVERLAY, 0, &err);
	CHECK1(r == 0 && image_store_open(&s2, &pool, &err) == 0, "an overlay-driver pool (%s)", err.msg);
	if (r < 0)
		return;
	r = image_import_path(&s2, pathf("%s/layout", base), NULL, &info, &err);
	CHECK1(r == 0, "import the layout with the overlay driver (%s)", err.msg);
	if (r == 0) {
		CHECK1(count(s2.layers) == 3, "one folder per layer");
		check_tree(pathf("%s/rootfs", info.tree));
		image_info_free(&info);
	}
	image_store_close(&s2);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!tap_loop_tmpdir(base))
		return tap_done();
	struct pool pool;
	struct cove_err err = { 0 };
	int r = pool_open(&pool, pathf("%s/data", base), STORAGE_BTRFS, 1ULL << 30, &err);
	CHECK1(r == 0, "open a btrfs pool (%s)", err.msg);
	if (r == 0 && image_store_open(&store, &pool, &err) == 0) {
		l1 = layer(layer1, GZ);
		l2 = layer(layer2, ZST);
		l3 = layer(layer3, 0);
		l3b = layer(layer3b, GZ);
		test_layout();
		test_shared_and_docker();
		test_hostile();
		test_overlay_driver();
		image_store_close(&store);
	}
	if (r == 0)
		CHECK1(umount2(pool.dir, 0) == 0, "umount the pool");
	CHECK1(nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) == 0, "remove the test directory");
	return tap_done();
}

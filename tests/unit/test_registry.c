/* The registry client against Debian's docker-registry, started here on
 * 127.0.0.1 with a config of this test's own (and a second one with
 * htpasswd Basic auth), filled by this test through the registry's push
 * API: pulls by tag, through an index, by digest, a transfer cut off and
 * resumed with Range, refusals (unknown tag, no login, a wrong password)
 * leaving nothing behind. Needs root, /dev/loop-control, mkfs.btrfs and
 * docker-registry (scripts/deps.sh); all traffic is to loopback. */
#include <crypt.h>
#include <pthread.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/encoding.h"
#include "image/challenge.h"
#include "image/digest.h"
#include "image/image.h"
#include "image/registry.h"
#include "sys/pool.h"
#include "tap.h"
#include "imagetest.h"

static char base[] = "/var/tmp/cove-test-registry-XXXXXX";

#define PATH_VAR(name, ...)  \
	char name[PATH_MAX]; \
	snprintf(name, sizeof(name), __VA_ARGS__)

struct registry {
	pid_t pid;
	int port;
	char host[64]; /* "127.0.0.1:PORT" */
};

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t n = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || getsockname(fd, (struct sockaddr *)&a, &n) < 0)
		return -1;
	close(fd);
	return ntohs(a.sin_port);
}

static long http(const char *method, const char *url, const char *user, const char *type, const void *body, size_t len,
		 char *location, size_t loc_cap);

/* Start docker-registry on 127.0.0.1 with its config and log in dir, its
 * blobs in store, and auth (a YAML "auth:" section, or ""). */
static bool registry_start(struct registry *r, const char *dir, const char *store, const char *auth)
{
	mkdir(dir, 0700);
	r->port = free_port();
	snprintf(r->host, sizeof(r->host), "127.0.0.1:%d", r->port);
	PATH_VAR(cfg, "%s/config.yml", dir);
	FILE *f = fopen(cfg, "w");
	fprintf(f,
		"version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
		"storage:\n  filesystem:\n    rootdirectory: %s\n"
		"http:\n  addr: 127.0.0.1:%d\n%s",
		store, r->port, auth);
	fclose(f);
	PATH_VAR(log, "%s/registry.log", dir);
	r->pid = fork();
	if (r->pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		dup2(fd, 1);
		dup2(fd, 2);
		execlp("docker-registry", "docker-registry", "serve", cfg, (char *)NULL);
		_exit(127);
	}
	char url[128];
	snprintf(url, sizeof(url), "http://%s/v2/", r->host);
	for (int i = 0; i < 200; i++) {
		long st = http("GET", url, NULL, NULL, NULL, 0, NULL, 0);
		if (st == 200 || st == 401)
			return true;
		usleep(50000);
	}
	return false;
}

static void registry_stop(struct registry *r)
{
	if (r->pid > 0) {
		kill(r->pid, SIGTERM);
		waitpid(r->pid, NULL, 0);
	}
	r->pid = 0;
}

/* ---- the push side, by hand ---- */

struct hdr {
	char *loc;
	size_t cap;
};

static size_t on_hdr(char *p, size_t size, size_t n, void *arg)
{
	struct hdr *h = arg;
	size_t len = size * n;
	if (h->loc && len > 9 && strncasecmp(p, "Location:", 9) == 0) {
		size_t v = len - 9;
		while (v && (p[9 + v - 1] == '\r' || p[9 + v - 1] == '\n'))
			v--;
		snprintf(h->loc, h->cap, "%.*s", (int)(v > 0 ? v - 1 : 0), p + 10);
	}
	return len;
}

static size_t on_discard(char *p, size_t size, size_t n, void *arg)
{
	return size * n;
}

/* One request (user: "name:password" or NULL); the HTTP status, or -1. */
static long http(const char *method, const char *url, const char *user, const char *type, const void *body, size_t len,
		 char *location, size_t loc_cap)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	struct hdr hd = { location, loc_cap };
	char ct[256];
	if (type) {
		snprintf(ct, sizeof(ct), "Content-Type: %s", type);
		h = curl_slist_append(h, ct);
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_hdr);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &hd);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_discard);
	if (user) {
		curl_easy_setopt(c, CURLOPT_USERPWD, user);
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
	}
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	} else if (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
	}
	long st = -1;
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return st;
}

/* Push a blob (monolithic upload); its digest to d. */
static bool push_blob(const struct registry *r, const char *user, const char *repo, const void *p, size_t n,
		      char d[DIGEST_STR_MAX])
{
	char url[1024], loc[768];
	digest_of(p, n, d);
	snprintf(url, sizeof(url), "http://%s/v2/%s/blobs/uploads/", r->host, repo);
	if (http("POST", url, user, NULL, NULL, 0, loc, sizeof(loc)) != 202)
		return false;
	snprintf(url, sizeof(url), "%s%s%sdigest=%s", loc[0] == '/' ? "" : "", loc, strchr(loc, '?') ? "&" : "?", d);
	if (loc[0] == '/') {
		char abs[1024];
		snprintf(abs, sizeof(abs), "http://%s%s", r->host, url);
		snprintf(url, sizeof(url), "%s", abs);
	}
	return http("PUT", url, user, "application/octet-stream", p, n, NULL, 0) == 201;
}

static bool push_manifest(const struct registry *r, const char *user, const char *repo, const char *tag,
			  const char *type, const char *doc)
{
	char url[1024];
	snprintf(url, sizeof(url), "http://%s/v2/%s/manifests/%s", r->host, repo, tag);
	return http("PUT", url, user, type, doc, strlen(doc), NULL, 0) == 201;
}

/* Push an image of the layers as repo:tag (and repo:TAG-index, an index
 * naming it for linux/amd64); the manifest's digest to ret. */
static bool push_image(const struct registry *r, const char *user, const char *repo, const char *tag, struct buf *ls,
		       size_t n, char ret[DIGEST_STR_MAX])
{
	char cfg[2048], man[4096], idx[1024], ids[1024] = "", d[DIGEST_STR_MAX], cd[DIGEST_STR_MAX];
	snprintf(man, sizeof(man),
		 "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
		 "\"layers\":[");
	bool ok = true;
	size_t off = strlen(man);
	for (size_t i = 0; i < n; i++) {
		diff_id(ls[i], d);
		snprintf(ids + strlen(ids), sizeof(ids) - strlen(ids), "%s\"%s\"", i ? "," : "", d);
		ok &= push_blob(r, user, repo, ls[i].p, ls[i].n, d);
		off += (size_t)snprintf(man + off, sizeof(man) - off,
					"%s{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\","
					"\"digest\":\"%s\",\"size\":%zu}",
					i ? "," : "", d, ls[i].n);
	}
	snprintf(cfg, sizeof(cfg),
		 "{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Cmd\":[\"sh\"]},"
		 "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[%s]}}",
		 ids);
	ok &= push_blob(r, user, repo, cfg, strlen(cfg), cd);
	snprintf(man + off, sizeof(man) - off,
		 "],\"config\":{\"mediaType\":\"application/"
		 "vnd.oci.image.config.v1+json\",\"digest\":\"%s\",\"size\":%zu}}",
		 cd, strlen(cfg));
	ok &= push_manifest(r, user, repo, tag, "application/vnd.oci.image.manifest.v1+json", man);
	digest_of(man, strlen(man), ret);
	snprintf(idx, sizeof(idx),
		 "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":["
		 "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"%s\",\"size\":%zu,"
		 "\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}}]}",
		 ret, strlen(man));
	char itag[128];
	snprintf(itag, sizeof(itag), "%s-index", tag);
	ok &= push_manifest(r, user, repo, itag, "application/vnd.oci.image.index.v1+json", idx);
	return ok;
}

/* ---- the tests ---- */

static struct image_store store;

static const struct member layer_a[] = {
	{ "etc/", S_IFDIR, 0755 },
	{ "etc/os-release", S_IFREG, 0644, 0, 0, "ID=test\n" },
	{ "bin/app", S_IFREG, 0755, 1000, 1000, "#!/bin/sh\necho app\n" },
	{ NULL },
};

static const struct member layer_b[] = {
	{ "etc/.wh.os-release", S_IFREG, 0644 },
	{ "srv/data", S_IFREG, 0640, 0, 0, "data\n" },
	{ NULL },
};

static void refused(const char *what, const char *ref, const struct registry_opts *o, int code, const char *expect)
{
	struct image_info info;
	struct cove_err err = { 0 };
	char *before = store_names(&store);
	int r = image_pull(&store, ref, o, &info, &err);
	check_refused(what, r, &err, code, expect, &store, before);
	if (r == 0)
		image_info_free(&info);
}

static void test_anonymous(const struct registry *reg)
{
	PATH_VAR(scratch, "%s/layer.tmp", base);
	struct buf ls[2] = { layer_at(scratch, layer_a, GZ), layer_at(scratch, layer_b, ZST) };
	char want[DIGEST_STR_MAX], ref[256];
	CHECK1(push_image(reg, NULL, "test/app", "v1", ls, 2, want), "push a 2-layer image to the registry");
	struct image_info info = { 0 };
	struct cove_err err = { 0 };
	snprintf(ref, sizeof(ref), "%s/test/app:v1", reg->host);
	int r = image_pull(&store, ref, NULL, &info, &err);
	CHECK1(r == 0 && strcmp(info.manifest, want) == 0, "pull it by tag over plain HTTP from loopback (%s)",
	       err.msg);
	if (r == 0) {
		CHECK1(access(pathf("%s/rootfs/etc/os-release", info.tree), F_OK) < 0 &&
			       access(pathf("%s/rootfs/bin/app", info.tree), X_OK) == 0 &&
			       access(pathf("%s/rootfs/srv/data", info.tree), F_OK) == 0,
		       "its layers unpacked (gzip, then zstd with a whiteout)");
		CHECK1(info.n_tags == 1 && strcmp(info.tags[0], ref) == 0, "named by the reference (%s)", info.tags[0]);
		CHECK1(info.config.n_cmd == 1 && strcmp(info.config.cmd[0], "sh") == 0, "its config");
		image_info_free(&info);
	}
	snprintf(ref, sizeof(ref), "%s/test/app:v1-index", reg->host);
	char *before = store_names(&store);
	r = image_pull(&store, ref, NULL, &info, &err);
	char *after = store_names(&store);
	CHECK1(r == 0 && strcmp(info.manifest, want) == 0, "pull through an index: its linux/amd64 manifest (%s)",
	       err.msg);
	CHECK1(strcmp(before, after) == 0, "nothing downloaded again");
	free(before);
	free(after);
	if (r == 0)
		image_info_free(&info);
	snprintf(ref, sizeof(ref), "%s/test/app@%s", reg->host, want);
	r = image_pull(&store, ref, NULL, &info, &err);
	CHECK1(r == 0 && strcmp(info.manifest, want) == 0, "pull by digest (%s)", err.msg);
	if (r == 0)
		image_info_free(&info);
	free(ls[0].p);
	free(ls[1].p);

	snprintf(ref, sizeof(ref), "%s/test/app:nope", reg->host);
	refused("an unknown tag", ref, NULL, COVE_ENOTFOUND, "HTTP 404");
}

/* A layer of 1 MiB of noise (gzip does not shrink it), so that the cut
 * falls inside the transfer. */
static void test_resume(const struct registry *reg)
{
	PATH_VAR(scratch, "%s/layer.tmp", base);
	static char noise[1 << 20];
	unsigned x = 12345;
	for (size_t i = 0; i < sizeof(noise) - 1; i++) {
		x = x * 1103515245 + 12345;
		noise[i] = (char)(32 + (x >> 16) % 90);
	}
	struct member big[] = { { "big", S_IFREG, 0644, 0, 0, noise }, { NULL } };
	struct buf ls[1] = { layer_at(scratch, big, GZ) };
	char want[DIGEST_STR_MAX], ref[256];
	CHECK1(push_image(reg, NULL, "test/big", "v1", ls, 1, want), "push an image with a 1 MiB layer");
	struct registry_stats stats = { 0 };
	struct registry_opts o = { .test_cut_after = 300000, .stats = &stats };
	struct image_info info = { 0 };
	struct cove_err err = { 0 };
	snprintf(ref, sizeof(ref), "%s/test/big:v1", reg->host);
	int r = image_pull(&store, ref, &o, &info, &err);
	CHECK1(r == 0 && strcmp(info.manifest, want) == 0, "a transfer cut off after 300000 bytes is resumed (%s)",
	       err.msg);
	struct stat st;
	CHECK1(r == 0 && stat(pathf("%s/rootfs/big", info.tree), &st) == 0 && st.st_size == (off_t)sizeof(noise) - 1,
	       "and the layer is whole");
	CHECK1(stats.resumed == 1 && stats.blobs == 2, "two blobs downloaded, one transfer resumed");
	/* The layer's bytes came once: the resumed request asked for the rest. */
	CHECK1(stats.bytes >= ls[0].n && stats.bytes < ls[0].n + 10000,
	       "the layer's %zu bytes received once (%llu in all)", ls[0].n, (unsigned long long)stats.bytes);
	if (r == 0)
		image_info_free(&info);
	free(ls[0].p);
}

static void test_basic_auth(void)
{
	struct registry reg = { 0 };
	char auth[512];
	PATH_VAR(dir, "%s/reg-auth", base);
	PATH_VAR(pw, "%s/htpasswd", dir);
	mkdir(dir, 0700);
	FILE *f = fopen(pw, "w");
	fprintf(f, "alice:%s\n", crypt("s3cret", "$2b$05$abcdefghijklmnopqrstuu")); /* bcrypt, as the registry wants */
	fclose(f);
	snprintf(auth, sizeof(auth), "auth:\n  htpasswd:\n    realm: cove-test\n    path: %s\n", pw);
	if (!registry_start(&reg, dir, pathf("%s/store", dir), auth)) {
		CHECK1(0, "start docker-registry with htpasswd auth");
		registry_stop(&reg);
		return;
	}
	PATH_VAR(scratch, "%s/layer.tmp", base);
	struct member m[] = { { "private", S_IFREG, 0600, 0, 0, "for alice\n" }, { NULL } };
	struct buf ls[1] = { layer_at(scratch, m, GZ) };
	char want[DIGEST_STR_MAX], ref[256];
	CHECK1(push_image(&reg, "alice:s3cret", "priv/app", "v1", ls, 1, want), "push to it as alice");
	snprintf(ref, sizeof(ref), "%s/priv/app:v1", reg.host);
	refused("no login", ref, NULL, COVE_EPERM, "asks for a login");
	struct registry_opts bad = { .user = "alice", .password = "wrong" };
	refused("a wrong password", ref, &bad, COVE_EPERM, "not authorized with the login given");
	struct registry_opts good = { .user = "alice", .password = "s3cret" };
	struct image_info info = { 0 };
	struct cove_err err = { 0 };
	int r = image_pull(&store, ref, &good, &info, &err);
	CHECK1(r == 0 && strcmp(info.manifest, want) == 0, "pull with Basic auth (%s)", err.msg);
	if (r == 0)
		image_info_free(&info);
	free(ls[0].p);
	registry_stop(&reg);
}

static void test_challenge(void)
{
	struct challenge c;
	CHECK(challenge_parse("Bearer realm=\"https://auth.example/token\",service=\"reg.example\","
			      "scope=\"repository:library/python:pull\"",
			      &c) == 0 &&
		      strcmp(c.scheme, "Bearer") == 0 && strcmp(c.realm, "https://auth.example/token") == 0 &&
		      strcmp(c.service, "reg.example") == 0 && strcmp(c.scope, "repository:library/python:pull") == 0,
	      "a Bearer challenge");
	CHECK(challenge_parse("Basic realm=\"x\"", &c) == 0 && strcmp(c.scheme, "Basic") == 0, "a Basic one");
	CHECK(challenge_parse("", &c) < 0, "an empty one refused");
	CHECK(challenge_parse("Bearer realm=\"unterminated", &c) < 0, "an unterminated value refused");
}

/* ---- a token server (the registry's Bearer auth) ----
 *
 * The registry trusts tokens signed by the key of cert.pem (its
 * rootcertbundle): RS256 JWTs carrying the certificate (x5c), made here
 * with the openssl tool, granting what the request's scope asks. */

struct token_server {
	int fd, port;
	pthread_t thread;
	char dir[PATH_MAX];
	char x5c[4096]; /* the certificate, base64 DER */
	int requests;
};

static void b64url(const void *p, size_t n, char *out)
{
	base64_encode(p, n, out);
	for (char *c = out; *c; c++)
		*c = *c == '+' ? '-' : *c == '/' ? '_' : *c;
	out[strcspn(out, "=")] = '\0';
}

static bool run(const char *cmd)
{
	int st = system(cmd);
	return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* The JWT for scope ("repository:NAME:pull"), into out. */
static bool make_token(struct token_server *t, const char *scope, char *out, size_t cap)
{
	char hdr[4400], claims[1024], h64[6000], c64[1400], name[256] = "";
	sscanf(scope, "repository:%255[^:]", name);
	snprintf(hdr, sizeof(hdr), "{\"alg\":\"RS256\",\"typ\":\"JWT\",\"x5c\":[\"%s\"]}", t->x5c);
	long now = (long)time(NULL);
	snprintf(claims, sizeof(claims),
		 "{\"iss\":\"cove-test-issuer\",\"sub\":\"\",\"aud\":\"cove-test\",\"exp\":%ld,\"nbf\":%ld,"
		 "\"iat\":%ld,\"jti\":\"t%d\",\"access\":[{\"type\":\"repository\",\"name\":\"%s\","
		 "\"actions\":[\"pull\"]}]}",
		 now + 300, now - 10, now - 10, t->requests, name);
	b64url(hdr, strlen(hdr), h64);
	b64url(claims, strlen(claims), c64);
	PATH_VAR(in, "%s/jwt.in", t->dir);
	PATH_VAR(sig, "%s/jwt.sig", t->dir);
	FILE *f = fopen(in, "w");
	fprintf(f, "%s.%s", h64, c64);
	fclose(f);
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof(cmd), "openssl dgst -sha256 -sign %s/key.pem -out %s %s", t->dir, sig, in);
	if (!run(cmd))
		return false;
	struct buf sb = slurp(sig);
	char s64[1024];
	b64url(sb.p, sb.n, s64);
	free(sb.p);
	snprintf(out, cap, "%s.%s.%s", h64, c64, s64);
	return true;
}

static void *token_serve(void *arg)
{
	struct token_server *t = arg;
	for (;;) {
		int c = accept4(t->fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			return NULL;
		char req[4096], scope[512] = "", tok[8192], resp[9000];
		ssize_t n = read(c, req, sizeof(req) - 1);
		req[n > 0 ? n : 0] = '\0';
		const char *sc = strstr(req, "scope=");
		if (sc)
			sscanf(sc + 6, "%511[^& ]", scope);
		/* scope arrives URL-escaped: repository%3Atest%2Fapp%3Apull */
		char plain[512];
		size_t k = 0;
		for (const char *p = scope; *p && k + 1 < sizeof(plain); p++) {
			unsigned v;
			if (*p == '%' && sscanf(p + 1, "%2x", &v) == 1) {
				plain[k++] = (char)v;
				p += 2;
			} else {
				plain[k++] = *p;
			}
		}
		plain[k] = '\0';
		t->requests++;
		if (make_token(t, plain, tok, sizeof(tok))) {
			char body[8300];
			snprintf(body, sizeof(body), "{\"token\":\"%s\"}", tok);
			snprintf(resp, sizeof(resp),
				 "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
				 "Connection: close\r\n\r\n%s",
				 strlen(body), body);
			(void)!write(c, resp, strlen(resp));
		}
		close(c);
	}
}

static bool token_server_start(struct token_server *t, const char *dir)
{
	snprintf(t->dir, sizeof(t->dir), "%s", dir);
	mkdir(dir, 0700);
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey rsa:2048 -nodes -keyout %s/key.pem -out %s/cert.pem -days 1 "
		 "-subj /CN=cove-test 2>/dev/null && openssl x509 -in %s/cert.pem -outform DER -out %s/cert.der",
		 dir, dir, dir, dir);
	if (!run(cmd))
		return false;
	struct buf der = slurp(pathf("%s/cert.der", dir));
	base64_encode((const unsigned char *)der.p, der.n, t->x5c);
	free(der.p);
	t->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t n = sizeof(a);
	if (bind(t->fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(t->fd, 8) < 0 ||
	    getsockname(t->fd, (struct sockaddr *)&a, &n) < 0)
		return false;
	t->port = ntohs(a.sin_port);
	return pthread_create(&t->thread, NULL, token_serve, t) == 0;
}

static void token_server_stop(struct token_server *t)
{
	shutdown(t->fd, SHUT_RDWR);
	close(t->fd);
	pthread_join(t->thread, NULL);
}

/* A registry with token auth over the same blobs as the anonymous one:
 * the pull gets a token from the realm and pulls with it. */
static void test_bearer(const struct registry *anon)
{
	struct token_server t = { 0 };
	struct registry reg = { 0 };
	char auth[2048], ref[256];
	PATH_VAR(dir, "%s/reg-token", base);
	if (!token_server_start(&t, pathf("%s/tokens", base))) {
		CHECK1(0, "start a token server (openssl)");
		return;
	}
	snprintf(auth, sizeof(auth),
		 "auth:\n  token:\n    realm: http://127.0.0.1:%d/token\n    service: cove-test\n"
		 "    issuer: cove-test-issuer\n    rootcertbundle: %s/cert.pem\n",
		 t.port, t.dir);
	if (registry_start(&reg, dir, pathf("%s/store", base), auth)) {
		struct image_info info = { 0 };
		struct cove_err err = { 0 };
		PATH_VAR(scratch, "%s/layer.tmp", base);
		struct member m[] = { { "tokened", S_IFREG, 0644, 0, 0, "behind a token\n" }, { NULL } };
		struct buf ls[1] = { layer_at(scratch, m, GZ) };
		char want[DIGEST_STR_MAX], url[128];
		CHECK1(push_image(anon, NULL, "test/tok", "v1", ls, 1, want),
		       "push an image (beside the token registry)");
		free(ls[0].p);
		snprintf(url, sizeof(url), "http://%s/v2/test/tok/manifests/v1", reg.host);
		CHECK1(http("GET", url, NULL, NULL, NULL, 0, NULL, 0) == 401, "the token registry wants a token");
		struct registry_stats stats = { 0 };
		struct registry_opts o = { .stats = &stats };
		snprintf(ref, sizeof(ref), "%s/test/tok:v1", reg.host);
		int r = image_pull(&store, ref, &o, &info, &err);
		CHECK1(r == 0 && strcmp(info.manifest, want) == 0 && stats.blobs == 2,
		       "pull config and layer with an anonymous Bearer token (%s)", err.msg);
		CHECK1(t.requests == 1, "one token asked for, and used for every request (%d)", t.requests);
		if (r == 0)
			image_info_free(&info);
	} else {
		CHECK1(0, "start docker-registry with token auth");
	}
	registry_stop(&reg);
	token_server_stop(&t);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_challenge();
	if (access("/usr/bin/docker-registry", X_OK) < 0) {
		SKIP("needs docker-registry (scripts/deps.sh)");
		return tap_done();
	}
	if (!tap_loop_tmpdir(base))
		return tap_done();
	curl_global_init(CURL_GLOBAL_DEFAULT);
	struct pool pool;
	struct cove_err err = { 0 };
	struct registry reg = { 0 };
	int r = pool_open(&pool, pathf("%s/data", base), STORAGE_BTRFS, 1ULL << 30, &err);
	CHECK1(r == 0 && image_store_open(&store, &pool, &err) == 0, "a btrfs pool (%s)", err.msg);
	if (r == 0 && registry_start(&reg, pathf("%s/reg", base), pathf("%s/store", base), "")) {
		test_anonymous(&reg);
		test_resume(&reg);
		test_basic_auth();
		test_bearer(&reg);
	} else {
		CHECK1(0, "start docker-registry on 127.0.0.1");
	}
	registry_stop(&reg);
	if (r == 0) {
		image_store_close(&store);
		CHECK1(umount2(pool.dir, 0) == 0, "umount the pool");
	}
	CHECK1(nftw(base, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) == 0, "remove the test directory");
	return tap_done();
}

/* The registry client (registry.h). One curl easy handle per pull; every
 * request goes through get(), which answers a 401 once by authenticating
 * as its challenge asks and trying again. */
#include "image/registry.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "image/challenge.h"
#include "image/ref.h"
#include "image/source.h"

#define REGISTRY_TOKEN_MAX 8192
#define REGISTRY_PARALLEL 4 /* layers downloaded at once */
#define ACCEPT_MANIFESTS                                                                                \
	"Accept: application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, " \
	"application/vnd.docker.distribution.manifest.list.v2+json, "                                   \
	"application/vnd.docker.distribution.manifest.v2+json"

/* Where a response body goes: memory (documents, tokens) or a blob. */
struct sink {
	char *buf;
	size_t len, max;
	struct blob_writer *w;
	const struct blob_store *bs;
	uint64_t range_from; /* the blob bytes asked to be skipped (Range) */
	bool started, discard;
	uint64_t *cut_after; /* fault injection, shared by the pull: 0 = off */
	struct cove_err *err;
	/* A blob's progress goes to s's hook, every REPORT_STEP bytes. */
	const struct image_store *s;
	const struct oci_descriptor *d;
	uint64_t reported;
};

#define REPORT_STEP (1u << 20)

struct reg {
	CURL *c;
	struct image_ref ref;
	char base[IMAGE_REF_NAME_MAX + 16];  /* "https://host:port" */
	char authz[REGISTRY_TOKEN_MAX + 32]; /* "Authorization: Bearer ...", or "" */
	bool basic;                          /* send opts' credentials as Basic */
	const struct registry_opts *o;
	char challenge[2048], content_type[128];
	uint64_t cut_after;
	int auth_depth; /* a token server that asks for a token in turn is refused */
	struct registry_stats stats;
	struct source added;
};

static void copy_value(char *dst, size_t n, const char *p, size_t len)
{
	while (len > 0 && (p[len - 1] == '\r' || p[len - 1] == '\n' || p[len - 1] == ' '))
		len--;
	while (len > 0 && *p == ' ')
		p++, len--;
	snprintf(dst, n, "%.*s", (int)len, p);
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct reg *r = arg;
	size_t len = size * n;
	if (len > 17 && strncasecmp(p, "WWW-Authenticate:", 17) == 0)
		copy_value(r->challenge, sizeof(r->challenge), p + 17, len - 17);
	else if (len > 13 && strncasecmp(p, "Content-Type:", 13) == 0)
		copy_value(r->content_type, sizeof(r->content_type), p + 13, len - 13);
	return len;
}

/* The first bytes of a blob response: an error's body (a 401 before a
 * token is asked for, a 404) is not the blob's; a 200 to a Range request
 * is the whole blob again, so the writer starts over. */
static int sink_start(struct sink *k, CURL *c)
{
	long status = 0;
	k->started = true;
	(void)curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	k->discard = k->w && status != 200 && status != 206;
	if (!k->w || status != 200 || k->w->size == 0)
		return 0;
	uint64_t max = k->w->max;
	blob_writer_abort(k->w);
	return blob_writer_begin(k->bs, k->w, max, k->err);
}

struct body_ctx {
	struct reg *r;
	struct sink *k;
	CURL *c; /* the transfer's handle */
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct body_ctx *b = arg;
	struct sink *k = b->k;
	size_t len = size * n;
	if (!k->started && sink_start(k, b->c) < 0)
		return 0;
	if (k->discard)
		return len;
	if (!k->w) {
		if (len > k->max - k->len)
			return 0;
		char *nb = realloc(k->buf, k->len + len + 1);
		if (!nb)
			return 0;
		k->buf = nb;
		memcpy(k->buf + k->len, p, len);
		k->len += len;
		k->buf[k->len] = '\0';
		return len;
	}
	size_t take = len;
	bool cut = *k->cut_after && k->w->size + len >= *k->cut_after;
	if (cut) {
		take = (size_t)(*k->cut_after - k->w->size);
		*k->cut_after = 0;
	}
	if (blob_writer_write(k->w, p, take, k->err) < 0)
		return 0;
	b->r->stats.bytes += take;
	if (k->s && k->w->size >= k->reported + REPORT_STEP) {
		k->reported = k->w->size;
		image_report(k->s, k->d->digest, k->w->size, (uint64_t)k->d->size, "downloading");
	}
	return cut ? take : len;
}

/* A request on c, set up but not performed: k gets the body (through b,
 * which names c), *h holds the headers (the caller frees them after the
 * transfer), range the Range of a resumed blob. */
static void setup(struct reg *r, CURL *c, const char *url, const char *accept, struct body_ctx *b,
		  struct curl_slist **h, char range[32])
{
	struct sink *k = b->k;
	curl_easy_reset(c);
	r->challenge[0] = r->content_type[0] = '\0';
	k->started = false;
	*h = NULL;
	if (accept)
		*h = curl_slist_append(*h, accept);
	if (r->authz[0])
		*h = curl_slist_append(*h, r->authz);
	bool tls = strncmp(url, "https:", 6) == 0;
	(void)curl_easy_setopt(c, CURLOPT_URL, url);
	(void)curl_easy_setopt(c, CURLOPT_HTTPHEADER, *h);
	(void)curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	(void)curl_easy_setopt(c, CURLOPT_WRITEDATA, b);
	(void)curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	(void)curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	(void)curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
	(void)curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
	(void)curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	/* A redirect never downgrades a TLS request to plain HTTP. */
	(void)curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, tls ? "https" : "http,https");
	(void)curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	(void)curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
	(void)curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	(void)curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
	if (r->basic && r->o->user) {
		(void)curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		(void)curl_easy_setopt(c, CURLOPT_USERNAME, r->o->user);
		(void)curl_easy_setopt(c, CURLOPT_PASSWORD, r->o->password ? r->o->password : "");
	}
	if (k->w && k->w->size > 0) {
		snprintf(range, 32, "%llu-", (unsigned long long)k->w->size);
		(void)curl_easy_setopt(c, CURLOPT_RANGE, range);
		r->stats.resumed++;
	}
}

/* One request: the HTTP status to *status, curl's verdict to *cc. */
static void perform(struct reg *r, const char *url, const char *accept, struct sink *k, long *status, CURLcode *cc)
{
	struct curl_slist *h;
	char range[32];
	struct body_ctx b = { r, k, r->c };
	setup(r, r->c, url, accept, &b, &h, range);
	*cc = curl_easy_perform(r->c);
	*status = 0;
	(void)curl_easy_getinfo(r->c, CURLINFO_RESPONSE_CODE, status);
	curl_slist_free_all(h);
}

static int get(struct reg *r, const char *url, const char *accept, struct sink *k, long *status, CURLcode *cc,
	       struct cove_err *err);

static int http_error(struct reg *r, const char *what, long status, CURLcode cc, struct cove_err *err)
{
	if (cc != CURLE_OK)
		return err_set(err, COVE_EINTERNAL, "registry %s: %s: %s", r->ref.registry, what,
			       curl_easy_strerror(cc));
	return err_set(err,
		       status == 404                    ? COVE_ENOTFOUND
		       : status == 401 || status == 403 ? COVE_EPERM
							: COVE_EINTERNAL,
		       "registry %s: %s: HTTP %ld", r->ref.registry, what, status);
}

/* A Bearer token from the challenge's realm (with the credentials, if
 * any: as Basic), for the Authorization header of what follows. */
static int bearer(struct reg *r, const struct challenge *ch, struct cove_err *err)
{
	char url[2048];
	_cleanup_free_ char *svc = curl_easy_escape(r->c, ch->service, 0);
	_cleanup_free_ char *scope = curl_easy_escape(r->c, ch->scope, 0);
	if (strncmp(ch->realm, "https://", 8) != 0 && strncmp(ch->realm, "http://", 7) != 0)
		return err_set(err, COVE_EINVAL, "registry: token realm '%.100s' is not an HTTP URL", ch->realm);
	snprintf(url, sizeof(url), "%s%sservice=%s%s%s", ch->realm, strchr(ch->realm, '?') ? "&" : "?", svc ? svc : "",
		 ch->scope[0] ? "&scope=" : "", ch->scope[0] && scope ? scope : "");
	struct sink k = { .max = REGISTRY_TOKEN_MAX, .err = err };
	long status;
	CURLcode cc;
	r->authz[0] = '\0';
	r->basic = r->o->user != NULL;
	int rc = get(r, url, NULL, &k, &status, &cc, err);
	r->basic = false;
	_cleanup_free_ char *body = k.buf;
	if (rc < 0)
		return -1;
	if (cc != CURLE_OK || status != 200)
		return http_error(r, "token", status, cc, err);
	json_auto_t *j = json_loadb(body ? body : "", k.len, 0, NULL);
	const char *tok = json_string_value(json_object_get(j, "token"));
	if (!tok)
		tok = json_string_value(json_object_get(j, "access_token"));
	if (!tok || !*tok || strlen(tok) > REGISTRY_TOKEN_MAX || strpbrk(tok, "\r\n"))
		return err_set(err, COVE_EINVAL, "registry: the token server's answer has no token");
	snprintf(r->authz, sizeof(r->authz), "Authorization: Bearer %s", tok);
	return 0;
}

static int authenticate(struct reg *r, struct cove_err *err)
{
	struct challenge ch;
	if (r->auth_depth > 1)
		return err_set(err, COVE_EINVAL, "registry: the token server asks for a token itself");
	int parsed = challenge_parse(r->challenge, &ch);
	if (parsed < 0 && r->auth_depth > 0) /* the token server's own 401 */
		return err_set(err, COVE_EPERM, "registry %s: the token server refused %s (HTTP 401)", r->ref.registry,
			       r->o->user ? "the login given" : "an anonymous pull: a login is needed");
	if (parsed < 0)
		return err_set(err, COVE_EINVAL, "registry: a 401 without a usable WWW-Authenticate");
	if (strcasecmp(ch.scheme, "Bearer") == 0) {
		r->auth_depth++;
		int rc = bearer(r, &ch, err);
		r->auth_depth--;
		return rc;
	}
	if (strcasecmp(ch.scheme, "Basic") != 0)
		return err_set(err, COVE_EINVAL, "registry: unknown authentication '%s'", ch.scheme);
	if (!r->o->user)
		return err_set(err, COVE_EPERM, "registry %s asks for a login", r->ref.registry);
	r->basic = true;
	return 0;
}

/* GET url into k, authenticating once if asked to. 0 with the final
 * status and curl code (the caller judges them), or -1 (a 401 even
 * after authenticating among them). */
static int get(struct reg *r, const char *url, const char *accept, struct sink *k, long *status, CURLcode *cc,
	       struct cove_err *err)
{
	for (int tries = 0;; tries++) {
		perform(r, url, accept, k, status, cc);
		if (*cc != CURLE_OK || *status != 401)
			return 0;
		if (tries > 0)
			return err_set(err, COVE_EPERM, "registry %s: not authorized%s", r->ref.registry,
				       r->o->user ? " with the login given" : "");
		free(k->buf);
		k->buf = NULL;
		k->len = 0;
		if (authenticate(r, err) < 0)
			return -1;
	}
}

/* A manifest or index by tag or digest, into memory; its digest must be
 * want (if not NULL). */
static int get_manifest(struct reg *r, const char *what, const char *want, char **ret, size_t *ret_len,
			char digest[DIGEST_STR_MAX], struct cove_err *err)
{
	char url[2048];
	snprintf(url, sizeof(url), "%s/v2/%s/manifests/%s", r->base, r->ref.repository, what);
	struct sink k = { .max = OCI_DOC_MAX, .err = err };
	long status;
	CURLcode cc;
	if (get(r, url, ACCEPT_MANIFESTS, &k, &status, &cc, err) < 0 ||
	    ((cc != CURLE_OK || status != 200) && http_error(r, url + strlen(r->base), status, cc, err) < 0)) {
		free(k.buf);
		return -1;
	}
	digest_of(k.buf ? k.buf : "", k.len, digest);
	if (want && strcmp(want, digest) != 0) {
		free(k.buf);
		return err_set(err, COVE_EINVAL, "registry: digest mismatch: manifest %s is %s", want, digest);
	}
	*ret = k.buf;
	*ret_len = k.len;
	return 0;
}

/* The kind of a document: its Content-Type, else its own mediaType. */
static enum oci_kind doc_kind(const char *content_type, const char *body, size_t len)
{
	char ct[128];
	snprintf(ct, sizeof(ct), "%.*s", (int)strcspn(content_type, "; "), content_type);
	enum oci_kind k = oci_media_kind(ct);
	if (k != OCI_KIND_UNKNOWN)
		return k;
	json_auto_t *j = json_loadb(body, len, 0, NULL);
	const char *mt = json_string_value(json_object_get(j, "mediaType"));
	return mt ? oci_media_kind(mt) : json_object_get(j, "manifests") ? OCI_KIND_INDEX : OCI_KIND_MANIFEST;
}

static int store_doc(struct reg *r, const struct blob_store *bs, const char *body, size_t len, struct cove_err *err)
{
	struct blob_writer w;
	char d[DIGEST_STR_MAX];
	bool fresh;
	if (blob_writer_begin(bs, &w, OCI_DOC_MAX, err) < 0)
		return -1;
	if (blob_writer_write(&w, body, len, err) < 0) {
		blob_writer_abort(&w);
		return -1;
	}
	if (blob_writer_commit(bs, &w, NULL, -1, d, &fresh, err) < 0)
		return -1;
	return fresh && source_note_added(&r->added, d) < 0 ? err_sys(err, ENOMEM, "pull") : 0;
}

/* The manifest for linux/amd64 that the reference leads to, stored; its
 * digest to ret, its document to *doc. */
static int resolve(struct reg *r, const struct blob_store *bs, char ret[DIGEST_STR_MAX], char **doc, size_t *doc_len,
		   struct cove_err *err)
{
	char what[DIGEST_STR_MAX + IMAGE_REF_TAG_MAX];
	const char *want = r->ref.digest[0] ? r->ref.digest : NULL;
	snprintf(what, sizeof(what), "%s", want ? want : r->ref.tag);
	for (int depth = 0;; depth++) {
		char *body = NULL;
		size_t len = 0;
		if (get_manifest(r, what, want, &body, &len, ret, err) < 0)
			return -1;
		enum oci_kind k = doc_kind(r->content_type, body, len);
		struct oci_descriptor d;
		if (k == OCI_KIND_MANIFEST) {
			*doc = body;
			*doc_len = len;
			return store_doc(r, bs, body, len, err);
		}
		int rc = k != OCI_KIND_INDEX
				 ? err_set(err, COVE_EINVAL, "registry: %s is neither an index nor a manifest", what)
			 : depth >= 4 ? err_set(err, COVE_EINVAL, "registry: indexes nested too deep")
				      : oci_parse_index(body, len, IMAGE_OS, IMAGE_ARCH, NULL, &d, err);
		free(body);
		if (rc < 0)
			return -1;
		snprintf(what, sizeof(what), "%s", d.digest);
		want = what;
	}
}

/* A blob whose bytes are all written: stored if they hash to its digest. */
static int commit_blob(struct reg *r, const struct image_store *s, struct blob_writer *w,
		       const struct oci_descriptor *d, struct cove_err *err)
{
	bool fresh;
	if (blob_writer_commit(&s->blobs, w, d->digest, d->size, NULL, &fresh, err) < 0)
		return -1;
	image_report(s, d->digest, (uint64_t)d->size, (uint64_t)d->size, "verified");
	r->stats.blobs++;
	return fresh && source_note_added(&r->added, d->digest) < 0 ? err_sys(err, ENOMEM, "pull") : 0;
}

/* One blob into the store, resumed after a broken transfer. */
static int fetch_blob(struct reg *r, const struct image_store *s, const struct oci_descriptor *d, struct cove_err *err)
{
	const struct blob_store *bs = &s->blobs;
	if (blob_exists(bs, d->digest)) {
		image_report(s, d->digest, (uint64_t)d->size, (uint64_t)d->size, "exists");
		return 0;
	}
	char url[2048];
	snprintf(url, sizeof(url), "%s/v2/%s/blobs/%s", r->base, r->ref.repository, d->digest);
	struct blob_writer w;
	if (blob_writer_begin(bs, &w, (uint64_t)d->size, err) < 0)
		return -1;
	struct sink k = { .w = &w, .bs = bs, .cut_after = &r->cut_after, .err = err, .s = s, .d = d };
	long status = 0;
	CURLcode cc = CURLE_OK;
	for (int tries = 0; tries < REGISTRY_TRIES; tries++) {
		if (get(r, url, NULL, &k, &status, &cc, err) < 0 || (err && err->code)) {
			blob_writer_abort(&w);
			return -1;
		}
		bool whole = cc == CURLE_OK && (status == 200 || status == 206);
		if (whole)
			break;
		/* A transfer cut off (or a 5xx) is tried again from where it
		 * stopped; any other answer is final. */
		if (cc == CURLE_OK && status < 500)
			break;
	}
	if (cc != CURLE_OK || (status != 200 && status != 206)) {
		blob_writer_abort(&w);
		return http_error(r, d->digest, status, cc, err);
	}
	return commit_blob(r, s, &w, d, err);
}

/* ---- layers, REGISTRY_PARALLEL at a time (a curl multi handle) ---- */

struct xfer {
	CURL *c;
	const struct oci_descriptor *d;
	struct blob_writer w;
	struct sink k;
	struct body_ctx b;
	struct curl_slist *h;
	char url[2048], range[32];
	int tries;
	bool busy;
};

static int xfer_start(struct reg *r, CURLM *m, struct xfer *x, struct cove_err *err)
{
	setup(r, x->c, x->url, NULL, &x->b, &x->h, x->range);
	if (curl_multi_add_handle(m, x->c) == CURLM_OK)
		return 0;
	curl_slist_free_all(x->h);
	x->h = NULL;
	return err_set(err, COVE_EINTERNAL, "libcurl: cannot add a transfer");
}

static int xfer_begin(struct reg *r, const struct image_store *s, CURLM *m, struct xfer *x,
		      const struct oci_descriptor *d, struct cove_err *err)
{
	x->d = d;
	x->tries = 0;
	snprintf(x->url, sizeof(x->url), "%s/v2/%s/blobs/%s", r->base, r->ref.repository, d->digest);
	if (blob_writer_begin(&s->blobs, &x->w, (uint64_t)d->size, err) < 0)
		return -1;
	x->k = (struct sink){ .w = &x->w, .bs = &s->blobs, .cut_after = &r->cut_after, .err = err, .s = s, .d = d };
	x->b = (struct body_ctx){ r, &x->k, x->c };
	if (xfer_start(r, m, x, err) < 0) {
		blob_writer_abort(&x->w);
		return -1;
	}
	x->busy = true;
	return 0;
}

/* x's transfer ended with cc: 1 when it goes on (tried again from where
 * it stopped), 0 when the blob is stored, -1 on failure. A 401 (a token
 * that ran out) is left to fetch_blob, which authenticates. */
static int xfer_done(struct reg *r, const struct image_store *s, CURLM *m, struct xfer *x, CURLcode cc,
		     struct cove_err *err)
{
	long status = 0;
	(void)curl_easy_getinfo(x->c, CURLINFO_RESPONSE_CODE, &status);
	(void)curl_multi_remove_handle(m, x->c);
	curl_slist_free_all(x->h);
	x->h = NULL;
	bool whole = cc == CURLE_OK && (status == 200 || status == 206);
	if (!(err && err->code) && !whole && (cc != CURLE_OK || status >= 500) && ++x->tries < REGISTRY_TRIES) {
		if (xfer_start(r, m, x, err) == 0)
			return 1;
	}
	x->busy = false;
	if ((err && err->code) || (!whole && status != 401)) {
		blob_writer_abort(&x->w);
		return err && err->code ? -1 : http_error(r, x->d->digest, status, cc, err);
	}
	if (whole)
		return commit_blob(r, s, &x->w, x->d, err);
	blob_writer_abort(&x->w);
	return fetch_blob(r, s, x->d, err);
}

/* Start layers from *next into the idle transfers; those stored already
 * are only reported. */
static int fill(struct reg *r, const struct image_store *s, CURLM *m, struct xfer *x, const struct oci_manifest *man,
		size_t *next, struct cove_err *err)
{
	for (int i = 0; i < REGISTRY_PARALLEL && *next < man->n_layers; i++) {
		if (x[i].busy)
			continue;
		const struct oci_descriptor *d = &man->layers[(*next)++];
		if (blob_exists(&s->blobs, d->digest))
			image_report(s, d->digest, (uint64_t)d->size, (uint64_t)d->size, "exists");
		else if (xfer_begin(r, s, m, &x[i], d, err) < 0)
			return -1;
	}
	return 0;
}

static int run_transfers(struct reg *r, const struct image_store *s, CURLM *m, struct xfer *x,
			 const struct oci_manifest *man, struct cove_err *err)
{
	size_t next = 0;
	for (;;) {
		int running = 0, q, active = 0;
		if (fill(r, s, m, x, man, &next, err) < 0)
			return -1;
		for (int i = 0; i < REGISTRY_PARALLEL; i++)
			active += x[i].busy;
		if (!active && next == man->n_layers)
			return 0;
		(void)curl_multi_perform(m, &running);
		CURLMsg *msg;
		while ((msg = curl_multi_info_read(m, &q))) {
			if (msg->msg != CURLMSG_DONE)
				continue;
			int i = 0;
			while (i < REGISTRY_PARALLEL && x[i].c != msg->easy_handle)
				i++;
			if (i < REGISTRY_PARALLEL && xfer_done(r, s, m, &x[i], msg->data.result, err) < 0)
				return -1;
		}
		(void)curl_multi_poll(m, NULL, 0, 1000, NULL);
	}
}

static int fetch_layers(struct reg *r, const struct image_store *s, const struct oci_manifest *man,
			struct cove_err *err)
{
	struct xfer x[REGISTRY_PARALLEL] = { 0 };
	CURLM *m = curl_multi_init();
	int rc = m ? 0 : err_set(err, COVE_EINTERNAL, "libcurl failed to start");
	for (int i = 0; rc == 0 && i < REGISTRY_PARALLEL; i++)
		if (!(x[i].c = curl_easy_init()))
			rc = err_set(err, COVE_EINTERNAL, "libcurl failed to start");
	if (rc == 0)
		rc = run_transfers(r, s, m, x, man, err);
	for (int i = 0; i < REGISTRY_PARALLEL; i++) {
		if (x[i].busy) {
			(void)curl_multi_remove_handle(m, x[i].c);
			curl_slist_free_all(x[i].h);
			blob_writer_abort(&x[i].w);
		}
		if (x[i].c)
			curl_easy_cleanup(x[i].c);
	}
	if (m)
		curl_multi_cleanup(m);
	return rc;
}

static int pull_blobs(struct reg *r, struct image_store *s, char manifest[DIGEST_STR_MAX], struct cove_err *err)
{
	_cleanup_free_ char *doc = NULL;
	size_t len = 0;
	struct oci_manifest m = { 0 };
	if (resolve(r, &s->blobs, manifest, &doc, &len, err) < 0 || oci_parse_manifest(doc, len, &m, err) < 0)
		return -1;
	for (size_t i = 0; i < m.n_layers; i++)
		image_report(s, m.layers[i].digest, 0, (uint64_t)m.layers[i].size, "waiting");
	int rc = fetch_blob(r, s, &m.config, err);
	if (rc == 0)
		rc = fetch_layers(r, s, &m, err);
	oci_manifest_free(&m);
	return rc;
}

int image_pull(struct image_store *s, const char *ref, const struct registry_opts *opts, struct image_info *ret,
	       struct cove_err *err)
{
	static const struct registry_opts none = { 0 };
	struct reg r = { .o = opts ? opts : &none, .added = { .dirfd = -1 } };
	if (image_ref_parse(ref, &r.ref, err) < 0)
		return -1;
	bool plain = image_ref_is_loopback(&r.ref) || r.o->insecure;
	snprintf(r.base, sizeof(r.base), "%s://%s", plain ? "http" : "https", image_ref_api_host(&r.ref));
	r.cut_after = r.o->test_cut_after;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0 || !(r.c = curl_easy_init()))
		return err_set(err, COVE_EINTERNAL, "libcurl failed to start");
	_cleanup_close_ int lock = image_lock_imports(s, err);
	char manifest[DIGEST_STR_MAX], full[2 * IMAGE_REF_NAME_MAX];
	int rc = -1;
	if (lock >= 0 && pull_blobs(&r, s, manifest, err) == 0) {
		(void)image_ref_format(&r.ref, full, sizeof(full));
		rc = image_finish_stored(s, &r.added, manifest, full, ret, err);
	} else {
		for (size_t i = 0; i < r.added.n_added; i++)
			(void)blob_remove(&s->blobs, r.added.added[i]);
	}
	source_free(&r.added);
	curl_easy_cleanup(r.c);
	if (r.o->stats)
		*r.o->stats = r.stats;
	return rc;
}

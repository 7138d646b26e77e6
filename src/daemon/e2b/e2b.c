/* E2B's front end: which requests are E2B's, their auth, and the error
 * shapes the SDK branches on (../shared/e2b-protocol.md, section 2). */
#include <limits.h>
#include <nettle/sha2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "common/cleanup.h"
#include "common/encoding.h"
#include "daemon/api/request.h"
#include "daemon/api/api.h"
#include "daemon/e2b/connect.h"
#include "daemon/e2b/e2b.h"
#include "daemon/e2b/e2b_private.h"
#include "daemon/http/access.h"
#include "daemon/proxy/proxy.h"
#include "engine/engine.h"

void e2b_json(struct http_req *req, int status, json_t *body)
{
	struct evbuffer *b = evbuffer_new();
	char *s = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (b && s)
		evbuffer_add(b, s, strlen(s));
	free(s);
	evhttp_add_header(http_req_out_headers(req), "Content-Type", "application/json");
	http_send_reply(req, status, status < 300 ? "OK" : "Error", b);
	if (b)
		evbuffer_free(b);
}

static json_t *message(const char *text)
{
	char msg[1024];
	utf8_sanitize(text, strlen(text), msg, sizeof(msg));
	return json_string(msg);
}

void e2b_error(struct http_req *req, int status, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	e2b_json(req, status, json_pack("{s:i, s:o}", "code", status, "message", message(text)));
}

void e2b_error_of(struct http_req *req, const struct cove_err *err)
{
	e2b_error(req, reply_status_of(err->code), "%s", err->msg[0] ? err->msg : "internal error");
}

void connect_reply(struct http_req *req, json_t *msg)
{
	e2b_json(req, 200, msg);
}

void connect_reply_error(struct http_req *req, const char *code, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	e2b_json(req, connect_status_of(code), json_pack("{s:s, s:o}", "code", code, "message", message(text)));
}

void connect_reply_err(struct http_req *req, const struct cove_err *err)
{
	connect_reply_error(req, connect_code_of(err->code), "%s", err->msg[0] ? err->msg : "internal error");
}

void e2b_envd_token(const struct sandbox *sb, char out[64])
{
	char label[64];
	snprintf(label, sizeof(label), "e2b-envd:%s", sb->id);
	access_derive(label, out);
}

bool e2b_proxy_domain(char *out, size_t cap)
{
	json_t *p = proxy_to_json();
	const char *domain = json_string_value(json_object_get(p, "domain"));
	int port = (int)json_integer_value(json_object_get(p, "port"));
	int n = domain && port > 0 ? snprintf(out, cap, "%s:%d", domain, port) : -1;
	json_decref(p);
	return n > 0 && (size_t)n < cap;
}

/* A request for another port of the sandbox than envd's goes to the port
 * proxy: 307 to the same path there (the E2b-Sandbox-* headers go along
 * and route it), on the proxy's address, or the host the client used when
 * the proxy listens on every address. false when it does not serve. */
static bool to_proxy(struct http_req *req)
{
	json_t *p = proxy_to_json();
	const char *listen = json_string_value(json_object_get(p, "listen"));
	const char *host = evhttp_find_header(http_req_in_headers(req), "Host");
	const char *colon = listen ? strrchr(listen, ':') : NULL, *query = http_req_query(req);
	int port = (int)json_integer_value(json_object_get(p, "port"));
	char name[256] = "", loc[8192];
	bool any = listen && (strncmp(listen, "0.0.0.0:", 8) == 0 || strncmp(listen, "[::]:", 5) == 0);
	if (colon && !any)
		snprintf(name, sizeof(name), "%.*s", (int)(colon - listen), listen);
	else if (host && host[0] != '[')
		snprintf(name, sizeof(name), "%.*s", (int)strcspn(host, ":"), host);
	json_decref(p);
	int n = snprintf(loc, sizeof(loc), "http://%s:%d%s%s%s", name, port, http_req_path(req),
			 query && *query ? "?" : "", query && *query ? query : "");
	if (!name[0] || port <= 0 || n < 0 || (size_t)n >= sizeof(loc))
		return false;
	evhttp_add_header(http_req_out_headers(req), "Location", loc);
	http_send_reply(req, 307, "Temporary Redirect", NULL);
	return true;
}

void e2b_iso_time(int64_t ms, char out[32])
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&s, &tm);
	size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 32 - n, ".%03dZ", (int)(ms % 1000));
}

/* ---- envd ---- */

/* Constant time in the token's length, as access.c's check. */
static bool token_equal(const char *given, const char *token)
{
	size_t n = strlen(token), len = given ? strlen(given) : 0;
	volatile unsigned char diff = len != n;
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)token[i] ^ (unsigned char)(i < len ? given[i] : 0);
	return diff == 0;
}

/* A signed /files URL (the SDK's uploadUrl and downloadUrl): its query's
 * signature is "v1_" and base64(sha256("<path>:<read|write>:<username>:
 * <envd token>[:<signature_expiration>]")) without its '=', and the
 * expiration, when given, has not passed. */
static bool signature_ok(struct http_req *req, const struct sandbox *sb)
{
	const char *q = query_of(req);
	char path[PATH_MAX] = "", user[64] = "", sig[128] = "", exp[24] = "", token[64], *end;
	struct cove_err e = { 0 };
	if (query_param(q, "signature", sig, sizeof(sig), &e) <= 0 ||
	    query_param(q, "path", path, sizeof(path), &e) < 0 ||
	    query_param(q, "username", user, sizeof(user), &e) < 0 ||
	    query_param(q, "signature_expiration", exp, sizeof(exp), &e) < 0)
		return false;
	long long until = exp[0] ? strtoll(exp, &end, 10) : 0;
	if (exp[0] && (*end || until < sandbox_now_ms() / 1000))
		return false;
	e2b_envd_token(sb, token);
	struct sha256_ctx ctx;
	uint8_t digest[SHA256_DIGEST_SIZE];
	char expected[8 + 2 * SHA256_DIGEST_SIZE] = "v1_";
	sha256_init(&ctx);
	sha256_update(&ctx, strlen(path), (const uint8_t *)path);
	sha256_update(&ctx, 1, (const uint8_t *)":");
	const char *op = http_req_method(req) == HTTP_GET ? "read" : "write";
	sha256_update(&ctx, strlen(op), (const uint8_t *)op);
	sha256_update(&ctx, 1, (const uint8_t *)":");
	sha256_update(&ctx, strlen(user), (const uint8_t *)user);
	sha256_update(&ctx, 1, (const uint8_t *)":");
	sha256_update(&ctx, strlen(token), (const uint8_t *)token);
	if (exp[0]) {
		sha256_update(&ctx, 1, (const uint8_t *)":");
		sha256_update(&ctx, strlen(exp), (const uint8_t *)exp);
	}
	sha256_digest(&ctx, sizeof(digest), digest);
	size_t n = base64_encode(digest, sizeof(digest), expected + 3) + 3;
	while (n > 3 && expected[n - 1] == '=')
		expected[--n] = '\0';
	return token_equal(sig, expected);
}

/* The sandbox a signed /files URL without E2b-Sandbox-Id is for: the one
 * whose token signed it (the SDK puts no ID in the URL when
 * E2B_SANDBOX_URL names coved). */
static bool signed_target(struct http_req *req, char id[32])
{
	const char *p = http_req_path(req), *q = http_req_query(req);
	if (!p || strcmp(p, "/files") != 0 || !q || !strstr(q, "signature="))
		return false;
	for (int i = 0; i < MAX_SANDBOXES; i++) {
		const struct sandbox *sb = engine_ctx->sandboxes[i];
		if (sb && sb->state != SB_DELETING && signature_ok(req, sb)) {
			snprintf(id, 32, "%s", sb->id);
			return true;
		}
	}
	return false;
}

/* The user of 'Authorization: Basic base64("<user>:")', if any. */
static int basic_user(struct http_req *req, char *out, size_t cap)
{
	const char *h = evhttp_find_header(http_req_in_headers(req), "Authorization");
	if (!h)
		return 0;
	if (strncasecmp(h, "Basic ", 6) != 0)
		return -1;
	h += 6;
	size_t n = strlen(h);
	_cleanup_free_ unsigned char *dec = malloc(n / 4 * 3 + 4);
	long m = dec ? base64_decode(h, n, dec) : -1;
	if (m < 0)
		return -1;
	const unsigned char *colon = memchr(dec, ':', (size_t)m);
	size_t len = colon ? (size_t)(colon - dec) : (size_t)m;
	if (len == 0 || len >= cap || memchr(dec, '\0', len))
		return -1;
	memcpy(out, dec, len);
	out[len] = '\0';
	return 0;
}

/* A Connect call's path: /<package>.<Service>/<Method>. */
static bool is_connect(const char *path)
{
	size_t svc = strspn(path + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.");
	const char *m = path + 1 + svc;
	return svc > 0 && memchr(path + 1, '.', svc) && m[0] == '/' && m[1] &&
	       strspn(m + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == strlen(m + 1);
}

/* envd's refusal in the shape of the route asked for. */
static void envd_refuse(struct http_req *req, const char *path, int status, const char *code, const char *msg)
{
	if (is_connect(path))
		connect_reply_error(req, code, "%s", msg);
	else
		e2b_error(req, status, "%s", msg);
}

static void envd_route(struct envd_req *er)
{
	struct http_req *req = er->req;
	const char *p = er->path;
	enum http_method m = http_req_method(req);
	if (strcmp(p, "/health") == 0 && m == HTTP_GET)
		http_send_reply(req, 204, "No Content", NULL);
	else if (strcmp(p, "/files") == 0 && m == HTTP_GET)
		envd_files_get(er);
	else if (strcmp(p, "/files") == 0 && m == HTTP_POST)
		envd_files_post(er);
	else if (strncmp(p, "/process.Process/", 17) == 0 && m == HTTP_POST)
		process_service(er, p + 17);
	else if (strncmp(p, "/filesystem.Filesystem/", 23) == 0 && m == HTTP_POST)
		filesystem_service(er, p + 23);
	else if (is_connect(p))
		connect_reply_error(req, "unimplemented", "envd has no service or method '%s'", p);
	else
		e2b_error(req, 404, "no route '%s'", p);
}

/* Which sandbox and port an envd request is for. */
struct envd_target {
	char id[32];
	char port[8];
};

static void envd(struct http_req *req, const struct envd_target *t)
{
	struct envd_req er = { .req = req, .path = http_req_path(req) };
	const char *id = t->id;
	bool health = strcmp(er.path, "/health") == 0;
	er.sb = sandbox_find(engine_ctx, id);
	bool found = er.sb && er.sb->state != SB_DELETING;
	if (found && strcmp(t->port, E2B_ENVD_PORT) != 0 && to_proxy(req))
		return;
	/* A paused or archived sandbox is there: the engine wakes it for the
	 * operation that needs it (E2B's autoResume), but for /health, which
	 * tells the SDK's isRunning() the truth without waking it. */
	if (!found || er.sb->state == SB_STOPPED || (health && er.sb->state != SB_RUNNING) ||
	    strcmp(t->port, E2B_ENVD_PORT) != 0) {
		/* E2B's proxy's answer for a sandbox that is not there. */
		e2b_json(req, 502,
			 json_pack("{s:i, s:s, s:s}", "code", 502, "message", "The sandbox was not found", "sandboxId",
				   id));
		return;
	}
	char token[64];
	e2b_envd_token(er.sb, token);
	const char *given = evhttp_find_header(http_req_in_headers(req), "X-Access-Token");
	bool files = strcmp(er.path, "/files") == 0 &&
		     (http_req_method(req) == HTTP_GET || http_req_method(req) == HTTP_POST);
	if (!health && !token_equal(given, token) && !(files && !given && signature_ok(req, er.sb))) {
		envd_refuse(req, er.path, 401, "unauthenticated", "missing or wrong X-Access-Token");
		return;
	}
	if (basic_user(req, er.user, sizeof(er.user)) < 0) {
		envd_refuse(req, er.path, 400, "invalid_argument", "bad Authorization header: Basic base64(\"user:\")");
		return;
	}
	envd_route(&er);
}

/* ---- dispatch ---- */

static bool is_control(const char *path)
{
	return path && (strcmp(path, "/sandboxes") == 0 || strncmp(path, "/sandboxes/", 11) == 0 ||
			strcmp(path, "/v2/sandboxes") == 0 || strncmp(path, "/v2/sandboxes/", 14) == 0 ||
			strcmp(path, "/snapshots") == 0 || strncmp(path, "/templates/", 11) == 0);
}

/* An envd request (on TCP only) names its sandbox with E2b-Sandbox-Id and
 * E2b-Sandbox-Port headers, or, as E2B's proxy takes them, with a host name
 * '<port>-<id>.<domain>'; a signed /files URL by its signature. */
static bool envd_target(struct http_req *req, struct envd_target *t)
{
	struct evkeyvalq *h = http_req_in_headers(req);
	const char *id = evhttp_find_header(h, "E2b-Sandbox-Id"), *port = evhttp_find_header(h, "E2b-Sandbox-Port");
	const char *host = evhttp_find_header(h, "Host");
	int n = 0;
	if (!http_conn_is_tcp(http_req_conn(req)))
		return false;
	if (id) {
		snprintf(t->id, sizeof(t->id), "%s", id);
		snprintf(t->port, sizeof(t->port), "%s", port ? port : E2B_ENVD_PORT);
		return true;
	}
	if (host && sscanf(host, "%7[0-9]-%31[a-z0-9_]%n", t->port, t->id, &n) == 2 && host[n] == '.')
		return true;
	snprintf(t->port, sizeof(t->port), "%s", E2B_ENVD_PORT);
	return signed_target(req, t->id);
}

bool e2b_streams(struct http_req *req)
{
	struct envd_target t;
	if (envd_target(req, &t) || (http_conn_is_tcp(http_req_conn(req)) && is_control(http_req_path(req))))
		return false;
	return api_streams(req);
}

void e2b_handle(struct http_req *req)
{
	struct envd_target t;
	if (envd_target(req, &t)) {
		envd(req, &t);
	} else if (http_conn_is_tcp(http_req_conn(req)) && is_control(http_req_path(req))) {
		if (!access_token_is(evhttp_find_header(http_req_in_headers(req), "X-API-KEY")))
			e2b_error(req, 401, "Invalid API key: X-API-KEY must be coved's token");
		else
			e2b_control(req);
	} else {
		api_handle(req);
	}
}

/* Unit tests for src/daemon/proxy/head.c: request heads read strictly,
 * body framing, the routes host names and E2B's headers name, and the
 * token taken out of a query and a cookie. */
#include "daemon/proxy/head.h"

#include <string.h>

#include "tap.h"

static int parses(const char *s)
{
	struct http_head h;
	return head_parse(s, strlen(s), &h) == 0;
}

static int framing(const char *s, int *chunked, long long *len)
{
	struct http_head h;
	bool c;
	uint64_t n;
	if (head_parse(s, strlen(s), &h) < 0 || head_body(&h, &c, &n) < 0)
		return 0;
	*chunked = c;
	*len = (long long)n;
	return 1;
}

static int routes(const char *host, const char *want_id, int want_port)
{
	char id[16] = "";
	int port = 0;
	return head_route_host(host, strlen(host), "localhost", id, &port) == 0 && strcmp(id, want_id) == 0 &&
	       port == want_port;
}

static int no_route(const char *host)
{
	char id[16];
	int port;
	return head_route_host(host, strlen(host), "localhost", id, &port) < 0;
}

static int takes(const char *target, const char *want_token, const char *want_rest)
{
	char tok[HEAD_TOKEN_MAX + 1] = "", out[256];
	int r = head_take_param(target, strlen(target), "cove_token", tok, out, sizeof(out));
	if (r < 0 || strcmp(out, want_rest) != 0) {
		printf("# '%s' -> '%s'\n", target, out);
		return 0;
	}
	return want_token ? r == 1 && strcmp(tok, want_token) == 0 : r == 0;
}

static int cookie(const char *v, const char *want_token, const char *want_rest)
{
	char tok[HEAD_TOKEN_MAX + 1] = "", out[256];
	int r = head_take_cookie(v, strlen(v), "cove_token", tok, out, sizeof(out));
	if (r < 0 || strcmp(out, want_rest) != 0) {
		printf("# '%s' -> '%s'\n", v, out);
		return 0;
	}
	return want_token ? r == 1 && strcmp(tok, want_token) == 0 : r == 0;
}

int main(void)
{
	struct http_head h;
	const char *ok = "GET /a?b=1 HTTP/1.1\r\nHost: x.localhost:7071\r\nX-A:  spaced  \r\n\r\n";
	CHECK(head_parse(ok, strlen(ok), &h) == 0 && h.n_fields == 2 && h.minor == 1, "a head parses");
	CHECK(h.target_len == 6 && memcmp(h.target, "/a?b=1", 6) == 0, "its target");
	const struct head_field *f = head_get(&h, "x-a");
	CHECK(f && f->value_len == 6 && memcmp(f->value, "spaced", 6) == 0, "a field, its spaces trimmed");
	CHECK(head_get(&h, "Cookie") == NULL, "a field not there");
	CHECK(parses("GET / HTTP/1.0\r\n\r\n"), "HTTP/1.0 without fields");

	static const char *const bad[] = {
		"GET / HTTP/1.1\r\nHost : x\r\n\r\n",           /* space before the colon */
		"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", /* obsolete folding */
		"GET / HTTP/1.1\nHost: x\r\n\r\n",              /* a bare LF */
		"GET / HTTP/1.1\r\nHost: x\rY\r\n\r\n",         /* a bare CR */
		"GET / HTTP/2.0\r\n\r\n",                       /* not HTTP/1.x */
		"GET  / HTTP/1.1\r\n\r\n",                      /* an empty target */
		"G(T / HTTP/1.1\r\n\r\n",                       /* not a method */
		"GET / HTTP/1.1\r\n: x\r\n\r\n",                /* no field name */
		"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET",         /* bytes after the blank line */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK(!parses(bad[i]), "refused: bad head %zu", i);

	int chunked;
	long long len;
	CHECK(framing("POST / HTTP/1.1\r\nContent-Length: 42\r\n\r\n", &chunked, &len) && !chunked && len == 42,
	      "Content-Length");
	CHECK(framing("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &chunked, &len) && chunked,
	      "chunked last");
	CHECK(framing("GET / HTTP/1.1\r\n\r\n", &chunked, &len) && !chunked && len == 0, "no body");
	CHECK(framing("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", &chunked, &len) && len == 5,
	      "the same length twice");
	CHECK(!framing("POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", &chunked, &len),
	      "refused: two lengths");
	CHECK(!framing("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", &chunked, &len),
	      "refused: a length and chunked");
	CHECK(!framing("POST / HTTP/1.1\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", &chunked, &len),
	      "refused: chunked not last");
	CHECK(!framing("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", &chunked, &len), "refused: a negative length");

	CHECK(head_list_has("keep-alive, Upgrade", 19, "upgrade"), "a list has an item");
	CHECK(!head_list_has("keep-alive, upgraded", 20, "upgrade"), "not a prefix of one");

	CHECK(routes("8000-sb-abcdefghijkl.localhost:7071", "sb_abcdefghijkl", 8000), "PORT-sb-ID.DOMAIN:PORT");
	CHECK(routes("80-SB_ABCDEFGHIJKL.LOCALHOST", "sb_abcdefghijkl", 80), "any case, '_' as it is");
	CHECK(routes("65535-abcdefghijkl.localhost.", "sb_abcdefghijkl", 65535), "without sb-, fully qualified");
	CHECK(no_route("0-sb-abcdefghijkl.localhost"), "refused: port 0");
	CHECK(no_route("70000-sb-abcdefghijkl.localhost"), "refused: port 70000");
	CHECK(no_route("8000-sb-abcdefghijkl.example.org"), "refused: another domain");
	CHECK(no_route("8000-sb-abcdefghijkl.xlocalhost"), "refused: a domain that only ends the same");
	CHECK(no_route("8000-sb-abcdefghijk1.localhost"), "refused: not an ID");
	CHECK(no_route("localhost"), "refused: no port or ID");
	char id[16];
	int port;
	CHECK(head_route_id("sb_abcdefghijkl", 15, id) == 0 && strcmp(id, "sb_abcdefghijkl") == 0, "an E2B ID");
	CHECK(head_route_id("abcdefghijkl", 12, id) == 0 && strcmp(id, "sb_abcdefghijkl") == 0, "without sb_");
	CHECK(head_port("08000", 5, &port) < 0 && head_port("80x", 3, &port) < 0, "refused: odd ports");

	CHECK(takes("/p?a=1&cove_token=abc&b=2", "abc", "/p?a=1&b=2"), "the token out of the middle");
	CHECK(takes("/p?cove_token=abc", "abc", "/p"), "the only parameter: no '?' left");
	CHECK(takes("/p?a=1", NULL, "/p?a=1"), "none: the target as it was");
	CHECK(takes("/p?xcove_token=abc", NULL, "/p?xcove_token=abc"), "not another name's suffix");
	CHECK(takes("/p", NULL, "/p"), "no query");
	CHECK(takes("/p?cove_token=abc&x=1&cove_token=def", "abc", "/p?x=1"), "every one out, the first kept");
	CHECK(cookie("cove_token=a; b=1; cove_token=c", "a", "b=1"), "every cookie of the name out");
	CHECK(cookie("a=1; cove_token=abc; b=2", "abc", "a=1; b=2"), "the cookie out of the middle");
	CHECK(cookie("cove_token=abc", "abc", ""), "the only cookie");
	CHECK(cookie("a=1;b=2", NULL, "a=1; b=2"), "no token cookie");
	return tap_done();
}

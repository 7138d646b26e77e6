/* Unit tests for src/client/http.c: the response parser fed whole, one byte at
 * a time and split at every offset; then http_request against a forked server
 * on a unix socket. */
#include "client/http.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "tap.h"

/* ---- parser ---- */

struct out {
	char body[1 << 16];
	size_t len;
	bool empty_call; /* on_body called with len 0: must not happen */
	bool fail;       /* make on_body fail */
};

static int out_body(void *arg, const char *buf, size_t len)
{
	struct out *o = arg;

	if (len == 0)
		o->empty_call = true;
	if (o->fail || len > sizeof(o->body) - 1 - o->len)
		return -1;
	memcpy(o->body + o->len, buf, len);
	o->len += len;
	o->body[o->len] = '\0';
	return 0;
}

/* The parser is 16 KiB: one, reused. */
static struct http_parser parser;
static struct out out;

/* Feeds in[0..len) cut at the ascending offsets cuts[], then signals EOF if
 * the response is not complete. 0 complete, -1 error, -2 broken invariant. */
static int run_cuts(const char *in, size_t len, const size_t *cuts, size_t ncuts, size_t *used)
{
	size_t start = 0;

	http_parser_init(&parser, out_body, &out);
	out.len = 0;
	out.body[0] = '\0';
	out.empty_call = false;
	*used = 0;
	for (size_t k = 0; k <= ncuts; k++) {
		size_t end = k < ncuts ? cuts[k] : len;
		long n = http_parser_feed(&parser, in + start, end - start);

		if (n < 0)
			return parser.state == HTTP_PARSE_ERROR ? -1 : -2;
		if ((size_t)n > end - start || ((size_t)n < end - start && parser.state != HTTP_PARSE_DONE))
			return -2;
		*used += (size_t)n;
		start = end;
	}
	if (out.empty_call)
		return -2;
	if (parser.state == HTTP_PARSE_DONE)
		return 0;
	return http_parser_eof(&parser);
}

struct parse_case {
	const char *name;
	const char *in;
	int want; /* 0 complete, -1 error */
	int status;
	const char *body;
	size_t trailing; /* bytes after the response, left unconsumed */
	int keep_alive;
	const char *content_type;
};

static const struct parse_case cases[] = {
	{ "content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\nhello", 0,
	  200, "hello", 0, 1, "application/json" },
	{ "content-length, next response left unconsumed", "HTTP/1.1 200 OK\r\ncontent-LENGTH:   2  \r\n\r\nokHTTP/1.1",
	  0, 200, "ok", 8, 1, "" },
	{ "chunked with extensions and trailers",
	  "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\nCONTENT-TYPE: text/x\r\n\r\n"
	  "5;name=value\r\nhello\r\n7 ;a;b=\"c d\"\r\n, world\r\nA\r\n0123456789\r\n"
	  "0;last\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n",
	  0, 200, "hello, world0123456789", 0, 1, "text/x" },
	{ "chunked, no trailers, uppercase hex",
	  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
	  "1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\nXX",
	  0, 200, "abcdefghijklmnopqrstuvwxyz", 2, 1, "" },
	{ "body until EOF (HTTP/1.0)", "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil eof", 0, 200,
	  "until eof", 0, 0, "text/plain" },
	{ "body until EOF, empty", "HTTP/1.1 500 Oops\r\n\r\n", 0, 500, "", 0, 0, "" },
	{ "204 has no body", "HTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\nabc", 0, 204, "", 3, 1, "" },
	{ "304 has no body", "HTTP/1.1 304 Not Modified\r\n\r\n", 0, 304, "", 0, 1, "" },
	{ "100-continue then 200",
	  "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\nContent-Type: a/b\r\n\r\n"
	  "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
	  0, 201, "ok", 0, 1, "" },
	{ "Connection: close", "HTTP/1.1 200 OK\r\nConnection: foo, close\r\nContent-Length: 0\r\n\r\n", 0, 200, "", 0,
	  0, "" },
	{ "HTTP/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx", 0, 200, "x",
	  0, 1, "" },
	{ "status without reason, same content-length twice",
	  "HTTP/1.1 404\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n!", 0, 404, "!", 0, 1, "" },

	{ "bad protocol", "HTTX/1.1 200 OK\r\n\r\n", -1, 0, NULL, 0, 0, NULL },
	{ "HTTP/2", "HTTP/2 200 OK\r\n\r\n", -1, 0, NULL, 0, 0, NULL },
	{ "two-digit status", "HTTP/1.1 20 OK\r\n\r\n", -1, 0, NULL, 0, 0, NULL },
	{ "status 600", "HTTP/1.1 600 Huh\r\n\r\n", -1, 0, NULL, 0, 0, NULL },
	{ "no space after status", "HTTP/1.1 200OK\r\n\r\n", -1, 0, NULL, 0, 0, NULL },
	{ "101 switching protocols", "HTTP/1.1 101 Switching\r\n\r\n", -1, 0, NULL, 0, 0, NULL },
	{ "empty head", "\r\n\r\n", -1, 0, NULL, 0, 0, NULL },
	{ "bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", -1, 0, NULL, 0, 0, NULL },
	{ "empty chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n0\r\n\r\n", -1, 0, NULL, 0, 0,
	  NULL },
	{ "negative chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-5\r\n", -1, 0, NULL, 0, 0,
	  NULL },
	{ "chunk size overflows", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n", -1, 0,
	  NULL, 0, 0, NULL },
	{ "space inside chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1 0\r\n", -1, 0, NULL, 0, 0,
	  NULL },
	{ "bare LF after chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", -1,
	  0, NULL, 0, 0, NULL },
	{ "missing CRLF after chunk data",
	  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloX\r\n0\r\n\r\n", -1, 0, NULL, 0, 0, NULL },
	{ "bare LF in trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: y\n\r\n", -1, 0, NULL, 0,
	  0, NULL },
	{ "negative content-length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", -1, 0, NULL, 0, 0, NULL },
	{ "content-length overflows", "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n", -1, 0, NULL, 0,
	  0, NULL },
	{ "content-length list", "HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\nx", -1, 0, NULL, 0, 0, NULL },
	{ "conflicting content-length", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", -1, 0,
	  NULL, 0, 0, NULL },
	{ "content-length and chunked",
	  "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", -1, 0, NULL, 0, 0,
	  NULL },
	{ "transfer-encoding gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", -1, 0, NULL, 0, 0, NULL },
	{ "space before colon", "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n", -1, 0, NULL, 0, 0, NULL },
	{ "header without colon", "HTTP/1.1 200 OK\r\nContent-Length\r\n\r\n", -1, 0, NULL, 0, 0, NULL },
	{ "obs-fold", "HTTP/1.1 200 OK\r\nX-A: 1\r\n  2\r\nContent-Length: 0\r\n\r\n", -1, 0, NULL, 0, 0, NULL },
	{ "bare LF in head", "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", -1, 0, NULL, 0, 0, NULL },
	{ "cut short: content-length", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", -1, 0, NULL, 0, 0, NULL },
	{ "cut short: chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", -1, 0, NULL, 0, 0,
	  NULL },
	{ "cut short: head", "HTTP/1.1 200 OK\r\nContent-Len", -1, 0, NULL, 0, 0, NULL },
	{ "cut short: after 100-continue", "HTTP/1.1 100 Continue\r\n\r\n", -1, 0, NULL, 0, 0, NULL },
	{ "no response at all", "", -1, 0, NULL, 0, 0, NULL },
};

/* Runs one split of c and judges the outcome. */
static bool run_ok(const struct parse_case *c, const size_t *cuts, size_t ncuts)
{
	size_t len = strlen(c->in), used;
	int rc = run_cuts(c->in, len, cuts, ncuts, &used);

	if (rc != c->want)
		return false;
	if (rc < 0)
		return true;
	return parser.status == c->status && strcmp(out.body, c->body) == 0 && used == len - c->trailing &&
	       parser.keep_alive == c->keep_alive && strcmp(parser.content_type, c->content_type) == 0;
}

static void test_case(const struct parse_case *c)
{
	size_t len = strlen(c->in);
	size_t *cuts = calloc(len + 1, sizeof(*cuts));
	bool ok;

	ok = run_ok(c, NULL, 0);
	CHECK(ok, "%s: fed whole", c->name);

	for (size_t i = 0; i + 1 < len; i++)
		cuts[i] = i + 1;
	ok = run_ok(c, cuts, len ? len - 1 : 0);
	CHECK(ok, "%s: fed 1 byte at a time", c->name);

	/* Every 2-way and 3-way split: catches state lost across a boundary
	 * inside a CRLF, a hex number or the head terminator. */
	ok = true;
	for (size_t i = 0; i <= len && ok; i++) {
		for (size_t j = i; j <= len && ok; j++) {
			size_t two[2] = { i, j };
			ok = run_ok(c, two, 2);
		}
	}
	CHECK(ok, "%s: split in three at every pair of offsets", c->name);
	free(cuts);
}

/* A head of exactly sizeof(head) bytes is accepted, one more is not. */
static void test_head_limit(void)
{
	size_t cap = sizeof(parser.head);
	char *in = malloc(cap + 2);
	const char *start = "HTTP/1.1 200 OK\r\nX-Pad: ", *end = "\r\nContent-Length: 0\r\n\r\n";
	size_t used;

	for (size_t extra = 0; extra <= 1; extra++) {
		size_t len = cap + extra, pad = len - strlen(start) - strlen(end);
		int rc;

		memcpy(in, start, strlen(start));
		memset(in + strlen(start), 'a', pad);
		memcpy(in + strlen(start) + pad, end, strlen(end) + 1);
		rc = run_cuts(in, len, NULL, 0, &used);
		if (extra == 0)
			CHECK(rc == 0 && used == len, "head of exactly %zu bytes accepted", len);
		else
			CHECK(rc == -1 && parser.why && strstr(parser.why, "too large"), "head of %zu bytes refused",
			      len);
	}
	/* Without a terminator at all, fed in pieces. */
	memset(in, 'a', cap + 1);
	size_t cuts[] = { 1, 100, cap - 1, cap };
	int rc = run_cuts(in, cap + 1, cuts, ARRAY_SIZE(cuts), &used);
	CHECK(rc == -1, "endless head refused");
	free(in);
}

/* in = a + n times fill + b, NUL-terminated; returns its length. */
static size_t build(char *in, const char *a, char fill, size_t n, const char *b)
{
	size_t la = strlen(a);

	memcpy(in, a, la);
	memset(in + la, fill, n);
	strcpy(in + la + n, b);
	return la + n + strlen(b);
}

/* Chunk extensions and trailers are skipped, not stored, but still bounded. */
static void test_chunk_limits(void)
{
	const char *head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
	char pre[128], *in = malloc(32768);
	size_t len, used;
	int rc;

	if (!in) {
		SKIP("malloc");
		return;
	}
	/* the chunk-size line holds at most 1024 bytes */
	snprintf(pre, sizeof(pre), "%s1;", head);
	len = build(in, pre, 'e', 1024 - 2 - 2, "\r\nx\r\n0\r\n\r\n");
	rc = run_cuts(in, len, NULL, 0, &used);
	CHECK(rc == 0 && strcmp(out.body, "x") == 0, "chunk-size line of 1024 bytes accepted");
	len = build(in, pre, 'e', 1024 - 2 - 1, "\r\nx\r\n0\r\n\r\n");
	rc = run_cuts(in, len, NULL, 0, &used);
	CHECK(rc == -1 && strstr(parser.why, "too long"), "chunk-size line of 1025 bytes refused");

	snprintf(pre, sizeof(pre), "%s0\r\nX: ", head);
	len = build(in, pre, 'v', 20000, "\r\n\r\n");
	rc = run_cuts(in, len, NULL, 0, &used);
	CHECK(rc == -1 && strstr(parser.why, "trailers too large"), "trailers over %zu bytes refused",
	      sizeof(parser.head));
	free(in);
}

static void test_parser_misc(void)
{
	const char *in = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
	long len = (long)strlen(in), n;
	size_t used;
	int rc;

	out.fail = true;
	rc = run_cuts(in, strlen(in), NULL, 0, &used);
	CHECK(rc == -1 && parser.state == HTTP_PARSE_ERROR, "on_body failing stops the parser");
	out.fail = false;
	n = http_parser_feed(&parser, "x", 1);
	CHECK(n == -1, "feeding after an error fails again");

	http_parser_init(&parser, out_body, &out);
	parser.no_body = 1;
	n = http_parser_feed(&parser, in, strlen(in));
	CHECK(n == len - 3 && parser.state == HTTP_PARSE_DONE, "response to HEAD: content-length describes no body");

	http_parser_init(&parser, NULL, NULL);
	n = http_parser_feed(&parser, in, strlen(in));
	CHECK(n == len && parser.state == HTTP_PARSE_DONE, "no callback: body is skipped");
	n = http_parser_feed(&parser, in, strlen(in));
	CHECK(n == 0, "done: nothing more is consumed");

	const char *up = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: tcp\r\n\r\nraw";
	http_parser_init(&parser, out_body, &out);
	parser.upgrade = 1;
	n = http_parser_feed(&parser, up, strlen(up));
	CHECK(n == (long)strlen(up) - 3 && parser.state == HTTP_PARSE_DONE && parser.status == 101,
	      "asked for an upgrade: a 101 ends the response, what follows is not consumed");
}

/* http_request_upgrade on one end of a socket pair whose other end has the
 * answer written already: a 101 leaves the bytes behind its head in the
 * socket, a refusal is read whole. */
static void test_client_upgrade(void)
{
	static const struct {
		const char *answer;
		int status;
		const char *body, *left;
	} upgrades[] = {
		{ "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\nraw bytes", 101, "",
		  "raw bytes" },
		{ "HTTP/1.1 400 Bad Request\r\nContent-Length: 5\r\n\r\nnope!", 400, "nope!", "" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(upgrades); i++) {
		int sv[2] = { -1, -1 };
		char left[64] = "", req[512] = "";
		struct http_response r = { 0 };
		struct cove_err err = { 0 };
		CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
		CHECK(write(sv[1], upgrades[i].answer, strlen(upgrades[i].answer)) ==
			      (ssize_t)strlen(upgrades[i].answer),
		      "answer written");
		shutdown(sv[1], SHUT_WR);
		int rc = http_request_upgrade(sv[0], "/x/attach", "tcp", "X-A: b\r\n", &r, &err);
		CHECK(rc == 0 && r.status == upgrades[i].status && r.body && strcmp(r.body, upgrades[i].body) == 0,
		      "upgrade answered %d: %s", upgrades[i].status, err.code ? err.msg : "ok");
		CHECK(read(sv[0], left, sizeof(left) - 1) == (ssize_t)strlen(upgrades[i].left) &&
			      strcmp(left, upgrades[i].left) == 0,
		      "after a %d, the socket holds '%s'", upgrades[i].status, upgrades[i].left);
		CHECK(read(sv[1], req, sizeof(req) - 1) > 0 && strstr(req, "GET /x/attach HTTP/1.1\r\n") == req &&
			      strstr(req, "\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nX-A: b\r\n"),
		      "the request asks for the upgrade");
		free(r.body);
		close(sv[0]);
		close(sv[1]);
	}
	struct http_response r = { 0 };
	struct cove_err err = { 0 };
	CHECK(http_request_upgrade(-1, "/x", "tcp\r\nX: y", NULL, &r, &err) == -1 && err.code == COVE_EINVAL,
	      "a protocol that is not a token is refused: %s", err.msg);
}

/* ---- client against a forked server ---- */

/* Reads one request (head + Content-Length body) into buf, NUL-terminated.
 * The client never pipelines, so buf holds exactly one request. */
static ssize_t server_read_request(int fd, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (;;) {
		const char *end = strstr(buf, "\r\n\r\n");
		const char *cl = strcasestr(buf, "\r\nContent-Length:");

		if (end && !cl)
			return -1;
		if (end && len >= (size_t)(end + 4 - buf) + strtoul(cl + 17, NULL, 10))
			return (ssize_t)len;

		ssize_t n = read(fd, buf + len, size - 1 - len);
		if (n <= 0)
			return -1;
		len += (size_t)n;
		buf[len] = '\0';
	}
}

/* Writes s in small pieces, so the client sees chunks split anywhere. */
static int server_write(int fd, const char *s, size_t len)
{
	for (size_t off = 0, step = 1; off < len; off += step, step = step % 7 + 1) {
		if (step > len - off)
			step = len - off;
		if (write(fd, s + off, step) != (ssize_t)step)
			return -1;
	}
	return 0;
}

#define BIG_BODY (1 << 20)
#define STREAM_CHUNK 10000
#define STREAM_CHUNKS 20

static int server_stream(int fd)
{
	static char chunk[STREAM_CHUNK];
	const char *head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
	char size[32];

	if (write(fd, head, strlen(head)) < 0)
		return -1;
	for (int i = 0; i < STREAM_CHUNKS; i++) {
		for (size_t k = 0; k < STREAM_CHUNK; k++)
			chunk[k] = (char)('a' + (i * STREAM_CHUNK + k) % 26);
		snprintf(size, sizeof(size), "%x;i=%d\r\n", STREAM_CHUNK, i);
		if (write(fd, size, strlen(size)) < 0 || write(fd, chunk, STREAM_CHUNK) < 0 || write(fd, "\r\n", 2) < 0)
			return -1;
	}
	return write(fd, "0\r\nX-T: 1\r\n\r\n", 13) < 0 ? -1 : 0;
}

/* The child: three requests on one connection, then one that gets no answer
 * on a second. Exit status 0 when every request looked as expected. */
static void server(int lfd)
{
	static char req[2 << 20];
	const char *want1 = "POST /v1/echo HTTP/1.1\r\nHost: cove\r\nX-Token: t\r\n"
			    "Content-Type: application/json\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
	const char *reply1[] = {
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
		"8;x=y\r\n{\"echo\":\r\n", "7\r\n{\"a\":1}\r\n", "1\r\n}\r\n", "0\r\n\r\n"
	};
	char reply3[256];
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

	/* The client stops reading the third reply early and closes. */
	signal(SIGPIPE, SIG_IGN);
	alarm(30);
	if (fd < 0 || server_read_request(fd, req, sizeof(req)) < 0 || strcmp(req, want1) != 0)
		_exit(10);
	for (size_t i = 0; i < ARRAY_SIZE(reply1); i++)
		if (server_write(fd, reply1[i], strlen(reply1[i])) < 0)
			_exit(11);
	ssize_t n = server_read_request(fd, req, sizeof(req));
	if (n < 0 || strncmp(req, "POST /v1/stream HTTP/1.1\r\n", 26) != 0 ||
	    (size_t)n - (size_t)(strstr(req, "\r\n\r\n") + 4 - req) != BIG_BODY || server_stream(fd) < 0)
		_exit(12);
	snprintf(reply3, sizeof(reply3), "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n%0100d", 7);
	if (server_read_request(fd, req, sizeof(req)) < 0 || write(fd, reply3, strlen(reply3)) < 0)
		_exit(13);
	close(fd);

	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0 || server_read_request(fd, req, sizeof(req)) < 0)
		_exit(15);
	close(fd);
	_exit(0);
}

struct stream {
	size_t total;
	bool bad;
};

static int stream_body(void *arg, const char *buf, size_t len)
{
	struct stream *s = arg;

	for (size_t k = 0; k < len; k++)
		if (buf[k] != (char)('a' + (s->total + k) % 26))
			s->bad = true;
	s->total += len;
	return 0;
}

static void test_client_requests(const char *path)
{
	struct http_response r = { 0 };
	struct cove_err err = { 0 };
	struct stream st = { 0 };
	int fd = http_connect_unix(path), rc;

	CHECK(fd >= 0, "connect to %s", path);
	rc = http_request(fd, "POST", "/v1/echo", "X-Token: t\r\n", "{\"a\":1}", 7, NULL, NULL, 1024, &r, &err);
	CHECK(rc == 0 && r.status == 200, "request with body and extra header: %s", err.code ? err.msg : "ok");
	CHECK(r.body && r.body_len == 16 && strcmp(r.body, "{\"echo\":{\"a\":1}}") == 0, "chunked body collected");
	CHECK(strcmp(r.content_type, "application/json") == 0, "content type reported");
	free(r.body);

	/* Non-blocking, with a body larger than the socket buffer: partial
	 * writes and EAGAIN on both sides. */
	char *big = malloc(BIG_BODY);
	memset(big, '7', BIG_BODY);
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	r = (struct http_response){ 0 };
	rc = http_request(fd, "POST", "/v1/stream", NULL, big, BIG_BODY, stream_body, &st, 0, &r, &err);
	CHECK(rc == 0 && r.status == 200 && r.body == NULL,
	      "1 MiB request, streamed reply, non-blocking, same connection: %s", err.code ? err.msg : "ok");
	free(big);
	CHECK(st.total == STREAM_CHUNK * STREAM_CHUNKS && !st.bad, "on_body saw %zu bytes, in order", st.total);

	r = (struct http_response){ .status = -7 };
	rc = http_request(fd, "GET", "/v1/big", NULL, NULL, 0, NULL, NULL, 10, &r, &err);
	CHECK(rc == -1 && err.code == COVE_ETOOBIG && r.status == -7, "body over max_body refused: %s", err.msg);
	close(fd);

	err = (struct cove_err){ 0 };
	fd = http_connect_unix(path);
	rc = http_request(fd, "DELETE", "/v1/x", NULL, NULL, 0, NULL, NULL, 10, &r, &err);
	CHECK(rc == -1 && err.code == ECONNRESET && strstr(err.msg, "closed the connection"),
	      "daemon closing without answer: %s", err.msg);
	close(fd);
}

static void test_client(void)
{
	char dir[] = "/tmp/test-http-XXXXXX", path[64];
	int lfd, status = -1;
	bool listening;
	pid_t pid, waited;

	if (!mkdtemp(dir)) {
		SKIP("mkdtemp: %s", strerror(errno));
		return;
	}
	snprintf(path, sizeof(path), "%s/sock", dir);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	strcpy(sa.sun_path, path);
	listening = lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(lfd, 4) == 0;
	CHECK(listening, "listen on %s", path);
	pid = fork();
	if (pid == 0)
		server(lfd);
	close(lfd);
	test_client_requests(path);
	waited = pid > 0 ? waitpid(pid, &status, 0) : -1;
	CHECK(waited == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "server saw the expected requests (wait status %d)", status);
	unlink(path);
	rmdir(dir);
}

static void test_client_errors(void)
{
	char long_path[200];
	struct http_response r = { 0 };
	struct cove_err err = { 0 };
	int sv[2], rc;

	memset(long_path, 'x', sizeof(long_path) - 1);
	long_path[sizeof(long_path) - 1] = '\0';
	rc = http_connect_unix(long_path);
	CHECK(rc == -ENAMETOOLONG, "path too long: -ENAMETOOLONG");
	rc = http_connect_unix("/nonexistent/cove.sock");
	CHECK(rc == -ENOENT, "no socket: -ENOENT");

	rc = http_request(-1, "GET\r\n", "/", NULL, NULL, 0, NULL, NULL, 0, &r, &err);
	CHECK(rc == -1 && err.code == COVE_EINVAL, "CRLF in method refused: %s", err.msg);
	err = (struct cove_err){ 0 };
	rc = http_request(-1, "GET", "/a b", NULL, NULL, 0, NULL, NULL, 0, &r, &err);
	CHECK(rc == -1 && err.code == COVE_EINVAL, "space in target refused");
	const char *bad_extra[] = { "X: 1", "X: 1\n", "X: 1\r\n\r\n", "\r\n", "X: 1\rY: 2\r\n" };
	for (size_t i = 0; i < ARRAY_SIZE(bad_extra); i++) {
		err = (struct cove_err){ 0 };
		rc = http_request(-1, "GET", "/", bad_extra[i], NULL, 0, NULL, NULL, 0, &r, &err);
		CHECK(rc == -1 && err.code == COVE_EINVAL, "extra headers #%zu refused", i);
	}

	/* SIGPIPE is left at its default: if the client did not use
	 * MSG_NOSIGNAL, this test would kill the binary. */
	err = (struct cove_err){ 0 };
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		SKIP("socketpair: %s", strerror(errno));
		return;
	}
	close(sv[1]);
	rc = http_request(sv[0], "POST", "/", NULL, "{}", 2, NULL, NULL, 10, &r, &err);
	CHECK(rc == -1 && err.code == EPIPE, "dead daemon: EPIPE, no SIGPIPE: %s", err.msg);
	close(sv[0]);

	/* A daemon that answers and closes before reading the request (413
	 * on a huge body): the answer wins over EPIPE. */
	const char *early = "HTTP/1.1 413 Too Large\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
	err = (struct cove_err){ 0 };
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 || write(sv[1], early, strlen(early)) < 0) {
		SKIP("socketpair: %s", strerror(errno));
		return;
	}
	close(sv[1]);
	rc = http_request(sv[0], "PUT", "/v1/file", NULL, "xxxx", 4, NULL, NULL, 10, &r, &err);
	CHECK(rc == 0 && r.status == 413 && strcmp(r.body, "{}") == 0, "early answer read despite EPIPE: %s",
	      err.code ? err.msg : "ok");
	if (rc == 0)
		free(r.body);
	close(sv[0]);
}

/* An export's counts: read when they are plain numbers, else not told. */
static void test_cove_counts(void)
{
	static const struct {
		const char *head;
		int64_t entries, deleted;
	} counts_cases[] = {
		{ "X-Cove-Entries: 12\r\nx-cove-deleted:  3 \r\n", 12, 3 },
		{ "X-Cove-Entries: 0\r\nX-Cove-Deleted: 0\r\n", 0, 0 },
		{ "X-Cove-Entries: 1x\r\nX-Cove-Deleted: -1\r\n", -1, -1 },
		{ "X-Cove-Entries: \r\nX-Cove-Deleted: 99999999999999999999\r\n", -1, -1 },
		{ "", -1, -1 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(counts_cases); i++) {
		char in[256];
		size_t used;
		int n = snprintf(in, sizeof(in), "HTTP/1.1 200 OK\r\n%sContent-Length: 2\r\n\r\nok", counts_cases[i].head);
		int r = run_cuts(in, (size_t)n, NULL, 0, &used);
		CHECK(r == 0 && parser.counts[0] == counts_cases[i].entries && parser.counts[1] == counts_cases[i].deleted,
		      "counts %zu: %lld %lld", i, (long long)parser.counts[0], (long long)parser.counts[1]);
	}
}

int main(void)
{
	/* A hung client or server must fail the test, not the CI job. */
	alarm(60);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		test_case(&cases[i]);
	test_head_limit();
	test_chunk_limits();
	test_parser_misc();
	test_client_upgrade();
	test_client();
	test_client_errors();
	test_cove_counts();
	return tap_done();
}

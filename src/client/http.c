/* HTTP/1.1 client over a unix socket or TCP; see http.h for why not libcurl.
 *
 * The parser is a byte-driven state machine: apart from the bounded head
 * buffer it never looks back at bytes it has consumed, so its result is the
 * same however the input is split (tests/fuzz/fuzz_http.c checks that). The
 * daemon is local, but a buggy or compromised one must not make the client
 * overflow, spin or allocate without bound: every size is checked for
 * overflow and every buffer has a limit. */
#include "client/http.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/netaddr.h"

#define HTTP_READ_BUF (64 * 1024)
/* A streamed request body that sendfile cannot take (a pipe's) goes in
 * pieces of this size: a pipe holds 64 KiB, so more gains nothing. */
#define HTTP_SEND_BUF (64 * 1024)
#define HTTP_SEND_FILE (4u << 20) /* the most one sendfile takes */
/* A chunk-size line is a few hex digits; extensions are legal but the daemon
 * sends none, so a long line is garbage, not something to buffer. */
#define HTTP_CHUNK_LINE_MAX 1024
/* An upgrade's refusal is a JSON error, a few hundred bytes. */
#define MAX_UPGRADE_REFUSAL (64 * 1024)

/* Positions inside a chunk-size line ("1a ;ext=v\r\n") and inside trailers. */
enum { CS_FIRST, CS_DIGITS, CS_WS, CS_EXT, CS_CR };
enum { TR_START, TR_LINE, TR_END_CR, TR_LINE_CR };

static long parse_fail(struct http_parser *p, const char *why)
{
	p->state = HTTP_PARSE_ERROR;
	p->why = why;
	return -1;
}

void http_parser_init(struct http_parser *p, http_body_cb on_body, void *arg)
{
	memset(p, 0, sizeof(*p));
	p->state = HTTP_PARSE_HEAD;
	p->content_length = -1;
	p->counts[0] = p->counts[1] = -1;
	p->on_body = on_body;
	p->arg = arg;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* RFC 9110 tchar: what a header name or a method may contain. */
static bool is_tchar(char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static void trim_ows(const char **s, size_t *n)
{
	while (*n > 0 && (**s == ' ' || **s == '\t')) {
		(*s)++;
		(*n)--;
	}
	while (*n > 0 && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
		(*n)--;
}

static bool token_eq(const char *s, size_t n, const char *lit)
{
	return n == strlen(lit) && strncasecmp(s, lit, n) == 0;
}

static int header_content_length(struct http_parser *p, const char *v, size_t n)
{
	uint64_t x = 0;

	/* Digits only: "-1", "+1", "1, 1" and "" are all refused, as are
	 * values beyond int64_t. */
	if (n == 0)
		return parse_fail(p, "empty content-length");
	for (size_t i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9')
			return parse_fail(p, "bad content-length");
		if (x > ((uint64_t)INT64_MAX - (uint64_t)(v[i] - '0')) / 10)
			return parse_fail(p, "content-length overflows");
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	/* Two different lengths is the classic smuggling shape: refuse. */
	if (p->content_length >= 0 && (uint64_t)p->content_length != x)
		return parse_fail(p, "conflicting content-length");
	p->content_length = (int64_t)x;
	return 0;
}

static int header_transfer_encoding(struct http_parser *p, const char *v, size_t n)
{
	/* The daemon only ever chunks; gzip and friends would need a decoder. */
	if (p->chunked || !token_eq(v, n, "chunked"))
		return parse_fail(p, "unsupported transfer-encoding");
	p->chunked = 1;
	return 0;
}

static int header_connection(struct http_parser *p, const char *v, size_t n)
{
	while (n > 0) {
		const char *comma = memchr(v, ',', n);
		size_t len = comma ? (size_t)(comma - v) : n;
		const char *tok = v;
		size_t tok_len = len;

		trim_ows(&tok, &tok_len);
		if (token_eq(tok, tok_len, "close"))
			p->keep_alive = 0;
		else if (token_eq(tok, tok_len, "keep-alive"))
			p->keep_alive = 1;
		v += len;
		n -= len;
		if (comma) {
			v++;
			n--;
		}
	}
	return 0;
}

static int header_content_type(struct http_parser *p, const char *v, size_t n)
{
	if (n >= sizeof(p->content_type))
		n = sizeof(p->content_type) - 1;
	memcpy(p->content_type, v, n);
	p->content_type[n] = '\0';
	return 0;
}

static const struct {
	const char *name;
	int (*parse)(struct http_parser *p, const char *v, size_t n);
} header_table[] = {
	{ "content-length", header_content_length },
	{ "transfer-encoding", header_transfer_encoding },
	{ "connection", header_connection },
	{ "content-type", header_content_type },
};

static int parse_header(struct http_parser *p, const char *line, size_t n)
{
	const char *colon = memchr(line, ':', n);

	if (!colon || colon == line)
		return parse_fail(p, "bad header line");
	/* Whitespace before the colon and obs-fold continuation lines both
	 * fail here: neither is a tchar. */
	for (const char *c = line; c < colon; c++)
		if (!is_tchar(*c))
			return parse_fail(p, "bad header name");

	size_t name_len = (size_t)(colon - line);
	const char *v = colon + 1;
	size_t vn = n - name_len - 1;

	trim_ows(&v, &vn);
	for (size_t i = 0; i < ARRAY_SIZE(header_table); i++)
		if (token_eq(line, name_len, header_table[i].name))
			return header_table[i].parse(p, v, vn);
	/* An export's counts: digits (the line's CR ends them), else not told. */
	for (int i = 0; i < 2; i++)
		if (token_eq(line, name_len, i ? "x-cove-deleted" : "x-cove-entries"))
			p->counts[i] = vn > 0 && vn < 19 && strspn(v, "0123456789") == vn ? strtoll(v, NULL, 10) : -1;
	return 0;
}

static int parse_status_line(struct http_parser *p, const char *s, size_t n)
{
	if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1') || s[8] != ' ')
		return parse_fail(p, "bad status line");
	for (int i = 9; i < 12; i++)
		if (s[i] < '0' || s[i] > '9')
			return parse_fail(p, "bad status code");
	/* The reason phrase is optional and ignored. */
	if (n > 12 && s[12] != ' ')
		return parse_fail(p, "bad status line");
	p->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
	if (p->status < 100 || p->status > 599)
		return parse_fail(p, "bad status code");
	/* HTTP/1.1 connections persist unless told otherwise, 1.0 the reverse. */
	p->keep_alive = s[7] == '1';
	return 0;
}

/* head[0..head_len) ends with the first CRLFCRLF: split it into lines. */
static int parse_head(struct http_parser *p)
{
	const char *s = p->head;
	const char *end = p->head + p->head_len - 2; /* the CRLF of the empty line */
	bool first = true;

	while (s < end) {
		const char *eol = memmem(s, (size_t)(end - s), "\r\n", 2);
		size_t n = (size_t)(eol - s);

		/* A lone CR or LF would let this parser and another disagree
		 * on where a header ends. */
		if (memchr(s, '\r', n) || memchr(s, '\n', n) || memchr(s, '\0', n))
			return parse_fail(p, "bare CR, LF or NUL in head");
		if ((first ? parse_status_line(p, s, n) : parse_header(p, s, n)) < 0)
			return -1;
		first = false;
		s = eol + 2;
	}
	return 0;
}

/* After a complete head: how is the body delimited? */
static int head_done(struct http_parser *p)
{
	if (p->status / 100 == 1) {
		if (p->status == 101 && !p->upgrade)
			return parse_fail(p, "unexpected protocol switch");
		if (p->status == 101) {
			p->state = HTTP_PARSE_DONE;
			return 0;
		}
		/* Interim response (100 Continue...): the real one follows. */
		p->head_len = 0;
		p->content_length = -1;
		p->chunked = 0;
		p->content_type[0] = '\0';
		return 0;
	}
	if (p->chunked && p->content_length >= 0)
		return parse_fail(p, "both content-length and chunked");
	if (p->no_body || p->status == 204 || p->status == 304) {
		p->state = HTTP_PARSE_DONE;
	} else if (p->chunked) {
		p->state = HTTP_PARSE_CHUNK_SIZE;
		p->sub = CS_FIRST;
		p->line_len = 0;
	} else if (p->content_length >= 0) {
		p->remaining = (uint64_t)p->content_length;
		p->state = p->remaining ? HTTP_PARSE_BODY : HTTP_PARSE_DONE;
	} else {
		/* Delimited by EOF: the connection cannot be reused. */
		p->state = HTTP_PARSE_BODY;
		p->keep_alive = 0;
	}
	return 0;
}

static long feed_head(struct http_parser *p, const char *buf, size_t len)
{
	size_t old = p->head_len;
	size_t n = len < sizeof(p->head) - old ? len : sizeof(p->head) - old;
	/* The terminator may straddle the previous call: look 3 bytes back. */
	size_t from = old >= 3 ? old - 3 : 0;

	memcpy(p->head + old, buf, n);
	const char *t = memmem(p->head + from, old + n - from, "\r\n\r\n", 4);
	if (!t) {
		p->head_len = old + n;
		if (p->head_len == sizeof(p->head))
			return parse_fail(p, "response head too large");
		return (long)n;
	}
	/* Bytes copied past the terminator are not consumed: they belong to
	 * the body (or the next head) and are fed again by the caller. */
	p->head_len = (size_t)(t + 4 - p->head);
	n = p->head_len - old; /* head_done() resets head_len after a 1xx */
	if (parse_head(p) < 0 || head_done(p) < 0)
		return -1;
	return (long)n;
}

static int deliver(struct http_parser *p, const char *buf, size_t n)
{
	if (n > 0 && p->on_body && p->on_body(p->arg, buf, n) != 0)
		return parse_fail(p, "body callback failed");
	return 0;
}

static long feed_body(struct http_parser *p, const char *buf, size_t len)
{
	size_t n = len;

	if (p->content_length >= 0 && n > p->remaining)
		n = (size_t)p->remaining;
	if (deliver(p, buf, n) < 0)
		return -1;
	if (p->content_length >= 0) {
		p->remaining -= n;
		if (p->remaining == 0)
			p->state = HTTP_PARSE_DONE;
	}
	return (long)n;
}

static long feed_chunk_size(struct http_parser *p, const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		char c = buf[i];
		int v = hex_value(c);

		if (++p->line_len > HTTP_CHUNK_LINE_MAX)
			return parse_fail(p, "chunk-size line too long");
		switch (p->sub) {
		case CS_FIRST:
			if (v < 0)
				return parse_fail(p, "bad chunk size");
			p->remaining = (uint64_t)v;
			p->sub = CS_DIGITS;
			break;
		case CS_DIGITS:
			if (v >= 0) {
				if (p->remaining > (uint64_t)INT64_MAX >> 4)
					return parse_fail(p, "chunk size overflows");
				p->remaining = p->remaining << 4 | (uint64_t)v;
				break;
			}
			/* fall through */
		case CS_WS:
			if (c == ' ' || c == '\t')
				p->sub = CS_WS;
			else if (c == ';')
				p->sub = CS_EXT;
			else if (c == '\r')
				p->sub = CS_CR;
			else
				return parse_fail(p, "bad chunk size");
			break;
		case CS_EXT:
			/* Extensions are skipped, not stored. */
			if (c == '\r')
				p->sub = CS_CR;
			else if (c == '\n' || c == '\0')
				return parse_fail(p, "bad chunk extension");
			break;
		default: /* CS_CR */
			if (c != '\n')
				return parse_fail(p, "missing CRLF after chunk size");
			p->state = p->remaining ? HTTP_PARSE_CHUNK_DATA : HTTP_PARSE_TRAILER;
			p->sub = p->remaining ? 0 : TR_START;
			p->line_len = 0;
			return (long)(i + 1);
		}
	}
	return (long)len;
}

static long feed_chunk_data(struct http_parser *p, const char *buf, size_t len)
{
	size_t n = len < p->remaining ? len : (size_t)p->remaining;

	if (deliver(p, buf, n) < 0)
		return -1;
	p->remaining -= n;
	if (p->remaining == 0) {
		p->state = HTTP_PARSE_CHUNK_CRLF;
		p->sub = 0;
	}
	return (long)n;
}

static long feed_chunk_crlf(struct http_parser *p, const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != (p->sub == 0 ? '\r' : '\n'))
			return parse_fail(p, "missing CRLF after chunk data");
		if (p->sub++ == 1) {
			p->state = HTTP_PARSE_CHUNK_SIZE;
			p->sub = CS_FIRST;
			p->line_len = 0;
			return (long)(i + 1);
		}
	}
	return (long)len;
}

/* Trailer fields are checked for line structure and dropped: the daemon
 * puts nothing there that the client needs. */
static long feed_trailer(struct http_parser *p, const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		char c = buf[i];

		if (++p->line_len > sizeof(p->head))
			return parse_fail(p, "trailers too large");
		switch (p->sub) {
		case TR_START:
		case TR_LINE:
			if (c == '\r')
				p->sub = p->sub == TR_START ? TR_END_CR : TR_LINE_CR;
			else if (c == '\n' || c == '\0')
				return parse_fail(p, "bad trailer");
			else
				p->sub = TR_LINE;
			break;
		case TR_END_CR:
			if (c != '\n')
				return parse_fail(p, "missing CRLF after trailers");
			p->state = HTTP_PARSE_DONE;
			return (long)(i + 1);
		default: /* TR_LINE_CR */
			if (c != '\n')
				return parse_fail(p, "missing CRLF in trailer");
			p->sub = TR_START;
			break;
		}
	}
	return (long)len;
}

long http_parser_feed(struct http_parser *p, const char *buf, size_t len)
{
	size_t off = 0;

	if (len > LONG_MAX)
		len = LONG_MAX;
	/* Every step below consumes at least one byte or ends the response,
	 * so this loop terminates. */
	while (off < len && p->state != HTTP_PARSE_DONE) {
		long n;

		switch (p->state) {
		case HTTP_PARSE_HEAD:
			n = feed_head(p, buf + off, len - off);
			break;
		case HTTP_PARSE_BODY:
			n = feed_body(p, buf + off, len - off);
			break;
		case HTTP_PARSE_CHUNK_SIZE:
			n = feed_chunk_size(p, buf + off, len - off);
			break;
		case HTTP_PARSE_CHUNK_DATA:
			n = feed_chunk_data(p, buf + off, len - off);
			break;
		case HTTP_PARSE_CHUNK_CRLF:
			n = feed_chunk_crlf(p, buf + off, len - off);
			break;
		case HTTP_PARSE_TRAILER:
			n = feed_trailer(p, buf + off, len - off);
			break;
		default: /* HTTP_PARSE_ERROR: stays there */
			return -1;
		}
		if (n < 0)
			return -1;
		off += (size_t)n;
	}
	return p->state == HTTP_PARSE_ERROR ? -1 : (long)off;
}

int http_parser_eof(struct http_parser *p)
{
	if (p->state == HTTP_PARSE_BODY && p->content_length < 0)
		p->state = HTTP_PARSE_DONE;
	if (p->state == HTTP_PARSE_DONE)
		return 0;
	if (p->state != HTTP_PARSE_ERROR)
		parse_fail(p, p->state == HTTP_PARSE_HEAD && p->head_len == 0 ? "no response" : "response cut short");
	return -1;
}

/* Waits until fd is ready for events; errors and hangups count as ready, the
 * next read or write reports them. */
static int wait_fd(int fd, short events)
{
	struct pollfd pfd = { .fd = fd, .events = events };

	while (poll(&pfd, 1, -1) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

/* Connect fd to sa: 0 or -errno. */
static int connect_fd(int fd, const struct sockaddr *sa, socklen_t len)
{
	if (connect(fd, sa, len) < 0) {
		int so_err = 0;
		socklen_t so_len = sizeof(so_err);

		if (errno != EINTR)
			return -errno;
		/* An interrupted connect goes on in the background and calling
		 * connect() again would say EALREADY: wait for it instead. */
		int r = wait_fd(fd, POLLOUT);
		if (r < 0)
			return r;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_err, &so_len) < 0)
			return -errno;
		if (so_err)
			return -so_err;
	}
	return 0;
}

int http_connect_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(path);

	if (n == 0)
		return -EINVAL;
	if (n >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, n + 1);

	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int r = connect_fd(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (r < 0)
		return r;
	return TAKE_FD(fd);
}

int http_connect_tcp(const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1;

	if (netaddr_parse(addr, &ss, &len) < 0)
		return -EINVAL;
	_cleanup_close_ int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A request goes out in one sendmsg, but nothing is gained by letting
	 * the kernel hold back a small one. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	int r = connect_fd(fd, (struct sockaddr *)&ss, len);
	if (r < 0)
		return r;
	return TAKE_FD(fd);
}

/* Writes all of iov, resuming after partial writes. MSG_NOSIGNAL: a dead
 * daemon must give EPIPE, not kill the client with SIGPIPE. */
static int send_all(int fd, struct iovec *iov, size_t iovcnt)
{
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = iovcnt };

	for (;;) {
		while (mh.msg_iovlen > 0 && mh.msg_iov->iov_len == 0) {
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen == 0)
			return 0;

		ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (n < 0) {
			int r = 0;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				r = wait_fd(fd, POLLOUT);
			else if (errno != EINTR)
				r = -errno;
			if (r < 0)
				return r;
			continue;
		}
		for (size_t left = (size_t)n; left > 0;) {
			size_t k = left < mh.msg_iov->iov_len ? left : mh.msg_iov->iov_len;
			mh.msg_iov->iov_base = (char *)mh.msg_iov->iov_base + k;
			mh.msg_iov->iov_len -= k;
			left -= k;
			if (mh.msg_iov->iov_len == 0) {
				mh.msg_iov++;
				mh.msg_iovlen--;
			}
		}
	}
}

/* Reads and parses until the response is complete: 0, -ENODATA when the
 * daemon closed the connection early, -EPROTO when the parser failed (see
 * p->why), or -errno. */
static int read_response(int fd, struct http_parser *p)
{
	_cleanup_free_ char *buf = malloc(HTTP_READ_BUF);

	if (!buf)
		return -ENOMEM;
	while (p->state != HTTP_PARSE_DONE) {
		ssize_t n = read(fd, buf, HTTP_READ_BUF);
		if (n < 0) {
			int r = 0;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				r = wait_fd(fd, POLLIN);
			else if (errno != EINTR)
				r = -errno;
			if (r < 0)
				return r;
			continue;
		}
		if (n == 0)
			return http_parser_eof(p) < 0 ? -ENODATA : 0;
		if (http_parser_feed(p, buf, (size_t)n) < 0)
			return -EPROTO;
	}
	return 0;
}

/* Where body bytes go: the caller's callback, or a buffer bounded by max. */
struct body_sink {
	http_body_cb user;
	void *user_arg;
	bool user_failed;
	const struct http_parser *parser;
	const char *stream_type; /* if set, only a status < 300 with this Content-Type is streamed */
	char *buf;
	size_t len, cap, max;
	bool too_big, oom;
};

static bool streamed(const struct body_sink *s)
{
	const struct http_parser *p = s->parser;
	return s->user && (!s->stream_type || (p->status < 300 && strncasecmp(p->content_type, s->stream_type,
									      strlen(s->stream_type)) == 0));
}

static int sink_body(void *arg, const char *data, size_t n)
{
	struct body_sink *s = arg;

	if (streamed(s)) {
		int r = s->user(s->user_arg, data, n);
		s->user_failed = r != 0;
		return r;
	}
	if (n > s->max - s->len) {
		s->too_big = true;
		return -1;
	}
	/* max <= SIZE_MAX / 2 (see http_request), so none of this overflows;
	 * the +1 keeps room for the terminating NUL. */
	if (s->len + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 4096;
		while (cap < s->len + n + 1)
			cap *= 2;
		if (cap > s->max + 1)
			cap = s->max + 1;
		char *b = realloc(s->buf, cap);
		if (!b) {
			s->oom = true;
			return -1;
		}
		s->buf = b;
		s->cap = cap;
	}
	memcpy(s->buf + s->len, data, n);
	s->len += n;
	return 0;
}

static bool is_token(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!is_tchar(*s))
			return false;
	return true;
}

static bool is_target(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s <= ' ' || *s == 0x7f)
			return false;
	return true;
}

/* "Name: v\r\n..." or empty: every line CRLF-terminated and none empty, so
 * the caller can neither end the head early nor leave it open. */
static bool is_header_block(const char *h)
{
	size_t n = h ? strlen(h) : 0;

	if (n == 0)
		return true;
	if (n < 2 || h[n - 2] != '\r' || h[n - 1] != '\n' || h[0] == '\r' || h[0] == '\n')
		return false;
	for (size_t i = 0; i < n; i++) {
		if (h[i] == '\r' && h[i + 1] != '\n')
			return false;
		if (h[i] == '\n' && (h[i - 1] != '\r' || h[i + 1] == '\r' || h[i + 1] == '\n'))
			return false;
	}
	return true;
}

/* The head of a request whose body is body_len bytes, or chunked when
 * body_len is HTTP_BODY_CHUNKED. */
#define HTTP_BODY_CHUNKED SIZE_MAX
static int request_head(const char *method, const char *target, const char *extra, size_t body_len, char **ret,
			struct cove_err *err)
{
	char length[64] = "Transfer-Encoding: chunked";
	/* The messages do not echo the bad bytes: they may be CR/LF. */
	if (!is_token(method))
		return err_set(err, COVE_EINVAL, "bad HTTP method");
	if (!is_target(target))
		return err_set(err, COVE_EINVAL, "bad request target for %s", method);
	if (!is_header_block(extra))
		return err_set(err, COVE_EINVAL, "%s %s: extra headers must be CRLF-terminated lines", method, target);
	if (body_len != HTTP_BODY_CHUNKED)
		snprintf(length, sizeof(length), "Content-Length: %zu", body_len);
	if (asprintf(ret, "%s %s HTTP/1.1\r\nHost: cove\r\n%sContent-Type: application/json\r\n%s\r\n\r\n", method,
		     target, extra ? extra : "", length) < 0) {
		*ret = NULL;
		return err_sys(err, ENOMEM, "%s %s", method, target);
	}
	return 0;
}

static int response_error(const struct http_parser *p, const struct body_sink *s, int r, const char *method,
			  const char *target, size_t max_body, struct cove_err *err)
{
	if (s->too_big)
		return err_set(err, COVE_ETOOBIG, "%s %s: response body larger than %zu bytes", method, target,
			       max_body);
	if (s->oom)
		return err_sys(err, ENOMEM, "%s %s: response body", method, target);
	if (s->user_failed)
		return err_set(err, COVE_EINTERNAL, "%s %s: response body handler failed", method, target);
	if (r == -ENODATA)
		return err_set(err, ECONNRESET, "%s %s: daemon closed the connection (%s)", method, target, p->why);
	if (r == -EPROTO)
		return err_set(err, COVE_EINTERNAL, "%s %s: malformed response from daemon: %s", method, target,
			       p->why ? p->why : "?");
	return err_sys(err, -r, "%s %s: read response", method, target);
}

/* Build the request's head and send it with the body: -1 (err set) for a
 * request that cannot be sent, else 0 with send_all's result in *ret_sent. */
static int send_request(int fd, const char *method, const char *target, const char *extra_headers, const char *body,
			size_t body_len, int *ret_sent, struct cove_err *err)
{
	_cleanup_free_ char *head = NULL;

	if (!body)
		body_len = 0;
	if (request_head(method, target, extra_headers, body_len, &head, err) < 0)
		return -1;
	struct iovec iov[2] = { { head, strlen(head) }, { (void *)body, body_len } };
	*ret_sent = send_all(fd, iov, ARRAY_SIZE(iov));
	return 0;
}

/* A whole response into ret: its collected body NUL-terminated. */
static int take_response(const struct http_parser *p, struct body_sink *s, const char *method, const char *target,
			 struct http_response *ret, struct cove_err *err)
{
	if (!streamed(s)) {
		if (!s->buf && !(s->buf = malloc(1)))
			return err_sys(err, ENOMEM, "%s %s: response body", method, target);
		s->buf[s->len] = '\0';
	}
	ret->status = p->status;
	ret->body = s->buf;
	ret->body_len = s->len;
	memcpy(ret->content_type, p->content_type, sizeof(ret->content_type));
	ret->counts[0] = p->counts[0];
	ret->counts[1] = p->counts[1];
	return 0;
}

/* As much of a Content-Length body as sendfile takes (the kernel copies
 * from the page cache: no pass through our memory), done counting; 0 once
 * it is all sent, -EINVAL or -ENOSYS when src is not a file sendfile
 * reads (then read and send it), else -errno of the socket. */
static int send_file(int fd, const struct http_body_source *src, unsigned long long *done)
{
	while (*done < (unsigned long long)src->len) {
		unsigned long long left = (unsigned long long)src->len - *done;
		ssize_t n = sendfile(fd, src->fd, NULL, left < HTTP_SEND_FILE ? (size_t)left : HTTP_SEND_FILE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int r = wait_fd(fd, POLLOUT);
			if (r < 0)
				return r;
			continue;
		}
		if (n < 0)
			return -errno;
		if (n == 0) /* the file is shorter than it was: the read loop says so */
			return 0;
		*done += (unsigned long long)n;
		if (src->progress)
			src->progress(src->arg, *done);
	}
	return 0;
}

/* Send the head, then src's bytes: len of them, or chunks until EOF. 0, or
 * -errno of the socket (the response may still be there: see request());
 * -1 with err set when the source failed. */
static int send_fd_body(int fd, const char *method, const char *target, const char *extra_headers,
			const struct http_body_source *src, int *ret_sent, struct cove_err *err)
{
	_cleanup_free_ char *head = NULL;
	char buf[HTTP_SEND_BUF];
	bool chunked = src->len < 0;
	if (request_head(method, target, extra_headers, chunked ? HTTP_BODY_CHUNKED : (size_t)src->len, &head, err) < 0)
		return -1;
	struct iovec iov[3] = { { head, strlen(head) } };
	if ((*ret_sent = send_all(fd, iov, 1)) < 0)
		return 0;
	unsigned long long done = 0;
	if (!chunked) {
		int r = send_file(fd, src, &done);
		if (r < 0 && r != -EINVAL && r != -ENOSYS) {
			*ret_sent = r;
			return 0;
		}
	}
	for (;;) {
		size_t want = HTTP_SEND_BUF;
		if (!chunked && (unsigned long long)src->len - done < want)
			want = (size_t)((unsigned long long)src->len - done);
		ssize_t n = want ? read(src->fd, buf, want) : 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return err_sys(err, errno, "%s %s: read the body", method, target);
		if (n == 0 && !chunked && done < (unsigned long long)src->len)
			return err_set(err, COVE_EINVAL, "%s %s: the body ended %llu bytes short", method, target,
				       (unsigned long long)src->len - done);
		if (n == 0 && !chunked)
			return 0;
		char line[32];
		size_t k = 0;
		if (chunked)
			iov[k++] = (struct iovec){ line, (size_t)snprintf(line, sizeof(line), "%zx\r\n", (size_t)n) };
		iov[k++] = (struct iovec){ buf, (size_t)n };
		if (chunked)
			iov[k++] = (struct iovec){ "\r\n", 2 };
		if ((*ret_sent = send_all(fd, iov, k)) < 0 || n == 0)
			return 0;
		done += (unsigned long long)n;
		if (src->progress)
			src->progress(src->arg, done);
	}
}

static int request_src(int fd, const char *method, const char *target, const char *extra_headers, const char *body,
		       size_t body_len, const struct http_body_source *src, http_body_cb on_body, void *arg,
		       const char *stream_type, size_t max_body, struct http_response *ret, struct cove_err *err)
{
	struct http_parser p;
	struct body_sink sink = {
		.user = on_body, .user_arg = arg, .parser = &p, .stream_type = stream_type, .max = max_body
	};
	int sent = 0;

	if (sink.max > SIZE_MAX / 2)
		sink.max = SIZE_MAX / 2;
	if (src ? send_fd_body(fd, method, target, extra_headers, src, &sent, err) < 0
		: send_request(fd, method, target, extra_headers, body, body_len, &sent, err) < 0)
		return -1;
	/* A daemon may answer (413, 401) and close before reading the whole
	 * request: on EPIPE/ECONNRESET still read, and report the send
	 * error only if no response is there. */
	if (sent < 0 && sent != -EPIPE && sent != -ECONNRESET)
		return err_sys(err, -sent, "%s %s: send request", method, target);

	http_parser_init(&p, sink_body, &sink);
	p.no_body = strcmp(method, "HEAD") == 0;
	int r = read_response(fd, &p);
	if (r < 0) {
		free(sink.buf);
		if (sent < 0 && !sink.too_big && !sink.user_failed)
			return err_sys(err, -sent, "%s %s: send request", method, target);
		return response_error(&p, &sink, r, method, target, max_body, err);
	}
	return take_response(&p, &sink, method, target, ret, err);
}

static int request(int fd, const char *method, const char *target, const char *extra_headers, const char *body,
		   size_t body_len, http_body_cb on_body, void *arg, const char *stream_type, size_t max_body,
		   struct http_response *ret, struct cove_err *err)
{
	return request_src(fd, method, target, extra_headers, body, body_len, NULL, on_body, arg, stream_type, max_body,
			   ret, err);
}

int http_send_request(int fd, const char *method, const char *target, const char *extra_headers, const char *body,
		      size_t body_len, struct cove_err *err)
{
	int sent;

	if (send_request(fd, method, target, extra_headers, body, body_len, &sent, err) < 0)
		return -1;
	return sent < 0 ? err_sys(err, -sent, "%s %s: send request", method, target) : 0;
}

int http_request(int fd, const char *method, const char *target, const char *extra_headers, const char *body,
		 size_t body_len, http_body_cb on_body, void *arg, size_t max_body, struct http_response *ret,
		 struct cove_err *err)
{
	return request(fd, method, target, extra_headers, body, body_len, on_body, arg, NULL, max_body, ret, err);
}

int http_request_from_stream(int fd, const char *method, const char *target, const char *extra_headers,
			     const struct http_body_source *src, http_body_cb on_body, void *arg, const char *type,
			     size_t max_other_body, struct http_response *ret, struct cove_err *err)
{
	return request_src(fd, method, target, extra_headers, NULL, 0, src, on_body, arg, type, max_other_body, ret,
			   err);
}

int http_request_typed_stream(int fd, const char *method, const char *target, const char *type, http_body_cb on_body,
			      void *arg, size_t max_other_body, struct http_response *ret, struct cove_err *err)
{
	return request(fd, method, target, NULL, NULL, 0, on_body, arg, type, max_other_body, ret, err);
}

/* The head of the answer, a byte at a time: 0 once it is in, else as
 * read_response. */
static int read_head_bytewise(int fd, struct http_parser *p)
{
	while (p->state == HTTP_PARSE_HEAD) {
		char c;
		ssize_t n = read(fd, &c, 1);
		int r = 0;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			r = wait_fd(fd, POLLIN);
		else if (n < 0 && errno != EINTR)
			r = -errno;
		if (r < 0)
			return r;
		if (n == 0)
			return http_parser_eof(p) < 0 ? -ENODATA : 0;
		if (n == 1 && http_parser_feed(p, &c, 1) < 0)
			return -EPROTO;
	}
	return 0;
}

int http_request_upgrade(int fd, const char *target, const char *protocol, const char *extra_headers,
			 struct http_response *ret, struct cove_err *err)
{
	struct http_parser p;
	struct body_sink sink = { .parser = &p, .max = MAX_UPGRADE_REFUSAL };
	_cleanup_free_ char *headers = NULL;
	int sent;

	if (!is_token(protocol))
		return err_set(err, COVE_EINVAL, "bad protocol to upgrade to");
	if (asprintf(&headers, "Connection: Upgrade\r\nUpgrade: %s\r\n%s", protocol,
		     extra_headers ? extra_headers : "") < 0) {
		headers = NULL;
		return err_sys(err, ENOMEM, "GET %s", target);
	}
	if (send_request(fd, "GET", target, headers, NULL, 0, &sent, err) < 0)
		return -1;
	if (sent < 0 && sent != -EPIPE && sent != -ECONNRESET)
		return err_sys(err, -sent, "GET %s: send request", target);
	http_parser_init(&p, sink_body, &sink);
	p.upgrade = 1;
	int r = read_head_bytewise(fd, &p);
	if (r == 0 && p.state != HTTP_PARSE_DONE)
		r = read_response(fd, &p); /* a refusal's body */
	if (r < 0) {
		free(sink.buf);
		return response_error(&p, &sink, r, "GET", target, sink.max, err);
	}
	return take_response(&p, &sink, "GET", target, ret, err);
}

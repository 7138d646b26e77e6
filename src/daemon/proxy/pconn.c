/* One proxied connection (proxy.h): the client's request heads read and
 * passed on, bodies and answers passed as they come, back-pressure both
 * ways. */
#include <errno.h>
#include <event2/buffer.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/netaddr.h"
#include "daemon/proxy/head.h"
#include "daemon/proxy/proxy.h"
#include "daemon/proxy/proxy_private.h"
#include "engine/engine.h"
#include "engine/ports.h"

#define FIRST_HEAD_TIMEOUT 60 /* seconds for a new connection's first head */
#define LINE_MAX_BYTES 4096   /* a chunk-size or trailer line */
#define ANSWER_HEAD_MAX (64u << 10)
/* Per read: 4 KiB, or 64 KiB after a read that filled its 4 KiB (a
 * stream), each less room for libevent's chain header, which would double
 * the chain's allocation. A connection that trickles (a slow head) holds
 * 4 KiB, not 64. */
#define READ_SMALL (4096u - 256)
#define READ_BIG ((64u << 10) - 256)

static void cli_read(struct pconn *c);
static void cli_write(struct bufferevent *bev, void *arg);
static void cli_event(struct bufferevent *bev, short what, void *arg);
static void up_read(struct pconn *c);
static void up_write(struct bufferevent *bev, void *arg);
static void up_event(struct bufferevent *bev, short what, void *arg);

static void nodelay(int fd)
{
	int one = 1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* One read of fd into in, for the readable event of a side (*big: its
 * last read filled READ_SMALL): 0 when bytes came, -1 when none yet, else
 * the bufferevent events it means (the end, an error in errno, the first
 * head's deadline). */
static short read_side(int fd, short what, struct evbuffer *in, bool *big)
{
	struct evbuffer_iovec v;
	size_t want = *big ? READ_BIG : READ_SMALL;
	ssize_t n = -1;
	errno = what & EV_TIMEOUT ? ETIMEDOUT : ENOMEM;
	if (!(what & EV_TIMEOUT) && evbuffer_reserve_space(in, (ev_ssize_t)want, &v, 1) == 1)
		n = read(fd, v.iov_base, v.iov_len < want ? v.iov_len : want);
	if (n > 0) {
		*big = (size_t)n >= READ_SMALL;
		v.iov_len = (size_t)n;
		evbuffer_commit_space(in, &v, 1);
		return 0;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return -1;
	return BEV_EVENT_READING | (n == 0 ? BEV_EVENT_EOF : errno == ETIMEDOUT ? BEV_EVENT_TIMEOUT : BEV_EVENT_ERROR);
}

/* A side readable (the client's, or the port's: fd tells), or the client
 * quiet too long before its first head. */
static void readable(evutil_socket_t fd, short what, void *arg)
{
	struct pconn *c = arg;
	bool up = c->up_rd && fd == event_get_fd(c->up_rd);
	short ev = read_side(fd, what, up ? c->up_in : c->cli_in, up ? &c->up_big : &c->cli_big);
	if (ev == 0)
		up ? up_read(c) : cli_read(c);
	else if (ev > 0)
		(up ? up_event : cli_event)(up ? c->up : c->cli, ev, c);
}

/* Reading one side (rd: c->cli_rd or c->up_rd) on or off. The client's
 * has a deadline until its first request is through. */
static void reading(struct pconn *c, struct event *rd, bool on)
{
	static const struct timeval first_head = { FIRST_HEAD_TIMEOUT, 0 };
	if (!on)
		event_del(rd);
	else if (rd != c->cli_rd || c->up)
		event_add(rd, NULL);
	else if (!event_pending(rd, EV_READ, NULL))
		event_add(rd, &first_head);
}

void pconn_new(struct event_base *base, int fd, const struct sockaddr *sa)
{
	struct pconn *c = calloc(1, sizeof(*c));
	if (c) {
		c->cli = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
		c->cli_rd = event_new(base, fd, EV_READ | EV_PERSIST, readable, c);
		c->cli_in = evbuffer_new();
	}
	if (!c || !c->cli || !c->cli_rd || !c->cli_in) {
		if (c && c->cli_rd)
			event_free(c->cli_rd);
		if (c && c->cli_in)
			evbuffer_free(c->cli_in);
		if (c && c->cli)
			bufferevent_free(c->cli); /* closes fd */
		else
			close(fd);
		free(c);
		return;
	}
	netaddr_format(sa, c->peer, sizeof(c->peer));
	/* the address alone: X-Forwarded-For has no port */
	char *colon = strrchr(c->peer, ':');
	if (colon)
		*colon = '\0';
	if (c->peer[0] == '[') {
		memmove(c->peer, c->peer + 1, strlen(c->peer));
		c->peer[strlen(c->peer) - 1] = '\0';
	}
	nodelay(fd);
	bufferevent_setcb(c->cli, NULL, cli_write, cli_event, c);
	bufferevent_setwatermark(c->cli, EV_WRITE, PROXY_HIGH_WATER / 2, 0);
	bufferevent_enable(c->cli, EV_WRITE);
	reading(c, c->cli_rd, true);
	c->next = proxy.conns;
	if (c->next)
		c->next->prev = c;
	proxy.conns = c;
	proxy.count++;
}

/* The connection to the port closed, its reading with it. */
static void up_free(struct pconn *c)
{
	event_free(c->up_rd);
	evbuffer_free(c->up_in);
	bufferevent_free(c->up);
	c->up = NULL;
	c->up_rd = NULL;
	c->up_in = NULL;
	ports_activity(engine_ctx, c->id, -1);
}

void pconn_free(struct pconn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		proxy.conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	proxy.count--;
	if (c->up)
		up_free(c);
	event_free(c->cli_rd);
	evbuffer_free(c->cli_in);
	bufferevent_free(c->cli);
	explicit_bzero(c->token, sizeof(c->token));
	free(c);
}

static size_t out_len(struct bufferevent *bev)
{
	return evbuffer_get_length(bufferevent_get_output(bev));
}

/* The first n bytes of from on their way to the socket of to: written at
 * once when nothing waits before them (a request or an answer then costs
 * no turn of the loop and no epoll_ctl for the write event), the rest
 * queued on to's output for its bufferevent. A write error is left for
 * that bufferevent to meet (and report) on its next write. */
static void pass(struct bufferevent *to, struct evbuffer *from, size_t n)
{
	struct evbuffer *out = bufferevent_get_output(to);
	if (n > 0 && evbuffer_get_length(out) == 0) {
		int w = evbuffer_write_atmost(from, bufferevent_getfd(to), (ev_ssize_t)n);
		n -= w > 0 ? (size_t)w : 0;
	}
	evbuffer_remove_buffer(from, out, n);
}

/* Close once what is queued for the client has gone (an answer of the
 * proxy's), reading nothing more from either side. */
static void close_when_sent(struct pconn *c)
{
	c->closing = true;
	reading(c, c->cli_rd, false);
	if (c->up)
		up_free(c);
	if (out_len(c->cli) == 0)
		pconn_free(c);
}

/* An answer of the proxy's own (an error), then the connection's end. Once
 * the port has answered something, a second answer would be read as part
 * of the port's: the connection is cut instead. */
static void fail(struct pconn *c, int status, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void fail(struct pconn *c, int status, const char *reason, const char *fmt, ...)
{
	if (c->up_seen || c->state == PS_RAW) {
		pconn_free(c);
		return;
	}
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	evbuffer_add_printf(bufferevent_get_output(c->cli),
			    "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
			    "Connection: close\r\nCache-Control: no-store\r\n\r\n%s\n",
			    status, reason, strlen(msg) + 1, msg);
	close_when_sent(c);
}

/* ---- the first request: route, token, connection ---- */

static bool token_is(const char *given, const char *token)
{
	size_t n = strlen(given);
	volatile unsigned char diff = n != PORT_TOKEN_LEN;
	for (size_t i = 0; i < PORT_TOKEN_LEN; i++)
		diff |= (unsigned char)token[i] ^ (unsigned char)(i < n ? given[i] : 0);
	return diff == 0;
}

/* Which sandbox and port the head names: E2B's headers, else the host
 * name. 0, or -1 after failing c. */
static int route(struct pconn *c, const struct http_head *h, char id[16], int *port)
{
	const struct head_field *sid = head_get(h, "E2b-Sandbox-Id"), *sport = head_get(h, "E2b-Sandbox-Port");
	const struct head_field *host = head_get(h, "Host");
	if (sid || sport) {
		if (!sid || !sport || head_route_id(sid->value, sid->value_len, id) < 0 ||
		    head_port(sport->value, sport->value_len, port) < 0) {
			fail(c, 400, "Bad Request",
			     "E2b-Sandbox-Id needs E2b-Sandbox-Port, a sandbox ID and a port 1-65535");
			return -1;
		}
		return 0;
	}
	if (!host) {
		fail(c, 400, "Bad Request", "no Host header");
		return -1;
	}
	if (head_route_host(host->value, host->value_len, proxy.domain, id, port) < 0) {
		fail(c, 404, "Not Found", "'%.*s' names no sandbox port: want PORT-ID.%s", (int)host->value_len,
		     host->value, proxy.domain);
		return -1;
	}
	return 0;
}

/* The token a request shows: a header, the query, or the cookie. */
static bool authorized(struct pconn *c, const struct http_head *h, const struct sandbox_port *p)
{
	char tok[HEAD_TOKEN_MAX + 1], rest[PROXY_MAX_HEAD];
	static const char *const headers[] = { "X-Cove-Token", "E2b-Traffic-Access-Token" };
	for (size_t i = 0; i < 2; i++) {
		const struct head_field *f = head_get(h, headers[i]);
		if (f && f->value_len <= HEAD_TOKEN_MAX) {
			memcpy(tok, f->value, f->value_len);
			tok[f->value_len] = '\0';
			if (token_is(tok, p->token))
				return true;
		}
	}
	if (head_take_param(h->target, h->target_len, PROXY_TOKEN_NAME, tok, rest, sizeof(rest)) == 1 &&
	    token_is(tok, p->token)) {
		c->set_cookie = true;
		return true;
	}
	const struct head_field *f = head_get(h, "Cookie");
	return f && head_take_cookie(f->value, f->value_len, PROXY_TOKEN_NAME, tok, rest, sizeof(rest)) == 1 &&
	       token_is(tok, p->token);
}

static int connect_up(struct pconn *c, struct sandbox *sb)
{
	struct cove_err err = { 0 };
	int fd;
	if (ports_connect(engine_ctx, sb, c->port, c->v6, &fd, &err) < 0) {
		fail(c, 502, "Bad Gateway", "%s", err.msg);
		return -1;
	}
	c->up = bufferevent_socket_new(proxy.base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->up_rd = event_new(proxy.base, fd, EV_READ | EV_PERSIST, readable, c);
	c->up_in = evbuffer_new();
	if (!c->up || !c->up_rd || !c->up_in) {
		if (c->up_rd)
			event_free(c->up_rd);
		if (c->up_in)
			evbuffer_free(c->up_in);
		if (c->up)
			bufferevent_free(c->up);
		else
			close(fd);
		c->up = NULL;
		c->up_rd = NULL;
		c->up_in = NULL;
		fail(c, 500, "Internal Server Error", "out of memory");
		return -1;
	}
	nodelay(fd);
	bufferevent_setcb(c->up, NULL, up_write, up_event, c);
	bufferevent_setwatermark(c->up, EV_WRITE, PROXY_HIGH_WATER / 2, 0);
	bufferevent_enable(c->up, EV_WRITE);
	ports_activity(engine_ctx, c->id, +1);
	reading(c, c->up_rd, true);
	/* The first head's deadline is over (an event_add without one would
	 * leave it). */
	event_remove_timer(c->cli_rd);
	return 0;
}

static int first_request(struct pconn *c, const struct http_head *h)
{
	if (route(c, h, c->id, &c->port) < 0)
		return -1;
	struct sandbox *sb = sandbox_find(engine_ctx, c->id);
	const struct sandbox_port *p = sb && sb->state != SB_DELETING ? ports_find(sb, c->port) : NULL;
	struct cove_err err = { 0 };
	if (!sb || sb->state == SB_DELETING) {
		fail(c, 404, "Not Found", "no sandbox '%s'", c->id);
		return -1;
	}
	/* A sandbox whose every port is public (E2B's): opened now. */
	if (!p && sb->spec.ports_public && ports_open(engine_ctx, sb, c->port, true, &p, &err) < 0) {
		fail(c, 502, "Bad Gateway", "port %d of sandbox '%s': %s", c->port, c->id, err.msg);
		return -1;
	}
	if (!p) {
		fail(c, 404, "Not Found", "port %d of sandbox '%s' is not open (POST /v1/sandboxes/%s/ports)", c->port,
		     c->id, c->id);
		return -1;
	}
	if (!p->public && !authorized(c, h, p)) {
		fail(c, 401, "Unauthorized",
		     "port %d of sandbox '%s' is private: give its token in the header X-Cove-Token, or once as the "
		     "query parameter " PROXY_TOKEN_NAME,
		     c->port, c->id);
		return -1;
	}
	memcpy(c->token, p->token, sizeof(c->token));
	/* No timeout from now on (connect_up): a WebSocket or a long poll may
	 * stay quiet. */
	return connect_up(c, sb);
}

/* ---- a head, passed on ---- */

static bool dropped(const struct head_field *f)
{
	static const char *const names[] = { "X-Cove-Token", "E2b-Traffic-Access-Token", "X-Forwarded-For",
					     "X-Forwarded-Proto" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (f->name_len == strlen(names[i]) && strncasecmp(f->name, names[i], f->name_len) == 0)
			return true;
	return false;
}

/* A head being written into a buffer of cap bytes; len past cap: too
 * long (nothing written past it). */
struct hbuf {
	char *p;
	size_t len, cap;
};

static void put(struct hbuf *b, const char *s, size_t n)
{
	if (b->len + n <= b->cap)
		memcpy(b->p + b->len, s, n);
	b->len += n;
}

static void put_str(struct hbuf *b, const char *s)
{
	put(b, s, strlen(s));
}

/* The head as it goes on, built with copies (no printf, no allocation) and
 * written at once when nothing waits before it. */
static int forward_head(struct pconn *c, const struct http_head *h)
{
	char tok[HEAD_TOKEN_MAX + 1], buf[PROXY_MAX_HEAD], head[PROXY_MAX_HEAD + 256];
	struct hbuf b = { head, 0, sizeof(head) };
	if (head_take_param(h->target, h->target_len, PROXY_TOKEN_NAME, tok, buf, sizeof(buf)) < 0)
		return -1;
	put(&b, h->method, h->method_len);
	put(&b, " ", 1);
	put_str(&b, buf);
	char version[] = " HTTP/1.x\r\n";
	version[8] = (char)('0' + h->minor);
	put(&b, version, sizeof(version) - 1);
	for (int i = 0; i < h->n_fields; i++) {
		const struct head_field *f = &h->fields[i];
		if (dropped(f))
			continue;
		if (f->name_len == 6 && strncasecmp(f->name, "Cookie", 6) == 0) {
			if (head_take_cookie(f->value, f->value_len, PROXY_TOKEN_NAME, tok, buf, sizeof(buf)) < 0)
				return -1;
			if (buf[0]) {
				put_str(&b, "Cookie: ");
				put_str(&b, buf);
				put(&b, "\r\n", 2);
			}
			continue;
		}
		put(&b, f->name, f->name_len);
		put(&b, ": ", 2);
		put(&b, f->value, f->value_len);
		put(&b, "\r\n", 2);
	}
	put_str(&b, "X-Forwarded-For: ");
	put_str(&b, c->peer);
	put_str(&b, "\r\nX-Forwarded-Proto: http\r\n\r\n");
	if (b.len > b.cap)
		return -1;
	struct evbuffer *out = bufferevent_get_output(c->up);
	size_t done = 0;
	if (evbuffer_get_length(out) == 0) {
		ssize_t w = write(bufferevent_getfd(c->up), head, b.len);
		done = w > 0 ? (size_t)w : 0;
	}
	if (done < b.len)
		evbuffer_add(out, head + done, b.len - done);
	return 0;
}

/* A whole head at the start of in (head_len bytes): checked, routed (the
 * first), passed on; the state for what follows it. 0, or -1 with c
 * failed (or freed). */
static int on_head(struct pconn *c, struct evbuffer *in, size_t head_len)
{
	struct http_head h;
	const char *buf = (const char *)evbuffer_pullup(in, (ev_ssize_t)head_len);
	bool chunked, upgrade;
	uint64_t length;
	if (!buf || head_parse(buf, head_len, &h) < 0 || head_body(&h, &chunked, &length) < 0) {
		fail(c, 400, "Bad Request", "a malformed request head");
		return -1;
	}
	if (h.method_len == 7 && memcmp(h.method, "CONNECT", 7) == 0) {
		fail(c, 405, "Method Not Allowed", "CONNECT: this is not a forward proxy");
		return -1;
	}
	if (!c->up) {
		if (first_request(c, &h) < 0)
			return -1;
	} else {
		char id[16];
		int port;
		if (route(c, &h, id, &port) < 0)
			return -1;
		if (strcmp(id, c->id) != 0 || port != c->port) {
			pconn_free(c); /* another port: a connection of its own */
			return -1;
		}
	}
	const struct head_field *conn = head_get(&h, "Connection");
	upgrade = head_get(&h, "Upgrade") && conn && head_list_has(conn->value, conn->value_len, "upgrade");
	if (forward_head(c, &h) < 0) {
		fail(c, 431, "Request Header Fields Too Large", "a request head too large");
		return -1;
	}
	evbuffer_drain(in, head_len);
	c->remaining = length;
	c->state = upgrade ? PS_RAW : chunked ? PS_CHUNK_SIZE : length ? PS_BODY : PS_HEAD;
	return 0;
}

/* A line of a chunked body (size or trailer) passed on: its length with
 * CRLF, 0 when it is not whole yet, -1 when too long. */
static long chunk_line(struct pconn *c, struct evbuffer *in, uint64_t *size)
{
	struct evbuffer_ptr eol = evbuffer_search_eol(in, NULL, NULL, EVBUFFER_EOL_CRLF_STRICT);
	if (eol.pos < 0)
		return evbuffer_get_length(in) > LINE_MAX_BYTES ? -1 : 0;
	if (eol.pos > LINE_MAX_BYTES)
		return -1;
	if (size) {
		char line[32] = "";
		evbuffer_copyout(in, line, eol.pos < 31 ? (size_t)eol.pos : 31);
		char *end;
		errno = 0;
		*size = strtoull(line, &end, 16);
		if (end == line || errno || (*end && *end != ';' && *end != ' ' && *end != '\t') ||
		    *size > (1ull << 62))
			return -1;
	}
	long n = (long)eol.pos + 2;
	pass(c->up, in, (size_t)n);
	return n;
}

/* Pass what the state allows of in: 1 when something moved, 0 when more
 * must come, -1 when c is gone or failed. */
static int step(struct pconn *c, struct evbuffer *in)
{
	size_t len = evbuffer_get_length(in), n;
	uint64_t size;
	long r = 0;
	switch (c->state) {
	case PS_HEAD: {
		struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
		if (end.pos < 0 && len <= PROXY_MAX_HEAD)
			return 0;
		if (end.pos < 0 || (size_t)end.pos + 4 > PROXY_MAX_HEAD) {
			fail(c, 431, "Request Header Fields Too Large", "a request head over %u bytes", PROXY_MAX_HEAD);
			return -1;
		}
		return on_head(c, in, (size_t)end.pos + 4) < 0 ? -1 : 1;
	}
	case PS_BODY:
	case PS_CHUNK_DATA:
		n = len < c->remaining ? len : (size_t)c->remaining;
		pass(c->up, in, n);
		c->remaining -= n;
		if (c->remaining == 0)
			c->state = c->state == PS_BODY ? PS_HEAD : PS_CHUNK_SIZE;
		return 1;
	case PS_CHUNK_SIZE:
		if ((r = chunk_line(c, in, &size)) <= 0)
			break;
		c->remaining = size + 2;
		c->state = size ? PS_CHUNK_DATA : PS_TRAILER;
		return 1;
	case PS_TRAILER:
		if ((r = chunk_line(c, in, NULL)) <= 0)
			break;
		if (r == 2)
			c->state = PS_HEAD;
		return 1;
	case PS_RAW:
		pass(c->up, in, len);
		return 1;
	}
	if (r < 0)
		fail(c, 400, "Bad Request", "a malformed chunked body");
	return r < 0 ? -1 : 0;
}

static void cli_read(struct pconn *c)
{
	struct evbuffer *in = c->cli_in;
	while (evbuffer_get_length(in) > 0) {
		if (c->up && out_len(c->up) >= PROXY_HIGH_WATER) {
			/* up_write resumes it below half */
			reading(c, c->cli_rd, false);
			return;
		}
		if (step(c, in) <= 0)
			return;
	}
}

/* ---- ends ---- */

/* One side sent its end: once what waits for the other side is written,
 * that side's sending is shut too; both ends seen and nothing waiting:
 * the connection is over. */
static void half_close(struct pconn *c)
{
	if (c->cli_eof && c->up && out_len(c->up) == 0)
		(void)shutdown(bufferevent_getfd(c->up), SHUT_WR);
	if (c->up_eof && out_len(c->cli) == 0) {
		/* An HTTP answer ended by the port's close: the client's
		 * connection ends with it. After an upgrade, only its sending. */
		if (c->state != PS_RAW || c->cli_eof) {
			pconn_free(c);
			return;
		}
		(void)shutdown(bufferevent_getfd(c->cli), SHUT_WR);
	}
}

static void cli_write(struct bufferevent *bev, void *arg)
{
	struct pconn *c = arg;
	if (c->closing) {
		if (out_len(bev) == 0)
			pconn_free(c);
		return;
	}
	if (c->up && !c->up_eof)
		reading(c, c->up_rd, true);
	if (c->up_eof)
		half_close(c);
}

static void cli_event(struct bufferevent *bev, short what, void *arg)
{
	struct pconn *c = arg;
	if ((what & BEV_EVENT_EOF) && !c->closing && c->up) {
		c->cli_eof = true;
		reading(c, c->cli_rd, false);
		half_close(c);
		return;
	}
	pconn_free(c); /* an error, a timeout, or the end before any request */
}

/* The first answer's head, with the cookie a query token earned after its
 * status line (1xx interim answers pass first). 0 when it is not whole
 * yet. */
static int add_cookie(struct pconn *c, struct evbuffer *in)
{
	struct evbuffer *out = bufferevent_get_output(c->cli);
	for (;;) {
		struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
		if (end.pos < 0) {
			if (evbuffer_get_length(in) > ANSWER_HEAD_MAX)
				c->set_cookie = false; /* not an answer it can read: untouched */
			return c->set_cookie ? 0 : 1;
		}
		char status[16] = "";
		evbuffer_copyout(in, status, sizeof(status) - 1);
		if (strncmp(status, "HTTP/1.", 7) != 0 || status[8] != ' ') {
			c->set_cookie = false;
			return 1;
		}
		if (status[9] == '1' && strncmp(status + 9, "101", 3) != 0) {
			evbuffer_remove_buffer(in, out, (size_t)end.pos + 4);
			continue;
		}
		struct evbuffer_ptr eol = evbuffer_search_eol(in, NULL, NULL, EVBUFFER_EOL_CRLF_STRICT);
		evbuffer_remove_buffer(in, out, (size_t)eol.pos + 2);
		evbuffer_add_printf(out, "Set-Cookie: " PROXY_TOKEN_NAME "=%s; Path=/; HttpOnly; SameSite=Lax\r\n",
				    c->token);
		c->set_cookie = false;
		return 1;
	}
}

static void up_read(struct pconn *c)
{
	struct evbuffer *in = c->up_in;
	c->up_seen = true;
	if (c->set_cookie && add_cookie(c, in) == 0)
		return;
	pass(c->cli, in, evbuffer_get_length(in));
	if (out_len(c->cli) >= PROXY_HIGH_WATER)
		reading(c, c->up_rd, false); /* cli_write resumes it below half */
}

static void up_write(struct bufferevent *bev, void *arg)
{
	struct pconn *c = arg;
	if (!c->cli_eof)
		reading(c, c->cli_rd, true);
	else
		half_close(c);
}

/* 127.0.0.1 refused before anything came: the server may listen on ::1
 * only (node's "localhost"). The request goes again, to ::1. */
static bool retry_v6(struct pconn *c)
{
	struct sandbox *sb = sandbox_find(engine_ctx, c->id);
	struct cove_err err = { 0 };
	int fd;
	if (c->v6 || c->up_seen || !sb || ports_connect(engine_ctx, sb, c->port, true, &fd, &err) < 0)
		return false;
	struct bufferevent *up = bufferevent_socket_new(proxy.base, fd, BEV_OPT_CLOSE_ON_FREE);
	struct event *rd = up ? event_new(proxy.base, fd, EV_READ | EV_PERSIST, readable, c) : NULL;
	if (!rd) {
		if (up)
			bufferevent_free(up);
		else
			close(fd);
		return false;
	}
	c->v6 = true;
	nodelay(fd);
	evbuffer_add_buffer(bufferevent_get_output(up), bufferevent_get_output(c->up));
	event_free(c->up_rd);
	bufferevent_free(c->up);
	c->up = up;
	c->up_rd = rd;
	bufferevent_setcb(up, NULL, up_write, up_event, c);
	bufferevent_setwatermark(up, EV_WRITE, PROXY_HIGH_WATER / 2, 0);
	bufferevent_enable(up, EV_WRITE);
	reading(c, rd, true);
	return true;
}

static void up_event(struct bufferevent *bev, short what, void *arg)
{
	struct pconn *c = arg;
	int e = (what & BEV_EVENT_EOF) ? 0 : EVUTIL_SOCKET_ERROR();
	/* A refused connect shows as an error or, once a write has taken the
	 * error, as an end before any byte: for a request, both are "nothing
	 * answered". */
	bool unanswered = !c->up_seen && c->state != PS_RAW && (e == ECONNREFUSED || e == EPIPE || !e);
	if ((what & BEV_EVENT_EOF) && !unanswered) {
		c->up_eof = true;
		reading(c, c->up_rd, false);
		half_close(c);
		return;
	}
	if (unanswered && retry_v6(c))
		return;
	fail(c, 502, "Bad Gateway", "port %d of sandbox '%s': %s", c->port, c->id,
	     unanswered ? "nothing listens there (on 127.0.0.1 or ::1 inside the sandbox)" : strerror(e));
}

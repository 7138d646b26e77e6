/* coved's HTTP/1.1 server (see httpd.h).
 *
 * A connection reads a request's line and headers, then its body (by
 * Content-Length or chunked), hands it to the API, and reads nothing more
 * until the answer has been written: then the next request, pipelined or
 * not. A streaming route gets the request at the end of its headers and its
 * body through http_req_take_body; the socket is read only while less than
 * HTTP_BODY_HIGH_WATER waits for the handler, so an upload of any size
 * holds a few MiB of coved at most.
 *
 * Limits (struct http_limits, from coved's flags, access.c):
 *   headers over max_header_bytes: 431; a buffered route's body over
 *   max_body_bytes: 413; one connection over max_connections on a
 *   listener: 503 and closed; no request for idle_timeout: closed (unless
 *   keep_idle); a request not whole request_timeout after its first byte:
 *   408 and closed. Once the API has a request no limit applies until its
 *   answer has gone out: a stream runs for as long as it needs.
 *
 * A connection is freed only when no callback of it is on the stack (hold
 * and httpd_release), so a handler may close it from anywhere. */
#include <errno.h>
#include <event2/listener.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/http/httpd.h"

#include "daemon/http/httpd_internal.h"

struct httpd_server httpd_srv;


/* ---------------------------------------------------------------- helpers */

/* At most a line a second for what a flood of clients would repeat. */
static bool log_allowed(time_t *last)
{
	time_t now = time(NULL);
	if (now == *last)
		return false;
	*last = now;
	return true;
}

void httpd_arm(struct http_conn *c, double seconds)
{
	struct timeval tv = { (time_t)seconds, (suseconds_t)((seconds - (time_t)seconds) * 1e6) };
	evtimer_add(c->timer, &tv);
}

void httpd_set_phase(struct http_conn *c, enum phase phase)
{
	c->phase = phase;
	evtimer_del(c->timer);
	if (phase == PHASE_IDLE)
		httpd_arm(c, httpd_srv.limits.idle_timeout);
	else if (phase == PHASE_RECEIVING)
		httpd_arm(c, httpd_srv.limits.request_timeout);
}

void httpd_req_free(struct http_req *req)
{
	if (!req)
		return;
	free(req->uri);
	if (req->uri_parts)
		evhttp_uri_free(req->uri_parts);
	evhttp_clear_headers(&req->in_headers);
	evhttp_clear_headers(&req->out_headers);
	if (req->body)
		evbuffer_free(req->body);
	free(req);
}

static void conn_unlink(struct http_conn *c)
{
	if (c->next)
		c->next->prev = c->prev;
	if (c->prev)
		c->prev->next = c->next;
	else if (httpd_srv.conns == c)
		httpd_srv.conns = c->next;
	c->next = c->prev = NULL;
}

static void conn_free(struct http_conn *c)
{
	httpd_req_free(c->req);
	if (c->timer)
		event_free(c->timer);
	if (c->finish)
		event_free(c->finish);
	if (c->readable)
		event_free(c->readable);
	if (c->in)
		evbuffer_free(c->in);
	if (c->bev)
		bufferevent_free(c->bev);
	free(c);
}

/* The socket is read while the parser wants input and less than
 * INPUT_HIGH_WATER waits for it; conn_read calls this again once it has
 * taken some. */
void httpd_update_reading(struct http_conn *c)
{
	if (c->reading && !c->closed && evbuffer_get_length(c->in) < INPUT_HIGH_WATER)
		event_add(c->readable, NULL);
	else
		event_del(c->readable);
}

void httpd_set_reading(struct http_conn *c, bool on)
{
	c->reading = on;
	httpd_update_reading(c);
}

void httpd_hold(struct http_conn *c)
{
	c->holds++;
}

/* false when c is gone */
bool httpd_release(struct http_conn *c)
{
	if (--c->holds > 0 || !c->closed)
		return !c->closed;
	conn_free(c);
	return false;
}

void http_conn_close(struct http_conn *c)
{
	if (c->closed)
		return;
	c->closed = true;
	conn_unlink(c);
	if (c->listener)
		c->listener->count--;
	evtimer_del(c->timer);
	event_del(c->finish);
	httpd_set_reading(c, false);
	bufferevent_disable(c->bev, EV_WRITE);
	bufferevent_setcb(c->bev, NULL, NULL, NULL, NULL);
	httpd_hold(c);
	if (c->closecb) {
		http_conn_cb cb = c->closecb;
		c->closecb = NULL;
		cb(c, c->closecb_arg);
	}
	httpd_release(c);
}

/* A whole response written straight to the socket, for a connection about
 * to close. Best effort: the socket is non-blocking and this is far below
 * its buffer. */
static void send_raw_error(int fd, int status, const char *reason, const char *code, const char *message)
{
	char body[256], buf[512];
	int n = snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n", code, message);
	n = snprintf(buf, sizeof(buf),
		     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
		     "Connection: close\r\n\r\n%s",
		     status, reason, n, body);
	if (n > 0 && (size_t)n < sizeof(buf))
		(void)send(fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* A request the server itself refuses: the answer, then the connection
 * closes (what follows in the input cannot be trusted to be a request). */
static void refuse(struct http_conn *c, int status, const char *reason, const char *code, const char *message)
{
	struct evbuffer *out = bufferevent_get_output(c->bev);
	char body[256];
	if (c->req && c->req->reply != REPLY_NONE) {
		/* Answered already (the rest of a body was being dropped): no
		 * second answer, only the close once the first is out. */
		c->req->keep_alive = false;
		c->req->state = READ_DONE;
		c->req->reply = REPLY_DONE;
		httpd_set_reading(c, false);
		if (evbuffer_get_length(out) == 0)
			event_active(c->finish, 0, 0);
		return;
	}
	int n = snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n", code, message);
	evbuffer_add_printf(out,
			    "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
			    "Connection: close\r\n\r\n%s",
			    status, reason, n, body);
	if (c->req) {
		c->req->reply = REPLY_DONE;
		c->req->keep_alive = false;
		c->req->state = READ_DONE;
		c->req->discard = true;
	}
	c->sent_cb = NULL;
	/* No more reading: the connection ends once this is written. */
	httpd_set_reading(c, false);
	bufferevent_enable(c->bev, EV_WRITE);
}

bool httpd_header_is(struct evkeyvalq *h, const char *name, const char *value)
{
	const char *v = evhttp_find_header(h, name);
	return v && strcasecmp(v, value) == 0;
}

/* ---------------------------------------------------------------- requests */

static enum http_method method_of(const char *s)
{
	static const struct {
		const char *name;
		enum http_method m;
	} methods[] = {
		{ "GET", HTTP_GET },     { "POST", HTTP_POST },       { "HEAD", HTTP_HEAD },
		{ "PUT", HTTP_PUT },     { "DELETE", HTTP_DELETE },   { "OPTIONS", HTTP_OPTIONS },
		{ "TRACE", HTTP_TRACE }, { "CONNECT", HTTP_CONNECT }, { "PATCH", HTTP_PATCH },
	};
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (strcmp(s, methods[i].name) == 0)
			return methods[i].m;
	return HTTP_OTHER;
}

/* "METHOD URI HTTP/1.x"; -1 when it is not one. */
static int parse_request_line(struct http_req *req, char *line)
{
	char *method = strtok(line, " "), *uri = strtok(NULL, " "), *version = strtok(NULL, " ");
	if (!method || !uri || !version || strtok(NULL, " "))
		return -1;
	if (strcmp(version, "HTTP/1.1") == 0)
		req->minor = 1;
	else if (strcmp(version, "HTTP/1.0") == 0)
		req->minor = 0;
	else
		return -1;
	for (const char *p = method; *p; p++)
		if (*p < 'A' || *p > 'Z')
			return -1;
	req->method = method_of(method);
	req->uri = strdup(uri);
	req->uri_parts = req->uri ? evhttp_uri_parse_with_flags(uri, EVHTTP_URI_NONCONFORMANT) : NULL;
	return req->uri_parts ? 0 : -1;
}

/* "Name: value"; -1 when it is not one. */
static int parse_header(struct http_req *req, char *line)
{
	char *colon = strchr(line, ':'), *v, *end;
	if (!colon || colon == line || line[0] == ' ' || line[0] == '\t')
		return -1;
	*colon = '\0';
	for (const char *p = line; *p; p++)
		if (*p <= ' ' || *p >= 0x7f)
			return -1;
	for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
		;
	for (end = v + strlen(v); end > v && (end[-1] == ' ' || end[-1] == '\t'); end--)
		;
	*end = '\0';
	return evhttp_add_header(&req->in_headers, line, v);
}

/* How the body comes; -1 (answered) when that is not clear. */
static int body_framing(struct http_conn *c, struct http_req *req)
{
	const char *te = evhttp_find_header(&req->in_headers, "Transfer-Encoding");
	const char *cl = evhttp_find_header(&req->in_headers, "Content-Length");
	if (te && cl) {
		refuse(c, 400, "Bad Request", "invalid_argument", "both Content-Length and Transfer-Encoding");
		return -1;
	}
	if (te) {
		if (strcasecmp(te, "chunked") != 0 || req->minor == 0) {
			refuse(c, 400, "Bad Request", "invalid_argument", "unsupported Transfer-Encoding");
			return -1;
		}
		req->body_kind = BODY_CHUNKED;
		req->chunk = CHUNK_SIZE;
		return 0;
	}
	if (cl) {
		char *end;
		errno = 0;
		unsigned long long n = strtoull(cl, &end, 10);
		if (!*cl || *cl < '0' || *cl > '9' || *end || errno) {
			refuse(c, 400, "Bad Request", "invalid_argument", "malformed Content-Length");
			return -1;
		}
		req->body_kind = n ? BODY_LENGTH : BODY_NONE;
		req->body_left = n;
	}
	return 0;
}

static void refuse_too_large(struct http_conn *c)
{
	refuse(c, 413, "Payload Too Large", "too_large", "the request body is larger than --max-body-bytes");
}

static void dispatch(struct http_conn *c, struct http_req *req)
{
	httpd_set_phase(c, PHASE_HANDLING);
	http_stats_dispatched();
	httpd_srv.cbs.handle(req);
}

/* The headers are in: how the body comes, and whether the route takes it
 * now. -1 when the request was refused. */
static int headers_done(struct http_conn *c, struct http_req *req)
{
	const char *conn = evhttp_find_header(&req->in_headers, "Connection");
	req->keep_alive = req->minor >= 1 ? !(conn && strcasecmp(conn, "close") == 0)
					  : (conn && strcasecmp(conn, "keep-alive") == 0);
	if (body_framing(c, req) < 0)
		return -1;
	req->streaming = httpd_srv.cbs.streams(req);
	if (!req->streaming && req->body_kind == BODY_LENGTH && req->body_left > httpd_srv.limits.max_body_bytes) {
		refuse_too_large(c);
		return -1;
	}
	if (req->body_kind != BODY_NONE && req->minor >= 1 && httpd_header_is(&req->in_headers, "Expect", "100-continue"))
		evbuffer_add_printf(bufferevent_get_output(c->bev), "HTTP/1.1 100 Continue\r\n\r\n");
	req->state = req->body_kind == BODY_NONE ? READ_DONE : READ_BODY;
	if (req->streaming || req->state == READ_DONE)
		dispatch(c, req);
	return 0;
}

/* The request line and headers, a line at a time. 1 when they are all in,
 * 0 for more, -1 when refused. */
static int read_head(struct http_conn *c, struct http_req *req)
{
	struct evbuffer *in = c->in;
	for (;;) {
		size_t len;
		char *line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF);
		if (!line) {
			if (req->header_bytes + evbuffer_get_length(in) > httpd_srv.limits.max_header_bytes) {
				refuse(c, 431, "Request Header Fields Too Large", "too_large",
				       "the request's headers are larger than --max-header-bytes");
				return -1;
			}
			return 0;
		}
		req->header_bytes += len + 2;
		int r = 0;
		if (req->header_bytes > httpd_srv.limits.max_header_bytes) {
			free(line);
			refuse(c, 431, "Request Header Fields Too Large", "too_large",
			       "the request's headers are larger than --max-header-bytes");
			return -1;
		}
		if (req->state == READ_LINE && len == 0) {
			/* a stray CRLF before a request is allowed */
		} else if (req->state == READ_LINE) {
			r = parse_request_line(req, line);
			req->state = READ_HEADERS;
		} else if (len == 0) {
			free(line);
			return headers_done(c, req) < 0 ? -1 : 1;
		} else {
			r = parse_header(req, line);
		}
		free(line);
		if (r < 0) {
			refuse(c, 400, "Bad Request", "invalid_argument", "malformed request");
			return -1;
		}
	}
}

/* Move up to n bytes of body from in to the request's buffer. */
static void take(struct http_req *req, struct evbuffer *in, uint64_t n)
{
	int moved = evbuffer_remove_buffer(in, req->body, n > SIZE_MAX ? SIZE_MAX : (size_t)n);
	if (moved > 0) {
		req->body_left -= (uint64_t)moved;
		req->body_total += (uint64_t)moved;
	}
}

/* Room for more body: a buffered route up to the limit, a stream up to
 * the high water mark of what its handler has not taken. */
static uint64_t room(const struct http_req *req)
{
	size_t have = evbuffer_get_length(req->body);
	if (req->discard)
		return UINT64_MAX;
	if (req->streaming)
		return have < HTTP_BODY_HIGH_WATER ? HTTP_BODY_HIGH_WATER - have : 0;
	return UINT64_MAX;
}

/* A chunked body's framing. 1 when the body is whole, 0 for more, -1 when
 * refused. */
static int read_chunked(struct http_conn *c, struct http_req *req, struct evbuffer *in)
{
	for (;;) {
		size_t len;
		char *line, *end;
		uint64_t r;
		switch (req->chunk) {
		case CHUNK_SIZE:
			line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF);
			if (!line) {
				if (evbuffer_get_length(in) > MAX_CHUNK_LINE)
					goto bad;
				return 0;
			}
			errno = 0;
			req->body_left = strtoull(line, &end, 16);
			if (end == line || errno || (*end && *end != ';' && *end != ' ' && *end != '\t') ||
			    !((line[0] >= '0' && line[0] <= '9') ||
			      ((line[0] | 0x20) >= 'a' && (line[0] | 0x20) <= 'f'))) {
				free(line);
				goto bad;
			}
			free(line);
			req->chunk = req->body_left ? CHUNK_DATA : CHUNK_TRAILERS;
			break;
		case CHUNK_DATA:
			r = room(req);
			if (r == 0 || evbuffer_get_length(in) == 0)
				return 0;
			take(req, in, req->body_left < r ? req->body_left : r);
			if (req->body_left == 0)
				req->chunk = CHUNK_CRLF;
			if (!req->streaming && !req->discard && req->body_total > httpd_srv.limits.max_body_bytes) {
				refuse_too_large(c);
				return -1;
			}
			break;
		case CHUNK_CRLF:
		case CHUNK_TRAILERS:
			line = evbuffer_readln(in, &len, EVBUFFER_EOL_CRLF);
			if (!line) {
				if (evbuffer_get_length(in) > MAX_CHUNK_LINE)
					goto bad;
				return 0;
			}
			free(line);
			if (req->chunk == CHUNK_CRLF) {
				if (len != 0)
					goto bad;
				req->chunk = CHUNK_SIZE;
			} else if (len == 0) {
				return 1;
			}
			break;
		}
	}
bad:
	refuse(c, 400, "Bad Request", "invalid_argument", "malformed chunked body");
	return -1;
}

/* Give a stream's handler what came (or drop it once answered). */
static void feed(struct http_req *req)
{
	if (req->discard)
		evbuffer_drain(req->body, evbuffer_get_length(req->body));
	else if (req->on_data && evbuffer_get_length(req->body))
		req->on_data(req, req->body, req->body_arg);
}

static void body_done(struct http_conn *c, struct http_req *req)
{
	req->state = READ_DONE;
	httpd_set_reading(c, false);
	if (!req->streaming)
		dispatch(c, req);
	else if (req->discard)
		httpd_finish_request(c);
	else if (req->on_end)
		req->on_end(req, req->body_arg);
}

/* The body, as far as it came. 0 to wait for more, -1 when c is closed. */
static int read_body(struct http_conn *c, struct http_req *req)
{
	struct evbuffer *in = c->in;
	int r = 1;
	if (req->body_kind == BODY_CHUNKED) {
		r = read_chunked(c, req, in);
	} else {
		uint64_t n = room(req);
		take(req, in, req->body_left < n ? req->body_left : n);
		r = req->body_left == 0;
	}
	if (r < 0)
		return -1;
	if (req->streaming) {
		feed(req);
		if (c->closed || c->req != req)
			return -1;
		/* Not read while the handler holds a full buffer. */
		httpd_set_reading(c, room(req) > 0);
	}
	if (r == 1)
		body_done(c, req);
	return 0;
}

void http_req_take_body(struct http_req *req, http_body_fn on_data, http_end_fn on_end, void *arg)
{
	struct http_conn *c = req->conn;
	req->on_data = on_data;
	req->on_end = on_end;
	req->body_arg = arg;
	httpd_hold(c);
	if (req->state == READ_BODY) {
		feed(req);
		if (!c->closed && c->req == req && req->state == READ_BODY) {
			httpd_set_reading(c, true);
			httpd_conn_read(c); /* what waited in the input */
		}
	} else if (req->state == READ_DONE) {
		feed(req);
		if (!c->closed && c->req == req && on_end)
			on_end(req, arg);
	}
	httpd_release(c);
}

/* Parse what came in, as far as the request in progress allows. */
void httpd_conn_read(struct http_conn *c)
{
	struct evbuffer *in = c->in;
	httpd_hold(c);
	while (!c->closed) {
		struct http_req *req = c->req;
		if (!req) {
			if (evbuffer_get_length(in) == 0)
				break;
			req = calloc(1, sizeof(*req));
			if (!req || !(req->body = evbuffer_new())) {
				free(req);
				http_conn_close(c);
				break;
			}
			req->conn = c;
			req->in_headers.tqh_last = &req->in_headers.tqh_first; /* TAILQ_INIT */
			req->out_headers.tqh_last = &req->out_headers.tqh_first;
			c->req = req;
			if (c->phase == PHASE_IDLE)
				httpd_set_phase(c, PHASE_RECEIVING);
		}
		if (req->state == READ_LINE || req->state == READ_HEADERS) {
			if (read_head(c, req) <= 0)
				break;
			continue;
		}
		if (req->state == READ_BODY) {
			size_t before = evbuffer_get_length(in);
			if (read_body(c, req) < 0)
				break;
			if (c->req != req)
				continue; /* answered early, drained and freed: the next request */
			if (req->state == READ_BODY && evbuffer_get_length(in) == before)
				break; /* waits for bytes, or for the handler */
			continue;
		}
		/* READ_DONE: the next request waits for this one's answer. A
		 * streamed answer keeps reading, to see the client hang up. */
		if (req->reply == REPLY_NONE)
			httpd_set_reading(c, false);
		break;
	}
	if (!c->closed)
		httpd_update_reading(c);
	httpd_release(c);
}

/* ---------------------------------------------------------------- events */

/* Cut the extents v (as evbuffer_reserve_space gave them, maybe more than
 * asked) to limit bytes in all; how many still hold any. */
static int clamp_extents(struct evbuffer_iovec *v, int nv, size_t limit)
{
	int used = 0;
	for (int i = 0; i < nv; i++) {
		if (v[i].iov_len > limit)
			v[i].iov_len = limit;
		limit -= v[i].iov_len;
		used += v[i].iov_len > 0;
	}
	return used;
}


/* libevent 2.1's evbuffer_read, and so a bufferevent, reads at most 4 KiB
 * a call whatever bufferevent_set_max_single_read says (EVBUFFER_MAX_READ,
 * settable only from 2.2): a 1 GiB upload took a quarter million reads and
 * ran at a fifth of the disk's speed. So httpd reads the socket itself:
 * what it holds, up to READ_PIECE, straight into the connection's input. */
static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn *c = arg;
	struct evbuffer_iovec v[2];
	size_t have = evbuffer_get_length(c->in), n;
	int avail = 0;
	if (have >= INPUT_HIGH_WATER) {
		httpd_update_reading(c);
		return;
	}
	if (ioctl(fd, FIONREAD, &avail) < 0 || avail <= 0)
		avail = 4096; /* nothing, or the end: the read tells */
	n = (size_t)avail < READ_PIECE ? (size_t)avail : READ_PIECE;
	if (n > INPUT_HIGH_WATER - have)
		n = INPUT_HIGH_WATER - have;
	int nv = evbuffer_reserve_space(c->in, (ev_ssize_t)n, v, 2);
	if (nv <= 0) {
		log_warn("coved: out of memory for a connection's input");
		http_conn_close(c);
		return;
	}
	ssize_t r = readv(fd, (struct iovec *)v, clamp_extents(v, nv, n));
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return; /* what was reserved and not committed is not there */
	if (r == 0 && httpd_upgraded(c) && !httpd_peer_gone(fd)) {
		httpd_raw_input_end(c);
		return;
	}
	if (r <= 0) { /* the client's end, or a broken connection */
		http_conn_close(c);
		return;
	}
	evbuffer_commit_space(c->in, v, clamp_extents(v, nv, (size_t)r));
	if (httpd_upgraded(c))
		httpd_raw_input(c);
	else
		httpd_conn_read(c);
}

static void on_write(struct bufferevent *bev, void *arg)
{
	struct http_conn *c = arg;
	httpd_hold(c);
	if (c->sent_cb)
		c->sent_cb(c, c->sent_arg);
	if (!c->closed && c->req)
		httpd_finish_request(c);
	httpd_release(c);
}

void httpd_on_event(struct bufferevent *bev, short what, void *arg)
{
	struct http_conn *c = arg;
	/* Writing failed: the client is gone (its end of the input shows in
	 * on_readable). */
	http_conn_close(c);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn *c = arg;
	switch (c->phase) {
	case PHASE_IDLE:
		if (httpd_srv.cbs.keep_idle && httpd_srv.cbs.keep_idle(c)) {
			httpd_set_phase(c, PHASE_IDLE);
			return;
		}
		log_debug("coved: closing a connection idle for %gs", httpd_srv.limits.idle_timeout);
		http_conn_close(c);
		return;
	case PHASE_RECEIVING:
		if (log_allowed(&httpd_srv.logged_timeout))
			log_info("coved: closing a connection whose request did not come whole in %gs "
				 "(--request-timeout)",
				 httpd_srv.limits.request_timeout);
		send_raw_error(bufferevent_getfd(c->bev), 408, "Request Timeout", "timeout",
			       "the request did not come whole in time");
		http_conn_close(c);
		return;
	case PHASE_HANDLING:
		return;
	}
}

static void on_accept(struct evconnlistener *ev, evutil_socket_t fd, struct sockaddr *sa, int socklen, void *arg)
{
	struct http_listener *l = arg;
	int one = 1;
	if (l->count >= httpd_srv.limits.max_connections) {
		if (log_allowed(&httpd_srv.logged_refusal))
			log_info("coved: refused a connection on the %s listener: %d are open (--max-connections)",
				 l->tcp ? "TCP" : "unix", l->count);
		send_raw_error(fd, 503, "Service Unavailable", "unavailable", "too many connections");
		evutil_closesocket(fd);
		return;
	}
	struct http_conn *c = calloc(1, sizeof(*c));
	if (c)
		c->bev = bufferevent_socket_new(httpd_srv.base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!c || !c->bev || !(c->in = evbuffer_new()) ||
	    !(c->readable = event_new(httpd_srv.base, fd, EV_READ | EV_PERSIST, on_readable, c)) ||
	    !(c->timer = evtimer_new(httpd_srv.base, on_timer, c)) ||
	    !(c->finish = event_new(httpd_srv.base, -1, 0, httpd_on_finish, c))) {
		log_warn("coved: out of memory for a new connection");
		if (c && c->bev)
			fd = -1; /* closed with the bufferevent */
		if (c)
			conn_free(c); /* never linked */
		if (fd >= 0)
			evutil_closesocket(fd);
		return;
	}
	c->listener = l;
	c->tcp = l->tcp;
	l->count++;
	c->next = httpd_srv.conns;
	if (c->next)
		c->next->prev = c;
	httpd_srv.conns = c;
	if (l->tcp) /* events of a stream go out as they come, not after an ACK */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* Large pieces out (a file goes by sendfile, a stream's chunks by
	 * writev); in, the socket is read by on_readable. */
	bufferevent_set_max_single_write(c->bev, 1 << 20);
	bufferevent_setcb(c->bev, NULL, on_write, httpd_on_event, c);
	bufferevent_enable(c->bev, EV_WRITE);
	httpd_set_reading(c, true);
	httpd_set_phase(c, PHASE_IDLE);
}

/* ---------------------------------------------------------------- setup */

void http_setup(struct event_base *base, const struct http_limits *limits, const struct http_callbacks *cbs)
{
	httpd_srv.base = base;
	httpd_srv.limits = *limits;
	httpd_srv.cbs = *cbs;
}

struct http_listener *http_listen(int fd, bool tcp)
{
	struct http_listener *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->tcp = tcp;
	l->ev = evconnlistener_new(httpd_srv.base, on_accept, l, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (!l->ev) {
		free(l);
		return NULL;
	}
	httpd_srv.listeners[tcp] = l;
	return l;
}

void http_listener_free(struct http_listener *l)
{
	if (!l)
		return;
	/* Its connections go on: they only stop counting against it. */
	for (struct http_conn *c = httpd_srv.conns; c; c = c->next)
		if (c->listener == l)
			c->listener = NULL;
	evconnlistener_free(l->ev);
	if (httpd_srv.listeners[l->tcp] == l)
		httpd_srv.listeners[l->tcp] = NULL;
	free(l);
}

void http_shutdown(void)
{
	for (int i = 0; i < 2; i++)
		http_listener_free(httpd_srv.listeners[i]);
	while (httpd_srv.conns)
		http_conn_close(httpd_srv.conns); /* unlinks it */
}

/* ---------------------------------------------------------------- accessors */

enum http_method http_req_method(const struct http_req *req)
{
	return req->method;
}

const char *http_req_path(const struct http_req *req)
{
	return evhttp_uri_get_path(req->uri_parts);
}

const char *http_req_query(const struct http_req *req)
{
	return evhttp_uri_get_query(req->uri_parts);
}

struct evkeyvalq *http_req_in_headers(struct http_req *req)
{
	return &req->in_headers;
}

struct evkeyvalq *http_req_out_headers(struct http_req *req)
{
	return &req->out_headers;
}

struct evbuffer *http_req_body(struct http_req *req)
{
	return req->body;
}

struct http_conn *http_req_conn(struct http_req *req)
{
	return req->conn;
}

struct bufferevent *http_conn_bev(struct http_conn *conn)
{
	return conn->bev;
}

struct evbuffer *http_conn_input(struct http_conn *conn)
{
	return conn->in;
}

bool http_conn_is_tcp(const struct http_conn *conn)
{
	return conn->tcp;
}

void http_conn_set_closecb(struct http_conn *conn, http_conn_cb cb, void *arg)
{
	conn->closecb = cb;
	conn->closecb_arg = arg;
}

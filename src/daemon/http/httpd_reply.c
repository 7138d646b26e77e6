/* httpd: answers, whole or in chunks (httpd.h). */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/http/httpd_internal.h"

/* ---------------------------------------------------------------- answers */

static struct http_stats stats;

const struct http_stats *http_stats_get(void)
{
	return &stats;
}

void http_stats_dispatched(void)
{
	stats.requests++;
}

void http_stats_count(int status)
{
	stats.responses[status >= 100 && status < 600 ? status / 100 : 0]++;
}

static void write_head(struct http_req *req, int status, const char *reason)
{
	struct evbuffer *out = bufferevent_get_output(req->conn->bev);
	struct evkeyval *h;
	if (httpd_header_is(&req->out_headers, "Connection", "close"))
		req->keep_alive = false;
	evhttp_remove_header(&req->out_headers, "Connection");
	if (!req->keep_alive)
		evhttp_add_header(&req->out_headers, "Connection", "close");
	else if (req->minor == 0)
		evhttp_add_header(&req->out_headers, "Connection", "keep-alive");
	http_stats_count(status);
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\n", status, reason);
	for (h = req->out_headers.tqh_first; h; h = h->next.tqe_next) /* TAILQ_FOREACH */
		evbuffer_add_printf(out, "%s: %s\r\n", h->key, h->value);
	evbuffer_add(out, "\r\n", 2);
}

/* The request is answered: once the answer is out (and the body in), the
 * connection goes on. Never synchronously: the handler may still hold req. */
static void reply_done(struct http_req *req)
{
	struct http_conn *c = req->conn;
	req->reply = REPLY_DONE;
	c->sent_cb = NULL;
	if (req->state != READ_DONE) {
		/* Answered before the body was whole: the rest is read and dropped,
		 * and the connection can serve the next request. */
		req->discard = true;
		evbuffer_drain(req->body, evbuffer_get_length(req->body));
		httpd_set_reading(c, true);
	}
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		event_active(c->finish, 0, 0);
}

void http_send_reply(struct http_req *req, int status, const char *reason, struct evbuffer *body)
{
	size_t n = body ? evbuffer_get_length(body) : 0;
	char len[32];
	if (req->reply != REPLY_NONE || req->conn->closed)
		return;
	snprintf(len, sizeof(len), "%zu", n);
	evhttp_remove_header(&req->out_headers, "Content-Length");
	evhttp_add_header(&req->out_headers, "Content-Length", len);
	write_head(req, status, reason);
	if (body && req->method != HTTP_HEAD)
		evbuffer_add_buffer(bufferevent_get_output(req->conn->bev), body);
	else if (body)
		evbuffer_drain(body, n);
	reply_done(req);
}

void http_send_file(struct http_req *req, int status, const char *reason, int fd, uint64_t size)
{
	struct evbuffer *out = bufferevent_get_output(req->conn->bev);
	char len[32];
	if (req->reply != REPLY_NONE || req->conn->closed) {
		close(fd);
		return;
	}
	snprintf(len, sizeof(len), "%" PRIu64, size);
	evhttp_remove_header(&req->out_headers, "Content-Length");
	evhttp_add_header(&req->out_headers, "Content-Length", len);
	write_head(req, status, reason);
	/* Straight into the socket's buffer: only there does libevent send a
	 * file with sendfile (elsewhere it maps it, and the pages count). */
	if (size == 0 || req->method == HTTP_HEAD || evbuffer_add_file(out, fd, 0, (ev_off_t)size) < 0)
		close(fd);
	reply_done(req);
}

void http_reply_start(struct http_req *req, int status, const char *reason)
{
	if (req->reply != REPLY_NONE || req->conn->closed)
		return;
	if (!evhttp_find_header(&req->out_headers, "Content-Length")) {
		if (req->minor >= 1) {
			req->chunked_reply = true;
			evhttp_add_header(&req->out_headers, "Transfer-Encoding", "chunked");
		} else {
			req->keep_alive = false; /* HTTP/1.0: the end of the body is the close */
		}
	}
	write_head(req, status, reason);
	req->reply = REPLY_STREAM;
	/* A stream may run for ever: its client's hangup must be seen (the
	 * next request, if one is pipelined, just waits in the input). */
	httpd_set_reading(req->conn, true);
}

void http_reply_chunk_with_cb(struct http_req *req, struct evbuffer *buf, http_conn_cb cb, void *arg)
{
	struct http_conn *c = req->conn;
	struct evbuffer *out = bufferevent_get_output(c->bev);
	size_t n = evbuffer_get_length(buf);
	if (req->reply != REPLY_STREAM || c->closed)
		return;
	c->sent_cb = cb;
	c->sent_arg = arg;
	if (n == 0)
		return;
	if (req->method == HTTP_HEAD) {
		evbuffer_drain(buf, n);
		return;
	}
	if (req->chunked_reply)
		evbuffer_add_printf(out, "%zx\r\n", n);
	evbuffer_add_buffer(out, buf);
	if (req->chunked_reply)
		evbuffer_add(out, "\r\n", 2);
}

void http_reply_chunk(struct http_req *req, struct evbuffer *buf)
{
	http_reply_chunk_with_cb(req, buf, NULL, NULL);
}

void http_reply_end(struct http_req *req)
{
	if (req->reply != REPLY_STREAM || req->conn->closed)
		return;
	if (req->chunked_reply && req->method != HTTP_HEAD)
		evbuffer_add(bufferevent_get_output(req->conn->bev), "0\r\n\r\n", 5);
	reply_done(req);
}

/* The answer is out and the body in: the next request, or the close. */
void httpd_finish_request(struct http_conn *c)
{
	struct http_req *req = c->req;
	if (!req || req->reply != REPLY_DONE || req->state != READ_DONE ||
	    evbuffer_get_length(bufferevent_get_output(c->bev)) > 0)
		return;
	bool keep = req->keep_alive;
	c->req = NULL;
	httpd_req_free(req);
	if (!keep) {
		http_conn_close(c);
		return;
	}
	httpd_set_phase(c, evbuffer_get_length(c->in) ? PHASE_RECEIVING : PHASE_IDLE);
	httpd_set_reading(c, true);
	httpd_conn_read(c); /* a pipelined request may be in already */
}

void httpd_on_finish(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn *c = arg;
	httpd_hold(c);
	httpd_finish_request(c);
	httpd_release(c);
}


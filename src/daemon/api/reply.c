/* Answers of cove's REST API, and the engine's outputs over HTTP (reply.h). */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/encoding.h"
#include "daemon/api/reply.h"
#include "daemon/http/conn.h"

int reply_status_of(int code)
{
	switch (code) {
	case COVE_EINVAL:
		return 400;
	case COVE_ENOTFOUND:
		return 404;
	case COVE_ESTATE:
		return 409;
	case COVE_ETOOBIG:
		return 413;
	case COVE_EFULL:
		return 429;
	case COVE_EPERM:
		return 403;
	case COVE_EBUSY:
		return 409;
	case COVE_ENOTREADY:
		return 504;
	case COVE_ENOSPACE:
	case ENOSPC:
	case EDQUOT:
		return 507;
	default:
		return 500;
	}
}

void reply_json(struct http_req *req, int status, json_t *body)
{
	struct evbuffer *b = evbuffer_new();
	char *s = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	evbuffer_add(b, s, strlen(s));
	evbuffer_add(b, "\n", 1);
	free(s);
	evhttp_add_header(http_req_out_headers(req), "Content-Type", "application/json");
	http_send_reply(req, status, status < 300 ? "OK" : "Error", b);
	evbuffer_free(b);
}

void reply_error(struct http_req *req, const struct cove_err *err)
{
	int status = reply_status_of(err->code);
	/* A message may quote a path that is not UTF-8, or be cut inside a
	 * character: JSON takes neither. */
	char msg[3 * sizeof(err->msg)];
	utf8_sanitize(err->msg, strlen(err->msg), msg, sizeof(msg));
	reply_json(req, status,
		   json_pack("{s:{s:s, s:s}}", "error", "code",
			     err_code_name(status == 500 ? COVE_EINTERNAL : err->code), "message",
			     msg[0] ? msg : "internal error"));
}

/* ---- struct output over HTTP ---- */

static void unbind(struct http_output *ho)
{
	if (ho->hangup_ev)
		event_free(ho->hangup_ev);
	ho->hangup_ev = NULL;
	if (ho->conn)
		conn_clear_hook(ho->conn, ho);
	ho->conn = NULL;
}

static void release(struct http_output *ho)
{
	unbind(ho);
	ho->req = NULL;
	if (ho->route->free)
		ho->route->free(ho);
}

/* The client is gone: the engine stops, and forgets the output. */
static void on_conn_closed(struct http_conn *conn, void *arg)
{
	struct http_output *ho = arg;
	ho->conn = NULL; /* being freed by httpd */
	ho->req = NULL;
	output_cancel(&ho->out);
	release(ho);
}

/* A hang-up before the answer started, which httpd notices only once it
 * writes: the connection is closed at once, which cancels the output. */
static void on_hangup(evutil_socket_t fd, short what, void *arg)
{
	struct http_output *ho = arg;
	event_free(ho->hangup_ev);
	ho->hangup_ev = NULL;
	if (ho->conn)
		http_conn_close(ho->conn);
}

void http_output_drained(struct http_output *ho)
{
	if (ho->paused && ho->req && reply_unsent(ho) < REPLY_HIGH_WATER / 2) {
		ho->paused = false;
		output_resume(&ho->out);
	}
}

static void on_sent(struct http_conn *conn, void *arg)
{
	http_output_drained(arg);
}

static void output_http_write(struct output *o, const struct out_event *ev)
{
	struct http_output *ho = (struct http_output *)o;
	if (!ho->req)
		return;
	ho->route->encode(ho, ev);
	if (ho->req && !ho->paused && reply_unsent(ho) > REPLY_HIGH_WATER) {
		ho->paused = true;
		output_pause(o);
	}
}

static void output_http_close(struct output *o, const struct cove_err *err)
{
	struct http_output *ho = (struct http_output *)o;
	ho->closed = true;
	if (ho->route->finish) {
		ho->route->finish(ho, err);
	} else if (ho->req && ho->started) {
		reply_end(ho);
	} else if (ho->req) {
		struct cove_err internal = { .code = COVE_EINTERNAL };
		reply_error(ho->req, err ? err : &internal);
	}
	release(ho);
}

/* A hang-up whose event has not run yet shows in a poll. */
static bool output_http_alive(struct output *o)
{
	struct http_output *ho = (struct http_output *)o;
	struct bufferevent *bev = ho->conn ? http_conn_bev(ho->conn) : NULL;
	struct pollfd p = { bev ? bufferevent_getfd(bev) : -1, POLLRDHUP, 0 };
	if (!ho->req || p.fd < 0)
		return false;
	return !(poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)));
}

static const struct output_ops http_output_ops = {
	.write = output_http_write,
	.close = output_http_close,
	.alive = output_http_alive,
};

int http_output_init(struct http_output *ho, struct http_req *req, const struct http_output_route *route, void *arg,
		     struct cove_err *err)
{
	memset(ho, 0, sizeof(*ho));
	ho->out.ops = &http_output_ops;
	ho->req = req;
	ho->conn = http_req_conn(req);
	ho->route = route;
	ho->arg = arg;
	if (conn_set_hook(ho->conn, on_conn_closed, ho) < 0) {
		ho->conn = NULL;
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	struct bufferevent *bev = http_conn_bev(ho->conn);
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
	if (fd >= 0 && route->watch_hangup) {
		ho->hangup_ev = event_new(bufferevent_get_base(bev), fd, EV_CLOSED, on_hangup, ho);
		if (ho->hangup_ev)
			event_add(ho->hangup_ev, NULL);
	}
	return 0;
}

void http_output_abandon(struct http_output *ho)
{
	unbind(ho);
}

void reply_start(struct http_output *ho, const char *content_type)
{
	if (ho->hangup_ev) { /* httpd's own reader sees a hang-up from now on */
		event_free(ho->hangup_ev);
		ho->hangup_ev = NULL;
	}
	evhttp_add_header(http_req_out_headers(ho->req), "Content-Type", content_type);
	http_reply_start(ho->req, 200, "OK");
	ho->started = true;
}

void reply_chunk(struct http_output *ho, struct evbuffer *buf)
{
	http_reply_chunk_with_cb(ho->req, buf, on_sent, ho);
}

void reply_line(struct http_output *ho, json_t *j)
{
	struct evbuffer *b = evbuffer_new();
	char *s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (b && s) {
		evbuffer_add_printf(b, "%s\n", s);
		reply_chunk(ho, b);
	}
	free(s);
	if (b)
		evbuffer_free(b);
}

void reply_end(struct http_output *ho)
{
	http_reply_end(ho->req);
	ho->req = NULL;
}

void reply_abort(struct http_output *ho)
{
	struct bufferevent *bev = ho->conn ? http_conn_bev(ho->conn) : NULL;
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
	if (ho->req) { /* no callback of ours after this: the empty chunk unsets on_sent */
		struct evbuffer *none = evbuffer_new();
		if (none)
			http_reply_chunk_with_cb(ho->req, none, NULL, NULL);
		if (none)
			evbuffer_free(none);
	}
	ho->req = NULL;
	/* libevent sees the connection fail and closes it. */
	if (fd >= 0)
		(void)shutdown(fd, SHUT_RDWR);
}

size_t reply_unsent(struct http_output *ho)
{
	struct bufferevent *bev = ho->conn ? http_conn_bev(ho->conn) : NULL;
	return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

void reply_ndjson_finish(struct http_output *ho, const struct cove_err *err)
{
	struct cove_err internal = { .code = COVE_EINTERNAL };
	if (!ho->req)
		return;
	if (!ho->started) {
		reply_error(ho->req, err ? err : &internal);
		return;
	}
	if (err)
		reply_line(ho, json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "code",
					 err_code_name(err->code), "message", err->msg));
	reply_end(ho);
}

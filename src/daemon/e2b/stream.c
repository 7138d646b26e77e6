/* Connect's server streams over HTTP/1.1 (e2b_private.h): an http_output
 * (daemon/api/reply.h) whose events are encoded by the service, each
 * message one envelope in its own chunk, the end-of-stream envelope last,
 * and keepalives while the stream is silent. */
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/e2b/connect.h"
#include "daemon/e2b/e2b_private.h"
#include "engine/engine.h"

#define CONNECT_STREAM_TYPE "application/connect+json"

static void add_envelope(struct evbuffer *b, uint8_t flags, json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	if (s) {
		uint8_t hdr[5];
		connect_envelope_header(flags, (uint32_t)strlen(s), hdr);
		evbuffer_add(b, hdr, sizeof(hdr));
		evbuffer_add(b, s, strlen(s));
	}
	free(s);
}

static void send_envelope(struct connect_stream *cs, uint8_t flags, json_t *msg)
{
	struct evbuffer *b = evbuffer_new();
	if (!b) {
		json_decref(msg);
		return;
	}
	add_envelope(b, flags, msg);
	if (!cs->ho.started)
		reply_start(&cs->ho, CONNECT_STREAM_TYPE);
	reply_chunk(&cs->ho, b);
	evbuffer_free(b);
}

static void arm(struct connect_stream *cs)
{
	if (cs->keepalive)
		evtimer_add(cs->keepalive, &cs->interval);
}

static void on_keepalive(evutil_socket_t fd, short what, void *arg)
{
	struct connect_stream *cs = arg;
	if (!cs->ho.req)
		return;
	json_t *ka = json_pack("{s:{}}", "keepalive");
	send_envelope(cs, 0, cs->process ? json_pack("{s:o}", "event", ka) : ka);
	arm(cs);
}

void connect_stream_send(struct connect_stream *cs, json_t *msg)
{
	if (!cs->ho.req) {
		json_decref(msg);
		return;
	}
	send_envelope(cs, 0, msg);
	arm(cs); /* silence is counted from the last message */
}

void connect_stream_end(struct connect_stream *cs, const char *code, const char *msg)
{
	if (cs->keepalive)
		evtimer_del(cs->keepalive);
	if (!cs->ho.req)
		return;
	json_t *eos =
		code ? json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg ? msg : code) : json_object();
	send_envelope(cs, CONNECT_FLAG_END, eos);
	reply_end(&cs->ho);
}

/* The events are the service's: cs->arg's encode, set as on_event. */
static void stream_encode(struct http_output *ho, const struct out_event *ev)
{
	struct connect_stream *cs = ho->arg;
	if (cs->on_event)
		cs->on_event(cs, ev);
}

static void stream_finish(struct http_output *ho, const struct cove_err *err)
{
	struct connect_stream *cs = ho->arg;
	if (cs->on_close) {
		cs->on_close(cs, err);
		return;
	}
	connect_stream_end(cs, err ? connect_code_of(err->code) : NULL, err ? err->msg : NULL);
}

static void stream_free(struct http_output *ho)
{
	struct connect_stream *cs = ho->arg;
	if (cs->keepalive)
		event_free(cs->keepalive);
	if (cs->free_arg)
		cs->free_arg(cs->arg);
	free(cs);
}

static const struct http_output_route stream_route = {
	.encode = stream_encode,
	.finish = stream_finish,
	.free = stream_free,
};

/* envd's default when the header is missing or bad: 90 s. */
static double ping_interval(struct http_req *req)
{
	const char *h = evhttp_find_header(http_req_in_headers(req), "Keepalive-Ping-Interval");
	char *end;
	double s = h ? strtod(h, &end) : 0;
	return h && !*end && s >= 1 && s <= 3600 ? s : 90;
}

struct connect_stream *connect_stream_new(struct http_req *req, bool process, struct cove_err *err)
{
	struct connect_stream *cs = calloc(1, sizeof(*cs));
	if (!cs) {
		err_set(err, COVE_EINTERNAL, "out of memory");
		return NULL;
	}
	cs->process = process;
	double s = ping_interval(req);
	cs->interval = (struct timeval){ (time_t)s, (suseconds_t)((s - (time_t)s) * 1e6) };
	cs->keepalive = evtimer_new(engine_ctx->base, on_keepalive, cs);
	if (!cs->keepalive || http_output_init(&cs->ho, req, &stream_route, cs, err) < 0) {
		if (cs->keepalive)
			event_free(cs->keepalive);
		free(cs);
		return NULL;
	}
	return cs;
}

void connect_stream_abandon(struct connect_stream *cs)
{
	http_output_abandon(&cs->ho);
	event_free(cs->keepalive);
	if (cs->free_arg)
		cs->free_arg(cs->arg);
	free(cs);
}

/* A whole stream in one answer: 200, msg (NULL: none), then the end with
 * code's error (NULL: {}). */
static void stream_whole(struct http_req *req, json_t *msg, const char *code, const char *text)
{
	struct evbuffer *b = evbuffer_new();
	json_t *eos = code ? json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", text) : json_object();
	if (b && msg)
		add_envelope(b, 0, msg);
	else
		json_decref(msg);
	if (b)
		add_envelope(b, CONNECT_FLAG_END, eos);
	else
		json_decref(eos);
	evhttp_add_header(http_req_out_headers(req), "Content-Type", CONNECT_STREAM_TYPE);
	http_send_reply(req, 200, "OK", b);
	if (b)
		evbuffer_free(b);
}

void connect_stream_fail(struct http_req *req, const char *code, const char *msg)
{
	stream_whole(req, NULL, code, msg);
}

void connect_stream_reply(struct http_req *req, json_t *msg)
{
	stream_whole(req, msg, NULL, NULL);
}

int connect_read(struct envd_req *er, bool stream, json_t **ret)
{
	struct evbuffer *body = http_req_body(er->req);
	size_t n = body ? evbuffer_get_length(body) : 0;
	const uint8_t *p = n ? evbuffer_pullup(body, -1) : (const uint8_t *)"";
	struct cove_err err = { 0 };
	int r = stream ? connect_parse_request(p, n, ret, &err) : connect_parse_unary(p, n, ret, &err);
	if (r < 0 && stream)
		connect_stream_fail(er->req, "invalid_argument", err.msg);
	else if (r < 0)
		connect_reply_error(er->req, "invalid_argument", "%s", err.msg);
	return r;
}

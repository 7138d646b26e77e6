/* Answers of cove's REST API: JSON bodies, error shapes, and struct output
 * (engine/output.h) over HTTP.
 *
 * An http_output is what the REST front end hands the engine for an
 * operation that answers later or in pieces. It owns the plumbing every
 * such route needs: the connection's close (the engine's output is
 * cancelled), a hang-up before the answer has started (libevent's reader
 * sees it only once an answer is under way), and back-pressure (above
 * REPLY_HIGH_WATER bytes queued for the client the producer is paused, and
 * resumed below half of it). What the events look like on the wire is the
 * route's: its encode and finish callbacks. */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "common/error.h"
#include "daemon/http/httpd.h"
#include "engine/output.h"

#define REPLY_HIGH_WATER (1u << 20)

/* The one place cove's error codes become HTTP statuses. */
int reply_status_of(int code);
/* body (consumed) as one JSON document with a newline. */
void reply_json(struct http_req *req, int status, json_t *body);
/* {"error": {"code", "message"}} with err's status. */
void reply_error(struct http_req *req, const struct cove_err *err);

struct http_output;
struct http_output_route {
	/* One engine event: encode it with reply_start / reply_line /
	 * reply_chunk, or answer whole with reply_json on ho->req. */
	void (*encode)(struct http_output *ho, const struct out_event *ev);
	/* The engine's close. err NULL: the stream is whole. The default
	 * (NULL): an answer under way is ended; else err (or a 500) is
	 * answered. */
	void (*finish)(struct http_output *ho, const struct cove_err *err);
	/* The route's state is freed: after finish, or after a cancel. */
	void (*free)(struct http_output *ho);
	/* Close the connection when the client hangs up before the answer
	 * starts (an exec whose client left is killed at once). */
	bool watch_hangup;
};

struct http_output {
	struct output out;  /* what the engine is given */
	struct http_req *req; /* NULL once answered whole, or the client gone */
	struct http_conn *conn;
	const struct http_output_route *route;
	struct event *hangup_ev;
	bool started; /* a 200 whose chunks are under way */
	bool paused;  /* the producer was paused by us */
	bool closed;  /* the engine closed it: only its free is left */
	void *arg;    /* the route's */
};

/* Bind ho to req: ho->out is ready to hand to the engine. Watches req's
 * connection until the engine closes the output. -1 with err when out of
 * memory (nothing to undo). */
int http_output_init(struct http_output *ho, struct http_req *req, const struct http_output_route *route, void *arg,
		     struct cove_err *err);
/* The engine refused to take ho->out (its call failed): unbind it. */
void http_output_abandon(struct http_output *ho);
/* A 200 whose body comes in chunks, with content_type. */
void reply_start(struct http_output *ho, const char *content_type);
/* One NDJSON line (j consumed) on a started answer. */
void reply_line(struct http_output *ho, json_t *j);
/* Bytes (drained from buf) on a started answer. */
void reply_chunk(struct http_output *ho, struct evbuffer *buf);
/* The end of a started answer. */
void reply_end(struct http_output *ho);
/* Cut a started answer short: the client sees a body without its end (a
 * cut tar must not look whole). The connection closes; ho is done with it. */
void reply_abort(struct http_output *ho);
/* An NDJSON stream's end (an http_output_route's finish): an error line
 * last ({"type":"error","error":{code,message}}), or, before the stream
 * started, an error answer. */
void reply_ndjson_finish(struct http_output *ho, const struct cove_err *err);
/* Bytes of the answer still waiting in coved for the client. */
size_t reply_unsent(struct http_output *ho);
/* Some of it went out: resume a paused producer below half the high-water
 * mark. Chunks sent with reply_chunk call it themselves; an upgraded
 * connection's handler calls it from its on_drained. */
void http_output_drained(struct http_output *ho);

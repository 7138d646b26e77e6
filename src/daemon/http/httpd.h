/* coved's HTTP/1.1 server, on libevent's core: an event loop, bufferevents
 * and evbuffers. It replaces evhttp, which reads every request body whole
 * into memory before any handler sees it: here a route may take its body
 * as it comes (a streaming route), with the socket read only as fast as
 * the handler consumes it.
 *
 * The API keeps evhttp's shape, under own names. Headers and query strings still
 * use libevent_extra's struct evkeyvalq, evhttp_find_header,
 * evhttp_add_header, evhttp_parse_query_str and evhttp_clear_headers; the
 * request's URI is split by evhttp_uri_parse. Nothing else of evhttp is
 * used.
 *
 * One request at a time per connection: a pipelined request is read once
 * the previous answer has gone out. A request's memory lives until its
 * answer has been written or its connection closed, whichever comes first;
 * the connection's close callback is the place to forget it. */
#pragma once
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h> /* struct evkeyvalq helpers, evhttp_uri */
#include <event2/keyvalq_struct.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_req;
struct http_conn;
struct http_listener;

enum http_method {
	HTTP_GET = 1 << 0,
	HTTP_POST = 1 << 1,
	HTTP_HEAD = 1 << 2,
	HTTP_PUT = 1 << 3,
	HTTP_DELETE = 1 << 4,
	HTTP_OPTIONS = 1 << 5,
	HTTP_TRACE = 1 << 6,
	HTTP_CONNECT = 1 << 7,
	HTTP_PATCH = 1 << 8,
	HTTP_OTHER = 1 << 9, /* any other token: the router refuses it */
};

struct http_limits {
	size_t max_header_bytes; /* request line and headers: more is a 431 */
	uint64_t max_body_bytes; /* a buffered route's body: more is a 413 */
	int max_connections;     /* per listener: one more is answered 503 */
	double idle_timeout;     /* seconds between requests */
	double request_timeout;  /* seconds from a request's first byte to its end */
};

struct http_callbacks {
	/* At the end of a request's headers: whether its route takes the body
	 * as it comes. Then handle is called at once, else once the body is in. */
	bool (*streams)(struct http_req *req);
	void (*handle)(struct http_req *req);
	/* Whether an idle connection must be kept past the idle timeout. */
	bool (*keep_idle)(struct http_conn *conn);
};

typedef void (*http_conn_cb)(struct http_conn *conn, void *arg);
/* A streaming body: on_data gets what came so far in buf, and drains what
 * it took (what it leaves stays, and above HTTP_BODY_HIGH_WATER the socket
 * is not read); on_end when the body is whole. A body cut short (the
 * client gone, a malformed chunk) shows as the connection's close. */
typedef void (*http_body_fn)(struct http_req *req, struct evbuffer *buf, void *arg);
typedef void (*http_end_fn)(struct http_req *req, void *arg);
#define HTTP_BODY_HIGH_WATER (1u << 20)

void http_setup(struct event_base *base, const struct http_limits *limits, const struct http_callbacks *cbs);
/* Serve the listening socket fd (taken). tcp: a TCP listener (its
 * connections are counted apart from the unix socket's, and get
 * TCP_NODELAY). NULL when out of memory. */
struct http_listener *http_listen(int fd, bool tcp);
void http_listener_free(struct http_listener *l);
/* Close every connection (their close callbacks run) and listener. */
void http_shutdown(void);

/* Answers sent, by status class: responses[2] counts 2xx... ([0]: none
 * valid). Every request answered is one, whatever listener it came on. */
struct http_stats {
	uint64_t requests; /* handed to a route table (the others were refused by the server) */
	uint64_t responses[6];
};
const struct http_stats *http_stats_get(void);
/* Count an answer of status (the server does, as it writes its head). */
void http_stats_count(int status);
void http_stats_dispatched(void);

/* The request */
enum http_method http_req_method(const struct http_req *req);
const char *http_req_path(const struct http_req *req);  /* as sent (not decoded); NULL if none */
const char *http_req_query(const struct http_req *req); /* after '?', or NULL */
struct evkeyvalq *http_req_in_headers(struct http_req *req);
struct evkeyvalq *http_req_out_headers(struct http_req *req);
struct evbuffer *http_req_body(struct http_req *req); /* a buffered route's whole body */
struct http_conn *http_req_conn(struct http_req *req);
/* A streaming route's body, from now on (what came already is given at
 * once, and on_end too if the body is whole). */
void http_req_take_body(struct http_req *req, http_body_fn on_data, http_end_fn on_end, void *arg);

/* The answer: whole, or as a stream of chunks (chunked on HTTP/1.1, up to
 * the connection's close on HTTP/1.0). body may be NULL; it is drained. */
void http_send_reply(struct http_req *req, int status, const char *reason, struct evbuffer *body);
/* A whole answer of the first size bytes of the file fd (taken), sent
 * with sendfile. */
void http_send_file(struct http_req *req, int status, const char *reason, int fd, uint64_t size);
void http_reply_start(struct http_req *req, int status, const char *reason);
void http_reply_chunk(struct http_req *req, struct evbuffer *buf);
/* cb runs once what is queued has been written out (until the next chunk). */
void http_reply_chunk_with_cb(struct http_req *req, struct evbuffer *buf, http_conn_cb cb, void *arg);
void http_reply_end(struct http_req *req);

/* The connection */
struct bufferevent *http_conn_bev(struct http_conn *conn);
/* What came on an upgraded connection and waits for its handler (httpd
 * reads the socket itself: the bufferevent only writes). */
struct evbuffer *http_conn_input(struct http_conn *conn);
bool http_conn_is_tcp(const struct http_conn *conn);
/* The one close callback: runs when the connection closes, whatever the
 * reason, before its request is freed. */
void http_conn_set_closecb(struct http_conn *conn, http_conn_cb cb, void *arg);
void http_conn_close(struct http_conn *conn);

/* Upgrades (101 Switching Protocols): after the answer, the connection
 * carries another protocol's bytes both ways and httpd parses no more HTTP
 * on it. No limit of the server applies any more (a terminal may stay open
 * for days); it still counts against max_connections, and is closed, with
 * its close callback, when the client goes, on an error, by
 * http_conn_close or http_conn_close_when_sent, or at http_shutdown.
 *
 * Whether req asks for one: 0 when not (and always on HTTP/1.0), 1 with
 * *ret_protocol (the Upgrade header, borrowed) when it does, -1 when it has
 * an Upgrade header without "upgrade" in its Connection header, or the
 * reverse. */
int http_req_upgrade(struct http_req *req, const char **ret_protocol);
struct http_raw_callbacks {
	/* Bytes came: in http_conn_input(conn). What the callback leaves
	 * there stays, and is given again with the next bytes; while more
	 * than a few MiB wait, the socket is not read. */
	http_conn_cb on_input;
	/* The client shut down its sending side and still reads: no more
	 * input comes (what waits stays in the input). A client gone entirely
	 * closes the connection instead, on the unix socket; over TCP the two
	 * look alike until a write to it fails. */
	http_conn_cb on_input_end;
	/* Everything queued on the bufferevent's output has been written. May
	 * be NULL. */
	http_conn_cb on_drained;
};
/* Answer req with 101 and the Upgrade header protocol, and hand its
 * connection to cbs (with arg) from now on; the bytes that came right
 * behind the request are given to on_input from the loop. req stays valid
 * until the connection closes, and nothing more can be answered on it.
 * -1 (nothing done) when req cannot be upgraded: it was answered, its
 * connection closed, or its route streams the body. */
int http_upgrade(struct http_req *req, const char *protocol, const struct http_raw_callbacks *cbs, void *arg);
/* Close an upgraded connection once what is queued on it has been written;
 * no more input is read meanwhile, and no callback of its handler runs
 * any more (but its close callback). */
void http_conn_close_when_sent(struct http_conn *conn);

/* What httpd.c, httpd_reply.c and httpd_upgrade.c share: the server's
 * own state and helpers. Nothing outside the HTTP server includes it. */
#pragma once
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "daemon/http/httpd.h"

#define MAX_CHUNK_LINE 1024         /* a chunk's size line, extensions included */
#define INPUT_HIGH_WATER (4u << 20) /* bytes read ahead of the parser */
#define READ_PIECE (1u << 20)       /* the most one read of the socket takes */

enum phase {
	PHASE_IDLE,      /* no request under way: idle_timeout runs */
	PHASE_RECEIVING, /* a request's first byte came: request_timeout runs */
	PHASE_HANDLING,  /* the API has the request: no limit */
};

enum read_state { READ_LINE, READ_HEADERS, READ_BODY, READ_DONE };
enum body_kind { BODY_NONE, BODY_LENGTH, BODY_CHUNKED };
enum chunk_state { CHUNK_SIZE, CHUNK_DATA, CHUNK_CRLF, CHUNK_TRAILERS };
enum reply_state { REPLY_NONE, REPLY_STREAM, REPLY_DONE, REPLY_UPGRADED };

struct http_req {
	struct http_conn *conn;
	enum http_method method;
	int minor; /* HTTP/1.minor */
	char *uri;
	struct evhttp_uri *uri_parts;
	struct evkeyvalq in_headers, out_headers;
	struct evbuffer *body;
	size_t header_bytes;
	enum read_state state;
	enum body_kind body_kind;
	enum chunk_state chunk;
	uint64_t body_left; /* of the Content-Length, or of the current chunk */
	uint64_t body_total;
	bool streaming; /* the route takes the body as it comes */
	bool discard;   /* answered before its body was whole: the rest is dropped */
	http_body_fn on_data;
	http_end_fn on_end;
	void *body_arg;
	enum reply_state reply;
	bool chunked_reply;
	bool keep_alive;
};

struct http_conn {
	struct http_conn *next, *prev;
	struct http_listener *listener;
	struct bufferevent *bev; /* writes the answers */
	struct evbuffer *in;     /* what came, read by on_readable */
	struct event *readable;  /* the socket, while reading */
	bool reading;            /* the parser wants input */
	struct event *timer;     /* the phase's limit */
	struct event *finish;    /* an answer that needs no write to be done */
	enum phase phase;
	struct http_req *req;
	http_conn_cb closecb;
	void *closecb_arg;
	http_conn_cb sent_cb;
	void *sent_arg;
	bool tcp;
	struct http_raw_callbacks raw; /* an upgraded connection's handler */
	void *raw_arg;
	int holds;   /* callbacks of this connection on the stack */
	bool closed; /* freed once holds is 0 */
};

struct http_listener {
	struct evconnlistener *ev;
	bool tcp;
	int count; /* its open connections */
};

struct httpd_server {
	struct event_base *base;
	struct http_limits limits;
	struct http_callbacks cbs;
	struct http_conn *conns;
	struct http_listener *listeners[2];
	time_t logged_refusal, logged_timeout;
};
extern struct httpd_server httpd_srv;


/* httpd.c */
void httpd_arm(struct http_conn *c, double seconds);
void httpd_set_phase(struct http_conn *c, enum phase phase);
void httpd_req_free(struct http_req *req);
void httpd_update_reading(struct http_conn *c);
void httpd_set_reading(struct http_conn *c, bool on);
/* Callbacks of c on the stack: a close meanwhile frees c at the release. */
void httpd_hold(struct http_conn *c);
bool httpd_release(struct http_conn *c);
void httpd_conn_read(struct http_conn *c);
void httpd_on_event(struct bufferevent *bev, short what, void *arg);
bool httpd_header_is(struct evkeyvalq *h, const char *name, const char *value);
/* httpd_reply.c */
void httpd_finish_request(struct http_conn *c);
void httpd_on_finish(evutil_socket_t fd, short what, void *arg);
/* httpd_upgrade.c */
bool httpd_list_has(const char *v, const char *token);
bool httpd_upgraded(const struct http_conn *c);
bool httpd_peer_gone(int fd);
void httpd_raw_input(struct http_conn *c);
void httpd_raw_input_end(struct http_conn *c);

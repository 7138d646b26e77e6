/* libFuzzer harness for coved's HTTP/1.1 server (src/daemon/http/): the
 * request line, headers, Content-Length and chunked bodies, pipelining and
 * upgrades, parsed by the real server code from a real socket.
 *
 * The server listens on a unix socket of its own (abstract, named after the
 * pid) with limits small enough for the fuzzer to reach them (431, 413).
 * Each input is one client connection: its bytes are written, the client's
 * sending side is shut down, and the event loop runs until the server has
 * closed the connection or the client has read everything. The test
 * handler answers every request: a path starting with /s takes its body as
 * it comes (a streaming route), /c answers in chunks, an Upgrade request is
 * upgraded and echoes what follows; the rest echo their buffered body.
 *
 * Beyond "no crash, no leak, no UB": once the client is gone every
 * connection of the server is closed and freed (no connection outlives its
 * socket), and a request the handler sees has a method, and a path when it
 * is not a CONNECT or OPTIONS. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/http/httpd.h"
#include "daemon/http/httpd_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct event_base *base;
static struct sockaddr_un addr;
static socklen_t addr_len;

static void echo_input(struct http_conn *conn, void *arg)
{
	struct evbuffer *in = http_conn_input(conn);
	bufferevent_write_buffer(http_conn_bev(conn), in);
}

static void echo_end(struct http_conn *conn, void *arg)
{
	http_conn_close_when_sent(conn);
}

static const struct http_raw_callbacks echo = { .on_input = echo_input, .on_input_end = echo_end };

static void stream_data(struct http_req *req, struct evbuffer *buf, void *arg)
{
	evbuffer_drain(buf, evbuffer_get_length(buf));
}

static void stream_end(struct http_req *req, void *arg)
{
	http_send_reply(req, 204, "No Content", NULL);
}

static bool streams(struct http_req *req)
{
	const char *p = http_req_path(req);
	return p && strncmp(p, "/s", 2) == 0;
}

/* What a route does with the request before answering: read all of it. */
static void inspect(struct http_req *req)
{
	struct evkeyval *h;
	size_t n = 0;
	TAILQ_FOREACH(h, http_req_in_headers(req), next)
	n += strlen(h->key) + strlen(h->value);
	const char *q = http_req_query(req);
	if (q) {
		struct evkeyvalq params;
		if (evhttp_parse_query_str(q, &params) == 0)
			evhttp_clear_headers(&params);
	}
	evhttp_add_header(http_req_out_headers(req), "X-Seen", n ? "1" : "0");
}

static void handle(struct http_req *req)
{
	const char *path = http_req_path(req), *proto = NULL;
	enum http_method m = http_req_method(req);
	if (!m || (!path && m != HTTP_CONNECT && m != HTTP_OPTIONS))
		abort();
	inspect(req);
	if (streams(req)) {
		http_req_take_body(req, stream_data, stream_end, NULL);
		return;
	}
	if (http_req_upgrade(req, &proto) == 1 && http_upgrade(req, proto, &echo, NULL) == 0)
		return;
	struct evbuffer *body = evbuffer_new();
	evbuffer_add_buffer(body, http_req_body(req));
	if (path && strncmp(path, "/c", 2) == 0) {
		http_reply_start(req, 200, "OK");
		http_reply_chunk(req, body);
		http_reply_end(req);
	} else {
		http_send_reply(req, 200, "OK", body);
	}
	evbuffer_free(body);
}

static void setup(void)
{
	static const struct http_limits limits = {
		.max_header_bytes = 2048,
		.max_body_bytes = 1024,
		.max_connections = 4,
		.idle_timeout = 1e6,
		.request_timeout = 1e6,
	};
	static const struct http_callbacks cbs = { .streams = streams, .handle = handle };
	signal(SIGPIPE, SIG_IGN);
	log_set_level(LOG_ERROR);
	base = event_base_new();
	http_setup(base, &limits, &cbs);
	addr.sun_family = AF_UNIX;
	int n = snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "cove-fuzz-httpd-%d", (int)getpid());
	addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (!base || fd < 0 || bind(fd, (struct sockaddr *)&addr, addr_len) < 0 || listen(fd, 16) < 0 ||
	    !http_listen(fd, false)) {
		perror("fuzz_httpd: setup");
		exit(1);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char sink[65536];
	size_t off = 0;
	bool shut = false;
	if (!base)
		setup();
	int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&addr, addr_len) < 0 || fcntl(c, F_SETFL, O_NONBLOCK) < 0)
		abort();
	for (int i = 0; i < 100000; i++) {
		if (off < size) {
			ssize_t w = write(c, data + off, size - off);
			if (w > 0)
				off += (size_t)w;
			else if (errno != EAGAIN)
				break; /* the server closed early */
		} else if (!shut) {
			shutdown(c, SHUT_WR);
			shut = true;
		}
		event_base_loop(base, EVLOOP_NONBLOCK);
		ssize_t r = read(c, sink, sizeof(sink));
		if (r == 0 || (r < 0 && errno != EAGAIN))
			break;
	}
	close(c);
	for (int i = 0; i < 1000 && httpd_srv.conns; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	if (httpd_srv.conns)
		abort(); /* a connection outlived its client */
	return 0;
}

/* libFuzzer harness for the REST API's route dispatch and request
 * validation (src/daemon/api/): the fuzzer picks a route of the real route
 * table (api.c, included for its static routes[]), the IDs in its path,
 * the query string and the body; the request goes as HTTP through the real
 * server (src/daemon/http/) to api_handle, on a unix socket as coved's.
 * Under the handlers is a mock engine (mock_engine.c): a sandbox ID finds
 * one running sandbox, and whatever would change something is recorded and
 * refused.
 *
 * Input: byte 0 picks the route, byte 1 the IDs after the sandbox's; then
 * the query string (bytes a request line cannot carry are %-encoded) up to
 * the first '\n', and the body after it.
 *
 * Beyond "no crash, no leak, no UB": every request is answered with a
 * status, and a 400 (bad input) never follows a call that would have
 * changed something (the house rule: bad input changes nothing).
 *
 *   scripts/fuzz.sh api
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "daemon/api/api.c"
#include "daemon/http/httpd_internal.h"
#include "mock_engine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct event_base *fuzz_base;
static struct sockaddr_un addr;
static socklen_t addr_len;

static void setup(void)
{
	static const struct http_limits limits = {
		.max_header_bytes = 16384,
		.max_body_bytes = 1 << 20,
		.max_connections = 4,
		.idle_timeout = 1e6,
		.request_timeout = 1e6,
	};
	static const struct http_callbacks cbs = { .streams = api_streams, .handle = api_handle };
	signal(SIGPIPE, SIG_IGN);
	log_set_level(LOG_ERROR);
	fuzz_base = event_base_new();
	engine_ctx->base = fuzz_base;
	http_setup(fuzz_base, &limits, &cbs);
	addr.sun_family = AF_UNIX;
	int n = snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "cove-fuzz-api-%d", (int)getpid());
	addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (!fuzz_base || fd < 0 || bind(fd, (struct sockaddr *)&addr, addr_len) < 0 || listen(fd, 16) < 0 ||
	    !http_listen(fd, false)) {
		perror("fuzz_api: setup");
		exit(1);
	}
}

static const char *method_name(unsigned m)
{
	switch (m) {
	case HTTP_GET:
		return "GET";
	case HTTP_POST:
		return "POST";
	case HTTP_PUT:
		return "PUT";
	case HTTP_DELETE:
		return "DELETE";
	default:
		abort(); /* a route of a method this harness does not know */
	}
}

/* The request line and headers of route r into buf: the pattern's '*'s
 * become IDs, the query is %-encoded where a request line needs it. */
static void request_head(struct evbuffer *buf, const struct route *r, uint8_t ids, const uint8_t *query, size_t qlen,
			 size_t body_len)
{
	static const char *const second[] = { "1", "0", "proc-1", "8080", "-1", "a%2Fb", "99999999999", "" };
	bool first = true;
	evbuffer_add_printf(buf, "%s ", method_name(METHOD_OF(r)));
	for (const char *p = r->pattern; *p; p++) {
		if (*p != '*')
			evbuffer_add(buf, p, 1);
		else
			evbuffer_add_printf(buf, "%s", first ? "sb_abcdefghijkl" : second[ids % 8]);
		first = first && *p != '*';
	}
	if (qlen)
		evbuffer_add(buf, "?", 1);
	for (size_t i = 0; i < qlen; i++)
		if (query[i] > ' ' && query[i] < 0x7f)
			evbuffer_add(buf, &query[i], 1);
		else
			evbuffer_add_printf(buf, "%%%02X", query[i]);
	evbuffer_add_printf(buf, " HTTP/1.1\r\nHost: cove\r\nContent-Length: %zu\r\n\r\n", body_len);
}

/* Send the request, read the answer until the server closes: its status,
 * or 0 when there was none. */
static int exchange(struct evbuffer *req)
{
	static char answer[1 << 16];
	size_t got = 0;
	bool shut = false;
	int c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&addr, addr_len) < 0 || fcntl(c, F_SETFL, O_NONBLOCK) < 0)
		abort();
	for (int i = 0; i < 100000; i++) {
		if (evbuffer_get_length(req) > 0) {
			if (evbuffer_write(req, c) < 0 && errno != EAGAIN)
				break; /* the server closed early */
		} else if (!shut) {
			shutdown(c, SHUT_WR);
			shut = true;
		}
		event_base_loop(fuzz_base, EVLOOP_NONBLOCK);
		ssize_t r = read(c, answer + got, sizeof(answer) - 1 - got);
		if (r == 0 || (r < 0 && errno != EAGAIN))
			break;
		if (r > 0 && (got += (size_t)r) == sizeof(answer) - 1)
			got = 16; /* keep the status line, drop the rest */
	}
	close(c);
	for (int i = 0; i < 1000 && httpd_srv.conns; i++)
		event_base_loop(fuzz_base, EVLOOP_NONBLOCK);
	if (httpd_srv.conns)
		abort(); /* a connection outlived its client */
	answer[got] = '\0';
	int status = 0;
	return sscanf(answer, "HTTP/1.1 %d ", &status) == 1 ? status : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	if (!fuzz_base)
		setup();
	const struct route *r = &routes[data[0] % ARRAY_SIZE(routes)];
	const uint8_t *rest = data + 2, *nl = memchr(rest, '\n', size - 2);
	size_t qlen = nl ? (size_t)(nl - rest) : 0;
	const uint8_t *body = nl ? nl + 1 : rest;
	size_t body_len = size - 2 - (nl ? qlen + 1 : 0);
	struct evbuffer *req = evbuffer_new();
	request_head(req, r, data[1], rest, qlen, body_len);
	evbuffer_add(req, body, body_len);
	mock_mutated = false;
	int status = exchange(req);
	evbuffer_free(req);
	if (status == 0)
		abort(); /* a request without an answer */
	if (status == 400 && mock_mutated)
		abort(); /* bad input refused after something was changed */
	return 0;
}

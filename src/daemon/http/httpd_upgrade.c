/* httpd: upgraded connections, 101 Switching Protocols (httpd.h). */
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

/* ---------------------------------------------------------------- upgrades */

/* Whether the comma-separated list v holds token, in any case. */
bool httpd_list_has(const char *v, const char *token)
{
	size_t n = strlen(token);
	while (v && *v) {
		v += strspn(v, " \t,");
		size_t len = strcspn(v, ",");
		size_t word = len;
		while (word > 0 && (v[word - 1] == ' ' || v[word - 1] == '\t'))
			word--;
		if (word == n && strncasecmp(v, token, n) == 0)
			return true;
		v += len;
	}
	return false;
}

int http_req_upgrade(struct http_req *req, const char **ret_protocol)
{
	const char *upgrade = evhttp_find_header(&req->in_headers, "Upgrade");
	bool listed = httpd_list_has(evhttp_find_header(&req->in_headers, "Connection"), "upgrade");
	/* HTTP/1.0 has no upgrades: its Upgrade header is ignored (RFC 9110 7.8). */
	if (req->minor == 0 || (!upgrade && !listed))
		return 0;
	if (!upgrade || !*upgrade || !listed)
		return -1;
	*ret_protocol = upgrade;
	return 1;
}

bool httpd_upgraded(const struct http_conn *c)
{
	return c->req && c->req->reply == REPLY_UPGRADED;
}

/* Bytes came, into c->in (on_readable): the handler takes what it can. */
void httpd_raw_input(struct http_conn *c)
{
	httpd_hold(c);
	if (c->raw.on_input)
		c->raw.on_input(c, c->raw_arg);
	if (!c->closed)
		httpd_update_reading(c);
	httpd_release(c);
}

/* From the loop: the bytes that came right behind the upgrade request. */
static void raw_input_from_loop(evutil_socket_t fd, short what, void *arg)
{
	struct http_conn *c = arg;
	if (!c->closed && httpd_upgraded(c))
		httpd_raw_input(c);
	httpd_release(c);
}

/* A half-close: the client has said all it will, and still reads. No more
 * reading; writing goes on. */
void httpd_raw_input_end(struct http_conn *c)
{
	httpd_set_reading(c, false);
	httpd_hold(c);
	if (c->raw.on_input_end)
		c->raw.on_input_end(c, c->raw_arg);
	httpd_release(c);
}

/* The handler took input: read again once less than INPUT_HIGH_WATER
 * waits (it may take it later than on_input, as a terminal drains). */
static void raw_input_taken(struct evbuffer *in, const struct evbuffer_cb_info *info, void *arg)
{
	if (info->n_deleted > 0)
		httpd_update_reading(arg);
}

static void raw_on_write(struct bufferevent *bev, void *arg)
{
	struct http_conn *c = arg;
	httpd_hold(c);
	if (c->raw.on_drained)
		c->raw.on_drained(c, c->raw_arg);
	if (!c->closed)
		httpd_finish_request(c); /* closes it once http_conn_close_when_sent asked for that */
	httpd_release(c);
}

/* Whether the peer of a socket whose input has ended is gone entirely: on a
 * unix socket a closed peer shows as a hangup, a peer that only shut down
 * its sending side does not. Over TCP both are a FIN: a peer gone is seen
 * at the next write. */
bool httpd_peer_gone(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLHUP | POLLERR));
}

int http_upgrade(struct http_req *req, const char *protocol, const struct http_raw_callbacks *cbs, void *arg)
{
	struct http_conn *c = req->conn;
	if (req->reply != REPLY_NONE || req->state != READ_DONE || c->closed)
		return -1;
	http_stats_count(101);
	evbuffer_add_printf(bufferevent_get_output(c->bev),
			    "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: %s\r\n\r\n", protocol);
	req->reply = REPLY_UPGRADED; /* no answer any more, and no next request */
	req->keep_alive = false;
	c->sent_cb = NULL;
	c->raw = *cbs;
	c->raw_arg = arg;
	httpd_set_phase(c, PHASE_HANDLING); /* no limit: a terminal may stay open for days */
	bufferevent_setcb(c->bev, NULL, raw_on_write, httpd_on_event, c);
	if (!evbuffer_add_cb(c->in, raw_input_taken, c)) {
		http_conn_close(c);
		return 0; /* httpd_upgraded, and gone at once */
	}
	httpd_set_reading(c, true);
	/* Bytes the client sent right behind its request are in the input
	 * already: they are the new protocol's, handed over from the loop. */
	if (evbuffer_get_length(c->in) > 0) {
		static const struct timeval now = { 0, 0 };
		httpd_hold(c);
		if (event_base_once(httpd_srv.base, -1, EV_TIMEOUT, raw_input_from_loop, c, &now) < 0)
			httpd_release(c);
	}
	return 0;
}

void http_conn_close_when_sent(struct http_conn *c)
{
	struct http_req *req = c->req;
	if (c->closed || !req || req->reply != REPLY_UPGRADED)
		return;
	req->reply = REPLY_DONE;                   /* state READ_DONE and no keep-alive: finish_request closes */
	c->raw = (struct http_raw_callbacks){ 0 }; /* the handler is done with it */
	httpd_set_reading(c, false);
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		event_active(c->finish, 0, 0);
}


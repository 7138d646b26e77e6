#include "net/dns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/netaddr.h"

/* A query is at most this long (a question and an EDNS record fit in far
 * less); an answer over UDP at most 64 KiB. */
#define QUERY_MAX 1024
#define ANSWER_MAX 65535
#define TCP_IDLE_S 10

struct dns_conn {
	struct dns_forwarder *f;
	struct bufferevent *bev;
	int pending; /* its queries in flight */
	bool closed; /* the client is gone; freed when pending is 0 */
	struct dns_conn *prev, *next;
};

struct dns_query {
	struct dns_forwarder *f;
	struct event *ev;
	int fd; /* the socket to the resolver tried now */
	int attempt;
	uint16_t client_id, our_id;
	struct dns_question q;
	struct sockaddr_storage client; /* UDP: where the answer goes */
	socklen_t client_len;
	struct dns_conn *conn; /* TCP: where the answer goes */
	struct dns_query *prev, *next;
	size_t len;
	uint8_t msg[QUERY_MAX];
};

struct dns_forwarder {
	struct event_base *base;
	struct dns_config c;
	int udp;
	struct event *udp_ev;
	struct evconnlistener *tcp;
	struct dns_query *queries;
	int n_queries;
	struct dns_conn *conns;
	int n_conns;
};

#define LIST_ADD(head, e)                   \
	do {                                \
		(e)->prev = NULL;           \
		(e)->next = (head);         \
		if (head)                   \
			(head)->prev = (e); \
		(head) = (e);               \
	} while (0)
#define LIST_DEL(head, e)                            \
	do {                                         \
		if ((e)->prev)                       \
			(e)->prev->next = (e)->next; \
		else                                 \
			(head) = (e)->next;          \
		if ((e)->next)                       \
			(e)->next->prev = (e)->prev; \
	} while (0)

static void conn_release(struct dns_conn *c)
{
	if (!c->closed || c->pending)
		return;
	LIST_DEL(c->f->conns, c);
	c->f->n_conns--;
	free(c);
}

static void conn_close(struct dns_conn *c)
{
	if (c->bev)
		bufferevent_free(c->bev);
	c->bev = NULL;
	c->closed = true;
	conn_release(c);
}

/* Sends msg to whoever asked: the UDP client, or the TCP connection if it
 * is still there. */
static void answer(struct dns_forwarder *f, const struct sockaddr_storage *to, socklen_t to_len, struct dns_conn *conn,
		   const uint8_t *msg, size_t len)
{
	if (!conn) {
		(void)sendto(f->udp, msg, len, MSG_DONTWAIT, (const struct sockaddr *)to, to_len);
		return;
	}
	if (conn->closed)
		return;
	uint8_t hdr[2] = { (uint8_t)(len >> 8), (uint8_t)len };
	(void)bufferevent_write(conn->bev, hdr, 2);
	(void)bufferevent_write(conn->bev, msg, len);
}

static void query_free(struct dns_query *qr)
{
	if (qr->ev)
		event_free(qr->ev);
	if (qr->fd >= 0)
		close(qr->fd);
	LIST_DEL(qr->f->queries, qr);
	qr->f->n_queries--;
	if (qr->conn) {
		qr->conn->pending--;
		conn_release(qr->conn);
	}
	free(qr);
}

/* Answers qr with rcode, in the client's ID, and frees it. */
static void query_fail(struct dns_query *qr, int rcode)
{
	uint8_t out[QUERY_MAX];
	dnsmsg_set_id(qr->msg, qr->client_id);
	size_t n = dnsmsg_reply_error(qr->msg, &qr->q, rcode, out, sizeof(out));
	if (n)
		answer(qr->f, &qr->client, qr->client_len, qr->conn, out, n);
	query_free(qr);
}

static void send_attempt(struct dns_query *qr);

static void on_upstream(evutil_socket_t fd, short what, void *arg)
{
	struct dns_query *qr = arg;
	if (what & EV_TIMEOUT) {
		qr->attempt++;
		send_attempt(qr);
		return;
	}
	uint8_t buf[ANSWER_MAX]; /* on the stack: coved may run loops in several threads */
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) { /* ICMP unreachable: the next resolver at once */
		qr->attempt++;
		send_attempt(qr);
		return;
	}
	/* Anything but our ID and our question is ignored, and the wait
	 * goes on (the timeout still holds). */
	if ((size_t)n < DNS_HEADER || ((buf[0] << 8) | buf[1]) != qr->our_id || !dnsmsg_answers(buf, (size_t)n, &qr->q))
		return;
	dnsmsg_set_id(buf, qr->client_id);
	answer(qr->f, &qr->client, qr->client_len, qr->conn, buf, (size_t)n);
	query_free(qr);
}

/* Sends qr to its next resolver, or fails it when none is left. */
static void send_attempt(struct dns_query *qr)
{
	struct dns_forwarder *f = qr->f;
	if (qr->ev)
		event_free(qr->ev);
	if (qr->fd >= 0)
		close(qr->fd);
	qr->ev = NULL;
	qr->fd = -1;
	if (qr->attempt >= f->c.n_upstream) {
		query_fail(qr, DNS_RCODE_SERVFAIL);
		return;
	}
	const struct sockaddr_storage *up = &f->c.upstream[qr->attempt];
	qr->fd = socket(up->ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct timeval tv = { DNS_TIMEOUT_MS / 1000, (DNS_TIMEOUT_MS % 1000) * 1000 };
	if (qr->fd < 0 || connect(qr->fd, (const struct sockaddr *)up, f->c.upstream_len[qr->attempt]) < 0 ||
	    send(qr->fd, qr->msg, qr->len, 0) < 0 ||
	    !(qr->ev = event_new(f->base, qr->fd, EV_READ | EV_PERSIST, on_upstream, qr)) ||
	    event_add(qr->ev, &tv) < 0) {
		qr->attempt++;
		send_attempt(qr);
	}
}

/* One message from a client: refused, failed or forwarded. */
static void on_message(struct dns_forwarder *f, const uint8_t *msg, size_t len, const struct sockaddr_storage *from,
		       socklen_t from_len, struct dns_conn *conn)
{
	struct dns_question q;
	if (len > QUERY_MAX || dnsmsg_question(msg, len, &q) < 0 || q.response)
		return; /* not a query we answer: dropped, as a resolver would */
	uint8_t out[QUERY_MAX];
	bool allowed = !f->c.allowed || f->c.allowed(f->c.data, q.name);
	if (!allowed || f->n_queries >= DNS_INFLIGHT_MAX) {
		size_t n =
			dnsmsg_reply_error(msg, &q, allowed ? DNS_RCODE_SERVFAIL : DNS_RCODE_REFUSED, out, sizeof(out));
		answer(f, from, from_len, conn, out, n);
		return;
	}
	struct dns_query *qr = calloc(1, sizeof(*qr));
	if (!qr)
		return;
	*qr = (struct dns_query){
		.f = f, .fd = -1, .q = q, .conn = conn, .len = len, .client_id = q.id, .our_id = (uint16_t)arc4random()
	};
	memcpy(qr->msg, msg, len);
	dnsmsg_set_id(qr->msg, qr->our_id);
	if (from) {
		qr->client = *from;
		qr->client_len = from_len;
	}
	if (conn)
		conn->pending++;
	LIST_ADD(f->queries, qr);
	f->n_queries++;
	send_attempt(qr);
}

static void on_udp(evutil_socket_t fd, short what, void *arg)
{
	struct dns_forwarder *f = arg;
	uint8_t buf[QUERY_MAX + 1];
	/* A bounded batch per wakeup, so one busy sandbox cannot hold the loop. */
	for (int i = 0; i < 32; i++) {
		struct sockaddr_storage from;
		socklen_t from_len = sizeof(from);
		ssize_t n = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &from_len);
		if (n < 0)
			return;
		on_message(f, buf, (size_t)n, &from, from_len, NULL);
	}
}

static void on_tcp_read(struct bufferevent *bev, void *arg)
{
	struct dns_conn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t msg[QUERY_MAX];
	while (evbuffer_get_length(in) >= 2) {
		uint8_t hdr[2];
		evbuffer_copyout(in, hdr, 2);
		size_t len = (size_t)(hdr[0] << 8 | hdr[1]);
		if (len < DNS_HEADER || len > QUERY_MAX) {
			conn_close(c);
			return;
		}
		if (evbuffer_get_length(in) < 2 + len)
			return;
		evbuffer_drain(in, 2);
		evbuffer_remove(in, msg, len);
		on_message(c->f, msg, len, NULL, 0, c);
	}
}

static void on_tcp_event(struct bufferevent *bev, short what, void *arg)
{
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR | BEV_EVENT_TIMEOUT))
		conn_close(arg);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len, void *arg)
{
	struct dns_forwarder *f = arg;
	struct dns_conn *c = f->n_conns < DNS_TCP_MAX ? calloc(1, sizeof(*c)) : NULL;
	if (c)
		c->bev = bufferevent_socket_new(f->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!c || !c->bev) {
		free(c);
		close(fd);
		return;
	}
	c->f = f;
	LIST_ADD(f->conns, c);
	f->n_conns++;
	struct timeval idle = { TCP_IDLE_S, 0 };
	bufferevent_set_timeouts(c->bev, &idle, &idle);
	bufferevent_setcb(c->bev, on_tcp_read, NULL, on_tcp_event, c);
	(void)bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

int dns_config_resolv_conf(struct dns_config *c, const char *path, struct cove_err *err)
{
	char text[8192];
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_sys(err, errno, "open '%s'", path);
	ssize_t n = read(fd, text, sizeof(text) - 1);
	if (n < 0)
		return err_sys(err, errno, "read '%s'", path);
	text[n] = '\0';
	char addrs[DNS_RESOLVER_MAX][46];
	int found = dnsmsg_resolv_conf(text, addrs, DNS_RESOLVER_MAX);
	c->n_upstream = 0;
	for (int i = 0; i < found; i++) {
		char spec[64];
		snprintf(spec, sizeof(spec), strchr(addrs[i], ':') ? "[%s]:53" : "%s:53", addrs[i]);
		if (netaddr_parse(spec, &c->upstream[c->n_upstream], &c->upstream_len[c->n_upstream]) == 0)
			c->n_upstream++;
	}
	return c->n_upstream ? 0 : err_set(err, COVE_EINTERNAL, "no nameserver in '%s'", path);
}

static int bind_socket(const struct dns_config *c, int type, struct cove_err *err)
{
	int fd = socket(c->listen.ss_family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	char a[64];
	if (fd < 0)
		return err_sys(err, errno, "socket");
	/* TCP only: on UDP, SO_REUSEADDR would let a second socket share the
	 * address. */
	if (type == SOCK_STREAM)
		(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&c->listen, c->listen_len) < 0 ||
	    (type == SOCK_STREAM && listen(fd, DNS_TCP_MAX) < 0)) {
		int e = errno;
		close(fd);
		netaddr_format((const struct sockaddr *)&c->listen, a, sizeof(a));
		return err_sys(err, e, "DNS on %s", a);
	}
	return fd;
}

struct dns_forwarder *dns_forwarder_new(struct event_base *base, const struct dns_config *c, struct cove_err *err)
{
	if (c->n_upstream < 1 || c->n_upstream > DNS_RESOLVER_MAX) {
		err_set(err, COVE_EINVAL, "DNS: no resolver to forward to");
		return NULL;
	}
	struct dns_forwarder *f = calloc(1, sizeof(*f));
	if (!f) {
		err_set(err, COVE_EINTERNAL, "out of memory");
		return NULL;
	}
	*f = (struct dns_forwarder){ .base = base, .c = *c, .udp = -1 };
	f->udp = bind_socket(c, SOCK_DGRAM, err);
	int tcp = f->udp < 0 ? -1 : bind_socket(c, SOCK_STREAM, err);
	if (tcp < 0) {
		dns_forwarder_free(f);
		return NULL;
	}
	f->udp_ev = event_new(base, f->udp, EV_READ | EV_PERSIST, on_udp, f);
	f->tcp = evconnlistener_new(base, on_accept, f, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, tcp);
	if (!f->tcp)
		close(tcp);
	if (!f->udp_ev || !f->tcp || event_add(f->udp_ev, NULL) < 0) {
		err_set(err, COVE_EINTERNAL, "DNS: cannot register its events");
		dns_forwarder_free(f);
		return NULL;
	}
	return f;
}

void dns_forwarder_free(struct dns_forwarder *f)
{
	if (!f)
		return;
	while (f->queries)
		query_free(f->queries);
	while (f->conns) {
		struct dns_conn *c = f->conns;
		if (c->bev)
			bufferevent_free(c->bev);
		LIST_DEL(f->conns, c);
		free(c);
	}
	if (f->udp_ev)
		event_free(f->udp_ev);
	if (f->tcp)
		evconnlistener_free(f->tcp);
	if (f->udp >= 0)
		close(f->udp);
	free(f);
}

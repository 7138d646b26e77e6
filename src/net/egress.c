#include "net/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "net/relay.h"
#include "net/sniff.h"

struct egress_conn {
	struct egress_proxy *p;
	struct bufferevent *client, *up;
	struct relay *relay;
	struct evdns_getaddrinfo_request *req;
	struct evutil_addrinfo *addrs, *next_ai;
	struct sockaddr_storage orig; /* where the sandbox sent it */
	socklen_t orig_len;
	uint16_t port;               /* orig's port: 443 or 80, the port dialed */
	struct sockaddr_storage one; /* the one address to dial, if one_len */
	socklen_t one_len;
	bool name_allowed;
	bool http; /* port 80, a whole request read (sniff_http_one_request) */
	char name[SNIFF_NAME_MAX + 1];
	struct egress_conn *prev, *next;
};

struct egress_proxy {
	struct event_base *base;
	struct egress_config c;
	struct evconnlistener *listener[2];
	uint16_t port[2]; /* [0] IPv4, [1] IPv6 */
	struct egress_conn *conns;
	int n_conns;
};

static void conn_free(struct egress_conn *k)
{
	struct egress_proxy *p = k->p;
	if (k->req)
		evdns_getaddrinfo_cancel(k->req); /* its callback sees EVUTIL_EAI_CANCEL */
	if (k->addrs)
		evutil_freeaddrinfo(k->addrs);
	if (k->client)
		bufferevent_free(k->client);
	if (k->up)
		bufferevent_free(k->up);
	relay_free(k->relay);
	if (k->prev)
		k->prev->next = k->next;
	else
		p->conns = k->next;
	if (k->next)
		k->next->prev = k->prev;
	p->n_conns--;
	free(k);
}

static const char *target(const struct egress_conn *k, char *buf, size_t cap)
{
	char a[INET6_ADDRSTRLEN] = "?";
	const struct sockaddr *sa = (const struct sockaddr *)&k->orig;
	const void *ip = sa->sa_family == AF_INET ? (const void *)&((const struct sockaddr_in *)sa)->sin_addr
						  : (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
	(void)inet_ntop(sa->sa_family, ip, a, sizeof(a));
	snprintf(buf, cap, "%s%s(%s port %u)", k->name, k->name[0] ? " " : "", a, k->port);
	return buf;
}

static void refuse(struct egress_conn *k, const char *why)
{
	char t[400];
	log_debug("sandbox %s: egress to %s refused: %s", k->p->c.id, target(k, t, sizeof(t)), why);
	conn_free(k);
}

static void relay_done(void *data)
{
	struct egress_conn *k = data;
	k->relay = NULL; /* it freed both sides */
	conn_free(k);
}

static void try_next(struct egress_conn *k);

/* The HTTP request read so far goes to the server as the connection's
 * only one (sniff.h): a second request on it, naming another host, would
 * otherwise reach the server the first one's name chose. */
static int one_request(struct egress_conn *k)
{
	struct evbuffer *in = bufferevent_get_input(k->client);
	size_t len = evbuffer_get_length(in);
	uint8_t *out = malloc(len + 64);
	const uint8_t *b = evbuffer_pullup(in, -1);
	size_t n = out && b ? sniff_http_one_request(b, len, out, len + 64) : 0;
	int r = n && bufferevent_write(k->up, out, n) == 0 ? evbuffer_drain(in, len) : -1;
	free(out);
	return r;
}

static void on_up_event(struct bufferevent *bev, short what, void *data)
{
	struct egress_conn *k = data;
	if (!(what & BEV_EVENT_CONNECTED)) {
		bufferevent_free(k->up);
		k->up = NULL;
		try_next(k);
		return;
	}
	struct bufferevent *client = k->client, *up = k->up;
	if (k->http && one_request(k) < 0) {
		refuse(k, "out of memory");
		return;
	}
	k->client = k->up = NULL;
	/* The bytes read to find the name are still in client's input: the
	 * relay sends them first. */
	k->relay = relay_start(client, up, relay_done, k);
	if (!k->relay)
		refuse(k, "out of memory");
}

static void set_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

static bool dial(struct egress_conn *k, struct sockaddr *sa, socklen_t len)
{
	struct egress_proxy *p = k->p;
	struct timeval t = { EGRESS_CONNECT_S, 0 };
	set_port(sa, k->port);
	if (!p->c.judge_addr(p->c.data, sa, k->name_allowed))
		return false;
	k->up = bufferevent_socket_new(p->base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (!k->up)
		return false;
	bufferevent_setcb(k->up, NULL, NULL, on_up_event, k);
	(void)bufferevent_set_timeouts(k->up, &t, &t);
	if (bufferevent_socket_connect(k->up, sa, (int)len) == 0)
		return true;
	bufferevent_free(k->up);
	k->up = NULL;
	return false;
}

/* Dials the one address (an IP literal, or where the sandbox sent a
 * connection without a name), else the next resolved address the judge
 * allows; refuses when none is left. */
static void try_next(struct egress_conn *k)
{
	if (k->one_len) {
		socklen_t len = k->one_len;
		k->one_len = 0;
		if (!dial(k, (struct sockaddr *)&k->one, len))
			refuse(k, "address denied or not answering");
		return;
	}
	for (struct evutil_addrinfo *ai = k->next_ai; ai; ai = ai->ai_next) {
		k->next_ai = ai->ai_next;
		if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
		    dial(k, ai->ai_addr, (socklen_t)ai->ai_addrlen))
			return;
	}
	refuse(k, k->addrs ? "no address allowed or answering" : "cannot connect");
}

static void on_resolved(int result, struct evutil_addrinfo *res, void *data)
{
	if (result == EVUTIL_EAI_CANCEL)
		return; /* its connection is gone */
	struct egress_conn *k = data;
	k->req = NULL;
	if (result != 0) {
		refuse(k, evutil_gai_strerror(result));
		return;
	}
	k->addrs = k->next_ai = res;
	try_next(k);
}

/* A name that is an IP literal is dialed as written. */
static bool literal(struct egress_conn *k, const char *name)
{
	struct sockaddr_in *v4 = (struct sockaddr_in *)&k->one;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&k->one;
	memset(&k->one, 0, sizeof(k->one));
	if (inet_pton(AF_INET, name, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		k->one_len = sizeof(*v4);
	} else if (inet_pton(AF_INET6, name, &v6->sin6_addr) == 1) {
		v6->sin6_family = AF_INET6;
		k->one_len = sizeof(*v6);
	}
	return k->one_len != 0;
}

/* The first bytes are read: judge what they name, then resolve or dial. */
static void decide(struct egress_conn *k, enum sniff_result r)
{
	struct egress_proxy *p = k->p;
	if (r == SNIFF_BAD) {
		refuse(k, k->port == 443 ? "not a TLS ClientHello with a valid server name"
					 : "not an HTTP request with a valid Host");
		return;
	}
	if (r == SNIFF_NONE || literal(k, k->name)) {
		if (r == SNIFF_NONE) {
			memcpy(&k->one, &k->orig, k->orig_len);
			k->one_len = k->orig_len;
		}
		try_next(k);
		return;
	}
	enum egress_verdict v = p->c.judge_name(p->c.data, k->name);
	if (v == EGRESS_DENY) {
		refuse(k, "denied name");
		return;
	}
	k->name_allowed = v == EGRESS_ALLOW;
	struct evutil_addrinfo hints = { .ai_family = AF_UNSPEC,
					 .ai_socktype = SOCK_STREAM,
					 .ai_protocol = IPPROTO_TCP };
	/* NULL: the callback ran already (a failed or cached lookup), and k
	 * may be gone. */
	struct evdns_getaddrinfo_request *req = evdns_getaddrinfo(p->c.dns, k->name, NULL, &hints, on_resolved, k);
	if (req)
		k->req = req;
}

static void on_hello(struct bufferevent *bev, void *data)
{
	struct egress_conn *k = data;
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);
	const uint8_t *b = evbuffer_pullup(in, -1);
	enum sniff_result r = k->port == 443 ? sniff_tls(b, len, k->name) : sniff_http(b, len, k->name);
	if (r == SNIFF_MORE && len < SNIFF_MAX)
		return;
	if (r == SNIFF_MORE)
		r = SNIFF_BAD;
	if (r != SNIFF_NAME)
		k->name[0] = '\0';
	k->http = k->port == 80 && (r == SNIFF_NAME || r == SNIFF_NONE);
	/* Nothing more is read until the other side is there: the client's
	 * further bytes wait in the kernel. */
	(void)bufferevent_disable(bev, EV_READ);
	decide(k, r);
}

static void on_client_event(struct bufferevent *bev, short what, void *data)
{
	struct egress_conn *k = data;
	refuse(k, what & BEV_EVENT_TIMEOUT ? "no name within the time allowed" : "closed by the sandbox");
}

/* Where the sandbox sent the connection, before nftables' DNAT. */
static int original_dst(int fd, int family, struct sockaddr_storage *ret, socklen_t *ret_len)
{
	socklen_t len = sizeof(*ret);
	int r = family == AF_INET ? getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, ret, &len)
				  : getsockopt(fd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, ret, &len);
	if (r < 0)
		return -errno;
	*ret_len = len;
	return 0;
}

static bool peer_ok(const struct egress_proxy *p, const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return memcmp(&((const struct sockaddr_in *)sa)->sin_addr, p->c.peer4, 4) == 0;
	return sa->sa_family == AF_INET6 && p->c.has_peer6 &&
	       memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, p->c.peer6, 16) == 0;
}

static uint16_t port_of(const struct sockaddr_storage *ss)
{
	return ntohs(ss->ss_family == AF_INET ? ((const struct sockaddr_in *)ss)->sin_port
					      : ((const struct sockaddr_in6 *)ss)->sin6_port);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *peer, int peer_len, void *data)
{
	struct egress_proxy *p = data;
	struct egress_conn *k = NULL;
	struct sockaddr_storage orig;
	socklen_t orig_len = 0;
	uint16_t port = 0;
	if (peer_ok(p, peer) && p->n_conns < EGRESS_CONN_MAX &&
	    original_dst(fd, peer->sa_family, &orig, &orig_len) == 0)
		port = port_of(&orig);
	if ((port != 443 && port != 80) || !(k = calloc(1, sizeof(*k)))) {
		log_debug("sandbox %s: egress connection refused (not the sandbox's, not redirected, or %d open)",
			  p->c.id, p->n_conns);
		close(fd);
		return;
	}
	*k = (struct egress_conn){ .p = p, .orig = orig, .orig_len = orig_len, .port = port, .next = p->conns };
	if (p->conns)
		p->conns->prev = k;
	p->conns = k;
	p->n_conns++;
	k->client = bufferevent_socket_new(p->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!k->client) {
		close(fd);
		conn_free(k);
		return;
	}
	struct timeval t = { EGRESS_HELLO_S, 0 };
	bufferevent_setcb(k->client, on_hello, NULL, on_client_event, k);
	bufferevent_setwatermark(k->client, EV_READ, 0, SNIFF_MAX);
	(void)bufferevent_set_timeouts(k->client, &t, NULL);
	(void)bufferevent_enable(k->client, EV_READ);
}

/* A listening socket on sa, which may not be on any link yet. */
static int listen_freebind(const struct sockaddr_storage *sa, socklen_t len)
{
	int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int on = 1;
	if (fd < 0)
		return -errno;
	if ((sa->ss_family == AF_INET ? setsockopt(fd, SOL_IP, IP_FREEBIND, &on, sizeof(on))
				      : setsockopt(fd, SOL_IPV6, IPV6_FREEBIND, &on, sizeof(on))) < 0 ||
	    bind(fd, (const struct sockaddr *)sa, len) < 0 || listen(fd, 128) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

struct egress_proxy *egress_proxy_new(struct event_base *base, const struct egress_config *c, struct cove_err *err)
{
	struct egress_proxy *p = calloc(1, sizeof(*p));
	if (!p) {
		err_set(err, COVE_EINTERNAL, "out of memory");
		return NULL;
	}
	p->base = base;
	p->c = *c;
	for (int i = 0; i < c->n_listen && i < 2; i++) {
		struct sockaddr_storage sa = c->listen[i], bound;
		socklen_t blen = sizeof(bound);
		set_port((struct sockaddr *)&sa, 0);
		int fd = listen_freebind(&sa, c->listen_len[i]);
		if (fd < 0 || getsockname(fd, (struct sockaddr *)&bound, &blen) < 0) {
			err_sys(err, fd < 0 ? -fd : errno, "egress proxy: listen");
			if (fd >= 0)
				close(fd);
			egress_proxy_free(p);
			return NULL;
		}
		int k = sa.ss_family == AF_INET ? 0 : 1;
		p->port[k] = port_of(&bound);
		p->listener[k] =
			evconnlistener_new(base, on_accept, p, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
		if (!p->listener[k]) {
			close(fd);
			err_set(err, COVE_EINTERNAL, "egress proxy: out of memory");
			egress_proxy_free(p);
			return NULL;
		}
	}
	return p;
}

uint16_t egress_proxy_port(const struct egress_proxy *p, int family)
{
	return p ? p->port[family == AF_INET ? 0 : 1] : 0;
}

void egress_proxy_free(struct egress_proxy *p)
{
	if (!p)
		return;
	for (int i = 0; i < 2; i++)
		if (p->listener[i])
			evconnlistener_free(p->listener[i]);
	while (p->conns)
		conn_free(p->conns);
	free(p);
}

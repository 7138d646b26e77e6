/* src/net/dnsmsg.c (the parser, on crafted messages) and src/net/dns.c
 * (the forwarder, on loopback in a network namespace of the test's own:
 * a fake upstream resolver, a dead one, and clients over UDP and TCP). */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/netaddr.h"
#include "net/dns.h"
#include "net/dnsmsg.h"
#include "net/policy.h"
#include "sys/netlink.h"
#include "tap.h"

/* A query for name (dotted) of type A, with id, into buf; its length. */
static size_t make_query(uint8_t *buf, uint16_t id, const char *name)
{
	memset(buf, 0, DNS_HEADER);
	buf[0] = (uint8_t)(id >> 8);
	buf[1] = (uint8_t)id;
	buf[2] = 0x01; /* RD */
	buf[5] = 1;    /* QDCOUNT */
	size_t at = DNS_HEADER;
	for (const char *p = name; *p;) {
		size_t l = strcspn(p, ".");
		buf[at++] = (uint8_t)l;
		memcpy(buf + at, p, l);
		at += l;
		p += l + (p[l] == '.');
	}
	buf[at++] = 0;
	buf[at++] = 0, buf[at++] = 1; /* A */
	buf[at++] = 0, buf[at++] = 1; /* IN */
	return at;
}

static void test_parser(void)
{
	uint8_t m[512];
	struct dns_question q;
	size_t n = make_query(m, 0xbeef, "WWW.Example.org");
	CHECK(dnsmsg_question(m, n, &q) == 0 && q.id == 0xbeef && !q.response && q.type == 1 && q.class == 1 &&
		      q.end == n && strcmp(q.name, "www.example.org") == 0,
	      "a query's question, lowercased");
	CHECK(dnsmsg_question(m, n - 1, &q) == -EINVAL, "cut short refused");
	CHECK(dnsmsg_question(m, 11, &q) == -EINVAL, "shorter than a header refused");
	m[5] = 2;
	CHECK(dnsmsg_question(m, n, &q) == -EINVAL, "two questions refused");
	m[5] = 1;
	m[7] = 1;
	CHECK(dnsmsg_question(m, n, &q) == -EINVAL, "a query with answers refused");
	m[7] = 0;
	uint8_t c[64];
	memcpy(c, m, DNS_HEADER);
	memcpy(c + DNS_HEADER, "\3www\xc0\x0c\0\1\0\1", 10);
	CHECK(dnsmsg_question(c, DNS_HEADER + 10, &q) == -EINVAL, "a compression pointer refused");
	memcpy(c + DNS_HEADER, "\3a.b\3org\0\0\1\0\1", 13);
	CHECK(dnsmsg_question(c, DNS_HEADER + 13, &q) == -EINVAL, "a dot inside a label refused");
	memcpy(c + DNS_HEADER, "\3a\0b\3org\0\0\1\0\1", 13);
	CHECK(dnsmsg_question(c, DNS_HEADER + 13, &q) == -EINVAL, "a NUL inside a label refused");
	char longname[300];
	memset(longname, 'a', sizeof(longname));
	for (int i = 63; i < 299; i += 64)
		longname[i] = '.';
	longname[299] = '\0';
	n = make_query(m, 1, longname);
	CHECK(dnsmsg_question(m, n, &q) == -EINVAL, "a name over 253 bytes refused");
	n = make_query(m, 7, "x.example.org");
	(void)dnsmsg_question(m, n, &q);
	uint8_t r[512];
	size_t rn = dnsmsg_reply_error(m, &q, DNS_RCODE_REFUSED, r, sizeof(r));
	struct dns_question rq;
	CHECK(rn == n && (r[3] & 0xf) == 5 && (r[2] & 0x80) && dnsmsg_question(r, rn, &rq) == 0 && rq.response &&
		      rq.id == 7,
	      "a REFUSED reply keeps ID and question");
	CHECK(dnsmsg_answers(r, rn, &q), "which answers the question");
	make_query(m, 7, "y.example.org");
	struct dns_question other;
	(void)dnsmsg_question(m, n, &other);
	CHECK(!dnsmsg_answers(r, rn, &other), "and not another");
	CHECK(dnsmsg_reply_error(m, &q, 5, r, 10) == 0, "no room: no reply");

	char ns[DNS_RESOLVER_MAX][46];
	int k = dnsmsg_resolv_conf("# c\nsearch x\nnameserver 10.255.255.53\n nameserver  fe80::1%eth0\n"
				   "nameserver bogus\nnameserver ::1\nnameserver 1.1.1.1\n",
				   ns, DNS_RESOLVER_MAX);
	CHECK(k == 3 && strcmp(ns[0], "10.255.255.53") == 0 && strcmp(ns[1], "fe80::1") == 0 &&
		      strcmp(ns[2], "::1") == 0,
	      "resolv.conf: nameservers, zone dropped, bad skipped, at most 3");
}

/* The fake upstream: answers every query with one A record, 203.0.113.77,
 * after first sending a decoy with a wrong ID and 203.0.113.66 (which must
 * be ignored). */
static int upstream_queries;

static void on_upstream_query(evutil_socket_t fd, short what, void *arg)
{
	uint8_t m[1024];
	struct sockaddr_storage from;
	socklen_t fl = sizeof(from);
	ssize_t n = recvfrom(fd, m, sizeof(m) - 16, 0, (struct sockaddr *)&from, &fl);
	if (n < DNS_HEADER)
		return;
	upstream_queries++;
	m[2] |= 0x80;
	m[3] = 0x80;
	m[7] = 1; /* ANCOUNT */
	static const uint8_t rr[] = { 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 203, 0, 113, 77 };
	memcpy(m + n, rr, sizeof(rr));
	/* The decoy: another ID, another address. */
	m[1] ^= 1;
	m[n + sizeof(rr) - 1] = 66;
	(void)sendto(fd, m, (size_t)n + sizeof(rr), 0, (struct sockaddr *)&from, fl);
	m[1] ^= 1;
	m[n + sizeof(rr) - 1] = 77;
	(void)sendto(fd, m, (size_t)n + sizeof(rr), 0, (struct sockaddr *)&from, fl);
}

static struct event_base *base;

static void on_client(evutil_socket_t fd, short what, void *arg)
{
	event_base_loopbreak(base);
}

/* Runs the loop until fd is readable or ms pass; whether it is. */
static bool wait_readable(int fd, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	struct event *ev = event_new(base, fd, EV_READ, on_client, NULL);
	event_add(ev, &tv);
	event_base_dispatch(base);
	bool ready = event_pending(ev, EV_READ, NULL) == 0;
	char c;
	ready = ready && recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 1;
	event_free(ev);
	return ready;
}

static int udp_to(const char *spec)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (netaddr_parse(spec, &ss, &len) < 0 || connect(fd, (struct sockaddr *)&ss, len) < 0)
		return -1;
	return fd;
}

/* Sends a query for name over UDP and returns the answer's length (into
 * ans), 0 if none comes within ms. */
static ssize_t ask_udp(const char *server, uint16_t id, const char *name, uint8_t *ans, int ms)
{
	_cleanup_close_ int fd = udp_to(server);
	uint8_t q[512];
	size_t n = make_query(q, id, name);
	if (fd < 0 || send(fd, q, n, 0) < 0 || !wait_readable(fd, ms))
		return 0;
	return recv(fd, ans, 1024, 0);
}

/* Whether buf holds n whole length-prefixed frames. */
static bool frames_complete(const uint8_t *buf, size_t have, int n)
{
	size_t at = 0;
	for (int i = 0; i < n; i++) {
		if (at + 2 > have)
			return false;
		at += 2 + (size_t)(buf[at] << 8 | buf[at + 1]);
	}
	return at <= have;
}

static bool allowed(void *data, const char *name)
{
	const struct policy_list *deny = data;
	return policy_name_allowed(NULL, deny, name);
}

static bool is_answer(const uint8_t *a, ssize_t n, uint16_t id, int rcode)
{
	return n >= DNS_HEADER && (a[0] << 8 | a[1]) == id && (a[2] & 0x80) && (a[3] & 0xf) == rcode;
}

static void test_forwarder(void)
{
	_cleanup_close_ int nl = netlink_open(-1);
	CHECK1(nl >= 0 && netlink_link_up(nl, netlink_link_index(nl, "lo")) == 0, "loopback up");
	base = event_base_new();
	_cleanup_close_ int up = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_storage ss;
	socklen_t len;
	(void)netaddr_parse("127.0.0.1:5301", &ss, &len);
	CHECK1(bind(up, (struct sockaddr *)&ss, len) == 0, "fake upstream");
	struct event *up_ev = event_new(base, up, EV_READ | EV_PERSIST, on_upstream_query, NULL);
	event_add(up_ev, NULL);

	const char *deny_items[] = { "*.blocked.example" };
	struct policy_list deny;
	(void)policy_list_parse("deny_out", deny_items, 1, &deny, NULL);
	struct dns_config c = { .allowed = allowed, .data = &deny, .n_upstream = 2 };
	(void)netaddr_parse("127.0.0.1:5300", &c.listen, &c.listen_len);
	/* The first resolver is dead (nothing on 5302): port unreachable,
	 * and the forwarder goes on to the next at once. */
	(void)netaddr_parse("127.0.0.1:5302", &c.upstream[0], &c.upstream_len[0]);
	(void)netaddr_parse("127.0.0.1:5301", &c.upstream[1], &c.upstream_len[1]);
	struct cove_err e = { 0 };
	struct dns_forwarder *f = dns_forwarder_new(base, &c, &e);
	CHECK1(f != NULL, "forwarder on 127.0.0.1:5300 %s", e.msg);
	struct dns_forwarder *f2 = dns_forwarder_new(base, &c, &e);
	CHECK(!f2 && strstr(e.msg, "127.0.0.1:5300"), "a second one on the same address refused: %s", e.msg);

	uint8_t a[1024];
	ssize_t n = ask_udp("127.0.0.1:5300", 0x1234, "www.example.org", a, 3000);
	CHECK(is_answer(a, n, 0x1234, 0) && n >= 4 && memcmp(a + n - 4, "\xcb\x00\x71\x4d", 4) == 0,
	      "allowed name answered, in the client's ID, past the decoy and the dead resolver");
	int before = upstream_queries;
	n = ask_udp("127.0.0.1:5300", 0x4321, "x.blocked.example", a, 1000);
	CHECK(is_answer(a, n, 0x4321, DNS_RCODE_REFUSED) && upstream_queries == before,
	      "denied name REFUSED, not forwarded");
	_cleanup_close_ int raw = udp_to("127.0.0.1:5300");
	CHECK(send(raw, "\1\2\3", 3, 0) == 3 && !wait_readable(raw, 300), "garbage gets no answer");
	n = ask_udp("127.0.0.1:5300", 0x5555, "pypi.org", a, 3000);
	CHECK(is_answer(a, n, 0x5555, 0), "and the forwarder still serves");

	/* TCP: length-prefixed, two queries on one connection. */
	_cleanup_close_ int t = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK1(connect(t, (struct sockaddr *)&c.listen, c.listen_len) == 0, "TCP connect");
	uint8_t q[514];
	size_t qn = make_query(q + 2, 0x7777, "www.example.org");
	q[0] = 0, q[1] = (uint8_t)qn;
	(void)!write(t, q, qn + 2);
	qn = make_query(q + 2, 0x8888, "a.blocked.example");
	q[1] = (uint8_t)qn;
	(void)!write(t, q, qn + 2);
	uint8_t got[2048];
	size_t have = 0;
	while (!frames_complete(got, have, 2) && wait_readable(t, 3000)) {
		ssize_t r = recv(t, got + have, sizeof(got) - have, MSG_DONTWAIT);
		if (r <= 0)
			break;
		have += (size_t)r;
	}
	size_t l1 = (size_t)(got[0] << 8 | got[1]);
	bool two = frames_complete(got, have, 2);
	/* The refusal is immediate, the forwarded answer comes later. */
	CHECK(two && is_answer(got + 2, (ssize_t)l1, 0x8888, DNS_RCODE_REFUSED) &&
		      is_answer(got + 4 + l1, (ssize_t)(have - 4 - l1), 0x7777, 0),
	      "TCP: both answered, each in its frame");

	dns_forwarder_free(f);
	struct dns_config dead = c;
	dead.n_upstream = 1;
	f = dns_forwarder_new(base, &dead, &e);
	n = ask_udp("127.0.0.1:5300", 0x9999, "www.example.org", a, 3000);
	CHECK(is_answer(a, n, 0x9999, DNS_RCODE_SERVFAIL), "no live resolver: SERVFAIL");
	dns_forwarder_free(f);
	policy_list_free(&deny);
	event_free(up_ev);
	event_base_free(base);
}

int main(void)
{
	test_parser();
	if (geteuid() != 0 || unshare(CLONE_NEWNET) < 0) {
		SKIP("the forwarder needs a network namespace of its own (root)");
		return tap_done();
	}
	test_forwarder();
	return tap_done();
}

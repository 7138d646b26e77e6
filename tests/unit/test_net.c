/* src/net/net.c against the kernel, as root, in network namespaces this
 * test makes and nowhere else: the test moves itself into a namespace of
 * its own ("the host", H) at once, and makes "the internet" (I) and the
 * sandboxes (S1..S3) beside it. I holds the test's servers, among them one
 * on 169.254.169.254. Every packet stays among these namespaces; the real
 * host's namespace is only read (its ip_forward, before and after).
 *
 *   S1, S2, S3 ── veth cv-* ── H ── veth up0 ── I (198.51.100.2,
 *                              198.51.100.1      203.0.113.10, 169.254.169.254,
 *                                                2001:db8::10)
 *
 * I has no route back to the pool, so a sandbox reaching I at all shows
 * H's forwarding and masquerade. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "net/net.h"
#include "sys/netlink.h"
#include "sys/nftables.h"
#include "tap.h"

static int home; /* H */

static int ns_enter(int fd)
{
	return setns(fd, CLONE_NEWNET);
}

/* A new namespace, kept alive by the returned fd; the caller stays in H. */
static int netns_new(void)
{
	if (unshare(CLONE_NEWNET) < 0)
		return -1;
	int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (ns_enter(home) < 0)
		abort();
	return fd;
}

/* A socket living in namespace ns (made there, used from H). */
static int socket_in(int ns, int family, int type)
{
	if (ns_enter(ns) < 0)
		return -1;
	int s = socket(family, type | SOCK_CLOEXEC, 0);
	if (ns_enter(home) < 0)
		abort();
	return s;
}

static socklen_t sockaddr_of(const char *addr, int port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, addr, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		return sizeof(*in);
	}
	(void)inet_pton(AF_INET6, addr, &in6->sin6_addr);
	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons((uint16_t)port);
	return sizeof(*in6);
}

static int listen_in(int ns, const char *addr, int port)
{
	struct sockaddr_storage ss;
	socklen_t len = sockaddr_of(addr, port, &ss);
	int s = socket_in(ns, ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK);
	int one = 1;
	(void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6) /* beside an IPv4 one on the same port */
		(void)setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (s < 0 || bind(s, (struct sockaddr *)&ss, len) < 0 || listen(s, 16) < 0) {
		printf("# listen %s:%d: %s\n", addr, port, strerror(errno));
		return -1;
	}
	return s;
}

/* Whether a TCP connection from ns to addr:port completes within ms (a
 * dropped SYN just times out). */
static bool connects(int ns, const char *addr, int port, int ms)
{
	struct sockaddr_storage ss;
	socklen_t len = sockaddr_of(addr, port, &ss);
	_cleanup_close_ int s = socket_in(ns, ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK);
	if (s < 0)
		return false;
	if (connect(s, (struct sockaddr *)&ss, len) == 0)
		return true;
	if (errno != EINPROGRESS)
		return false;
	struct pollfd p = { .fd = s, .events = POLLOUT };
	int err = 0;
	socklen_t el = sizeof(err);
	return poll(&p, 1, ms) == 1 && getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0;
}

/* A path that is open answers at once; 2 s leaves room for one lost first
 * SYN on a loaded machine (seen once in ten runs with 400 ms). A path that
 * is closed is given 1 s to prove it, more than any open one here needs. */
static bool reaches(int ns, const char *addr, int port)
{
	return connects(ns, addr, port, 2000);
}

static bool blocked(int ns, const char *addr, int port)
{
	return !connects(ns, addr, port, 1000);
}

/* The peer address of the next connection waiting on listener l. */
static const char *accepted_from(int l)
{
	static char buf[INET6_ADDRSTRLEN];
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct pollfd p = { .fd = l, .events = POLLIN };
	if (poll(&p, 1, 1000) != 1)
		return "(none)";
	_cleanup_close_ int c = accept4(l, (struct sockaddr *)&ss, &len, SOCK_CLOEXEC);
	if (c < 0)
		return "(none)";
	const void *a = ss.ss_family == AF_INET ? (void *)&((struct sockaddr_in *)&ss)->sin_addr
						: (void *)&((struct sockaddr_in6 *)&ss)->sin6_addr;
	return inet_ntop(ss.ss_family, a, buf, sizeof(buf)) ? buf : "?";
}

static void drain(int l)
{
	int c;
	while ((c = accept4(l, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		close(c);
}

static int addr_add(int nl, const char *ifname, const char *addr, int len)
{
	uint8_t a[16];
	int family = strchr(addr, ':') ? AF_INET6 : AF_INET;
	int idx = netlink_link_index(nl, ifname);
	if (idx < 0 || inet_pton(family, addr, a) != 1)
		return -1;
	return netlink_addr_add(nl, idx, family, a, len);
}

/* Up, with no IPv6 link-local address of the kernel's: the test gives its
 * links fixed ones (as net.c does), which skip duplicate address detection. */
static int up(int nl, const char *ifname)
{
	int idx = netlink_link_index(nl, ifname);
	if (idx > 0 && strcmp(ifname, "lo") != 0 && netlink_link_no_link_local(nl, idx) < 0)
		return -1;
	return idx < 0 ? idx : netlink_link_up(nl, idx);
}

/* H's uplink to I and I's addresses. */
static bool make_internet(int inet_ns)
{
	_cleanup_close_ int h = netlink_open(-1), i = netlink_open(inet_ns);
	uint8_t gw4[4], gw6[16];
	inet_pton(AF_INET, "198.51.100.2", gw4);
	inet_pton(AF_INET6, "fd99::2", gw6);
	return h >= 0 && i >= 0 && netlink_veth_create(h, "up0", "eth0", inet_ns) == 0 &&
	       addr_add(h, "up0", "198.51.100.1", 24) == 0 && addr_add(h, "up0", "fd99::1", 64) == 0 &&
	       addr_add(h, "up0", "fe80::1", 64) == 0 && addr_add(i, "eth0", "fe80::2", 64) == 0 && up(h, "up0") == 0 &&
	       up(h, "lo") == 0 && netlink_route_default(h, AF_INET, gw4, netlink_link_index(h, "up0")) == 0 &&
	       netlink_route_default(h, AF_INET6, gw6, netlink_link_index(h, "up0")) == 0 && up(i, "lo") == 0 &&
	       addr_add(i, "eth0", "198.51.100.2", 24) == 0 && addr_add(i, "eth0", "fd99::2", 64) == 0 &&
	       up(i, "eth0") == 0 && addr_add(i, "lo", "203.0.113.10", 32) == 0 &&
	       addr_add(i, "lo", "169.254.169.254", 32) == 0 && addr_add(i, "lo", "2001:db8::10", 128) == 0;
}

/* The test's own uplink settles for a second or so over IPv6 (its ends
 * are new to each other); wait for it here, so that the sandboxes' first
 * tries below are held to succeed at once. */
static bool uplink_ready(int inet_ns)
{
	_cleanup_close_ int l4 = listen_in(inet_ns, "203.0.113.10", 9), l6 = listen_in(inet_ns, "2001:db8::10", 9);
	bool ok4 = false, ok6 = false;
	for (int i = 0; i < 10 && !(ok4 && ok6); i++) {
		ok4 = ok4 || reaches(home, "203.0.113.10", 9);
		ok6 = ok6 || reaches(home, "2001:db8::10", 9);
	}
	return ok4 && ok6;
}

static int read_forward(const char *path)
{
	char c = 0;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd >= 0 && read(fd, &c, 1) == 1 ? c : -1;
}

/* A new network namespace inherits the host's IPv4 settings, forwarding
 * included (net.core.devconf_inherit_init_net 0): a host where coved
 * already turned it on must not decide what H starts with. */
static bool forward_off(const char *path)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	return fd >= 0 && write(fd, "0", 1) == 1;
}

/* The table's listing contains s. */
static bool table_has(const char *s)
{
	_cleanup_free_ char *json = NULL;
	if (nftables_list_json("list table inet cove", &json, NULL) < 0)
		return false;
	return strstr(json, s) != NULL;
}

/* Whether H's conntrack table has an entry from src. */
static bool conntrack_has(const char *src)
{
	char want[64], line[1024];
	snprintf(want, sizeof(want), "src=%s ", src);
	FILE *f = fopen("/proc/net/nf_conntrack", "re");
	bool found = false;
	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, want) != NULL;
	if (f)
		fclose(f);
	return found;
}

static bool link_exists(int ns, const char *name)
{
	_cleanup_close_ int nl = netlink_open(ns);
	return netlink_link_index(nl, name) > 0;
}

static struct net_pool pool;

static bool attach(const char *id, int ns, struct net_sandbox *sb)
{
	struct cove_err e = { 0 };
	*sb = (struct net_sandbox){ .id = id };
	if (net_pool_alloc(&pool, &sb->addrs) < 0)
		return false;
	if (net_sandbox_attach(sb, ns, &e) < 0) {
		printf("# attach %s: %s\n", id, e.msg);
		return false;
	}
	return true;
}

/* Sets sb's lists from the given items (NULL-terminated). */
static bool set_policy(struct net_sandbox *sb, const char *const *allow, const char *const *deny)
{
	static struct policy_list a, d;
	size_t na = 0, nd = 0;
	while (allow && allow[na])
		na++;
	while (deny && deny[nd])
		nd++;
	policy_list_free(&a);
	policy_list_free(&d);
	struct cove_err e = { 0 };
	if (policy_list_parse("allow_out", allow, na, &a, &e) < 0 ||
	    policy_list_parse("deny_out", deny, nd, &d, &e) < 0 ||
	    (sb->allow = &a, sb->deny = &d, net_sandbox_policy(sb, &e)) < 0) {
		printf("# policy: %s\n", e.msg);
		return false;
	}
	return true;
}

static const char *addr_text(int family, const uint8_t *a)
{
	static char buf[4][INET6_ADDRSTRLEN];
	static int n;
	char *b = buf[n++ % 4];
	return inet_ntop(family, a, b, INET6_ADDRSTRLEN);
}

static const char *addr4(const uint8_t *a)
{
	return addr_text(AF_INET, a);
}

static const char *addr6(const uint8_t *a)
{
	return addr_text(AF_INET6, a);
}

static void test_egress(int inet_ns, int s1, int s2)
{
	struct net_sandbox a, b;
	CHECK1(attach("sb_aaaaaaaaaaaa", s1, &a), "attach S1");
	CHECK1(attach("sb_bbbbbbbbbbbb", s2, &b), "attach S2");
	_cleanup_close_ int web = listen_in(inet_ns, "203.0.113.10", 8080);
	_cleanup_close_ int web6 = listen_in(inet_ns, "2001:db8::10", 8080);
	_cleanup_close_ int meta = listen_in(inet_ns, "169.254.169.254", 80);
	_cleanup_close_ int dns = listen_in(home, "0.0.0.0", 53);
	_cleanup_close_ int dns6 = listen_in(home, "::", 53);
	_cleanup_close_ int api = listen_in(home, "0.0.0.0", 7070);
	_cleanup_close_ int other = listen_in(s2, "0.0.0.0", 8080);

	CHECK(reaches(s1, "203.0.113.10", 8080), "S1 reaches the internet over IPv4");
	const char *peer = accepted_from(web);
	CHECK_STR(peer, "198.51.100.1", "masqueraded to H's uplink address (%s)", peer);
	CHECK(pool.has_v6 && reaches(s1, "2001:db8::10", 8080), "S1 reaches the internet over IPv6");
	peer = accepted_from(web6);
	CHECK_STR(peer, "fd99::1", "IPv6 masqueraded too (%s)", peer);
	CHECK(reaches(s1, addr4(a.addrs.gw4), 53), "S1 reaches the resolver port on its gateway");
	drain(dns);
	CHECK(reaches(s1, addr6(a.addrs.gw6), 53), "and over IPv6");
	drain(dns6);
	CHECK(blocked(s1, addr6(b.addrs.gw6), 53), "S1 does not reach S2's gateway over IPv6");
	CHECK(blocked(s1, "fd99::1", 53), "nor the host's other IPv6 addresses");
	CHECK(blocked(s1, addr4(a.addrs.gw4), 7070), "S1 does not reach another port of its gateway (coved's API)");
	CHECK(blocked(s1, "198.51.100.1", 53), "S1 does not reach the host's other addresses, even port 53");
	CHECK(blocked(s1, addr4(b.addrs.gw4), 53), "S1 does not reach S2's gateway");
	CHECK(blocked(s1, addr4(b.addrs.sb4), 8080), "S1 does not reach S2");
	CHECK(blocked(s1, "169.254.169.254", 80), "S1 does not reach link-local 169.254.169.254");

	const char *deny_net[] = { "203.0.113.0/24", NULL };
	CHECK1(set_policy(&a, NULL, deny_net), "deny_out 203.0.113.0/24");
	CHECK(blocked(s1, "203.0.113.10", 8080), "denied by CIDR");
	CHECK(reaches(s2, "203.0.113.10", 8080), "S2's policy is its own");
	drain(web);
	const char *allow_one[] = { "203.0.113.10", "169.254.0.0/16", NULL },
		   *deny_all[] = { "0.0.0.0/0", "::/0", NULL };
	CHECK1(set_policy(&a, allow_one, deny_all), "allow_out one host over deny_out everything");
	CHECK(reaches(s1, "203.0.113.10", 8080), "allowed host reached");
	drain(web);
	CHECK(blocked(s1, "2001:db8::10", 8080), "the rest denied (IPv6)");
	CHECK(blocked(s1, "169.254.169.254", 80), "link-local denied even when allowed");
	CHECK(blocked(s1, addr4(a.addrs.gw4), 7070), "host denied even when everything else is");
	CHECK1(set_policy(&a, NULL, NULL), "policy cleared");
	CHECK(reaches(s1, "2001:db8::10", 8080), "reached again");
	drain(web6);
	drain(meta);
	drain(api);
	drain(other);

	/* A connection left open: its conntrack entry would outlive S1 by
	 * days. */
	struct sockaddr_storage ss;
	socklen_t sl = sockaddr_of("203.0.113.10", 8080, &ss);
	_cleanup_close_ int open_conn = socket_in(s1, AF_INET, SOCK_STREAM);
	CHECK1(connect(open_conn, (struct sockaddr *)&ss, sl) == 0, "a connection from S1 kept open");
	CHECK(conntrack_has(addr4(a.addrs.sb4)), "S1 has conntrack entries");
	struct cove_err e = { 0 };
	CHECK1(net_sandbox_detach("sb_aaaaaaaaaaaa", true, &e) == 0, "detach S1");
	CHECK(!conntrack_has(addr4(a.addrs.sb4)) && conntrack_has(addr4(b.addrs.sb4)),
	      "S1's conntrack entries gone, S2's kept");
	CHECK(!link_exists(home, "cv-aaaaaaaaaaaa") && !link_exists(s1, "eth0"), "both veth ends gone");
	CHECK(!table_has("aaaaaaaaaaaa") && table_has("sb_bbbbbbbbbbbb"), "S1's chain and element gone, S2's kept");
	CHECK1(net_sandbox_detach("sb_aaaaaaaaaaaa", true, &e) == 0, "detach again is no error");
	net_pool_release(&pool, a.addrs.slot);
}

/* The namespace goes first (its last fd closed), then detach without
 * deleting the link: the kernel removes the pair with the namespace. */
static void test_detach_with_namespace(void)
{
	struct net_sandbox d;
	int ns = netns_new();
	CHECK1(attach("sb_eeeeeeeeeeee", ns, &d), "attach S4");
	close(ns);
	struct cove_err e = { 0 };
	CHECK1(net_sandbox_detach("sb_eeeeeeeeeeee", false, &e) == 0, "detach S4, keeping the link");
	bool gone = false;
	for (int i = 0; i < 100 && !(gone = !link_exists(home, "cv-eeeeeeeeeeee")); i++)
		usleep(20 * 1000);
	CHECK(gone && !table_has("eeeeeeeeeeee"), "the pair went with the namespace, the rules with detach");
	net_pool_release(&pool, d.addrs.slot);
}

/* A coved with a few hundred sandboxes holds more than FD_SETSIZE fds,
 * and libnftables waits with select(), which aborts on a larger one: with
 * every fd below 1100 taken, commands still run (their sockets live in a
 * table of their own). */
static void test_many_fds(void)
{
	enum { FILL = 1100 };
	static int fds[FILL];
	int n = 0, fd = -1;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < FILL + 16 && rl.rlim_max >= FILL + 16) {
		rl.rlim_cur = FILL + 16; /* as coved raises its own */
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	while (n < FILL && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0 && fd < FILL)
		fds[n++] = fd;
	if (fd >= FILL)
		close(fd);
	CHECK1(n > 1024 - 3 && fcntl(1023, F_GETFD) >= 0, "every fd below %d taken (%d opened)", FILL, n);
	struct cove_err e = { 0 };
	CHECK(net_init(&pool, NULL, &e) == 0, "the table made with fd 1023 taken: %s", e.msg);
	CHECK(table_has("sandboxes"), "and listed");
	CHECK(net_fini(&e) == 0 && !table_has("cove"), "and removed: %s", e.msg);
	while (n > 0)
		close(fds[--n]);
}

static void test_reconcile(int inet_ns, int s2, int s3)
{
	struct net_sandbox c;
	CHECK1(attach("sb_cccccccccccc", s3, &c), "attach S3");
	_cleanup_close_ int h = netlink_open(-1);
	/* A stale veth with no rules, as a crash between the two could leave. */
	CHECK1(netlink_veth_create(h, "cv-dddddddddddd", "peer0", -1) == 0, "a stray veth of ours");
	CHECK1(netlink_veth_create(h, "cvx-notours", "peer1", -1) == 0, "a veth not of ours");
	const char *live[] = { "sb_bbbbbbbbbbbb" };
	struct cove_err e = { 0 };
	CHECK1(net_reconcile(live, 1, &e) == 0, "reconcile with S2 live %s", e.msg);
	CHECK(!link_exists(home, "cv-cccccccccccc") && !link_exists(home, "cv-dddddddddddd"), "dead veths removed");
	CHECK(link_exists(home, "cvx-notours") && link_exists(home, "cv-bbbbbbbbbbbb"), "others kept");
	CHECK(!table_has("cccccccccccc") && table_has("sb_bbbbbbbbbbbb"), "dead chain removed, live kept");
	_cleanup_close_ int web = listen_in(inet_ns, "203.0.113.10", 8081);
	CHECK(reaches(s2, "203.0.113.10", 8081), "S2 still reaches the internet");
	CHECK1(net_reconcile(NULL, 0, &e) == 0, "reconcile with none live");
	CHECK(!link_exists(home, "cv-bbbbbbbbbbbb") && !table_has("sb_"), "nothing of ours left");
	CHECK1(net_fini(&e) == 0 && !table_has("cove"), "table removed");
	(void)netlink_link_del(h, "cvx-notours");
}

int main(void)
{
	if (geteuid() != 0) {
		SKIP("needs root");
		return tap_done();
	}
	int host_fwd = read_forward("/proc/sys/net/ipv4/ip_forward");
	_cleanup_close_ int real = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (unshare(CLONE_NEWNET) < 0) {
		printf("# unshare: %s\n", strerror(errno));
		return 1;
	}
	home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	/* A new namespace copies the host's IPv4 forwarding switch (on, where
	 * a coved with egress sandboxes runs): H starts with it off. */
	_cleanup_close_ int fwd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);
	CHECK1(fwd >= 0 && write(fwd, "0", 1) == 1, "IPv4 forwarding off in H to begin with");
	int inet_ns = netns_new(), s1 = netns_new(), s2 = netns_new(), s3 = netns_new();
	CHECK1(inet_ns >= 0 && s1 >= 0 && s2 >= 0 && s3 >= 0 && forward_off("/proc/sys/net/ipv4/ip_forward") &&
		       forward_off("/proc/sys/net/ipv6/conf/all/forwarding"),
	       "namespaces, H's forwarding off to begin with");
	CHECK1(make_internet(inet_ns), "H's uplink to I");
	CHECK1(uplink_ready(inet_ns), "H reaches I over IPv4 and IPv6");

	struct net_forwarding fw;
	struct cove_err e = { 0 };
	CHECK1(net_forwarding_enable(true, &fw, &e) == 0 && fw.guard4 && fw.guard6, "forwarding on in H");
	struct net_host_routes routes;
	CHECK1(net_host_routes_read(&routes, &e) == 0 && routes.v6_default, "H's routes");
	struct cove_err e2 = { 0 };
	CHECK(net_pool_init(&pool, "198.51.100.0/25", &routes, (uint8_t[5]){ 1 }, &e2) < 0 &&
		      strstr(e2.msg, "198.51.100.0/24"),
	      "a pool over H's uplink refused: %s", e2.msg);
	uint8_t ula[5];
	net_pool_ula_id(ula);
	CHECK1(net_pool_init(&pool, NULL, &routes, ula, &e) == 0 && pool.has_v6, "default pool, with IPv6");
	CHECK1(net_init(&pool, &fw, &e) == 0, "table made: %s", e.msg);
	CHECK1(net_init(&pool, &fw, &e) == 0, "and again (a restart): %s", e.msg);

	test_egress(inet_ns, s1, s2);
	test_detach_with_namespace();
	test_reconcile(inet_ns, s2, s3);
	test_many_fds();

	net_host_routes_free(&routes);
	net_pool_free(&pool);
	CHECK1(ns_enter(real) == 0 && read_forward("/proc/sys/net/ipv4/ip_forward") == host_fwd,
	       "the real host's ip_forward untouched");
	return tap_done();
}

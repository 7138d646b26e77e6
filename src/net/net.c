#include "net/net.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "common/cleanup.h"
#include "common/parse.h"
#include "sys/netlink.h"
#include "sys/nftables.h"

#define TABLE "inet cove"

int net_ifname(const char *id, char buf[16])
{
	if (!sandbox_id_valid(id))
		return -EINVAL;
	snprintf(buf, 16, "%s%s", NET_IFPREFIX, id + 3);
	return 0;
}

static void put_addr(FILE *f, int family, const uint8_t *a)
{
	char s[INET6_ADDRSTRLEN];
	fputs(inet_ntop(family, a, s, sizeof(s)) ? s : "::", f);
}

static void put_cidr(FILE *f, const struct cidr *c)
{
	char s[64];
	cidr_format(c, s, sizeof(s));
	fputs(s, f);
}

/* The text of a script built on an open_memstream: NULL on failure. */
struct script {
	FILE *f;
	char *text;
	size_t len;
};

static FILE *script_open(struct script *s)
{
	*s = (struct script){ 0 };
	s->f = open_memstream(&s->text, &s->len);
	return s->f;
}

static int script_run(struct script *s, struct cove_err *err)
{
	bool ok = s->f && !ferror(s->f);
	if (s->f)
		fclose(s->f);
	int r = ok ? nftables_run(s->text, err) : err_set(err, COVE_EINTERNAL, "out of memory");
	free(s->text);
	return r;
}

static void common_rules(FILE *f, const struct net_pool *pool);

static void base_rules(FILE *f, const struct net_pool *pool, const struct net_forwarding *fw)
{
	fprintf(f, "add table " TABLE "\n");
	fprintf(f, "add map " TABLE " sandboxes { type ifname : verdict; }\n");
	fprintf(f, "add map " TABLE " sandboxes_nat { type ifname : verdict; }\n");
	fprintf(f, "add chain " TABLE " input { type filter hook input priority filter; policy accept; }\n");
	fprintf(f, "add chain " TABLE " forward { type filter hook forward priority filter; policy accept; }\n");
	fprintf(f, "add chain " TABLE " post { type nat hook postrouting priority srcnat; policy accept; }\n");
	fprintf(f, "add chain " TABLE " pre { type nat hook prerouting priority dstnat; policy accept; }\n");
	fprintf(f, "flush chain " TABLE " input\nflush chain " TABLE " forward\nflush chain " TABLE " post\n");
	fprintf(f, "flush chain " TABLE " pre\n");
	/* DNS to the resolver address every sandbox names goes to its own
	 * gateway (redirect: the incoming veth's address), where its
	 * forwarder listens: so a sandbox's /etc/resolv.conf is the same in
	 * all of them, and a restored or forked root's stays right. */
	struct net_addrs r;
	net_pool_addrs(pool, NET_RESOLVER_SLOT, &r);
	fprintf(f, "add rule " TABLE " pre iifname \"" NET_IFPREFIX "*\" ip daddr ");
	put_addr(f, AF_INET, r.gw4);
	fprintf(f, " meta l4proto { tcp, udp } th dport 53 redirect\n");
	/* The egress proxies' DNAT in a base chain of its own: coveds share
	 * the table, and one of a version before it (a rolling upgrade, or
	 * tests of two trees on one host) resets the chain pre as it knows it. */
	fprintf(f, "add chain " TABLE " proxy { type nat hook prerouting priority dstnat; policy accept; }\n");
	fprintf(f, "flush chain " TABLE " proxy\n");
	fprintf(f, "add rule " TABLE " proxy iifname \"" NET_IFPREFIX "*\" iifname vmap @sandboxes_nat\n");
	common_rules(f, pool);
	/* A veth without a chain (half made, or half removed) gets nothing. */
	fprintf(f, "add rule " TABLE " input iifname \"" NET_IFPREFIX "*\" iifname vmap @sandboxes\n");
	fprintf(f, "add rule " TABLE " input iifname \"" NET_IFPREFIX "*\" drop\n");
	fprintf(f, "add rule " TABLE " forward iifname \"" NET_IFPREFIX "*\" iifname vmap @sandboxes\n");
	fprintf(f, "add rule " TABLE " forward iifname \"" NET_IFPREFIX "*\" drop\n");
	/* Into a sandbox only what answers it: nothing from outside, and no
	 * sandbox to another. */
	fprintf(f, "add rule " TABLE " forward oifname \"" NET_IFPREFIX "*\" ct state established,related accept\n");
	fprintf(f, "add rule " TABLE " forward oifname \"" NET_IFPREFIX "*\" drop\n");
	if (fw && fw->guard4)
		fprintf(f, "add rule " TABLE " forward meta nfproto ipv4 drop\n");
	if (fw && fw->guard6)
		fprintf(f, "add rule " TABLE " forward meta nfproto ipv6 drop\n");
	/* Masquerade whatever leaves the pool, by whichever route: the
	 * default route's device would go stale when the uplink changes. */
	fprintf(f, "add rule " TABLE " post ip saddr ");
	put_cidr(f, &pool->v4);
	fprintf(f, " ip daddr != ");
	put_cidr(f, &pool->v4);
	fprintf(f, " masquerade\n");
	if (pool->has_v6) {
		fprintf(f, "add rule " TABLE " post ip6 saddr ");
		put_cidr(f, &pool->v6);
		fprintf(f, " ip6 daddr != ");
		put_cidr(f, &pool->v6);
		fprintf(f, " masquerade\n");
	}
}

int net_init(const struct net_pool *pool, const struct net_forwarding *fw, struct cove_err *err)
{
	struct script s;
	if (script_open(&s))
		base_rules(s.f, pool, fw);
	return script_run(&s, err);
}

int net_fini(struct cove_err *err)
{
	struct cove_err e = { 0 };
	if (nftables_run("delete table " TABLE "\n", &e) < 0 && !strstr(e.msg, "No such file"))
		return err_set(err, e.code, "%s", e.msg);
	return 0;
}

/* One rule per CIDR: an anonymous set refuses overlapping intervals, and a
 * user's list may well overlap. */
static void list_rules(FILE *f, const char *chain, const struct policy_list *l, const char *verdict)
{
	for (size_t i = 0; l && i < l->n_cidrs; i++) {
		const struct cidr *c = &l->cidrs[i];
		fprintf(f, "add rule " TABLE " %s ", chain);
		if (c->len == 0) {
			fprintf(f, "meta nfproto %s %s\n", c->family == AF_INET ? "ipv4" : "ipv6", verdict);
			continue;
		}
		fprintf(f, "%s daddr ", c->family == AF_INET ? "ip" : "ip6");
		put_cidr(f, c);
		fprintf(f, " %s\n", verdict);
	}
}

/* The checks every sandbox's chain starts with, in a chain of their own so
 * that a sandbox's start adds only what is its own. Order is the argument:
 * what the host accepts (replies to the host's own connections, NDP, DNS
 * to the sandbox's own gateway), then every other host address; then the
 * always-denied. A packet that passes returns to the sandbox's chain. */
static void common_rules(FILE *f, const struct net_pool *pool)
{
	const char *c = "add rule " TABLE " sandbox_common";
	fprintf(f, "add chain " TABLE " sandbox_common\nflush chain " TABLE " sandbox_common\n");
	fprintf(f, "%s ct state established,related fib daddr type local accept\n", c);
	fprintf(f, "%s icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept\n", c);
	/* "fib daddr . iif": local on this very veth, i.e. its gateway; not
	 * another sandbox's gateway, not any other address of the host. */
	fprintf(f, "%s fib daddr . iif type local meta l4proto { tcp, udp } th dport 53 accept\n", c);
	/* What sb_X_nat sent to the sandbox's egress proxy on its gateway:
	 * only connections made to ports 80 and 443 and changed by that
	 * DNAT, not the proxy's port dialed straight. */
	fprintf(f,
		"%s fib daddr . iif type local meta l4proto tcp ct status dnat ct original proto-dst { 80, 443 } "
		"accept\n",
		c);
	fprintf(f, "%s fib daddr type { local, broadcast, multicast, anycast } drop\n", c);
	fprintf(f, "%s ip daddr { 169.254.0.0/16, ", c);
	put_cidr(f, &pool->v4);
	fprintf(f, ", 224.0.0.0/4, 255.255.255.255 } drop\n");
	fprintf(f, "%s ip6 daddr { fe80::/10, ff00::/8", c);
	if (pool->has_v6) {
		fprintf(f, ", ");
		put_cidr(f, &pool->v6);
	}
	fprintf(f, " } drop\n");
}

/* The conntrack mark of the sandbox id's flows, so that its entries can go
 * with it (an established TCP entry would otherwise stay for five days).
 * From the ID, not the slot: reconcile knows only the IDs of leftovers.
 * The top bit set; two sandboxes sharing a mark (about one pair in 2^31)
 * would only lose each other's entries at a delete. */
static uint32_t ct_mark(const char *id)
{
	uint32_t h = 2166136261u;
	for (const char *c = id; *c; c++)
		h = (h ^ (uint8_t)*c) * 16777619u;
	return h | 0x80000000u;
}

/* The chain sb_X_nat and the map elements of the sandbox (adding an
 * element that is there already, the same, is no error: a restart's
 * policy call makes sure of them). */
static void nat_rules(FILE *f, const struct net_sandbox *sb)
{
	char ifname[16];
	(void)net_ifname(sb->id, ifname);
	fprintf(f, "add chain " TABLE " %s_nat\nflush chain " TABLE " %s_nat\n", sb->id, sb->id);
	if (sb->proxy4) {
		fprintf(f, "add rule " TABLE " %s_nat meta nfproto ipv4 tcp dport { 80, 443 } dnat ip to ", sb->id);
		put_addr(f, AF_INET, sb->addrs.gw4);
		fprintf(f, ":%u\n", sb->proxy4);
	}
	if (sb->proxy6 && sb->addrs.has_v6) {
		fprintf(f, "add rule " TABLE " %s_nat meta nfproto ipv6 tcp dport { 80, 443 } dnat ip6 to [", sb->id);
		put_addr(f, AF_INET6, sb->addrs.gw6);
		fprintf(f, "]:%u\n", sb->proxy6);
	}
	fprintf(f, "add element " TABLE " sandboxes { \"%s\" : jump %s }\n", ifname, sb->id);
	fprintf(f, "add element " TABLE " sandboxes_nat { \"%s\" : jump %s_nat }\n", ifname, sb->id);
}

/* The chain sb_X's rules, replacing what it had: spoofed sources, the
 * flow's mark, then the common checks, then the user's lists. */
static void sandbox_rules(FILE *f, const struct net_sandbox *sb)
{
	const char *chain = sb->id;
	const struct net_addrs *a = &sb->addrs;
	fprintf(f, "add chain " TABLE " %s\nflush chain " TABLE " %s\n", chain, chain);
	fprintf(f, "add rule " TABLE " %s ip saddr != ", chain);
	put_addr(f, AF_INET, a->sb4);
	fprintf(f, " drop\n");
	fprintf(f, "add rule " TABLE " %s ip6 saddr != { fe80::/10", chain);
	if (a->has_v6) {
		fprintf(f, ", ");
		put_addr(f, AF_INET6, a->sb6);
	}
	fprintf(f, " } drop\n");
	fprintf(f, "add rule " TABLE " %s ct mark set 0x%08x\n", chain, ct_mark(sb->id));
	/* What sb_X_nat sent to the sandbox's egress proxy on its gateway:
	 * only connections made to ports 80 and 443 and changed by that DNAT,
	 * not the proxy's port dialed straight. Here, not in sandbox_common,
	 * which a coved of an earlier version resets without it. */
	fprintf(f,
		"add rule " TABLE " %s fib daddr . iif type local meta l4proto tcp ct status dnat "
		"ct original proto-dst { 80, 443 } accept\n",
		chain);
	fprintf(f, "add rule " TABLE " %s jump sandbox_common\n", chain);
	list_rules(f, chain, sb->allow, "accept");
	list_rules(f, chain, sb->deny, "drop");
	fprintf(f, "add rule " TABLE " %s accept\n", chain);
	nat_rules(f, sb);
}

int net_sandbox_policy(const struct net_sandbox *sb, struct cove_err *err)
{
	if (!sandbox_id_valid(sb->id))
		return err_set(err, COVE_EINVAL, "not a sandbox ID: '%s'", sb->id);
	struct script s;
	if (script_open(&s))
		sandbox_rules(s.f, sb);
	return script_run(&s, err);
}

/* fe80::N. Each veth end gets a fixed link-local address (the host side
 * ::1, the sandbox ::2) instead of the kernel's, which would first go
 * through duplicate address detection for a second or more; neighbor
 * discovery without any link-local address proved unreliable. */
static const uint8_t *link_local(uint8_t n)
{
	static uint8_t a[2][16] = { { 0xfe, 0x80, [15] = 1 }, { 0xfe, 0x80, [15] = 2 } };
	return a[n - 1];
}

/* The host side: gateway addresses, up. */
static int host_side(int nl, const char *ifname, const struct net_addrs *a, struct cove_err *err)
{
	int idx = netlink_link_index(nl, ifname);
	int r = idx < 0 ? idx : netlink_addr_add(nl, idx, AF_INET, a->gw4, 30);
	if (r == 0 && a->has_v6)
		r = netlink_addr_add(nl, idx, AF_INET6, a->gw6, 126);
	if (r == 0 && a->has_v6)
		r = netlink_addr_add(nl, idx, AF_INET6, link_local(1), 64);
	if (r == 0)
		r = netlink_link_no_link_local(nl, idx);
	if (r == 0)
		r = netlink_link_up(nl, idx);
	return r < 0 ? err_sys(err, -r, "set up '%s'", ifname) : 0;
}

/* Inside: loopback and eth0 up, addresses, default routes via the host. */
static int sandbox_side(int nl, const struct net_addrs *a, struct cove_err *err)
{
	int lo = netlink_link_index(nl, "lo");
	int idx = netlink_link_index(nl, "eth0");
	int r = lo < 0 ? lo : idx < 0 ? idx : netlink_link_up(nl, lo);
	if (r == 0)
		r = netlink_addr_add(nl, idx, AF_INET, a->sb4, 30);
	if (r == 0 && a->has_v6)
		r = netlink_addr_add(nl, idx, AF_INET6, a->sb6, 126);
	if (r == 0 && a->has_v6)
		r = netlink_addr_add(nl, idx, AF_INET6, link_local(2), 64);
	if (r == 0)
		r = netlink_link_no_link_local(nl, idx);
	if (r == 0)
		r = netlink_link_up(nl, idx);
	if (r == 0)
		r = netlink_route_default(nl, AF_INET, a->gw4, idx);
	if (r == 0 && a->has_v6)
		r = netlink_route_default(nl, AF_INET6, a->gw6, idx);
	return r < 0 ? err_sys(err, -r, "set up the sandbox's eth0") : 0;
}

static int veth_make(const char *ifname, const struct net_addrs *a, int netns_fd, struct cove_err *err)
{
	_cleanup_close_ int host = netlink_open(-1);
	if (host < 0)
		return err_sys(err, -host, "netlink socket");
	_cleanup_close_ int inside = netlink_open(netns_fd);
	if (inside < 0)
		return err_sys(err, -inside, "netlink socket in the sandbox's namespace");
	int r = netlink_veth_create(host, ifname, "eth0", netns_fd);
	if (r == -EEXIST) {
		/* A leftover of a crash with this very ID (reconcile missed it):
		 * it is ours by name. */
		(void)netlink_link_del(host, ifname);
		r = netlink_veth_create(host, ifname, "eth0", netns_fd);
	}
	if (r < 0)
		return err_sys(err, -r, "create veth '%s'", ifname);
	return host_side(host, ifname, a, err) < 0 || sandbox_side(inside, a, err) < 0 ? -1 : 0;
}

int net_sandbox_attach(const struct net_sandbox *sb, int netns_fd, struct cove_err *err)
{
	char ifname[16];
	if (net_ifname(sb->id, ifname) < 0)
		return err_set(err, COVE_EINVAL, "not a sandbox ID: '%s'", sb->id);
	struct script s;
	if (script_open(&s))
		sandbox_rules(s.f, sb);
	if (script_run(&s, err) < 0)
		return -1;
	return net_sandbox_link(sb, netns_fd, err);
}

int net_sandbox_link(const struct net_sandbox *sb, int netns_fd, struct cove_err *err)
{
	char ifname[16];
	if (net_ifname(sb->id, ifname) < 0)
		return err_set(err, COVE_EINVAL, "not a sandbox ID: '%s'", sb->id);
	if (veth_make(ifname, &sb->addrs, netns_fd, err) < 0) {
		(void)net_sandbox_detach(sb->id, true, NULL);
		return -1;
	}
	return 0;
}

/* The map elements, then the chains they jump to (a chain still
 * referenced cannot go), in one transaction; if that fails (something
 * already gone, or a table of a coved before sandboxes_nat), each alone,
 * so that one already gone does not keep the others. */
static int rules_remove(const char *id, const char *ifname, struct cove_err *err)
{
	char cmd[4][128];
	snprintf(cmd[0], sizeof(cmd[0]), "delete element " TABLE " sandboxes { \"%s\" }\n", ifname);
	snprintf(cmd[1], sizeof(cmd[1]), "delete element " TABLE " sandboxes_nat { \"%s\" }\n", ifname);
	snprintf(cmd[2], sizeof(cmd[2]), "delete chain " TABLE " %s\n", id);
	snprintf(cmd[3], sizeof(cmd[3]), "delete chain " TABLE " %s_nat\n", id);
	char all[sizeof(cmd)];
	snprintf(all, sizeof(all), "%s%s%s%s", cmd[0], cmd[1], cmd[2], cmd[3]);
	/* Its conntrack entries first: the chain that marks them is still
	 * there, and a flow that goes on after this flush is cut by the veth's
	 * removal anyway. */
	(void)netlink_conntrack_flush_mark(ct_mark(id));
	if (nftables_run(all, NULL) == 0)
		return 0;
	int r = 0;
	for (int i = 0; i < 4; i++) {
		struct cove_err e = { 0 };
		if (nftables_run(cmd[i], &e) < 0 && i >= 2 && !strstr(e.msg, "No such file") && r == 0)
			r = err_set(err, e.code, "remove the rules of %s: %s", id, e.msg);
	}
	return r;
}

int net_sandbox_detach(const char *id, bool delete_link, struct cove_err *err)
{
	char ifname[16];
	if (net_ifname(id, ifname) < 0)
		return err_set(err, COVE_EINVAL, "not a sandbox ID: '%s'", id);
	if (delete_link) {
		_cleanup_close_ int nl = netlink_open(-1);
		if (nl < 0)
			return err_sys(err, -nl, "netlink socket");
		int r = netlink_link_del(nl, ifname);
		if (r < 0 && r != -ENODEV)
			return err_sys(err, -r, "delete veth '%s'", ifname);
	}
	return rules_remove(id, ifname, err);
}

/* Whether addr is an address of this host (bind succeeds only then). */
static bool host_local(const struct sockaddr *sa)
{
	struct sockaddr_storage ss;
	socklen_t len = sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	memcpy(&ss, sa, len);
	((struct sockaddr_in *)&ss)->sin_port = 0; /* the same place in both */
	_cleanup_close_ int fd = socket(sa->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	return fd >= 0 && bind(fd, (struct sockaddr *)&ss, len) == 0;
}

static bool v4_denied(const struct net_pool *pool, const uint8_t a[4])
{
	static const struct cidr denied[] = {
		{ AF_INET, { 0 }, 8 },                   /* "this network", unspecified */
		{ AF_INET, { 127 }, 8 },                 /* loopback */
		{ AF_INET, { 169, 254 }, 16 },           /* link-local, cloud metadata */
		{ AF_INET, { 224 }, 4 },                 /* multicast */
		{ AF_INET, { 255, 255, 255, 255 }, 32 }, /* broadcast */
	};
	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++)
		if (cidr_contains(&denied[i], a))
			return true;
	return cidr_contains(&pool->v4, a);
}

bool net_addr_denied(const struct net_pool *pool, const struct sockaddr *sa)
{
	static const struct cidr denied6[] = {
		{ AF_INET6, { 0 }, 127 },         /* :: and ::1 */
		{ AF_INET6, { 0xfe, 0x80 }, 10 }, /* link-local */
		{ AF_INET6, { 0xff }, 8 },        /* multicast */
	};
	static const uint8_t mapped[12] = { [10] = 0xff, [11] = 0xff };
	if (sa->sa_family == AF_INET)
		return v4_denied(pool, (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr) || host_local(sa);
	if (sa->sa_family != AF_INET6)
		return true;
	const uint8_t *a = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
	if (memcmp(a, mapped, 12) == 0) {
		struct sockaddr_in v4 = { .sin_family = AF_INET };
		memcpy(&v4.sin_addr, a + 12, 4);
		return v4_denied(pool, a + 12) || host_local((struct sockaddr *)&v4);
	}
	for (size_t i = 0; i < sizeof(denied6) / sizeof(denied6[0]); i++)
		if (cidr_contains(&denied6[i], a))
			return true;
	return (pool->has_v6 && cidr_contains(&pool->v6, a)) || host_local(sa);
}

static bool is_live(const char *id, const char *const *live, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(live[i], id) == 0)
			return true;
	return false;
}

struct stale_links {
	const char *const *live;
	size_t n_live;
	char (*names)[16];
	size_t n, cap;
};

static int on_link(const char *name, int ifindex, void *data)
{
	struct stale_links *s = data;
	char id[16];
	(void)ifindex;
	if (strncmp(name, NET_IFPREFIX, strlen(NET_IFPREFIX)) != 0)
		return 0;
	snprintf(id, sizeof(id), "sb_%s", name + strlen(NET_IFPREFIX));
	if (!sandbox_id_valid(id) || is_live(id, s->live, s->n_live))
		return 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 16;
		void *n = realloc(s->names, cap * sizeof(*s->names));
		if (!n)
			return -ENOMEM;
		s->names = n;
		s->cap = cap;
	}
	snprintf(s->names[s->n++], 16, "%s", name);
	return 0;
}

/* Links are collected first and deleted after the dump: deleting during
 * it would change what the dump walks. */
static int reconcile_links(const char *const *live, size_t n_live, struct cove_err *err)
{
	_cleanup_close_ int nl = netlink_open(-1);
	if (nl < 0)
		return err_sys(err, -nl, "netlink socket");
	struct stale_links s = { .live = live, .n_live = n_live };
	int r = netlink_links(nl, on_link, &s);
	for (size_t i = 0; r == 0 && i < s.n; i++) {
		r = netlink_link_del(nl, s.names[i]);
		if (r == -ENODEV)
			r = 0;
	}
	free(s.names);
	return r < 0 ? err_sys(err, -r, "remove stale veths") : 0;
}

/* The sandbox chains of the table, from its JSON listing. */
static int reconcile_rules(const char *const *live, size_t n_live, struct cove_err *err)
{
	_cleanup_free_ char *json = NULL;
	struct cove_err e = { 0 };
	if (nftables_list_json("list table " TABLE "\n", &json, &e) < 0)
		return strstr(e.msg, "No such file") ? 0 : err_set(err, e.code, "%s", e.msg);
	json_error_t je;
	json_t *root = json_loads(json, 0, &je);
	json_t *items = json_object_get(root, "nftables");
	if (!json_is_array(items)) {
		json_decref(root);
		return err_set(err, COVE_EINTERNAL, "nftables: unexpected listing");
	}
	int r = 0;
	size_t i;
	json_t *it;
	json_array_foreach(items, i, it)
	{
		json_t *chain = json_object_get(it, "chain");
		const char *table = json_string_value(json_object_get(chain, "table"));
		const char *full = json_string_value(json_object_get(chain, "name"));
		char ifname[16], name[32];
		/* sb_X, or sb_X_nat (left alone by a crash of an older coved). */
		bool named = full && strncmp(full, "sb_", 3) == 0;
		snprintf(name, sizeof(name), "%.*s", named ? (int)strcspn(full + 3, "_") + 3 : 0, named ? full : "");
		if (!table || strcmp(table, "cove") != 0 || !full || net_ifname(name, ifname) < 0 ||
		    is_live(name, live, n_live))
			continue;
		if (rules_remove(name, ifname, err) < 0)
			r = -1;
	}
	json_decref(root);
	return r;
}

int net_reconcile(const char *const *live, size_t n_live, struct cove_err *err)
{
	if (reconcile_links(live, n_live, err) < 0)
		return -1;
	return reconcile_rules(live, n_live, err);
}

static int write_file(const char *path, const char *value)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return write(fd, value, strlen(value)) < 0 ? -errno : 0;
}

static int read_char(const char *path)
{
	char c = 0;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd >= 0 && read(fd, &c, 1) == 1 ? c : -1;
}

/* accept_ra 1 means "not when forwarding"; 2 means "even so". */
static void keep_router_advertisements(void)
{
	DIR *d = opendir("/proc/sys/net/ipv6/conf");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[512];
		if (e->d_name[0] == '.' || strcmp(e->d_name, "all") == 0)
			continue;
		snprintf(p, sizeof(p), "/proc/sys/net/ipv6/conf/%s/accept_ra", e->d_name);
		if (read_char(p) == '1')
			(void)write_file(p, "2");
	}
	if (d)
		closedir(d);
}

int net_forwarding_enable(bool v6, struct net_forwarding *ret, struct cove_err *err)
{
	static const char v4p[] = "/proc/sys/net/ipv4/ip_forward", v6p[] = "/proc/sys/net/ipv6/conf/all/forwarding";
	struct net_forwarding fw = { .guard4 = read_char(v4p) != '1', .guard6 = v6 && read_char(v6p) != '1' };
	int r = fw.guard4 ? write_file(v4p, "1") : 0;
	if (r < 0)
		return err_sys(err, -r, "turn on IPv4 forwarding");
	if (fw.guard6) {
		keep_router_advertisements();
		r = write_file(v6p, "1");
		if (r < 0)
			return err_sys(err, -r, "turn on IPv6 forwarding");
	}
	*ret = fw;
	return 0;
}

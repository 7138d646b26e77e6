#include "net/pool.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "sys/netlink.h"

#define DEFAULT_POOLS 20 /* 10.200.0.0/16 to 10.219.0.0/16 */

struct route_read {
	struct net_host_routes *r;
	int family;
	size_t cap;
};

/* Whether ifindex is one of coved's veths. */
static bool ours(int ifindex)
{
	char name[IF_NAMESIZE];
	return ifindex > 0 && if_indextoname((unsigned)ifindex, name) &&
	       strncmp(name, NET_IFPREFIX, strlen(NET_IFPREFIX)) == 0;
}

static int on_route(const uint8_t *dst, int len, int oif, void *data)
{
	struct route_read *rr = data;
	if (!dst || len == 0) {
		if (rr->family == AF_INET6)
			rr->r->v6_default = true;
		return 0;
	}
	if (ours(oif))
		return 0;
	if (rr->r->n == rr->cap) {
		size_t cap = rr->cap ? rr->cap * 2 : 32;
		struct cidr *n = realloc(rr->r->routes, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		rr->r->routes = n;
		rr->cap = cap;
	}
	struct cidr *c = &rr->r->routes[rr->r->n++];
	*c = (struct cidr){ .family = rr->family, .len = (uint8_t)len };
	memcpy(c->addr, dst, rr->family == AF_INET ? 4 : 16);
	return 0;
}

int net_host_routes_read(struct net_host_routes *ret, struct cove_err *err)
{
	_cleanup_close_ int nl = netlink_open(-1);
	if (nl < 0)
		return err_sys(err, -nl, "netlink socket");
	struct net_host_routes r = { 0 };
	struct route_read rr = { .r = &r };
	static const int families[] = { AF_INET, AF_INET6 };
	for (size_t i = 0; i < ARRAY_SIZE(families); i++) {
		rr.family = families[i];
		int e = netlink_routes(nl, families[i], on_route, &rr);
		if (e < 0) {
			net_host_routes_free(&r);
			return err_sys(err, -e, "read the host's routes");
		}
	}
	*ret = r;
	return 0;
}

void net_host_routes_free(struct net_host_routes *r)
{
	free(r->routes);
	*r = (struct net_host_routes){ 0 };
}

/* The first host route that c overlaps, or NULL. */
static const struct cidr *clash(const struct cidr *c, const struct net_host_routes *host)
{
	for (size_t i = 0; host && i < host->n; i++)
		if (cidr_overlaps(c, &host->routes[i]))
			return &host->routes[i];
	return NULL;
}

static int pick_v4(struct cidr *ret, const char *subnet, const struct net_host_routes *host, struct cove_err *err)
{
	char a[64], b[64];
	if (subnet) {
		struct cidr c;
		struct cove_err e = { 0 };
		if (cidr_parse(subnet, &c, &e) < 0)
			return err_set(err, COVE_EINVAL, "--subnet: %s", e.msg);
		if (c.family != AF_INET || c.len < 8 || c.len > 30)
			return err_set(err, COVE_EINVAL, "--subnet '%s': an IPv4 CIDR of /8 to /30", subnet);
		const struct cidr *r = clash(&c, host);
		if (r) {
			cidr_format(r, a, sizeof(a));
			return err_set(err, COVE_EINVAL, "--subnet '%s' overlaps the host's route to %s", subnet, a);
		}
		*ret = c;
		return 0;
	}
	for (int i = 0; i < DEFAULT_POOLS; i++) {
		struct cidr c = { .family = AF_INET, .addr = { 10, (uint8_t)(200 + i), 0, 0 }, .len = 16 };
		if (!clash(&c, host)) {
			*ret = c;
			return 0;
		}
	}
	cidr_format(&(struct cidr){ .family = AF_INET, .addr = { 10, 200 }, .len = 16 }, a, sizeof(a));
	cidr_format(&(struct cidr){ .family = AF_INET, .addr = { 10, 200 + DEFAULT_POOLS - 1 }, .len = 16 }, b,
		    sizeof(b));
	return err_set(err, COVE_EINVAL, "every default pool (%s to %s) overlaps a host route: give --subnet", a, b);
}

/* fdXX:XXXX:XXXX:c0e::/64 for the ULA id; another subnet ID if that one
 * is routed already. */
static bool pick_v6(struct cidr *ret, const struct net_host_routes *host, const uint8_t ula_id[5])
{
	for (unsigned sub = 0x0c0e; sub < 0x0c0e + 16; sub++) {
		struct cidr c = { .family = AF_INET6, .len = 64, .addr = { 0xfd } };
		memcpy(c.addr + 1, ula_id, 5);
		c.addr[6] = (uint8_t)(sub >> 8);
		c.addr[7] = (uint8_t)sub;
		if (!clash(&c, host)) {
			*ret = c;
			return true;
		}
	}
	return false;
}

int net_pool_init(struct net_pool *p, const char *subnet, const struct net_host_routes *host, const uint8_t ula_id[5],
		  struct cove_err *err)
{
	struct net_pool n = { 0 };
	if (pick_v4(&n.v4, subnet, host, err) < 0)
		return -1;
	n.slots = 1U << (30 - n.v4.len);
	n.has_v6 = host && host->v6_default && pick_v6(&n.v6, host, ula_id);
	n.used = calloc((n.slots + 7) / 8, 1);
	if (!n.used)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	*p = n;
	return 0;
}

void net_pool_free(struct net_pool *p)
{
	free(p->used);
	p->used = NULL;
}

void net_pool_ula_id(uint8_t ret[5])
{
	/* FNV-1a over the machine ID: not secret, only not the ID itself. */
	char id[64] = "cove";
	_cleanup_close_ int fd = open("/etc/machine-id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		(void)!read(fd, id, sizeof(id) - 1);
	uint64_t h = 0xcbf29ce484222325ULL;
	for (const char *c = id; *c; c++)
		h = (h ^ (uint8_t)*c) * 0x100000001b3ULL;
	for (int i = 0; i < 5; i++)
		ret[i] = (uint8_t)(h >> (8 * i));
}

void net_pool_addrs(const struct net_pool *p, uint32_t slot, struct net_addrs *ret)
{
	uint32_t base;
	memcpy(&base, p->v4.addr, 4);
	base = ntohl(base) + slot * 4;
	*ret = (struct net_addrs){ .slot = slot, .has_v6 = p->has_v6 };
	uint32_t gw = htonl(base + 1), sb = htonl(base + 2);
	memcpy(ret->gw4, &gw, 4);
	memcpy(ret->sb4, &sb, 4);
	if (p->has_v6) {
		/* The slot in the last 32 bits: ...:0:0:SLOT*4+1 and +2. */
		memcpy(ret->gw6, p->v6.addr, 16);
		uint32_t g6 = htonl(slot * 4 + 1), s6 = htonl(slot * 4 + 2);
		memcpy(ret->sb6, p->v6.addr, 16);
		memcpy(ret->gw6 + 12, &g6, 4);
		memcpy(ret->sb6 + 12, &s6, 4);
	}
}

static bool slot_used(const struct net_pool *p, uint32_t s)
{
	return p->used[s / 8] & (1U << (s % 8));
}

int net_pool_take(struct net_pool *p, uint32_t slot, struct net_addrs *ret)
{
	if (slot >= p->slots)
		return -ERANGE;
	if (slot_used(p, slot))
		return -EEXIST;
	p->used[slot / 8] |= (uint8_t)(1U << (slot % 8));
	net_pool_addrs(p, slot, ret);
	return 0;
}

int net_pool_alloc(struct net_pool *p, struct net_addrs *ret)
{
	/* Next fit: a slot just released is the last to come back, so a new
	 * sandbox does not get an address that conntrack or a peer still
	 * associates with the one before. */
	for (uint32_t i = 0; i < p->slots; i++) {
		uint32_t s = (p->next + i) % p->slots;
		if (!slot_used(p, s)) {
			p->next = (s + 1) % p->slots;
			return net_pool_take(p, s, ret);
		}
	}
	return -ENOSPC;
}

void net_pool_release(struct net_pool *p, uint32_t slot)
{
	if (slot < p->slots)
		p->used[slot / 8] &= (uint8_t) ~(1U << (slot % 8));
}

/* The address pool of coved's sandboxes: one IPv4 CIDR (coved --subnet)
 * cut into /30s, one per sandbox: .1 the host side (the gateway, where
 * coved's resolver listens), .2 the sandbox. Where the host has IPv6, a
 * ULA /64 beside it, a /126 per sandbox at the same slot.
 *
 * The pool only hands out numbers; it keeps no state on disk. After a
 * restart coved takes back the slots of the sandboxes it still has. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "net/policy.h"

/* The host-side veth of a sandbox is NET_IFPREFIX and the 12 characters
 * of its ID after "sb_" (15 bytes, IFNAMSIZ less the NUL). */
#define NET_IFPREFIX "cv-"

#define NET_POOL_DEFAULTS "10.200.0.0/16, 10.201.0.0/16, ..., 10.219.0.0/16"

struct net_pool {
	struct cidr v4;
	bool has_v6;
	struct cidr v6; /* a /64 */
	uint32_t slots; /* number of /30s in v4 */
	uint32_t next;  /* where the search for a free slot starts */
	uint8_t *used;  /* bitmap of slots */
};

struct net_addrs {
	uint32_t slot;
	uint8_t gw4[4], sb4[4]; /* prefix length 30 */
	bool has_v6;
	uint8_t gw6[16], sb6[16]; /* prefix length 126 */
};

/* What the host routes: its non-default routes, and whether it has a
 * default IPv6 route (IPv6 egress is offered only then). */
struct net_host_routes {
	struct cidr *routes;
	size_t n;
	bool v6_default;
};

/* The routes of the caller's network namespace, leaving out those through
 * coved's own veths (ifnames starting with NET_IFPREFIX): they are
 * sandboxes of an earlier run, not the host's networks. 0 or -1, err set. */
int net_host_routes_read(struct net_host_routes *ret, struct cove_err *err);
void net_host_routes_free(struct net_host_routes *r);

/* Sets up p from subnet ("A.B.C.D/LEN", LEN 8 to 30), or with subnet NULL
 * the first of NET_POOL_DEFAULTS that overlaps no host route. A subnet that
 * overlaps a host route is refused (COVE_EINVAL), naming the route.
 * ula_id: the 40 bits of the ULA prefix (RFC 4193), stable per host. */
int net_pool_init(struct net_pool *p, const char *subnet, const struct net_host_routes *host, const uint8_t ula_id[5],
		  struct cove_err *err);
void net_pool_free(struct net_pool *p);
/* The ULA global ID of this host, derived from /etc/machine-id (hashed, so
 * a sandbox does not learn the machine ID from its address). */
void net_pool_ula_id(uint8_t ret[5]);

/* A free slot's addresses into *ret, the slot marked used. -ENOSPC when
 * the pool is full. */
int net_pool_alloc(struct net_pool *p, struct net_addrs *ret);
/* Marks slot used (a sandbox kept over a restart) and fills *ret.
 * -ERANGE outside the pool, -EEXIST if taken. */
int net_pool_take(struct net_pool *p, uint32_t slot, struct net_addrs *ret);
void net_pool_release(struct net_pool *p, uint32_t slot);
/* The addresses of slot, used or not. */
void net_pool_addrs(const struct net_pool *p, uint32_t slot, struct net_addrs *ret);

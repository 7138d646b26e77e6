/* rtnetlink on a raw NETLINK_ROUTE socket: the few link, address and route
 * operations a sandbox's veth pair needs, each one request and its ack.
 * Small and direct on purpose (no libmnl): the messages are fixed and few.
 * Every function returns 0 or -errno (the kernel's, from its ack). */
#pragma once
#include <stdint.h>

/* A NETLINK_ROUTE socket in the network namespace netns_fd (-1: the
 * caller's). The socket stays bound to that namespace for its life, so the
 * caller never runs in the sandbox's namespace itself: the thread enters it
 * only for socket(2) and returns at once. fd or -errno. */
int netlink_open(int netns_fd);

/* A veth pair: name here, peer named peer_name in netns_fd (or here, -1). */
int netlink_veth_create(int nl, const char *name, const char *peer_name, int peer_netns_fd);
/* The ifindex of name in nl's namespace, or -ENODEV. */
int netlink_link_index(int nl, const char *name);
int netlink_link_up(int nl, int ifindex);
/* No IPv6 link-local address on ifindex (before it comes up): on a link
 * with addresses of coved's, a link-local one only sits through duplicate
 * address detection (a second and more), holding back neighbor discovery. */
int netlink_link_no_link_local(int nl, int ifindex);
/* Deletes the link (and a veth's peer with it). -ENODEV if there is none. */
int netlink_link_del(int nl, const char *name);
/* addr: 4 or 16 bytes by family. IPv6 addresses skip duplicate address
 * detection (the link is point-to-point, and DAD would hold the address
 * back for a second). */
int netlink_addr_add(int nl, int ifindex, int family, const uint8_t *addr, int prefix_len);
/* A default route via gw on ifindex. */
int netlink_route_default(int nl, int family, const uint8_t *gw, int ifindex);

/* Calls fn for each link of nl's namespace; fn returns 0 to go on. */
typedef int (*netlink_link_fn)(const char *name, int ifindex, void *data);
int netlink_links(int nl, netlink_link_fn fn, void *data);
/* Calls fn for each route of family (every table), with its destination
 * (dst NULL for a default route), the prefix length and the output ifindex
 * (0 if none). */
typedef int (*netlink_route_fn)(const uint8_t *dst, int prefix_len, int oif, void *data);
int netlink_routes(int nl, int family, netlink_route_fn fn, void *data);

/* Deletes every conntrack entry of the caller's namespace whose mark is
 * mark (NETLINK_NETFILTER). 0 also when there was none. */
int netlink_conntrack_flush_mark(uint32_t mark);

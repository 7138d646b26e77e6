#include "sys/netlink.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <arpa/inet.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"

/* One request: a header, a fixed struct, attributes. 1 KiB holds the
 * largest (a veth with its peer's nested attributes). */
struct req {
	union {
		struct nlmsghdr h;
		char buf[1024];
	};
	bool overflow;
};

static void *req_tail(struct req *r)
{
	return r->buf + NLMSG_ALIGN(r->h.nlmsg_len);
}

static void req_init(struct req *r, uint16_t type, uint16_t flags, const void *body, size_t len)
{
	memset(r, 0, sizeof(*r));
	r->h.nlmsg_len = NLMSG_LENGTH(len);
	r->h.nlmsg_type = type;
	r->h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	memcpy(NLMSG_DATA(&r->h), body, len);
}

static struct rtattr *attr_put(struct req *r, uint16_t type, const void *data, size_t len)
{
	size_t at = NLMSG_ALIGN(r->h.nlmsg_len);
	if (at + RTA_SPACE(len) > sizeof(r->buf)) {
		r->overflow = true;
		return NULL;
	}
	struct rtattr *a = req_tail(r);
	a->rta_type = type;
	a->rta_len = RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(a), data, len);
	r->h.nlmsg_len = at + RTA_ALIGN(a->rta_len);
	return a;
}

static void attr_str(struct req *r, uint16_t type, const char *s)
{
	attr_put(r, type, s, strlen(s) + 1);
}

static void attr_u32(struct req *r, uint16_t type, uint32_t v)
{
	attr_put(r, type, &v, sizeof(v));
}

/* A nested attribute: open with nest_begin, close with nest_end. */
static struct rtattr *nest_begin(struct req *r, uint16_t type)
{
	return attr_put(r, type, NULL, 0);
}

static void nest_end(struct req *r, struct rtattr *a)
{
	if (a)
		a->rta_len = (unsigned short)((char *)req_tail(r) - (char *)a);
}

static int open_proto(int netns_fd, int proto)
{
	_cleanup_close_ int back = -1;
	if (netns_fd >= 0) {
		back = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
		if (back < 0)
			return -errno;
		if (setns(netns_fd, CLONE_NEWNET) < 0)
			return -errno;
	}
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, proto);
	int saved = errno;
	/* Back before anything else: a failure here would leave this thread
	 * in the sandbox's namespace, which nothing may do. */
	if (back >= 0 && setns(back, CLONE_NEWNET) < 0)
		abort();
	if (fd < 0)
		return -saved;
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	int one = 1;
	(void)setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		saved = errno;
		close(fd);
		return -saved;
	}
	return fd;
}

int netlink_open(int netns_fd)
{
	return open_proto(netns_fd, NETLINK_ROUTE);
}

typedef int (*msg_fn)(const struct nlmsghdr *h, void *data);

/* Sends r and reads replies until its ack (or, for a dump, NLMSG_DONE),
 * handing each other message to fn. */
static int transact(int nl, struct req *r, msg_fn fn, void *data)
{
	static uint32_t seq; /* shared by threads: atomically */
	if (r->overflow)
		return -E2BIG;
	r->h.nlmsg_seq = __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED);
	if (send(nl, r->buf, r->h.nlmsg_len, 0) < 0)
		return -errno;
	char buf[16384] __attribute__((aligned(4)));
	int result = 0;
	for (;;) {
		ssize_t n = recv(nl, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		size_t len = (size_t)n;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
			if (h->nlmsg_seq != r->h.nlmsg_seq)
				continue;
			if (h->nlmsg_type == NLMSG_DONE)
				return result;
			if (h->nlmsg_type == NLMSG_ERROR) {
				const struct nlmsgerr *e = NLMSG_DATA(h);
				/* A dump ends with DONE; an error ends anything. */
				return e->error ? e->error : result;
			}
			if (fn && !result)
				result = fn(h, data);
		}
	}
}

int netlink_link_no_link_local(int nl, int ifindex)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC, .ifi_index = ifindex };
	struct req req;
	struct req *r = &req;
	req_init(r, RTM_NEWLINK, 0, &ifi, sizeof(ifi));
	struct rtattr *spec = nest_begin(r, IFLA_AF_SPEC);
	struct rtattr *in6 = nest_begin(r, AF_INET6);
	uint8_t mode = IN6_ADDR_GEN_MODE_NONE;
	attr_put(r, IFLA_INET6_ADDR_GEN_MODE, &mode, 1);
	nest_end(r, in6);
	nest_end(r, spec);
	return transact(nl, r, NULL, NULL);
}

int netlink_veth_create(int nl, const char *name, const char *peer_name, int peer_netns_fd)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	struct req r;
	req_init(&r, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, &ifi, sizeof(ifi));
	attr_str(&r, IFLA_IFNAME, name);
	struct rtattr *info = nest_begin(&r, IFLA_LINKINFO);
	attr_str(&r, IFLA_INFO_KIND, "veth");
	struct rtattr *idata = nest_begin(&r, IFLA_INFO_DATA);
	/* The peer is a struct ifinfomsg followed by its own attributes. */
	struct rtattr *peer = attr_put(&r, VETH_INFO_PEER, &ifi, sizeof(ifi));
	attr_str(&r, IFLA_IFNAME, peer_name);
	if (peer_netns_fd >= 0)
		attr_u32(&r, IFLA_NET_NS_FD, (uint32_t)peer_netns_fd);
	nest_end(&r, peer);
	nest_end(&r, idata);
	nest_end(&r, info);
	return transact(nl, &r, NULL, NULL);
}

static int got_index(const struct nlmsghdr *h, void *data)
{
	if (h->nlmsg_type == RTM_NEWLINK)
		*(int *)data = ((const struct ifinfomsg *)NLMSG_DATA(h))->ifi_index;
	return 0;
}

int netlink_link_index(int nl, const char *name)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	struct req r;
	req_init(&r, RTM_GETLINK, 0, &ifi, sizeof(ifi));
	attr_str(&r, IFLA_IFNAME, name);
	int index = 0;
	int ret = transact(nl, &r, got_index, &index);
	if (ret < 0)
		return ret;
	return index > 0 ? index : -ENODEV;
}

int netlink_link_up(int nl, int ifindex)
{
	struct ifinfomsg ifi = {
		.ifi_family = AF_UNSPEC, .ifi_index = ifindex, .ifi_flags = IFF_UP, .ifi_change = IFF_UP
	};
	struct req r;
	req_init(&r, RTM_NEWLINK, 0, &ifi, sizeof(ifi));
	return transact(nl, &r, NULL, NULL);
}

int netlink_link_del(int nl, const char *name)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	struct req r;
	req_init(&r, RTM_DELLINK, 0, &ifi, sizeof(ifi));
	attr_str(&r, IFLA_IFNAME, name);
	return transact(nl, &r, NULL, NULL);
}

int netlink_addr_add(int nl, int ifindex, int family, const uint8_t *addr, int prefix_len)
{
	struct ifaddrmsg ifa = { .ifa_family = (uint8_t)family,
				 .ifa_prefixlen = (uint8_t)prefix_len,
				 .ifa_flags = family == AF_INET6 ? IFA_F_NODAD : 0,
				 .ifa_scope = RT_SCOPE_UNIVERSE,
				 .ifa_index = (uint32_t)ifindex };
	size_t len = family == AF_INET ? 4 : 16;
	struct req r;
	req_init(&r, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, &ifa, sizeof(ifa));
	attr_put(&r, IFA_LOCAL, addr, len);
	attr_put(&r, IFA_ADDRESS, addr, len);
	if (family == AF_INET6)
		attr_u32(&r, IFA_FLAGS, IFA_F_NODAD);
	return transact(nl, &r, NULL, NULL);
}

int netlink_route_default(int nl, int family, const uint8_t *gw, int ifindex)
{
	struct rtmsg rt = { .rtm_family = (uint8_t)family,
			    .rtm_table = RT_TABLE_MAIN,
			    .rtm_protocol = RTPROT_STATIC,
			    .rtm_scope = RT_SCOPE_UNIVERSE,
			    .rtm_type = RTN_UNICAST };
	struct req r;
	req_init(&r, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, &rt, sizeof(rt));
	attr_put(&r, RTA_GATEWAY, gw, family == AF_INET ? 4 : 16);
	attr_u32(&r, RTA_OIF, (uint32_t)ifindex);
	return transact(nl, &r, NULL, NULL);
}

struct link_walk {
	netlink_link_fn fn;
	void *data;
};

static int on_link(const struct nlmsghdr *h, void *data)
{
	const struct link_walk *w = data;
	if (h->nlmsg_type != RTM_NEWLINK)
		return 0;
	const struct ifinfomsg *ifi = NLMSG_DATA(h);
	int len = (int)IFLA_PAYLOAD(h);
	for (const struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len))
		if (a->rta_type == IFLA_IFNAME && RTA_PAYLOAD(a) > 0 && RTA_PAYLOAD(a) <= IFNAMSIZ) {
			char name[IFNAMSIZ + 1] = { 0 };
			memcpy(name, RTA_DATA(a), RTA_PAYLOAD(a));
			return w->fn(name, ifi->ifi_index, w->data);
		}
	return 0;
}

int netlink_links(int nl, netlink_link_fn fn, void *data)
{
	struct ifinfomsg ifi = { .ifi_family = AF_UNSPEC };
	struct req r;
	req_init(&r, RTM_GETLINK, NLM_F_DUMP, &ifi, sizeof(ifi));
	struct link_walk w = { fn, data };
	return transact(nl, &r, on_link, &w);
}

struct route_walk {
	netlink_route_fn fn;
	void *data;
	int family;
};

static int on_route(const struct nlmsghdr *h, void *data)
{
	const struct route_walk *w = data;
	if (h->nlmsg_type != RTM_NEWROUTE)
		return 0;
	const struct rtmsg *rt = NLMSG_DATA(h);
	size_t want = w->family == AF_INET ? 4 : 16;
	if (rt->rtm_family != w->family)
		return 0;
	const uint8_t *dst = NULL;
	int oif = 0;
	int len = (int)RTM_PAYLOAD(h);
	for (const struct rtattr *a = RTM_RTA(rt); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
		if (a->rta_type == RTA_DST && RTA_PAYLOAD(a) == want)
			dst = RTA_DATA(a);
		else if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) == 4)
			memcpy(&oif, RTA_DATA(a), 4);
	}
	return w->fn(dst, rt->rtm_dst_len, oif, w->data);
}

int netlink_routes(int nl, int family, netlink_route_fn fn, void *data)
{
	struct rtmsg rt = { .rtm_family = (uint8_t)family };
	struct req r;
	req_init(&r, RTM_GETROUTE, NLM_F_DUMP, &rt, sizeof(rt));
	struct route_walk w = { fn, data, family };
	return transact(nl, &r, on_route, &w);
}

int netlink_conntrack_flush_mark(uint32_t mark)
{
	_cleanup_close_ int nl = open_proto(-1, NETLINK_NETFILTER);
	if (nl < 0)
		return nl;
	/* No tuple: a flush, of the entries whose mark matches (any family). */
	struct nfgenmsg g = { .nfgen_family = AF_UNSPEC, .version = NFNETLINK_V0 };
	struct req r;
	req_init(&r, (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE, 0, &g, sizeof(g));
	uint32_t be = htonl(mark), mask = 0xffffffff;
	attr_put(&r, CTA_MARK, &be, 4);
	attr_put(&r, CTA_MARK_MASK, &mask, 4);
	int ret = transact(nl, &r, NULL, NULL);
	return ret == -ENOENT ? 0 : ret; /* none to flush */
}

/* A sandbox's network (mode `egress`): a veth pair, addresses from the
 * pool, and its rules in coved's nftables table `inet cove`. Every call
 * acts on the network namespace of the calling thread ("the host"); the
 * sandbox's namespace is named by an fd (open("/proc/PID/ns/net") of its
 * init, as runtime_start reports it).
 *
 * The table, made by net_init:
 *
 *   map sandboxes  ifname "cv-X" : jump sb_X        one element per sandbox
 *   chain input    (hook input)   from a cv-*: its sb_X, then drop
 *   chain forward  (hook forward) from a cv-*: its sb_X, then drop;
 *                                 to a cv-*: replies only
 *   chain post     (nat)          pool sources out of the pool: masquerade
 *   chain pre      (nat)          from a cv-*, DNS to the resolver address
 *                                 (see NET_RESOLVER_SLOT): to its gateway
 *   chain proxy    (nat)          from a cv-*: its sb_X_nat (map
 *                                 sandboxes_nat)
 *   chain sb_X_nat per sandbox:   when its policy names a domain, TCP to
 *                  ports 80 and 443 to its egress proxy (egress.h) on its
 *                  gateway; empty otherwise
 *   chain sandbox_common          replies to the host; DNS to the sandbox's
 *                  own gateway; every other host address dropped (coved's
 *                  listeners among them); link-local, multicast and the pool
 *                  (other sandboxes) dropped; else back to the caller
 *   chain sb_X     per sandbox:   its own source addresses only, what
 *                  sb_X_nat sent to its proxy, then sandbox_common, then
 *                  allow_out accepts, deny_out drops, then accept.
 *
 * What a later version adds to the base chains goes in chains of its own
 * (proxy) or in the sandboxes' own chains (sb_X): coveds of two versions
 * may share the table for a while, each resetting the base chains it knows
 * at its start.
 *
 * A sandbox's rules are one nftables transaction, so they are all there or
 * none. Nothing of a sandbox lives outside the table and its veth, and
 * net_reconcile removes both for any sandbox not in a given list. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "common/error.h"
#include "net/policy.h"
#include "net/pool.h"

/* Which forwarding coved turned on (it was off): for that family the
 * forward chain drops all forwarded traffic that is not a sandbox's, so
 * the host still routes nothing else, as before. */
struct net_forwarding {
	bool guard4, guard6;
};

/* The slot whose gateway address is the resolver address: every
 * sandbox's /etc/resolv.conf names it, and the chain pre sends its DNS
 * packets to the sandbox's own gateway. Never handed out (the caller takes
 * it out of the pool). */
#define NET_RESOLVER_SLOT 0

/* Creates the table and its base chains, or resets the base chains of one
 * that exists (a restart), keeping every sandbox's chain. fw may be NULL
 * (no guard). */
int net_init(const struct net_pool *pool, const struct net_forwarding *fw, struct cove_err *err);
/* Removes the whole table (coved's last sandbox gone, or a test). */
int net_fini(struct cove_err *err);

/* Turns on IPv4 forwarding, and IPv6 forwarding if v6, in the caller's
 * namespace; *ret says which were off (for net_init). Forwarding is a
 * per-namespace switch, so on the host this changes the host: coved calls
 * it once, when the first egress sandbox starts, and leaves it on (other
 * software may rely on it by then). For IPv6 it first moves every
 * interface's accept_ra from 1 to 2, as forwarding would otherwise stop the
 * host from taking router advertisements. */
int net_forwarding_enable(bool v6, struct net_forwarding *ret, struct cove_err *err);

struct net_sandbox {
	const char *id; /* "sb_" and 12 characters */
	struct net_addrs addrs;
	const struct policy_list *allow, *deny; /* may be NULL: empty */
	/* The egress proxy's ports on the gateway addresses, where TCP to
	 * ports 80 and 443 goes; 0: not proxied (the lists judge by address). */
	uint16_t proxy4, proxy6;
};

/* Whether the egress proxy must never dial sa, whatever the lists say (the
 * sandbox's chain drops the same for its own packets): this host's own
 * addresses, loopback, unspecified, link-local, multicast and broadcast,
 * the pool (other sandboxes), IPv4-mapped forms of those. */
bool net_addr_denied(const struct net_pool *pool, const struct sockaddr *sa);

/* The host-side interface name of id into buf (IFNAMSIZ). -EINVAL for an
 * ID that is not a sandbox ID. */
int net_ifname(const char *id, char buf[16]);

/* Rules first (they name the veth, which need not exist yet), then the
 * veth pair: the host side with the gateway addresses, "eth0" in netns_fd
 * with the sandbox's addresses and default routes, and its loopback up. On
 * failure nothing is left. */
int net_sandbox_attach(const struct net_sandbox *sb, int netns_fd, struct cove_err *err);
/* net_sandbox_attach's second half, for a caller that made the rules
 * already (net_sandbox_policy: the same transaction) while the sandbox's
 * namespace was still being made: the veth pair. On failure the rules and
 * the pair are removed. */
int net_sandbox_link(const struct net_sandbox *sb, int netns_fd, struct cove_err *err);
/* Replaces the sandbox's policy in one transaction. Every packet is judged
 * by the policy in force, so a new policy holds for open connections too. */
int net_sandbox_policy(const struct net_sandbox *sb, struct cove_err *err);
/* Removes the rules, and with delete_link the veth pair. Idempotent: what
 * is gone already is no error.
 *
 * Deleting a network device waits in the kernel for RCU (16 ms measured on
 * a loaded 2-core VM). When the sandbox's namespace is going away anyway
 * (its last process killed, no fd of it held), pass false: the kernel
 * removes the pair with the namespace, off coved's path. Pass true when the
 * namespace lives on (a sandbox switched to `none`); net_reconcile catches
 * any pair that outlives its sandbox. */
int net_sandbox_detach(const char *id, bool delete_link, struct cove_err *err);

/* Removes the veth and the rules of every sandbox not in live (IDs). */
int net_reconcile(const char *const *live, size_t n_live, struct cove_err *err);

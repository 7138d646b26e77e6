/* A sandbox's egress proxy: where nftables sends its outgoing TCP to ports
 * 443 and 80 (net.h: the chain sb_X_nat, made when its policy names a
 * domain), so that domain rules hold for real and not only in DNS answers.
 *
 * For each connection it reads the first bytes (the TLS ClientHello's
 * server name on 443, the HTTP Host on 80: sniff.h), judges the name by
 * the sandbox's lists, resolves it itself through the host's resolvers
 * and dials it, never the address the sandbox chose: a ClientHello naming
 * an allowed host sent to a denied address reaches the allowed host, or
 * nothing. Every address it dials is judged too (the always-denied ones,
 * and the CIDR lists for a name no list names), as the proxy's connections
 * leave from the host, past the sandbox's nftables chain. A connection
 * that carries no name (no SNI, an HTTP/1.0 request without Host) is
 * judged and dialed by the address the sandbox chose. A refused connection
 * is closed, the reason logged at debug.
 *
 * One proxy per sandbox, listening on its gateway addresses only (port 0:
 * the kernel's choice, given to the rules), so a connection's listener
 * says whose it is; only the sandbox's own address may connect. It runs
 * on the caller's libevent loop and never blocks it: resolving is evdns,
 * connecting and relaying non-blocking, with back-pressure (relay.h). Its
 * memory is bounded: EGRESS_CONN_MAX connections, each at most SNIFF_MAX
 * bytes read ahead and RELAY_HIGH_WATER per direction.
 *
 * On port 80 the request read is sent as the connection's only one
 * (sniff_http_one_request), so a second request cannot name another host
 * to the server the first name chose. Known limit: inside TLS a client can
 * ask the same server for another of its names (domain fronting); a
 * server that hosts both an allowed and a denied name can serve the
 * denied one. */
#pragma once
#include <event2/dns.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/error.h"

#define EGRESS_CONN_MAX 256
#define EGRESS_HELLO_S 10   /* to send the first bytes with the name */
#define EGRESS_CONNECT_S 10 /* per address tried */

enum egress_verdict {
	EGRESS_DENY,       /* a deny_out name */
	EGRESS_ALLOW,      /* an allow_out name: only the always-denied addresses count */
	EGRESS_BY_ADDRESS, /* no list names it: its addresses are judged as the rules would */
};
typedef enum egress_verdict (*egress_name_fn)(void *data, const char *name);
/* Whether the proxy may dial addr; name_allowed: see EGRESS_ALLOW. */
typedef bool (*egress_addr_fn)(void *data, const struct sockaddr *addr, bool name_allowed);

struct egress_config {
	const char *id; /* the sandbox's, for logs */
	/* The gateway addresses to listen on (port ignored); n_listen 1 or 2. */
	struct sockaddr_storage listen[2];
	socklen_t listen_len[2];
	int n_listen;
	/* The sandbox's addresses: the only peers accepted. */
	uint8_t peer4[4];
	bool has_peer6;
	uint8_t peer6[16];
	struct evdns_base *dns; /* the host's resolvers (borrowed) */
	egress_name_fn judge_name;
	egress_addr_fn judge_addr;
	void *data;
};

struct egress_proxy;
/* Listening (IP_FREEBIND: the gateway addresses may not be on a link yet)
 * on base. NULL with err set. */
struct egress_proxy *egress_proxy_new(struct event_base *base, const struct egress_config *c, struct cove_err *err);
/* The port it listens on for family (AF_INET, AF_INET6), 0 if it does not. */
uint16_t egress_proxy_port(const struct egress_proxy *p, int family);
/* Closes the listeners and every connection. NULL-safe. */
void egress_proxy_free(struct egress_proxy *p);

/* coved's resolver for a sandbox: UDP and TCP on the sandbox's gateway
 * address (port 53), answering only names its policy allows (REFUSED for
 * the rest) and forwarding the others, over UDP, to the host's resolvers.
 * Driven by the caller's libevent loop; one forwarder per sandbox, so a
 * sandbox's queries and its policy never meet another's.
 *
 * Each forwarded query goes out from a fresh socket (a random source port)
 * with a random ID of ours, and only an answer from that resolver, with that
 * ID and to the same question, goes back: a sandbox cannot make the
 * forwarder take a spoofed answer for another query. Queries in flight and
 * TCP connections are bounded; a query past the bound gets SERVFAIL.
 *
 * A query that came over TCP is forwarded over UDP too: an answer the
 * resolver truncated (TC) reaches the client truncated. Enough for the
 * names a sandbox installs from; TCP upstream is left for later. */
#pragma once
#include <event2/event.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "common/error.h"
#include "net/dnsmsg.h"

#define DNS_INFLIGHT_MAX 64
#define DNS_TCP_MAX 16
#define DNS_TIMEOUT_MS 2000 /* per resolver tried */

typedef bool (*dns_allowed_fn)(void *data, const char *name);

struct dns_config {
	struct sockaddr_storage listen; /* the gateway, port 53 */
	socklen_t listen_len;
	struct sockaddr_storage upstream[DNS_RESOLVER_MAX];
	socklen_t upstream_len[DNS_RESOLVER_MAX];
	int n_upstream;
	dns_allowed_fn allowed; /* NULL: every name */
	void *data;
};

/* The nameservers of the resolv.conf at path (the host's: /etc/resolv.conf)
 * into c->upstream, port 53. -1 with err set if none. */
int dns_config_resolv_conf(struct dns_config *c, const char *path, struct cove_err *err);

struct dns_forwarder;
/* Binds UDP and TCP on c->listen and serves on base. NULL with err set. */
struct dns_forwarder *dns_forwarder_new(struct event_base *base, const struct dns_config *c, struct cove_err *err);
/* Closes both sockets and drops every query in flight. NULL-safe. */
void dns_forwarder_free(struct dns_forwarder *f);

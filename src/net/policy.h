/* Egress policy values as users write them: CIDRs ("10.0.0.0/8",
 * "2001:db8::/32", a bare address for one host) and domain patterns
 * ("example.org", "*.example.org"). Pure: nothing here resolves a name or
 * touches the host, so the same list means the same thing on every machine.
 *
 * Semantics of a policy (E2B's allowOut/denyOut): the always-denied
 * destinations first (net.c), then allow_out accepts, then deny_out drops,
 * then everything else is allowed. So `deny_out 0.0.0.0/0 ::/0` with an
 * allow_out list is an allow list, and allow_out alone changes nothing. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

struct cidr {
	int family;       /* AF_INET or AF_INET6 */
	uint8_t addr[16]; /* network byte order; 4 bytes used for AF_INET */
	uint8_t len;      /* prefix length */
};

/* "ADDR/LEN" or a bare "ADDR" (LEN 32 or 128). Host bits beyond LEN must be
 * zero ("10.0.0.1/8" is refused: it most often means a typo). 0, or -1 with
 * err set (COVE_EINVAL) and *ret untouched. */
int cidr_parse(const char *s, struct cidr *ret, struct cove_err *err);
/* Back as "ADDR/LEN"; buf holds at least 64 bytes. */
void cidr_format(const struct cidr *c, char *buf, size_t cap);
/* Whether a and b share any address (same family, one contains the other). */
bool cidr_overlaps(const struct cidr *a, const struct cidr *b);
/* Whether addr (4 or 16 bytes by c's family) lies in c. */
bool cidr_contains(const struct cidr *c, const uint8_t *addr);

/* A domain name or "*." and a name: labels of [A-Za-z0-9-], 1 to 63 bytes,
 * not starting or ending in '-', at least two labels, at most 253 bytes, an
 * optional trailing dot. Case-insensitive. */
bool domain_pattern_valid(const char *s);
/* Whether name matches pattern: equal, or for "*.example.org" any name
 * ending in ".example.org" (not example.org itself). Case-insensitive,
 * trailing dots ignored. */
bool domain_match(const char *pattern, const char *name);

/* An allow_out or deny_out list, split by kind. Owns its strings. */
#define POLICY_MAX_ENTRIES 1024
struct policy_list {
	struct cidr *cidrs;
	size_t n_cidrs;
	char **domains; /* lowercase, without a trailing dot */
	size_t n_domains;
};

/* Parse n items into *ret: each a CIDR or a domain pattern. On a bad item
 * -1 with err naming it ("deny_out[2]: 'x/y': ...") and *ret untouched.
 * what names the list in messages. */
int policy_list_parse(const char *what, const char *const *items, size_t n, struct policy_list *ret,
		      struct cove_err *err);
void policy_list_free(struct policy_list *l);
/* What the lists say of name, for the egress proxy: an allow_out match
 * allows, else a deny_out match denies, else neither (the proxy then
 * judges the name's addresses by policy_addr_allowed). */
enum policy_verdict { POLICY_DENY = -1, POLICY_UNNAMED = 0, POLICY_ALLOW = 1 };
enum policy_verdict policy_name_verdict(const struct policy_list *allow, const struct policy_list *deny,
					const char *name);
/* What the CIDRs say of addr (4 or 16 bytes by family), as the sandbox's
 * nftables chain does: an allow_out match allows, else a deny_out match
 * denies, else allowed. */
bool policy_addr_allowed(const struct policy_list *allow, const struct policy_list *deny, int family,
			 const uint8_t *addr);
/* Whether either list names a domain (the egress proxy is needed). */
bool policy_has_domains(const struct policy_list *allow, const struct policy_list *deny);
/* Whether name is allowed by the two lists' domains: an allow_out match
 * allows, else a deny_out match denies, else allowed. For DNS answers. */
bool policy_name_allowed(const struct policy_list *allow, const struct policy_list *deny, const char *name);

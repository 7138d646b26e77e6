/* DNS messages (RFC 1035), as much as coved's resolver needs: the one
 * question of a query, a reply that refuses it, and the check that an
 * upstream's answer is to that question. Pure, and fed untrusted bytes
 * from sandboxes and from the network: every read is bounds-checked
 * (tests/fuzz/fuzz_dns.c). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DNS_HEADER 12
#define DNS_NAME_MAX 253 /* as text, without the trailing dot */

enum { DNS_RCODE_FORMERR = 1, DNS_RCODE_SERVFAIL = 2, DNS_RCODE_REFUSED = 5 };

struct dns_question {
	uint16_t id;
	bool response;               /* the QR bit */
	char name[DNS_NAME_MAX + 1]; /* lowercase, dotted, no trailing dot; "" for the root */
	uint16_t type, class;
	size_t end; /* offset just past the question */
};

/* The header and the first question of msg. A query must have exactly one
 * question and no answers; names may not use compression (no resolver
 * sends a compressed question, and refusing it keeps this simple).
 * 0, or -EINVAL for anything malformed. */
int dnsmsg_question(const uint8_t *msg, size_t len, struct dns_question *ret);
/* A reply to query (whose question q is) with rcode and no records, into
 * out (cap bytes). Its length, or 0 if it does not fit. */
size_t dnsmsg_reply_error(const uint8_t *query, const struct dns_question *q, int rcode, uint8_t *out, size_t cap);
/* Whether answer is a response to the same question as q (name, type and
 * class; the ID is the caller's to compare, as it rewrites it). */
bool dnsmsg_answers(const uint8_t *answer, size_t len, const struct dns_question *q);
/* Sets the ID of msg (len >= DNS_HEADER). */
void dnsmsg_set_id(uint8_t *msg, uint16_t id);

/* The nameserver lines of a resolv.conf text: up to max IPv4 or IPv6
 * addresses (as text, 46 bytes each). Other lines, and addresses that do
 * not parse, are skipped. The count found. */
#define DNS_RESOLVER_MAX 3
int dnsmsg_resolv_conf(const char *text, char (*ret)[46], int max);

#include "net/policy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int addr_bytes(int family)
{
	return family == AF_INET ? 4 : 16;
}

/* Whether the bits of addr beyond len are all zero. */
static bool host_bits_zero(const uint8_t *addr, int bytes, int len)
{
	for (int i = 0; i < bytes; i++) {
		int keep = len - i * 8; /* bits of this byte inside the prefix */
		uint8_t mask = keep >= 8 ? 0xff : keep <= 0 ? 0 : (uint8_t)(0xff << (8 - keep));
		if (addr[i] & ~mask)
			return false;
	}
	return true;
}

int cidr_parse(const char *s, struct cidr *ret, struct cove_err *err)
{
	char buf[64];
	if (!s || strlen(s) >= sizeof(buf))
		return err_set(err, COVE_EINVAL, "'%.64s': not an address or CIDR", s ? s : "");
	strcpy(buf, s);
	struct cidr c = { 0 };
	char *slash = strchr(buf, '/');
	if (slash)
		*slash = '\0';
	if (inet_pton(AF_INET, buf, c.addr) == 1)
		c.family = AF_INET;
	else if (inet_pton(AF_INET6, buf, c.addr) == 1)
		c.family = AF_INET6;
	else
		return err_set(err, COVE_EINVAL, "'%s': not an IPv4 or IPv6 address or CIDR", s);
	int max = addr_bytes(c.family) * 8;
	c.len = (uint8_t)max;
	if (slash) {
		const char *l = slash + 1;
		char *end;
		long v = strtol(l, &end, 10);
		if (!isdigit((unsigned char)*l) || *end || v < 0 || v > max || (l[0] == '0' && l[1]))
			return err_set(err, COVE_EINVAL, "'%s': the prefix length must be 0 to %d", s, max);
		c.len = (uint8_t)v;
	}
	if (!host_bits_zero(c.addr, addr_bytes(c.family), c.len))
		return err_set(err, COVE_EINVAL, "'%s': bits set beyond the /%u prefix", s, c.len);
	*ret = c;
	return 0;
}

void cidr_format(const struct cidr *c, char *buf, size_t cap)
{
	char a[INET6_ADDRSTRLEN] = "?";
	(void)inet_ntop(c->family, c->addr, a, sizeof(a));
	snprintf(buf, cap, "%s/%u", a, c->len);
}

static bool prefix_equal(const uint8_t *a, const uint8_t *b, int len)
{
	int full = len / 8, rest = len % 8;
	if (memcmp(a, b, full) != 0)
		return false;
	if (!rest)
		return true;
	uint8_t mask = (uint8_t)(0xff << (8 - rest));
	return (a[full] & mask) == (b[full] & mask);
}

bool cidr_contains(const struct cidr *c, const uint8_t *addr)
{
	return prefix_equal(c->addr, addr, c->len);
}

bool cidr_overlaps(const struct cidr *a, const struct cidr *b)
{
	if (a->family != b->family)
		return false;
	return prefix_equal(a->addr, b->addr, a->len < b->len ? a->len : b->len);
}

static bool label_valid(const char *l, size_t n)
{
	if (n < 1 || n > 63 || l[0] == '-' || l[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)l[i]) && l[i] != '-')
			return false;
	return true;
}

bool domain_pattern_valid(const char *s)
{
	if (!s)
		return false;
	if (s[0] == '*' && s[1] == '.')
		s += 2;
	size_t n = strlen(s);
	if (n && s[n - 1] == '.')
		n--;
	if (n < 1 || n > 253)
		return false;
	int labels = 0;
	for (size_t start = 0; start <= n;) {
		const char *dot = memchr(s + start, '.', n - start);
		size_t end = dot ? (size_t)(dot - s) : n;
		if (!label_valid(s + start, end - start))
			return false;
		labels++;
		start = end + 1;
	}
	return labels >= 2;
}

/* Length of s without one trailing dot. */
static size_t name_len(const char *s)
{
	size_t n = strlen(s);
	return n && s[n - 1] == '.' ? n - 1 : n;
}

bool domain_match(const char *pattern, const char *name)
{
	bool wild = pattern[0] == '*' && pattern[1] == '.';
	const char *p = wild ? pattern + 1 : pattern; /* ".example.org" when wild */
	size_t pn = name_len(p), nn = name_len(name);
	if (!wild)
		return pn == nn && strncasecmp(p, name, nn) == 0;
	/* At least one label before the suffix: "*.x.org" is not "x.org". */
	return nn > pn && strncasecmp(name + nn - pn, p, pn) == 0;
}

void policy_list_free(struct policy_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n_domains; i++)
		free(l->domains[i]);
	free(l->domains);
	free(l->cidrs);
	*l = (struct policy_list){ 0 };
}

static char *domain_normalize(const char *s)
{
	size_t n = name_len(s);
	char *d = strndup(s, n);
	for (size_t i = 0; d && i < n; i++)
		d[i] = (char)tolower((unsigned char)d[i]);
	return d;
}

/* An item that looks like an address (digits, ':' or '/') is judged as a
 * CIDR, so "10.0.0.300" gets the CIDR message, not the domain one. */
static bool looks_like_address(const char *s)
{
	return strchr(s, ':') || strchr(s, '/') || strspn(s, "0123456789.") == strlen(s);
}

int policy_list_parse(const char *what, const char *const *items, size_t n, struct policy_list *ret,
		      struct cove_err *err)
{
	if (n > POLICY_MAX_ENTRIES)
		return err_set(err, COVE_EINVAL, "%s: %zu entries, at most %d", what, n, POLICY_MAX_ENTRIES);
	struct policy_list l = { .cidrs = calloc(n ? n : 1, sizeof(*l.cidrs)),
				 .domains = calloc(n ? n : 1, sizeof(*l.domains)) };
	if (!l.cidrs || !l.domains) {
		policy_list_free(&l);
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	/* One local error, so that a caller passing NULL still stops at the
	 * first bad item. */
	struct cove_err e = { 0 };
	for (size_t i = 0; i < n && !e.code; i++) {
		const char *s = items[i] ? items[i] : "";
		struct cove_err item = { 0 };
		if (looks_like_address(s)) {
			if (cidr_parse(s, &l.cidrs[l.n_cidrs], &item) == 0)
				l.n_cidrs++;
			else
				err_set(&e, COVE_EINVAL, "%s[%zu]: %s", what, i, item.msg);
		} else if (!domain_pattern_valid(s)) {
			err_set(&e, COVE_EINVAL,
				"%s[%zu]: '%.253s': not a CIDR, an address or a domain name ('example.org', "
				"'*.example.org')",
				what, i, s);
		} else if ((l.domains[l.n_domains] = domain_normalize(s))) {
			l.n_domains++;
		} else {
			err_set(&e, COVE_EINTERNAL, "out of memory");
		}
	}
	if (e.code) {
		policy_list_free(&l);
		return err_set(err, e.code, "%s", e.msg);
	}
	*ret = l;
	return 0;
}

static bool list_has_name(const struct policy_list *l, const char *name)
{
	for (size_t i = 0; l && i < l->n_domains; i++)
		if (domain_match(l->domains[i], name))
			return true;
	return false;
}

static bool list_denies_all(const struct policy_list *l)
{
	for (size_t i = 0; l && i < l->n_cidrs; i++)
		if (l->cidrs[i].len == 0)
			return true;
	return false;
}

bool policy_name_allowed(const struct policy_list *allow, const struct policy_list *deny, const char *name)
{
	if (list_has_name(allow, name))
		return true;
	/* A deny_out of everything (0.0.0.0/0 or ::/0) makes allow_out an allow
	 * list for names too: DNS answers no name that is not on it. */
	return !list_has_name(deny, name) && !list_denies_all(deny);
}

enum policy_verdict policy_name_verdict(const struct policy_list *allow, const struct policy_list *deny,
					const char *name)
{
	if (list_has_name(allow, name))
		return POLICY_ALLOW;
	return list_has_name(deny, name) ? POLICY_DENY : POLICY_UNNAMED;
}

static bool list_has_addr(const struct policy_list *l, int family, const uint8_t *addr)
{
	for (size_t i = 0; l && i < l->n_cidrs; i++)
		if (l->cidrs[i].family == family && cidr_contains(&l->cidrs[i], addr))
			return true;
	return false;
}

bool policy_addr_allowed(const struct policy_list *allow, const struct policy_list *deny, int family,
			 const uint8_t *addr)
{
	return list_has_addr(allow, family, addr) || !list_has_addr(deny, family, addr);
}

bool policy_has_domains(const struct policy_list *allow, const struct policy_list *deny)
{
	return (allow && allow->n_domains) || (deny && deny->n_domains);
}

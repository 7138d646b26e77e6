/* Unit tests for src/net/policy.c and src/net/pool.c: CIDRs, domain
 * patterns and policy lists as users write them; the address pool against
 * given host routes. Pure: nothing here touches the host. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "net/policy.h"
#include "net/pool.h"
#include "tap.h"

static bool cidr_is(const char *s, const char *want)
{
	struct cidr c;
	char buf[64];
	if (cidr_parse(s, &c, NULL) < 0)
		return false;
	cidr_format(&c, buf, sizeof(buf));
	if (strcmp(buf, want) != 0)
		printf("# '%s' came back as '%s'\n", s, buf);
	return strcmp(buf, want) == 0;
}

/* Refused with a message that contains want. */
static bool cidr_refused(const char *s, const char *want)
{
	struct cidr c = { .len = 77 };
	struct cove_err e = { 0 };
	bool ok = cidr_parse(s, &c, &e) < 0 && e.code == COVE_EINVAL && strstr(e.msg, want) && c.len == 77;
	if (!ok)
		printf("# '%s': %s\n", s, e.msg);
	return ok;
}

static struct cidr C(const char *s) {
	struct cidr c = { 0 };
	(void)cidr_parse(s, &c, NULL);
	return c;
}

static void
test_cidr(void)
{
	CHECK(cidr_is("10.0.0.0/8", "10.0.0.0/8"), "IPv4 CIDR");
	CHECK(cidr_is("1.2.3.4", "1.2.3.4/32"), "bare IPv4 address is a /32");
	CHECK(cidr_is("0.0.0.0/0", "0.0.0.0/0"), "everything");
	CHECK(cidr_is("2001:db8::/32", "2001:db8::/32"), "IPv6 CIDR");
	CHECK(cidr_is("::1", "::1/128"), "bare IPv6 address");
	CHECK(cidr_refused("10.0.0.1/8", "bits set beyond"), "host bits refused");
	CHECK(cidr_refused("10.0.0.0/33", "prefix length must be 0 to 32"), "/33 refused");
	CHECK(cidr_refused("::/129", "0 to 128"), "/129 refused");
	CHECK(cidr_refused("10.0.0.0/", "prefix length"), "empty length refused");
	CHECK(cidr_refused("10.0.0.0/08", "prefix length"), "leading zero refused");
	CHECK(cidr_refused("10.0.0.0/-1", "prefix length"), "negative refused");
	CHECK(cidr_refused("10.0.0.300", "not an IPv4 or IPv6"), "bad octet refused");
	CHECK(cidr_refused("", "not an IPv4"), "empty refused");
	struct cidr a = C("10.0.0.0/8"), b = C("10.1.0.0/16"), c = C("11.0.0.0/8"), d = C("::/0");
	CHECK(cidr_overlaps(&a, &b) && cidr_overlaps(&b, &a), "containment overlaps both ways");
	CHECK(!cidr_overlaps(&a, &c), "disjoint do not overlap");
	CHECK(!cidr_overlaps(&a, &d), "families never overlap");
	uint8_t in[4] = { 10, 1, 2, 3 }, out[4] = { 10, 2, 0, 0 };
	CHECK(cidr_contains(&b, in) && !cidr_contains(&b, out), "contains");
}

static void test_domains(void)
{
	CHECK(domain_pattern_valid("example.org"), "name");
	CHECK(domain_pattern_valid("*.example.org"), "wildcard");
	CHECK(domain_pattern_valid("a-b.Example.ORG."), "hyphen, case, trailing dot");
	CHECK(!domain_pattern_valid("org"), "one label refused");
	CHECK(!domain_pattern_valid("a.*.org"), "inner wildcard refused");
	CHECK(!domain_pattern_valid("*example.org"), "wildcard without dot refused");
	CHECK(!domain_pattern_valid("-a.org") && !domain_pattern_valid("a-.org"), "edge hyphens refused");
	CHECK(!domain_pattern_valid("a..org") && !domain_pattern_valid(".a.org"), "empty label refused");
	CHECK(!domain_pattern_valid("a_b.org") && !domain_pattern_valid("a b.org"), "bad characters refused");
	char long_label[80];
	memset(long_label, 'a', 64);
	strcpy(long_label + 64, ".org");
	CHECK(!domain_pattern_valid(long_label), "64-byte label refused");
	long_label[1] = '.';
	CHECK(domain_pattern_valid(long_label + 2), "63-byte label accepted");
	CHECK(domain_match("example.org", "EXAMPLE.org."), "exact, any case, trailing dot");
	CHECK(!domain_match("example.org", "www.example.org"), "exact is not a suffix");
	CHECK(domain_match("*.example.org", "a.b.example.org"), "wildcard matches deeper names");
	CHECK(!domain_match("*.example.org", "example.org"), "wildcard does not match the apex");
	CHECK(!domain_match("*.example.org", "badexample.org"), "wildcard matches on a label boundary");
}

static void test_lists(void)
{
	const char *items[] = { "10.0.0.0/8", "*.Example.org", "2001:db8::1", "pypi.org." };
	struct policy_list l;
	CHECK(policy_list_parse("allow_out", items, 4, &l, NULL) == 0 && l.n_cidrs == 2 && l.n_domains == 2,
	      "mixed list splits by kind");
	CHECK_STR(l.domains[0], "*.example.org", "domain lowercased");
	CHECK_STR(l.domains[1], "pypi.org", "trailing dot dropped");
	const char *bad[] = { "10.0.0.0/8", "10.0.0.0/33" };
	struct policy_list untouched = { .n_cidrs = 99 };
	struct cove_err e = { 0 };
	CHECK(policy_list_parse("deny_out", bad, 2, &untouched, &e) < 0 && untouched.n_cidrs == 99 &&
		      strstr(e.msg, "deny_out[1]") && strstr(e.msg, "10.0.0.0/33"),
	      "bad CIDR names the list and index: %s", e.msg);
	const char *bad_name[] = { "exa mple.org" };
	struct cove_err e2 = { 0 };
	CHECK(policy_list_parse("allow_out", bad_name, 1, &untouched, &e2) < 0 && strstr(e2.msg, "allow_out[0]") &&
		      strstr(e2.msg, "not a CIDR"),
	      "bad name: %s", e2.msg);
	const char *all[] = { "0.0.0.0/0" }, *deny_one[] = { "bad.example.org" };
	struct policy_list deny_all, deny_name;
	(void)policy_list_parse("deny_out", all, 1, &deny_all, NULL);
	(void)policy_list_parse("deny_out", deny_one, 1, &deny_name, NULL);
	CHECK(policy_name_allowed(&l, &deny_all, "x.example.org"), "allow_out name passes a deny-all");
	CHECK(!policy_name_allowed(&l, &deny_all, "other.net"), "deny-all makes allow_out an allow list");
	CHECK(!policy_name_allowed(NULL, &deny_name, "bad.example.org"), "deny_out name denied");
	CHECK(policy_name_allowed(NULL, &deny_name, "good.example.org"), "other names allowed");
	CHECK(policy_name_allowed(&l, &deny_name, "bad.example.org"), "allow_out wins over deny_out");
	/* The egress proxy's verdicts: names, then addresses as the rules. */
	CHECK(policy_name_verdict(&l, &deny_all, "x.example.org") == POLICY_ALLOW, "proxy: allow_out name allowed");
	CHECK(policy_name_verdict(&l, &deny_all, "other.net") == POLICY_UNNAMED,
	      "proxy: a name no list names goes by its addresses");
	CHECK(policy_name_verdict(NULL, &deny_name, "bad.example.org") == POLICY_DENY, "proxy: deny_out name denied");
	uint8_t a4[4] = { 10, 1, 2, 3 }, b4[4] = { 192, 0, 2, 1 }, a6[16] = { 0x20, 0x01, 0x0d, 0xb8 };
	CHECK(policy_addr_allowed(&l, &deny_name, AF_INET, b4) && policy_addr_allowed(NULL, NULL, AF_INET6, a6),
	      "proxy: an address no CIDR names is allowed");
	CHECK(!policy_addr_allowed(&l, &deny_all, AF_INET, b4), "proxy: deny-all denies an IPv4 address");
	CHECK(policy_addr_allowed(&l, &deny_all, AF_INET, a4), "proxy: allow_out CIDR wins over deny-all");
	CHECK(policy_addr_allowed(&l, &deny_all, AF_INET6, a6), "proxy: an IPv4 deny-all leaves IPv6 alone");
	CHECK(policy_has_domains(&l, NULL) && policy_has_domains(NULL, &deny_name) &&
		      !policy_has_domains(NULL, &deny_all),
	      "proxy: needed when a list names a domain");
	policy_list_free(&l);
	policy_list_free(&deny_all);
	policy_list_free(&deny_name);
}

static void test_pool(void)
{
	static const uint8_t ula[5] = { 1, 2, 3, 4, 5 };
	struct cidr routes[] = { C("10.200.0.0/24"), C("192.168.1.0/24"), C("fd01:203:405:c0e::/64") };
	struct net_host_routes host = { routes, 3, true };
	struct net_pool p;
	struct cove_err e = { 0 };
	CHECK(net_pool_init(&p, NULL, &host, ula, &e) == 0, "default pool");
	char buf[64];
	cidr_format(&p.v4, buf, sizeof(buf));
	CHECK(strcmp(buf, "10.201.0.0/16") == 0, "default skips a /16 the host routes");
	cidr_format(&p.v6, buf, sizeof(buf));
	CHECK(p.has_v6 && strcmp(buf, "fd01:203:405:c0f::/64") == 0, "ULA /64 skips a routed one: %s", buf);
	struct net_addrs a, b;
	CHECK(net_pool_alloc(&p, &a) == 0 && a.slot == 0, "first slot");
	char g[64], s[64];
	inet_ntop(AF_INET, a.gw4, g, sizeof(g));
	inet_ntop(AF_INET, a.sb4, s, sizeof(s));
	CHECK(strcmp(g, "10.201.0.1") == 0 && strcmp(s, "10.201.0.2") == 0, "gateway .1, sandbox .2");
	inet_ntop(AF_INET6, a.sb6, s, sizeof(s));
	CHECK(strcmp(s, "fd01:203:405:c0f::2") == 0, "IPv6 sandbox address");
	CHECK(net_pool_alloc(&p, &b) == 0 && b.slot == 1, "second slot");
	inet_ntop(AF_INET, b.gw4, g, sizeof(g));
	CHECK(strcmp(g, "10.201.0.5") == 0, "next /30");
	net_pool_release(&p, 0);
	CHECK(net_pool_alloc(&p, &a) == 0 && a.slot == 2, "a released slot is not reused at once");
	CHECK(net_pool_take(&p, 1, &a) == -EEXIST, "taking a used slot refused");
	CHECK(net_pool_take(&p, p.slots, &a) == -ERANGE, "taking outside the pool refused");
	net_pool_free(&p);

	struct cove_err e2 = { 0 };
	CHECK(net_pool_init(&p, "192.168.0.0/16", &host, ula, &e2) < 0 && e2.code == COVE_EINVAL &&
		      strstr(e2.msg, "192.168.1.0/24"),
	      "overlapping --subnet refused: %s", e2.msg);
	struct cove_err e3 = { 0 };
	CHECK(net_pool_init(&p, "10.0.0.0/31", &host, ula, &e3) < 0 && strstr(e3.msg, "/8 to /30"),
	      "too small a subnet refused");
	struct cove_err e4 = { 0 };
	CHECK(net_pool_init(&p, "fd00::/64", &host, ula, &e4) < 0 && e4.code == COVE_EINVAL, "IPv6 subnet refused");
	struct net_host_routes v4only = { routes, 2, false };
	CHECK(net_pool_init(&p, "172.31.0.0/30", &v4only, ula, &e) == 0 && p.slots == 1 && !p.has_v6,
	      "/30: one slot, no IPv6 without a default IPv6 route");
	struct net_addrs c;
	CHECK(net_pool_alloc(&p, &c) == 0 && net_pool_alloc(&p, &c) == -ENOSPC, "full pool");
	net_pool_free(&p);
}

int main(void)
{
	test_cidr();
	test_domains();
	test_lists();
	test_pool();
	return tap_done();
}

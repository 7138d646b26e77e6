/* libFuzzer harness for the DNS message parser (src/net/dnsmsg.c).
 *
 * coved's resolver reads datagrams from sandboxes and from the network:
 * arbitrary bytes. Beyond "no crash", it checks the contracts: a parsed
 * question ends within the message, its name is lowercase letters, digits,
 * '-', '_' and single dots, at most 253 bytes; a refusal built from it
 * parses back to the same question, as a response with the same ID, and
 * answers it; resolv.conf parsing (the input as text) returns at most max
 * addresses, each NUL-terminated.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu17 -D_GNU_SOURCE \
 *         -Isrc -Iinclude tests/fuzz/fuzz_dns.c src/net/dnsmsg.c -o fuzz_dns
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/dnsmsg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *n)
{
	size_t len = strlen(n);
	if (len > DNS_NAME_MAX || (len && (n[0] == '.' || n[len - 1] == '.')) || strstr(n, ".."))
		abort();
	for (const char *c = n; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.'))
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dns_question q;
	if (dnsmsg_question(data, size, &q) == 0) {
		if (q.end > size || q.end < DNS_HEADER + 5)
			abort();
		check_name(q.name);
		uint8_t out[2048], small[16];
		size_t n = dnsmsg_reply_error(data, &q, DNS_RCODE_REFUSED, out, sizeof(out));
		struct dns_question r;
		if (q.end <= sizeof(out) &&
		    (n != q.end || dnsmsg_question(out, n, &r) != 0 || !r.response || r.id != q.id ||
		     strcmp(r.name, q.name) != 0 || r.type != q.type || !dnsmsg_answers(out, n, &q)))
			abort();
		if (dnsmsg_reply_error(data, &q, DNS_RCODE_REFUSED, small, sizeof(small)) != 0)
			abort(); /* no question fits in 16 bytes with its header */
	}
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	char ns[DNS_RESOLVER_MAX][46];
	int k = dnsmsg_resolv_conf(text, ns, 2);
	if (k < 0 || k > 2)
		abort();
	for (int i = 0; i < k; i++)
		if (!memchr(ns[i], '\0', sizeof(ns[i])))
			abort();
	free(text);
	return 0;
}

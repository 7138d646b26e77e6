/* libFuzzer harness for the policy values (src/net/policy.c): CIDRs and
 * domain patterns come from API bodies and CLI flags.
 *
 * The input's lines are a list. Beyond "no crash": policy_list_parse
 * accepts exactly when every line is a valid CIDR or domain pattern, leaves
 * *ret untouched on failure, and each CIDR it keeps prints back to text
 * that parses to the same CIDR; each domain is lowercase and matches itself
 * (or, for "*.x", "a.x").
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu17 -D_GNU_SOURCE \
 *         -Isrc -Iinclude tests/fuzz/fuzz_policy.c src/net/policy.c src/common/error.c -o fuzz_policy
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_list(const struct policy_list *l)
{
	for (size_t i = 0; i < l->n_cidrs; i++) {
		char buf[64];
		struct cidr back;
		cidr_format(&l->cidrs[i], buf, sizeof(buf));
		if (cidr_parse(buf, &back, NULL) != 0 || memcmp(&back, &l->cidrs[i], sizeof(back)) != 0)
			abort();
	}
	for (size_t i = 0; i < l->n_domains; i++) {
		const char *d = l->domains[i];
		char probe[300];
		for (const char *c = d; *c; c++)
			if (isupper((unsigned char)*c))
				abort();
		snprintf(probe, sizeof(probe), "%s%s", d[0] == '*' ? "a" : "", d[0] == '*' ? d + 1 : d);
		if (!domain_match(d, probe))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	const char *items[64];
	size_t n = 0;
	bool all_valid = true;
	for (char *save = NULL, *t = strtok_r(text, "\n", &save); t && n < 64; t = strtok_r(NULL, "\n", &save)) {
		items[n++] = t;
		struct cidr c;
		bool is_cidr = cidr_parse(t, &c, NULL) == 0;
		if (!is_cidr && !domain_pattern_valid(t))
			all_valid = false;
	}
	struct policy_list l = { .n_cidrs = 12345 };
	struct cove_err e = { 0 };
	int r = policy_list_parse("allow_out", items, n, &l, &e);
	if (r == 0) {
		if (!all_valid)
			abort();
		check_list(&l);
		policy_list_free(&l);
	} else if (l.n_cidrs != 12345 || !e.code || !e.msg[0]) {
		abort();
	}
	free(text);
	return 0;
}

/* libFuzzer harness for the egress proxy's name sniffing (src/net/sniff.c):
 * a sandbox's first bytes to port 443 or 80, fully under its control.
 *
 * The first input byte picks the parser (even: TLS, odd: HTTP), the rest
 * is what the sandbox sent. Beyond "no crash": a name found is 1 to 253
 * bytes of [A-Za-z0-9._-] (or, from HTTP, an IPv6 literal), with no empty
 * label and no trailing dot; and a result other than SNIFF_MORE stays the
 * same when more bytes follow (the proxy stops reading at it), but for
 * HTTP's MORE that only the empty line ends; a judged HTTP request made
 * the connection's only one (sniff_http_one_request) reads back the same.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu17 -D_GNU_SOURCE \
 *         -Isrc -Iinclude tests/fuzz/fuzz_sniff.c src/net/sniff.c -o fuzz_sniff
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/sniff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *name)
{
	size_t n = strlen(name);
	struct in6_addr a;
	if (n == 0 || n > SNIFF_NAME_MAX)
		abort();
	if (inet_pton(AF_INET6, name, &a) == 1)
		return;
	if (name[0] == '.' || name[n - 1] == '.' || strstr(name, ".."))
		abort();
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > SNIFF_MAX + 1)
		return 0;
	enum sniff_result (*fn)(const uint8_t *, size_t, char *) = data[0] % 2 ? sniff_http : sniff_tls;
	char name[SNIFF_NAME_MAX + 1], again[SNIFF_NAME_MAX + 1];
	memset(name, 0x5a, sizeof(name));
	enum sniff_result r = fn(data + 1, size - 1, name);
	if (r == SNIFF_NAME)
		check_name(name);
	/* What the proxy sends for a judged request: the same name, once. */
	if (fn == sniff_http && (r == SNIFF_NAME || r == SNIFF_NONE)) {
		uint8_t *out = malloc(size + 64);
		size_t n = out ? sniff_http_one_request(data + 1, size - 1, out, size + 64) : 0;
		if (out && (n == 0 || n > size - 1 + 64 || sniff_http(out, n, again) != r ||
			    (r == SNIFF_NAME && strcmp(name, again) != 0)))
			abort();
		free(out);
	}
	/* A verdict on a prefix holds for the whole input. */
	for (size_t cut = 1; cut < size; cut += 1 + cut / 4) {
		enum sniff_result p = fn(data + 1, cut - 1, again);
		if (p == SNIFF_MORE)
			continue;
		if (p != r || (p == SNIFF_NAME && strcmp(name, again) != 0))
			abort();
		break;
	}
	return 0;
}

/* libFuzzer harness for the port proxy's reading of request heads
 * (src/daemon/proxy/head.c): every byte of it comes from whoever reaches
 * the proxy's listener.
 *
 * The input is a head (up to its blank line, or the whole input). Beyond
 * "no crash, no UB": every field of a parsed head lies inside the input
 * and has a name without ':' or white space; head_body never gives both
 * framings; the token taken out of the target (and out of a Cookie field)
 * leaves a string no longer than what it came from (cookies: but for
 * "; " between them), in which the parameter is gone; a host name that routes gives a valid sandbox ID and
 * a port 1-65535.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu17 -D_GNU_SOURCE -Isrc -Iinclude \
 *         tests/fuzz/fuzz_proxy_head.c src/daemon/proxy/head.c src/common/parse.c -o fuzz_proxy_head
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/parse.h"
#include "daemon/proxy/head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inside(const char *p, size_t n, const uint8_t *data, size_t size)
{
	if (p < (const char *)data || p + n > (const char *)data + size)
		abort();
}

static void check_take(const char *v, size_t n, bool cookie)
{
	char tok[HEAD_TOKEN_MAX + 1] = "", out[512];
	int r = cookie ? head_take_cookie(v, n, "cove_token", tok, out, sizeof(out))
		       : head_take_param(v, n, "cove_token", tok, out, sizeof(out));
	if (r < 0)
		return;
	/* cookies come back as "a; b", whatever spaces they had */
	if (strlen(out) > (cookie ? 2 * n : n) + 1 || strlen(tok) > HEAD_TOKEN_MAX)
		abort();
	/* no parameter of the name is left in the query */
	const char *q = cookie ? NULL : strchr(out, '?');
	for (const char *item = q ? q + 1 : NULL; item; item = strchr(item, '&') ? strchr(item, '&') + 1 : NULL)
		if (strncmp(item, "cove_token=", 11) == 0)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_head h;
	bool chunked;
	uint64_t len;
	char id[16];
	int port;
	if (head_parse((const char *)data, size, &h) < 0)
		return 0;
	inside(h.method, h.method_len, data, size);
	inside(h.target, h.target_len, data, size);
	for (int i = 0; i < h.n_fields; i++) {
		const struct head_field *f = &h.fields[i];
		inside(f->name, f->name_len, data, size);
		inside(f->value, f->value_len, data, size);
		for (size_t k = 0; k < f->name_len; k++)
			if (f->name[k] == ':' || f->name[k] == ' ' || f->name[k] == '\t')
				abort();
		if (f->name_len == 6 && strncasecmp(f->name, "Cookie", 6) == 0)
			check_take(f->value, f->value_len, true);
		if (f->name_len == 4 && strncasecmp(f->name, "Host", 4) == 0 &&
		    head_route_host(f->value, f->value_len, "localhost", id, &port) == 0 &&
		    (!sandbox_id_valid(id) || port < 1 || port > 65535))
			abort();
	}
	if (head_body(&h, &chunked, &len) == 0 && chunked && len != 0)
		abort();
	check_take(h.target, h.target_len, false);
	return 0;
}

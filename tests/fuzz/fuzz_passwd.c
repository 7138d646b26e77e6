/* libFuzzer harness for the passwd/group parsers (src/common/passwd.c).
 *
 * cove-init reads the sandbox's own /etc/passwd and /etc/group, which the
 * sandbox's user controls: arbitrary text. The input's first line is the
 * user spec (a name or a decimal uid), the rest is used as both passwd and
 * group text.
 *
 * Beyond "no crash", it checks the contracts: -EINVAL exactly for an empty
 * spec or one with ':' or '\n'; a numeric spec always resolves to that uid;
 * a name resolves only to an entry of that name; entries are NUL-terminated
 * within their arrays, with no ':' or '\n', non-empty home and shell, and
 * ids below 2^31; ret is untouched on failure; a name's uid looks up to the
 * same uid. passwd_groups never writes past max, and a smaller max gives a
 * prefix of the same list.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -std=gnu17 -D_GNU_SOURCE \
 *         -Isrc -Iinclude tests/fuzz/fuzz_passwd.c src/common/passwd.c -o fuzz_passwd
 *   ./fuzz_passwd -max_total_time=60 corpus/
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/passwd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_ID 0x7fffffffUL

static int field_ok(const char *f, size_t cap, int may_be_empty)
{
	size_t n = strnlen(f, cap);
	return n < cap && (may_be_empty || n > 0) && !strpbrk(f, ":\n");
}

static int entry_ok(const struct passwd_entry *e)
{
	return field_ok(e->name, sizeof(e->name), 0) && field_ok(e->home, sizeof(e->home), 0) &&
	       field_ok(e->shell, sizeof(e->shell), 0) && e->uid <= MAX_ID && e->gid <= MAX_ID;
}

/* Whether spec is a uid the parser must accept: digits only, at most 2^31-1. */
static int numeric(const char *spec, unsigned long *ret)
{
	if (!*spec || strspn(spec, "0123456789") != strlen(spec))
		return 0;
	errno = 0;
	char *end;
	unsigned long v = strtoul(spec, &end, 10);
	if (errno || v > MAX_ID)
		return 0;
	*ret = v;
	return 1;
}

static void check_lookup(const char *text, size_t len, const char *spec)
{
	struct passwd_entry e, before;
	memset(&e, 0xa5, sizeof(e));
	before = e;
	int r = passwd_lookup(text, len, spec, &e);
	int bad_spec = !*spec || strpbrk(spec, ":\n");
	unsigned long id;

	if (r != 0 && r != -ENOENT && r != -EINVAL)
		abort();
	if ((r == -EINVAL) != !!bad_spec)
		abort();
	if (r != 0) {
		if (memcmp(&e, &before, sizeof(e)) != 0)
			abort();
		if (numeric(spec, &id))
			abort(); /* an unlisted numeric uid still resolves */
		return;
	}
	if (!entry_ok(&e))
		abort();
	if (numeric(spec, &id)) {
		if (e.uid != id)
			abort();
		return;
	}
	if (strcmp(e.name, spec) != 0)
		abort();
	/* The uid of a named entry resolves to an entry with that uid. */
	char uid[16];
	struct passwd_entry byuid;
	snprintf(uid, sizeof(uid), "%lu", (unsigned long)e.uid);
	if (passwd_lookup(text, len, uid, &byuid) != 0 || byuid.uid != e.uid || !entry_ok(&byuid))
		abort();
}

static void check_groups(const char *text, size_t len, const char *name, unsigned small)
{
	gid_t all[PASSWD_MAX_GROUPS + 1], some[PASSWD_MAX_GROUPS + 1];
	all[PASSWD_MAX_GROUPS] = some[small] = 0xdeadbeef;
	int n = passwd_groups(text, len, name, all, PASSWD_MAX_GROUPS);
	if (n < 0 || n > PASSWD_MAX_GROUPS || all[PASSWD_MAX_GROUPS] != 0xdeadbeef)
		abort();
	for (int i = 0; i < n; i++)
		if (all[i] > MAX_ID)
			abort();
	int m = passwd_groups(text, len, name, some, (int)small);
	if (m != (n < (int)small ? n : (int)small) || some[small] != 0xdeadbeef || memcmp(some, all, m * sizeof(gid_t)))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char spec[80];
	const char *nl = memchr(data, '\n', size < sizeof(spec) ? size : sizeof(spec));
	size_t sl = nl ? (size_t)(nl - (const char *)data) : 0;

	if (!nl && size > 0 && size < sizeof(spec))
		sl = size; /* a spec and no text */
	memcpy(spec, data, sl);
	spec[sl] = '\0';
	size_t off = nl ? sl + 1 : sl;
	const char *text = (const char *)data + off;
	size_t len = size - off;

	check_lookup(text, len, spec);
	check_groups(text, len, spec, (unsigned)(size % 8));
	return 0;
}

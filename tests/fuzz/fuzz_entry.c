/* libFuzzer harness for the entry stream's path rules (src/common/wire.c).
 *
 * coved turns every tar member name of an upload into an entry path with
 * wire_entry_path_normalize, and both coved and cove-init accept only what
 * wire_entry_path_valid does: the two must agree, or a hostile archive
 * could name something outside the folder it is extracted into.
 *
 * Beyond "no crash": a name that normalizes gives a valid path (relative,
 * no "", "." or ".." component) that normalizes to itself; a valid path
 * normalizes to itself; a name with a ".." component is refused; and a
 * received entry header is accepted only with its lengths in bounds.
 *
 *   scripts/fuzz.sh entry
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool has_dotdot(const char *s)
{
	for (const char *p = s; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return true;
		p += n;
		p += *p == '/';
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char name[2 * WIRE_ENTRY_MAX_PATH + 2], out[WIRE_ENTRY_MAX_PATH + 1], again[WIRE_ENTRY_MAX_PATH + 1];
	if (size >= sizeof(name))
		return 0;
	memcpy(name, data, size);
	name[size] = '\0';

	int r = wire_entry_path_normalize(name, out, sizeof(out));
	if (r == 0) {
		if (!wire_entry_path_valid(out, strlen(out)) || has_dotdot(name))
			abort();
		if (wire_entry_path_normalize(out, again, sizeof(again)) != 0 || strcmp(out, again) != 0)
			abort();
	} else if (r == 1) {
		if (has_dotdot(name) || strspn(name, "/.") != strlen(name))
			abort();
	} else if (r != -EINVAL && r != -ENAMETOOLONG) {
		abort();
	}
	if (r == -EINVAL && !has_dotdot(name))
		abort();

	if (wire_entry_path_valid((const char *)data, size)) {
		if (memchr(data, '\0', size) || wire_entry_path_normalize(name, out, sizeof(out)) != 0 ||
		    strlen(out) != size || memcmp(out, data, size) != 0)
			abort();
	}

	struct wire_entry e;
	if (size >= sizeof(e)) {
		memcpy(&e, data, sizeof(e));
		if (wire_entry_check(&e) == 0 &&
		    (e.path_len > WIRE_ENTRY_MAX_PATH || e.link_len > WIRE_ENTRY_MAX_PATH || e.type < WIRE_ENTRY_END ||
		     e.type > WIRE_ENTRY_TYPE_LAST))
			abort();
	}
	return 0;
}

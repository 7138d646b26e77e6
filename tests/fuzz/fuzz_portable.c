/* libFuzzer harness for the portable snapshot import parser
 * (src/engine/portable.c): the JSON document a client sends to import a
 * snapshot, read and validated by portable_parse before anything is written.
 *
 * Beyond "no crash, no leak": a document that parses has at most
 * PORTABLE_MAX_ENTRIES entries, each path relative and normalized (no "..",
 * no leading '/', no empty or "." component), sorted so that parents come
 * before what they hold, with a known type; a file's content decodes to
 * exactly its announced size, and no path goes through a file or a
 * symlink of the document. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/portable.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_path(const char *p)
{
	if (!p || !*p || p[0] == '/')
		abort();
	for (const char *c = p; *c;) {
		const char *end = strchrnul(c, '/');
		size_t n = (size_t)(end - c);
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			abort();
		c = *end ? end + 1 : end;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct portable_doc *d = NULL;
	struct cove_err err = { 0 };
	if (portable_parse((const char *)data, size, &d, &err) != 0) {
		if (d || !err.msg[0])
			abort(); /* a refusal says why and gives nothing */
		return 0;
	}
	if (!d || d->n > PORTABLE_MAX_ENTRIES)
		abort();
	struct evbuffer *out = evbuffer_new();
	for (size_t i = 0; i < d->n; i++) {
		const struct portable_entry *e = &d->entries[i];
		check_path(e->path);
		if (i > 0 && strcmp(d->entries[i - 1].path, e->path) >= 0)
			abort(); /* sorted, no duplicates */
		if (e->type != WIRE_ENTRY_FILE && e->type != WIRE_ENTRY_DIR && e->type != WIRE_ENTRY_SYMLINK)
			abort();
		if (e->type == WIRE_ENTRY_SYMLINK && (!e->target || !e->target[0]))
			abort();
		/* Nothing goes through a file or a symlink of the document. */
		for (size_t k = 0; k < i; k++) {
			size_t n = strlen(d->entries[k].path);
			if (d->entries[k].type != WIRE_ENTRY_DIR && !strncmp(d->entries[k].path, e->path, n) &&
			    e->path[n] == '/')
				abort();
		}
		if (e->type == WIRE_ENTRY_FILE) {
			evbuffer_drain(out, evbuffer_get_length(out));
			if (portable_content(e, out) != 0 || evbuffer_get_length(out) != e->size)
				abort();
		}
	}
	evbuffer_free(out);
	portable_doc_free(d);
	return 0;
}

/* The portable JSON snapshot of a folder: a document any tool can read and
 * write, made from an entry stream (export) and turned back into one
 * (import).
 *
 *   {"version": 1, "files": [
 *     {"path": "src/main.c", "type": "file", "mode": "0644", "mtime": 1700000000,
 *      "encoding": "utf8", "content": "int main..."},
 *     {"path": "bin/tool", "type": "file", "mode": "0755", "encoding": "base64", "content": "f0VMR..."},
 *     {"path": "empty", "type": "dir", "mode": "0700"},
 *     {"path": "link", "type": "symlink", "target": "src/main.c"}]}
 *
 * Paths are relative to the folder ("/" and "./" in front are dropped, ".."
 * is refused). A name or a target that is not UTF-8 travels as
 * "path_base64" or "target_base64" instead. "type" defaults to "file",
 * "encoding" to "utf8", "content" to "", "mode" to 0644 (dirs 0755,
 * symlinks 0777), "mtime" to the import's time. An import is validated
 * whole before anything is made: at most PORTABLE_MAX_ENTRIES entries and
 * PORTABLE_MAX_BYTES of decoded content (the request body itself is
 * bounded by coved's --max-body-bytes: the front end buffers it whole). */
#pragma once
#include <event2/buffer.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/wire.h"

#define PORTABLE_VERSION 1
#define PORTABLE_MAX_BYTES (64ull << 20)
#define PORTABLE_MAX_ENTRIES 100000

/* ---- export: entries in, JSON text out ---- */

struct portable_writer;

/* whole: the document holds a sandbox's changes, not a folder's files:
 * "base": "/" says so, and an import without a path makes them there. */
struct portable_writer *portable_writer_new(struct evbuffer *out, bool whole);
void portable_writer_free(struct portable_writer *w);
/* An entry of the stream (its file's bytes follow with portable_data).
 * 0, or -1 with err (over the limits, out of memory). */
int portable_entry(struct portable_writer *w, const struct wire_entry *e, const char *path, const char *link,
		   struct cove_err *err);
int portable_data(struct portable_writer *w, const char *buf, size_t len, struct cove_err *err);
/* The last entry and the document's end. */
int portable_end(struct portable_writer *w, struct cove_err *err);

/* ---- import: JSON text in, entries out ---- */

struct portable_entry {
	char *path;          /* normalized, relative */
	uint32_t type;       /* WIRE_ENTRY_FILE, _DIR or _SYMLINK */
	uint32_t mode;       /* permission bits */
	int64_t mtime;       /* unix seconds */
	char *target;        /* a symlink's */
	const char *content; /* a file's, as in the document (borrowed) */
	size_t content_len;
	bool base64;
	uint64_t size; /* decoded */
};

struct portable_doc {
	void *json; /* the parsed document, which content points into */
	size_t n;
	struct portable_entry *entries; /* sorted by path: parents before what they hold */
	bool whole; /* "base": "/": a sandbox's changes, relative to its root */
};

/* Parse and validate a whole document (len bytes of text). 0 with *ret,
 * or -1 with err (COVE_EINVAL, COVE_ETOOBIG). */
int portable_parse(const char *text, size_t len, struct portable_doc **ret, struct cove_err *err);
void portable_doc_free(struct portable_doc *d);
/* A file entry's decoded content into out. 0 or -1. */
int portable_content(const struct portable_entry *e, struct evbuffer *out);

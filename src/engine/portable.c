/* The portable JSON snapshot (portable.h): writing one from an entry
 * stream, reading and validating one before an import.
 *
 * The writer keeps one file's bytes at a time (to choose its encoding,
 * which needs all of them) and emits each entry as it completes, so a
 * download holds at most the largest file, itself bounded by
 * PORTABLE_MAX_BYTES. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cleanup.h"
#include "common/encoding.h"
#include "engine/portable.h"

struct portable_writer {
	struct evbuffer *out;     /* borrowed: the client's bytes */
	struct evbuffer *content; /* the pending file's bytes */
	json_t *pending;          /* the entry written when its bytes are in */
	bool pending_file;
	uint64_t total;
	size_t count;
};

static const char *const type_names[] = {
	[WIRE_ENTRY_FILE] = "file", [WIRE_ENTRY_DIR] = "dir", [WIRE_ENTRY_SYMLINK] = "symlink"
};

static bool is_utf8(const char *s, size_t n)
{
	int valid;
	return utf8_valid_prefix(s, n, &valid) == n && valid;
}

static json_t *base64_json(const char *s, size_t n)
{
	_cleanup_free_ char *b = malloc(base64_encoded_len(n) + 1);
	return b ? json_stringn(b, base64_encode((const unsigned char *)s, n, b)) : NULL;
}

/* s as key, or as key_base64 when it is not UTF-8. */
static int set_text(json_t *j, const char *key, const char *s, size_t n)
{
	char k[32];
	bool text = is_utf8(s, n);
	snprintf(k, sizeof(k), "%s%s", key, text ? "" : "_base64");
	return json_object_set_new(j, k, text ? json_stringn(s, n) : base64_json(s, n));
}

struct portable_writer *portable_writer_new(struct evbuffer *out, bool whole)
{
	struct portable_writer *w = calloc(1, sizeof(*w));
	if (!w || !(w->content = evbuffer_new()) ||
	    evbuffer_add_printf(out, "{\"version\": %d, %s\"files\": [", PORTABLE_VERSION,
				whole ? "\"base\": \"/\", " : "") < 0) {
		portable_writer_free(w);
		return NULL;
	}
	w->out = out;
	return w;
}

void portable_writer_free(struct portable_writer *w)
{
	if (!w)
		return;
	if (w->content)
		evbuffer_free(w->content);
	json_decref(w->pending);
	free(w);
}

static int dump_to_evbuffer(const char *buf, size_t n, void *arg)
{
	return evbuffer_add(arg, buf, n);
}

/* The pending entry, with its content when a file, onto out. */
static int flush_pending(struct portable_writer *w, struct cove_err *err)
{
	if (!w->pending)
		return 0;
	int r = 0;
	if (w->pending_file) {
		size_t n = evbuffer_get_length(w->content);
		const char *c = n ? (const char *)evbuffer_pullup(w->content, -1) : "";
		bool text = c && is_utf8(c, n);
		r |= json_object_set_new(w->pending, "encoding", json_string(text ? "utf8" : "base64"));
		r |= json_object_set_new(w->pending, "content",
					 !c     ? NULL
					 : text ? json_stringn(c, n)
						: base64_json(c, n));
		evbuffer_drain(w->content, n);
	}
	if (r == 0 && w->count > 1)
		r = evbuffer_add(w->out, ",", 1);
	if (r == 0)
		r = json_dump_callback(w->pending, dump_to_evbuffer, w->out, JSON_COMPACT);
	json_decref(w->pending);
	w->pending = NULL;
	return r == 0 ? 0 : err_set(err, COVE_EINTERNAL, "out of memory");
}

int portable_entry(struct portable_writer *w, const struct wire_entry *e, const char *path, const char *link,
		   struct cove_err *err)
{
	char mode[8];
	if (flush_pending(w, err) < 0)
		return -1;
	if (e->type != WIRE_ENTRY_FILE && e->type != WIRE_ENTRY_DIR && e->type != WIRE_ENTRY_SYMLINK)
		return err_set(err, COVE_EINTERNAL, "'%s': not a file, a directory or a symlink", path);
	w->total += e->type == WIRE_ENTRY_FILE ? e->size : 0;
	if (++w->count > PORTABLE_MAX_ENTRIES || w->total > PORTABLE_MAX_BYTES)
		return err_set(err, COVE_ETOOBIG, "the tree is over the portable limits (%d entries, %llu bytes)",
			       PORTABLE_MAX_ENTRIES, (unsigned long long)PORTABLE_MAX_BYTES);
	snprintf(mode, sizeof(mode), "%04o", (unsigned)(e->mode & 07777));
	w->pending =
		json_pack("{s:s, s:s, s:I}", "type", type_names[e->type], "mode", mode, "mtime", (json_int_t)e->mtime);
	w->pending_file = e->type == WIRE_ENTRY_FILE;
	if (!w->pending || set_text(w->pending, "path", path, strlen(path)) < 0 ||
	    (e->type == WIRE_ENTRY_SYMLINK && set_text(w->pending, "target", link, strlen(link)) < 0))
		return err_set(err, COVE_EINTERNAL, "out of memory");
	return 0;
}

int portable_data(struct portable_writer *w, const char *buf, size_t len, struct cove_err *err)
{
	return evbuffer_add(w->content, buf, len) == 0 ? 0 : err_set(err, COVE_EINTERNAL, "out of memory");
}

int portable_end(struct portable_writer *w, struct cove_err *err)
{
	if (flush_pending(w, err) < 0)
		return -1;
	return evbuffer_add(w->out, "]}\n", 3) == 0 ? 0 : err_set(err, COVE_EINTERNAL, "out of memory");
}

/* ---- import ---- */

void portable_doc_free(struct portable_doc *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++) {
		free(d->entries[i].path);
		free(d->entries[i].target);
	}
	free(d->entries);
	json_decref(d->json);
	free(d);
}

/* A text field, or its _base64 twin, as a new NUL-terminated string
 * (*ret NULL when neither is there). 0 or -1 with err. */
static int get_text(json_t *j, const char *key, size_t i, char **ret, struct cove_err *err)
{
	char k[32];
	snprintf(k, sizeof(k), "%s_base64", key);
	json_t *t = json_object_get(j, key), *b = json_object_get(j, k);
	*ret = NULL;
	if (t && b)
		return err_set(err, COVE_EINVAL, "files[%zu]: both '%s' and '%s'", i, key, k);
	if ((t && !json_is_string(t)) || (b && !json_is_string(b)))
		return err_set(err, COVE_EINVAL, "files[%zu]: '%s' must be a string", i, t ? key : k);
	if (!t && !b)
		return 0;
	size_t n = json_string_length(t ? t : b);
	char *s = malloc(n + 1);
	long len = !s ? -1 : t ? (long)n : base64_decode(json_string_value(b), n, (unsigned char *)s);
	if (t && s)
		memcpy(s, json_string_value(t), n);
	if (len < 0 || memchr(s, '\0', (size_t)len) || len > WIRE_ENTRY_MAX_PATH) {
		free(s);
		return err_set(err, COVE_EINVAL, "files[%zu]: '%s' is not %s", i, t ? key : k,
			       t ? "a name without NUL bytes, of at most 4095 bytes" : "valid base64 of a name");
	}
	s[len] = '\0';
	*ret = s;
	return 0;
}

static int get_mode(json_t *m, uint32_t def, size_t i, uint32_t *ret, struct cove_err *err)
{
	char *end = NULL;
	long v = !m                   ? (long)def
		 : json_is_integer(m) ? (long)json_integer_value(m)
		 : json_is_string(m)  ? strtol(json_string_value(m), &end, 8)
				      : -1;
	if (v < 0 || v > 07777 || (end && (*end || !json_string_length(m))))
		return err_set(err, COVE_EINVAL,
			       "files[%zu]: 'mode' must be permission bits (0 to 07777), "
			       "an octal string like \"0644\" or a number",
			       i);
	*ret = (uint32_t)v;
	return 0;
}

/* type, mode, mtime, and what a file holds or a symlink points to. */
static int parse_body(json_t *j, size_t i, struct portable_entry *e, struct cove_err *err)
{
	json_t *type = json_object_get(j, "type"), *enc = json_object_get(j, "encoding");
	json_t *content = json_object_get(j, "content"), *mtime = json_object_get(j, "mtime");
	const char *t = type ? json_string_value(type) : "file", *en = enc ? json_string_value(enc) : "utf8";
	e->type = !t                      ? 0
		  : !strcmp(t, "file")    ? WIRE_ENTRY_FILE
		  : !strcmp(t, "dir")     ? WIRE_ENTRY_DIR
		  : !strcmp(t, "symlink") ? WIRE_ENTRY_SYMLINK
					  : 0;
	if (!e->type)
		return err_set(err, COVE_EINVAL, "files[%zu]: 'type' must be \"file\", \"dir\" or \"symlink\"", i);
	uint32_t def = e->type == WIRE_ENTRY_DIR ? 0755 : e->type == WIRE_ENTRY_SYMLINK ? 0777 : 0644;
	if (get_mode(json_object_get(j, "mode"), def, i, &e->mode, err) < 0)
		return -1;
	if (mtime && (!json_is_integer(mtime) || json_integer_value(mtime) < 0))
		return err_set(err, COVE_EINVAL, "files[%zu]: 'mtime' must be unix seconds", i);
	e->mtime = mtime ? (int64_t)json_integer_value(mtime) : (int64_t)time(NULL);
	if (e->type != WIRE_ENTRY_FILE && (content || enc))
		return err_set(err, COVE_EINVAL, "files[%zu]: a %s has no 'content' or 'encoding'", i, t);
	if (e->type == WIRE_ENTRY_SYMLINK ? get_text(j, "target", i, &e->target, err) < 0 || !e->target || !e->target[0]
					  : json_object_get(j, "target") || json_object_get(j, "target_base64"))
		return err->code ? -1
				 : err_set(err, COVE_EINVAL,
					   "files[%zu]: only a symlink has a 'target', "
					   "and a symlink needs one",
					   i);
	if (!en || (strcmp(en, "utf8") != 0 && strcmp(en, "base64") != 0))
		return err_set(err, COVE_EINVAL, "files[%zu]: 'encoding' must be \"utf8\" or \"base64\"", i);
	if (content && !json_is_string(content))
		return err_set(err, COVE_EINVAL, "files[%zu]: 'content' must be a string", i);
	e->base64 = strcmp(en, "base64") == 0;
	e->content = content ? json_string_value(content) : "";
	e->content_len = content ? json_string_length(content) : 0;
	e->size = e->content_len;
	if (e->base64) {
		_cleanup_free_ unsigned char *buf = malloc(e->content_len / 4 * 3 + 1);
		long n = buf ? base64_decode(e->content, e->content_len, buf) : -1;
		if (n < 0)
			return err_set(err, COVE_EINVAL, "files[%zu]: 'content' is not valid base64", i);
		e->size = (uint64_t)n;
	}
	return 0;
}

static int parse_entry(json_t *j, size_t i, struct portable_entry *e, struct cove_err *err)
{
	static const char *const known[] = { "path",     "path_base64", "type",   "mode",          "mtime",
					     "encoding", "content",     "target", "target_base64", NULL };
	const char *key;
	json_t *v;
	char *name;
	if (!json_is_object(j))
		return err_set(err, COVE_EINVAL, "files[%zu] must be an object", i);
	json_object_foreach(j, key, v)
	{
		size_t k = 0;
		while (known[k] && strcmp(known[k], key) != 0)
			k++;
		if (!known[k])
			return err_set(err, COVE_EINVAL, "files[%zu]: unknown field '%.64s'", i, key);
	}
	if (get_text(j, "path", i, &name, err) < 0)
		return -1;
	if (!name)
		return err_set(err, COVE_EINVAL, "files[%zu]: 'path' is required", i);
	e->path = malloc(WIRE_ENTRY_MAX_PATH + 1);
	int r = e->path ? wire_entry_path_normalize(name, e->path, WIRE_ENTRY_MAX_PATH + 1) : -ENOMEM;
	if (r != 0)
		err_set(err, COVE_EINVAL, "files[%zu]: path '%.200s' %s", i, name,
			r == -EINVAL ? "leaves the folder ('..')"
			: r == 1     ? "names the folder itself"
				     : "is too long");
	free(name);
	return r != 0 ? -1 : parse_body(j, i, e, err);
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct portable_entry *)a)->path, ((const struct portable_entry *)b)->path);
}

/* Sorted, so a duplicate is next to its twin and a folder comes before
 * what it holds: each entry's parents are checked against those before it. */
static int check_tree(struct portable_doc *d, struct cove_err *err)
{
	_cleanup_free_ char *prefix = malloc(WIRE_ENTRY_MAX_PATH + 1);
	json_t *kinds = json_object(); /* path -> type, of what is not a dir */
	int r = prefix && kinds ? 0 : err_set(err, COVE_EINTERNAL, "out of memory");
	qsort(d->entries, d->n, sizeof(*d->entries), by_path);
	for (size_t i = 0; r == 0 && i < d->n; i++) {
		const char *p = d->entries[i].path;
		if (i > 0 && strcmp(p, d->entries[i - 1].path) == 0)
			r = err_set(err, COVE_EINVAL, "path '%.200s' is in the document twice", p);
		for (const char *s = strchr(p, '/'); r == 0 && s; s = strchr(s + 1, '/')) {
			snprintf(prefix, WIRE_ENTRY_MAX_PATH + 1, "%.*s", (int)(s - p), p);
			json_t *k = json_object_get(kinds, prefix);
			if (k)
				r = err_set(err, COVE_EINVAL, "path '%.200s' goes through the %s '%.200s'", p,
					    json_integer_value(k) == WIRE_ENTRY_SYMLINK ? "symlink" : "file", prefix);
		}
		if (r == 0 && d->entries[i].type != WIRE_ENTRY_DIR)
			json_object_set_new(kinds, p, json_integer(d->entries[i].type));
	}
	json_decref(kinds);
	return r;
}

static int parse_files(struct portable_doc *d, json_t *files, struct cove_err *err)
{
	uint64_t total = 0;
	if (!json_is_array(files))
		return err_set(err, COVE_EINVAL, "'files' must be an array");
	if (json_array_size(files) > PORTABLE_MAX_ENTRIES)
		return err_set(err, COVE_ETOOBIG, "more than %d entries", PORTABLE_MAX_ENTRIES);
	d->entries = calloc(json_array_size(files) + 1, sizeof(*d->entries));
	if (!d->entries)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	for (size_t i = 0; i < json_array_size(files); i++) {
		d->n = i + 1; /* freed with the document, whatever was parsed */
		if (parse_entry(json_array_get(files, i), i, &d->entries[i], err) < 0)
			return -1;
		if ((total += d->entries[i].size) > PORTABLE_MAX_BYTES)
			return err_set(err, COVE_ETOOBIG, "the files' contents are over %llu bytes",
				       (unsigned long long)PORTABLE_MAX_BYTES);
	}
	return check_tree(d, err);
}

int portable_parse(const char *text, size_t len, struct portable_doc **ret, struct cove_err *err)
{
	json_error_t je;
	const char *key;
	json_t *v;
	struct portable_doc *d = calloc(1, sizeof(*d));
	json_t *j = d ? json_loadb(text, len, JSON_REJECT_DUPLICATES, &je) : NULL;
	int r = 0;
	if (!d)
		r = err_set(err, COVE_EINTERNAL, "out of memory");
	else if (!json_is_object(j))
		r = err_set(err, COVE_EINVAL, "not a portable snapshot: %s",
			    j ? "the body must be a JSON object" : je.text);
	json_object_foreach(j, key, v)
	{
		if (r == 0 && strcmp(key, "version") != 0 && strcmp(key, "files") != 0 && strcmp(key, "base") != 0)
			r = err_set(err, COVE_EINVAL, "unknown field '%.64s'", key);
	}
	json_t *base = json_object_get(j, "base");
	if (r == 0 && base && !(json_is_string(base) && strcmp(json_string_value(base), "/") == 0))
		r = err_set(err, COVE_EINVAL, "'base' must be \"/\" (a sandbox's changes), or absent (a folder's files)");
	if (d)
		d->whole = base != NULL;
	json_t *version = json_object_get(j, "version");
	if (r == 0 && (!json_is_integer(version) || json_integer_value(version) != PORTABLE_VERSION))
		r = err_set(err, COVE_EINVAL, "'version' must be %d", PORTABLE_VERSION);
	if (d)
		d->json = j;
	if (r == 0)
		r = parse_files(d, json_object_get(j, "files"), err);
	if (r < 0 || !d) {
		if (d)
			portable_doc_free(d);
		else
			json_decref(j);
		return -1;
	}
	*ret = d;
	return 0;
}

int portable_content(const struct portable_entry *e, struct evbuffer *out)
{
	if (!e->base64)
		return evbuffer_add(out, e->content, e->content_len);
	_cleanup_free_ unsigned char *buf = malloc(e->content_len / 4 * 3 + 1);
	long n = buf ? base64_decode(e->content, e->content_len, buf) : -1;
	return n < 0 ? -1 : evbuffer_add(out, buf, (size_t)n);
}

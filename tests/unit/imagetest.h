/* Image test helpers: tars and layers built with libarchive, as the image
 * tests' inputs (test_image.c, test_registry.c). */
#pragma once
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "image/digest.h"
#include "image/image.h"

/* The tables of members name only the fields they need. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* ---- building tars ---- */

struct buf {
	char *p;
	size_t n;
};

enum { GZ = 1, ZST = 2 };

static inline struct archive *tar_new(const char *file, int filter)
{
	struct archive *a = archive_write_new();
	archive_write_set_format_pax_restricted(a);
	if (filter == GZ)
		archive_write_add_filter_gzip(a);
	else if (filter == ZST)
		archive_write_add_filter_zstd(a);
	if (archive_write_open_filename(a, file) != ARCHIVE_OK) {
		printf("# archive: %s\n", archive_error_string(a));
		exit(1);
	}
	return a;
}

struct member {
	const char *name;
	mode_t type; /* S_IFREG, S_IFDIR, S_IFLNK, S_IFIFO, S_IFCHR; 0: a hard link to link */
	mode_t mode;
	int uid, gid;
	const char *data; /* file contents, or the link target */
	const char *xname;
	const void *xvalue;
	size_t xsize;
};

static inline void tar_add(struct archive *a, const struct member *m)
{
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, m->name);
	archive_entry_set_uid(e, m->uid);
	archive_entry_set_gid(e, m->gid);
	archive_entry_set_mtime(e, 1700000000, 0);
	if (m->type == 0) {
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_hardlink(e, m->data);
	} else {
		archive_entry_set_filetype(e, m->type);
	}
	archive_entry_set_perm(e, m->mode ? m->mode : 0644);
	if (m->type == S_IFLNK)
		archive_entry_set_symlink(e, m->data);
	if (m->type == S_IFCHR)
		archive_entry_set_rdev(e, makedev(1, 3));
	size_t len = m->type == S_IFREG && m->data ? strlen(m->data) : 0;
	archive_entry_set_size(e, (la_int64_t)len);
	if (m->xname)
		archive_entry_xattr_add_entry(e, m->xname, m->xvalue, m->xsize);
	archive_write_header(a, e);
	if (len)
		archive_write_data(a, m->data, len);
	archive_entry_free(e);
}

static inline struct buf slurp(const char *file)
{
	struct buf b = { 0 };
	FILE *f = fopen(file, "rb");
	fseek(f, 0, SEEK_END);
	b.n = (size_t)ftell(f);
	rewind(f);
	b.p = malloc(b.n + 1);
	b.n = fread(b.p, 1, b.n, f);
	b.p[b.n] = '\0';
	fclose(f);
	return b;
}

/* A layer tar of the members (up to the one with no name), made in the
 * scratch file file. */
static inline struct buf layer_at(const char *file, const struct member *ms, int filter)
{
	struct archive *a = tar_new(file, filter);
	for (; ms->name; ms++)
		tar_add(a, ms);
	archive_write_close(a);
	archive_write_free(a);
	struct buf b = slurp(file);
	unlink(file);
	return b;
}

/* A layer uncompressed. */
static inline struct buf uncompressed(struct buf b)
{
	struct buf out = { NULL, 0 };
	size_t cap = 0;
	struct archive *a = archive_read_new();
	archive_read_support_filter_all(a);
	archive_read_support_format_raw(a);
	archive_read_open_memory(a, b.p, b.n);
	struct archive_entry *e;
	archive_read_next_header(a, &e);
	la_ssize_t n;
	do {
		if (cap - out.n < 65536)
			out.p = realloc(out.p, cap = 2 * cap + 65536);
		n = archive_read_data(a, out.p + out.n, cap - out.n);
		out.n += n > 0 ? (size_t)n : 0;
	} while (n > 0);
	archive_read_free(a);
	return out;
}

/* The digest of the uncompressed tar, for a config's diff_ids. */
static inline void diff_id(struct buf b, char out[DIGEST_STR_MAX])
{
	struct buf raw = uncompressed(b);
	digest_of(raw.p, raw.n, out);
	free(raw.p);
}

/* Names in a folder, sorted into one string, to compare before and after. */
static inline char *listing(const char *dir)
{
	struct dirent **es;
	int n = scandir(dir, &es, NULL, alphasort);
	size_t cap = 64 + (n > 0 ? (size_t)n * 80 : 0);
	char *s = calloc(1, cap);
	for (int i = 0; i < n; i++) {
		if (es[i]->d_name[0] != '.' || strncmp(es[i]->d_name, ".tmp", 4) == 0)
			snprintf(s + strlen(s), cap - strlen(s), "%s ", es[i]->d_name);
		free(es[i]);
	}
	free(es);
	return s;
}

/* The names of a store's blobs and trees, to compare before and after an
 * operation that must leave nothing behind. */
static inline char *store_names(const struct image_store *s)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/blobs/sha256", s->images);
	char *b = listing(path), *l = listing(s->layers);
	size_t n = strlen(b) + strlen(l) + 4;
	char *all = malloc(n);
	snprintf(all, n, "%s | %s", b, l);
	free(b);
	free(l);
	return all;
}

/* After an operation that must have been refused: r and err as expected,
 * and the store's names as before (which is freed). Needs tap.h. */
static inline void check_refused(const char *what, int r, const struct cove_err *err, int code, const char *expect,
				 const struct image_store *s, char *before)
{
	char *after = store_names(s);
	CHECK1(r < 0 && err->code == code && strstr(err->msg, expect), "%s: refused (%s)", what, err->msg);
	CHECK1(strcmp(before, after) == 0, "%s: nothing left behind", what);
	free(before);
	free(after);
}

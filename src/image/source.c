#include "image/source.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/io.h"
#include "common/wire.h"
#include "image/image.h"

#define SOURCE_READ_BLOCK (128 << 10)
#define SOURCE_LINK_DEPTH 8

int source_note_added(struct source *src, const char *digest)
{
	if (src->n_added == src->cap_added) {
		size_t cap = src->cap_added ? 2 * src->cap_added : 16;
		void *a = realloc(src->added, cap * sizeof(*src->added));
		if (!a)
			return -ENOMEM;
		src->added = a;
		src->cap_added = cap;
	}
	memcpy(src->added[src->n_added++], digest, DIGEST_STR_MAX);
	return 0;
}

int source_open_dir(struct source *src, const struct blob_store *bs, const char *path, struct cove_err *err)
{
	*src = (struct source){ .bs = bs, .dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC) };
	return src->dirfd < 0 ? err_sys(err, errno, "open '%s'", path) : 0;
}

void source_free(struct source *src)
{
	if (src->dirfd >= 0)
		close(src->dirfd);
	for (size_t i = 0; i < src->n; i++) {
		free(src->m[i].name);
		free(src->m[i].link);
	}
	free(src->m);
	free(src->added);
	*src = (struct source){ .dirfd = -1 };
}

static struct source_member *find(struct source *src, const char *name)
{
	for (size_t i = 0; i < src->n; i++)
		if (strcmp(src->m[i].name, name) == 0)
			return &src->m[i];
	return NULL;
}

/* A symlink's target (relative to the folder of the member at name) as a
 * member name; -EINVAL if it leaves the archive. The names are split into
 * their components, ".." drops the last one kept. */
static int resolve_link(const char *name, const char *target, char out[WIRE_ENTRY_MAX_PATH + 1])
{
	char joined[2 * WIRE_ENTRY_MAX_PATH + 2];
	const char *parts[WIRE_ENTRY_MAX_PATH / 2 + 1];
	size_t lens[WIRE_ENTRY_MAX_PATH / 2 + 1], k = 0;
	const char *slash = strrchr(name, '/');
	if (target[0] == '/')
		return -EINVAL;
	snprintf(joined, sizeof(joined), "%.*s%s%s", slash ? (int)(slash - name) : 0, name, slash ? "/" : "", target);
	char *save;
	for (char *tok = strtok_r(joined, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
		if (strcmp(tok, "..") == 0 && k == 0)
			return -EINVAL;
		if (strcmp(tok, "..") == 0)
			k--;
		else if (strcmp(tok, ".") != 0 && k < ARRAY_SIZE(parts)) {
			parts[k] = tok;
			lens[k++] = strlen(tok);
		}
	}
	out[0] = '\0';
	for (size_t i = 0, n = 0; i < k; i++) {
		if (n + lens[i] + 2 > WIRE_ENTRY_MAX_PATH + 1)
			return -ENAMETOOLONG;
		n += (size_t)sprintf(out + n, "%s%s", i ? "/" : "", parts[i]);
	}
	return k ? 0 : -EINVAL;
}

static int add_member(struct source *src, const char *name, const char *link, const char *digest, struct cove_err *err)
{
	if (find(src, name))
		return err_set(err, COVE_EINVAL, "archive: '%.200s' is in it twice", name);
	if (src->n == SOURCE_MEMBERS_MAX)
		return err_set(err, COVE_EINVAL, "archive: more than %d members", SOURCE_MEMBERS_MAX);
	if (src->n == src->cap) {
		size_t cap = src->cap ? 2 * src->cap : 32;
		void *m = realloc(src->m, cap * sizeof(*src->m));
		if (!m)
			return err_sys(err, ENOMEM, "archive");
		src->m = m;
		src->cap = cap;
	}
	struct source_member *m = &src->m[src->n];
	*m = (struct source_member){ .name = strdup(name), .link = link ? strdup(link) : NULL };
	if (!m->name || (link && !m->link)) {
		free(m->name);
		free(m->link);
		return err_sys(err, ENOMEM, "archive");
	}
	if (digest)
		memcpy(m->digest, digest, DIGEST_STR_MAX);
	src->n++;
	return 0;
}

static int store_member(struct source *src, struct archive *a, char ret[DIGEST_STR_MAX], struct cove_err *err)
{
	struct blob_writer w;
	bool fresh;
	if (blob_writer_begin(src->bs, &w, IMAGE_BLOB_MAX, err) < 0)
		return -1;
	const void *buf;
	size_t n;
	la_int64_t off;
	int r;
	while ((r = archive_read_data_block(a, &buf, &n, &off)) == ARCHIVE_OK) {
		/* A sparse member's holes are not kept: blobs are not sparse. */
		if ((uint64_t)off != w.size || blob_writer_write(&w, buf, n, err) < 0) {
			blob_writer_abort(&w);
			return err_set(err, COVE_EINVAL, "archive: a sparse member");
		}
	}
	if (r != ARCHIVE_EOF) {
		blob_writer_abort(&w);
		return err_set(err, COVE_EINVAL, "archive: %s", archive_error_string(a));
	}
	if (blob_writer_commit(src->bs, &w, NULL, -1, ret, &fresh, err) < 0)
		return -1;
	if (fresh && source_note_added(src, ret) < 0)
		return err_sys(err, ENOMEM, "archive");
	return 0;
}

static int scan_member(struct source *src, struct archive *a, struct archive_entry *e, struct cove_err *err)
{
	char name[WIRE_ENTRY_MAX_PATH + 1], link[WIRE_ENTRY_MAX_PATH + 1], digest[DIGEST_STR_MAX];
	const char *raw = archive_entry_pathname(e);
	int r = raw ? wire_entry_path_normalize(raw, name, sizeof(name)) : -EINVAL;
	if (r == 1)
		return 0;
	if (r < 0)
		return err_set(err, COVE_EINVAL, "archive: bad member name '%.200s'", raw ? raw : "");
	const char *hard = archive_entry_hardlink(e);
	if (hard) {
		if (wire_entry_path_normalize(hard, link, sizeof(link)) != 0)
			return err_set(err, COVE_EINVAL, "archive: '%s': bad hard link target", name);
		return add_member(src, name, link, NULL, err);
	}
	switch (archive_entry_filetype(e)) {
	case AE_IFREG:
		if (store_member(src, a, digest, err) < 0)
			return -1;
		return add_member(src, name, NULL, digest, err);
	case AE_IFLNK:
		if (!archive_entry_symlink(e) || resolve_link(name, archive_entry_symlink(e), link) < 0)
			return err_set(err, COVE_EINVAL, "archive: '%s': a symlink out of the archive", name);
		return add_member(src, name, link, NULL, err);
	default:
		return 0; /* folders and the like: nothing an image is read from */
	}
}

int source_open_tar(struct source *src, const struct blob_store *bs, int fd, struct cove_err *err)
{
	*src = (struct source){ .bs = bs, .dirfd = -1 };
	struct archive *a = archive_read_new();
	if (!a)
		return err_sys(err, ENOMEM, "archive");
	struct archive_entry *e;
	int r = -1;
	if (archive_read_support_filter_all(a) != ARCHIVE_OK || archive_read_support_format_tar(a) != ARCHIVE_OK ||
	    archive_read_open_fd(a, fd, SOURCE_READ_BLOCK) != ARCHIVE_OK) {
		err_set(err, COVE_EINVAL, "not a tar: %s", archive_error_string(a));
		goto out;
	}
	while ((r = archive_read_next_header(a, &e)) == ARCHIVE_OK || r == ARCHIVE_WARN)
		if (scan_member(src, a, e, err) < 0)
			goto out;
	r = r == ARCHIVE_EOF ? 0 : err_set(err, COVE_EINVAL, "bad tar: %s", archive_error_string(a));
out:
	archive_read_free(a);
	return r < 0 ? -1 : 0;
}

bool source_has(struct source *src, const char *name)
{
	if (src->dirfd < 0)
		return find(src, name) != NULL;
	struct stat st;
	return fstatat(src->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static int dir_blob(struct source *src, const char *name, char ret[DIGEST_STR_MAX], struct cove_err *err)
{
	/* In the folder only: its symlinks are followed as if it were /. */
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV };
	_cleanup_close_ int fd = io_openat2(src->dirfd, name, &how);
	if (fd < 0)
		return err_set(err, fd == -ENOENT ? COVE_ENOTFOUND : -fd, "'%s': %s", name, strerror(-fd));
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return err_set(err, COVE_EINVAL, "'%s' is not a file", name);
	bool fresh;
	if (blob_put_fd(src->bs, fd, IMAGE_BLOB_MAX, NULL, -1, ret, &fresh, err) < 0)
		return -1;
	if (fresh && source_note_added(src, ret) < 0)
		return err_sys(err, ENOMEM, "import");
	return 0;
}

int source_blob(struct source *src, const char *name, char ret[DIGEST_STR_MAX], struct cove_err *err)
{
	char norm[WIRE_ENTRY_MAX_PATH + 1];
	if (!name || wire_entry_path_normalize(name, norm, sizeof(norm)) != 0)
		return err_set(err, COVE_EINVAL, "bad member name '%.200s'", name ? name : "");
	if (src->dirfd >= 0)
		return dir_blob(src, norm, ret, err);
	struct source_member *m = find(src, norm);
	for (int depth = 0; m && m->link && depth < SOURCE_LINK_DEPTH; depth++)
		m = find(src, m->link);
	if (!m || m->link)
		return err_set(err, COVE_ENOTFOUND, "'%s' is not in the archive", norm);
	memcpy(ret, m->digest, DIGEST_STR_MAX);
	return 0;
}

#include "image/blobs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/io.h"

#define BLOB_COPY_BLOCK (128 << 10)

static int mkdir_at(int dfd, const char *name)
{
	return mkdirat(dfd, name, 0700) < 0 && errno != EEXIST ? -errno : 0;
}

int blobs_open(struct blob_store *bs, const char *images_dir, struct cove_err *err)
{
	bs->dirfd = -1;
	if (mkdir(images_dir, 0700) < 0 && errno != EEXIST)
		return err_sys(err, errno, "mkdir '%s'", images_dir);
	_cleanup_close_ int img = open(images_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (img < 0 || mkdir_at(img, "blobs") < 0)
		return err_sys(err, errno, "open '%s/blobs'", images_dir);
	_cleanup_close_ int blobs = openat(img, "blobs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (blobs < 0 || mkdir_at(blobs, "sha256") < 0)
		return err_sys(err, errno, "open '%s/blobs'", images_dir);
	bs->dirfd = openat(blobs, "sha256", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (bs->dirfd < 0)
		return err_sys(err, errno, "open '%s/blobs/sha256'", images_dir);
	return 0;
}

void blobs_close(struct blob_store *bs)
{
	if (bs->dirfd >= 0)
		close(bs->dirfd);
	bs->dirfd = -1;
}

int blob_writer_begin(const struct blob_store *bs, struct blob_writer *w, uint64_t max, struct cove_err *err)
{
	w->fd = openat(bs->dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (w->fd < 0)
		return err_sys(err, errno, "make a blob file");
	digest_init(&w->hash);
	w->size = 0;
	w->max = max;
	return 0;
}

int blob_writer_write(struct blob_writer *w, const void *buf, size_t n, struct cove_err *err)
{
	if (n > w->max - w->size)
		return err_set(err, COVE_ETOOBIG, "blob larger than %llu bytes", (unsigned long long)w->max);
	int r = io_write_all(w->fd, buf, n);
	if (r < 0)
		return err_sys(err, -r, "write blob");
	digest_update(&w->hash, buf, n);
	w->size += n;
	return 0;
}

void blob_writer_abort(struct blob_writer *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
}

/* Give the unnamed file its name. linkat through /proc/self/fd (with
 * AT_SYMLINK_FOLLOW) needs no CAP_DAC_READ_SEARCH, as AT_EMPTY_PATH would. */
static int blob_link(const struct blob_store *bs, int fd, const char *hex, bool *ret_new)
{
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, proc, bs->dirfd, hex, AT_SYMLINK_FOLLOW) < 0) {
		if (errno != EEXIST)
			return -errno;
		*ret_new = false; /* the same bytes, stored before */
		return 0;
	}
	*ret_new = true;
	return fsync(bs->dirfd) < 0 ? -errno : 0;
}

int blob_writer_commit(const struct blob_store *bs, struct blob_writer *w, const char *want, int64_t want_size,
		       char ret_digest[DIGEST_STR_MAX], bool *ret_new, struct cove_err *err)
{
	char got[DIGEST_STR_MAX];
	bool fresh = false;
	int r = -1;
	digest_final(&w->hash, got);
	if (want_size >= 0 && w->size != (uint64_t)want_size)
		err_set(err, COVE_EINVAL, "blob %s: size %llu, expected %lld", want ? want : got,
			(unsigned long long)w->size, (long long)want_size);
	else if (want && strcmp(want, got) != 0)
		err_set(err, COVE_EINVAL, "digest mismatch: expected %s, got %s", want, got);
	else if (fchmod(w->fd, 0600) < 0 || fsync(w->fd) < 0)
		err_sys(err, errno, "write blob %s", got);
	else if ((r = blob_link(bs, w->fd, digest_hex(got), &fresh)) < 0)
		err_sys(err, -r, "store blob %s", got);
	blob_writer_abort(w);
	if (r < 0)
		return -1;
	if (ret_digest)
		memcpy(ret_digest, got, DIGEST_STR_MAX);
	if (ret_new)
		*ret_new = fresh;
	return 0;
}

int blob_put_fd(const struct blob_store *bs, int fd, uint64_t max, const char *want, int64_t want_size,
		char ret_digest[DIGEST_STR_MAX], bool *ret_new, struct cove_err *err)
{
	struct blob_writer w;
	if (blob_writer_begin(bs, &w, max, err) < 0)
		return -1;
	_cleanup_free_ char *buf = malloc(BLOB_COPY_BLOCK);
	if (!buf) {
		blob_writer_abort(&w);
		return err_sys(err, ENOMEM, "copy blob");
	}
	for (;;) {
		ssize_t n = read(fd, buf, BLOB_COPY_BLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			blob_writer_abort(&w);
			return err_sys(err, errno, "read blob");
		}
		if (n == 0)
			break;
		if (blob_writer_write(&w, buf, (size_t)n, err) < 0) {
			blob_writer_abort(&w);
			return -1;
		}
	}
	return blob_writer_commit(bs, &w, want, want_size, ret_digest, ret_new, err);
}

int blob_open(const struct blob_store *bs, const char *digest)
{
	if (!digest_valid(digest))
		return -EINVAL;
	int fd = openat(bs->dirfd, digest_hex(digest), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

bool blob_exists(const struct blob_store *bs, const char *digest)
{
	struct stat st;
	return digest_valid(digest) && fstatat(bs->dirfd, digest_hex(digest), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       S_ISREG(st.st_mode);
}

int blob_read_all(const struct blob_store *bs, const char *digest, size_t max, char **ret, size_t *ret_len,
		  struct cove_err *err)
{
	_cleanup_close_ int fd = blob_open(bs, digest);
	if (fd < 0)
		return err_sys(err, -fd, "open blob %s", digest);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return err_sys(err, errno, "stat blob %s", digest);
	if ((uint64_t)st.st_size > max)
		return err_set(err, COVE_ETOOBIG, "blob %s: %lld bytes, at most %zu expected", digest,
			       (long long)st.st_size, max);
	_cleanup_free_ char *buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return err_sys(err, ENOMEM, "read blob %s", digest);
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return err_sys(err, n < 0 ? errno : EIO, "read blob %s", digest);
		got += (size_t)n;
	}
	buf[got] = '\0';
	*ret_len = got;
	*ret = TAKE_PTR(buf);
	return 0;
}

int blob_remove(const struct blob_store *bs, const char *digest)
{
	if (!digest_valid(digest))
		return -EINVAL;
	return unlinkat(bs->dirfd, digest_hex(digest), 0) < 0 ? -errno : 0;
}

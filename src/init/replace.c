/* A file replaced whole (init/init.h, replace_open and replace_commit).
 *
 * A write over an existing file in place truncates it first: cut short (the
 * client gone mid-body, coved killed, the disk full) it leaves neither the
 * old content nor the new. So the new content goes into an unnamed file in
 * the same directory (O_TMPFILE), which exists only while an fd holds it,
 * and is renamed over the name once whole: until then the old file is as
 * it was, and whatever cuts the write short leaves nothing behind. The
 * name it is linked under for the rename lives for two system calls. A
 * symlink is made so too. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/wire.h"
#include "init/init.h"

#define REPLACE_TRIES 8 /* names tried for the link before the rename */

int replace_open(int dirfd, mode_t mode, const struct stat *old)
{
	int fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, mode & 07777);
	if (fd < 0)
		return -errno;
	/* The owner first: a chown clears the setuid and setgid bits. */
	int r = 0;
	if (old && (old->st_uid != geteuid() || old->st_gid != getegid()) && fchown(fd, old->st_uid, old->st_gid) < 0)
		r = -errno;
	if (r == 0 && fchmod(fd, mode & 07777) < 0)
		r = -errno;
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

/* What make makes (the new file linked, or a symlink) at base when nothing
 * is there; else under a passing name in dirfd, renamed over base. */
static int make_and_rename(int dirfd, const char *base, int (*make)(int, const char *, const void *), const void *arg)
{
	char tmp[64];
	uint32_t rnd;
	int r = make(dirfd, base, arg);
	if (r != -EEXIST)
		return r;
	for (int i = 0; i < REPLACE_TRIES && r == -EEXIST; i++) {
		if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
			return -errno;
		snprintf(tmp, sizeof(tmp), WIRE_PASSING_PREFIX "%08x", rnd);
		r = make(dirfd, tmp, arg);
	}
	if (r < 0)
		return r;
	if (renameat(dirfd, tmp, dirfd, base) < 0) {
		r = -errno;
		(void)unlinkat(dirfd, tmp, 0);
	}
	return r;
}

/* /proc/self/fd/N followed: linkat with AT_EMPTY_PATH would need
 * CAP_DAC_READ_SEARCH, which a sandbox's user has not. */
static int link_fd(int dirfd, const char *name, const void *arg)
{
	return linkat(AT_FDCWD, arg, dirfd, name, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
}

static int make_symlink(int dirfd, const char *name, const void *arg)
{
	return symlinkat(arg, dirfd, name) < 0 ? -errno : 0;
}

int replace_commit(int fd, int dirfd, const char *base)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	return make_and_rename(dirfd, base, link_fd, link);
}

int replace_symlink(const char *target, int dirfd, const char *base)
{
	return make_and_rename(dirfd, base, make_symlink, target);
}

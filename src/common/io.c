#include "common/io.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

static long io_faults_eio;

void io_fault_arm_eio(long n)
{
	__atomic_store_n(&io_faults_eio, n, __ATOMIC_SEQ_CST);
}

bool io_fault_eio(void)
{
	long left = __atomic_load_n(&io_faults_eio, __ATOMIC_RELAXED);
	while (left > 0)
		if (__atomic_compare_exchange_n(&io_faults_eio, &left, left - 1, false, __ATOMIC_SEQ_CST,
						__ATOMIC_RELAXED))
			return true;
	return false;
}

int io_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	if (io_fault_eio())
		return -EIO;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int io_openat2(int dirfd, const char *path, const struct open_how *how)
{
	/* Each try fails only if something changed the machine's mounts or
	 * names during it: a bound keeps a pathological host from spinning. */
	for (int tries = 1;; tries++) {
		int fd = (int)syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
		if (fd >= 0)
			return fd;
		if (errno != EAGAIN || tries == 1000)
			return -errno;
	}
}

int io_mkdir_p(const char *path, mode_t mode)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s", path);
	for (char *s = p + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			if (mkdir(p, 0755) < 0 && errno != EEXIST)
				return -errno;
			*s = '/';
		}
	if (mkdir(p, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

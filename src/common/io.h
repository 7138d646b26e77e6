/* Small IO helpers shared by the daemon and the CLI. */
#pragma once
#include <stddef.h>
#include <sys/types.h>

/* Write all of buf to fd, retrying short writes and EINTR. 0 or -errno. */
int io_write_all(int fd, const void *buf, size_t len);

struct open_how;
/* openat2(2), tried again while it answers EAGAIN: with RESOLVE_IN_ROOT or
 * RESOLVE_BENEATH, a ".." resolved while a rename or a mount happened
 * anywhere on the machine makes the kernel refuse rather than risk an
 * escape, and a new try resolves anew (a busy host, making sandboxes, does
 * that often). An fd, or -errno. */
int io_openat2(int dirfd, const char *path, const struct open_how *how);
/* mkdir -p: the parents 0755, the last component mode. 0 or -errno. */
int io_mkdir_p(const char *path, mode_t mode);

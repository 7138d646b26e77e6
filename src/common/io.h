/* Small IO helpers shared by the daemon and the CLI. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Write all of buf to fd, retrying short writes and EINTR. 0 or -errno. */
int io_write_all(int fd, const void *buf, size_t len);

/* Fault injection for tests only (as SQLite's tests fail its VFS on
 * command): after io_fault_arm_eio(n) the next n writes of the paths that
 * ask io_fault_eio() (io_write_all, the Files API's bodies) fail with EIO.
 * Only coved started with COVE_TEST_FAULTS in its environment arms it
 * (src/daemon/main.c); otherwise the count stays 0. Thread-safe. */
void io_fault_arm_eio(long n);
/* True when this write must fail with EIO (one of the n armed is used). */
bool io_fault_eio(void);

struct open_how;
/* openat2(2), tried again while it answers EAGAIN: with RESOLVE_IN_ROOT or
 * RESOLVE_BENEATH, a ".." resolved while a rename or a mount happened
 * anywhere on the machine makes the kernel refuse rather than risk an
 * escape, and a new try resolves anew (a busy host, making sandboxes, does
 * that often). An fd, or -errno. */
int io_openat2(int dirfd, const char *path, const struct open_how *how);
/* mkdir -p: the parents 0755, the last component mode. 0 or -errno. */
int io_mkdir_p(const char *path, mode_t mode);

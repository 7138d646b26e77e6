/* Small IO helpers shared by the daemon and the CLI. */
#pragma once
#include <stddef.h>

/* Write all of buf to fd, retrying short writes and EINTR. 0 or -errno. */
int io_write_all(int fd, const void *buf, size_t len);

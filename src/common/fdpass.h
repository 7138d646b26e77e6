/* File descriptors riding on a unix socket message as SCM_RIGHTS, the way
 * coved and cove-init pass them to each other. */
#pragma once
#include <sys/socket.h>

/* Make m carry fds[0..n) in cbuf, which must hold CMSG_SPACE(sizeof(int) * n)
 * bytes; nothing when n is 0. */
void fdpass_attach(struct msghdr *m, void *cbuf, const int *fds, int n);
/* The fds a received m carried: the first max into fds, the rest closed.
 * Returns how many went into fds. */
int fdpass_take(struct msghdr *m, int *fds, int max);

#include "common/fdpass.h"

#include <string.h>
#include <unistd.h>

void fdpass_attach(struct msghdr *m, void *cbuf, const int *fds, int n)
{
	if (n <= 0)
		return;
	m->msg_control = cbuf;
	m->msg_controllen = CMSG_SPACE(sizeof(int) * n);
	struct cmsghdr *c = CMSG_FIRSTHDR(m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
}

int fdpass_take(struct msghdr *m, int *fds, int max)
{
	int n = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (n < max)
				fds[n++] = fd;
			else
				close(fd);
		}
	}
	return n;
}

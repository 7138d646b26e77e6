/* Unit tests for src/common/fdpass.c: fds sent with fdpass_attach arrive
 * with fdpass_take, in order and usable; those beyond max are closed. */
#include "common/fdpass.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"

/* Send n pipe write ends over a socket pair; receive with max; the
 * received ones must write into their pipes, in order. */
static void send_and_take(int n, int max)
{
	int sp[2], pipes[4][2], sent[4], got[4] = { -1, -1, -1, -1 };
	char cbuf[CMSG_SPACE(sizeof(int) * 4)], rbuf[CMSG_SPACE(sizeof(int) * 4)], byte = 'x';
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0, "socketpair");
	for (int i = 0; i < n; i++) {
		CHECK(pipe2(pipes[i], O_CLOEXEC | O_NONBLOCK) == 0, "pipe %d", i);
		sent[i] = pipes[i][1];
	}
	struct iovec iov = { &byte, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	fdpass_attach(&m, cbuf, sent, n);
	CHECK(sendmsg(sp[0], &m, 0) == 1, "sent %d fds", n);
	for (int i = 0; i < n; i++)
		close(pipes[i][1]); /* only the received copies hold the write ends now */
	struct msghdr r = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = rbuf, .msg_controllen = sizeof(rbuf) };
	CHECK(recvmsg(sp[1], &r, MSG_CMSG_CLOEXEC) == 1, "received");
	int k = fdpass_take(&r, got, max);
	CHECK(k == (n < max ? n : max), "%d of %d fds taken with max %d", k, n, max);
	for (int i = 0; i < n; i++) {
		char c = 0;
		if (i < k) {
			CHECK(write(got[i], "abcd" + i, 1) == 1 && read(pipes[i][0], &c, 1) == 1 && c == "abcd"[i],
			      "fd %d reaches its own pipe", i);
			close(got[i]);
		}
		/* past max (or once closed here): the pipe's last writer is gone */
		CHECK(read(pipes[i][0], &c, 1) == 0, "pipe %d has no writer left", i);
		close(pipes[i][0]);
	}
	close(sp[0]);
	close(sp[1]);
}

int main(void)
{
	send_and_take(0, 4);
	send_and_take(3, 4);
	send_and_take(4, 2);
	return tap_done();
}

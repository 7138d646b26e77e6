/* portbench's fast server: HTTP/1.1 keep-alive, one thread, epoll; answers
 * every request (a head up to its blank line; no bodies) with a 2-byte
 * "ok". What a proxy adds shows against it, where a Python server would
 * hide it. Usage: tinyhttpd PORT */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok";

struct conn {
	int fd;
	size_t have;
	char buf[16384];
};

static void serve(int ep, struct conn *c)
{
	for (;;) {
		ssize_t n = read(c->fd, c->buf + c->have, sizeof(c->buf) - c->have);
		if (n <= 0) {
			if (n == 0 || c->have == sizeof(c->buf)) {
				epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
				close(c->fd);
				free(c);
			}
			return;
		}
		c->have += (size_t)n;
		char *p = c->buf, *end = c->buf + c->have, *e;
		while ((e = memmem(p, (size_t)(end - p), "\r\n\r\n", 4))) {
			if (write(c->fd, answer, sizeof(answer) - 1) < 0)
				break;
			p = e + 4;
		}
		c->have = (size_t)(end - p);
		memmove(c->buf, p, c->have);
	}
}

int main(int argc, char **argv)
{
	int one = 1, ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(argc > 1 ? atoi(argv[1]) : 8000) };
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 1024) < 0) {
		perror("tinyhttpd");
		return 1;
	}
	int ep = epoll_create1(0);
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(ep, evs, 64, -1);
		for (int i = 0; i < n; i++) {
			if (evs[i].data.ptr) {
				serve(ep, evs[i].data.ptr);
				continue;
			}
			int fd;
			while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
				struct conn *c = calloc(1, sizeof(*c));
				c->fd = fd;
				setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				struct epoll_event ce = { .events = EPOLLIN, .data.ptr = c };
				epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce);
			}
		}
	}
}

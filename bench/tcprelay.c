/* portbench's floor for a proxy: a TCP relay that only moves bytes, with
 * no HTTP parsing, one thread, epoll (level-triggered). Each accepted
 * connection gets its own connection to the target; what one side sends
 * is written to the other at once (read/write through a 64 KiB buffer, or
 * with --splice through a pipe, no copy to user space); a partial write
 * stops reading that side until the rest is out. What any proxy in
 * coved's place must at least cost on this machine.
 *
 * Usage: tcprelay [--splice] LPORT:ADDR:PORT... (listens on 127.0.0.1) */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF (64u << 10)
#define MAX_MAPS 8

struct dir { /* bytes read from fd[i], on their way to fd[1 - i] */
	char *buf;
	int pipe[2];
	size_t off, len;
	bool eof;
};

struct pair {
	int fd[2];
	uint32_t mask[2]; /* what epoll watches on fd[i] */
	struct dir d[2];
	bool dead; /* freed after the batch of events it may still be in */
	struct pair *next_dead;
};

static int ep;
static struct pair *dead_pairs;
static bool use_splice;
static struct sockaddr_in targets[MAX_MAPS];

static void nodelay(int fd)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void pair_free(struct pair *p)
{
	for (int i = 0; i < 2; i++) {
		close(p->fd[i]);
		if (use_splice) {
			close(p->d[i].pipe[0]);
			close(p->d[i].pipe[1]);
		}
		free(p->d[i].buf);
	}
	free(p);
}

static void watch(struct pair *p, int i)
{
	uint32_t m = (!p->d[i].eof && p->d[i].len == 0 ? EPOLLIN : 0) | (p->d[1 - i].len > 0 ? EPOLLOUT : 0);
	if (m == p->mask[i])
		return;
	struct epoll_event ev = { .events = m, .data.u64 = (uint64_t)(uintptr_t)p | (uint64_t)i };
	epoll_ctl(ep, EPOLL_CTL_MOD, p->fd[i], &ev);
	p->mask[i] = m;
}

/* Write what waits in d[i] to fd[1 - i]: -1 on an error. */
static int flush(struct pair *p, int i)
{
	struct dir *d = &p->d[i];
	while (d->len > 0) {
		ssize_t n = use_splice ? splice(d->pipe[0], NULL, p->fd[1 - i], NULL, d->len,
						SPLICE_F_MOVE | SPLICE_F_NONBLOCK)
				       : write(p->fd[1 - i], d->buf + d->off, d->len);
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		d->off += (size_t)n;
		d->len -= (size_t)n;
	}
	d->off = 0;
	if (d->eof)
		shutdown(p->fd[1 - i], SHUT_WR);
	return 0;
}

static int readable(struct pair *p, int i)
{
	struct dir *d = &p->d[i];
	ssize_t n = use_splice ? splice(p->fd[i], NULL, d->pipe[1], NULL, BUF, SPLICE_F_MOVE | SPLICE_F_NONBLOCK)
			       : read(p->fd[i], d->buf, BUF);
	if (n < 0)
		return errno == EAGAIN ? 0 : -1;
	if (n == 0)
		d->eof = true;
	d->len = (size_t)n;
	return flush(p, i);
}

static void on_event(uint64_t data, uint32_t events)
{
	struct pair *p = (struct pair *)(uintptr_t)(data & ~(uint64_t)1);
	int i = (int)(data & 1);
	if (p->dead)
		return;
	if ((events & EPOLLOUT) && flush(p, 1 - i) < 0)
		goto dead;
	if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && p->d[i].len == 0 && !p->d[i].eof && readable(p, i) < 0)
		goto dead;
	if ((p->d[0].eof && p->d[1].eof && !p->d[0].len && !p->d[1].len) || (events & EPOLLERR))
		goto dead;
	watch(p, 0);
	watch(p, 1);
	return;
dead:
	epoll_ctl(ep, EPOLL_CTL_DEL, p->fd[0], NULL);
	epoll_ctl(ep, EPOLL_CTL_DEL, p->fd[1], NULL);
	p->dead = true;
	p->next_dead = dead_pairs;
	dead_pairs = p;
}

static void on_accept(int lfd, int map)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	int up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct pair *p = calloc(1, sizeof(*p));
	if (up < 0 || !p || connect(up, (struct sockaddr *)&targets[map], sizeof(targets[map])) < 0) {
		close(fd);
		if (up >= 0)
			close(up);
		free(p);
		return;
	}
	fcntl(up, F_SETFL, O_NONBLOCK);
	nodelay(fd);
	nodelay(up);
	p->fd[0] = fd;
	p->fd[1] = up;
	for (int i = 0; i < 2; i++) {
		if (use_splice) {
			if (pipe2(p->d[i].pipe, O_NONBLOCK | O_CLOEXEC) < 0)
				abort();
		} else if (!(p->d[i].buf = malloc(BUF))) {
			abort();
		}
		p->mask[i] = EPOLLIN;
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t)(uintptr_t)p | (uint64_t)i };
		epoll_ctl(ep, EPOLL_CTL_ADD, p->fd[i], &ev);
	}
}

static int listen_on(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 512) < 0) {
		perror("tcprelay: bind");
		exit(1);
	}
	return fd;
}

int main(int argc, char **argv)
{
	int nmaps = 0, lfds[MAX_MAPS];
	ep = epoll_create1(EPOLL_CLOEXEC);
	for (int a = 1; a < argc; a++) {
		char addr[64];
		int lport, port;
		if (strcmp(argv[a], "--splice") == 0) {
			use_splice = true;
			continue;
		}
		if (nmaps == MAX_MAPS || sscanf(argv[a], "%d:%63[^:]:%d", &lport, addr, &port) != 3) {
			fprintf(stderr, "usage: tcprelay [--splice] LPORT:ADDR:PORT...\n");
			return 2;
		}
		targets[nmaps] = (struct sockaddr_in){ .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
		inet_pton(AF_INET, addr, &targets[nmaps].sin_addr);
		lfds[nmaps] = listen_on(lport);
		/* listeners: data = the map's index, odd values above any pointer */
		struct epoll_event ev = { .events = EPOLLIN, .data.u64 = ((uint64_t)nmaps << 1) | (1ull << 63) };
		epoll_ctl(ep, EPOLL_CTL_ADD, lfds[nmaps], &ev);
		nmaps++;
	}
	for (;;) {
		struct epoll_event evs[64];
		int n = epoll_wait(ep, evs, 64, -1);
		for (int k = 0; k < n; k++) {
			if (evs[k].data.u64 & (1ull << 63)) {
				int map = (int)((evs[k].data.u64 & ~(1ull << 63)) >> 1);
				on_accept(lfds[map], map);
			} else {
				on_event(evs[k].data.u64, evs[k].events);
			}
		}
		while (dead_pairs) {
			struct pair *p = dead_pairs;
			dead_pairs = p->next_dead;
			pair_free(p);
		}
	}
}

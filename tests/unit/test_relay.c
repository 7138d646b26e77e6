/* src/net/relay.c on socket pairs: bytes arrive whole and in order both
 * ways; a reader that does not read holds the relay's buffers near
 * RELAY_HIGH_WATER (back-pressure: the sender's socket fills instead); an
 * EOF passes on as a shutdown of writing after the last byte; done runs
 * once both sides ended. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/relay.h"
#include "tap.h"

#define TOTAL (8u << 20) /* bytes sent through */

static int done_calls;

static void on_done(void *data)
{
	(void)data;
	done_calls++;
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 7 + i / 251);
}

/* Writes as much of the pattern as the socket takes; how far it got. */
static size_t fill(int fd, size_t from)
{
	uint8_t buf[65536];
	while (from < TOTAL) {
		size_t n = TOTAL - from < sizeof(buf) ? TOTAL - from : sizeof(buf);
		for (size_t i = 0; i < n; i++)
			buf[i] = pattern(from + i);
		ssize_t w = write(fd, buf, n);
		if (w <= 0)
			break;
		from += (size_t)w;
	}
	return from;
}

static void loop_a_while(struct event_base *base)
{
	for (int i = 0; i < 50; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
}

int main(void)
{
	struct event_base *base = event_base_new();
	int a[2], b[2];
	/* client a[0] <-> a[1] relay b[1] <-> b[0] server */
	if (!base || socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, a) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, b) < 0)
		return 1;
	struct bufferevent *ba = bufferevent_socket_new(base, a[1], BEV_OPT_CLOSE_ON_FREE);
	struct bufferevent *bb = bufferevent_socket_new(base, b[1], BEV_OPT_CLOSE_ON_FREE);
	/* Bytes read before the relay (the proxy's sniffed hello). */
	CHECK(write(a[0], "hello", 5) == 5, "client sends first");
	(void)bufferevent_enable(ba, EV_READ);
	loop_a_while(base);
	(void)bufferevent_disable(ba, EV_READ);
	CHECK(evbuffer_get_length(bufferevent_get_input(ba)) == 5, "read before the relay");
	struct relay *r = relay_start(ba, bb, on_done, NULL);
	CHECK(r != NULL, "relay started");
	char hello[5];
	loop_a_while(base);
	CHECK(read(b[0], hello, 5) == 5 && memcmp(hello, "hello", 5) == 0, "bytes read before the relay go first");

	/* The server does not read: the client fills, the relay stops. */
	size_t sent = 0;
	for (int i = 0; i < 200; i++) {
		sent = fill(a[0], sent);
		loop_a_while(base);
	}
	size_t held = evbuffer_get_length(bufferevent_get_output(bb)) + evbuffer_get_length(bufferevent_get_input(ba));
	CHECK(sent < TOTAL, "a reader that does not read stops the sender (%zu of %u bytes sent)", sent, TOTAL);
	CHECK(held <= 2 * RELAY_HIGH_WATER, "the relay holds at most about its high water mark: %zu bytes", held);

	/* The server reads it all, in order, while the client finishes. */
	size_t got = 0;
	int in_order = 1;
	uint8_t buf[65536];
	while (got < TOTAL) {
		sent = fill(a[0], sent);
		if (sent == TOTAL)
			(void)shutdown(a[0], SHUT_WR);
		loop_a_while(base);
		ssize_t n;
		while ((n = read(b[0], buf, sizeof(buf))) > 0) {
			for (ssize_t i = 0; i < n; i++)
				in_order &= buf[i] == pattern(got + (size_t)i);
			got += (size_t)n;
		}
	}
	CHECK(got == TOTAL && in_order, "all %u bytes arrived, in order", TOTAL);
	loop_a_while(base);
	CHECK(read(b[0], buf, 1) == 0, "the client's EOF passed on after the last byte");
	CHECK(done_calls == 0, "half closed: the relay goes on");

	/* The other way, then the server's EOF ends it. */
	CHECK(write(b[0], "bye", 3) == 3, "server answers");
	loop_a_while(base);
	CHECK(read(a[0], buf, 3) == 3 && memcmp(buf, "bye", 3) == 0, "answer through the half-closed relay");
	(void)shutdown(b[0], SHUT_WR);
	loop_a_while(base);
	CHECK(done_calls == 1, "both sides ended: done called once");
	CHECK(read(a[0], buf, 1) == 0, "the server's EOF reached the client");
	close(a[0]);
	close(b[0]);
	event_base_free(base);
	return tap_done();
}

#include "net/relay.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>

struct relay {
	struct bufferevent *bev[2];
	bool eof[2];  /* side i sent its EOF */
	bool shut[2]; /* side i was told our EOF (shutdown of writing) */
	relay_done_fn done;
	void *data;
};

static int side(const struct relay *r, const struct bufferevent *bev)
{
	return bev == r->bev[0] ? 0 : 1;
}

void relay_free(struct relay *r)
{
	if (!r)
		return;
	for (int i = 0; i < 2; i++)
		if (r->bev[i])
			bufferevent_free(r->bev[i]);
	free(r);
}

static void finish(struct relay *r)
{
	relay_done_fn done = r->done;
	void *data = r->data;
	relay_free(r);
	if (done)
		done(data);
}

/* Side i's output is empty and the other side sent its EOF: pass it on. */
static void pass_eof(struct relay *r, int i)
{
	if (r->shut[i] || evbuffer_get_length(bufferevent_get_output(r->bev[i])))
		return;
	(void)shutdown(bufferevent_getfd(r->bev[i]), SHUT_WR);
	r->shut[i] = true;
}

/* What side i read goes to the other side's output; past the high water
 * mark, side i stops reading until that output drains (on_write). */
static void pump(struct relay *r, int i)
{
	struct bufferevent *to = r->bev[!i];
	struct evbuffer *out = bufferevent_get_output(to);
	(void)evbuffer_add_buffer(out, bufferevent_get_input(r->bev[i]));
	if (evbuffer_get_length(out) >= RELAY_HIGH_WATER)
		(void)bufferevent_disable(r->bev[i], EV_READ);
}

static void on_read(struct bufferevent *bev, void *data)
{
	struct relay *r = data;
	pump(r, side(r, bev));
}

/* bev's output fell to its low water mark (half the high one; none once
 * the other side ended, so that its EOF goes out after the last byte). */
static void on_write(struct bufferevent *bev, void *data)
{
	struct relay *r = data;
	int i = side(r, bev);
	if (r->eof[!i]) {
		pass_eof(r, i);
		if (r->shut[0] && r->shut[1])
			finish(r);
		return;
	}
	(void)bufferevent_enable(r->bev[!i], EV_READ);
}

static void on_event(struct bufferevent *bev, short what, void *data)
{
	struct relay *r = data;
	int i = side(r, bev);
	if (!(what & BEV_EVENT_EOF)) {
		finish(r); /* an error, or silence past the linger time */
		return;
	}
	pump(r, i);
	r->eof[i] = true;
	/* Half closed: the other direction goes on, for a while. */
	struct timeval linger = { RELAY_LINGER_S, 0 };
	for (int k = 0; k < 2; k++)
		(void)bufferevent_set_timeouts(r->bev[k], &linger, &linger);
	(void)bufferevent_setwatermark(r->bev[!i], EV_WRITE, 0, 0);
	pass_eof(r, !i);
	if (r->shut[0] && r->shut[1])
		finish(r);
}

struct relay *relay_start(struct bufferevent *a, struct bufferevent *b, relay_done_fn done, void *data)
{
	struct relay *r = calloc(1, sizeof(*r));
	if (!r) {
		bufferevent_free(a);
		bufferevent_free(b);
		return NULL;
	}
	*r = (struct relay){ .bev = { a, b }, .done = done, .data = data };
	for (int i = 0; i < 2; i++) {
		bufferevent_setcb(r->bev[i], on_read, on_write, on_event, r);
		bufferevent_setwatermark(r->bev[i], EV_READ, 0, RELAY_HIGH_WATER);
		bufferevent_setwatermark(r->bev[i], EV_WRITE, RELAY_HIGH_WATER / 2, 0);
		(void)bufferevent_set_timeouts(r->bev[i], NULL, NULL);
		(void)bufferevent_enable(r->bev[i], EV_READ | EV_WRITE);
	}
	pump(r, 0);
	return r;
}

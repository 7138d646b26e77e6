/* The event stream of sandboxes' transitions (lifecycle.h): a list of
 * subscribers, each a struct output of a front end with an optional
 * sandbox filter. An event is written at once to each subscriber that
 * takes it; one that lags (its front end paused it) is not written to,
 * only counted, so that coved holds nothing per lagging consumer but a
 * number, which the next event it gets carries as "lost". */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "engine/engine.h"
#include "engine/output.h"

struct subscriber {
	struct subscriber *next;
	struct engine_events *owner;
	struct output *out;
	char id[16]; /* "" for every sandbox */
	struct event *keepalive_ev;
	struct timeval keepalive;
	bool paused;
	uint64_t lost;
};

struct engine_events {
	struct subscriber *subs;
	int count;
};

static void unlink_sub(struct subscriber *s)
{
	struct engine_events *ev = s->owner;
	for (struct subscriber **p = &ev->subs; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			ev->count--;
			break;
		}
	if (s->keepalive_ev)
		event_free(s->keepalive_ev);
	free(s);
}

static void on_pause(void *arg)
{
	((struct subscriber *)arg)->paused = true;
}

static void on_resume(void *arg)
{
	((struct subscriber *)arg)->paused = false;
}

static void on_cancel(void *arg)
{
	unlink_sub(arg);
}

static const struct output_producer events_producer = { on_pause, on_resume, on_cancel };

static void on_keepalive(evutil_socket_t fd, short what, void *arg)
{
	struct subscriber *s = arg;
	struct out_event ev = { .type = OUT_KEEPALIVE };
	if (!s->paused)
		output_write(s->out, &ev);
}

int events_subscribe(struct engine *d, const char *id, int keepalive, struct output *o, struct cove_err *err)
{
	if (!d->events && !(d->events = calloc(1, sizeof(*d->events))))
		return err_set(err, COVE_EINTERNAL, "out of memory");
	if (d->events->count >= EVENTS_MAX_STREAMS)
		return err_set(err, COVE_EFULL, "too many event streams (at most %d at once)", EVENTS_MAX_STREAMS);
	if (keepalive < 1 || keepalive > EVENTS_MAX_KEEPALIVE)
		return err_set(err, COVE_EINVAL, "'keepalive' must be seconds from 1 to %d", EVENTS_MAX_KEEPALIVE);
	struct subscriber *s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	s->owner = d->events;
	s->out = o;
	snprintf(s->id, sizeof(s->id), "%s", id ? id : "");
	s->keepalive = (struct timeval){ keepalive, 0 };
	s->keepalive_ev = event_new(d->base, -1, EV_PERSIST, on_keepalive, s);
	if (!s->keepalive_ev) {
		free(s);
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	event_add(s->keepalive_ev, &s->keepalive);
	s->next = d->events->subs;
	d->events->subs = s;
	d->events->count++;
	output_attach(o, &events_producer, s);
	struct out_event start = { .type = OUT_START };
	output_write(o, &start);
	return 0;
}

void events_emit(struct engine *d, const struct sandbox *sb, int from)
{
	if (!d->events || sb->spec.pooled)
		return;
	struct sandbox_event e = {
		.id = sb->id,
		.state = sb->state == SB_DELETING ? "deleted" : sandbox_state_name(sb->state),
		.from = from < 0 ? NULL : sandbox_state_name(from),
		.reason = sandbox_reason_name(sb->state_reason),
		.at = sb->state == SB_DELETING ? sandbox_now_ms() : sb->state_changed_at,
		.memory_kept = -1,
	};
	/* An archive, and the wake from one: whether the processes' memory
	 * was kept, and why not. */
	if (sb->state == SB_ARCHIVED || (sb->state == SB_RUNNING && from == SB_ARCHIVED)) {
		e.memory_kept = sb->mem_kept;
		e.note = sb->mem_note[0] ? sb->mem_note : NULL;
	}
	struct subscriber *next;
	for (struct subscriber *s = d->events->subs; s; s = next) {
		next = s->next; /* a write may end s (its consumer gone) */
		if (s->id[0] && strcmp(s->id, sb->id) != 0)
			continue;
		if (s->paused) {
			s->lost++;
			continue;
		}
		e.lost = s->lost;
		s->lost = 0;
		event_add(s->keepalive_ev, &s->keepalive); /* the silence starts again */
		struct out_event ev = { .type = OUT_EVENT, .event = &e };
		output_write(s->out, &ev);
	}
}

void events_close_all(struct engine *d)
{
	while (d->events && d->events->subs) {
		struct subscriber *s = d->events->subs;
		struct output *o = s->out;
		unlink_sub(s);
		output_close(o, NULL);
	}
	free(d->events);
	d->events = NULL;
}

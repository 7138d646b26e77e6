/* Named locks of a sandbox: mutual exclusion between the clients that work
 * in one sandbox (agents, build steps), held in coved's memory.
 *
 * A lock exists while it is held or waited for. Its holder proves itself
 * with a random token and holds it for a lease, which it may renew; when it
 * releases the lock or the lease runs out, the lock passes at once to the
 * first waiter (first come, first served). A waiter is an acquire request
 * left unanswered until it gets the lock, its wait runs out (409
 * lock_held), its client hangs up (it leaves the queue) or the sandbox is
 * deleted (409). Hence the invariant: a lock with waiters is held.
 *
 * Nothing is written to disk: a restarted coved knows no locks and refuses
 * the old tokens. The lease is what bounds how long a holder that crashed,
 * or lost its connection, keeps the others out. */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/parse.h"
#include "engine/engine.h"
#include "engine/locks.h"

#define LOCK_TOKEN_BYTES 16
#define LOCKS_MAX_PER_SANDBOX 1024 /* held or waited for */
#define LOCK_MAX_WAITERS 1024

struct lock_waiter {
	struct lock_waiter *next;
	struct lock *lock;
	struct output *out;    /* where the grant or the failure goes */
	struct event *wait_ev; /* the wait runs out */
	double lease;          /* seconds, once granted */
};

struct lock {
	struct lock *next;
	struct sandbox *sb;
	char name[LOCK_MAX_NAME + 1];
	char token[2 * LOCK_TOKEN_BYTES + 1]; /* "" while nobody holds it */
	int64_t expires_at;                   /* unix ms, while held */
	struct event *lease_ev;
	struct lock_waiter *waiters; /* in arrival order */
	unsigned n_waiters;
};

static struct timeval seconds_tv(double s)
{
	struct timeval tv = { (time_t)s, (suseconds_t)((s - (double)(time_t)s) * 1e6) };
	return tv;
}

/* Names are opaque keys compared byte for byte ("a//b" is not "a/b"); they
 * look like paths by convention only. Control characters are refused so
 * that a name prints on one line in logs and listings. */
static int check_name(const char *name, struct cove_err *err)
{
	size_t n = strlen(name);
	if (n == 0 || n > LOCK_MAX_NAME)
		return err_set(err, COVE_EINVAL, "a lock name must have 1 to %d bytes", LOCK_MAX_NAME);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return err_set(err, COVE_EINVAL, "a lock name must not hold control characters");
	return 0;
}

/* Same length and bytes, in a time that does not depend on where they
 * differ: a token is the only proof of holding a lock. */
static bool token_equal(const char *held, const char *given)
{
	size_t n = strlen(held);
	if (strlen(given) != n)
		return false;
	unsigned char diff = 0;
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)(held[i] ^ given[i]);
	return diff == 0;
}

static struct lock *lock_find(const struct sandbox *sb, const char *name)
{
	for (struct lock *l = sb->locks; l; l = l->next)
		if (strcmp(l->name, name) == 0)
			return l;
	return NULL;
}

static void on_lease_end(evutil_socket_t fd, short what, void *arg);

static struct lock *lock_new(struct sandbox *sb, const char *name, struct cove_err *err)
{
	unsigned n = 0;
	for (const struct lock *l = sb->locks; l; l = l->next)
		n++;
	if (n >= LOCKS_MAX_PER_SANDBOX) {
		err_set(err, COVE_EFULL, "sandbox %s has %d locks held or waited for, the most it may", sb->id,
			LOCKS_MAX_PER_SANDBOX);
		return NULL;
	}
	struct lock *l = calloc(1, sizeof(*l));
	if (l)
		l->lease_ev = evtimer_new(engine_ctx->base, on_lease_end, l);
	if (!l || !l->lease_ev) {
		free(l);
		err_set(err, COVE_EINTERNAL, "out of memory");
		return NULL;
	}
	l->sb = sb;
	snprintf(l->name, sizeof(l->name), "%s", name);
	l->next = sb->locks;
	sb->locks = l;
	return l;
}

/* A lock nobody holds or waits for is forgotten. */
static void lock_free_if_unused(struct lock *l)
{
	if (l->token[0] || l->waiters)
		return;
	for (struct lock **pp = &l->sb->locks; *pp; pp = &(*pp)->next)
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	event_free(l->lease_ev);
	free(l);
}

/* (Re)start the lease: lease seconds from now. */
static void lease_start(struct lock *l, double lease)
{
	struct timeval tv = seconds_tv(lease);
	l->expires_at = sandbox_now_ms() + (int64_t)(lease * 1000 + 0.5);
	evtimer_add(l->lease_ev, &tv);
}

/* A new holder: a fresh token and lease. */
static int lock_grant(struct lock *l, double lease, struct cove_err *err)
{
	if (random_hex(l->token, LOCK_TOKEN_BYTES) < 0)
		return err_set(err, COVE_EINTERNAL, "no random bytes for a lock token");
	lease_start(l, lease);
	return 0;
}

/* The lock's new holder learns its token, and the output is done. */
static void send_grant(const struct lock *l, struct output *out)
{
	const struct lock_grant g = { .name = l->name, .token = l->token, .expires_at = l->expires_at };
	const struct out_event ev = { .type = OUT_EVENT, .event = &g };
	output_write(out, &ev);
	output_close(out, NULL);
}

static void waiter_unlink(struct lock_waiter *w)
{
	for (struct lock_waiter **pp = &w->lock->waiters; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			w->lock->n_waiters--;
			return;
		}
}

/* Out of the queue, its event gone. The lock itself stays: it is held
 * (the invariant), or being passed on by the caller. */
static void waiter_free(struct lock_waiter *w)
{
	waiter_unlink(w);
	if (w->wait_ev)
		event_free(w->wait_ev);
	free(w);
}

static void waiter_fail(struct lock_waiter *w, const struct cove_err *err)
{
	struct output *out = w->out;
	waiter_free(w);
	output_close(out, err);
}

/* The holder is done (released, or its lease ran out): the lock goes to the
 * first waiter still there, or is forgotten. A waiter whose client has hung
 * up but whose front end has not noticed yet must not get it. */
static void pass_on(struct lock *l)
{
	l->token[0] = '\0';
	evtimer_del(l->lease_ev);
	while (l->waiters) {
		struct lock_waiter *w = l->waiters;
		struct cove_err err = { 0 };
		if (!output_alive(w->out)) {
			err_set(&err, COVE_ESTATE, "the client hung up");
			waiter_fail(w, &err);
			continue;
		}
		if (lock_grant(l, w->lease, &err) < 0) {
			waiter_fail(w, &err);
			continue;
		}
		struct output *out = w->out;
		waiter_free(w);
		send_grant(l, out);
		return;
	}
	lock_free_if_unused(l);
}

static void on_lease_end(evutil_socket_t fd, short what, void *arg)
{
	struct lock *l = arg;
	log_debug("sandbox %s: lock '%s': the lease ran out", l->sb->id, l->name);
	pass_on(l);
}

static void on_wait_end(evutil_socket_t fd, short what, void *arg)
{
	struct lock_waiter *w = arg;
	struct cove_err err = { 0 };
	err_set(&err, COVE_EBUSY, "lock '%s' is still held: it did not come free within the wait", w->lock->name);
	waiter_fail(w, &err);
}

/* The consumer is gone: the waiter leaves the queue, answered by nobody. */
static void on_consumer_gone(void *arg)
{
	waiter_free(arg);
}

static const struct output_producer waiter_producer = { .cancel = on_consumer_gone };

static int waiter_add(struct lock *l, struct output *out, double lease, double wait, struct cove_err *err)
{
	if (l->n_waiters >= LOCK_MAX_WAITERS)
		return err_set(err, COVE_EFULL, "lock '%s' has %d waiters, the most it may", l->name, LOCK_MAX_WAITERS);
	struct lock_waiter *w = calloc(1, sizeof(*w));
	if (!w)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	w->lock = l;
	w->out = out;
	w->lease = lease;
	w->wait_ev = evtimer_new(engine_ctx->base, on_wait_end, w);
	if (!w->wait_ev) {
		free(w);
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	struct timeval tv = seconds_tv(wait);
	evtimer_add(w->wait_ev, &tv);
	struct lock_waiter **pp = &l->waiters;
	while (*pp)
		pp = &(*pp)->next;
	*pp = w;
	l->n_waiters++;
	output_attach(out, &waiter_producer, w);
	return 0;
}

int lock_acquire(struct sandbox *sb, const struct lock_request *lr, struct output *out, struct cove_err *err)
{
	if (check_name(lr->name, err) < 0)
		return -1;
	struct lock *l = lock_find(sb, lr->name);
	if (!l && !(l = lock_new(sb, lr->name, err)))
		return -1;
	if (!l->token[0]) { /* new: a known lock is held (it passes on when freed) */
		if (lock_grant(l, lr->lease, err) < 0) {
			lock_free_if_unused(l);
			return -1;
		}
		send_grant(l, out);
		return 0;
	}
	if (lr->wait <= 0)
		return err_set(err, COVE_EBUSY, "lock '%s' is held (its lease runs out in %.1f s at most)", lr->name,
			       (double)(l->expires_at - sandbox_now_ms()) / 1000);
	return waiter_add(l, out, lr->lease, lr->wait, err);
}

/* The lock name, held under token; else NULL with err (409). */
static struct lock *held_with(struct sandbox *sb, const char *name, const char *token, struct cove_err *err)
{
	if (check_name(name, err) < 0)
		return NULL;
	struct lock *l = lock_find(sb, name);
	if (!l || !l->token[0]) {
		err_set(err, COVE_ESTATE, "lock '%s' is not held: it was released, or its lease ran out", name);
		return NULL;
	}
	if (!token_equal(l->token, token)) {
		err_set(err, COVE_ESTATE,
			"lock '%s' is held under another token: this one is wrong, or its lease ran out and the "
			"lock passed on",
			name);
		return NULL;
	}
	return l;
}

int lock_release(struct sandbox *sb, const char *name, const char *token, struct cove_err *err)
{
	struct lock *l = held_with(sb, name, token, err);
	if (!l)
		return -1;
	pass_on(l);
	return 0;
}

int lock_renew(struct sandbox *sb, const char *name, const char *token, double lease, int64_t *ret_expires_at,
	       struct cove_err *err)
{
	struct lock *l = held_with(sb, name, token, err);
	if (!l)
		return -1;
	lease_start(l, lease);
	*ret_expires_at = l->expires_at;
	return 0;
}

json_t *locks_to_json(const struct sandbox *sb)
{
	json_t *a = json_array();
	for (const struct lock *l = sb->locks; l; l = l->next)
		json_array_append_new(a, json_pack("{s:s, s:I, s:i}", "name", l->name, "expires_at",
						   (json_int_t)l->expires_at, "waiters", (int)l->n_waiters));
	return a;
}

void locks_drop_all(struct sandbox *sb, const char *why)
{
	struct cove_err err = { 0 };
	err_set(&err, COVE_ESTATE, "%s", why);
	while (sb->locks) {
		struct lock *l = sb->locks;
		while (l->waiters)
			waiter_fail(l->waiters, &err);
		l->token[0] = '\0';
		lock_free_if_unused(l);
	}
}

/* Warm pools (template.h): sandboxes started ahead of time, handed out by
 * create, replaced from the loop afterwards.
 *
 * A pool's sandboxes are ordinary sandboxes with spec.pooled set: rows in
 * state.db like any (so a crash leaves nothing the next start does not
 * find), neither listed nor found by ID, and deleted at stop and at the
 * next start (sandboxes.c's load), never re-used: a pool always starts
 * afresh. One is made at a time, each on its own turn of the loop, so
 * that requests are served between them; a replacement is made a few
 * milliseconds after a hand-out, once its create has been answered. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "engine/engine.h"
#include "engine/network.h"
#include "engine/template.h"
#include "store/store.h"

#define WARM_REFILL_DELAY_MS 5 /* after a hand-out: its answer goes out first */
#define WARM_MAX_BACKOFF_MS 30000
/* A create holds the loop for tens of milliseconds: a refill waits until
 * no request came for WARM_QUIET_MS (the client that took a sandbox goes
 * on with it at once: its execs must not wait behind the refill), but not
 * more than WARM_MAX_DEFER_MS under a steady load. */
#define WARM_QUIET_MS 20
#define WARM_MAX_DEFER_MS 1000

struct warm_entry {
	struct warm *w;
	char id[16];
	bool ready;        /* its launch has passed */
	struct output out; /* its launch's */
	struct warm_entry *next;
};

struct warm {
	struct engine *d;
	struct template *t; /* NULL: the default pool */
	struct sandbox_spec spec;
	int size;
	struct warm_entry *entries;
	struct event *refill;
	int failures;          /* in a row: the next attempt backs off */
	double deferred_since; /* monotonic ms: a refill waits for a quiet loop since then (0: none) */
};

static double last_request_ms;

static double mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void warm_note_request(void)
{
	last_request_ms = mono_ms();
}

/* A pooled sandbox by ID (sandbox_find leaves pooled ones out). */
static struct sandbox *pooled_find(struct engine *d, const char *id)
{
	for (int i = 0; i < MAX_SANDBOXES; i++)
		if (d->sandboxes[i] && d->sandboxes[i]->state != SB_DELETING && d->sandboxes[i]->spec.pooled &&
		    strcmp(d->sandboxes[i]->id, id) == 0)
			return d->sandboxes[i];
	return NULL;
}

static void schedule(struct warm *w, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	if (!evtimer_pending(w->refill, NULL))
		evtimer_add(w->refill, &tv);
}

/* Remove e from its pool, and delete its sandbox unless kept. */
static void drop(struct warm_entry *e, bool keep)
{
	struct warm *w = e->w;
	for (struct warm_entry **p = &w->entries; *p; p = &(*p)->next)
		if (*p == e) {
			*p = e->next;
			break;
		}
	struct sandbox *sb = keep ? NULL : pooled_find(w->d, e->id);
	if (!e->ready)
		output_cancel(&e->out);
	free(e);
	if (sb)
		(void)sandbox_delete(w->d, sb, NULL);
}

static void backoff(struct warm *w, const char *why)
{
	int ms = 1000 << (w->failures < 5 ? w->failures : 5);
	w->failures++;
	log_error("warm pool %s: %s (next try in %d ms)", w->t ? w->t->name : "(default)", why,
		  ms < WARM_MAX_BACKOFF_MS ? ms : WARM_MAX_BACKOFF_MS);
	schedule(w, ms < WARM_MAX_BACKOFF_MS ? ms : WARM_MAX_BACKOFF_MS);
}

static void launch_close(struct output *o, const struct cove_err *err)
{
	struct warm_entry *e = (struct warm_entry *)((char *)o - offsetof(struct warm_entry, out));
	struct warm *w = e->w;
	e->ready = true; /* its launch is over: nothing to cancel */
	if (err) {
		char why[600];
		snprintf(why, sizeof(why), "sandbox %s: %s", e->id, err->msg);
		drop(e, false);
		backoff(w, why);
		return;
	}
	w->failures = 0;
}

static void launch_write(struct output *o, const struct out_event *ev)
{
}

static const struct output_ops launch_ops = { .write = launch_write, .close = launch_close };

static int count(const struct warm *w)
{
	int n = 0;
	for (const struct warm_entry *e = w->entries; e; e = e->next)
		n++;
	return n;
}

/* One new sandbox for the pool, then the next turn. */
static void on_refill(evutil_socket_t fd, short what, void *arg)
{
	struct warm *w = arg;
	struct cove_err err = { 0 };
	struct sandbox_spec spec;
	struct sandbox *sb;
	if (count(w) >= w->size || w->d->stopping)
		return;
	double now = mono_ms();
	if (!w->deferred_since)
		w->deferred_since = now;
	if (now - last_request_ms < WARM_QUIET_MS && now - w->deferred_since < WARM_MAX_DEFER_MS) {
		schedule(w, WARM_QUIET_MS);
		return;
	}
	w->deferred_since = 0;
	struct warm_entry *e = calloc(1, sizeof(*e));
	if (!e || sandbox_spec_copy(&w->spec, &spec) < 0) {
		free(e);
		backoff(w, "out of memory");
		return;
	}
	spec.pooled = true;
	if (template_create_cold(w->d, w->t, &spec, &sb, &err) < 0) {
		sandbox_spec_free(&spec);
		free(e);
		backoff(w, err.msg);
		return;
	}
	sandbox_spec_free(&spec);
	e->w = w;
	snprintf(e->id, sizeof(e->id), "%s", sb->id);
	e->next = w->entries;
	w->entries = e;
	e->out = (struct output){ .ops = &launch_ops };
	if (!launch_needed(sb))
		e->ready = true;
	else if (launch_start(w->d, sb, &e->out, &err) < 0) {
		e->ready = true;
		drop(e, false);
		backoff(w, err.msg);
		return;
	}
	if (count(w) < w->size)
		schedule(w, 0);
}

int warm_open(struct engine *d, struct template *t, int n, const struct sandbox_spec *spec, struct warm **ret,
	      struct cove_err *err)
{
	struct warm *w = calloc(1, sizeof(*w));
	if (!w || sandbox_spec_copy(spec, &w->spec) < 0 || !(w->refill = evtimer_new(d->base, on_refill, w))) {
		if (w && w->spec.env)
			sandbox_spec_free(&w->spec);
		free(w);
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	w->d = d;
	w->t = t;
	w->size = n;
	w->spec.expires_at = 0;
	w->spec.ephemeral = false;
	snprintf(w->spec.template, sizeof(w->spec.template), "%s", t ? t->name : "");
	schedule(w, 0);
	*ret = w;
	return 0;
}

void warm_close(struct engine *d, struct warm *w)
{
	if (!w)
		return;
	while (w->entries)
		drop(w->entries, false);
	event_free(w->refill);
	sandbox_spec_free(&w->spec);
	free(w);
}

static bool same_json(json_t *a, json_t *b)
{
	return (!a && !b) || (a && b && json_equal(a, b));
}

/* What a running sandbox cannot change: its image, backend, network mode,
 * start command and readiness check. */
static bool compatible(const struct sandbox_spec *have, const struct sandbox_spec *want)
{
	return strcmp(have->image, want->image) == 0 && have->external == want->external &&
	       have->inherit_env == want->inherit_env && have->egress == want->egress &&
	       same_json(have->start, want->start) && same_json(have->ready, want->ready);
}

/* The policy lists of want on sb, when they differ. */
static int apply_policy(struct engine *d, struct sandbox *sb, const struct sandbox_spec *want, struct cove_err *err)
{
	if (!sb->spec.egress ||
	    (same_json(sb->spec.allow_out, want->allow_out) && same_json(sb->spec.deny_out, want->deny_out)))
		return 0;
	size_t na = json_array_size(want->allow_out), nd = json_array_size(want->deny_out);
	const char **a = calloc(na + 1, sizeof(*a)), **dv = calloc(nd + 1, sizeof(*dv));
	int r = a && dv ? 0 : err_set(err, COVE_EINTERNAL, "out of memory");
	for (size_t i = 0; r == 0 && i < na; i++)
		a[i] = json_string_value(json_array_get(want->allow_out, i));
	for (size_t i = 0; r == 0 && i < nd; i++)
		dv[i] = json_string_value(json_array_get(want->deny_out, i));
	struct network_policy_req pr = { .allow_out = a, .n_allow = na, .deny_out = dv, .n_deny = nd };
	if (r == 0)
		r = network_set_policy(d, sb, &pr, err);
	free(a);
	free(dv);
	return r;
}

/* Give sb the create's spec (taken): limits on its running cgroups, the
 * policy, then everything else, which later execs read. Its identity
 * (created_at, addresses, image subvolume) stays. 0; -1 with spec not
 * taken yet; -2 once taken. */
static int hand_out(struct engine *d, struct sandbox *sb, struct sandbox_spec *spec, struct cove_err *err)
{
	struct cgroup_limits lim = { spec->memory, spec->cpu_millis, spec->pids };
	if ((spec->memory != sb->spec.memory || spec->cpu_millis != sb->spec.cpu_millis ||
	     spec->pids != sb->spec.pids) &&
	    cgroup_create(&d->cgroups, sb->id, &lim, err) < 0)
		return -1;
	if (apply_policy(d, sb, spec, err) < 0)
		return -1;
	char image[600], subvol[600];
	snprintf(image, sizeof(image), "%s/images/%s", d->pool.dir, sb->spec.image_dir);
	snprintf(subvol, sizeof(subvol), "%s/sandboxes/%s", d->pool.dir, sb->id);
	int64_t expires_at = spec->expires_at;
	struct sandbox_spec old = sb->spec;
	sb->spec = *spec;
	memset(spec, 0, sizeof(*spec)); /* taken */
	sb->spec.created_at = old.created_at;
	sb->spec.net_slot = old.net_slot;
	snprintf(sb->spec.image_dir, sizeof(sb->spec.image_dir), "%s", old.image_dir);
	json_decref(sb->spec.allow_out);
	json_decref(sb->spec.deny_out);
	sb->spec.allow_out = json_incref(old.allow_out);
	sb->spec.deny_out = json_incref(old.deny_out);
	sb->spec.pooled = false;
	sb->spec.from_pool = true;
	sb->spec.expires_at = 0;
	sb->spec.workdir[0] = '\0';
	sandbox_workdir_resolve(&sb->spec, image, subvol);
	sandbox_spec_free(&old);
	d->count++;
	if ((expires_at ? sandbox_set_expiry(d, sb, expires_at, err) : sandbox_save(d, sb, err)) < 0)
		return -2;
	return 0;
}

int warm_take(struct engine *d, struct warm *w, struct sandbox_spec *spec, struct sandbox **ret, struct cove_err *err)
{
	struct warm_entry *e = w ? w->entries : NULL;
	while (e) {
		struct warm_entry *next = e->next;
		struct sandbox *sb = e->ready ? pooled_find(d, e->id) : NULL;
		if (e->ready && (!sb || sb->state != SB_RUNNING)) {
			drop(e, false); /* its init died: not one to hand out */
			schedule(w, WARM_REFILL_DELAY_MS);
		} else if (sb) {
			struct cove_err why = { 0 };
			if (!compatible(&sb->spec, spec))
				return 0; /* all of a pool's are alike */
			drop(e, true);
			schedule(w, WARM_REFILL_DELAY_MS);
			int r = hand_out(d, sb, spec, &why);
			if (r == 0) {
				*ret = sb;
				return 1;
			}
			log_error("sandbox %s: hand-out from the warm pool: %s", sb->id, why.msg);
			(void)sandbox_delete(d, sb, NULL);
			if (r == -2) /* spec was taken: the create fails */
				return err_set(err, why.code, "%s", why.msg);
			return 0;
		}
		e = next;
	}
	return 0;
}

json_t *warm_to_json(const struct warm *w)
{
	int ready = 0, starting = 0;
	for (const struct warm_entry *e = w ? w->entries : NULL; e; e = e->next)
		e->ready ? ready++ : starting++;
	return json_pack("{s:i, s:i, s:i}", "size", w ? w->size : 0, "ready", ready, "starting", starting);
}

void warm_stop_all(struct engine *d)
{
	struct warm *w = d->default_pool;
	struct template *t = d->templates;
	for (; w || t; w = t ? t->pool : NULL, t = t ? t->next : NULL) {
		if (!w)
			continue;
		evtimer_del(w->refill);
		while (w->entries)
			drop(w->entries, false);
	}
}

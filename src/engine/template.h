/* Templates, start commands and readiness, warm pools.
 *
 * A template (templates.c) is a named starting point: the create fields a
 * front end validated (image, limits, env, cwd, user, network and policy,
 * start command, readiness, ...), kept as JSON so that a create naming it
 * inherits every one of them and overrides any, or a snapshot's files and
 * spec under them. It lives in state.db. A sandbox made from it does not
 * depend on it: deleting a template touches no sandbox.
 *
 * A launch (launch.c) is what a create does after the sandbox runs: start
 * its start command as a kept process, then wait for its readiness check
 * (a port listening inside, a URL answering inside, a command succeeding),
 * bounded by the check's timeout.
 *
 * A warm pool (warm.c) keeps sandboxes of a template (or of the default
 * spec, coved --warm) started and ready ahead of time; a create takes one
 * when its spec allows (same image, network mode, start command,
 * readiness), gives it the create's own limits, env, cwd, user, name,
 * policy and deadline, and the pool starts a replacement from the loop
 * once the create has been answered. A pooled sandbox is handed out once
 * and never goes back. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "engine/output.h"

struct engine;
struct sandbox;
struct sandbox_spec;

#define TEMPLATE_MAX_WARM 64
#define READY_MAX_TIMEOUT 3600 /* seconds */

struct template
{
	char name[64];
	json_t *body;       /* the create fields it was given, as checked by the front end */
	char snapshot[16];  /* made from a snapshot's files ("": from its image) */
	int warm;           /* its pool's size */
	int64_t created_at; /* unix ms */
	/* The spec its pool's sandboxes are made with (parsed from body over
	 * the snapshot's spec by the front end, no deadline). */
	struct sandbox_spec *spec;
	struct warm *pool; /* NULL without one */
	struct template *next;
};

/* ---- templates.c ---- */
int templates_load(struct engine *d, struct cove_err *err);
/* Free every template and pool (their sandboxes are left alone once
 * warm_stop_all has run). */
void templates_close(struct engine *d);
struct template *template_find(struct engine *d, const char *name);
/* NULL with a 404 "no template 'NAME'". */
struct template *template_lookup(struct engine *d, const char *name, struct cove_err *err);
/* A new template: name unused (else 409), body (taken: a new reference),
 * snapshot ("" or an ID that exists, else 404), spec (copied) the pool's.
 * The image must exist (404). Recorded, then its pool started. */
int template_add(struct engine *d, const char *name, json_t *body, const char *snapshot, int warm,
		 const struct sandbox_spec *spec, struct template **ret, struct cove_err *err);
/* Forget it, and delete its pool's sandboxes (not the ones handed out). */
int template_delete(struct engine *d, struct template *t, struct cove_err *err);
json_t *template_to_json(const struct template *t);
/* 0 when no template is made from snapshot, else -1 with a 409. */
int templates_check_snapshot_unused(struct engine *d, const char *snapshot, struct cove_err *err);
/* A sandbox from t (NULL: none, the default pool) and spec, the create's
 * whole spec: from t's pool when it has a ready sandbox spec allows
 * (*ret_pooled true), else started cold (from t's snapshot, if any). The
 * launch (start command, readiness) of a cold one is the caller's
 * (launch_needed). spec's values are moved out (the caller frees spec
 * after, as for sandbox_create). */
int template_create_sandbox(struct engine *d, struct template *t, struct sandbox_spec *spec, struct sandbox **ret,
			    bool *ret_pooled, struct cove_err *err);

/* A cold one: made now from t's snapshot (if any) or image; spec's values
 * are moved out as sandbox_create does (the caller frees spec after). */
int template_create_cold(struct engine *d, struct template *t, struct sandbox_spec *spec, struct sandbox **ret,
			 struct cove_err *err);

/* ---- launch.c ---- */
/* Whether sb has a start command or a readiness check to wait for. */
bool launch_needed(const struct sandbox *sb);
/* Start sb's start command, then wait until its readiness check passes:
 * out gets close(NULL) once ready, or close(err) when the start command
 * could not start, ended, or the check did not pass within its timeout
 * (COVE_ENOTREADY, saying which). A cancel stops the wait (sb stays). */
int launch_start(struct engine *d, struct sandbox *sb, struct output *out, struct cove_err *err);
/* A readiness URL: http://HOST[:PORT][/PATH], HOST an IPv4 address or
 * "localhost" (no name is looked up). 0, or -1 with a 400. */
int launch_check_url(const char *url, struct cove_err *err);
/* sb is going away: its wait is closed with why. */
void launch_abort(struct sandbox *sb, const char *why);

/* ---- warm.c ---- */
/* Make a pool of size n for template t (NULL: the default pool, d->warm)
 * whose sandboxes are made with spec (copied), started at once. */
int warm_open(struct engine *d, struct template *t, int n, const struct sandbox_spec *spec, struct warm **ret,
	      struct cove_err *err);
/* Delete the pool and the sandboxes in it. */
void warm_close(struct engine *d, struct warm *w);
/* A ready sandbox of w (may be NULL) that spec allows, given spec's
 * values: 1 with *ret (spec taken); 0 when there is none (spec intact);
 * -1 with err when the hand-out failed after taking spec. */
int warm_take(struct engine *d, struct warm *w, struct sandbox_spec *spec, struct sandbox **ret, struct cove_err *err);
/* {size, ready, starting} */
json_t *warm_to_json(const struct warm *w);
/* A front end has a request: refills wait for a quiet loop. */
void warm_note_request(void);
/* Every pool's sandboxes deleted (coved stopping). */
void warm_stop_all(struct engine *d);

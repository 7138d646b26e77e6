/* Named locks of a sandbox, in coved's memory (locks.c). Leases and waits
 * are in seconds, > 0 and >= 0; names are checked here. */
#pragma once
#include <jansson.h>
#include <stdint.h>

#include "common/error.h"
#include "engine/output.h"

#define LOCK_MAX_NAME 255

struct sandbox;

struct lock_request {
	const char *name;
	double lease; /* seconds the grant holds, unless renewed */
	double wait;  /* seconds to wait for a held lock; 0: fail at once */
};

/* What a grant tells its holder: an OUT_EVENT's event. */
struct lock_grant {
	const char *name;
	const char *token;  /* the proof of holding it, for release and renew */
	int64_t expires_at; /* unix ms */
};

/* Grant the lock at once, or queue until it comes free (a waiter, first
 * come first served) or the wait runs out: either way out gets one
 * OUT_EVENT with a struct lock_grant and its close, or only its close with
 * the failure (COVE_EBUSY when the wait ran out, COVE_ESTATE when the
 * sandbox went). -1 with err (out untouched) when refused at once: a held
 * lock and no wait, a bad name, too many locks or waiters. A waiter whose
 * output is cancelled leaves the queue. */
int lock_acquire(struct sandbox *sb, const struct lock_request *lr, struct output *out, struct cove_err *err);
/* Both need the holder's token (else 409, nothing changes). */
int lock_release(struct sandbox *sb, const char *name, const char *token, struct cove_err *err);
int lock_renew(struct sandbox *sb, const char *name, const char *token, double lease, int64_t *ret_expires_at,
	       struct cove_err *err);
/* [{name, expires_at, waiters}], never a token. */
json_t *locks_to_json(const struct sandbox *sb);
/* The sandbox is going away: fail the waiters, forget the locks. */
void locks_drop_all(struct sandbox *sb, const char *why);

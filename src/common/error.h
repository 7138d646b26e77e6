/* Errors that can reach a user carry a message up the stack (as crun's
 * libcrun_error_t): the lowest layer that knows the context fills it once,
 * callers only add nothing or return it. `code` is a positive errno value or
 * one of the COVE_E* codes below; the HTTP layer maps it to a status. */
#pragma once
#include <stdarg.h>

enum cove_errcode {
	COVE_EINVAL = 1000, /* bad input: 400 */
	COVE_ENOTFOUND,     /* unknown id: 404 */
	COVE_ESTATE,        /* wrong state: 409 */
	COVE_ETOOBIG,       /* too large: 413 */
	COVE_EFULL,         /* no slot: 429 */
	COVE_EINTERNAL,     /* a bug or the host failing: 500 */
	COVE_EPERM,         /* not permitted (a file the user may not touch): 403 */
	COVE_EBUSY,         /* a lock held by another (not granted within the wait): 409 */
	COVE_ENOTREADY,     /* a readiness check that did not pass in time: 504 */
	COVE_ENOSPACE,      /* the disk (pool or state) is full: 507 */
};

struct cove_err {
	int code;
	char msg[512];
};

/* Sets err (if not NULL and not set yet) and returns -1. */
int err_set(struct cove_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* As err_set, with ": strerror(errnum)" appended; code = errnum (COVE_ENOSPACE
 * for ENOSPC and EDQUOT). */
int err_sys(struct cove_err *err, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The symbolic name of an error code ("invalid_argument", "not_found", ...). */
const char *err_code_name(int code);

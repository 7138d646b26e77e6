#include "common/error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int err_vset(struct cove_err *err, int code, int errnum, const char *fmt, va_list ap)
{
	if (!err || err->code)
		return -1;
	err->code = code;
	int n = vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	if (errnum && n >= 0 && (size_t)n < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - n, ": %s", strerror(errnum));
	return -1;
}

int err_set(struct cove_err *err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	err_vset(err, code, 0, fmt, ap);
	va_end(ap);
	return -1;
}

int err_sys(struct cove_err *err, int errnum, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int code = errnum == ENOSPC || errnum == EDQUOT ? COVE_ENOSPACE : errnum ? errnum : COVE_EINTERNAL;
	err_vset(err, code, errnum, fmt, ap);
	va_end(ap);
	return -1;
}

const char *err_code_name(int code)
{
	switch (code) {
	case 0:
		return "ok";
	case COVE_EINVAL:
		return "invalid_argument";
	case COVE_ENOTFOUND:
		return "not_found";
	case COVE_ESTATE:
		return "wrong_state";
	case COVE_ETOOBIG:
		return "too_large";
	case COVE_EFULL:
		return "no_capacity";
	case COVE_EPERM:
		return "permission_denied";
	case COVE_EBUSY:
		return "lock_held";
	case COVE_ENOTREADY:
		return "not_ready";
	case COVE_ENOSPACE:
	case ENOSPC:
	case EDQUOT:
		return "no_space";
	default:
		return "internal";
	}
}

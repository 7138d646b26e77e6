/* Connect's envelopes and error codes (connect.h). */
#include <string.h>

#include "daemon/e2b/connect.h"

void connect_envelope_header(uint8_t flags, uint32_t len, uint8_t out[5])
{
	out[0] = flags;
	out[1] = (uint8_t)(len >> 24);
	out[2] = (uint8_t)(len >> 16);
	out[3] = (uint8_t)(len >> 8);
	out[4] = (uint8_t)len;
}

static int parse_object(const uint8_t *p, size_t len, json_t **ret, struct cove_err *err)
{
	json_error_t je;
	json_t *j = json_loadb((const char *)p, len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return err_set(err, COVE_EINVAL, "the message is not JSON: %s", je.text);
	if (!json_is_object(j)) {
		json_decref(j);
		return err_set(err, COVE_EINVAL, "the message must be a JSON object");
	}
	*ret = j;
	return 0;
}

int connect_next(const uint8_t *body, size_t len, size_t *off, uint8_t *flags, json_t **ret, struct cove_err *err)
{
	const uint8_t *p = body + *off;
	size_t left = len - *off;
	if (left < 5)
		return err_set(err, COVE_EINVAL,
			       "an enveloped message must have 5 header bytes (%zu bytes is too short)", left);
	uint32_t n = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];
	if (p[0] & CONNECT_FLAG_COMPRESSED)
		return err_set(err, COVE_EINVAL, "compressed messages are not supported");
	if (p[0] & ~CONNECT_FLAG_END)
		return err_set(err, COVE_EINVAL, "an envelope has unknown flags 0x%02x", p[0]);
	if (n > CONNECT_MAX_MESSAGE)
		return err_set(err, COVE_EINVAL, "the message is larger than %u bytes", CONNECT_MAX_MESSAGE);
	if (n > left - 5)
		return err_set(err, COVE_EINVAL, "the envelope says %u bytes but %zu follow", n, left - 5);
	if (parse_object(p + 5, n, ret, err) < 0)
		return -1;
	*flags = p[0];
	*off += 5 + (size_t)n;
	return 0;
}

int connect_parse_request(const uint8_t *body, size_t len, json_t **ret, struct cove_err *err)
{
	size_t off = 0;
	uint8_t flags = 0;
	if (len < 5)
		return err_set(err, COVE_EINVAL,
			       "the request body must be one enveloped message (%zu bytes is too short)", len);
	if (body[0] == CONNECT_FLAG_END)
		return err_set(err, COVE_EINVAL, "the request's envelope has flags 0x%02x, not a message", body[0]);
	if (connect_next(body, len, &off, &flags, ret, err) < 0)
		return -1;
	if (off != len) {
		json_decref(*ret);
		*ret = NULL;
		return err_set(err, COVE_EINVAL, "the envelope says %zu bytes but %zu follow", off - 5, len - 5);
	}
	return 0;
}

int connect_parse_unary(const uint8_t *body, size_t len, json_t **ret, struct cove_err *err)
{
	if (len == 0) {
		*ret = json_object();
		return 0;
	}
	return parse_object(body, len, ret, err);
}

const char *connect_code_of(int cove_code)
{
	switch (cove_code) {
	case COVE_EINVAL:
		return "invalid_argument";
	case COVE_ENOTFOUND:
		return "not_found";
	case COVE_ESTATE:
		return "failed_precondition";
	case COVE_EFULL:
	case COVE_ETOOBIG:
	case COVE_ENOSPACE:
		return "resource_exhausted";
	case COVE_EPERM:
		return "permission_denied";
	case COVE_EBUSY:
		return "unavailable";
	default:
		return "internal";
	}
}

int connect_status_of(const char *code)
{
	static const struct {
		const char *code;
		int status;
	} map[] = {
		{ "invalid_argument", 400 },   { "failed_precondition", 400 },
		{ "out_of_range", 400 },       { "unauthenticated", 401 },
		{ "permission_denied", 403 },  { "not_found", 404 },
		{ "already_exists", 409 },     { "aborted", 409 },
		{ "resource_exhausted", 429 }, { "canceled", 499 },
		{ "unimplemented", 501 },      { "unavailable", 503 },
		{ "deadline_exceeded", 504 },
	};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strcmp(map[i].code, code) == 0)
			return map[i].status;
	return 500;
}

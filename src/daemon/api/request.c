/* Reading cove's REST requests: JSON bodies and query strings, each
 * field checked (request.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/parse.h"
#include "daemon/api/request.h"
#include "engine/engine.h"
#include "engine/network.h"

/* The request body as JSON (an empty body is an empty object). */
json_t *read_body(struct http_req *req, struct cove_err *err)
{
	struct evbuffer *b = http_req_body(req);
	size_t n = evbuffer_get_length(b);
	if (n == 0)
		return json_object();
	json_error_t je;
	json_t *j = json_loadb((const char *)evbuffer_pullup(b, -1), n, JSON_REJECT_DUPLICATES, &je);
	if (!j) {
		err_set(err, COVE_EINVAL, "malformed JSON body: %s (at byte %d)", je.text, je.position);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		err_set(err, COVE_EINVAL, "the body must be a JSON object");
		return NULL;
	}
	return j;
}

/* Every key of j must be in allowed (NULL-terminated). */
int check_fields(json_t *j, const char *const *allowed, struct cove_err *err)
{
	const char *k;
	json_t *v;
	json_object_foreach(j, k, v)
	{
		bool ok = false;
		for (int i = 0; allowed[i] && !ok; i++)
			ok = strcmp(k, allowed[i]) == 0;
		if (!ok)
			return err_set(err, COVE_EINVAL, "unknown field '%s'", k);
	}
	return 0;
}

int get_string(json_t *j, const char *key, const char **ret, size_t max, struct cove_err *err)
{
	json_t *v = json_object_get(j, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return err_set(err, COVE_EINVAL, "'%s' must be a string", key);
	if (json_string_length(v) > max || strlen(json_string_value(v)) != json_string_length(v))
		return err_set(err, COVE_EINVAL, "'%s' is too long or holds a NUL byte", key);
	*ret = json_string_value(v);
	return 0;
}

int get_number(json_t *j, const char *key, double min, double max, double *ret, struct cove_err *err)
{
	json_t *v = json_object_get(j, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_number(v) || json_number_value(v) < min || json_number_value(v) > max)
		return err_set(err, COVE_EINVAL, "'%s' must be a number from %g to %g", key, min, max);
	*ret = json_number_value(v);
	return 0;
}

int get_bool(json_t *j, const char *key, bool *ret, struct cove_err *err)
{
	json_t *v = json_object_get(j, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return err_set(err, COVE_EINVAL, "'%s' must be a boolean", key);
	*ret = json_is_true(v);
	return 0;
}

int get_string_list(json_t *j, const char *key, size_t max, json_t **ret, struct cove_err *err)
{
	json_t *v = json_object_get(j, key), *it;
	size_t i;
	if (!v || json_is_null(v)) {
		*ret = json_array();
		return 0;
	}
	if (!json_is_array(v) || json_array_size(v) > max)
		return err_set(err, COVE_EINVAL, "'%s' must be an array of at most %zu strings", key, max);
	json_array_foreach(v, i, it)
	{
		if (!json_is_string(it))
			return err_set(err, COVE_EINVAL, "'%s'[%zu] must be a string", key, i);
	}
	*ret = json_incref(v);
	return 0;
}

int set_policy(struct sandbox *sb, json_t *allow, json_t *deny, struct cove_err *err)
{
	size_t na = json_array_size(allow), nd = json_array_size(deny);
	const char **a = calloc(na + 1, sizeof(*a)), **dv = calloc(nd + 1, sizeof(*dv));
	int r = a && dv ? 0 : err_set(err, COVE_EINTERNAL, "out of memory");
	for (size_t i = 0; r == 0 && i < na; i++)
		a[i] = json_string_value(json_array_get(allow, i));
	for (size_t i = 0; r == 0 && i < nd; i++)
		dv[i] = json_string_value(json_array_get(deny, i));
	struct network_policy_req pr = { .allow_out = a, .n_allow = na, .deny_out = dv, .n_deny = nd };
	if (r == 0)
		r = network_set_policy(engine_ctx, sb, &pr, err);
	free(a);
	free(dv);
	return r;
}

int check_env(json_t *env, struct cove_err *err)
{
	if (!env || json_is_null(env))
		return 0;
	if (!json_is_object(env))
		return err_set(err, COVE_EINVAL, "'env' must be an object of strings");
	const char *k;
	json_t *v;
	json_object_foreach(env, k, v)
	{
		if (!env_name_valid(k))
			return err_set(err, COVE_EINVAL, "bad environment variable name '%s'", k);
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return err_set(err, COVE_EINVAL, "environment variable '%s' must be a string", k);
	}
	return 0;
}

/* ---- query strings ---- */

const char *query_of(struct http_req *req)
{
	const char *q = http_req_query(req);
	return q ? q : "";
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
		return (c | 0x20) - 'a' + 10;
	return -1;
}

/* One query parameter, percent-decoded ('+' is a space, as in forms).
 * Returns 1 when present, 0 when absent, -1 (err set) when malformed or
 * holding a NUL byte. */
int query_param(const char *query, const char *name, char *out, size_t cap, struct cove_err *err)
{
	size_t nlen = strlen(name);
	for (const char *p = query; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
		if (strncmp(p, name, nlen) != 0 || (p[nlen] != '=' && p[nlen] != '&' && p[nlen]))
			continue;
		const char *v = p[nlen] == '=' ? p + nlen + 1 : p + nlen;
		size_t n = 0;
		for (; *v && *v != '&'; v++) {
			int c = (unsigned char)*v;
			if (c == '+') {
				c = ' ';
			} else if (c == '%') {
				int hi = hex_digit(v[1]), lo = hi < 0 ? -1 : hex_digit(v[2]);
				if (lo < 0)
					return err_set(err, COVE_EINVAL, "'%s': bad percent-encoding", name);
				c = hi * 16 + lo;
				v += 2;
			}
			if (c == 0)
				return err_set(err, COVE_EINVAL, "'%s' holds a NUL byte", name);
			if (n + 1 >= cap)
				return err_set(err, COVE_EINVAL, "'%s' is too long", name);
			out[n++] = (char)c;
		}
		out[n] = '\0';
		return 1;
	}
	return 0;
}

/* Every parameter's name must be in allowed (NULL-terminated). */
int check_params(const char *query, const char *const *allowed, struct cove_err *err)
{
	for (const char *p = query; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
		size_t n = strcspn(p, "=&");
		bool ok = n == 0;
		for (int i = 0; allowed[i] && !ok; i++)
			ok = strlen(allowed[i]) == n && strncmp(p, allowed[i], n) == 0;
		if (!ok)
			return err_set(err, COVE_EINVAL, "unknown parameter '%.*s'", (int)(n > 64 ? 64 : n), p);
	}
	return 0;
}

int get_path(const char *query, const char *name, char out[PATH_MAX], struct cove_err *err)
{
	int r = query_param(query, name, out, PATH_MAX, err);
	if (r < 0)
		return -1;
	if (r == 0 || !out[0])
		return err_set(err, COVE_EINVAL, "'%s' is required", name);
	if (out[0] != '/')
		return err_set(err, COVE_EINVAL, "'%s' must be an absolute path", name);
	return 0;
}

int get_flag(const char *query, const char *name, bool *ret, struct cove_err *err)
{
	char v[8];
	int r = query_param(query, name, v, sizeof(v), err);
	if (r <= 0)
		return r;
	if (strcmp(v, "1") != 0 && strcmp(v, "true") != 0 && strcmp(v, "0") != 0 && strcmp(v, "false") != 0)
		return err_set(err, COVE_EINVAL, "'%s' must be 1, true, 0 or false", name);
	*ret = v[0] == '1' || v[0] == 't';
	return 0;
}



/* "memory": bytes as a number or a string like "512M". */
int get_size(json_t *j, const char *key, uint64_t *ret, struct cove_err *err)
{
	json_t *v = json_object_get(j, key);
	if (!v || json_is_null(v))
		return 0;
	if (json_is_integer(v) && json_integer_value(v) > 0) {
		*ret = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (json_is_string(v) && parse_size(json_string_value(v), ret) == 0 && *ret > 0)
		return 0;
	return err_set(err, COVE_EINVAL, "'%s' must be a positive size (bytes, or like \"512M\")", key);
}

int get_argv(json_t *cmd, const char *key, json_t **ret, struct cove_err *err)
{
	if (json_is_string(cmd)) {
		if (json_string_length(cmd) == 0 || strlen(json_string_value(cmd)) != json_string_length(cmd))
			return err_set(err, COVE_EINVAL, "'%s' must not be empty or hold NUL bytes", key);
		*ret = json_pack("[s, s, O]", "/bin/sh", "-c", cmd);
		return 0;
	}
	if (!json_is_array(cmd) || json_array_size(cmd) == 0)
		return err_set(err, COVE_EINVAL, "'%s' must be a non-empty array of strings, or a shell string", key);
	size_t i;
	json_t *v;
	json_array_foreach(cmd, i, v)
	{
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return err_set(err, COVE_EINVAL, "'%s' must hold only strings without NUL bytes", key);
	}
	if (json_string_length(json_array_get(cmd, 0)) == 0)
		return err_set(err, COVE_EINVAL, "'%s' must not start with an empty string", key);
	*ret = json_incref(cmd);
	return 0;
}

/* Reading cove's REST requests. Each helper checks one field and sets err
 * (COVE_EINVAL, with a message naming the field) and returns -1 (or NULL)
 * on bad input; a missing or null field leaves *ret alone. Bad input is
 * refused before anything changes: a handler parses everything into the
 * engine's typed request first, and only then calls the engine. */
#pragma once
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "daemon/http/httpd.h"

/* JSON bodies */
json_t *read_body(struct http_req *req, struct cove_err *err); /* an object; empty body = {} */
/* Every key of j must be in allowed (NULL-terminated). */
int check_fields(json_t *j, const char *const *allowed, struct cove_err *err);
int get_string(json_t *j, const char *key, const char **ret, size_t max, struct cove_err *err);
int get_number(json_t *j, const char *key, double min, double max, double *ret, struct cove_err *err);
int get_bool(json_t *j, const char *key, bool *ret, struct cove_err *err);
/* An array of at most max strings (absent or null: empty) into *ret, a
 * new reference; what each string means is the caller's to check. */
int get_string_list(json_t *j, const char *key, size_t max, json_t **ret, struct cove_err *err);
/* sb's egress policy replaced by the lists allow and deny (arrays of
 * strings, as get_string_list gives them): network_set_policy. */
struct sandbox;
int set_policy(struct sandbox *sb, json_t *allow, json_t *deny, struct cove_err *err);
/* An object of environment variables: valid names, string values. */
int check_env(json_t *env, struct cove_err *err);
/* Bytes as a positive number or a string like "512M". */
int get_size(json_t *j, const char *key, uint64_t *ret, struct cove_err *err);

/* A command: an array of strings (argv), or a shell string (run with
 * /bin/sh -c), as argv in *ret (a new reference); key names it in errors. */
int get_argv(json_t *cmd, const char *key, json_t **ret, struct cove_err *err);

/* Query strings */
const char *query_of(struct http_req *req); /* "" when there is none */
/* One parameter, percent-decoded: 1 when present, 0 when absent, -1 (err
 * set) when malformed or holding a NUL byte. */
int query_param(const char *query, const char *name, char *out, size_t cap, struct cove_err *err);
/* Every parameter's name must be in allowed (NULL-terminated). */
int check_params(const char *query, const char *const *allowed, struct cove_err *err);
/* A required absolute path. */
int get_path(const char *query, const char *name, char out[PATH_MAX], struct cove_err *err);
/* 1, true, 0 or false; *ret untouched when absent. */
int get_flag(const char *query, const char *name, bool *ret, struct cove_err *err);

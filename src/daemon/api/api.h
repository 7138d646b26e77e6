/* cove's REST API: the route table (api.c). */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "common/error.h"
#include "daemon/http/httpd.h"

struct sandbox;
struct sandbox_spec;
struct template;

void api_handle(struct http_req *req);
/* Whether req's route takes its body as it comes (httpd.h). */
bool api_streams(struct http_req *req);

/* A route's handler: id is the {id} segment or NULL. 0 when an answer was
 * (or will be) sent, -1 with err set otherwise (api_handle answers it). */
typedef int (*handler_fn)(struct http_req *req, const char *id, struct cove_err *err);

/* The sandbox id, or NULL with a 404 in err. */
struct sandbox *api_lookup(const char *id, struct cove_err *err);

/* sandboxes.c */
int h_health(struct http_req *req, const char *id, struct cove_err *err);
int h_capabilities(struct http_req *req, const char *id, struct cove_err *err);
int h_create(struct http_req *req, const char *id, struct cove_err *err);
int h_list(struct http_req *req, const char *id, struct cove_err *err);
int h_get(struct http_req *req, const char *id, struct cove_err *err);
int h_delete(struct http_req *req, const char *id, struct cove_err *err);
int h_timeout(struct http_req *req, const char *id, struct cove_err *err);
int h_network(struct http_req *req, const char *id, struct cove_err *err);
/* A create request's fields (j) into s, checked, the defaults filled in. */
int api_parse_spec(json_t *j, struct sandbox_spec *s, struct cove_err *err);
/* Whether key is a field of a create request. */
bool api_spec_field_known(const char *key);

/* templates.c */
int h_template_create(struct http_req *req, const char *id, struct cove_err *err);
int h_template_list(struct http_req *req, const char *id, struct cove_err *err);
int h_template_get(struct http_req *req, const char *id, struct cove_err *err);
int h_template_delete(struct http_req *req, const char *id, struct cove_err *err);
/* A create request j naming a "template": *ret its template and *merged
 * the create's fields, the template's (and its snapshot's) under j's own.
 * Without one: *ret NULL, *merged j. */
int api_template_merge(json_t *j, struct template **ret, json_t **merged, struct cove_err *err);
/* "start" and "ready" of a create or template request, into s. */
int api_parse_launch(json_t *j, struct sandbox_spec *s, struct cove_err *err);
/* Answer a create: sb's JSON once its launch (start command, readiness)
 * is over, at once if it has none or came from a pool; a launch that
 * fails, or a client gone meanwhile, deletes it. */
int api_created(struct http_req *req, struct sandbox *sb, bool pooled, struct cove_err *err);

/* snapshots.c */
int h_snapshot(struct http_req *req, const char *id, struct cove_err *err);
int h_fork(struct http_req *req, const char *id, struct cove_err *err);
int h_snapshot_list(struct http_req *req, const char *id, struct cove_err *err);
int h_snapshot_get(struct http_req *req, const char *id, struct cove_err *err);
int h_snapshot_delete(struct http_req *req, const char *id, struct cove_err *err);
int h_restore(struct http_req *req, const char *id, struct cove_err *err);
int h_checkpoint(struct http_req *req, const char *id, struct cove_err *err);
int h_history(struct http_req *req, const char *id, struct cove_err *err);
int h_history_delete(struct http_req *req, const char *id, struct cove_err *err);
int h_rollback(struct http_req *req, const char *id, struct cove_err *err);
int h_branch(struct http_req *req, const char *id, struct cove_err *err);

/* ports.c */
int h_ports_open(struct http_req *req, const char *id, struct cove_err *err);
int h_ports_list(struct http_req *req, const char *id, struct cove_err *err);
int h_port_close(struct http_req *req, const char *id, struct cove_err *err);
int h_port_forward(struct http_req *req, const char *id, struct cove_err *err);

/* images.c */
int h_images_list(struct http_req *req, const char *id, struct cove_err *err);
int h_images_import(struct http_req *req, const char *id, struct cove_err *err);
int h_images_pull(struct http_req *req, const char *id, struct cove_err *err);
int h_images_prune(struct http_req *req, const char *id, struct cove_err *err);
int h_image_get(struct http_req *req, const char *id, struct cove_err *err);
int h_image_delete(struct http_req *req, const char *id, struct cove_err *err);

/* locks.c */
int h_lock_acquire(struct http_req *req, const char *id, struct cove_err *err);
int h_lock_list(struct http_req *req, const char *id, struct cove_err *err);
int h_lock_release(struct http_req *req, const char *id, struct cove_err *err);
int h_lock_renew(struct http_req *req, const char *id, struct cove_err *err);

/* ephemeral.c: sandboxes deleted with the connection that created them. */
int ephemeral_add(struct http_conn *conn, const char *id);
/* The engine's on_sandbox_deleted: id is gone, no connection owns it. */
void ephemeral_forget(const char *id);

/* cove's REST API for processes: exec, kept processes and sessions
 * (processes.c), over the engine's engine/process.h. Handlers as api.c's
 * route table calls them: 0 when an answer was (or will be) sent, -1 with
 * err set otherwise. */
#pragma once
#include "common/error.h"
#include "daemon/http/httpd.h"

int api_exec(struct http_req *req, const char *id, struct cove_err *err);
int api_procs_list(struct http_req *req, const char *id, struct cove_err *err);
int api_proc_get(struct http_req *req, const char *id, struct cove_err *err); /* ?wait=S */
int api_proc_attach(struct http_req *req, const char *id, struct cove_err *err);
int api_proc_stdin(struct http_req *req, const char *id, struct cove_err *err);
int api_proc_signal(struct http_req *req, const char *id, struct cove_err *err);
int api_proc_resize(struct http_req *req, const char *id, struct cove_err *err);
int api_sessions_create(struct http_req *req, const char *id, struct cove_err *err);
int api_sessions_list(struct http_req *req, const char *id, struct cove_err *err);
int api_session_delete(struct http_req *req, const char *id, struct cove_err *err);

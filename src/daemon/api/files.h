/* cove's REST handlers of the Files API (files.c) and of watches
 * (watch.c), for the route table (api.c). id is the {id} segment or NULL;
 * 0 when an answer was or will be sent, -1 with err otherwise. */
#pragma once
#include "common/error.h"
#include "daemon/http/httpd.h"

int api_files_get(struct http_req *req, const char *id, struct cove_err *err);
int api_files_put(struct http_req *req, const char *id, struct cove_err *err);
int api_files_delete(struct http_req *req, const char *id, struct cove_err *err);
int api_files_mkdir(struct http_req *req, const char *id, struct cove_err *err);
int api_files_move(struct http_req *req, const char *id, struct cove_err *err);
int api_files_chmod(struct http_req *req, const char *id, struct cove_err *err);
int api_files_tar_get(struct http_req *req, const char *id, struct cove_err *err);
int api_files_tar_put(struct http_req *req, const char *id, struct cove_err *err);
int api_export_get(struct http_req *req, const char *id, struct cove_err *err);
int api_portable_get(struct http_req *req, const char *id, struct cove_err *err);
int api_portable_post(struct http_req *req, const char *id, struct cove_err *err);
int api_files_watch(struct http_req *req, const char *id, struct cove_err *err);

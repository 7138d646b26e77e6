/* cove's REST API: the route table (api.c). */
#pragma once
#include <stdbool.h>

#include "daemon/http/httpd.h"

void api_handle(struct http_req *req);
/* Whether req's route takes its body as it comes (httpd.h). */
bool api_streams(struct http_req *req);

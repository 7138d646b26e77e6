/* E2B's API on coved's TCP listener: the control plane (/sandboxes,
 * /v2/sandboxes) and envd (requests with an E2b-Sandbox-Id header), a
 * front end on the engine as cove's REST API is (docs/architecture.md).
 * Everything else goes on to cove's API. */
#pragma once
#include <stdbool.h>

#include "daemon/http/httpd.h"

/* The server's callbacks: E2B's requests here, the rest to api_*. */
bool e2b_streams(struct http_req *req);
void e2b_handle(struct http_req *req);

/* coved's front ends' own state, beside the engine they drive. */
#pragma once
#include <stdint.h>

#include "daemon/http/access.h"
#include "daemon/http/httpd.h"
#include "daemon/proxy/proxy.h"
#include "engine/engine.h"

struct daemon {
	struct engine *engine;
	int api_fd;                       /* the API's unix socket */
	struct http_listener *api_handle; /* NULL once stopping */
	char socket_path[512];
	struct access_config access;
	struct proxy_config proxy;
};

extern struct daemon *daemon_ctx;

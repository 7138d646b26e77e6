/* cove's REST API: what sandboxes use (GET /v1/sandboxes/{id}/stats) and
 * coved's metrics in Prometheus text (GET /metrics). The figures are
 * counted where they happen: answers by the HTTP server as it writes them
 * (http_stats_get), operations by the engine as they complete
 * (engine_metrics_write); this file only puts them together. */
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/cleanup.h"
#include "common/metrics.h"
#include "daemon/api/api.h"
#include "daemon/api/reply.h"
#include "daemon/api/request.h"
#include "engine/engine.h"
#include "engine/usage.h"

json_t *api_usage_json(const struct sandbox *sb)
{
	struct sandbox_usage u;
	sandbox_usage_get(engine_ctx, sb, &u);
	return sandbox_usage_json(sb, &u);
}

int h_stats(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { NULL };
	struct sandbox *sb = api_lookup(id, err);
	if (!sb || check_params(query_of(req), params, err) < 0)
		return -1;
	reply_json(req, 200, api_usage_json(sb));
	return 0;
}

static void http_write(FILE *f)
{
	static const char *const classes[] = { "1xx", "2xx", "3xx", "4xx", "5xx" };
	const struct http_stats *s = http_stats_get();
	metrics_header(f, "cove_http_requests_total", "counter", "HTTP requests handed to coved's API routes.");
	metrics_sample(f, "cove_http_requests_total", NULL, (double)s->requests);
	metrics_header(f, "cove_http_responses_total", "counter", "HTTP answers sent, by status class.");
	for (int i = 1; i <= 5; i++) {
		char labels[32];
		snprintf(labels, sizeof(labels), "code=\"%s\"", classes[i - 1]);
		metrics_sample(f, "cove_http_responses_total", labels, (double)s->responses[i]);
	}
	metrics_header(f, "cove_http_errors_total", "counter", "HTTP answers with a 4xx or 5xx status.");
	metrics_sample(f, "cove_http_errors_total", "code=\"4xx\"", (double)s->responses[4]);
	metrics_sample(f, "cove_http_errors_total", "code=\"5xx\"", (double)s->responses[5]);
}

int h_metrics(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { NULL };
	if (check_params(query_of(req), params, err) < 0)
		return -1;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	/* Counted before this answer is: it shows in the next scrape. */
	http_write(f);
	engine_metrics_write(engine_ctx, f);
	if (fclose(f) != 0) {
		free(text);
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	struct evbuffer *b = evbuffer_new();
	evbuffer_add(b, text, len);
	free(text);
	evhttp_add_header(http_req_out_headers(req), "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	http_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
	return 0;
}

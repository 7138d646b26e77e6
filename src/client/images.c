/* libcove's images: import from a file descriptor, pull with progress
 * events (cove.h). The other image routes are plain JSON (cove_call). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client.h"

int cove_image_import_from(struct cove *c, const struct cove_source *src, const char *name, char **ret_json,
			   struct cove_error *err)
{
	char target[1024] = "/v1/images";
	struct http_body_source body = { src->fd, src->len, src->progress, src->arg };
	struct http_response res;
	struct cove_err e = { 0 };
	if (name && client_add_param(target, sizeof(target), '?', "name", name, err) < 0)
		return -1;
	/* A fresh connection: a kept-alive one the daemon closed meanwhile
	 * could not be retried without rewinding the source. */
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	if (client_connect(c, err) < 0)
		return -1;
	c->requests_on_fd++;
	if (http_request_from(c->fd, "POST", target, c->auth, &body, MAX_RESPONSE, &res, &e) == 0)
		return client_take_json(&res, ret_json, err);
	close(c->fd);
	c->fd = -1;
	return client_set_error(err, 0, e.code == COVE_EINVAL ? "invalid_argument" : "unreachable", "coved at '%s': %s",
				client_daemon_address(c), e.msg);
}

struct pull_stream {
	struct client_lines lines;
	cove_image_fn fn;
	void *arg;
	char *image; /* the last event's image, as JSON */
	char error_code[32], error_message[512];
};

static int pull_line(void *arg, const char *line, size_t len)
{
	struct pull_stream *s = arg;
	json_t *j = json_loadb(line, len, 0, NULL), *image;
	const char *type = client_line_type(j, s->error_code, s->error_message);
	int r = 0;
	if (type && strcmp(type, "image") == 0 && (image = json_object_get(j, "image"))) {
		free(s->image);
		s->image = json_dumps(image, JSON_COMPACT);
	} else if (type && strcmp(type, "layer") == 0 && s->fn) {
		struct cove_image_event ev = {
			.digest = json_string_value(json_object_get(j, "digest")),
			.status = json_string_value(json_object_get(j, "status")),
			.done = (unsigned long long)json_integer_value(json_object_get(j, "done")),
			.total = (unsigned long long)json_integer_value(json_object_get(j, "total")),
		};
		if (ev.digest && ev.status)
			r = s->fn(s->arg, &ev);
	}
	json_decref(j);
	return r;
}

int cove_image_pull(struct cove *c, const char *ref, cove_image_fn fn, void *arg, char **ret_json,
		    struct cove_error *err)
{
	struct pull_stream s = { .fn = fn, .arg = arg };
	struct http_response res;
	s.lines = (struct client_lines){ .fn = pull_line, .arg = &s };
	json_t *body = json_pack("{s:s}", "ref", ref);
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	int r = text ? client_request_raw(c, "POST", "/v1/images/pull", text, strlen(text), client_lines_feed, &s.lines,
					  &res, err)
		     : client_set_error(err, 0, "internal", "out of memory");
	free(text);
	free(s.lines.line);
	if (r == 0 && s.error_code[0])
		r = client_set_error(err, res.status >= 300 ? res.status : client_status_of_code(s.error_code),
				     s.error_code, "%s", s.error_message);
	else if (r == 0 && !s.image)
		r = client_set_error(err, res.status >= 300 ? res.status : 0, "unreachable",
				     "the pull's stream ended early");
	if (r == 0 && ret_json)
		*ret_json = s.image;
	else
		free(s.image);
	return r;
}

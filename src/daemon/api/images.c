/* cove's REST routes for images (engine/images.h):
 *
 *   POST   /v1/images[?name=REF][&ref=SELECT]  import: the body is an OCI image
 *          layout or a docker archive as a tar (plain or compressed), streamed;
 *          answered 201 with the image
 *   POST   /v1/images/pull {"ref": REF}       NDJSON: {"type":"layer", "digest",
 *          "done", "total", "status"} as it goes, {"type":"image","image":{...}}
 *          last, or {"type":"error","error":{code,message}}; an error before
 *          the first event is an ordinary error answer
 *   POST   /v1/images/prune {"all": bool}     {"deleted": [IDs]}
 *   GET    /v1/images                         {"images": [image]}, newest first
 *   GET    /v1/images/{ref or id}             image (ref percent-encoded: '/' as %2F)
 *   DELETE /v1/images/{ref or id}             409 while in use */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/api/api.h"
#include "daemon/api/reply.h"
#include "daemon/api/request.h"
#include "engine/engine.h"
#include "engine/images.h"

#define REF_MAX 320

/* The {ref} of /v1/images/{ref}, percent-decoded. */
static int path_ref(struct http_req *req, char out[REF_MAX], struct cove_err *err)
{
	const char *p = http_req_path(req), *prefix = "/v1/images/";
	size_t n = 0;
	if (!p || strncmp(p, prefix, strlen(prefix)) != 0)
		return err_set(err, COVE_EINVAL, "no image named");
	for (p += strlen(prefix); *p && n < REF_MAX - 1; p++) {
		if (*p == '%' && isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])) {
			char hex[3] = { p[1], p[2], 0 };
			out[n++] = (char)strtol(hex, NULL, 16);
			p += 2;
		} else {
			out[n++] = *p;
		}
	}
	out[n] = '\0';
	if (*p || !n || memchr(out, '\0', n))
		return err_set(err, COVE_EINVAL, "bad image reference");
	return 0;
}

int h_images_list(struct http_req *req, const char *id, struct cove_err *err)
{
	reply_json(req, 200, json_pack("{s:o}", "images", images_to_json(engine_ctx)));
	return 0;
}

int h_image_get(struct http_req *req, const char *id, struct cove_err *err)
{
	char ref[REF_MAX];
	json_t *j;
	if (path_ref(req, ref, err) < 0 || image_get(engine_ctx, ref, &j, err) < 0)
		return -1;
	reply_json(req, 200, j);
	return 0;
}

int h_image_delete(struct http_req *req, const char *id, struct cove_err *err)
{
	char ref[REF_MAX];
	json_t *j;
	if (path_ref(req, ref, err) < 0 || image_delete(engine_ctx, ref, &j, err) < 0)
		return -1;
	reply_json(req, 200, j);
	return 0;
}

int h_images_prune(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "all", NULL };
	bool all = false;
	json_t *j = read_body(req, err), *ret;
	int r = !j || check_fields(j, fields, err) < 0 || get_bool(j, "all", &all, err) < 0 ||
				images_prune(engine_ctx, all, &ret, err) < 0
			? -1
			: 0;
	json_decref(j);
	if (r == 0)
		reply_json(req, 200, ret);
	return r;
}

/* ---- pull: NDJSON ---- */

static void pull_encode(struct http_output *ho, const struct out_event *ev)
{
	const struct image_event *e = ev->event;
	if (ev->type != OUT_EVENT)
		return;
	if (!ho->started)
		reply_start(ho, "application/x-ndjson");
	reply_line(ho, json_incref(e->json));
}

static void ho_free(struct http_output *ho)
{
	free(ho);
}

static const struct http_output_route pull_route = { .encode = pull_encode,
						     .finish = reply_ndjson_finish,
						     .free = ho_free };

int h_images_pull(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "ref", NULL };
	const char *ref = NULL;
	json_t *j = read_body(req, err);
	if (!j || check_fields(j, fields, err) < 0 || get_string(j, "ref", &ref, REF_MAX - 1, err) < 0 || !ref ||
	    !*ref) {
		if (j && !err->code)
			err_set(err, COVE_EINVAL, "'ref' is required: the image to pull, like 'localhost:5000/app:1'");
		json_decref(j);
		return -1;
	}
	struct http_output *ho = calloc(1, sizeof(*ho));
	int r = -1;
	if (!ho)
		err_set(err, COVE_EINTERNAL, "out of memory");
	else if (http_output_init(ho, req, &pull_route, NULL, err) == 0) {
		r = image_pull_start(engine_ctx, ref, &ho->out, err);
		if (r < 0)
			http_output_abandon(ho);
	}
	if (r < 0)
		free(ho);
	json_decref(j);
	return r;
}

/* ---- import: a streamed body, one JSON answer ---- */

struct import_call {
	struct http_output ho;
	struct image_job *job; /* NULL once the engine closed the output */
	json_t *image;
	bool taking, freed;
};

static void import_encode(struct http_output *ho, const struct out_event *ev)
{
	struct import_call *c = ho->arg;
	const struct image_event *e = ev->event;
	json_t *image = ev->type == OUT_EVENT ? json_object_get(e->json, "image") : NULL;
	if (image) {
		json_decref(c->image);
		c->image = json_incref(image);
	}
}

static void import_finish(struct http_output *ho, const struct cove_err *err)
{
	struct import_call *c = ho->arg;
	struct cove_err internal = { .code = COVE_EINTERNAL };
	c->job = NULL;
	if (!ho->req)
		return;
	if (err || !c->image)
		reply_error(ho->req, err ? err : &internal);
	else
		reply_json(ho->req, 201, json_incref(c->image));
}

static void import_free(struct http_output *ho)
{
	struct import_call *c = ho->arg;
	json_decref(c->image);
	c->image = NULL;
	if (c->taking)
		c->freed = true;
	else
		free(c);
}

static const struct http_output_route import_route = { .encode = import_encode,
						       .finish = import_finish,
						       .free = import_free };

static void on_import_data(struct http_req *req, struct evbuffer *buf, void *arg)
{
	struct import_call *c = arg;
	if (c->job)
		(void)image_import_data(c->job, buf);
}

static void on_import_end(struct http_req *req, void *arg)
{
	struct import_call *c = arg;
	if (c->job)
		image_import_end(c->job);
}

int h_images_import(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "name", "ref", NULL };
	char name[REF_MAX], select[REF_MAX];
	const char *q = query_of(req);
	int has_name, has_select;
	if (check_params(q, params, err) < 0 || (has_name = query_param(q, "name", name, sizeof(name), err)) < 0 ||
	    (has_select = query_param(q, "ref", select, sizeof(select), err)) < 0)
		return -1;
	struct image_import_request rq = { has_name ? name : NULL, has_select ? select : NULL };
	struct import_call *c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	if (http_output_init(&c->ho, req, &import_route, c, err) < 0) {
		free(c);
		return -1;
	}
	if (image_import_start(engine_ctx, &rq, &c->ho.out, &c->job, err) < 0) {
		http_output_abandon(&c->ho);
		free(c);
		return -1;
	}
	c->taking = true;
	http_req_take_body(req, on_import_data, on_import_end, c);
	c->taking = false;
	if (c->freed)
		free(c);
	return 0;
}

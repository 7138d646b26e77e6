/* envd's POST /files: a multipart form of files (each part's filename its
 * path, or the query's path for one), or one octet-stream body for the
 * query's path, gzip allowed. The body is whole before this runs (within
 * --max-body-bytes); the parts are parsed first, all of them, so that a
 * malformed form writes nothing, then written one after the other. */
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "common/cleanup.h"
#include "daemon/api/request.h"
#include "daemon/e2b/fscall.h"
#include "engine/engine.h"

#define E2B_MAX_PARTS 1000

/* A gzip body's bytes into out. */
static int gunzip(const unsigned char *in, size_t n, struct evbuffer *out, uint64_t max, struct cove_err *err)
{
	z_stream z = { .next_in = (unsigned char *)in, .avail_in = (uInt)n };
	if (n > UINT32_MAX || inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return err_set(err, COVE_EINTERNAL, "inflate");
	int r = Z_OK;
	unsigned char buf[65536];
	while (r == Z_OK) {
		z.next_out = buf;
		z.avail_out = sizeof(buf);
		r = inflate(&z, Z_NO_FLUSH);
		if ((r == Z_OK || r == Z_STREAM_END) && evbuffer_add(out, buf, sizeof(buf) - z.avail_out) < 0)
			r = Z_MEM_ERROR;
		if (evbuffer_get_length(out) > max)
			r = Z_BUF_ERROR;
	}
	inflateEnd(&z);
	return r == Z_STREAM_END ? 0
				 : err_set(err, COVE_EINVAL, "the body is not valid gzip (or inflates past the limit)");
}

static void write_next(struct fscall *fc);

static void part_ready(void *arg)
{
	struct fscall *fc = arg;
	struct part *pt = &fc->parts[fc->next];
	struct evbuffer *b = evbuffer_new();
	struct file_op *op = fc->op;
	if (b)
		evbuffer_add_reference(b, pt->data, pt->len, NULL, NULL);
	if (b && files_write_data(op, b) < 0) {
		evbuffer_free(b);
		return; /* done was called */
	}
	if (b)
		evbuffer_free(b);
	files_write_end(op);
}

static void part_done(void *arg, const struct files_result *res, const struct cove_err *err)
{
	struct fscall *fc = arg;
	fscall_unbind(fc);
	struct part *pt = &fc->parts[fc->next];
	if (err) {
		envd_files_error(fc->req, pt->path, err);
		fscall_free(fc);
		return;
	}
	const char *slash = strrchr(pt->path, '/');
	json_array_append_new(fc->written, json_pack("{s:s, s:s, s:s}", "path", pt->path, "name",
						     slash ? slash + 1 : pt->path, "type", "file"));
	fc->next++;
	write_next(fc);
}

static void write_next(struct fscall *fc)
{
	struct cove_err err = { 0 };
	if (fc->next == fc->nparts) {
		e2b_json(fc->req, 200, json_incref(fc->written));
		fscall_free(fc);
		return;
	}
	struct files_write_req rq = {
		.path = fc->parts[fc->next].path, .user = fscall_user(fc), .parents = true, .mode = 0644
	};
	if (files_write(fc->sb, &rq, part_ready, part_done, fc, &fc->op, &err) < 0) {
		envd_files_error(fc->req, rq.path, &err);
		fscall_free(fc);
	}
}

/* The body's parts into fc->parts, their paths absolute. */
static int parse_upload(struct envd_req *er, struct fscall *fc, const char *path, struct cove_err *err)
{
	struct evbuffer *body = http_req_body(er->req);
	struct evkeyvalq *h = http_req_in_headers(er->req);
	const char *type = evhttp_find_header(h, "Content-Type"), *enc = evhttp_find_header(h, "Content-Encoding");
	size_t n = evbuffer_get_length(body);
	const unsigned char *p = n ? evbuffer_pullup(body, -1) : (const unsigned char *)"";
	char boundary[256];
	bool multipart = type && strncasecmp(type, "multipart/form-data", 19) == 0;
	if (multipart && multipart_boundary(type, boundary, sizeof(boundary)) < 0)
		return err_set(err, COVE_EINVAL, "a multipart body needs a boundary");
	if (!multipart && !path[0])
		return err_set(err, COVE_EINVAL, "'path' is required for an octet-stream upload");
	if (enc && strcasecmp(enc, "gzip") == 0) {
		if (!(fc->plain = evbuffer_new()) || gunzip(p, n, fc->plain, 1ull << 34, err) < 0)
			return -1;
		n = evbuffer_get_length(fc->plain);
		p = n ? evbuffer_pullup(fc->plain, -1) : (const unsigned char *)"";
	} else if (enc && strcasecmp(enc, "identity") != 0) {
		return err_set(err, COVE_EINVAL, "Content-Encoding '%s' is not supported", enc);
	}
	fc->parts = calloc(multipart ? E2B_MAX_PARTS : 1, sizeof(*fc->parts));
	if (!fc->parts)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	if (!multipart) {
		fc->nparts = 1;
		fc->parts[0] = (struct part){ .data = p, .len = n };
	} else if (multipart_parse(p, n, boundary, fc->parts, E2B_MAX_PARTS, &fc->nparts, err) < 0) {
		return -1;
	}
	for (int i = 0; i < fc->nparts; i++) {
		char raw[PATH_MAX];
		snprintf(raw, sizeof(raw), "%s", path[0] && fc->nparts == 1 ? path : fc->parts[i].path);
		if (!raw[0])
			return err_set(err, COVE_EINVAL, "a file part needs a filename (its path)");
		if (envd_abs_path(er, raw, fc->parts[i].path, PATH_MAX, err) < 0)
			return -1;
		for (int k = 0; k < i; k++)
			if (strcmp(fc->parts[k].path, fc->parts[i].path) == 0)
				return err_set(err, COVE_EINVAL, "'%s' is in the upload twice", fc->parts[i].path);
	}
	return 0;
}

void envd_files_post(struct envd_req *er)
{
	struct cove_err err = { 0 };
	char path[PATH_MAX];
	if (envd_files_query(er, false, path, &err) < 0) {
		e2b_error_of(er->req, &err);
		return;
	}
	struct fscall *fc = fscall_new(er, part_done);
	if (!fc)
		return;
	fc->written = json_array();
	if (parse_upload(er, fc, path, &err) < 0) {
		e2b_error_of(er->req, &err);
		fscall_free(fc);
		return;
	}
	write_next(fc);
}

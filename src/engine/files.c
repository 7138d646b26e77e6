/* The Files API: read, write, list, stat, remove, mkdir and move paths of a
 * sandbox.
 *
 * coved never walks a sandbox path itself: the sandbox's root exists only in
 * its mount namespace, and a walk from the host would follow the sandbox's
 * symlinks onto the host. cove-init resolves every path inside the root, as
 * the request's user (src/init/files.c), and either does the operation
 * (WIRE_FSOP) or hands back an open file descriptor (WIRE_OPEN), which coved
 * then reads or writes on its loop. A directory's listing (to any depth)
 * comes as an entry stream that init's child writes, as the user, on a
 * socket it hands back (common/wire.h); so do tar downloads and uploads
 * (files_tar.c).
 *
 * Each request is one file_op, answered when init's reply with its seq
 * arrives (or on a timeout, or when the sandbox goes away). A file is sent
 * with sendfile from the fd (evbuffer_add_file), never read into memory; a
 * written body goes to the fd as it comes (PUT is a streaming route,
 * httpd.h), so coved holds a few MiB of an upload of any size. A client
 * gone mid-upload leaves the file as far as it was written. */
#include <errno.h>
#include <event2/buffer.h>
#include <fcntl.h>
#include <event2/bufferevent.h>
#include "daemon/http/httpd.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/encoding.h"
#include "common/log.h"
#include "common/wire.h"
#include "engine/engine.h"
#include "engine/files.h"

#define FILES_TIMEOUT_SECONDS 300 /* init's child answers or dies; this is a backstop */
#define FILES_MAX_ENTRIES 100000  /* a listing stops here, "truncated": true */
#define FILES_MAX_DEPTH 256       /* of a listing */
#define FILES_READ_CHUNK 65536
#define FILES_READS_PER_EVENT 16 /* then the loop serves others */

static void stream_free(struct entry_stream *s)
{
	if (!s)
		return;
	if (s->ev)
		event_free(s->ev);
	if (s->sock >= 0)
		close(s->sock);
	if (s->in)
		evbuffer_free(s->in);
	free(s);
}

static void op_detach(struct file_op *op)
{
	for (struct file_op **pp = op->sb ? &op->sb->file_ops : NULL; pp && *pp; pp = &(*pp)->next)
		if (*pp == op) {
			*pp = op->next;
			break;
		}
	op->sb = NULL;
	if (op->timeout_ev)
		event_free(op->timeout_ev);
	op->timeout_ev = NULL;
	tar_free(op);
	stream_free(op->st);
	op->st = NULL;
	json_decref(op->entries);
	op->entries = NULL;
}

void op_free(struct file_op *op)
{
	op_detach(op);
	if (op->conn)
		conn_clear_hook(op->conn, op);
	if (op->body_fd >= 0)
		close(op->body_fd);
	free(op->spooled);
	free(op);
}

void op_abort(struct file_op *op)
{
	struct http_conn *conn = op->req ? http_req_conn(op->req) : NULL;
	struct bufferevent *bev = conn ? http_conn_bev(conn) : NULL;
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
	op_detach(op);
	if (fd < 0 || !op->conn) {
		op_free(op);
		return;
	}
	/* libevent sees the connection fail and closes it, which frees op
	 * (on_client_closed): until then a callback of the reply may still
	 * point at it. */
	op->aborted = true;
	(void)shutdown(fd, SHUT_RDWR);
}

static struct file_op *op_find(struct sandbox *sb, uint32_t seq)
{
	for (struct file_op *op = sb->file_ops; op; op = op->next)
		if (op->seq == seq)
			return op;
	return NULL;
}

static const char *verb_of(enum file_kind k)
{
	static const char *const verbs[] = { "read", "stat",  "write", "remove", "mkdir",
					     "move", "chmod", "tar",   "extract" };
	return verbs[k];
}

/* An errno from init, as an API error about op's path. */
static void op_fail(struct file_op *op, int errnum)
{
	op_fail_entry(op, errnum, NULL);
}

void op_fail_entry(struct file_op *op, int errnum, const char *entry)
{
	struct cove_err err = { 0 };
	int code = COVE_EINVAL; /* ELOOP, ENOTDIR, ENAMETOOLONG, EINVAL, EXDEV... */
	if (errnum == ENOENT)
		code = COVE_ENOTFOUND;
	else if (errnum == EEXIST || errnum == ENOTEMPTY || errnum == EBUSY || errnum == EISDIR)
		code = COVE_ESTATE;
	else if (errnum == EACCES || errnum == EPERM || errnum == EROFS)
		code = COVE_EPERM;
	else if (errnum == EFBIG || errnum == ENOSPC || errnum == EDQUOT)
		code = COVE_ETOOBIG;
	else if (errnum == EIO || errnum == ENOMEM || errnum == EAGAIN)
		code = COVE_EINTERNAL;
	if (errnum == EINVAL && (op->kind == FK_READ || op->kind == FK_WRITE))
		err_set(&err, code, "%s '%s': not a regular file%s", verb_of(op->kind), op->path,
			op->kind == FK_READ ? " or a directory" : "");
	else if (entry)
		err_set(&err, code, "%s '%s' into '%s': %s", verb_of(op->kind), entry, op->path,
			errnum == ELOOP ? "a symbolic link is on the way" : strerror(errnum));
	else
		err_set(&err, code, "%s '%s': %s", verb_of(op->kind), op->path, strerror(errnum));
	if (op->reply_started) {
		log_warn("sandbox %s: %s", op->sb ? op->sb->id : "?", err.msg);
		op_abort(op);
		return;
	}
	if (op->req)
		reply_error(op->req, &err);
	op_free(op);
}

void op_reply(struct file_op *op, int status, json_t *body)
{
	if (!body) {
		op_fail(op, ENOMEM);
		return;
	}
	if (op->req)
		reply_json(op->req, status, body);
	else
		json_decref(body);
	op_free(op);
}

static const char *type_name(mode_t m)
{
	return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

/* Text for JSON: a file name need not be UTF-8; its invalid bytes show as
 * U+FFFD. */
json_t *json_text(const char *s)
{
	size_t n = strlen(s);
	int valid;
	if (utf8_valid_prefix(s, n, &valid) == n && valid)
		return json_stringn(s, n);
	_cleanup_free_ char *t = malloc(3 * n + 1);
	return t ? json_stringn(t, utf8_sanitize(s, n, t, 3 * n + 1)) : NULL;
}

/* {name, path, type, size, mode, mtime, uid, gid[, target]}: a stat's and
 * a listing entry's shape. */
static json_t *entry_json(const char *name, const char *path, const char *type, uint64_t size, uint32_t mode,
			  int64_t mtime, uint32_t uid, uint32_t gid, const char *target)
{
	char m[8];
	snprintf(m, sizeof(m), "%04o", (unsigned)(mode & 07777));
	json_t *j = json_pack("{s:o, s:o, s:s, s:I, s:s, s:I, s:I, s:I}", "name", json_text(name), "path",
			      json_text(path), "type", type, "size", (json_int_t)size, "mode", m, "mtime",
			      (json_int_t)mtime, "uid", (json_int_t)uid, "gid", (json_int_t)gid);
	if (j && target)
		json_object_set_new(j, "target", json_text(target));
	return j;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s && s[1] ? s + 1 : path;
}

/* fd is an O_PATH fd of the path itself (a symlink is not followed). */
static void reply_stat(struct file_op *op, int fd)
{
	struct stat st;
	char target[PATH_MAX];
	if (fstat(fd, &st) < 0) {
		op_fail(op, errno);
		return;
	}
	ssize_t n = S_ISLNK(st.st_mode) ? readlinkat(fd, "", target, sizeof(target) - 1) : -1;
	target[n > 0 ? n : 0] = '\0';
	op_reply(op, 200,
		 entry_json(base_name(op->path), op->path, type_name(st.st_mode), (uint64_t)st.st_size, st.st_mode,
			    st.st_mtim.tv_sec, st.st_uid, st.st_gid, S_ISLNK(st.st_mode) ? target : NULL));
}

/* ---- entry streams ---- */

int entry_stream_read(struct entry_stream *s)
{
	return evbuffer_read(s->in, s->sock, FILES_READ_CHUNK);
}

enum stream_event entry_stream_next(struct entry_stream *s, const char **ret_buf, size_t *ret_len)
{
	evbuffer_drain(s->in, s->consumed);
	s->consumed = 0;
	size_t have = evbuffer_get_length(s->in);
	if (s->data_left > 0) {
		struct evbuffer_iovec v;
		if (have == 0 || evbuffer_peek(s->in, -1, NULL, &v, 1) < 1)
			return SE_MORE;
		s->consumed = v.iov_len < s->data_left ? v.iov_len : (size_t)s->data_left;
		s->data_left -= s->consumed;
		*ret_buf = v.iov_base;
		*ret_len = s->consumed;
		return SE_DATA;
	}
	if (!s->have_header) {
		if (have < sizeof(s->e))
			return SE_MORE;
		evbuffer_remove(s->in, &s->e, sizeof(s->e));
		if (wire_entry_check(&s->e) < 0)
			return SE_BAD;
		s->have_header = true;
		have -= sizeof(s->e);
	}
	if (have < (size_t)s->e.path_len + s->e.link_len)
		return SE_MORE;
	evbuffer_remove(s->in, s->path, s->e.path_len);
	evbuffer_remove(s->in, s->link, s->e.link_len);
	s->path[s->e.path_len] = '\0';
	s->link[s->e.link_len] = '\0';
	s->have_header = false;
	if (s->e.type == WIRE_ENTRY_END)
		return SE_END;
	if (!wire_entry_path_valid(s->path, s->e.path_len) || strlen(s->link) != s->e.link_len)
		return SE_BAD;
	s->data_left = s->data && s->e.type == WIRE_ENTRY_FILE ? s->e.size : 0;
	return SE_ENTRY;
}

static const char *const entry_type_names[] = {
	[WIRE_ENTRY_FILE] = "file",     [WIRE_ENTRY_DIR] = "dir",     [WIRE_ENTRY_SYMLINK] = "symlink",
	[WIRE_ENTRY_HARDLINK] = "file", [WIRE_ENTRY_OTHER] = "other",
};

/* A listing's records into JSON. 1 once op is answered (and freed). */
static int listing_consume(struct file_op *op)
{
	struct entry_stream *s = op->st;
	const char *buf;
	size_t len;
	enum stream_event ev;
	char path[PATH_MAX + WIRE_ENTRY_MAX_PATH + 2];
	bool truncated = false;
	size_t dir_len = strlen(op->path);
	while (dir_len > 0 && op->path[dir_len - 1] == '/') /* "/" and "/tmp/" join as "" and "/tmp" */
		dir_len--;
	while ((ev = entry_stream_next(s, &buf, &len)) == SE_ENTRY) {
		if (json_array_size(op->entries) >= FILES_MAX_ENTRIES) {
			truncated = true;
			break;
		}
		snprintf(path, sizeof(path), "%.*s/%s", (int)dir_len, op->path, s->path);
		json_t *j =
			entry_json(base_name(s->path), path, entry_type_names[s->e.type], s->e.size, s->e.mode,
				   s->e.mtime, s->e.uid, s->e.gid, s->e.type == WIRE_ENTRY_SYMLINK ? s->link : NULL);
		json_array_append_new(op->entries, j);
	}
	if (ev == SE_MORE)
		return 0;
	if (ev == SE_BAD) {
		op_fail(op, EIO);
		return 1;
	}
	op_reply(op, 200,
		 json_pack("{s:o, s:O, s:b}", "path", json_text(op->path), "entries", op->entries, "truncated",
			   truncated));
	return 1;
}

static void on_listing_readable(evutil_socket_t fd, short what, void *arg)
{
	struct file_op *op = arg;
	for (int i = 0; i < FILES_READS_PER_EVENT; i++) {
		int n = entry_stream_read(op->st);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (listing_consume(op))
			return;
		if (n <= 0) { /* the child died before the end */
			op_fail(op, EIO);
			return;
		}
	}
}

/* init answered with an entry stream's socket. Takes fd. */
static void start_stream(struct file_op *op, int fd)
{
	op->st = calloc(1, sizeof(*op->st));
	if (!op->st || !(op->st->in = evbuffer_new())) {
		close(fd);
		op_fail(op, ENOMEM);
		return;
	}
	op->st->sock = fd;
	evutil_make_socket_nonblocking(fd);
	if (op->kind == FK_TAR || op->kind == FK_EXTRACT) {
		tar_start(op);
		return;
	}
	op->entries = json_array();
	op->st->ev = event_new(engine_ctx->base, fd, EV_READ | EV_PERSIST, on_listing_readable, op);
	if (!op->entries || !op->st->ev) {
		op_fail(op, ENOMEM);
		return;
	}
	event_add(op->st->ev, NULL);
}

/* A regular file's bytes, sent from the fd (sendfile). Takes fd. */
static void reply_file(struct file_op *op, int fd, const struct stat *st)
{
	if (!op->req) {
		close(fd);
		op_free(op);
		return;
	}
	evhttp_add_header(http_req_out_headers(op->req), "Content-Type", "application/octet-stream");
	http_send_file(op->req, 200, "OK", fd, (uint64_t)st->st_size);
	op_free(op);
}

/* A piece of the body, into the file. */
static void on_body_data(struct http_req *req, struct evbuffer *buf, void *arg)
{
	struct file_op *op = arg;
	while (evbuffer_get_length(buf) > 0) {
		int n = evbuffer_write(buf, op->body_fd);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			op_fail(op, errno);
			return;
		}
		op->written += (uint64_t)n;
	}
}

static int op_send(struct file_op *op, const struct file_request *fr, struct cove_err *err);

/* A spooled body is whole: checked (from its start), then init is asked. */
static void spool_done(struct file_op *op)
{
	struct cove_err err = { 0 };
	_cleanup_free_ struct file_request *fr = TAKE_PTR(op->spooled);
	if (fr->check_spool(op->body_fd, &err) == 0 && op_send(op, fr, &err) == 0)
		return;
	reply_error(op->req, &err);
	op_free(op);
}

static void on_body_end(struct http_req *req, void *arg)
{
	struct file_op *op = arg;
	if (op->spooled) {
		spool_done(op);
		return;
	}
	op_reply(op, op->created ? 201 : 200,
		 json_pack("{s:o, s:I}", "path", json_text(op->path), "size", (json_int_t)op->written));
}

/* The request's body into the file, as it comes. Takes fd. */
static void write_body(struct file_op *op, int fd, bool created)
{
	if (!op->req) {
		close(fd);
		op_free(op);
		return;
	}
	op->body_fd = fd;
	op->created = created;
	/* The upload takes as long as it takes: the client is the limit. */
	evtimer_del(op->timeout_ev);
	http_req_take_body(op->req, on_body_data, on_body_end, op);
}

void files_on_opened(struct sandbox *sb, uint32_t seq, uint32_t flags, int fd)
{
	struct file_op *op = op_find(sb, seq);
	struct stat st;
	if (op && op->st)
		op = NULL; /* answered already */
	if (op && !op->req && fd >= 0) {
		close(fd);
		op_free(op);
		return;
	}
	if (op && fd >= 0 && (flags & WIRE_FLAG_ENTRIES)) {
		op->created = flags & WIRE_FLAG_CREATED;
		start_stream(op, fd);
		return;
	}
	if (!op || fd < 0) {
		if (fd >= 0)
			close(fd);
		if (op)
			op_fail(op, EIO);
		return;
	}
	if (op->kind == FK_STAT) {
		reply_stat(op, fd);
		close(fd);
	} else if (op->kind == FK_WRITE) {
		write_body(op, fd, flags & WIRE_FLAG_CREATED);
	} else if (fstat(fd, &st) < 0) {
		close(fd);
		op_fail(op, errno);
	} else if (!S_ISREG(st.st_mode)) {
		close(fd);
		op_fail(op, EINVAL);
	} else {
		reply_file(op, fd, &st);
	}
}

void files_on_failed(struct sandbox *sb, uint32_t seq, int errnum)
{
	struct file_op *op = op_find(sb, seq);
	if (op && !op->st) /* a stream's child that dies shows as the stream's early end */
		op_fail(op, errnum ? errnum : EIO);
}

void files_on_done(struct sandbox *sb, uint32_t seq, int errnum, bool changed)
{
	struct file_op *op = op_find(sb, seq);
	if (!op)
		return;
	if (errnum) {
		op_fail(op, errnum);
	} else if (op->kind == FK_REMOVE) {
		op_reply(op, 200, json_pack("{s:o, s:b}", "path", json_text(op->path), "deleted", changed));
	} else if (op->kind == FK_MKDIR) {
		op_reply(op, changed ? 201 : 200,
			 json_pack("{s:o, s:b}", "path", json_text(op->path), "created", changed));
	} else if (op->kind == FK_CHMOD) {
		char mode[8];
		snprintf(mode, sizeof(mode), "%04o", (unsigned)op->mode);
		op_reply(op, 200, json_pack("{s:o, s:s}", "path", json_text(op->path), "mode", mode));
	} else {
		op_reply(op, 200, json_pack("{s:o, s:o}", "from", json_text(op->path), "to", json_text(op->path2)));
	}
}

void files_abort_all(struct sandbox *sb, const char *why)
{
	while (sb->file_ops) {
		struct file_op *op = sb->file_ops;
		struct cove_err err = { 0 };
		err_set(&err, COVE_ESTATE, "%s", why);
		if (op->reply_started) {
			op_abort(op);
			continue;
		}
		if (op->req)
			reply_error(op->req, &err);
		op_free(op);
	}
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct file_op *op = arg;
	struct cove_err err = { 0 };
	log_warn("sandbox %s: %s '%s': cove-init did not answer", op->sb->id, verb_of(op->kind), op->path);
	err_set(&err, COVE_EINTERNAL, "%s '%s': no answer from the sandbox", verb_of(op->kind), op->path);
	if (op->req)
		reply_error(op->req, &err);
	op_free(op);
}

/* The client went away: the answer, when it comes, goes nowhere; a stream
 * stops at once (its child sees its socket close). */
static void on_client_closed(struct http_conn *conn, void *arg)
{
	struct file_op *op = arg;
	op->req = NULL;
	op->conn = NULL;
	if (op->st || op->aborted || op->body_fd >= 0)
		op_free(op);
}

/* ---- requests ---- */

/* "0644" or "644": permission bits, octal. */
static int get_mode(const char *query, uint32_t *ret, bool *given, struct cove_err *err)
{
	char v[16], *end;
	int r = query_param(query, "mode", v, sizeof(v), err);
	if (r <= 0)
		return r;
	unsigned long m = strtoul(v, &end, 8);
	if (!v[0] || *end || m > 07777)
		return err_set(err, COVE_EINVAL, "'mode' must be octal permission bits, like 0644");
	*ret = (uint32_t)m;
	*given = true;
	return 0;
}

/* "depth": 1 (the directory's own entries) to FILES_MAX_DEPTH. */
static int get_depth(const char *query, int *ret, struct cove_err *err)
{
	char v[16], *end;
	int r = query_param(query, "depth", v, sizeof(v), err);
	if (r <= 0)
		return r;
	long d = strtol(v, &end, 10);
	if (!v[0] || *end || d < 1 || d > FILES_MAX_DEPTH)
		return err_set(err, COVE_EINVAL, "'depth' must be an integer from 1 to %d", FILES_MAX_DEPTH);
	*ret = (int)d;
	return 0;
}

int files_get(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", "stat", "user", "depth", NULL };
	struct file_request fr = {
		.kind = FK_READ, .params = params, .type = WIRE_OPEN, .value = WIRE_OPEN_READ, .depth = 1
	};
	bool stat = false;
	if (get_flag(query_of(req), "stat", &stat, err) < 0 || get_depth(query_of(req), &fr.depth, err) < 0)
		return -1;
	if (stat) {
		fr.kind = FK_STAT;
		fr.value = WIRE_OPEN_STAT;
	}
	return files_start(req, id, &fr, NULL, err);
}

int files_put(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", "mode", "user", "parents", NULL };
	struct file_request fr = {
		.kind = FK_WRITE, .params = params, .type = WIRE_OPEN, .value = WIRE_OPEN_WRITE, .mode = 0644
	};
	bool given = false, parents = false;
	if (get_mode(query_of(req), &fr.mode, &given, err) < 0 || get_flag(query_of(req), "parents", &parents, err) < 0)
		return -1;
	fr.flags = (given ? WIRE_FLAG_MODE : 0) | (parents ? WIRE_FLAG_PARENTS : 0);
	return files_start(req, id, &fr, NULL, err);
}

int files_delete(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", "recursive", "user", NULL };
	struct file_request fr = { .kind = FK_REMOVE, .params = params, .type = WIRE_FSOP, .value = WIRE_FS_REMOVE };
	bool recursive = false;
	if (get_flag(query_of(req), "recursive", &recursive, err) < 0)
		return -1;
	fr.flags = recursive ? WIRE_FLAG_RECURSIVE : 0;
	return files_start(req, id, &fr, NULL, err);
}

int files_mkdir(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", "user", NULL };
	struct file_request fr = { .kind = FK_MKDIR, .params = params, .type = WIRE_FSOP, .value = WIRE_FS_MKDIR };
	return files_start(req, id, &fr, NULL, err);
}

int files_move(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "from", "to", "overwrite", "user", NULL };
	struct file_request fr = { .kind = FK_MOVE, .params = params, .type = WIRE_FSOP, .value = WIRE_FS_RENAME };
	bool overwrite = false;
	if (get_flag(query_of(req), "overwrite", &overwrite, err) < 0)
		return -1;
	fr.flags = overwrite ? WIRE_FLAG_OVERWRITE : 0;
	return files_start(req, id, &fr, NULL, err);
}

/* chmod's body: {"path", "mode": "0755" (octal) or 493, "user"}. */
static int parse_chmod(struct http_req *req, char path[PATH_MAX], struct file_request *fr, struct cove_err *err)
{
	struct evbuffer *b = http_req_body(req);
	json_error_t je;
	const char *key, *p = NULL, *user = NULL;
	json_t *v, *mode = NULL;
	size_t n = evbuffer_get_length(b);
	json_t *j = n ? json_loadb((const char *)evbuffer_pullup(b, -1), n, JSON_REJECT_DUPLICATES, &je) : NULL;
	if (!json_is_object(j)) {
		json_decref(j);
		return err_set(err, COVE_EINVAL, "the body must be a JSON object {\"path\", \"mode\"}");
	}
	int r = 0;
	json_object_foreach(j, key, v)
	{
		if (strcmp(key, "mode") == 0)
			mode = v;
		else if (strcmp(key, "path") == 0 && json_is_string(v))
			p = json_string_value(v);
		else if (strcmp(key, "user") == 0 && json_is_string(v))
			user = json_string_value(v);
		else if (r == 0)
			r = err_set(err, COVE_EINVAL, "unknown field or wrong type: '%s'", key);
	}
	char *end = NULL;
	long m = json_is_integer(mode)  ? (long)json_integer_value(mode)
		 : json_is_string(mode) ? strtol(json_string_value(mode), &end, 8)
					: -1;
	if (r == 0 && (m < 0 || m > 07777 || (end && (*end || !json_string_length(mode)))))
		r = err_set(err, COVE_EINVAL,
			    "'mode' must be permission bits: an octal string like \"0755\" or a number");
	if (r == 0 &&
	    (!p || p[0] != '/' || strlen(p) >= PATH_MAX || strlen(p) != json_string_length(json_object_get(j, "path"))))
		r = err_set(err, COVE_EINVAL, "'path' must be an absolute path");
	if (r == 0 && user && (strlen(user) >= sizeof(fr->user) || !user[0]))
		r = err_set(err, COVE_EINVAL, "'user' must be a user name or uid");
	if (r == 0) {
		snprintf(path, PATH_MAX, "%s", p);
		snprintf(fr->user, sizeof(fr->user), "%s", user ? user : "");
		fr->mode = (uint32_t)m;
	}
	json_decref(j);
	return r;
}

int files_chmod(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { NULL };
	char path[PATH_MAX];
	struct file_request fr = { .kind = FK_CHMOD, .params = params, .type = WIRE_FSOP, .value = WIRE_FS_CHMOD };
	if (!sandbox_find(engine_ctx, id))
		return err_set(err, COVE_ENOTFOUND, "no sandbox '%s'", id ? id : "");
	if (parse_chmod(req, path, &fr, err) < 0)
		return -1;
	fr.path = path;
	return files_start(req, id, &fr, NULL, err);
}

/* Validate the common parameters into op, then send the request to init. */
static int parse_common(struct http_req *req, struct sandbox *sb, struct file_request *fr, struct file_op *op,
			struct cove_err *err)
{
	const char *q = query_of(req);
	if (check_params(q, fr->params, err) < 0)
		return -1;
	if (fr->path)
		snprintf(op->path, sizeof(op->path), "%s", fr->path);
	else if (fr->kind == FK_MOVE ? get_path(q, "from", op->path, err) < 0 || get_path(q, "to", op->path2, err) < 0
				     : get_path(q, "path", op->path, err) < 0)
		return -1;
	int r = fr->path ? (fr->user[0] != '\0') : query_param(q, "user", fr->user, sizeof(fr->user), err);
	if (r < 0)
		return -1;
	if (r == 0)
		snprintf(fr->user, sizeof(fr->user), "%s", sb->spec.user);
	return 0;
}

static int send_request(struct sandbox *sb, struct file_op *op, const struct file_request *fr, struct cove_err *err)
{
	static char pkt[WIRE_MAX_PACKET];
	struct wire_hdr h = {
		.type = fr->type, .seq = op->seq, .pid = fr->depth, .value = fr->value, .flags = fr->flags
	};
	struct wire_path p = { .mode = fr->mode, .path = op->path, .path2 = op->path2, .user = fr->user };
	long len = wire_encode_path(pkt, sizeof(pkt), &h, &p);
	if (len < 0)
		return err_set(err, COVE_EINVAL, "bad path");
	int r = sandbox_send(sb, pkt, (size_t)len, NULL, 0);
	if (r < 0)
		return err_sys(err, -r, "send to cove-init of sandbox %s", sb->id);
	return 0;
}

/* Ask init, and give it FILES_TIMEOUT_SECONDS to answer. */
static int op_send(struct file_op *op, const struct file_request *fr, struct cove_err *err)
{
	struct timeval tv = { FILES_TIMEOUT_SECONDS, 0 };
	if (send_request(op->sb, op, fr, err) < 0)
		return -1;
	evtimer_add(op->timeout_ev, &tv);
	return 0;
}

/* The body first, into an unlinked file that no one else can open and
 * that goes with its last fd, whatever ends the request (check_spool). */
static int spool_open(struct file_op *op, const struct file_request *fr, struct cove_err *err)
{
	op->spooled = malloc(sizeof(*fr));
	if (!op->spooled)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	*op->spooled = *fr;
	op->spooled->path = NULL; /* in op->path already */
	op->body_fd = open(engine_ctx->data_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (op->body_fd < 0)
		return err_sys(err, errno, "a temporary file for the body in '%s'", engine_ctx->data_dir);
	return 0;
}

int files_start(struct http_req *req, const char *id, struct file_request *fr,
		int (*check)(struct http_req *req, struct cove_err *err), struct cove_err *err)
{
	struct sandbox *sb = sandbox_find(engine_ctx, id);
	if (!sb)
		return err_set(err, COVE_ENOTFOUND, "no sandbox '%s'", id ? id : "");
	if (sb->state != SB_RUNNING || sb->conn_fd < 0)
		return err_set(err, COVE_ESTATE, "sandbox %s is not running", sb->id);
	_cleanup_free_ struct file_op *op = calloc(1, sizeof(*op));
	if (!op)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	if (parse_common(req, sb, fr, op, err) < 0 || (check && check(req, err) < 0))
		return -1;
	op->sb = sb;
	op->req = req;
	op->body_fd = -1;
	op->kind = fr->kind;
	op->depth = fr->depth;
	op->mode = fr->mode;
	op->format = fr->format;
	op->seq = sb->next_seq++ ?: sb->next_seq++;
	op->timeout_ev = evtimer_new(engine_ctx->base, on_timeout, op);
	if (!op->timeout_ev)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	op->conn = http_req_conn(req);
	if (conn_set_hook(op->conn, on_client_closed, op) < 0) {
		op->conn = NULL;
		op_free(TAKE_PTR(op));
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	if ((fr->check_spool ? spool_open(op, fr, err) : op_send(op, fr, err)) < 0) {
		op_free(TAKE_PTR(op));
		return -1;
	}
	struct file_op *linked = TAKE_PTR(op);
	linked->next = sb->file_ops;
	sb->file_ops = linked;
	if (linked->spooled) /* may be answered at once, and freed: last */
		http_req_take_body(req, on_body_data, on_body_end, linked);
	return 0;
}

/* The Files API: read, write, list, stat, remove, mkdir and move paths of a
 * sandbox.
 *
 * coved never walks a sandbox path itself: the sandbox's root exists only in
 * its mount namespace, and a walk from the host would follow the sandbox's
 * symlinks onto the host. cove-init resolves every path inside the root, as
 * the request's user (src/init/files.c), and either does the operation
 * (WIRE_FSOP) or hands back an open file descriptor (WIRE_OPEN), which coved
 * then reads or writes on its loop. A directory's listing is read from its
 * fd with *at calls on single names that follow no symlink.
 *
 * Each request is one file_op, answered when init's reply with its seq
 * arrives (or on a timeout, or when the sandbox goes away). A file is sent
 * with sendfile from the fd (evbuffer_add_file), never read into memory; a
 * written body is whole in memory already, as libevent buffers request
 * bodies (bounded by the daemon's maximum body size). */
#include <dirent.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/wire.h"
#include "daemon/daemon.h"

#define FILES_TIMEOUT_SECONDS 300 /* init's child answers or dies; this is a backstop */
#define FILES_MAX_ENTRIES 100000  /* a listing stops here, "truncated": true */
#define FILES_MAX_USER 63

enum file_kind { FK_READ, FK_STAT, FK_WRITE, FK_REMOVE, FK_MKDIR, FK_MOVE };

struct file_op {
	struct file_op *next;
	struct sandbox *sb;
	struct evhttp_request *req;     /* NULL once the client is gone */
	struct evhttp_connection *conn; /* whose close callback points here, or NULL */
	enum file_kind kind;
	uint32_t seq;
	struct event *timeout_ev;
	char path[PATH_MAX];
	char path2[PATH_MAX];
};

static void op_free(struct file_op *op)
{
	for (struct file_op **pp = &op->sb->file_ops; *pp; pp = &(*pp)->next)
		if (*pp == op) {
			*pp = op->next;
			break;
		}
	if (op->timeout_ev)
		event_free(op->timeout_ev);
	if (op->conn)
		conn_clear_hook(op->conn, op);
	free(op);
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
	static const char *const verbs[] = { "read", "stat", "write", "remove", "mkdir", "move" };
	return verbs[k];
}

/* An errno from init, as an API error about op's path. */
static void op_fail(struct file_op *op, int errnum)
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
	else
		err_set(&err, code, "%s '%s': %s", verb_of(op->kind), op->path, strerror(errnum));
	if (op->req)
		api_send_error(op->req, &err);
	op_free(op);
}

static void op_reply(struct file_op *op, int status, json_t *body)
{
	if (op->req)
		api_send_json(op->req, status, body);
	else
		json_decref(body);
	op_free(op);
}

static const char *type_name(mode_t m)
{
	return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

/* {name, type, size, mode, mtime[, target]} of one file; dirfd + name, or
 * the fd itself when name is "". */
static json_t *stat_json(int dirfd, const char *name, const struct stat *st)
{
	char mode[8], target[PATH_MAX];
	snprintf(mode, sizeof(mode), "%04o", (unsigned)(st->st_mode & 07777));
	json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:I}", "name", name, "type", type_name(st->st_mode), "size",
			      (json_int_t)st->st_size, "mode", mode, "mtime", (json_int_t)st->st_mtim.tv_sec);
	if (S_ISLNK(st->st_mode)) {
		ssize_t n = readlinkat(dirfd, name, target, sizeof(target) - 1);
		json_object_set_new(j, "target", n >= 0 ? json_stringn(target, (size_t)n) : json_null());
	}
	return j;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s && s[1] ? s + 1 : path;
}

static void reply_stat(struct file_op *op, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0) {
		op_fail(op, errno);
		return;
	}
	json_t *j = stat_json(fd, "", &st);
	json_object_set_new(j, "name", json_string(base_name(op->path)));
	json_object_set_new(j, "path", json_string(op->path));
	op_reply(op, 200, j);
}

/* The entries of an open directory. Takes fd. */
static void reply_listing(struct file_op *op, int fd)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		op_fail(op, errno);
		return;
	}
	json_t *entries = json_array();
	struct dirent *e;
	bool truncated = false;
	while ((e = readdir(d))) {
		struct stat st;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (json_array_size(entries) >= FILES_MAX_ENTRIES) {
			truncated = true;
			break;
		}
		json_array_append_new(entries, stat_json(dirfd(d), e->d_name, &st));
	}
	closedir(d);
	op_reply(op, 200, json_pack("{s:s, s:o, s:b}", "path", op->path, "entries", entries, "truncated", truncated));
}

/* A regular file's bytes, sent from the fd (sendfile). Takes fd. */
static void reply_file(struct file_op *op, int fd, const struct stat *st)
{
	if (!op->req) {
		close(fd);
		op_free(op);
		return;
	}
	struct evbuffer *b = evbuffer_new();
	if (st->st_size == 0) {
		close(fd);
	} else if (evbuffer_add_file(b, fd, 0, st->st_size) < 0) {
		/* Out of memory; whether libevent closed fd is not told, so it
		 * is left rather than risk closing another's. */
		evbuffer_free(b);
		op_fail(op, ENOMEM);
		return;
	}
	evhttp_add_header(evhttp_request_get_output_headers(op->req), "Content-Type", "application/octet-stream");
	evhttp_send_reply(op->req, 200, "OK", b);
	evbuffer_free(b);
	op_free(op);
}

/* The request's body into the file. Takes fd. */
static void write_body(struct file_op *op, int fd, bool created)
{
	_cleanup_close_ int wfd = fd;
	if (!op->req) {
		op_free(op);
		return;
	}
	struct evbuffer *body = evhttp_request_get_input_buffer(op->req);
	size_t size = evbuffer_get_length(body);
	while (evbuffer_get_length(body) > 0)
		if (evbuffer_write(body, wfd) < 0 && errno != EINTR) {
			op_fail(op, errno);
			return;
		}
	op_reply(op, created ? 201 : 200, json_pack("{s:s, s:I}", "path", op->path, "size", (json_int_t)size));
}

void files_on_opened(struct sandbox *sb, uint32_t seq, uint32_t flags, int fd)
{
	struct file_op *op = op_find(sb, seq);
	struct stat st;
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
	} else if (S_ISDIR(st.st_mode)) {
		reply_listing(op, fd);
	} else {
		reply_file(op, fd, &st);
	}
}

void files_on_failed(struct sandbox *sb, uint32_t seq, int errnum)
{
	struct file_op *op = op_find(sb, seq);
	if (op)
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
		op_reply(op, 200, json_pack("{s:s, s:b}", "path", op->path, "deleted", changed));
	} else if (op->kind == FK_MKDIR) {
		op_reply(op, changed ? 201 : 200, json_pack("{s:s, s:b}", "path", op->path, "created", changed));
	} else {
		op_reply(op, 200, json_pack("{s:s, s:s}", "from", op->path, "to", op->path2));
	}
}

void files_abort_all(struct sandbox *sb, const char *why)
{
	while (sb->file_ops) {
		struct file_op *op = sb->file_ops;
		struct cove_err err = { 0 };
		err_set(&err, COVE_ESTATE, "%s", why);
		if (op->req)
			api_send_error(op->req, &err);
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
		api_send_error(op->req, &err);
	op_free(op);
}

/* The client went away: the answer, when it comes, goes nowhere. */
static void on_client_closed(struct evhttp_connection *conn, void *arg)
{
	struct file_op *op = arg;
	op->req = NULL;
	op->conn = NULL;
}

/* ---- requests ---- */

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
		return (c | 0x20) - 'a' + 10;
	return -1;
}

/* One query parameter, percent-decoded ('+' is a space, as in forms).
 * Returns 1 when present, 0 when absent, -1 (err set) when malformed or
 * holding a NUL byte. */
int query_param(const char *query, const char *name, char *out, size_t cap, struct cove_err *err)
{
	size_t nlen = strlen(name);
	for (const char *p = query; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
		if (strncmp(p, name, nlen) != 0 || (p[nlen] != '=' && p[nlen] != '&' && p[nlen]))
			continue;
		const char *v = p[nlen] == '=' ? p + nlen + 1 : p + nlen;
		size_t n = 0;
		for (; *v && *v != '&'; v++) {
			int c = (unsigned char)*v;
			if (c == '+') {
				c = ' ';
			} else if (c == '%') {
				int hi = hex_digit(v[1]), lo = hi < 0 ? -1 : hex_digit(v[2]);
				if (lo < 0)
					return err_set(err, COVE_EINVAL, "'%s': bad percent-encoding", name);
				c = hi * 16 + lo;
				v += 2;
			}
			if (c == 0)
				return err_set(err, COVE_EINVAL, "'%s' holds a NUL byte", name);
			if (n + 1 >= cap)
				return err_set(err, COVE_EINVAL, "'%s' is too long", name);
			out[n++] = (char)c;
		}
		out[n] = '\0';
		return 1;
	}
	return 0;
}

/* Every parameter's name must be in allowed (NULL-terminated). */
int check_params(const char *query, const char *const *allowed, struct cove_err *err)
{
	for (const char *p = query; p && *p; p = strchr(p, '&') ? strchr(p, '&') + 1 : NULL) {
		size_t n = strcspn(p, "=&");
		bool ok = n == 0;
		for (int i = 0; allowed[i] && !ok; i++)
			ok = strlen(allowed[i]) == n && strncmp(p, allowed[i], n) == 0;
		if (!ok)
			return err_set(err, COVE_EINVAL, "unknown parameter '%.*s'", (int)(n > 64 ? 64 : n), p);
	}
	return 0;
}

int get_path(const char *query, const char *name, char out[PATH_MAX], struct cove_err *err)
{
	int r = query_param(query, name, out, PATH_MAX, err);
	if (r < 0)
		return -1;
	if (r == 0 || !out[0])
		return err_set(err, COVE_EINVAL, "'%s' is required", name);
	if (out[0] != '/')
		return err_set(err, COVE_EINVAL, "'%s' must be an absolute path", name);
	return 0;
}

int get_flag(const char *query, const char *name, bool *ret, struct cove_err *err)
{
	char v[8];
	int r = query_param(query, name, v, sizeof(v), err);
	if (r <= 0)
		return r;
	if (strcmp(v, "1") != 0 && strcmp(v, "true") != 0 && strcmp(v, "0") != 0 && strcmp(v, "false") != 0)
		return err_set(err, COVE_EINVAL, "'%s' must be 1, true, 0 or false", name);
	*ret = v[0] == '1' || v[0] == 't';
	return 0;
}

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

struct file_request {
	enum file_kind kind;
	const char *const *params; /* allowed query parameters */
	uint32_t type;             /* WIRE_OPEN or WIRE_FSOP */
	int value;                 /* enum wire_open_kind or enum wire_fsop */
	uint32_t flags;
	uint32_t mode;
	char user[FILES_MAX_USER + 1];
};

static int start(struct evhttp_request *req, const char *id, struct file_request *fr, struct cove_err *err);

const char *query_of(struct evhttp_request *req)
{
	const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	return q ? q : "";
}

int files_get(struct evhttp_request *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", "stat", "user", NULL };
	struct file_request fr = { .kind = FK_READ, .params = params, .type = WIRE_OPEN, .value = WIRE_OPEN_READ };
	bool stat = false;
	if (get_flag(query_of(req), "stat", &stat, err) < 0)
		return -1;
	if (stat) {
		fr.kind = FK_STAT;
		fr.value = WIRE_OPEN_STAT;
	}
	return start(req, id, &fr, err);
}

int files_put(struct evhttp_request *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", "mode", "user", "parents", NULL };
	struct file_request fr = {
		.kind = FK_WRITE, .params = params, .type = WIRE_OPEN, .value = WIRE_OPEN_WRITE, .mode = 0644
	};
	bool given = false, parents = false;
	if (get_mode(query_of(req), &fr.mode, &given, err) < 0 || get_flag(query_of(req), "parents", &parents, err) < 0)
		return -1;
	fr.flags = (given ? WIRE_FLAG_MODE : 0) | (parents ? WIRE_FLAG_PARENTS : 0);
	return start(req, id, &fr, err);
}

int files_delete(struct evhttp_request *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", "recursive", "user", NULL };
	struct file_request fr = { .kind = FK_REMOVE, .params = params, .type = WIRE_FSOP, .value = WIRE_FS_REMOVE };
	bool recursive = false;
	if (get_flag(query_of(req), "recursive", &recursive, err) < 0)
		return -1;
	fr.flags = recursive ? WIRE_FLAG_RECURSIVE : 0;
	return start(req, id, &fr, err);
}

int files_mkdir(struct evhttp_request *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "path", "user", NULL };
	struct file_request fr = { .kind = FK_MKDIR, .params = params, .type = WIRE_FSOP, .value = WIRE_FS_MKDIR };
	return start(req, id, &fr, err);
}

int files_move(struct evhttp_request *req, const char *id, struct cove_err *err)
{
	static const char *const params[] = { "from", "to", "overwrite", "user", NULL };
	struct file_request fr = { .kind = FK_MOVE, .params = params, .type = WIRE_FSOP, .value = WIRE_FS_RENAME };
	bool overwrite = false;
	if (get_flag(query_of(req), "overwrite", &overwrite, err) < 0)
		return -1;
	fr.flags = overwrite ? WIRE_FLAG_OVERWRITE : 0;
	return start(req, id, &fr, err);
}

/* Validate the common parameters into op, then send the request to init. */
static int parse_common(struct evhttp_request *req, struct sandbox *sb, struct file_request *fr, struct file_op *op,
			struct cove_err *err)
{
	const char *q = query_of(req);
	if (check_params(q, fr->params, err) < 0)
		return -1;
	if (fr->kind == FK_MOVE ? get_path(q, "from", op->path, err) < 0 || get_path(q, "to", op->path2, err) < 0
				: get_path(q, "path", op->path, err) < 0)
		return -1;
	int r = query_param(q, "user", fr->user, sizeof(fr->user), err);
	if (r < 0)
		return -1;
	if (r == 0)
		snprintf(fr->user, sizeof(fr->user), "%s", sb->spec.user);
	return 0;
}

static int send_request(struct sandbox *sb, struct file_op *op, const struct file_request *fr, struct cove_err *err)
{
	static char pkt[WIRE_MAX_PACKET];
	struct wire_hdr h = { .type = fr->type, .seq = op->seq, .value = fr->value, .flags = fr->flags };
	struct wire_path p = { .mode = fr->mode, .path = op->path, .path2 = op->path2, .user = fr->user };
	long len = wire_encode_path(pkt, sizeof(pkt), &h, &p);
	if (len < 0)
		return err_set(err, COVE_EINVAL, "bad path");
	int r = sandbox_send(sb, pkt, (size_t)len, NULL, 0);
	if (r < 0)
		return err_sys(err, -r, "send to cove-init of sandbox %s", sb->id);
	return 0;
}

static int start(struct evhttp_request *req, const char *id, struct file_request *fr, struct cove_err *err)
{
	struct sandbox *sb = sandbox_find(daemon_ctx, id);
	if (!sb)
		return err_set(err, COVE_ENOTFOUND, "no sandbox '%s'", id ? id : "");
	if (sb->state != SB_RUNNING || sb->conn_fd < 0)
		return err_set(err, COVE_ESTATE, "sandbox %s is not running", sb->id);
	_cleanup_free_ struct file_op *op = calloc(1, sizeof(*op));
	if (!op)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	if (parse_common(req, sb, fr, op, err) < 0)
		return -1;
	op->sb = sb;
	op->req = req;
	op->kind = fr->kind;
	op->seq = sb->next_seq++ ?: sb->next_seq++;
	op->conn = evhttp_request_get_connection(req);
	if (conn_set_hook(op->conn, on_client_closed, op) < 0)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	if (send_request(sb, op, fr, err) < 0) {
		conn_clear_hook(op->conn, op);
		return -1;
	}
	struct timeval tv = { FILES_TIMEOUT_SECONDS, 0 };
	op->timeout_ev = evtimer_new(daemon_ctx->base, on_timeout, op);
	evtimer_add(op->timeout_ev, &tv);
	op->next = sb->file_ops;
	sb->file_ops = TAKE_PTR(op);
	return 0;
}

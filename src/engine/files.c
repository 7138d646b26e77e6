/* The Files operations: read, write, list, stat, remove, mkdir, move and
 * chmod paths of a sandbox (engine/files.h).
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
 * arrives (or on a timeout, or when the sandbox goes away). A file's answer
 * is its open fd, which the REST front end sends with sendfile, never
 * reading it into memory; a written body goes to the fd as it comes
 * (files_write_data writes before it returns), so coved holds what its
 * front end buffers (a few MiB) of an upload of any size. The fd is, where
 * init can make one, an unnamed file in the target's directory that init
 * renames over the target once the body is whole (WIRE_FS_COMMIT): a
 * caller gone mid-upload, or coved killed, leaves the old file whole and
 * nothing else. Else (src/init/files.c open_write says when) it is the
 * file itself, truncated, and an upload cut short leaves it as far as it
 * was written. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/array.h"
#include "common/cleanup.h"
#include "common/io.h"
#include "common/log.h"
#include "common/wire.h"
#include "engine/engine.h"
#include "engine/files_op.h"
#include "engine/output.h"

#define FILES_TIMEOUT_SECONDS 300 /* init's child answers or dies; this is a backstop */
#define FILES_READ_CHUNK 65536
#define FILES_READS_PER_EVENT 16 /* then the loop serves others */

/* A listing's entries so far; each entry's path and target are one block. */
struct listing {
	struct files_entry *entries;
	size_t n, cap;
};

static void listing_free(struct listing *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		free((char *)l->entries[i].path);
	free(l->entries);
	free(l);
}

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
	listing_free(op->list);
	op->list = NULL;
}

static void op_free(struct file_op *op)
{
	op_detach(op);
	if (op->body_fd >= 0)
		close(op->body_fd);
	free(op->spooled);
	changes_free(op->changes);
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
	static const char *const verbs[] = { "read", "stat",  "write", "remove", "mkdir",
					     "move", "chmod", "tar",   "extract" };
	return verbs[k];
}

/* A result about op: its paths, no fd. */
static struct files_result result_of(const struct file_op *op)
{
	return (struct files_result){ .path = op->path, .path2 = op->path2, .fd = -1 };
}

void op_end(struct file_op *op, const struct files_result *res, const struct cove_err *err)
{
	bool gone = op->gone;
	op->gone = true; /* nothing the caller does from here reaches it again */
	if (!gone && op->out)
		output_close(op->out, err);
	else if (!gone && op->done)
		op->done(op->arg, res, err);
	else if (res && res->fd >= 0)
		close(res->fd);
	op_free(op);
}

/* An errno from init, as an error about op's path. */
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
	else if (errnum == EFBIG)
		code = COVE_ETOOBIG;
	else if (errnum == ENOSPC || errnum == EDQUOT)
		code = COVE_ENOSPACE;
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
	if (op->started) /* the stream is cut: its consumer gets no error body */
		log_warn("sandbox %s: %s", op->sb ? op->sb->id : "?", err.msg);
	op_end(op, NULL, &err);
}

static enum files_type type_of_mode(mode_t m)
{
	return S_ISREG(m) ? FILES_FILE : S_ISDIR(m) ? FILES_DIR : S_ISLNK(m) ? FILES_SYMLINK : FILES_OTHER;
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s && s[1] ? s + 1 : path;
}

/* fd is an O_PATH fd of the path itself (a symlink is not followed). */
static void stat_done(struct file_op *op, int fd)
{
	struct stat st;
	char target[PATH_MAX];
	if (fstat(fd, &st) < 0) {
		op_fail(op, errno);
		return;
	}
	ssize_t n = S_ISLNK(st.st_mode) ? readlinkat(fd, "", target, sizeof(target) - 1) : -1;
	target[n > 0 ? n : 0] = '\0';
	struct files_entry e = { .name = base_name(op->path),
				 .path = op->path,
				 .type = type_of_mode(st.st_mode),
				 .size = (uint64_t)st.st_size,
				 .mode = st.st_mode & 07777,
				 .mtime = st.st_mtim.tv_sec,
				 .uid = st.st_uid,
				 .gid = st.st_gid,
				 .target = S_ISLNK(st.st_mode) ? target : NULL };
	struct files_result res = result_of(op);
	res.stat = &e;
	op_end(op, &res, NULL);
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

static const enum files_type entry_types[] = {
	[WIRE_ENTRY_FILE] = FILES_FILE,     [WIRE_ENTRY_DIR] = FILES_DIR,     [WIRE_ENTRY_SYMLINK] = FILES_SYMLINK,
	[WIRE_ENTRY_HARDLINK] = FILES_FILE, [WIRE_ENTRY_OTHER] = FILES_OTHER,
};

/* The stream's current record as the listing's next entry, its path
 * joined to the directory's (dir_len bytes of op->path). 0 or -ENOMEM. */
static int listing_add(struct file_op *op, size_t dir_len)
{
	struct listing *l = op->list;
	struct entry_stream *s = op->st;
	bool link = s->e.type == WIRE_ENTRY_SYMLINK;
	struct files_entry *entries = array_room_for_one(l->entries, l->n, &l->cap, sizeof(*entries), 64);
	if (!entries)
		return -ENOMEM;
	l->entries = entries;
	size_t plen = dir_len + 1 + strlen(s->path), tlen = link ? strlen(s->link) : 0;
	char *block = malloc(plen + 1 + tlen + 1);
	if (!block)
		return -ENOMEM;
	snprintf(block, plen + 1, "%.*s/%s", (int)dir_len, op->path, s->path);
	if (link)
		memcpy(block + plen + 1, s->link, tlen + 1);
	l->entries[l->n++] = (struct files_entry){ .name = base_name(block),
						   .path = block,
						   .type = entry_types[s->e.type],
						   .size = s->e.size,
						   .mode = s->e.mode & 07777,
						   .mtime = s->e.mtime,
						   .uid = s->e.uid,
						   .gid = s->e.gid,
						   .target = link ? block + plen + 1 : NULL };
	return 0;
}

/* A listing's records into its entries. 1 once op is answered (and freed). */
static int listing_consume(struct file_op *op)
{
	struct entry_stream *s = op->st;
	const char *buf;
	size_t len;
	enum stream_event ev;
	bool truncated = false;
	size_t dir_len = strlen(op->path);
	while (dir_len > 0 && op->path[dir_len - 1] == '/') /* "/" and "/tmp/" join as "" and "/tmp" */
		dir_len--;
	while ((ev = entry_stream_next(s, &buf, &len)) == SE_ENTRY) {
		if (op->list->n >= FILES_MAX_ENTRIES) {
			truncated = true;
			break;
		}
		if (listing_add(op, dir_len) < 0) {
			op_fail(op, ENOMEM);
			return 1;
		}
	}
	if (ev == SE_MORE)
		return 0;
	if (ev == SE_BAD) {
		op_fail(op, EIO);
		return 1;
	}
	struct files_listing listing = {
		.path = op->path, .entries = op->list->entries, .n = op->list->n, .truncated = truncated
	};
	struct files_result res = result_of(op);
	res.listing = &listing;
	op_end(op, &res, NULL);
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
	op->list = calloc(1, sizeof(*op->list));
	op->st->ev = event_new(engine_ctx->base, fd, EV_READ | EV_PERSIST, on_listing_readable, op);
	if (!op->list || !op->st->ev) {
		op_fail(op, ENOMEM);
		return;
	}
	event_add(op->st->ev, NULL);
}

/* A regular file's answer: its fd, for the caller to send. Takes fd. */
static void file_done(struct file_op *op, int fd, const struct stat *st)
{
	struct files_result res = result_of(op);
	res.fd = fd;
	res.size = (uint64_t)st->st_size;
	op_end(op, &res, NULL);
}

int files_write_data(struct file_op *op, struct evbuffer *buf)
{
	if (evbuffer_get_length(buf) > 0 && io_fault_eio()) {
		op_fail(op, EIO);
		return -1;
	}
	while (evbuffer_get_length(buf) > 0) {
		int n = evbuffer_write(buf, op->body_fd);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			op_fail(op, errno);
			return -1;
		}
		op->written += (uint64_t)n;
	}
	return 0;
}

static int op_send(struct file_op *op, const struct file_request *fr, struct cove_err *err);

/* A spooled body is whole: checked (from its start), then init is asked. */
static void spool_done(struct file_op *op)
{
	struct cove_err err = { 0 };
	_cleanup_free_ struct file_request *fr = TAKE_PTR(op->spooled);
	if (fr->check_spool(op->body_fd, &err) == 0 && op_send(op, fr, &err) == 0)
		return;
	op_end(op, NULL, &err);
}

/* The body is whole in init's replacement: init renames it over the path,
 * and files_on_done answers. Our fd goes now: the one in the packet is
 * init's. */
static void write_commit(struct file_op *op)
{
	struct cove_err err = { 0 };
	struct file_request fr = { .kind = FK_WRITE, .type = WIRE_FSOP, .value = WIRE_FS_COMMIT, .mode = op->mode };
	if (op_send(op, &fr, &err) < 0) {
		op_end(op, NULL, &err);
		return;
	}
	close(op->body_fd);
	op->body_fd = -1;
}

void files_write_end(struct file_op *op)
{
	if (op->spooled) {
		spool_done(op);
		return;
	}
	if (op->replace) {
		write_commit(op);
		return;
	}
	struct files_result res = result_of(op);
	res.size = op->written;
	res.changed = op->created;
	op_end(op, &res, NULL);
}

void files_cancel(struct file_op *op)
{
	op->gone = true;
	/* A stream stops at once (its child sees its socket close), and so
	 * does a body; a request to init waits for its answer, which closes
	 * what it brings. */
	if (op->st || op->body_fd >= 0)
		op_free(op);
}

/* The body into the file, as it comes. Takes fd. */
static void write_body(struct file_op *op, int fd, uint32_t flags)
{
	struct stat st;
	op->body_fd = fd;
	op->created = flags & WIRE_FLAG_CREATED;
	op->replace = flags & WIRE_FLAG_REPLACE;
	/* The mode init gave the replacement, for the commit to give again:
	 * the body's writes take away its setuid and setgid bits. */
	if (op->replace && fstat(fd, &st) < 0) {
		op_fail(op, errno);
		return;
	}
	if (op->replace)
		op->mode = st.st_mode & 07777;
	/* The upload takes as long as it takes: the client is the limit. */
	evtimer_del(op->timeout_ev);
	op->ready(op->arg);
}

void files_on_opened(struct sandbox *sb, uint32_t seq, uint32_t flags, int fd)
{
	struct file_op *op = op_find(sb, seq);
	struct stat st;
	if (op && op->st)
		op = NULL; /* answered already */
	if (op && op->gone && fd >= 0) {
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
		stat_done(op, fd);
		close(fd);
	} else if (op->kind == FK_WRITE) {
		write_body(op, fd, flags);
	} else if (fstat(fd, &st) < 0) {
		close(fd);
		op_fail(op, errno);
	} else if (!S_ISREG(st.st_mode)) {
		close(fd);
		op_fail(op, EINVAL);
	} else {
		file_done(op, fd, &st);
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
		return;
	}
	struct files_result res = result_of(op);
	res.changed = changed;
	res.mode = op->mode;
	if (op->kind == FK_WRITE) { /* a replacement renamed into place */
		res.size = op->written;
		res.changed = op->created;
	}
	op_end(op, &res, NULL);
}

void files_abort_all(struct sandbox *sb, const char *why)
{
	while (sb->file_ops) {
		struct cove_err err = { 0 };
		err_set(&err, COVE_ESTATE, "%s", why);
		op_end(sb->file_ops, NULL, &err);
	}
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct file_op *op = arg;
	struct cove_err err = { 0 };
	log_warn("sandbox %s: %s '%s': cove-init did not answer", op->sb->id, verb_of(op->kind), op->path);
	err_set(&err, COVE_EINTERNAL, "%s '%s': no answer from the sandbox", verb_of(op->kind), op->path);
	op_end(op, NULL, &err);
}

/* ---- requests ---- */

static int send_request(struct sandbox *sb, struct file_op *op, const struct file_request *fr, struct cove_err *err)
{
	static char pkt[WIRE_MAX_PACKET];
	struct wire_hdr h = {
		.type = fr->type, .seq = op->seq, .pid = fr->depth, .value = fr->value, .flags = fr->flags
	};
	struct wire_path p = { .mode = fr->mode, .path = op->path, .path2 = op->path2, .user = op->user };
	long len = wire_encode_path(pkt, sizeof(pkt), &h, &p);
	if (len < 0)
		return err_set(err, COVE_EINVAL, "bad path");
	const int *fd = op->changes                                            ? &op->changes->list_fd
			: fr->type == WIRE_FSOP && fr->value == WIRE_FS_COMMIT ? &op->body_fd
									       : NULL;
	int r = sandbox_send(sb, pkt, (size_t)len, fd, fd ? 1 : 0);
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
	op->spooled->path = op->spooled->path2 = op->spooled->user = NULL; /* in op already */
	op->body_fd = open(engine_ctx->data_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (op->body_fd < 0)
		return err_sys(err, errno, "a temporary file for the body in '%s'", engine_ctx->data_dir);
	return 0;
}

int files_sandbox_ready(struct sandbox *sb, struct cove_err *err)
{
	return sandbox_ready(sb, err);
}

/* The request's paths and user into op. */
static int op_init(struct file_op *op, struct sandbox *sb, const struct file_request *fr, struct cove_err *err)
{
	const char *user = fr->user ? fr->user : sb->spec.user;
	if (!fr->path || fr->path[0] != '/' || strlen(fr->path) >= sizeof(op->path) ||
	    (fr->path2 && (fr->path2[0] != '/' || strlen(fr->path2) >= sizeof(op->path2))))
		return err_set(err, COVE_EINVAL, "a path must be absolute, and shorter than %d bytes", PATH_MAX);
	if (strlen(user) >= sizeof(op->user))
		return err_set(err, COVE_EINVAL, "'user' is too long");
	snprintf(op->path, sizeof(op->path), "%s", fr->path);
	snprintf(op->path2, sizeof(op->path2), "%s", fr->path2 ? fr->path2 : "");
	snprintf(op->user, sizeof(op->user), "%s", user);
	op->sb = sb;
	op->body_fd = -1;
	op->kind = fr->kind;
	op->mode = fr->mode;
	op->format = fr->format;
	op->seq = sb->next_seq++ ?: sb->next_seq++;
	op->timeout_ev = evtimer_new(engine_ctx->base, on_timeout, op);
	if (!op->timeout_ev)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	return 0;
}

int files_start(struct sandbox *sb, const struct file_request *fr, const struct file_caller *c, struct file_op **ret,
		struct cove_err *err)
{
	if (files_sandbox_ready(sb, err) < 0) {
		changes_free(c->changes);
		return -1;
	}
	struct file_op *op = calloc(1, sizeof(*op));
	if (!op) {
		changes_free(c->changes);
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	op->body_fd = -1; /* before op_init, which may fail first */
	op->changes = c->changes;
	op->done = c->done;
	op->ready = c->ready;
	op->arg = c->arg;
	op->out = c->out;
	op->doc = c->doc;
	op->doc_len = c->doc_len;
	if (op_init(op, sb, fr, err) < 0 || (fr->check_spool ? spool_open(op, fr, err) : op_send(op, fr, err)) < 0) {
		op_free(op);
		return -1;
	}
	if (op->out)
		output_attach(op->out, &tar_producer, op);
	op->next = sb->file_ops;
	sb->file_ops = op;
	if (ret)
		*ret = op;
	return 0;
}

/* An operation with one answer. */
static int start_one(struct sandbox *sb, const struct file_request *fr, files_done_fn done, void *arg,
		     struct file_op **ret, struct cove_err *err)
{
	struct file_caller c = { .done = done, .arg = arg };
	return files_start(sb, fr, &c, ret, err);
}

int files_read(struct sandbox *sb, const struct files_read_req *rq, files_done_fn done, void *arg, struct file_op **ret,
	       struct cove_err *err)
{
	struct file_request fr = { .kind = rq->stat ? FK_STAT : FK_READ,
				   .type = WIRE_OPEN,
				   .value = rq->stat ? WIRE_OPEN_STAT : WIRE_OPEN_READ,
				   .depth = rq->depth ? rq->depth : 1,
				   .path = rq->path,
				   .user = rq->user };
	if (fr.depth < 1 || fr.depth > FILES_MAX_DEPTH)
		return err_set(err, COVE_EINVAL, "'depth' must be an integer from 1 to %d", FILES_MAX_DEPTH);
	return start_one(sb, &fr, done, arg, ret, err);
}

int files_write(struct sandbox *sb, const struct files_write_req *rq, files_ready_fn ready, files_done_fn done,
		void *arg, struct file_op **ret, struct cove_err *err)
{
	struct file_request fr = { .kind = FK_WRITE,
				   .type = WIRE_OPEN,
				   .value = WIRE_OPEN_WRITE,
				   .mode = rq->mode_given ? rq->mode : 0644,
				   .flags = (rq->mode_given ? WIRE_FLAG_MODE : 0) |
					    (rq->parents ? WIRE_FLAG_PARENTS : 0),
				   .path = rq->path,
				   .user = rq->user };
	struct file_caller c = { .done = done, .ready = ready, .arg = arg };
	if (rq->mode_given && rq->mode > 07777)
		return err_set(err, COVE_EINVAL, "'mode' must be octal permission bits, like 0644");
	return files_start(sb, &fr, &c, ret, err);
}

int files_remove(struct sandbox *sb, const struct files_remove_req *rq, files_done_fn done, void *arg,
		 struct file_op **ret, struct cove_err *err)
{
	struct file_request fr = { .kind = FK_REMOVE,
				   .type = WIRE_FSOP,
				   .value = WIRE_FS_REMOVE,
				   .flags = rq->recursive ? WIRE_FLAG_RECURSIVE : 0,
				   .path = rq->path,
				   .user = rq->user };
	return start_one(sb, &fr, done, arg, ret, err);
}

int files_mkdir(struct sandbox *sb, const struct files_mkdir_req *rq, files_done_fn done, void *arg,
		struct file_op **ret, struct cove_err *err)
{
	struct file_request fr = {
		.kind = FK_MKDIR, .type = WIRE_FSOP, .value = WIRE_FS_MKDIR, .path = rq->path, .user = rq->user
	};
	return start_one(sb, &fr, done, arg, ret, err);
}

int files_move(struct sandbox *sb, const struct files_move_req *rq, files_done_fn done, void *arg, struct file_op **ret,
	       struct cove_err *err)
{
	struct file_request fr = { .kind = FK_MOVE,
				   .type = WIRE_FSOP,
				   .value = WIRE_FS_RENAME,
				   .flags = rq->overwrite ? WIRE_FLAG_OVERWRITE : 0,
				   .path = rq->from,
				   .path2 = rq->to,
				   .user = rq->user };
	if (!rq->to)
		return err_set(err, COVE_EINVAL, "'to' is required");
	return start_one(sb, &fr, done, arg, ret, err);
}

int files_chmod(struct sandbox *sb, const struct files_chmod_req *rq, files_done_fn done, void *arg,
		struct file_op **ret, struct cove_err *err)
{
	struct file_request fr = { .kind = FK_CHMOD,
				   .type = WIRE_FSOP,
				   .value = WIRE_FS_CHMOD,
				   .mode = rq->mode,
				   .path = rq->path,
				   .user = rq->user };
	if (rq->mode > 07777)
		return err_set(err, COVE_EINVAL, "'mode' must be permission bits");
	return start_one(sb, &fr, done, arg, ret, err);
}

/* Folders as tar streams: GET .../files/tar?path=DIR sends DIR's tree, PUT
 * extracts a tar body into DIR (made if missing).
 *
 * coved walks nothing and creates nothing itself. For a download, init's
 * child walks DIR as the request's user and writes an entry stream with the
 * files' bytes (common/wire.h); coved turns it into a pax tar with libarchive,
 * whose output goes to the client chunk by chunk. Backpressure is the output's
 * (engine/output.h): paused (the consumer is behind), coved stops reading
 * the stream, the child blocks on its socket, and coved's memory for a
 * download stays near the consumer's bound however large the tree.
 *
 * For an upload, the body goes as it comes into an unlinked temporary file
 * under the data root (files.c spools it as the caller feeds it: check_spool), so a tar of any
 * size takes disk, not coved's memory; libarchive then reads that file
 * twice. The first pass, once the body is whole, refuses before anything
 * changes what is not an uncompressed tar, a member with a ".." component,
 * and a member (or a hard link's target) through a symlink of the same
 * archive; it skips the members' data (a seek). The second pass writes the
 * members as an entry stream to init's child, which makes each one beneath
 * DIR as the user, through no symlink at all (openat2 RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS, component by component: also not through one that
 * was already in the sandbox), and answers how it went. Leading '/' and
 * "./" go, as tar does; owners in the archive are ignored (what is made is
 * the user's); devices, FIFOs and sockets are skipped and counted. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/encoding.h"
#include "common/log.h"
#include "engine/files_op.h"
#include "engine/output.h"
#include "engine/portable.h"

#define UPLOAD_HIGH_WATER (256 << 10) /* entry stream bytes made ahead of the socket */
#define TAR_READS_PER_EVENT 16
#define SPOOL_READ_BLOCK (128 << 10) /* libarchive's reads of the spooled body */

static const char *const format_names[] = { [TREE_TAR] = "tar", [TREE_ZIP] = "zip", [TREE_JSON] = "portable snapshot" };

enum { MEMBER_SKIP = ARCHIVE_EOF + 1 };

struct tar_state {
	struct archive *ar;
	struct archive_entry *ae;     /* a download's, reused */
	struct archive_entry *member; /* an upload's current one, libarchive's */
	struct evbuffer *out;         /* tar bytes for the client, or stream bytes for init */
	bool paused;
	bool cut; /* a download ended early: what libarchive still writes goes nowhere */
	/* an upload */
	struct event *write_ev;
	uint64_t data_left; /* of the current member */
	uint64_t zeros;     /* a sparse member's hole still to send */
	const char *block;  /* a data block of libarchive's still to send */
	size_t block_len;
	bool ended; /* WIRE_ENTRY_END queued */
	unsigned skipped;
	/* the portable JSON snapshot: a download's writer, an upload's entries */
	struct portable_writer *json;
	struct portable_doc *doc;
	size_t next; /* of doc's entries */
};

void tar_free(struct file_op *op)
{
	struct tar_state *t = op->tar;
	if (!t)
		return;
	portable_writer_free(t->json);
	portable_doc_free(t->doc);
	if (t->ar && op->kind == FK_TAR) {
		/* No end-of-archive for a cut download: the close that free does
		 * writes it nowhere. (archive_write_fail would skip that close,
		 * and with it the free of libarchive's output state: a leak.) */
		t->cut = true;
		archive_write_free(t->ar);
	} else if (t->ar) {
		archive_read_free(t->ar);
	}
	if (t->ae)
		archive_entry_free(t->ae); /* only a download allocates one */
	if (t->out)
		evbuffer_free(t->out);
	if (t->write_ev)
		event_free(t->write_ev);
	free(t);
	op->tar = NULL;
}

/* ---- download: an entry stream into a tar, out to the client ---- */

static la_ssize_t tar_output(struct archive *a, void *arg, const void *buf, size_t n)
{
	struct tar_state *t = arg;
	if (t->cut)
		return (la_ssize_t)n;
	if (evbuffer_add(t->out, buf, n) < 0) {
		archive_set_error(a, ENOMEM, "out of memory");
		return -1;
	}
	return (la_ssize_t)n;
}

static void download_readable(evutil_socket_t fd, short what, void *arg);

/* The consumer is behind: the stream is not read until it catches up. */
static void tar_pause(void *arg)
{
	struct file_op *op = arg;
	if (!op->tar || op->tar->paused)
		return;
	op->tar->paused = true;
	event_del(op->st->ev);
}

static void tar_resume(void *arg)
{
	struct file_op *op = arg;
	if (!op->tar || !op->tar->paused)
		return;
	op->tar->paused = false;
	event_add(op->st->ev, NULL);
	download_readable(op->st->sock, EV_READ, op);
}

static void tar_cancel(void *arg)
{
	files_cancel(arg);
}

const struct output_producer tar_producer = { .pause = tar_pause, .resume = tar_resume, .cancel = tar_cancel };

/* What the archive made so far, to the consumer (what it leaves is dropped). */
static void flush_out(struct file_op *op)
{
	struct tar_state *t = op->tar;
	if (evbuffer_get_length(t->out) == 0)
		return;
	struct out_event ev = { .type = OUT_BYTES, .buf = t->out };
	output_write(op->out, &ev);
	evbuffer_drain(t->out, evbuffer_get_length(t->out));
}

static int write_header(struct file_op *op)
{
	static const unsigned types[] = {
		[WIRE_ENTRY_FILE] = AE_IFREG, [WIRE_ENTRY_DIR] = AE_IFDIR, [WIRE_ENTRY_SYMLINK] = AE_IFLNK
	};
	struct entry_stream *s = op->st;
	struct archive_entry *ae = op->tar->ae;
	if (s->e.type != WIRE_ENTRY_FILE && s->e.type != WIRE_ENTRY_DIR && s->e.type != WIRE_ENTRY_SYMLINK)
		return -1; /* the child sends no other kind in a tar */
	archive_entry_clear(ae);
	archive_entry_copy_pathname(ae, s->path);
	archive_entry_set_filetype(ae, types[s->e.type]);
	archive_entry_set_perm(ae, s->e.mode);
	archive_entry_set_uid(ae, s->e.uid);
	archive_entry_set_gid(ae, s->e.gid);
	archive_entry_set_mtime(ae, s->e.mtime, 0);
	archive_entry_set_size(ae, s->e.type == WIRE_ENTRY_FILE ? (la_int64_t)s->e.size : 0);
	if (s->e.type == WIRE_ENTRY_SYMLINK)
		archive_entry_copy_symlink(ae, s->link);
	/* libarchive's zip writer flags a name as UTF-8 when the locale's
	 * charset is; coved runs in the C locale, whose names are bytes. So a
	 * name that is UTF-8 is written under a UTF-8 locale (and unzip,
	 * Python, Windows show it as text), any other as its bytes. */
	static locale_t utf8;
	if (op->format == TREE_ZIP && !utf8)
		utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	int valid;
	bool text = utf8 && op->format == TREE_ZIP &&
		    utf8_valid_prefix(s->path, strlen(s->path), &valid) == strlen(s->path) && valid;
	locale_t old = text ? uselocale(utf8) : (locale_t)0;
	/* ARCHIVE_WARN: a name not in the locale's charset, kept as bytes. */
	int r = archive_write_header(op->tar->ar, ae);
	if (text)
		uselocale(old);
	return r < ARCHIVE_WARN ? -1 : 0;
}

/* An entry stream's event into the download's format. 0, or -1 with err. */
static int sink_entry(struct file_op *op, struct cove_err *err)
{
	if (op->format == TREE_JSON)
		return portable_entry(op->tar->json, &op->st->e, op->st->path, op->st->link, err);
	return write_header(op) == 0 ? 0 : err_set(err, COVE_EINTERNAL, "%s", archive_error_string(op->tar->ar));
}

static int sink_data(struct file_op *op, const char *buf, size_t len, struct cove_err *err)
{
	if (op->format == TREE_JSON)
		return portable_data(op->tar->json, buf, len, err);
	return archive_write_data(op->tar->ar, buf, len) == (la_ssize_t)len
		       ? 0
		       : err_set(err, COVE_EINTERNAL, "%s", archive_error_string(op->tar->ar));
}

/* An export of the changes: the manifest, the archive's last member. */
static int write_manifest(struct file_op *op)
{
	_cleanup_free_ char *text = changes_manifest(op->changes);
	struct archive_entry *ae = op->tar->ae;
	if (!text)
		return -1;
	archive_entry_clear(ae);
	archive_entry_copy_pathname(ae, CHANGES_MANIFEST);
	archive_entry_set_filetype(ae, AE_IFREG);
	archive_entry_set_perm(ae, 0644);
	archive_entry_set_mtime(ae, time(NULL), 0);
	archive_entry_set_size(ae, (la_int64_t)strlen(text));
	return archive_write_header(op->tar->ar, ae) < ARCHIVE_WARN ||
		       archive_write_data(op->tar->ar, text, strlen(text)) != (la_ssize_t)strlen(text)
		       ? -1
		       : 0;
}

static int sink_end(struct file_op *op, struct cove_err *err)
{
	if (op->format == TREE_JSON)
		return portable_end(op->tar->json, err);
	if (op->changes && write_manifest(op) < 0)
		return err_set(err, COVE_EINTERNAL, "the manifest: %s", archive_error_string(op->tar->ar));
	return archive_write_close(op->tar->ar) == ARCHIVE_OK
		       ? 0
		       : err_set(err, COVE_EINTERNAL, "%s", archive_error_string(op->tar->ar));
}

/* The stream's records into the tar. 1 once op is finished (and freed). */
static int download_consume(struct file_op *op)
{
	const char *buf;
	size_t len;
	struct cove_err err = { 0 };
	for (;;) {
		enum stream_event ev = entry_stream_next(op->st, &buf, &len);
		if (ev == SE_MORE)
			return 0;
		if (ev == SE_ENTRY && sink_entry(op, &err) == 0)
			continue;
		if (ev == SE_DATA && sink_data(op, buf, len, &err) == 0)
			continue;
		if (ev == SE_END && sink_end(op, &err) == 0) {
			flush_out(op);
			op_end(op, NULL, NULL);
			return 1;
		}
		if (ev == SE_BAD)
			err_set(&err, COVE_EINTERNAL, "a malformed entry stream");
		log_warn("sandbox %s: %s of '%s' cut short: %s", op->sb->id, format_names[op->format], op->path,
			 err.msg);
		op_end(op, NULL, &err);
		return 1;
	}
}

static void download_readable(evutil_socket_t fd, short what, void *arg)
{
	struct file_op *op = arg;
	for (int i = 0; i < TAR_READS_PER_EVENT && !op->tar->paused; i++) {
		int n = entry_stream_read(op->st);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			break;
		if (download_consume(op))
			return;
		if (n <= 0) { /* the child died before the end */
			struct cove_err err = { 0 };
			err_set(&err, COVE_EINTERNAL, "the stream ended early");
			log_warn("sandbox %s: tar of '%s' cut short: the stream ended early", op->sb->id, op->path);
			op_end(op, NULL, &err);
			return;
		}
		flush_out(op); /* may pause it */
	}
	flush_out(op);
}

/* A zip streams: with no seek callback, libarchive's writer follows each
 * deflated file with a data descriptor (its CRC and sizes), and the central
 * directory comes last. */
static int open_archive(struct tar_state *t, enum tree_format format)
{
	if (!(t->ar = archive_write_new()) || !(t->ae = archive_entry_new()))
		return -1;
	int r = format == TREE_ZIP ? archive_write_set_format_zip(t->ar)
				   : archive_write_set_format_pax_restricted(t->ar);
	if (r != ARCHIVE_OK || archive_write_set_bytes_per_block(t->ar, 0) != ARCHIVE_OK ||
	    archive_write_open(t->ar, t, NULL, tar_output, NULL) != ARCHIVE_OK)
		return -1;
	return 0;
}

static int start_download(struct file_op *op)
{
	struct tar_state *t = op->tar;
	op->st->data = true;
	if (op->format == TREE_JSON ? !(t->json = portable_writer_new(t->out, op->changes != NULL)) : open_archive(t, op->format) < 0)
		return -1;
	op->st->ev = event_new(engine_ctx->base, op->st->sock, EV_READ | EV_PERSIST, download_readable, op);
	if (!op->st->ev)
		return -1;
	/* The consumer sets the pace from here: no backstop timeout. */
	event_free(op->timeout_ev);
	op->timeout_ev = NULL;
	struct out_changes counts = { 0 };
	struct out_event ev = { .type = OUT_START };
	if (op->changes) {
		counts.entries = op->changes->entries;
		counts.deletions = json_array_size(op->changes->deleted);
		ev.changes = &counts;
	}
	output_write(op->out, &ev);
	op->started = true;
	event_add(op->st->ev, NULL);
	return 0;
}

/* ---- upload: the body's members ---- */

/* libarchive on the spooled body (an uncompressed tar) from its start, or
 * NULL with err. The fd stays open (libarchive does not close it). */
static struct archive *open_spool(int fd, struct cove_err *err)
{
	struct archive *a = archive_read_new();
	if (lseek(fd, 0, SEEK_SET) < 0) {
		err_sys(err, errno, "the temporary file of the body");
	} else if (!a || archive_read_support_format_tar(a) != ARCHIVE_OK) {
		err_set(err, COVE_EINTERNAL, "out of memory");
	} else if (archive_read_open_fd(a, fd, SPOOL_READ_BLOCK) != ARCHIVE_OK) {
		err_set(err, COVE_EINVAL, "not an uncompressed tar archive: %s", archive_error_string(a));
	} else {
		return a;
	}
	archive_read_free(a);
	return NULL;
}

/* The next member as an entry: 0 with path, link and type, MEMBER_SKIP
 * (a special file, or the archive's root "./"), ARCHIVE_EOF, or -1 with
 * err. */
static int next_member(struct archive *a, struct archive_entry **ae, char *path, char *link, uint32_t *type,
		       struct cove_err *err)
{
	int r = archive_read_next_header(a, ae);
	if (r == ARCHIVE_EOF)
		return ARCHIVE_EOF;
	if (r < ARCHIVE_WARN)
		return err_set(err, COVE_EINVAL, "not an uncompressed tar archive: %s", archive_error_string(a));
	const char *name = archive_entry_pathname(*ae), *hard = archive_entry_hardlink(*ae);
	const char *target = hard ? hard : archive_entry_symlink(*ae);
	if (!name)
		return err_set(err, COVE_EINVAL, "a tar member without a name");
	r = wire_entry_path_normalize(name, path, WIRE_ENTRY_MAX_PATH + 1);
	if (r < 0)
		return err_set(err, COVE_EINVAL, "tar member '%.200s': %s", name,
			       r == -EINVAL ? "'..' is not allowed" : "name too long");
	if (r == 1)
		return MEMBER_SKIP;
	link[0] = '\0';
	if (hard && wire_entry_path_normalize(hard, link, WIRE_ENTRY_MAX_PATH + 1) != 0)
		return err_set(err, COVE_EINVAL, "tar member '%.200s': a hard link to '%.200s'", name, hard);
	switch (hard ? AE_IFREG : archive_entry_filetype(*ae)) {
	case AE_IFREG:
		*type = hard ? WIRE_ENTRY_HARDLINK : WIRE_ENTRY_FILE;
		break;
	case AE_IFDIR:
		*type = WIRE_ENTRY_DIR;
		break;
	case AE_IFLNK:
		if (!target || !target[0] || strlen(target) > WIRE_ENTRY_MAX_PATH)
			return err_set(err, COVE_EINVAL, "tar member '%.200s': a symlink without a target", name);
		snprintf(link, WIRE_ENTRY_MAX_PATH + 1, "%s", target);
		*type = WIRE_ENTRY_SYMLINK;
		break;
	default:
		return MEMBER_SKIP;
	}
	return 0;
}

/* Does path go through a symlink that an earlier member made? */
static const char *through_symlink(json_t *symlinks, const char *path)
{
	static char prefix[WIRE_ENTRY_MAX_PATH + 1];
	for (const char *slash = strchr(path, '/'); slash; slash = strchr(slash + 1, '/')) {
		snprintf(prefix, sizeof(prefix), "%.*s", (int)(slash - path), path);
		if (json_object_get(symlinks, prefix))
			return prefix;
	}
	return NULL;
}

/* The first pass: the whole body is a tar whose members are all safe to
 * make. Nothing has changed yet, so a refusal changes nothing. */
static int check_spool(int fd, struct cove_err *err)
{
	static char path[WIRE_ENTRY_MAX_PATH + 1], link[WIRE_ENTRY_MAX_PATH + 1];
	struct archive_entry *ae;
	uint32_t type;
	struct archive *a = open_spool(fd, err);
	json_t *symlinks = json_object();
	int r = !a ? -1 : symlinks ? 0 : err_set(err, COVE_EINTERNAL, "out of memory");
	while (r == 0) {
		r = next_member(a, &ae, path, link, &type, err);
		if (r < 0 || r == ARCHIVE_EOF)
			break;
		const char *via = r == 0 ? through_symlink(symlinks, path) : NULL;
		if (!via && r == 0 && type == WIRE_ENTRY_HARDLINK)
			via = through_symlink(symlinks, link);
		if (via) {
			r = err_set(err, COVE_EINVAL,
				    "tar member '%.200s' goes through the symlink '%.200s' of the archive", path, via);
			break;
		}
		if (r == 0 && type == WIRE_ENTRY_SYMLINK)
			json_object_set_new_nocheck(symlinks, path, json_true());
		else if (r == 0)
			json_object_del(symlinks, path);
		if (archive_read_data_skip(a) < ARCHIVE_WARN) {
			r = err_set(err, COVE_EINVAL, "not an uncompressed tar archive: %s", archive_error_string(a));
			break;
		}
		r = 0;
	}
	json_decref(symlinks);
	if (a)
		archive_read_free(a);
	return r == ARCHIVE_EOF ? 0 : -1;
}

/* ---- upload: the second pass, into the child's entry stream ---- */

static void queue_header(struct tar_state *t, struct wire_entry *e, const char *path, const char *link)
{
	e->path_len = (uint32_t)strlen(path);
	e->link_len = (uint32_t)strlen(link);
	evbuffer_add(t->out, e, sizeof(*e));
	evbuffer_add(t->out, path, e->path_len);
	evbuffer_add(t->out, link, e->link_len);
}

static void queue_entry(struct tar_state *t, uint32_t type, struct archive_entry *ae, const char *path,
			const char *link)
{
	la_int64_t size = type == WIRE_ENTRY_FILE ? archive_entry_size(ae) : 0;
	struct wire_entry e = { .type = type,
				.mode = ae ? archive_entry_perm(ae) & 07777 : 0,
				.mtime = ae ? archive_entry_mtime(ae) : 0,
				.size = size > 0 ? (uint64_t)size : 0 };
	queue_header(t, &e, path, link);
	t->data_left = e.size;
	t->zeros = 0;
	t->block_len = 0;
}

/* A portable snapshot's entries, each file whole (decoded as it goes). */
static int produce_portable(struct tar_state *t)
{
	while (!t->ended && evbuffer_get_length(t->out) < UPLOAD_HIGH_WATER) {
		if (t->next == t->doc->n) {
			struct wire_entry end = { .type = WIRE_ENTRY_END };
			queue_header(t, &end, "", "");
			t->ended = true;
			break;
		}
		const struct portable_entry *pe = &t->doc->entries[t->next++];
		struct wire_entry e = { .type = pe->type, .mode = pe->mode, .mtime = pe->mtime, .size = pe->size };
		queue_header(t, &e, pe->path, pe->target ? pe->target : "");
		if (pe->type == WIRE_ENTRY_FILE && portable_content(pe, t->out) < 0)
			return -1;
	}
	return 0;
}

/* Some of the current member's bytes: a hole's zeros, then the pending
 * block, then the next block; zeros too for what the archive lacks. */
static int produce_data(struct tar_state *t)
{
	static const char zero[65536];
	const void *buf;
	size_t n;
	la_int64_t off;
	if (t->zeros > 0 || t->block_len > 0) {
		bool hole = t->zeros > 0;
		uint64_t avail = hole ? (t->zeros < sizeof(zero) ? t->zeros : sizeof(zero)) : t->block_len;
		size_t take = (size_t)(avail < t->data_left ? avail : t->data_left);
		evbuffer_add(t->out, hole ? zero : t->block, take);
		t->data_left -= take;
		if (hole)
			t->zeros -= take;
		else
			t->block_len = 0;
		return 0;
	}
	int r = archive_read_data_block(t->ar, &buf, &n, &off);
	if (r == ARCHIVE_EOF) {
		t->zeros = t->data_left;
		return 0;
	}
	uint64_t at = (uint64_t)archive_entry_size(t->member) - t->data_left;
	if (r < ARCHIVE_WARN || off < 0 || (uint64_t)off < at)
		return -1;
	t->zeros = (uint64_t)off - at;
	t->block = buf;
	t->block_len = n;
	return 0;
}

/* Entry stream bytes up to UPLOAD_HIGH_WATER ahead, then the end. */
static int produce(struct file_op *op)
{
	static char path[WIRE_ENTRY_MAX_PATH + 1], link[WIRE_ENTRY_MAX_PATH + 1];
	struct tar_state *t = op->tar;
	struct cove_err err = { 0 };
	uint32_t type;
	if (t->doc)
		return produce_portable(t);
	while (!t->ended && evbuffer_get_length(t->out) < UPLOAD_HIGH_WATER) {
		if (t->data_left > 0) {
			if (produce_data(t) < 0)
				return -1;
			continue;
		}
		int r = next_member(t->ar, &t->member, path, link, &type, &err);
		if (r == ARCHIVE_EOF) {
			queue_entry(t, WIRE_ENTRY_END, NULL, "", "");
			t->ended = true;
		} else if (r == MEMBER_SKIP) {
			t->skipped += path[0] != '\0';
		} else if (r < 0) {
			return -1; /* the first pass read it fine */
		} else {
			queue_entry(t, type, t->member, path, link);
		}
	}
	return 0;
}

static void upload_writable(evutil_socket_t fd, short what, void *arg)
{
	struct file_op *op = arg;
	struct tar_state *t = op->tar;
	if (produce(op) < 0) {
		op_fail_entry(op, EIO, NULL);
		return;
	}
	if (evbuffer_write(t->out, fd) < 0 && errno != EAGAIN && errno != EINTR) {
		/* The child stopped reading: its answer says why. */
		evbuffer_drain(t->out, evbuffer_get_length(t->out));
		t->ended = true;
	}
	if (t->ended && evbuffer_get_length(t->out) == 0)
		event_del(t->write_ev);
}

/* The child's answer: how many entries it made, or what stopped it. */
static void upload_readable(evutil_socket_t fd, short what, void *arg)
{
	struct file_op *op = arg;
	struct entry_stream *s = op->st;
	const char *buf;
	size_t len;
	int n = entry_stream_read(s);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	enum stream_event ev = entry_stream_next(s, &buf, &len);
	if (ev == SE_MORE && n > 0)
		return;
	if (ev != SE_END) {
		op_fail_entry(op, EIO, NULL);
	} else if (s->e.errnum) {
		op_fail_entry(op, s->e.errnum, s->path[0] ? s->path : op->path);
	} else {
		struct files_result res = { .path = op->path, .path2 = op->path2, .fd = -1 };
		res.entries = s->e.size;
		res.skipped = op->tar->skipped;
		res.changed = op->created;
		op_end(op, &res, NULL);
	}
}

static int start_upload(struct file_op *op)
{
	struct tar_state *t = op->tar;
	struct cove_err err = { 0 };
	if (op->format == TREE_JSON) /* the first pass took it: this one does too */
		(void)portable_parse(op->doc, op->doc_len, &t->doc, &err);
	else
		t->ar = open_spool(op->body_fd, &err);
	op->st->ev = event_new(engine_ctx->base, op->st->sock, EV_READ | EV_PERSIST, upload_readable, op);
	t->write_ev = event_new(engine_ctx->base, op->st->sock, EV_WRITE | EV_PERSIST, upload_writable, op);
	if ((!t->ar && !t->doc) || !op->st->ev || !t->write_ev)
		return -1;
	event_add(op->st->ev, NULL);
	event_add(t->write_ev, NULL);
	return 0;
}

void tar_start(struct file_op *op)
{
	op->tar = calloc(1, sizeof(*op->tar));
	if (!op->tar || !(op->tar->out = evbuffer_new()) ||
	    (op->kind == FK_TAR ? start_download(op) : start_upload(op)) < 0)
		op_fail_entry(op, ENOMEM, NULL);
}

/* ---- requests ---- */

int files_tar_in(struct sandbox *sb, const struct files_tree_req *rq, files_done_fn done, void *arg,
		 struct file_op **ret, struct cove_err *err)
{
	struct file_request fr = { .kind = FK_EXTRACT,
				   .type = WIRE_OPEN,
				   .value = WIRE_OPEN_EXTRACT,
				   .path = rq->path,
				   .user = rq->user,
				   .check_spool = check_spool };
	struct file_caller c = { .done = done, .arg = arg };
	return files_start(sb, &fr, &c, ret, err);
}

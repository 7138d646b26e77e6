/* The Files operations in flight, shared by files.c (files, listings, the
 * operations), files_tar.c (folders as tar streams) and export.c (the
 * workspace's tree, the portable snapshot). Inside the engine only: its
 * callers see engine/files.h. */
#pragma once
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/wire.h"
#include "engine/changes.h"
#include "engine/engine.h"
#include "engine/files.h"

enum file_kind { FK_READ, FK_STAT, FK_WRITE, FK_REMOVE, FK_MKDIR, FK_MOVE, FK_CHMOD, FK_TAR, FK_EXTRACT };

/* An entry stream's reading end (common/wire.h): records parsed as they
 * arrive, whatever the split of the bytes. */
struct entry_stream {
	int sock;
	struct event *ev;
	struct evbuffer *in;
	bool data; /* files' bytes follow their entries (a tar) */
	bool have_header;
	uint64_t data_left; /* of the current entry */
	size_t consumed;    /* handed out as SE_DATA, drained at the next call */
	struct wire_entry e;
	char path[WIRE_ENTRY_MAX_PATH + 1];
	char link[WIRE_ENTRY_MAX_PATH + 1];
};

enum stream_event { SE_MORE, SE_ENTRY, SE_DATA, SE_END, SE_BAD };

struct tar_state;
struct listing;

/* One request, from its call until its answer. Waits for cove-init's
 * answer with its seq; an entry stream then feeds it from its socket. */
struct file_op {
	struct file_op *next;
	struct sandbox *sb; /* NULL once detached */
	enum file_kind kind;
	uint32_t seq;
	struct event *timeout_ev;
	char path[PATH_MAX];
	char path2[PATH_MAX];
	char user[64];
	uint32_t mode;           /* a chmod's */
	bool created;            /* init made the path (WIRE_FLAG_CREATED) */
	bool replace;            /* a write's body_fd is a replacement, for WIRE_FS_COMMIT at its end */
	bool gone;               /* cancelled: the answer, when it comes, goes nowhere */
	bool started;            /* a stream's OUT_START went out */
	struct entry_stream *st; /* once init answered with an entry stream */
	struct listing *list;    /* a listing's entries */
	struct tar_state *tar;   /* files_tar.c's */
	int body_fd;             /* a write's file, once init opened it; -1 before */
	uint64_t written;        /* of the body, into body_fd */
	enum tree_format format; /* FK_TAR's and FK_EXTRACT's */
	/* A spooled body's request (check_spool; body_fd holds the body):
	 * what init is asked once the body is whole and checked. */
	struct file_request *spooled;
	const char *doc; /* a portable import's text (borrowed) */
	size_t doc_len;
	struct changes *changes; /* an export of the sandbox's changes: its list (sent to init), its manifest */
	/* the caller's */
	files_done_fn done;
	files_ready_fn ready;
	void *arg;
	struct output *out; /* a stream's (FK_TAR) */
};

/* The operation is over: res or err to its caller (done, or the output's
 * close), unless cancelled; frees op. */
void op_end(struct file_op *op, const struct files_result *res, const struct cove_err *err);
/* An errno as the error about op's path (and entry, when not NULL); ends op. */
void op_fail_entry(struct file_op *op, int errnum, const char *entry);

/* Read what the socket holds into the stream's buffer: > 0 bytes read, 0
 * at the end, < 0 with errno (EAGAIN: nothing now). */
int entry_stream_read(struct entry_stream *s);
/* The next record, or a piece of a file's bytes (*ret_buf, *ret_len,
 * valid until the next call); SE_MORE until enough bytes are in. */
enum stream_event entry_stream_next(struct entry_stream *s, const char **ret_buf, size_t *ret_len);

/* files_tar.c: init answered op (FK_TAR or FK_EXTRACT) with its stream; st is set up. */
void tar_start(struct file_op *op);
void tar_free(struct file_op *op);
/* The output's producer callbacks of a download (arg: the op). */
extern const struct output_producer tar_producer;

/* files.c: what is sent to init */
struct file_request {
	enum file_kind kind;
	uint32_t type; /* WIRE_OPEN or WIRE_FSOP */
	int value;     /* enum wire_open_kind or enum wire_fsop */
	uint32_t flags;
	uint32_t mode;
	int depth;
	const char *path;
	const char *path2;
	const char *user; /* NULL: the sandbox's */
	enum tree_format format;
	/* When set, the body goes whole, as it comes, into an unlinked
	 * temporary file under the data root (op->body_fd), which this checks
	 * from its start; only then is init asked. Bad input changes nothing,
	 * and coved's memory stays bounded whatever the body's size. */
	int (*check_spool)(int fd, struct cove_err *err);
};

/* The caller's side of an operation: done (and ready), or out. */
struct file_caller {
	files_done_fn done;
	files_ready_fn ready;
	void *arg;
	struct output *out;
	const char *doc;
	size_t doc_len;
	struct changes *changes; /* taken by files_start, even when it fails */
};

/* Check the sandbox, then send the request to init (or, with check_spool,
 * take the body first). */
int files_start(struct sandbox *sb, const struct file_request *fr, const struct file_caller *c, struct file_op **ret,
		struct cove_err *err);

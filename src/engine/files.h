/* The Files API's requests in flight, shared by files.c (files, listings,
 * the operations) and files_tar.c (folders as tar streams). */
#pragma once
#include "daemon/http/httpd.h"
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/wire.h"
#include "engine/engine.h"

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

/* What a tree travels as (FK_TAR out, FK_EXTRACT in): a tar, a zip (out
 * only), or the portable JSON snapshot (portable.h). */
enum tree_format { TREE_TAR, TREE_ZIP, TREE_JSON };

/* One request, from its arrival until its answer. Waits for cove-init's
 * answer with its seq; an entry stream then feeds it from its socket. */
struct file_op {
	struct file_op *next;
	struct sandbox *sb;     /* NULL once detached (an aborted reply) */
	struct http_req *req;   /* NULL once the client is gone */
	struct http_conn *conn; /* whose close callback points here, or NULL */
	enum file_kind kind;
	uint32_t seq;
	struct event *timeout_ev;
	char path[PATH_MAX];
	char path2[PATH_MAX];
	int depth;               /* a listing's */
	uint32_t mode;           /* a chmod's */
	bool created;            /* init made the path (WIRE_FLAG_CREATED) */
	bool reply_started;      /* a streamed answer is under way: no error body any more */
	bool aborted;            /* the reply was cut; freed when the connection closes */
	struct entry_stream *st; /* once init answered with an entry stream */
	json_t *entries;         /* a listing's */
	struct tar_state *tar;   /* files_tar.c's */
	int body_fd;             /* a write's file, once init opened it; -1 before */
	uint64_t written;        /* of the body, into body_fd */
	enum tree_format format; /* FK_TAR's and FK_EXTRACT's */
	/* A spooled body's request (check_spool; body_fd holds the body):
	 * what init is asked once the body is whole and checked. */
	struct file_request *spooled;
};

void op_free(struct file_op *op);
/* An errno as the API error about op's path (and entry, when not NULL);
 * frees op. */
void op_fail_entry(struct file_op *op, int errnum, const char *entry);
/* Answer status with body (NULL: out of memory, a 500); frees op. */
void op_reply(struct file_op *op, int status, json_t *body);
/* s as a JSON string; bytes that are not UTF-8 show as U+FFFD. */
json_t *json_text(const char *s);
/* Cut a streamed reply short: the client sees a body without its end.
 * op is freed when its connection closes. */
void op_abort(struct file_op *op);

/* Read what the socket holds into the stream's buffer: > 0 bytes read, 0
 * at the end, < 0 with errno (EAGAIN: nothing now). */
int entry_stream_read(struct entry_stream *s);
/* The next record, or a piece of a file's bytes (*ret_buf, *ret_len,
 * valid until the next call); SE_MORE until enough bytes are in. */
enum stream_event entry_stream_next(struct entry_stream *s, const char **ret_buf, size_t *ret_len);

/* files_tar.c: init answered op (FK_TAR or FK_EXTRACT) with its stream; st is set up. */
void tar_start(struct file_op *op);
void tar_free(struct file_op *op);

/* files.c: validation and sending to init, for files_tar.c */
struct file_request {
	enum file_kind kind;
	const char *const *params; /* allowed query parameters */
	uint32_t type;             /* WIRE_OPEN or WIRE_FSOP */
	int value;                 /* enum wire_open_kind or enum wire_fsop */
	uint32_t flags;
	uint32_t mode;
	int depth;
	const char *path; /* from the body, not the query */
	char user[64];
	enum tree_format format;
	/* When set, the body goes whole, as it comes, into an unlinked
	 * temporary file under the data root (op->body_fd), which this checks
	 * from its start; only then is init asked. Bad input changes nothing,
	 * and coved's memory stays bounded whatever the body's size. */
	int (*check_spool)(int fd, struct cove_err *err);
};
/* Check the sandbox and the query, then send the request to init. When
 * check is not NULL it runs once the query is valid, before anything is
 * sent (the body's validation). */
int files_start(struct http_req *req, const char *id, struct file_request *fr,
		int (*check)(struct http_req *req, struct cove_err *err), struct cove_err *err);
/* files_tar.c: the first pass over a portable snapshot's body */
int portable_check_body(struct http_req *req, struct cove_err *err);

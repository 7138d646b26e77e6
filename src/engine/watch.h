/* Watch: file-change events under a folder of a sandbox (watch.c), as a
 * stream onto a struct output (engine/output.h): OUT_EVENT with a struct
 * watch_event each, OUT_KEEPALIVE after a silence of rq->keepalive
 * seconds. The stream lasts until the consumer cancels it, or until coved
 * ends it with output_close(err): the folder removed, the sandbox gone,
 * too many folders (an error before WATCH_START: the watch never began). */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

struct output;
struct sandbox;

#define WATCH_MAX_KEEPALIVE 3600 /* seconds: the most a request may ask for */
#define WATCH_KEEPALIVE 30       /* the default */

struct watch_request {
	const char *path; /* absolute */
	const char *user; /* NULL: the sandbox's */
	bool recursive;   /* the folders below too, and those made later */
	int keepalive;    /* seconds, 1 to WATCH_MAX_KEEPALIVE; 0: WATCH_KEEPALIVE */
};

enum watch_event_type {
	WATCH_START, /* watching: nothing after this is missed */
	WATCH_CREATE,
	WATCH_WRITE,
	WATCH_REMOVE,
	WATCH_RENAME,   /* each half: moved says which, cookie pairs them */
	WATCH_CHMOD,    /* mode, owner, times */
	WATCH_OVERFLOW, /* events were lost: look again */
};

enum watch_moved { WATCH_MOVED_NONE, WATCH_MOVED_FROM, WATCH_MOVED_TO };

struct watch_event {
	enum watch_event_type type;
	const char *name; /* relative to the watched folder (changes only) */
	bool is_dir;
	enum watch_moved moved; /* WATCH_RENAME's */
	uint32_t cookie;
};

/* Watch rq->path inside sb as rq->user: OUT_EVENT WATCH_START once
 * watching, then the changes. -1 with err (o not taken) when it cannot
 * begin at all (not running, too many watches). */
int watch_start(struct sandbox *sb, const struct watch_request *rq, struct output *o, struct cove_err *err);

/* From the init connection: a WIRE_OPENED (fd, or -1 if none came) or
 * WIRE_OPEN_FAILED (errnum) reply. Returns false, touching nothing, when seq
 * is not a watch's; true when it was (fd taken). */
bool watch_on_init_reply(struct sandbox *sb, uint32_t seq, bool opened, int errnum, int fd);
/* The sandbox is going away: end all its watches with an error. */
void watch_abort_all(struct sandbox *sb, const char *why);
/* Whether a client watches a folder of sb (an attached stream: idle.c). */
bool watch_active(const struct sandbox *sb);

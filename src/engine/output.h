/* Where an engine operation's stream goes.
 *
 * The engine never writes to a socket. An operation whose answer comes
 * later or in pieces (a process's start, output and exit; a collected
 * exec's result; file-change events; an archive's bytes) is handed a
 * struct output by its front end and reports through it. The front end
 * encodes what it is told for its own protocol: NDJSON or one JSON object
 * over HTTP for cove's API, Connect envelopes for E2B's, a buffer in a unit
 * test. This is libvirt's driver table turned around: one table of
 * callbacks, as many implementations as there are front ends.
 *
 * Contract:
 *   - The engine calls ops->write any number of times, then ops->close
 *     exactly once (err NULL: the stream is whole; else why it ended). After
 *     close it never touches the output again.
 *   - Back-pressure is the front end's: when its consumer lags (its own
 *     high-water mark), it calls output_pause(); once drained, output_resume().
 *     A paused producer stops reading its source (pipes, the tar walk) and
 *     keeps nothing unbounded; a write may still come while paused (what
 *     was in flight), never many.
 *   - When the consumer is gone (the client hung up), the front end calls
 *     output_cancel(): the engine stops the operation as a hang-up means
 *     for it (an exec's process is killed) and calls neither write nor
 *     close any more. The front end may free its side right after.
 *   - Producer callbacks are set by the engine when it takes the output
 *     (output_attach) and are NULL before: pausing or cancelling an output
 *     no operation has taken is a no-op.
 *
 * Everything runs on the engine's event loop; nothing here is thread-safe. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

struct evbuffer;
struct output;

enum out_type {
	OUT_START,     /* a process runs: pid; or a byte stream begins (its bytes follow) */
	OUT_STDOUT,    /* data, len: output as it comes */
	OUT_STDERR,    /* data, len */
	OUT_EXIT,      /* a process ended: exit; a collected exec's output in it */
	OUT_EVENT,     /* a subsystem's own typed event: event (see its header) */
	OUT_BYTES,     /* buf, or data and len: a byte stream's next bytes (an archive) */
	OUT_GAP,       /* stream, lost: a slow consumer missed lost bytes of a kept process's output */
	OUT_KEEPALIVE, /* nothing happened for a while: lets a front end prove the consumer is there */
};

/* A process's end, with its collected output when it was not streamed. */
struct out_exit {
	pid_t pid;
	int status; /* as waitpid gives it */
	bool timed_out;
	double duration_ms; /* < 0: unknown */
	/* A collected exec's output (NULL when streamed) and whether it was cut
	 * at max_output. */
	struct evbuffer *collected[2]; /* stdout, stderr */
	bool truncated[2];
};

struct out_event {
	enum out_type type;
	const char *data; /* OUT_STDOUT, OUT_STDERR, OUT_BYTES; borrowed for the call */
	size_t len;
	struct evbuffer *buf;       /* OUT_BYTES, instead of data: the consumer drains what it takes */
	pid_t pid;                  /* OUT_START */
	const char *tag;            /* OUT_START: a kept process's tag, or NULL */
	int stream;                 /* OUT_GAP: 0 stdout, 1 stderr */
	uint64_t lost;              /* OUT_GAP */
	const struct out_exit *exit; /* OUT_EXIT */
	const void *event;          /* OUT_EVENT: the subsystem's struct, borrowed for the call */
	/* OUT_START of an export of a sandbox's changes (engine/files.h):
	 * the changed paths listed and the deletions; NULL otherwise */
	const struct out_changes *changes;
};

struct out_changes {
	uint64_t entries;
	uint64_t deletions;
};

struct output_ops {
	void (*write)(struct output *o, const struct out_event *ev);
	void (*close)(struct output *o, const struct cove_err *err);
	/* Optional: whether the consumer is still there, for a producer about
	 * to hand it something that must not be lost on a consumer already
	 * gone (a lock's grant) before the front end noticed. */
	bool (*alive)(struct output *o);
};

struct output_producer {
	void (*pause)(void *arg);
	void (*resume)(void *arg);
	void (*cancel)(void *arg);
};

struct output {
	const struct output_ops *ops;      /* the front end's */
	const struct output_producer *producer; /* the engine's, once attached */
	void *producer_arg;
};

static inline void output_attach(struct output *o, const struct output_producer *p, void *arg)
{
	o->producer = p;
	o->producer_arg = arg;
}

static inline void output_write(struct output *o, const struct out_event *ev)
{
	o->ops->write(o, ev);
}

/* The end of the engine's use of o. */
static inline void output_close(struct output *o, const struct cove_err *err)
{
	const struct output_ops *ops = o->ops;
	o->producer = NULL;
	ops->close(o, err);
}

static inline bool output_alive(struct output *o)
{
	return !o->ops->alive || o->ops->alive(o);
}

static inline void output_pause(struct output *o)
{
	if (o->producer && o->producer->pause)
		o->producer->pause(o->producer_arg);
}

static inline void output_resume(struct output *o)
{
	if (o->producer && o->producer->resume)
		o->producer->resume(o->producer_arg);
}

static inline void output_cancel(struct output *o)
{
	const struct output_producer *p = o->producer;
	o->producer = NULL;
	if (p && p->cancel)
		p->cancel(o->producer_arg);
}

/* Kept processes inside the engine: what procs.c (their lifetime, input
 * and control) and procs_attach.c (their output to clients) share. */
#pragma once
#include <event2/event.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "engine/output.h"
#include "engine/process.h"

#define RING_CAP (1u << 20)
#define RING_HDR 4096u
#define ATTACH_CHUNK 65536

enum { OUT, ERR, NSTREAMS };

struct ring_header {
	uint32_t magic;
	uint32_t meta_len;
	uint64_t cap;
	uint64_t written[NSTREAMS]; /* bytes ever written to each ring */
	char meta[RING_HDR - 32];   /* the process's description, JSON */
};

struct stdin_req;
struct waiter;

struct proc {
	struct proc *next;
	struct sandbox *sb;
	pid_t pid;
	uint32_t seq;
	json_t *meta; /* cmd, tag, cwd, user, tty, stdin, background, started_at */
	bool tty;
	int ring_fd;
	struct ring_header *ring;
	int out_fd[NSTREAMS];
	struct event *out_ev[NSTREAMS];
	int in_fd; /* stdin pipe or pty master, -1 when closed */
	struct event *in_ev;
	struct stdin_req *in_queue;
	/* The start's answer, until spawned: with start_stream, the stream
	 * (start_foreground: the process goes with its client). */
	struct output *start_out;
	bool start_stream;
	bool start_foreground;
	bool kill_at_spawn; /* a foreground start's client left before the spawn */
	struct proc_attach *attachers;
	struct waiter *waiters;
	struct event *timeout_ev;
	bool timed_out;
	struct session *session; /* the shell behind a session (sessions.c), or NULL */
	bool exited;             /* init reported the exit */
	bool ended;              /* and the output is in the ring */
	int status;
	int64_t ended_at;
};

enum { KEPT_RING, KEPT_OUT, KEPT_ERR, KEPT_STDIN };
enum { KEPT_TTY_MASTER = 1 };

const char *proc_tag(const struct proc *p);
/* Close the process's input: its stdin pipe, or its pty's master. */
void proc_close_input(struct proc *p);
/* Tell init to close its copy of kept fd index (-1: all of them). */
void proc_release_kept(struct proc *p, int index);
char *proc_ring_data(struct proc *p, int i);
/* Read each output fd only while no reader holds it back. */
void procs_update_flow(struct proc *p);

/* procs_attach.c */
/* A start's stream (out, from spawn): from the beginning of the ring. */
int attach_start(struct proc *p, struct output *out, bool foreground, struct cove_err *err);
/* Send every attached client what is new; end the streams that are done. */
void attach_pump_all(struct proc *p);
/* The process is gone: end every attached stream. */
void attach_end_all(struct proc *p);
/* Whether a foreground client is RING_CAP / 2 behind on stream i. */
bool attach_holds_back(const struct proc *p, int i);
/* The terminal takes input again: raw clients' input may go on. */
void attach_input_ready_all(struct proc *p);
/* Stdin requests: queued (out may be NULL) in order, written as the fd
 * takes them (procs_on_stdin_writable, p's in_ev), answered when in. */
int queue_stdin(struct proc *p, struct output *out, const void *data, size_t n, bool eof, struct cove_err *err);
void procs_on_stdin_writable(evutil_socket_t fd, short what, void *arg);
/* Fail every queued one with COVE_ESTATE why. */
void stdin_fail_all(struct proc *p, const char *why);
/* The process ended or is gone: answer every waiter with it. */
void waiters_answer_all(struct proc *p);

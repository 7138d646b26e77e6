/* Processes in a sandbox: execs (exec.c), kept processes, background and
 * terminal ones (procs.c, procs_attach.c), and sessions (sessions.c).
 *
 * Every request here is parsed and checked by its front end; the engine
 * checks the state (a process that ended, a full sandbox) and answers
 * through the struct output it is given (engine/output.h). A call that
 * returns -1 has not taken its output. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "engine/output.h"

struct engine;
struct evbuffer;
struct proc;
struct proc_attach;
struct sandbox;
struct session;
struct wire_hdr;

/* ---- exec.c ---- */

struct exec_request {
	json_t *argv; /* array of strings */
	json_t *cmd;  /* as the request gave it: argv, or a shell string */
	json_t *env;  /* object of strings, or NULL */
	const char *cwd;
	const char *user;
	const unsigned char *stdin_data;
	size_t stdin_len;
	bool has_stdin;
	double timeout; /* seconds; 0 = none */
	bool stream;
	size_t max_output;
	/* Background and terminal processes (procs.c) */
	bool background; /* outlives the request: answered with its pid at once */
	const char *tag; /* a name to select it by, unique among running ones */
	bool tty;        /* a pty as stdio */
	int rows, cols;  /* its size */
	bool stdin_open; /* a stdin pipe that stays open for later input */
	bool keep_awake; /* a kept process that keeps the sandbox from an idle pause while it runs */
};

/* Run er in sb, answering into out (any struct output):
 *   streamed:  OUT_START (pid), OUT_STDOUT / OUT_STDERR as they come (cut
 *              where UTF-8 text stays whole when it can), OUT_EXIT, close;
 *   collected: OUT_EXIT with the output and pid, close.
 * A spawn that fails closes out with its error before any event; the
 * sandbox going away closes it with COVE_ESTATE. A paused out stops the
 * pipes' reading (the process blocks on them); a cancelled one kills the
 * process. */
int exec_start(struct sandbox *sb, const struct exec_request *er, struct output *out, struct cove_err *err);

/* ---- kept processes (procs.c; their clients: procs_attach.c) ---- */

/* Start a background or terminal process. out gets, once it runs: with
 * er->stream, its stream from the start as procs_attach gives it (in the
 * foreground unless er->background); else OUT_START (pid, tag) and close.
 * A spawn that fails closes out with its error. */
int procs_start(struct sandbox *sb, const struct exec_request *er, struct output *out, struct cove_err *err);
/* By pid (digits) or tag; NULL with a 404. */
struct proc *procs_find(struct sandbox *sb, const char *selector, struct cove_err *err);
/* [every process as proc_to_json], oldest first. */
json_t *procs_to_json(struct sandbox *sb);
/* pid, tag, state, exit fields: what a front end shows of a process. */
json_t *proc_to_json(const struct proc *p);
bool proc_is_tty(const struct proc *p);
bool proc_ended(const struct proc *p, int *status);
pid_t proc_pid(const struct proc *p);
/* Tell out when p has ended, or after wait seconds (> 0) if it has not:
 * OUT_EVENT (event: the struct proc, borrowed), then close. A cancel
 * drops the waiter. */
int procs_wait(struct proc *p, double wait, struct output *out, struct cove_err *err);

struct stdin_request {
	const void *data;
	size_t len;
	bool eof; /* then the end of input (a terminal's EOF character) */
};
/* Whether p takes input now: 0, or -1 with a 409. */
int proc_stdin_check(const struct proc *p, struct cove_err *err);
/* Queue bytes for p's stdin. out (may be NULL) is closed once they are in
 * the pipe, or with COVE_ESTATE when they cannot go; a cancel drops the
 * answer, not the bytes (they were sent). */
int proc_write_stdin(struct proc *p, const struct stdin_request *r, struct output *out, struct cove_err *err);

struct signal_request {
	int sig;
	bool tree; /* p and all its descendants */
};
int proc_send_signal(struct proc *p, const struct signal_request *r, struct cove_err *err);
/* A running terminal's size. */
int proc_resize(struct proc *p, int rows, int cols, struct cove_err *err);

/* ---- procs_attach.c: a kept process's output to a client, and input from one ---- */

struct attach_request {
	bool replay;     /* from the start of what the ring holds, else from now */
	bool foreground; /* the process is killed when out is cancelled, and waits for its reader */
	/* A terminal's bytes both ways (an upgraded connection): out gets
	 * OUT_BYTES of its output, nothing else (what the ring lost is skipped),
	 * and is closed once the process has ended and all is out. Input comes
	 * by proc_attach_input; input_ready(input_arg) is called when the
	 * terminal takes input again after proc_attach_input left some. */
	bool raw;
	void (*input_ready)(void *arg);
	void *input_arg;
};
/* Without raw, out gets OUT_START (pid, tag), OUT_STDOUT / OUT_STDERR (from
 * the ring, at UTF-8 boundaries at the live end), OUT_GAP when the ring
 * lost bytes before they were read, OUT_EXIT once the process ended and
 * all is out, then close; the process going away closes it with
 * COVE_ESTATE. *ret (may be NULL) is the attach, for proc_attach_input,
 * until out is closed or cancelled. */
int procs_attach(struct proc *p, const struct attach_request *r, struct output *out, struct proc_attach **ret,
		 struct cove_err *err);
/* Type the bytes of in into a raw attach's terminal: what it takes now is
 * drained from in, the rest stays there (the front end reads no more
 * meanwhile) until input_ready. What a terminal that takes no input any
 * more is given is dropped. */
void proc_attach_input(struct proc_attach *a, struct evbuffer *in);
/* The client's end of input: the terminal's EOF character, after what
 * in still holds. */
void proc_attach_input_end(struct proc_attach *a, struct evbuffer *in);

/* ---- sessions.c: persistent shells; a command in one is an exec with "session" ---- */

struct session_request {
	const char *cwd;
	const char *user;
	json_t *env; /* object of strings, or NULL */
};
/* A new session: once its shell runs, out gets OUT_EVENT (event: the
 * struct session, borrowed) and close; a spawn that fails closes it with
 * its error. */
int sessions_create(struct sandbox *sb, const struct session_request *r, struct output *out, struct cove_err *err);
json_t *session_to_json(const struct session *s);
json_t *sessions_to_json(struct sandbox *sb); /* oldest first */
int sessions_delete(struct sandbox *sb, const char *id, struct cove_err *err);
/* er (cmd, stdin, timeout, stream, max_output) in the session: out gets
 * what exec_start's would, but no pid in a collected OUT_EXIT; the session
 * ending closes it with COVE_ESTATE. A cancel interrupts a running command;
 * a queued one still runs. */
int sessions_exec(struct sandbox *sb, const struct exec_request *er, const char *session, struct output *out,
		  struct cove_err *err);

/* ---- inside the engine ---- */

/* Encode er (argv, environment, user, cwd) into a WIRE_SPAWN with h's seq,
 * flags, value and pid, and send it with fds. */
int exec_send_spawn(struct sandbox *sb, struct wire_hdr *h, const struct exec_request *er, const int *fds, int nfds,
		    struct cove_err *err);
/* From the init connection (sandboxes.c). */
void exec_on_spawned(struct sandbox *sb, uint32_t seq, pid_t pid);
void exec_on_spawn_failed(struct sandbox *sb, uint32_t seq, int stage, int errnum);
void exec_on_exited(struct sandbox *sb, pid_t pid, int status);
/* The sandbox is going away: fail and free all its execs. */
void exec_abort_all(struct sandbox *sb, const char *why);
/* True if the message was about a kept process. */
bool procs_on_spawned(struct sandbox *sb, uint32_t seq, pid_t pid, int fd);
bool procs_on_spawn_failed(struct sandbox *sb, uint32_t seq, int stage, int errnum);
bool procs_on_exited(struct sandbox *sb, pid_t pid, int status);
void procs_on_kept(struct sandbox *sb, const struct wire_hdr *h, int *fds, int nfds);
/* Ask a re-attached init for the kept processes of the previous coved. */
void procs_reattach(struct sandbox *sb);
/* At start, once every row is loaded: run the loop until the re-attached
 * running sandboxes' inits have listed their kept processes (at most 2 s),
 * so that the first request served finds them (a paused one's init is
 * frozen: it lists them once thawed). */
void procs_wait_listed(struct engine *d);
/* The sandbox stopped or is going away: end every stream, free all. */
void procs_abort_all(struct sandbox *sb);
/* Whether a running kept process keeps sb awake: a client attached to it
 * (a terminal, a stream), or started with keep_awake (idle.c). */
bool procs_keep_awake(const struct sandbox *sb);
/* Whether a session runs or has queued a command. */
bool sessions_busy(const struct sandbox *sb);

/* For sessions.c: a kept process whose start is answered into out (may be
 * NULL); meta is merged into its description (which a restarted coved
 * reads back). */
int proc_spawn_kept(struct sandbox *sb, const struct exec_request *er, json_t *meta, struct output *out,
		    struct proc **ret, struct cove_err *err);
/* Append stream's output from *pos (at most max bytes) to to, moving *pos;
 * returns how many bytes the ring had already dropped past *pos. */
uint64_t proc_read_output(struct proc *p, int stream, uint64_t *pos, struct evbuffer *to, size_t max);
uint64_t proc_output_end(struct proc *p, int stream);      /* bytes written so far */
void proc_signal(struct proc *p, int sig, uint32_t flags); /* WIRE_FLAG_* */
json_t *proc_meta(const struct proc *p);
void proc_set_session(struct proc *p, struct session *s);
/* Read the output again if a reader that held it back has caught up. */
void proc_update_flow(struct proc *p);
/* From procs.c: new output (or the end) of the session's shell; the shell
 * is gone (its proc is being freed); a kept shell came back after a restart. */
void sessions_on_output(struct session *s);
void sessions_on_gone(struct session *s);
void sessions_on_kept(struct sandbox *sb, struct proc *p);
/* How far the session has read its shell's stream (0 stdout, 1 stderr). */
uint64_t sessions_read_position(const struct session *s, int stream);

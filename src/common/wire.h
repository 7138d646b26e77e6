/* The protocol between coved and cove-init: one SOCK_SEQPACKET connection per
 * sandbox, each message one packet: a fixed header and an optional payload,
 * with file descriptors (a spawned process's stdio) riding as SCM_RIGHTS.
 *
 *   coved -> init   WIRE_SPAWN    payload: spawn request; fds: stdin?, stdout, stderr
 *   init  -> coved  WIRE_SPAWNED  pid
 *   init  -> coved  WIRE_SPAWN_FAILED  value = errno, pid = stage (enum wire_stage)
 *   coved -> init   WIRE_SIGNAL   pid, value = signal; WIRE_FLAG_GROUP kills the group
 *   init  -> coved  WIRE_EXITED   pid, value = wait status
 *   coved -> init   WIRE_PING     -> WIRE_PONG (value = number of live spawned processes)
 *   coved -> init   WIRE_OPEN     payload: path request; value = enum wire_open_kind
 *   init  -> coved  WIRE_OPENED   fd: the open file; WIRE_FLAG_CREATED if it was made
 *   init  -> coved  WIRE_OPEN_FAILED  value = errno
 *   coved -> init   WIRE_FSOP     payload: path request; value = enum wire_fsop
 *   init  -> coved  WIRE_FSOP_DONE  value = 0 or errno; pid = 1 if something changed
 *
 * Background processes outlive coved: a WIRE_SPAWN with WIRE_FLAG_KEEP
 * carries, after the child's stdio, value more fds (coved's own ends of the
 * pipes, and its output ring) that init holds for as long as the process is
 * kept, so that the pipes never break and a restarted coved takes them back:
 *   coved -> init   WIRE_LIST     -> one WIRE_KEPT per kept process, then WIRE_LIST_END
 *   init  -> coved  WIRE_KEPT     pid; fds: the kept ones; WIRE_FLAG_EXITED with
 *                                 value = wait status once it has ended
 *   coved -> init   WIRE_RELEASE  pid; value = index of the kept fd to close,
 *                                 or -1: close all and forget the process
 * A WIRE_SPAWN with WIRE_FLAG_TTY gives the child a new pty as its stdio
 * (only stdout and stderr are passed, and ignored); the WIRE_SPAWNED reply
 * carries the pty's master, of which init keeps a copy after the others.
 *
 * Paths in WIRE_OPEN and WIRE_FSOP are resolved by init inside the
 * sandbox's root (openat2 RESOLVE_IN_ROOT), as the request's user.
 *
 * The encoder and decoder are pure and bounds-checked: init trusts nothing
 * about the packet beyond what the decoder validated. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define WIRE_MAX_PACKET (256 * 1024)
#define WIRE_MAX_ARGS 4096
#define WIRE_MAX_FDS 8

enum wire_type {
	WIRE_SPAWN = 1,
	WIRE_SPAWNED,
	WIRE_SPAWN_FAILED,
	WIRE_SIGNAL,
	WIRE_EXITED,
	WIRE_PING,
	WIRE_PONG,
	WIRE_OPEN,
	WIRE_OPENED,
	WIRE_OPEN_FAILED,
	WIRE_FSOP,
	WIRE_FSOP_DONE,
	WIRE_LIST,
	WIRE_KEPT,
	WIRE_LIST_END,
	WIRE_RELEASE,
	WIRE_TYPE_LAST = WIRE_RELEASE,
};

enum wire_flags {
	WIRE_FLAG_STDIN = 1 << 0,     /* the first fd is stdin; else stdin is /dev/null */
	WIRE_FLAG_GROUP = 1 << 1,     /* signal the process group */
	WIRE_FLAG_TREE = 1 << 2,      /* signal every descendant, the group, and the process */
	WIRE_FLAG_MODE = 1 << 3,      /* WIRE_OPEN: apply mode also to an existing file */
	WIRE_FLAG_PARENTS = 1 << 4,   /* WIRE_OPEN write: make missing parent directories */
	WIRE_FLAG_RECURSIVE = 1 << 5, /* WIRE_FSOP remove: directories with their contents */
	WIRE_FLAG_OVERWRITE = 1 << 6, /* WIRE_FSOP rename: replace an existing target */
	WIRE_FLAG_CREATED = 1 << 7,   /* WIRE_OPENED: the file did not exist before */
	WIRE_FLAG_KEEP = 1 << 8,      /* WIRE_SPAWN: hold the trailing value fds (see above) */
	WIRE_FLAG_TTY = 1 << 9,       /* WIRE_SPAWN: stdio is a new pty */
	WIRE_FLAG_EXITED = 1 << 10,   /* WIRE_KEPT: the process has ended */
	WIRE_FLAG_CHILDREN = 1 << 11, /* WIRE_SIGNAL: the process's descendants only */
};

enum wire_open_kind {
	WIRE_OPEN_READ = 1, /* a regular file or a directory, for reading */
	WIRE_OPEN_WRITE,    /* a regular file, created or truncated */
	WIRE_OPEN_STAT,     /* O_PATH, not following a trailing symlink */
};

enum wire_fsop { WIRE_FS_REMOVE = 1, WIRE_FS_MKDIR, WIRE_FS_RENAME };

enum wire_stage { WIRE_STAGE_FORK = 1, WIRE_STAGE_USER, WIRE_STAGE_CWD, WIRE_STAGE_EXEC, WIRE_STAGE_STDIO };

struct wire_hdr {
	uint32_t type;
	uint32_t seq;
	int32_t pid;
	int32_t value;
	uint32_t flags;
	uint32_t payload_len;
};

/* A spawn request. Strings point into the decoded packet (borrowed). */
struct wire_spawn {
	const char *user; /* name or decimal uid; "" = root */
	const char *cwd;  /* "" = the user's home */
	uint32_t argc, envc;
	const char *argv[WIRE_MAX_ARGS + 1]; /* NULL-terminated */
	const char *envp[WIRE_MAX_ARGS + 1]; /* NULL-terminated */
};

/* A WIRE_OPEN or WIRE_FSOP request. Strings point into the decoded packet. */
struct wire_path {
	uint32_t mode;     /* permission bits for what is created */
	const char *path;  /* absolute, inside the sandbox */
	const char *path2; /* rename's target, else "" */
	const char *user;  /* name or decimal uid; "" = root */
};

/* Encode hdr (type set by the caller, payload_len filled in) and p into buf.
 * Returns the packet length, or -E2BIG / -EINVAL. */
long wire_encode_path(char *buf, size_t cap, struct wire_hdr *hdr, const struct wire_path *p);
/* Decode a path payload. 0 or -EINVAL. */
int wire_decode_path(const char *payload, size_t len, struct wire_path *ret);

/* Encode hdr (payload_len is filled in) and spawn into buf. Returns the
 * packet length, or -E2BIG / -EINVAL. */
long wire_encode_spawn(char *buf, size_t cap, struct wire_hdr *hdr, const char *user, const char *cwd,
		       const char *const *argv, const char *const *envp);
/* Decode a spawn payload (the bytes after the header). 0 or -EINVAL. */
int wire_decode_spawn(const char *payload, size_t len, struct wire_spawn *ret);
/* Validate a received packet's header against its length. 0 or -EINVAL. */
int wire_check_hdr(const void *pkt, size_t len, struct wire_hdr *ret);

const char *wire_stage_name(int stage);

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
 * A WIRE_OPEN_WRITE answered with WIRE_FLAG_REPLACE gave an unnamed file
 * (O_TMPFILE) in the target's directory: once the body is in it, a
 * WIRE_FS_COMMIT of the same path, carrying that fd, renames it over the
 * target; closing it instead leaves the target as it was. Over an existing
 * name it goes by a passing name (WIRE_PASSING_PREFIX and random letters)
 * for the instant between its link and the rename.
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
 * A WIRE_OPEN_TAR_LIST carries one fd, the file of the paths it lists.
 * A WIRE_OPEN_READ of a directory, a WIRE_OPEN_TAR(_LIST) and a WIRE_OPEN_EXTRACT
 * answer with a socket (WIRE_OPENED with WIRE_FLAG_ENTRIES) that carries an
 * entry stream: struct wire_entry headers, each followed by its path, its
 * link target and, in a tar stream, a file's bytes; then WIRE_ENTRY_END.
 * init's child writes a listing or a tree on it (pid of the WIRE_OPEN =
 * depth of a listing); for an extraction coved writes the entries and the
 * child answers with one WIRE_ENTRY_END (errnum, and the entry that failed).
 *
 * Paths in WIRE_OPEN and WIRE_FSOP are resolved by init inside the
 * sandbox's root (openat2 RESOLVE_IN_ROOT), as the request's user.
 *
 * The encoder and decoder are pure and bounds-checked: init trusts nothing
 * about the packet beyond what the decoder validated. */
#pragma once
#include <stdbool.h>
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
	WIRE_FLAG_ENTRIES = 1 << 8,   /* WIRE_OPENED: the fd is an entry stream's socket */
	WIRE_FLAG_KEEP = 1 << 9,      /* WIRE_SPAWN: hold the trailing value fds (see above) */
	WIRE_FLAG_TTY = 1 << 10,      /* WIRE_SPAWN: stdio is a new pty */
	WIRE_FLAG_EXITED = 1 << 11,   /* WIRE_KEPT: the process has ended */
	WIRE_FLAG_CHILDREN = 1 << 12, /* WIRE_SIGNAL: the process's descendants only */
	WIRE_FLAG_HOME = 1 << 13,     /* WIRE_OPEN tar or extract: the user's home instead of the path */
	WIRE_FLAG_REPLACE = 1 << 14,  /* WIRE_OPENED write: an unnamed file, for WIRE_FS_COMMIT */
};

enum wire_open_kind {
	WIRE_OPEN_READ = 1, /* a regular file or a directory, for reading */
	WIRE_OPEN_WRITE,    /* a regular file, created or truncated */
	WIRE_OPEN_STAT,     /* O_PATH, not following a trailing symlink */
	WIRE_OPEN_TAR,      /* a directory's tree with file contents, as an entry stream */
	WIRE_OPEN_EXTRACT,  /* a directory (made if missing) to extract an entry stream into */
	WIRE_OPEN_PLAIN,    /* like READ, but a directory comes as its fd, not as a listing */
	WIRE_OPEN_TAR_LIST, /* like TAR, of the paths (relative to the directory, each ended
			     * by a NUL) in the file passed with the request: each entry
			     * alone, no directory's contents (a sandbox's changes) */
};

#define WIRE_PASSING_PREFIX ".cove-replace-"

enum wire_fsop { WIRE_FS_REMOVE = 1, WIRE_FS_MKDIR, WIRE_FS_RENAME, WIRE_FS_CHMOD, WIRE_FS_COMMIT };

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

/* ---- entry streams ---- */

enum wire_entry_type {
	WIRE_ENTRY_END = 1, /* the stream's last record */
	WIRE_ENTRY_FILE,
	WIRE_ENTRY_DIR,
	WIRE_ENTRY_SYMLINK,
	WIRE_ENTRY_HARDLINK, /* extraction only: link_len bytes name the entry it links to */
	WIRE_ENTRY_OTHER,    /* FIFO, socket, device: listed, never in a tar */
	WIRE_ENTRY_TYPE_LAST = WIRE_ENTRY_OTHER,
};

/* One record. Paths are relative to the stream's directory, never empty, with
 * no "", "." or ".." component (wire_entry_path_valid). */
struct wire_entry {
	uint32_t type;
	uint32_t mode;     /* permission bits, 07777 */
	uint32_t uid, gid; /* as the sandbox sees them */
	int64_t mtime;     /* unix seconds */
	uint64_t size;     /* st_size; in a tar stream, the bytes that follow (files) */
	uint32_t path_len; /* bytes of path after the header (no NUL) */
	uint32_t link_len; /* bytes of symlink or hard link target after the path */
	int32_t errnum;    /* WIRE_ENTRY_END from an extraction: 0 or what stopped it */
	uint32_t spare;
};

#define WIRE_ENTRY_MAX_PATH 4095 /* bytes of a path or a link target */

/* A received header's type and lengths are in range. 0 or -EINVAL. */
int wire_entry_check(const struct wire_entry *e);
/* path (len bytes, no NUL inside) is relative and made of real names. */
bool wire_entry_path_valid(const char *path, size_t len);
/* A tar member's name as an entry path: leading "/" and "./", "."
 * components and repeated or trailing slashes go. 0, 1 when nothing is
 * left (the archive's root: skip it), -EINVAL for a ".." component,
 * -ENAMETOOLONG when it does not fit in cap (at most WIRE_ENTRY_MAX_PATH + 1). */
int wire_entry_path_normalize(const char *name, char *out, size_t cap);

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
 *
 * The encoder and decoder are pure and bounds-checked: init trusts nothing
 * about the packet beyond what the decoder validated. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define WIRE_MAX_PACKET (256 * 1024)
#define WIRE_MAX_ARGS 4096
#define WIRE_MAX_FDS 3

enum wire_type {
	WIRE_SPAWN = 1,
	WIRE_SPAWNED,
	WIRE_SPAWN_FAILED,
	WIRE_SIGNAL,
	WIRE_EXITED,
	WIRE_PING,
	WIRE_PONG,
};

enum wire_flags {
	WIRE_FLAG_STDIN = 1 << 0, /* the first fd is stdin; else stdin is /dev/null */
	WIRE_FLAG_GROUP = 1 << 1, /* signal the process group */
	WIRE_FLAG_TREE = 1 << 2,  /* signal every descendant, the group, and the process */
};

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

/* Encode hdr (payload_len is filled in) and spawn into buf. Returns the
 * packet length, or -E2BIG / -EINVAL. */
long wire_encode_spawn(char *buf, size_t cap, struct wire_hdr *hdr, const char *user, const char *cwd,
		       const char *const *argv, const char *const *envp);
/* Decode a spawn payload (the bytes after the header). 0 or -EINVAL. */
int wire_decode_spawn(const char *payload, size_t len, struct wire_spawn *ret);
/* Validate a received packet's header against its length. 0 or -EINVAL. */
int wire_check_hdr(const void *pkt, size_t len, struct wire_hdr *ret);

const char *wire_stage_name(int stage);

/* What cove-init's parts share: the connection to coved, users, and the
 * file operations (files.c). */
#pragma once
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/passwd.h"
#include "common/wire.h"

/* Send one packet (h, and fd as SCM_RIGHTS when >= 0) to coved. 0 or -errno. */
int init_send(const struct wire_hdr *h, int fd, bool block);
/* Which connection is current: it changes when coved reconnects. */
unsigned init_connection(void);
/* In a child: become user spec (name or uid; "" = root) from the sandbox's
 * /etc/passwd and /etc/group. 0 or an errno. */
int init_become_user(const char *spec, struct passwd_entry *pw);

/* Open the directory that every Files API path is resolved in: "/", or an
 * external sandbox's workspace. Once, at start, as root: a request's user
 * need not be able to reach it by path. 0 or -errno. */
int files_set_root(const char *path);
/* A WIRE_OPEN or WIRE_FSOP packet: done in a child, which answers coved. */
/* fd: the file passed with the request, or -1 (init closes it after). */
void files_handle(const struct wire_hdr *h, const char *payload, int fd);
/* A file's replacement (replace.c): an unnamed file in dirfd (O_TMPFILE)
 * of mode, given old's owner when old is set; or -errno (ENOTSUP, EISDIR:
 * the file system has no O_TMPFILE; EPERM: the user cannot give it old's
 * owner). */
int replace_open(int dirfd, mode_t mode, const struct stat *old);
/* fd (from replace_open, written whole) renamed over base in dirfd, in one
 * step: 0 or -errno, and then nothing of it is left under any name. */
int replace_commit(int fd, int dirfd, const char *base);
/* A symlink to target made at base in dirfd, over what is there, in one step. */
int replace_symlink(const char *target, int dirfd, const char *base);
/* A child that is not a spawned process was reaped: if it was a file
 * operation's and died before answering, answer for it. */
void files_reaped(pid_t pid, int status);

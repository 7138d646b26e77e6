/* Looking up a user in a sandbox's own /etc/passwd and /etc/group. Pure
 * parsers over a buffer (cove-init is static, so glibc's NSS is not an
 * option, and the sandbox's files are the only truth anyway). */
#pragma once
#include <stddef.h>
#include <sys/types.h>

#define PASSWD_MAX_GROUPS 64

struct passwd_entry {
	char name[64];
	uid_t uid;
	gid_t gid;
	char home[256];
	char shell[256];
};

/* Find spec (a name, or a decimal uid) in passwd text. A numeric spec that
 * is not listed still resolves (uid = gid = that number, home "/", shell
 * "/bin/sh"), as docker does. 0, or -ENOENT / -EINVAL. */
int passwd_lookup(const char *text, size_t len, const char *spec, struct passwd_entry *ret);

/* Supplementary groups of user `name` from group text: fills up to max gids,
 * returns the count. */
int passwd_groups(const char *text, size_t len, const char *name, gid_t *gids, int max);

/* The sandbox's seccomp filter, built with libseccomp: an allowlist at least
 * as strict as Docker's default profile (every syscall not listed fails with
 * EPERM; clone3 fails with ENOSYS so that libc falls back to clone, whose
 * namespace flags are refused; foreign architectures are refused). */
#pragma once

/* Load the filter into the calling thread (inherited by children and across
 * execve). Requires no_new_privs or CAP_SYS_ADMIN. -errno. */
int seccomp_apply_sandbox_filter(void);

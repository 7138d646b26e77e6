/* The sandbox's seccomp filter, built with libseccomp: an allowlist at least
 * as strict as Docker's default profile (every syscall not listed fails with
 * EPERM; clone3 fails with ENOSYS so that libc falls back to clone, whose
 * namespace flags are refused; foreign architectures are refused). */
#pragma once

/* Load the filter into the calling thread (inherited by children and across
 * execve). Requires no_new_privs or CAP_SYS_ADMIN. -errno. */
int seccomp_apply_sandbox_filter(void);

/* The same filter compiled once to BPF (coved does this at start: building
 * it with libseccomp costs more than the rest of a sandbox's start), and
 * loaded with a single syscall. ret->filter is malloc'ed. -errno. */
struct sock_fprog;
int seccomp_compile_sandbox_filter(struct sock_fprog *ret);
int seccomp_apply_compiled(const struct sock_fprog *prog);

/* The sandbox's seccomp filter. The allowlist follows the x86_64 part of
 * moby's profiles/seccomp/default.json for a container holding Docker's
 * default capabilities (caps.h): the syscalls it allows without conditions,
 * those it allows for CAP_SYS_CHROOT (a default capability) and for
 * kernels >= 4.8, and its argument rules for clone, clone3, personality and
 * socket. A few syscalls that some Docker versions allow are left out
 * (kcmp, clock_adjtime, name_to_handle_at, io_uring), and the socket rule
 * closes a gap in Docker's (see seccomp_add_socket_rules). */
#include "sys/seccomp.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdint.h>

#include "common/cleanup.h"

/* Allowed whatever their arguments. Names of other architectures (stat64,
 * socketcall...) are kept so the table reads like Docker's; they resolve to
 * no x86_64 syscall and are skipped, as are names newer than this
 * libseccomp. Deliberately absent, so they fail with the default EPERM:
 * mount and the new mount API, unshare, setns, module and kexec loading,
 * bpf, perf_event_open, the key syscalls, userfaultfd, io_uring, kcmp,
 * handle-based opens, clock and time setting, clock_adjtime, reboot, swap,
 * acct, quotactl, syslog, iopl/ioperm, vhangup, NUMA policy and every
 * obsolete syscall (uselib, ustat, sysfs, _sysctl, ...). */
static const char *const seccomp_allowed_syscalls[] = {
	"accept",
	"accept4",
	"access",
	"adjtimex",
	"alarm",
	"arch_prctl",
	"bind",
	"brk",
	"cachestat",
	"capget",
	"capset",
	"chdir",
	"chmod",
	"chown",
	"chown32",
	"chroot",
	"clock_getres",
	"clock_getres_time64",
	"clock_gettime",
	"clock_gettime64",
	"clock_nanosleep",
	"clock_nanosleep_time64",
	"close",
	"close_range",
	"connect",
	"copy_file_range",
	"creat",
	"dup",
	"dup2",
	"dup3",
	"epoll_create",
	"epoll_create1",
	"epoll_ctl",
	"epoll_ctl_old",
	"epoll_pwait",
	"epoll_pwait2",
	"epoll_wait",
	"epoll_wait_old",
	"eventfd",
	"eventfd2",
	"execve",
	"execveat",
	"exit",
	"exit_group",
	"faccessat",
	"faccessat2",
	"fadvise64",
	"fadvise64_64",
	"fallocate",
	"fanotify_mark",
	"fchdir",
	"fchmod",
	"fchmodat",
	"fchmodat2",
	"fchown",
	"fchown32",
	"fchownat",
	"fcntl",
	"fcntl64",
	"fdatasync",
	"fgetxattr",
	"flistxattr",
	"flock",
	"fork",
	"fremovexattr",
	"fsetxattr",
	"fstat",
	"fstat64",
	"fstatat64",
	"fstatfs",
	"fstatfs64",
	"fsync",
	"ftruncate",
	"ftruncate64",
	"futex",
	"futex_requeue",
	"futex_time64",
	"futex_wait",
	"futex_waitv",
	"futex_wake",
	"futimesat",
	"getcpu",
	"getcwd",
	"getdents",
	"getdents64",
	"getegid",
	"getegid32",
	"geteuid",
	"geteuid32",
	"getgid",
	"getgid32",
	"getgroups",
	"getgroups32",
	"getitimer",
	"getpeername",
	"getpgid",
	"getpgrp",
	"getpid",
	"getppid",
	"getpriority",
	"getrandom",
	"getresgid",
	"getresgid32",
	"getresuid",
	"getresuid32",
	"getrlimit",
	"get_robust_list",
	"getrusage",
	"getsid",
	"getsockname",
	"getsockopt",
	"get_thread_area",
	"gettid",
	"gettimeofday",
	"getuid",
	"getuid32",
	"getxattr",
	"inotify_add_watch",
	"inotify_init",
	"inotify_init1",
	"inotify_rm_watch",
	"io_cancel",
	"ioctl",
	"io_destroy",
	"io_getevents",
	"io_pgetevents",
	"io_pgetevents_time64",
	"ioprio_get",
	"ioprio_set",
	"io_setup",
	"io_submit",
	"ipc",
	"kill",
	"landlock_add_rule",
	"landlock_create_ruleset",
	"landlock_restrict_self",
	"lchown",
	"lchown32",
	"lgetxattr",
	"link",
	"linkat",
	"listen",
	"listxattr",
	"llistxattr",
	"_llseek",
	"lremovexattr",
	"lseek",
	"lsetxattr",
	"lstat",
	"lstat64",
	"madvise",
	"map_shadow_stack",
	"membarrier",
	"memfd_create",
	"mincore",
	"mkdir",
	"mkdirat",
	"mknod",
	"mknodat",
	"mlock",
	"mlock2",
	"mlockall",
	"mmap",
	"mmap2",
	"modify_ldt",
	"mprotect",
	"mq_getsetattr",
	"mq_notify",
	"mq_open",
	"mq_timedreceive",
	"mq_timedreceive_time64",
	"mq_timedsend",
	"mq_timedsend_time64",
	"mq_unlink",
	"mremap",
	"msgctl",
	"msgget",
	"msgrcv",
	"msgsnd",
	"msync",
	"munlock",
	"munlockall",
	"munmap",
	"nanosleep",
	"newfstatat",
	"_newselect",
	"open",
	"openat",
	"openat2",
	"pause",
	"pidfd_getfd",
	"pidfd_open",
	"pidfd_send_signal",
	"pipe",
	"pipe2",
	"pkey_alloc",
	"pkey_free",
	"pkey_mprotect",
	"poll",
	"ppoll",
	"ppoll_time64",
	"prctl",
	"pread64",
	"preadv",
	"preadv2",
	"prlimit64",
	"process_madvise",
	"process_mrelease",
	"process_vm_readv",
	"process_vm_writev",
	"pselect6",
	"pselect6_time64",
	"ptrace",
	"pwrite64",
	"pwritev",
	"pwritev2",
	"read",
	"readahead",
	"readlink",
	"readlinkat",
	"readv",
	"recv",
	"recvfrom",
	"recvmmsg",
	"recvmmsg_time64",
	"recvmsg",
	"remap_file_pages",
	"removexattr",
	"rename",
	"renameat",
	"renameat2",
	"restart_syscall",
	"rmdir",
	"rseq",
	"rt_sigaction",
	"rt_sigpending",
	"rt_sigprocmask",
	"rt_sigqueueinfo",
	"rt_sigreturn",
	"rt_sigsuspend",
	"rt_sigtimedwait",
	"rt_sigtimedwait_time64",
	"rt_tgsigqueueinfo",
	"sched_getaffinity",
	"sched_getattr",
	"sched_getparam",
	"sched_get_priority_max",
	"sched_get_priority_min",
	"sched_getscheduler",
	"sched_rr_get_interval",
	"sched_rr_get_interval_time64",
	"sched_setaffinity",
	"sched_setattr",
	"sched_setparam",
	"sched_setscheduler",
	"sched_yield",
	"seccomp",
	"select",
	"semctl",
	"semget",
	"semop",
	"semtimedop",
	"semtimedop_time64",
	"send",
	"sendfile",
	"sendfile64",
	"sendmmsg",
	"sendmsg",
	"sendto",
	"setfsgid",
	"setfsgid32",
	"setfsuid",
	"setfsuid32",
	"setgid",
	"setgid32",
	"setgroups",
	"setgroups32",
	"setitimer",
	"setpgid",
	"setpriority",
	"setregid",
	"setregid32",
	"setresgid",
	"setresgid32",
	"setresuid",
	"setresuid32",
	"setreuid",
	"setreuid32",
	"setrlimit",
	"set_robust_list",
	"setsid",
	"setsockopt",
	"set_thread_area",
	"set_tid_address",
	"setuid",
	"setuid32",
	"setxattr",
	"shmat",
	"shmctl",
	"shmdt",
	"shmget",
	"shutdown",
	"sigaltstack",
	"signalfd",
	"signalfd4",
	"sigprocmask",
	"sigreturn",
	"socketcall",
	"socketpair",
	"splice",
	"stat",
	"stat64",
	"statfs",
	"statfs64",
	"statx",
	"symlink",
	"symlinkat",
	"sync",
	"sync_file_range",
	"syncfs",
	"sysinfo",
	"tee",
	"tgkill",
	"time",
	"timer_create",
	"timer_delete",
	"timer_getoverrun",
	"timer_gettime",
	"timer_gettime64",
	"timer_settime",
	"timer_settime64",
	"timerfd_create",
	"timerfd_gettime",
	"timerfd_gettime64",
	"timerfd_settime",
	"timerfd_settime64",
	"times",
	"tkill",
	"truncate",
	"truncate64",
	"ugetrlimit",
	"umask",
	"uname",
	"unlink",
	"unlinkat",
	"utime",
	"utimensat",
	"utimensat_time64",
	"utimes",
	"vfork",
	"vmsplice",
	"wait4",
	"waitid",
	"waitpid",
	"write",
	"writev",
};

/* The personality values Docker allows: PER_LINUX, PER_LINUX32,
 * UNAME26, UNAME26|PER_LINUX32, and 0xffffffff, which only queries. */
static const uint64_t seccomp_allowed_personalities[] = {
	0x0, 0x0008, 0x20000, 0x20008, 0xffffffff,
};

#define SECCOMP_CLONE_NS_FLAGS                                                                                \
	((uint64_t)(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | \
		    CLONE_NEWCGROUP))

/* Docker refuses AF_VSOCK (40): it reaches the host's hypervisor sockets. */
#define SECCOMP_AF_VSOCK 40
/* Address families are small; the kernel refuses any >= AF_MAX (46 today).
 * The bound leaves room for families added later. */
#define SECCOMP_AF_LIMIT 64

static void seccomp_ctx_releasep(scmp_filter_ctx *ctx)
{
	if (*ctx)
		seccomp_release(*ctx);
}

static int seccomp_add_allowlist(scmp_filter_ctx ctx)
{
	for (size_t i = 0; i < ARRAY_SIZE(seccomp_allowed_syscalls); i++) {
		int nr = seccomp_syscall_resolve_name(seccomp_allowed_syscalls[i]);
		int r;

		/* __NR_SCMP_ERROR: unknown to this libseccomp; other negative
		 * numbers are pseudo-syscalls of other architectures. */
		if (nr < 0)
			continue;
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
		if (r < 0)
			return r;
	}
	return 0;
}

/* clone is allowed only without namespace flags, so the sandbox cannot make
 * new namespaces (the kernel lets an unprivileged user make a user namespace,
 * and inside it every other kind). clone3 passes its flags in memory, which
 * seccomp cannot read: it fails with ENOSYS so that libc falls back to clone. */
static int seccomp_add_clone_rules(scmp_filter_ctx ctx)
{
	int r;

	r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
			     SCMP_A0(SCMP_CMP_MASKED_EQ, SECCOMP_CLONE_NS_FLAGS, 0));
	if (r < 0)
		return r;
	return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
}

/* Other personalities turn off address space randomisation
 * (ADDR_NO_RANDOMIZE) or map page zero (MMAP_PAGE_ZERO). */
static int seccomp_add_personality_rules(scmp_filter_ctx ctx)
{
	for (size_t i = 0; i < ARRAY_SIZE(seccomp_allowed_personalities); i++) {
		int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
					 SCMP_A0(SCMP_CMP_EQ, seccomp_allowed_personalities[i], 0));
		if (r < 0)
			return r;
	}
	return 0;
}

/* Docker allows socket when arg0 != AF_VSOCK, a 64-bit comparison; the kernel
 * reads the family as an int, so a raw syscall with junk in the upper half
 * of the register gets AF_VSOCK past that rule. Here the upper half must be
 * zero: families below AF_VSOCK pass in one comparison, those above it one
 * by one (libseccomp refuses two comparisons on one argument in one rule). */
static int seccomp_add_socket_rules(scmp_filter_ctx ctx)
{
	int r;

	r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_LT, SECCOMP_AF_VSOCK, 0));
	if (r < 0)
		return r;
	for (uint64_t af = SECCOMP_AF_VSOCK + 1; af < SECCOMP_AF_LIMIT; af++) {
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, af, 0));
		if (r < 0)
			return r;
	}
	return 0;
}

static int seccomp_build_ctx(scmp_filter_ctx *ret)
{
	__attribute__((cleanup(seccomp_ctx_releasep))) scmp_filter_ctx ctx = NULL;
	int r;

	ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx)
		return -ENOMEM;

	/* Only the native architecture is in the filter. A syscall made
	 * through another ABI (int 0x80 for i386, or with the x32 bit) has
	 * numbers that mean something else, so it is refused outright. */
	r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(EPERM));
	if (r < 0)
		return r;
	/* A binary tree instead of a linear scan over ~330 syscalls; this only
	 * changes speed, so an older libseccomp without it is fine. */
	(void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	/* libseccomp's default SCMP_FLTATR_CTL_NNP stays on: loading sets
	 * no_new_privs even if the caller has not yet, so a setuid binary can
	 * never run with this filter and more privilege than its parent. */

	r = seccomp_add_allowlist(ctx);
	if (r < 0)
		return r;
	r = seccomp_add_clone_rules(ctx);
	if (r < 0)
		return r;
	r = seccomp_add_personality_rules(ctx);
	if (r < 0)
		return r;
	r = seccomp_add_socket_rules(ctx);
	if (r < 0)
		return r;
	*ret = ctx;
	ctx = NULL;
	return 0;
}

int seccomp_apply_sandbox_filter(void)
{
	__attribute__((cleanup(seccomp_ctx_releasep))) scmp_filter_ctx ctx = NULL;
	int r = seccomp_build_ctx(&ctx);
	return r < 0 ? r : seccomp_load(ctx);
}

int seccomp_compile_sandbox_filter(struct sock_fprog *ret)
{
	__attribute__((cleanup(seccomp_ctx_releasep))) scmp_filter_ctx ctx = NULL;
	int r = seccomp_build_ctx(&ctx);
	if (r < 0)
		return r;
	/* libseccomp 2.5 exports BPF only to a file descriptor. */
	int fd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	r = seccomp_export_bpf(ctx, fd);
	off_t len = r < 0 ? -1 : lseek(fd, 0, SEEK_END);
	struct sock_filter *prog = len > 0 ? malloc(len) : NULL;
	if (r == 0 && (!prog || len % sizeof(*prog) || pread(fd, prog, len, 0) != len))
		r = -EIO;
	close(fd);
	if (r < 0) {
		free(prog);
		return r;
	}
	ret->len = len / sizeof(*prog);
	ret->filter = prog;
	return 0;
}

int seccomp_apply_compiled(const struct sock_fprog *prog)
{
	/* no_new_privs is set by caps_drop_to_sandbox_set before this. */
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) < 0)
		return -errno;
	return 0;
}

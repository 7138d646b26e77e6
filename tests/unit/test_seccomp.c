/* Unit test of the sandbox's seccomp filter and capability set. Each probe
 * runs in a forked child that first locks itself down; the child reports an
 * errno or a status through its exit code, or text through a pipe, and only
 * the parent CHECKs.
 *
 * Denied syscalls are called with arguments that fail harmlessly (ENOENT,
 * EBADF, EFAULT, EINVAL...) should they ever reach the kernel: the probes
 * also run with the filter alone, where a root child still holds every
 * capability, so there EPERM can only come from the filter. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/keyctl.h>
#include <linux/sched.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys/caps.h"
#include "sys/seccomp.h"
#include "tap.h"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

enum sandbox_mode { SANDBOX_FILTER_ONLY, SANDBOX_FULL };

/* Exit codes of a child whose lockdown failed, or that died of a signal. */
#define RC_CAPS_FAILED 250
#define RC_SECCOMP_FAILED 251
#define RC_SIGNALED 256

#define CAP_BIT(cap) (UINT64_C(1) << (cap))
static const uint64_t docker_caps = CAP_BIT(CAP_CHOWN) | CAP_BIT(CAP_DAC_OVERRIDE) | CAP_BIT(CAP_FSETID) |
				    CAP_BIT(CAP_FOWNER) | CAP_BIT(CAP_MKNOD) | CAP_BIT(CAP_NET_RAW) |
				    CAP_BIT(CAP_SETGID) | CAP_BIT(CAP_SETUID) | CAP_BIT(CAP_SETFCAP) |
				    CAP_BIT(CAP_SETPCAP) | CAP_BIT(CAP_NET_BIND_SERVICE) | CAP_BIT(CAP_SYS_CHROOT) |
				    CAP_BIT(CAP_KILL) | CAP_BIT(CAP_AUDIT_WRITE);

struct denied_call {
	const char *name;
	long nr;
	long a[6];
};

#define NOPATH ((long)"/cove-test-no-such-path")

/* Syscalls the filter must refuse with EPERM, each with harmless arguments. */
static const struct denied_call denied_calls[] = {
	{ "mount", SYS_mount, { 0, NOPATH, 0, MS_REMOUNT, 0 } },
	{ "umount2", SYS_umount2, { NOPATH, 0 } },
	{ "pivot_root", SYS_pivot_root, { NOPATH, NOPATH } },
	{ "unshare(CLONE_NEWUSER)", SYS_unshare, { CLONE_NEWUSER } },
	{ "unshare(CLONE_NEWNS)", SYS_unshare, { CLONE_NEWNS } },
	{ "setns", SYS_setns, { -1, 0 } },
	{ "init_module", SYS_init_module, { 0, 0, (long)"" } },
	{ "finit_module", SYS_finit_module, { -1, (long)"", 0 } },
	{ "delete_module", SYS_delete_module, { (long)"cove_no_such_module", O_NONBLOCK } },
	{ "kexec_load", SYS_kexec_load, { 0, 0, 0, 0x7ead0000 } },
	{ "kexec_file_load", SYS_kexec_file_load, { -1, -1, 0, 0, 0x7ead0000 } },
	{ "bpf", SYS_bpf, { -1, 0, 0 } },
	{ "keyctl", SYS_keyctl, { KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0 } },
	{ "add_key", SYS_add_key, { 0, 0, 0, 0, 0 } },
	{ "request_key", SYS_request_key, { 0, 0, 0, 0 } },
	{ "perf_event_open", SYS_perf_event_open, { 0, 0, -1, -1, 0 } },
	{ "open_by_handle_at", SYS_open_by_handle_at, { -1, 0, 0 } },
	{ "name_to_handle_at", SYS_name_to_handle_at, { -1, 0, 0, 0, 0 } },
	{ "reboot", SYS_reboot, { 0, 0, 0, 0 } },
	{ "swapon", SYS_swapon, { 0, 0 } },
	{ "swapoff", SYS_swapoff, { 0 } },
	{ "acct", SYS_acct, { NOPATH } },
	{ "settimeofday", SYS_settimeofday, { 1, 0 } },
	{ "clock_settime", SYS_clock_settime, { -1, 0 } },
	{ "clock_adjtime", SYS_clock_adjtime, { -1, 0 } },
	{ "quotactl", SYS_quotactl, { 0, 0, 0, 0 } },
	{ "userfaultfd", SYS_userfaultfd, { 0x7ead0000 } },
	{ "fsopen", SYS_fsopen, { 0, 0 } },
	{ "fsconfig", SYS_fsconfig, { -1, 0, 0, 0, 0 } },
	{ "fsmount", SYS_fsmount, { -1, 0, 0 } },
	{ "fspick", SYS_fspick, { -1, 0, 0 } },
	{ "move_mount", SYS_move_mount, { -1, 0, -1, 0, 0 } },
	{ "open_tree", SYS_open_tree, { -1, 0, 0 } },
	{ "mount_setattr", SYS_mount_setattr, { -1, 0, 0, 0, 0 } },
	{ "iopl", SYS_iopl, { 4 } },
	{ "ioperm", SYS_ioperm, { 0xffffffff, 1, 0 } },
	{ "kcmp", SYS_kcmp, { 0x3fffffff, 0x3fffffff, 0, 0, 0 } },
	{ "io_uring_setup", SYS_io_uring_setup, { 0, 0 } },
	{ "io_uring_enter", SYS_io_uring_enter, { -1, 0, 0, 0, 0, 0 } },
	{ "io_uring_register", SYS_io_uring_register, { -1, 0, 0, 0 } },
	{ "syslog", SYS_syslog, { 10, 0, 0 } },
	{ "lookup_dcookie", SYS_lookup_dcookie, { 0, 0, 0 } },
	{ "create_module", SYS_create_module, { 0, 0 } },
	{ "nfsservctl", SYS_nfsservctl, { 0, 0, 0 } },
	{ "uselib", SYS_uselib, { 0 } },
	{ "ustat", SYS_ustat, { 0, 0 } },
	{ "sysfs", SYS_sysfs, { 0, 0, 0 } },
	{ "_sysctl", SYS__sysctl, { 0 } },
	{ "get_kernel_syms", SYS_get_kernel_syms, { 0 } },
	{ "query_module", SYS_query_module, { 0, 0, 0, 0, 0 } },
	{ "set_mempolicy", SYS_set_mempolicy, { 0, 0, 0 } },
	{ "personality(ADDR_NO_RANDOMIZE)", SYS_personality, { ADDR_NO_RANDOMIZE } },
	{ "socket(AF_VSOCK)", SYS_socket, { AF_VSOCK, SOCK_STREAM, 0 } },
	/* The kernel reads the family as an int: junk in the upper half of the
	 * register must not turn into AF_VSOCK past the filter. */
	{ "socket(AF_VSOCK | 1 << 32)", SYS_socket, { (long)(1UL << 32 | AF_VSOCK), SOCK_STREAM, 0 } },
};

/* Inputs and output of the probe running in a child, set before fork. */
static const struct denied_call *probe_call;
static const char *probe_argv[4];
static int probe_out_fd = -1;

static int probe_denied_call(void)
{
	const struct denied_call *c = probe_call;
	long r = syscall(c->nr, c->a[0], c->a[1], c->a[2], c->a[3], c->a[4], c->a[5]);

	return r < 0 ? errno : 0;
}

static int probe_setup(void)
{
	/* Again, after sandbox_run's lockdown: in full mode there is nothing
	 * left to drop, and with the filter alone the caps calls must pass it. */
	if (caps_drop_to_sandbox_set() < 0)
		return 1;
	if (seccomp_apply_sandbox_filter() < 0)
		return 2;
	return 0;
}

static int probe_getpid(void)
{
	long pid = syscall(SYS_getpid);
	return pid > 0 ? 0 : errno;
}

static int probe_fork(void)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return errno;
	if (pid == 0)
		_exit(7);
	if (waitpid(pid, &status, 0) < 0)
		return errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 7 ? 0 : 1;
}

static int thread_marker;

static void *thread_main(void *arg)
{
	return arg;
}

/* glibc creates threads with clone3 and falls back to clone on ENOSYS. */
static int probe_thread(void)
{
	pthread_t t;
	void *ret = NULL;
	int r = pthread_create(&t, NULL, thread_main, &thread_marker);

	if (r != 0)
		return r;
	r = pthread_join(t, &ret);
	if (r != 0)
		return r;
	return ret == &thread_marker ? 0 : 1;
}

/* A successful clone must not let the new child run the rest of the probe. */
static int reap_clone(long r)
{
	if (r == 0)
		_exit(0);
	if (r < 0)
		return errno;
	(void)waitpid((pid_t)r, NULL, __WALL);
	return 0;
}

static int probe_clone_newuser(void)
{
	return reap_clone(syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0));
}

static int probe_clone_newnet(void)
{
	return reap_clone(syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0));
}

static int probe_clone3(void)
{
	struct clone_args args = { .exit_signal = SIGCHLD };
	return reap_clone(syscall(SYS_clone3, &args, sizeof(args)));
}

static int probe_unix_socket(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno;
	(void)close(fd);
	return 0;
}

static int probe_personality_query(void)
{
	return personality(0xffffffff) < 0 ? errno : 0;
}

/* Allowed: ESRCH shows the call reached the kernel. */
static int probe_ptrace(void)
{
	long r = syscall(SYS_ptrace, PTRACE_ATTACH, 0x3fffffff, 0, 0);
	return r < 0 ? errno : 0;
}

#ifdef __x86_64__
/* getpid through the i386 ABI (number 20): the filter knows only x86_64. */
static int probe_i386_getpid(void)
{
	long r;

	/* A kernel without the i386 ABI answers with SIGSEGV: the default
	 * action, not a sanitizer's handler (which would report a crash). */
	signal(SIGSEGV, SIG_DFL);
	__asm__ volatile("int $0x80" : "=a"(r) : "a"(20L) : "memory");
	return r < 0 ? (int)-r : 0;
}

/* Whether the kernel takes the i386 ABI at all: one built without IA32
 * emulation (or booted with ia32_emulation=0) answers int 0x80 with
 * SIGSEGV, filter or not, which refuses the call as surely as EPERM. */
static bool kernel_has_i386(void)
{
	int status = 0;
	pid_t pid = fork();

	if (pid == 0)
		_exit(probe_i386_getpid() == 0 ? 0 : 1);
	if (pid < 0 || waitpid(pid, &status, 0) < 0)
		return true;
	return !(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
}
#endif

static int probe_status(void)
{
	char buf[4096];
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		if (write(probe_out_fd, buf, (size_t)n) != n)
			return EIO;
	return n < 0 ? errno : 0;
}

static int probe_exec(void)
{
	if (dup2(probe_out_fd, STDOUT_FILENO) < 0)
		return errno;
	execv(probe_argv[0], (char *const *)probe_argv);
	return 127;
}

/* Fork, lock the child down as mode says, run probe there and return its
 * exit code (RC_SIGNALED + signal if it was killed). What the probe writes
 * to probe_out_fd is stored in out, NUL-terminated and cut to fit. The child
 * leaves only through _exit, so the parent's stdio buffers and atexit
 * handlers never run twice. */
static int sandbox_run(enum sandbox_mode mode, int (*probe)(void), char *out, size_t out_size)
{
	int pipefd[2], status;
	size_t len = 0;
	char sink[512];
	ssize_t n;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		(void)close(pipefd[0]);
		probe_out_fd = pipefd[1];
		if (mode == SANDBOX_FULL && caps_drop_to_sandbox_set() < 0)
			_exit(RC_CAPS_FAILED);
		if (seccomp_apply_sandbox_filter() < 0)
			_exit(RC_SECCOMP_FAILED);
		_exit(probe());
	}
	(void)close(pipefd[1]);
	/* Read to EOF, dropping what does not fit, so the child never blocks
	 * on a full pipe while we wait for it. */
	while ((n = len + 1 < out_size ? read(pipefd[0], out + len, out_size - 1 - len)
				       : read(pipefd[0], sink, sizeof(sink))) > 0)
		if (len + 1 < out_size)
			len += (size_t)n;
	out[len] = '\0';
	(void)close(pipefd[0]);
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	if (WIFSIGNALED(status))
		return RC_SIGNALED + WTERMSIG(status);
	return WEXITSTATUS(status);
}

static int run(enum sandbox_mode mode, int (*probe)(void))
{
	char out[64];
	return sandbox_run(mode, probe, out, sizeof(out));
}

static uint64_t status_hex(const char *status, const char *key)
{
	const char *p = strstr(status, key);
	return p ? strtoull(p + strlen(key), NULL, 16) : UINT64_MAX;
}

static void check_denied(enum sandbox_mode mode, const char *label)
{
	for (size_t i = 0; i < sizeof(denied_calls) / sizeof(denied_calls[0]); i++) {
		int rc;

		probe_call = &denied_calls[i];
		rc = run(mode, probe_denied_call);
		CHECK(rc == EPERM, "%s: %s fails with EPERM (got %d)", label, denied_calls[i].name, rc);
	}
}

static void check_status(void)
{
	char status[8192];
	int rc = sandbox_run(SANDBOX_FULL, probe_status, status, sizeof(status));
	uint64_t bnd = status_hex(status, "\nCapBnd:\t");
	uint64_t eff = status_hex(status, "\nCapEff:\t");

	CHECK(rc == 0, "full: /proc/self/status readable (got %d)", rc);
	CHECK(strstr(status, "\nNoNewPrivs:\t1\n") != NULL, "full: NoNewPrivs is 1");
	CHECK(strstr(status, "\nSeccomp:\t2\n") != NULL, "full: Seccomp is 2 (filter)");
	CHECK(!(bnd & CAP_BIT(CAP_SYS_ADMIN)), "full: CapBnd lacks CAP_SYS_ADMIN (%016llx)", (unsigned long long)bnd);
	CHECK((bnd & ~docker_caps) == 0, "full: CapBnd within Docker's default set");
	CHECK((eff & ~docker_caps) == 0, "full: CapEff within Docker's default set");
	CHECK(status_hex(status, "\nCapPrm:\t") == eff, "full: CapPrm equals CapEff");
	CHECK(status_hex(status, "\nCapInh:\t") == 0, "full: CapInh is empty");
	CHECK(status_hex(status, "\nCapAmb:\t") == 0, "full: CapAmb is empty");
	if (geteuid() == 0)
		CHECK(eff & CAP_BIT(CAP_CHOWN), "full: CapEff keeps CAP_CHOWN as root");
	else
		SKIP("full: CapEff keeps CAP_CHOWN (not root)");
}

static void check_exec(const char *shell, const char *script)
{
	char out[256];
	int rc;

	if (access(shell, X_OK) < 0) {
		SKIP("full: %s not found", shell);
		return;
	}
	probe_argv[0] = shell;
	probe_argv[1] = "-c";
	probe_argv[2] = script;
	probe_argv[3] = NULL;
	rc = sandbox_run(SANDBOX_FULL, probe_exec, out, sizeof(out));
	CHECK(rc == 0 && strcmp(out, "hi\n") == 0, "full: %s -c '%s' exits 0 and prints hi (rc %d)", shell, script, rc);
}

static void check_probes(enum sandbox_mode mode, const char *label)
{
	int rc;

	rc = run(mode, probe_getpid);
	CHECK(rc == 0, "%s: getpid works (got %d)", label, rc);
	rc = run(mode, probe_fork);
	CHECK(rc == 0, "%s: fork works (got %d)", label, rc);
	rc = run(mode, probe_thread);
	CHECK(rc == 0, "%s: pthread_create works (got %d)", label, rc);
	rc = run(mode, probe_unix_socket);
	CHECK(rc == 0, "%s: socket(AF_UNIX) works (got %d)", label, rc);
	rc = run(mode, probe_personality_query);
	CHECK(rc == 0, "%s: personality(0xffffffff) works (got %d)", label, rc);
	rc = run(mode, probe_ptrace);
	CHECK(rc == ESRCH, "%s: ptrace reaches the kernel (got %d)", label, rc);
	rc = run(mode, probe_clone3);
	CHECK(rc == ENOSYS, "%s: clone3 fails with ENOSYS (got %d)", label, rc);
	rc = run(mode, probe_clone_newuser);
	CHECK(rc == EPERM, "%s: clone(CLONE_NEWUSER) fails with EPERM (got %d)", label, rc);
	rc = run(mode, probe_clone_newnet);
	CHECK(rc == EPERM, "%s: clone(CLONE_NEWNET) fails with EPERM (got %d)", label, rc);
#ifdef __x86_64__
	rc = run(mode, probe_i386_getpid);
	if (kernel_has_i386())
		CHECK(rc == EPERM, "%s: i386 syscall (int 0x80) fails with EPERM (got %d)", label, rc);
	else
		CHECK(rc == RC_SIGNALED + SIGSEGV, "%s: i386 syscall (int 0x80) refused (no i386 ABI here: SIGSEGV; got %d)",
		      label, rc);
#endif
}

int main(void)
{
	int rc;

	rc = run(SANDBOX_FILTER_ONLY, probe_setup);
	CHECK(rc == 0, "filter only: filter loads (got %d)", rc);
	check_probes(SANDBOX_FILTER_ONLY, "filter only");
	check_denied(SANDBOX_FILTER_ONLY, "filter only");

	if (geteuid() != 0) {
		SKIP("full: dropping the bounding set needs root");
		return tap_done();
	}
	rc = run(SANDBOX_FULL, probe_setup);
	CHECK(rc == 0, "full: caps and filter apply, twice over (got %d)", rc);
	check_probes(SANDBOX_FULL, "full");
	check_denied(SANDBOX_FULL, "full");
	check_status();
	check_exec("/bin/sh", "ls / >/dev/null && echo hi");
	check_exec("/bin/sh",
		   "ls / >/dev/null; { [ ! -e /etc/hostname ] || cat /etc/hostname; } >/dev/null && echo hi");
	check_exec("/bin/bash", "x=$(ls /) && [ -n \"$x\" ] && echo hi");
	return tap_done();
}

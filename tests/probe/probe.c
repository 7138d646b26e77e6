/* cove-probe: escape and limit checks run from inside a sandbox by the
 * integration tests (tests/integration/test_isolation.py), in the manner of
 * crun's tests/init.c. Static, libc only: it is copied into a sandbox and run
 * there, whatever the image holds.
 *
 *   cove-probe syscalls [PID...]  privileged syscalls are refused; each PID
 *                                 (a host pid) is absent and cannot be traced
 *   cove-probe status             no_new_privs, seccomp, bounding set, id maps
 *   cove-probe fs [PATH...]       kernel interfaces are read-only or masked;
 *                                 each PATH (a host path) is absent or unreadable
 *   cove-probe fds                no open file beyond stdio was inherited
 *   cove-probe forkbomb N         fork until fork fails (it must, with EAGAIN)
 *   cove-probe hog MB             allocate and touch MB megabytes, 1 MB at a time
 *   cove-probe escape [PID...]    one attempt per known container-escape class
 *                                 fails (escape.c); each PID (a host pid: coved's)
 *                                 is out of reach
 *   cove-probe swap DIR SECONDS   swap folder DIR with a symlink to / (rename
 *                                 exchange) for SECONDS: the Files API race
 *   cove-probe echo               serve fd 3 (a listening socket, as cove-init's):
 *                                 echo what each connection sends, forever
 *                                 (tests/unit/test_criu.c: a restored tree's
 *                                 sockets, handed over by criu's inherit_fd)
 *
 * Each check prints one line, "ok <name>[: <detail>]" or "FAIL <name>: <detail>";
 * the exit status is 1 if any check failed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static int failures;

void report(bool ok, const char *name, const char *fmt, ...)
{
	char detail[512] = "";
	va_list ap;
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(detail, sizeof(detail), fmt, ap);
		va_end(ap);
	}
	printf("%s %s%s%s\n", ok ? "ok" : "FAIL", name, detail[0] ? ": " : "", detail);
	fflush(stdout);
	failures += !ok;
}

const char *errname(int e)
{
	return strerrorname_np(e) ?: "?";
}

/* ---- syscalls ------------------------------------------------------------
 * Each call runs in a child of its own, so one that wrongly succeeds (a new
 * namespace, a mount) changes nothing for the next. The arguments are
 * harmless: a call the kernel let through would fail on them with another
 * error (EINVAL, ENODEV, EBADF...) or do nothing lasting; refused means
 * EPERM or EACCES (seccomp, capabilities) or ENOSYS (not there at all). */

static char scratch[] = "/tmp/cove-probe.XXXXXX"; /* an empty directory, not a mount point */

static long try_mount(void)
{
	return mount("none", scratch, "cove-probe-no-such-fs", 0, NULL);
}

static long try_umount2(void)
{
	return umount2(scratch, 0);
}

static long try_unshare_user(void)
{
	return unshare(CLONE_NEWUSER);
}

static long try_unshare_mnt(void)
{
	return unshare(CLONE_NEWNS);
}

/* The seccomp filter looks at clone's flags: a new namespace through clone
 * instead of unshare must be refused too. */
static long try_clone_user(void)
{
	long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid == 0)
		_exit(0);
	return pid;
}

static long try_clone3_user(void)
{
	uint64_t args[11] = { CLONE_NEWUSER, 0, 0, 0, SIGCHLD }; /* struct clone_args: flags .. exit_signal */
	long pid = syscall(SYS_clone3, args, sizeof(args));
	if (pid == 0)
		_exit(0);
	return pid;
}

static long try_init_module(void)
{
	return syscall(SYS_init_module, NULL, 0, "");
}

static long try_finit_module(void)
{
	return syscall(SYS_finit_module, -1, "", 0);
}

static long try_kexec_load(void)
{
	/* 0x8000 is no valid flag: EINVAL once past the capability check. */
	return syscall(SYS_kexec_load, 0, 0, NULL, 0x8000);
}

static long try_bpf(void)
{
	return syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, NULL, 0);
}

static long try_keyctl(void)
{
	return syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0);
}

static long try_add_key(void)
{
	return syscall(SYS_add_key, "user", "cove-probe", "x", 1, -2 /* process keyring */);
}

static long try_perf_event_open(void)
{
	return syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0);
}

static long try_open_by_handle_at(void)
{
	return syscall(SYS_open_by_handle_at, AT_FDCWD, NULL, O_RDONLY);
}

static long try_setns(void)
{
	int fd = open("/proc/1/ns/mnt", O_RDONLY | O_CLOEXEC);
	return fd < 0 ? fd : setns(fd, CLONE_NEWNS);
}

static long try_pivot_root(void)
{
	return syscall(SYS_pivot_root, scratch, scratch);
}

static long try_reboot(void)
{
	return syscall(SYS_reboot, 0, 0, 0, NULL); /* no magic: EINVAL once allowed */
}

static long try_swapon(void)
{
	return swapon("/nonexistent-cove-probe-swap", 0);
}

static long try_fsopen(void)
{
	return syscall(SYS_fsopen, "tmpfs", 0);
}

static long try_open_tree(void)
{
	return syscall(SYS_open_tree, AT_FDCWD, "/", 1 /* OPEN_TREE_CLONE */);
}

void expect_refused(const char *name, long (*call)(void))
{
	int st;
	pid_t pid = fork();
	if (pid < 0) {
		report(false, name, "fork: %s", errname(errno));
		return;
	}
	if (pid == 0) {
		errno = 0;
		_exit(call() < 0 ? (errno ? errno & 0xff : 255) : 0);
	}
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st))
		report(false, name, "the probe child died (status %#x)", (unsigned)st);
	else if (WEXITSTATUS(st) == 0)
		report(false, name, "succeeded");
	else if (WEXITSTATUS(st) == EPERM || WEXITSTATUS(st) == EACCES || WEXITSTATUS(st) == ENOSYS)
		report(true, name, "%s", errname(WEXITSTATUS(st)));
	else
		report(false, name, "reached the kernel: failed only on its arguments with %s",
		       errname(WEXITSTATUS(st)));
}

/* A pid from outside must not exist here, and so cannot be traced. */
static void check_foreign_pid(const char *arg)
{
	char name[64];
	pid_t pid = atoi(arg);
	snprintf(name, sizeof(name), "pid-%d-absent", pid);
	if (kill(pid, 0) == 0)
		report(false, name, "kill(%d, 0) succeeded: it exists here", pid);
	else
		report(errno == ESRCH, name, "%s", errname(errno));
	snprintf(name, sizeof(name), "ptrace-attach-%d", pid);
	if (ptrace(PTRACE_ATTACH, pid, NULL, NULL) == 0) {
		/* Wait for the attach's SIGSTOP, then detach and swallow it:
		 * a wrong success must not leave the process stopped. */
		(void)waitpid(pid, NULL, __WALL);
		(void)ptrace(PTRACE_DETACH, pid, NULL, NULL);
		report(false, name, "attached");
	} else {
		report(true, name, "%s", errname(errno));
	}
}

static void cmd_syscalls(int argc, char **argv)
{
	static const struct {
		const char *name;
		long (*call)(void);
	} calls[] = {
		{ "mount", try_mount },
		{ "umount2", try_umount2 },
		{ "unshare(CLONE_NEWUSER)", try_unshare_user },
		{ "unshare(CLONE_NEWNS)", try_unshare_mnt },
		{ "clone(CLONE_NEWUSER)", try_clone_user },
		{ "clone3(CLONE_NEWUSER)", try_clone3_user },
		{ "init_module", try_init_module },
		{ "finit_module", try_finit_module },
		{ "kexec_load", try_kexec_load },
		{ "bpf", try_bpf },
		{ "keyctl", try_keyctl },
		{ "add_key", try_add_key },
		{ "perf_event_open", try_perf_event_open },
		{ "open_by_handle_at", try_open_by_handle_at },
		{ "setns", try_setns },
		{ "pivot_root", try_pivot_root },
		{ "reboot", try_reboot },
		{ "swapon", try_swapon },
		{ "fsopen", try_fsopen },
		{ "open_tree(OPEN_TREE_CLONE)", try_open_tree },
	};
	if (!mkdtemp(scratch)) {
		report(false, "scratch-dir", "mkdtemp %s: %s", scratch, errname(errno));
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(calls); i++)
		expect_refused(calls[i].name, calls[i].call);
	(void)rmdir(scratch);
	for (int i = 0; i < argc; i++)
		check_foreign_pid(argv[i]);
}

/* ---- status -------------------------------------------------------------- */

/* The value of "<key>:\t<value>" in /proc/self/status, or NULL. */
static const char *status_field(const char *key)
{
	static char text[8192];
	static char value[256];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text) - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return NULL;
	text[n] = '\0';
	size_t klen = strlen(key);
	for (char *p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, key, klen) == 0 && p[klen] == ':') {
			p += klen + 1 + strspn(p + klen + 1, " \t");
			snprintf(value, sizeof(value), "%.*s", (int)strcspn(p, "\n"), p);
			return value;
		}
	return NULL;
}

static void check_status_equals(const char *key, const char *want)
{
	const char *v = status_field(key);
	report(v && strcmp(v, want) == 0, key, "%s", v ? v : "(missing)");
}

/* Neither the identity map of a privileged container nor any range that
 * reaches host id 0. */
static void check_id_map(const char *file)
{
	char path[64], text[4096], name[64];
	unsigned long inside, outside, count;
	bool identity = false, host_root = false;
	snprintf(path, sizeof(path), "/proc/self/%s", file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text) - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0) {
		report(false, file, "cannot read %s: %s", path, errname(errno));
		return;
	}
	text[n] = '\0';
	int ranges = 0;
	for (char *p = text; p && sscanf(p, "%lu %lu %lu", &inside, &outside, &count) == 3;
	     p = strchr(p, '\n'), p = p ? p + 1 : NULL, ranges++) {
		identity |= inside == 0 && outside == 0 && count == 4294967295ul;
		host_root |= outside == 0;
	}
	text[strcspn(text, "\n")] = '\0';
	snprintf(name, sizeof(name), "%s-not-identity", file);
	report(ranges > 0 && !identity, name, "%s", text);
	snprintf(name, sizeof(name), "%s-excludes-host-0", file);
	report(ranges > 0 && !host_root, name, "%s", text);
}

static void cmd_status(void)
{
	static const struct {
		int cap;
		const char *name;
	} denied[] = {
		{ CAP_SYS_ADMIN, "CAP_SYS_ADMIN" },   { CAP_SYS_MODULE, "CAP_SYS_MODULE" },
		{ CAP_SYS_PTRACE, "CAP_SYS_PTRACE" }, { CAP_NET_ADMIN, "CAP_NET_ADMIN" },
		{ CAP_SYS_RAWIO, "CAP_SYS_RAWIO" },   { CAP_SYS_BOOT, "CAP_SYS_BOOT" },
		{ CAP_SYS_TIME, "CAP_SYS_TIME" },     { CAP_DAC_READ_SEARCH, "CAP_DAC_READ_SEARCH" },
		{ CAP_MAC_ADMIN, "CAP_MAC_ADMIN" },   { CAP_SYSLOG, "CAP_SYSLOG" },
		{ CAP_PERFMON, "CAP_PERFMON" },       { CAP_BPF, "CAP_BPF" },
	};
	check_status_equals("NoNewPrivs", "1");
	check_status_equals("Seccomp", "2");
	check_status_equals("CapAmb", "0000000000000000");
	const char *bnd = status_field("CapBnd");
	uint64_t set = bnd ? strtoull(bnd, NULL, 16) : UINT64_MAX;
	for (size_t i = 0; i < ARRAY_SIZE(denied); i++) {
		char name[64];
		snprintf(name, sizeof(name), "CapBnd-lacks-%s", denied[i].name);
		report(!(set & (UINT64_C(1) << denied[i].cap)), name, "CapBnd %s", bnd ? bnd : "(missing)");
	}
	check_id_map("uid_map");
	check_id_map("gid_map");
	/* Run as a set-user-ID copy of itself, this tells whether exec can
	 * still raise privilege (it must not, under no_new_privs). */
	report(getuid() == geteuid() && getgid() == getegid(), "no-setid-gain", "uid %u euid %u gid %u egid %u",
	       getuid(), geteuid(), getgid(), getegid());
}

/* ---- fs ------------------------------------------------------------------ */

/* Opening for writing is the whole test: nothing is ever written. */
void check_not_writable(const char *path)
{
	char name[300];
	snprintf(name, sizeof(name), "not-writable-%s", path);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		report(false, name, "opened for writing");
	} else {
		report(true, name, "%s", errname(errno));
	}
}

static void check_cannot_create(const char *path)
{
	char name[300];
	snprintf(name, sizeof(name), "cannot-create-%s", path);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0) {
		close(fd);
		(void)unlink(path);
		report(false, name, "created");
	} else if (mkdir(path, 0700) == 0) {
		(void)rmdir(path);
		report(false, name, "created as a directory");
	} else {
		report(true, name, "%s", errname(errno));
	}
}

static void check_empty_or_unreadable(const char *path)
{
	char name[300], buf[4096];
	snprintf(name, sizeof(name), "masked-%s", path);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		report(true, name, "%s", errname(errno));
		return;
	}
	ssize_t n = read(fd, buf, sizeof(buf));
	int e = errno;
	close(fd);
	if (n > 0)
		report(false, name, "read %zd bytes", n);
	else
		report(true, name, "%s", n == 0 ? "empty" : errname(e));
}

static void check_host_path(const char *path)
{
	char name[300];
	struct stat st;
	snprintf(name, sizeof(name), "host-path-%s", path);
	if (lstat(path, &st) < 0) {
		report(true, name, "absent (%s)", errname(errno));
		return;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		close(fd);
		report(false, name, "exists and is readable (mode %o, uid %u)", st.st_mode, st.st_uid);
	} else {
		report(true, name, "unreadable (%s)", errname(errno));
	}
}

/* The minimal /dev holds no block device and no window on memory, ports or
 * the kernel log; and no device node made here can be opened. */
static void check_dev(void)
{
	static const char *const forbidden[] = { "/dev/mem", "/dev/kmem",  "/dev/port",  "/dev/kmsg", "/dev/sda",
						 "/dev/vda", "/dev/nvme0", "/dev/loop0", "/dev/fuse" };
	char node[] = "/tmp/cove-probe-mem.XXXXXX";
	DIR *d = opendir("/dev");
	struct dirent *e;
	int blocks = 0;
	while (d && (e = readdir(d)))
		blocks += e->d_type == DT_BLK;
	if (d)
		closedir(d);
	report(d && blocks == 0, "dev-no-block-devices", "%d in /dev", blocks);
	for (size_t i = 0; i < ARRAY_SIZE(forbidden); i++) {
		char name[64];
		snprintf(name, sizeof(name), "absent-%s", forbidden[i]);
		report(access(forbidden[i], F_OK) < 0, name, NULL);
	}
	int fd = mkstemp(node);
	if (fd < 0) {
		report(false, "mknod-mem", "mkstemp: %s", errname(errno));
		return;
	}
	close(fd);
	(void)unlink(node);
	if (mknod(node, S_IFCHR | 0600, makedev(1, 1)) < 0) {
		report(true, "mknod-mem", "%s", errname(errno));
		return;
	}
	fd = open(node, O_RDONLY | O_CLOEXEC);
	int err = errno;
	(void)unlink(node);
	if (fd >= 0) {
		close(fd);
		report(false, "mknod-mem", "made and opened a /dev/mem node");
	} else {
		report(true, "mknod-mem", "made, but open: %s", errname(err));
	}
}

static void cmd_fs(int argc, char **argv)
{
	static const char *const not_writable[] = {
		"/proc/sysrq-trigger",           "/proc/sys/kernel/hostname",
		"/proc/sys/net/ipv4/ip_forward", "/proc/sys/vm/drop_caches",
		"/sys/kernel/uevent_helper",     "/sys/power/state",
		"/sys/class/net/lo/mtu",         "/sys/kernel/mm/transparent_hugepage/enabled"
	};
	static const char *const masked[] = { "/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug",
					      "/proc/kmsg" };
	for (size_t i = 0; i < ARRAY_SIZE(not_writable); i++)
		check_not_writable(not_writable[i]);
	check_cannot_create("/sys/cove-probe");
	check_cannot_create("/sys/fs/cgroup/cove-probe");
	check_cannot_create("/proc/sys/cove-probe");
	for (size_t i = 0; i < ARRAY_SIZE(masked); i++)
		check_empty_or_unreadable(masked[i]);
	check_dev();
	for (int i = 0; i < argc; i++)
		check_host_path(argv[i]);
}

/* Whatever a process is handed beyond stdio (by cove-init, hence by coved)
 * is shared with whoever else holds it: the open file, its offset, its
 * flags. A command must start with nothing else open. */
static void cmd_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int found = 0;
	if (!d) {
		report(false, "no-inherited-fds", "opendir /proc/self/fd: %s", errname(errno));
		return;
	}
	while ((e = readdir(d))) {
		char path[300], target[4096], name[64];
		int fd = atoi(e->d_name);
		if (e->d_name[0] == '.' || fd <= 2 || fd == dirfd(d))
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		snprintf(name, sizeof(name), "inherited-fd-%d", fd);
		report(false, name, "%s is open", target);
		found++;
	}
	closedir(d);
	if (!found)
		report(true, "no-inherited-fds", NULL);
}

/* ---- limits -------------------------------------------------------------- */

static void cmd_forkbomb(long max)
{
	pid_t *kids = calloc((size_t)max, sizeof(*kids));
	long n = 0;
	int err = 0;
	if (!kids) {
		report(false, "forkbomb", "calloc: %s", errname(errno));
		return;
	}
	for (; n < max; n++) {
		pid_t pid = fork();
		if (pid < 0) {
			err = errno;
			break;
		}
		if (pid == 0) {
			(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
			for (;;)
				pause();
		}
		kids[n] = pid;
	}
	printf("forks %ld\n", n);
	if (n == max)
		report(false, "fork-fails", "all %ld forks succeeded", max);
	else
		report(err == EAGAIN, "fork-fails", "%s after %ld forks", errname(err), n);
	for (long i = 0; i < n; i++)
		(void)kill(kids[i], SIGKILL);
	for (long i = 0; i < n; i++)
		(void)waitpid(kids[i], NULL, 0);
	free(kids);
}

static void cmd_hog(long mb)
{
	for (long i = 1; i <= mb; i++) {
		char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED) {
			report(false, "hog", "mmap failed after %ld MB: %s", i - 1, errname(errno));
			return;
		}
		memset(p, 0xa5, 1 << 20);
		printf("allocated %ld MB\n", i);
		fflush(stdout);
	}
	report(false, "hog", "allocated and touched %ld MB without being killed", mb);
}

/* ---- echo ----------------------------------------------------------------- */

/* The poll set lives in memory only: after a restore it goes on with the
 * same fds, which is what the test asserts. */
static void cmd_echo(void)
{
	struct pollfd p[16] = { { .fd = 3, .events = POLLIN } };
	int n = 1;
	for (;;) {
		if (poll(p, n, -1) < 0)
			continue;
		if ((p[0].revents & POLLIN) && n < 16) {
			int c = accept4(3, NULL, NULL, SOCK_CLOEXEC);
			if (c >= 0)
				p[n++] = (struct pollfd){ .fd = c, .events = POLLIN };
		}
		for (int i = n - 1; i >= 1; i--) {
			char buf[512];
			ssize_t r = p[i].revents ? read(p[i].fd, buf, sizeof(buf)) : 1;
			if (r > 0 && p[i].revents)
				(void)!write(p[i].fd, buf, r);
			else if (r <= 0) {
				close(p[i].fd);
				p[i] = p[--n];
			}
		}
	}
}

/* ---- main ---------------------------------------------------------------- */

static long positive(const char *s)
{
	char *end;
	long v = s ? strtol(s, &end, 10) : 0;
	if (!s || *end || v <= 0) {
		fprintf(stderr, "cove-probe: '%s' is not a positive number\n", s ? s : "");
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";
	if (strcmp(cmd, "syscalls") == 0)
		cmd_syscalls(argc - 2, argv + 2);
	else if (strcmp(cmd, "status") == 0)
		cmd_status();
	else if (strcmp(cmd, "fs") == 0)
		cmd_fs(argc - 2, argv + 2);
	else if (strcmp(cmd, "fds") == 0)
		cmd_fds();
	else if (strcmp(cmd, "forkbomb") == 0)
		cmd_forkbomb(positive(argv[2]));
	else if (strcmp(cmd, "hog") == 0)
		cmd_hog(positive(argv[2]));
	else if (strcmp(cmd, "echo") == 0)
		cmd_echo();
	else if (strcmp(cmd, "escape") == 0)
		cmd_escape(argc - 2, argv + 2);
	else if (strcmp(cmd, "swap") == 0 && argc == 4)
		cmd_swap(argv[2], positive(argv[3]));
	else {
		fprintf(stderr, "usage: cove-probe syscalls [PID...] | status | fs [PATH...] | fds | forkbomb N | hog "
				"MB | echo | escape [PID...] | swap DIR SECONDS\n");
		return 2;
	}
	return failures ? 1 : 0;
}

/* cove-probe escape [PID...]: one attempt per known container-escape class
 * (issue 16), each of which must fail. The host's side of "and the host is
 * unchanged" is checked by tests/integration/test_escape.py (the runtime's
 * binaries, the kernel's modules, coved's health).
 *
 * Each attempt runs with harmless arguments: one the kernel let through
 * would do nothing lasting (a file opened for writing is not written, a
 * device node is removed at once), and the check reports it as a failure. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

/* A host pid (coved's): no /proc entry of it, no root or cwd to walk
 * through, no memory to read, no pidfd (and so no pidfd_getfd). */
static void check_outside_pid(const char *arg)
{
	static const char *const links[] = { "root", "cwd", "exe" };
	char name[96], path[64], byte;
	struct stat st;
	pid_t pid = atoi(arg);
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(path, sizeof(path), "/proc/%d/%s", pid, links[i]);
		snprintf(name, sizeof(name), "proc-%s-of-%d-absent", links[i], pid);
		if (stat(path, &st) == 0)
			report(false, name, "%s resolves", path);
		else
			report(errno == ENOENT, name, "%s", errname(errno));
	}
	struct iovec local = { &byte, 1 }, remote = { (void *)0x400000, 1 };
	snprintf(name, sizeof(name), "process_vm_readv-%d", pid);
	if (process_vm_readv(pid, &local, 1, &remote, 1, 0) >= 0)
		report(false, name, "read its memory");
	else
		report(errno == ESRCH, name, "%s", errname(errno));
	snprintf(name, sizeof(name), "pidfd_open-%d", pid);
	long fd = syscall(SYS_pidfd_open, pid, 0);
	if (fd >= 0) {
		long got = syscall(SYS_pidfd_getfd, (int)fd, 0, 0);
		report(false, name, "a pidfd; pidfd_getfd gave %ld", got);
	} else {
		report(errno == ESRCH, name, "%s", errname(errno));
	}
}

static long try_userfaultfd(void)
{
	return syscall(SYS_userfaultfd, O_CLOEXEC);
}

static long try_io_uring_setup(void)
{
	char params[120] = { 0 }; /* struct io_uring_params, zeroed */
	return syscall(SYS_io_uring_setup, 1, params);
}

static long try_move_mount(void)
{
	return syscall(SYS_move_mount, -1, "", AT_FDCWD, "/tmp", 4 /* MOVE_MOUNT_F_EMPTY_PATH */);
}

static long try_fsmount(void)
{
	return syscall(SYS_fsmount, -1, 0, 0);
}

static long try_mount_setattr(void)
{
	uint64_t attr[4] = { 0 }; /* struct mount_attr: would set an idmap */
	return syscall(SYS_mount_setattr, AT_FDCWD, "/tmp", 0, attr, sizeof(attr));
}

static long try_mount_cgroup_v1(void)
{
	return mount("cgroup", "/tmp", "cgroup", MS_NOSUID | MS_NODEV | MS_NOEXEC, "none,name=cove-probe");
}

static long try_keyctl_join(void)
{
	return syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, "cove-probe");
}

static long try_request_key(void)
{
	return syscall(SYS_request_key, "user", "cove-probe", NULL, KEY_SPEC_PROCESS_KEYRING);
}

/* cgroup v1's release_agent runs as root on the host: no release_agent or
 * notify_on_release under /sys/fs/cgroup may be opened for writing. */
static void check_release_agent(void)
{
	static const char *const files[] = { "release_agent", "notify_on_release" };
	char path[512];
	int seen = 0, writable = 0;
	DIR *d = opendir("/sys/fs/cgroup");
	struct dirent *de;
	while (d && (de = readdir(d))) {
		for (size_t i = 0; i < 2; i++) {
			const char *sub = strcmp(de->d_name, ".") == 0 ? "" : de->d_name;
			if (strcmp(de->d_name, "..") == 0)
				continue;
			snprintf(path, sizeof(path), "/sys/fs/cgroup/%s%s%s", sub, *sub ? "/" : "", files[i]);
			if (access(path, F_OK) != 0)
				continue;
			seen++;
			int fd = open(path, O_WRONLY | O_CLOEXEC);
			if (fd >= 0) {
				close(fd);
				writable++;
				printf("writable %s\n", path);
			}
		}
	}
	if (d)
		closedir(d);
	report(writable == 0, "cgroup-release_agent", "%d found, %d writable", seen, writable);
}

static void check_mknod(const char *name, mode_t type, dev_t dev)
{
	const char *path = "/tmp/cove-probe-node";
	(void)unlink(path);
	if (mknod(path, type | 0600, dev) == 0) {
		(void)unlink(path);
		report(false, name, "created");
	} else {
		report(errno == EPERM, name, "%s", errname(errno));
	}
}

/* Families whose modules most kernels build but few load: a socket of one
 * makes the kernel load its module (request_module) on the host. The
 * probe tries each; the test checks the host's module list is unchanged.
 * AF_VSOCK reaches the hypervisor: it must be refused outright. */
static void check_socket_families(void)
{
	static const int families[] = { 3,  4,  5,  6,  8,  9,  11, 12, 19, 21, 23, 24, 26, 29,
					30, 31, 32, 33, 34, 35, 36, 37, 39, 41, 42, 43, 44, 45 };
	int made = 0;
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
		for (int type = SOCK_STREAM; type <= SOCK_SEQPACKET; type++) {
			int fd = socket(families[i], type | SOCK_CLOEXEC, 0);
			if (fd >= 0) {
				made++;
				close(fd);
			}
		}
	printf("sockets of unusual families made: %d\n", made);
	report(true, "socket-families-tried", "%zu families", sizeof(families) / sizeof(families[0]));
	int fd = socket(40 /* AF_VSOCK */, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0)
		close(fd);
	report(fd < 0 && (errno == EPERM || errno == EACCES), "socket-AF_VSOCK-refused", "%s",
	       fd < 0 ? errname(errno) : "made");
}

/* No terminal of the host is reachable: TIOCSTI (push input) and TIOCLINUX
 * (the console's selection) fail on stdio and on every console device. */
static void check_terminals(void)
{
	static const char *const devices[] = { "/dev/tty", "/dev/console", "/dev/tty0", "/dev/tty1", "/dev/tty63" };
	char c = ' ', sub = 6 /* TIOCL_GETSHIFTSTATE */, name[64];
	for (int fd = 0; fd <= 2; fd++) {
		snprintf(name, sizeof(name), "TIOCSTI-fd-%d", fd);
		report(ioctl(fd, TIOCSTI, &c) < 0 || isatty(fd), name, "%s", errname(errno));
		snprintf(name, sizeof(name), "TIOCLINUX-fd-%d", fd);
		report(ioctl(fd, TIOCLINUX, &sub) < 0, name, "%s", errname(errno));
	}
	for (size_t i = 0; i < sizeof(devices) / sizeof(devices[0]); i++) {
		snprintf(name, sizeof(name), "no-open-%s", devices[i]);
		int fd = open(devices[i], O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (fd >= 0) {
			bool refused = ioctl(fd, TIOCSTI, &c) < 0 && ioctl(fd, TIOCLINUX, &sub) < 0;
			report(refused, name, "opened; TIOCSTI and TIOCLINUX %s", refused ? "refused" : "worked");
			close(fd);
		} else {
			report(true, name, "%s", errname(errno));
		}
	}
}

/* cove-probe swap DIR SECONDS: the rename race against the Files API and
 * cove cp (issue 16): DIR, a real folder, trades places with a symlink to
 * "/" (renameat2 RENAME_EXCHANGE, atomic) as fast as it can for SECONDS,
 * while the host reads, writes, lists and tars through DIR. Either side of
 * a swap, a path under DIR names a file of the sandbox; resolved on the
 * host, the symlink's side would name the host's. DIR ends as the folder. */
void cmd_swap(const char *dir, long seconds)
{
	char link[4096];
	long swaps = 0;
	snprintf(link, sizeof(link), "%s.swap", dir);
	(void)unlink(link);
	if (symlink("/", link) < 0) {
		report(false, "swap", "symlink %s: %s", link, errname(errno));
		return;
	}
	printf("swapping\n");
	fflush(stdout);
	time_t end = time(NULL) + seconds;
	while (time(NULL) < end) {
		for (int i = 0; i < 1000; i++, swaps++)
			if (syscall(SYS_renameat2, AT_FDCWD, dir, AT_FDCWD, link, 2 /* RENAME_EXCHANGE */) < 0) {
				report(false, "swap", "renameat2 %s: %s", dir, errname(errno));
				return;
			}
	}
	struct stat st;
	if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
		(void)syscall(SYS_renameat2, AT_FDCWD, dir, AT_FDCWD, link, 2);
	(void)unlink(link);
	printf("swaps %ld\n", swaps);
	report(swaps > 0, "swap", "%ld exchanges", swaps);
}

void cmd_escape(int argc, char **argv)
{
	static const struct {
		const char *name;
		long (*call)(void);
	} calls[] = {
		{ "userfaultfd", try_userfaultfd },
		{ "io_uring_setup", try_io_uring_setup },
		{ "move_mount", try_move_mount },
		{ "fsmount", try_fsmount },
		{ "mount_setattr", try_mount_setattr },
		{ "mount-cgroup-v1", try_mount_cgroup_v1 },
		{ "keyctl-join-session-keyring", try_keyctl_join },
		{ "request_key", try_request_key },
	};
	/* The runtime's binaries through their magic links (CVE-2019-5736). */
	check_not_writable("/proc/self/exe");
	check_not_writable("/proc/1/exe");
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		expect_refused(calls[i].name, calls[i].call);
	check_release_agent();
	check_mknod("mknod-char-1:3", S_IFCHR, makedev(1, 3));
	check_mknod("mknod-block-8:0", S_IFBLK, makedev(8, 0));
	check_socket_families();
	check_terminals();
	for (int i = 0; i < argc; i++)
		check_outside_pid(argv[i]);
}

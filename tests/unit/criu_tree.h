/* A process tree laid out as a cove sandbox is, for CRIU's tests and bench
 * (test_criu.c, bench/criubench.c), without coved: pid 1 of its own pid
 * namespace, in a user namespace (root = host uid CTREE_UID_BASE, 65536
 * ids), private mount, net (loopback up), ipc and uts namespaces, its own
 * session. Its root is a bind mount of a host directory (as cove's overlay
 * root: restored with criu's `root`), with a host file bound in at
 * /bin/<name> (as cove's binds of /dev nodes: an external mount, key
 * CTREE_EXT_KEY) and the host's /dev/null (CTREE_NULL_KEY), a tmpfs at /tmp (criu carries its contents) and /proc.
 * stdio goes to /tmp/log. Header-only: both programs include it. */
#pragma once
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/close_range.h>

#define CTREE_UID_BASE 3000000
#define CTREE_EXT_KEY "ctree-bin"
#define CTREE_NULL_KEY "ctree-null"

/* A listening unix socket at path, made in the tree's network namespace
 * (as cove-init's must be: criu finds a socket only in the namespaces it
 * dumps), or -1. */
static int ctree_listen(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	if (!path || strlen(path) >= sizeof(a.sun_path))
		return -1;
	strcpy(a.sun_path, path);
	int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(l, 16) < 0)
		_exit(17);
	return l;
}

/* In the tree's pid 1, before exec: the mounts, then stdio, and the
 * listening socket (if any) as fd 3. */
static void ctree_pid1(const char *root, const char *exe_name, const char *exe, char *const argv[],
		       const char *listen_path)
{
	char p[PATH_MAX];
	int l = listen_path ? ctree_listen(listen_path) : -1;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 || mount(root, root, NULL, MS_BIND, NULL) < 0)
		_exit(10);
	snprintf(p, sizeof(p), "%s/bin/%s", root, exe_name);
	if (mount(exe, p, NULL, MS_BIND, NULL) < 0)
		_exit(11);
	snprintf(p, sizeof(p), "%s/dev/null", root);
	if (mount("/dev/null", p, NULL, MS_BIND, NULL) < 0)
		_exit(11);
	snprintf(p, sizeof(p), "%s/tmp", root);
	if (mount("tmpfs", p, "tmpfs", 0, "size=16m") < 0)
		_exit(12);
	/* proc before pivot_root, as runtime.c: a user namespace may mount a
	 * proc only while a full one is visible. */
	snprintf(p, sizeof(p), "%s/proc", root);
	if (mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		_exit(14);
	if (chdir(root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		_exit(13);
	int fd = open("/tmp/log", O_RDWR | O_CREAT | O_APPEND, 0644);
	if (fd < 0 || dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
		_exit(15);
	/* dup2 onto itself would keep close-on-exec */
	if (l >= 0 && (l == 3 ? fcntl(3, F_SETFD, 0) : dup2(l, 3)) < 0)
		_exit(18);
	syscall(SYS_close_range, l >= 0 ? 4U : 3U, ~0U, 0);
	snprintf(p, sizeof(p), "/bin/%s", exe_name);
	execv(p, argv);
	_exit(16);
}

/* Start the tree in dir (a host directory; dir/root is made): exe is bound
 * at /bin/<exe_name> and run as pid 1 with argv; with listen_path (a host
 * path in dir/sock/, which the tree's root owns), fd 3 listens there. The
 * caller must be a child subreaper: pid 1 is reparented to it. Returns pid
 * 1's host pid. */
static pid_t ctree_start(const char *dir, const char *exe_name, const char *exe, char *const argv[],
			 const char *listen_path)
{
	char root[PATH_MAX], p[PATH_MAX];
	snprintf(root, sizeof(root), "%s/root", dir);
	/* The tree's root is host uid CTREE_UID_BASE: it must traverse dir,
	 * and own sock/. */
	snprintf(p, sizeof(p), "%s/sock", dir);
	if (chmod(dir, 0755) < 0 || (mkdir(p, 0755) < 0 && errno != EEXIST) ||
	    chown(p, CTREE_UID_BASE, CTREE_UID_BASE) < 0)
		return -1;
	static const char *const dirs[] = { "", "/bin", "/dev", "/tmp", "/proc", "/www" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s%s", root, dirs[i]);
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -1;
	}
	for (int i = 0; i < 2; i++) {
		if (i)
			snprintf(p, sizeof(p), "%s/dev/null", root);
		else
			snprintf(p, sizeof(p), "%s/bin/%s", root, exe_name);
		int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
		if (fd < 0)
			return -1;
		close(fd);
	}
	int sync_pipe[2], pid_pipe[2];
	if (pipe2(sync_pipe, O_CLOEXEC) < 0 || pipe2(pid_pipe, O_CLOEXEC) < 0)
		return -1;
	pid_t a = fork();
	if (a < 0)
		return -1;
	if (a == 0) {
		char c;
		if (unshare(CLONE_NEWUSER) < 0)
			_exit(2);
		(void)!write(sync_pipe[1], "u", 1);
		if (read(pid_pipe[0], &c, 1) != 1) /* the maps are written */
			_exit(3);
		if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
			_exit(4);
		if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) < 0)
			_exit(5);
		pid_t b = fork();
		if (b == 0) {
			if (setsid() < 0)
				_exit(9);
			ctree_pid1(root, exe_name, exe, argv, listen_path);
		}
		(void)!write(sync_pipe[1], &b, sizeof(b));
		_exit(b > 0 ? 0 : 6);
	}
	char c;
	pid_t b = -1;
	if (read(sync_pipe[0], &c, 1) == 1) {
		char map[64];
		int n = snprintf(map, sizeof(map), "0 %d 65536\n", CTREE_UID_BASE);
		bool ok = true;
		for (int i = 0; i < 2; i++) {
			snprintf(p, sizeof(p), "/proc/%d/%s", a, i ? "gid_map" : "uid_map");
			int mfd = open(p, O_WRONLY | O_CLOEXEC);
			ok = ok && mfd >= 0 && write(mfd, map, n) == n;
			if (mfd >= 0)
				close(mfd);
		}
		if (ok)
			(void)!write(pid_pipe[1], "m", 1);
		if (read(sync_pipe[0], &b, sizeof(b)) != sizeof(b))
			b = -1;
	}
	close(sync_pipe[0]), close(sync_pipe[1]), close(pid_pipe[0]), close(pid_pipe[1]);
	(void)waitpid(a, NULL, 0);
	return b;
}

/* The sandbox runtime: from a subvolume to a running, isolated cove-init.
 * See runtime.h for the order of operations; the comments below say why each
 * step sits where it does. Every step that fails reports "stage: what: errno"
 * through a status pipe, and the half-made sandbox dies with its namespaces. */
#include "sandbox/runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/mount.h>

#include "common/cleanup.h"
#include "sys/caps.h"
#include "sys/seccomp.h"

const char *const runtime_host_layers[] = { "usr", "opt", NULL };

/* Written to the status pipe by the child that failed. */
struct start_status {
	int failed; /* else msg holds init's pid */
	int errnum;
	char msg[256];
};

static int status_fd = -1;

/* COVE_TRACE_START=1 in coved's environment prints each start stage's time
 * to coved's stderr, to see where a sandbox's start goes. */
static void trace(const char *stage)
{
	static int on = -1;
	if (on < 0)
		on = getenv("COVE_TRACE_START") != NULL;
	if (!on)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	dprintf(2, "start %d %.3f %s\n", getpid(), (ts.tv_sec % 1000) * 1e3 + ts.tv_nsec / 1e6, stage);
}

static void fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
	struct start_status s = { .failed = 1, .errnum = errno };
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s.msg, sizeof(s.msg), fmt, ap);
	va_end(ap);
	(void)!write(status_fd, &s, sizeof(s));
	_exit(1);
}

static int sys_open_tree(int dfd, const char *path, unsigned flags)
{
	return (int)syscall(SYS_open_tree, dfd, path, flags);
}

static int sys_mount_setattr(int dfd, const char *path, unsigned flags, struct mount_attr *attr)
{
	return (int)syscall(SYS_mount_setattr, dfd, path, flags, attr, sizeof(*attr));
}

static int sys_move_mount(int from_dfd, const char *from, int to_dfd, const char *to, unsigned flags)
{
	return (int)syscall(SYS_move_mount, from_dfd, from, to_dfd, to, flags);
}

/* Mount an idmapped (and optionally read-only) copy of the tree at src onto
 * dst: files owned by uid k on disk appear as owned by the sandbox's uid k. */
static void mount_idmapped(const char *src, const char *dst, int userns_fd, bool readonly)
{
	_cleanup_close_ int fd = sys_open_tree(AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
	if (fd < 0)
		fail("open_tree '%s'", src);
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP | (readonly ? MOUNT_ATTR_RDONLY : 0),
				   .userns_fd = (uint64_t)userns_fd };
	if (sys_mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr) < 0)
		fail("idmap '%s'", src);
	if (sys_move_mount(fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		fail("move_mount '%s' to '%s'", src, dst);
}

static void mountf(const char *src, const char *dst, const char *type, unsigned long flags, const char *data)
{
	if (mount(src, dst, type, flags, data) < 0)
		fail("mount %s on '%s'", type ? type : src ? src : "(remount)", dst);
}

/* The user namespace helper: it waits for EOF on the pipe (go[0]; its own
 * copy of the write end closed first), then ends. */
static int userns_helper(void *arg)
{
	const int *go = arg;
	char c;
	close(go[1]);
	(void)!read(go[0], &c, 1);
	return 0;
}

/* The user namespace is made by a helper that only exists to own it: the
 * mounts must be idmapped with it before anything enters it, and only a
 * process outside it (host root) may write a map of 65536 ids.
 *
 * The helper shares our memory (CLONE_VM, on a stack of its own): a copy
 * of coved's address space for a process that only waits would cost more
 * than everything it does (its own fd table, so its close is its own). We
 * touch neither its stack nor go until it has been reaped. */
static int make_userns(uid_t base)
{
	static char stack[16384] __attribute__((aligned(16)));
	int go[2];
	if (pipe2(go, O_CLOEXEC) < 0)
		fail("pipe");
	pid_t pid = clone(userns_helper, stack + sizeof(stack), CLONE_NEWUSER | CLONE_VM | SIGCHLD, go);
	if (pid < 0)
		fail("clone user namespace");
	char path[64], map[64];
	int n = snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)base, (unsigned)RUNTIME_UID_COUNT);
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "/proc/%d/%s", pid, i ? "gid_map" : "uid_map");
		_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, map, n) != n)
			fail("write %s", path);
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/user", pid);
	int userns = open(path, O_RDONLY | O_CLOEXEC);
	if (userns < 0)
		fail("open %s", path);
	close(go[1]);
	close(go[0]);
	(void)waitpid(pid, NULL, 0);
	return userns;
}

/* The detached mount tree_fd (open_tree by host root: the file's path is
 * not ours to walk), made read-only, at path under root. */
static void bind_file_ro(int tree_fd, const char *root, const char *path)
{
	char dst[4096];
	snprintf(dst, sizeof(dst), "%s%s", root, path);
	_cleanup_close_ int t = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0555);
	if (t < 0)
		fail("create '%s'", dst);
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV };
	if (sys_mount_setattr(tree_fd, "", AT_EMPTY_PATH, &attr) < 0)
		fail("make '%s' read-only", dst);
	if (sys_move_mount(tree_fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		fail("move_mount to '%s'", dst);
}

/* A detached copy of cove-init's file, for bind_file_ro. */
static int init_tree(const struct runtime_config *c)
{
	int fd = sys_open_tree(AT_FDCWD, c->init_file, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (fd < 0)
		fail("open_tree '%s'", c->init_file);
	return fd;
}

static void make_dev_node(const char *dev, const char *name)
{
	char src[64], dst[4096];
	snprintf(src, sizeof(src), "/dev/%s", name);
	snprintf(dst, sizeof(dst), "%s/%s", dev, name);
	_cleanup_close_ int fd = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
	if (fd < 0)
		fail("create '%s'", dst);
	mountf(src, dst, NULL, MS_BIND, NULL);
}

/* A minimal /dev, made as the sandbox's root (ids are its own): device
 * nodes are bind mounts of the host's harmless ones (a tmpfs made in a user
 * namespace could not hold working nodes anyway). */
static void setup_dev(const char *rootfs, int init_file_fd)
{
	static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
	static const char *const links[][2] = { { "/proc/self/fd", "fd" },       { "/proc/self/fd/0", "stdin" },
						{ "/proc/self/fd/1", "stdout" }, { "/proc/self/fd/2", "stderr" },
						{ "pts/ptmx", "ptmx" },          { "/proc/kcore", "core" } };
	char dev[4096], p[4096];
	snprintf(dev, sizeof(dev), "%s/dev", rootfs);
	mountf("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=65536k,nr_inodes=4096");
	for (size_t i = 0; i < ARRAY_SIZE(nodes); i++)
		make_dev_node(dev, nodes[i]);
	for (size_t i = 0; i < ARRAY_SIZE(links) - 1; i++) {
		snprintf(p, sizeof(p), "%s/%s", dev, links[i][1]);
		if (symlink(links[i][0], p) < 0)
			fail("symlink '%s'", p);
	}
	static const char *const dirs[] = { "pts", "shm", "mqueue" };
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		snprintf(p, sizeof(p), "%s/%s", dev, dirs[i]);
		if (mkdir(p, 0755) < 0)
			fail("mkdir '%s'", p);
	}
	snprintf(p, sizeof(p), "%s/shm", dev);
	mountf("shm", p, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=1777,size=65536k");
	bind_file_ro(init_file_fd, rootfs, RUNTIME_INIT_PATH);
}

/* As host root, in C's private mount namespace: the idmapped mounts, which
 * only host root may make. They are the overlays' layers, below the
 * sandbox's subvolume (see runtime_prepare):
 *   <subvol>              the sandbox's own files, idmapped onto itself
 *   <subvol>/lower/image  the image's root (read-only)
 *   <subvol>/lower/usr …  the host's /usr and /opt (read-only) */
static void mount_layers(const struct runtime_config *c, int userns)
{
	char lower[4096];
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		fail("make / private");
	/* The subvolume holds image-relative ids on disk; the sandbox sees them
	 * shifted into its own range, and its writes are stored unshifted. */
	mount_idmapped(c->subvol, c->subvol, userns, false);
	snprintf(lower, sizeof(lower), "%s/lower/image", c->subvol);
	mount_idmapped(c->image, lower, userns, true);
	for (int i = 0; c->host_layers && runtime_host_layers[i]; i++) {
		char host[64];
		snprintf(host, sizeof(host), "/%s", runtime_host_layers[i]);
		snprintf(lower, sizeof(lower), "%s/lower/%s", c->subvol, runtime_host_layers[i]);
		mount_idmapped(host, lower, userns, true);
	}
}

/* userxattr: mounted in a user namespace, overlay may not set its usual
 * trusted.overlay.* marks, and without an opaque mark it cannot remove a
 * directory of a lower layer (EIO): it keeps them as user.overlay.* on the
 * upper layer instead, where the sandbox cannot reach them through the
 * overlay. */
static void mount_overlay(const char *lower, const char *layer, const char *target)
{
	char opts[512];
	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=upper/%s,workdir=work/%s,index=off,xino=off,userxattr",
		 lower, layer, layer);
	mountf("overlay", target, "overlay", MS_NOSUID, opts);
}

/* As the sandbox's root, with the cwd at the (idmapped) subvolume: the root
 * overlay (the image under the sandbox's writes), the host layers in it, and
 * /dev. Overlay creates upper files with the mounter's credentials, and host
 * root has no id in the idmapped upper layer, so the sandbox mounts them. */
static void mount_root(bool host_layers, int init_file_fd)
{
	char lower[128], target[64];
	mount_overlay("lower/image/rootfs", "root", "root");
	/* The image's own /usr (empty in the host image, an image built on it
	 * has its layers' files there) over the host's. */
	for (int i = 0; host_layers && runtime_host_layers[i]; i++) {
		snprintf(lower, sizeof(lower), "lower/image/rootfs/%s:lower/%s", runtime_host_layers[i],
			 runtime_host_layers[i]);
		snprintf(target, sizeof(target), "root/%s", runtime_host_layers[i]);
		mount_overlay(lower, runtime_host_layers[i], target);
	}
	setup_dev("root", init_file_fd);
}

int runtime_prepare(const char *subvol)
{
	static const char *const dirs[] = { "upper",     "work",        "lower",     "root",     "upper/root",
					    "work/root", "lower/image", "upper/usr", "work/usr", "lower/usr",
					    "upper/opt", "work/opt",    "lower/opt" };
	char p[4096];
	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		snprintf(p, sizeof(p), "%s/%s", subvol, dirs[i]);
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -errno;
	}
	return 0;
}

static void bind_ro(const char *rootfs, const char *path)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s%s", rootfs, path);
	if (mount(p, p, NULL, MS_BIND | MS_REC, NULL) < 0) {
		if (errno == ENOENT)
			return;
		fail("bind '%s'", p);
	}
	mountf(NULL, p, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

static void mask_path(const char *rootfs, const char *path)
{
	char p[4096], null[4096];
	snprintf(p, sizeof(p), "%s%s", rootfs, path);
	snprintf(null, sizeof(null), "%s/dev/null", rootfs);
	struct stat st;
	if (stat(p, &st) < 0)
		return;
	if (S_ISDIR(st.st_mode))
		mountf("tmpfs", p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=0");
	else
		mountf(null, p, NULL, MS_BIND, NULL);
}

/* In the new namespaces, as pid 1: the kernel views that must belong to
 * them (proc to the pid namespace, sysfs to the net namespace, devpts to
 * the user namespace), then the masks over proc, which must exist before
 * pivot_root hides the host's /dev/null they bind. */
static void setup_kernel_views(const char *rootfs)
{
	static const char *const masked[] = { "/proc/kcore",         "/proc/keys",
					      "/proc/timer_list",    "/proc/sched_debug",
					      "/proc/latency_stats", "/proc/acpi",
					      "/proc/scsi",          "/proc/sys/kernel/core_pattern" };
	static const char *const readonly[] = { "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus",
						"/proc/fs" };
	char p[4096];
	snprintf(p, sizeof(p), "%s/proc", rootfs);
	mountf("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	snprintf(p, sizeof(p), "%s/sys", rootfs);
	mountf("sysfs", p, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	snprintf(p, sizeof(p), "%s/dev/pts", rootfs);
	mountf("devpts", p, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620,gid=5");
	snprintf(p, sizeof(p), "%s/dev/mqueue", rootfs);
	mountf("mqueue", p, "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	for (size_t i = 0; i < ARRAY_SIZE(masked); i++)
		mask_path(rootfs, masked[i]);
	for (size_t i = 0; i < ARRAY_SIZE(readonly); i++)
		bind_ro(rootfs, readonly[i]);
}

static void enter_root(void)
{
	/* pivot_root(".", ".") stacks the old root on the new one; detaching it
	 * leaves nothing of the host reachable by path. */
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		fail("pivot_root");
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		fail("detach old root");
}

static void loopback_up(void)
{
	_cleanup_close_ int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr = { 0 };
	strcpy(ifr.ifr_name, "lo");
	if (s < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		fail("get lo flags");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		fail("set lo up");
}

/* The fds cove-init starts with: 3 the listening socket, 4 a fresh open
 * of the sealed memfd (close-on-exec: no process of the sandbox inherits
 * it, and no two sandboxes share its file offset), 5 the status pipe (also
 * close-on-exec), stdio on /dev/null, and nothing else of coved's. */
static void init_fds(const struct runtime_config *c, int listen_fd)
{
	/* Each one above 5 first: any of them may be 3, 4 or 5 already (the
	 * child closed coved's other fds), and dup3 refuses an fd onto itself. */
	char exe_path[64];
	snprintf(exe_path, sizeof(exe_path), "/proc/self/fd/%d", c->init_exe_fd);
	int exe = open(exe_path, O_RDONLY | O_CLOEXEC);
	int high_exe = exe < 0 ? -1 : fcntl(exe, F_DUPFD_CLOEXEC, 6);
	int high_listen = fcntl(listen_fd, F_DUPFD_CLOEXEC, 6), high_status = fcntl(status_fd, F_DUPFD_CLOEXEC, 6);
	if (high_exe < 0 || high_listen < 0 || high_status < 0)
		fail("reopen cove-init");
	status_fd = high_status; /* fail() reports on it */
	if (dup2(high_listen, 3) < 0 || dup3(high_exe, 4, O_CLOEXEC) < 0 || dup3(high_status, 5, O_CLOEXEC) < 0)
		fail("place cove-init's fds");
	status_fd = 5;
	if (close_range(6, ~0U, 0) < 0)
		fail("close_range");
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
		fail("stdio");
}

/* workspace: cove-init's argv[1], NULL for an isolated sandbox, which runs
 * it from its path (RUNTIME_INIT_PATH), not from the memfd (fd 4). */
static void exec_init(char *workspace)
{
	trace("exec");
	char *const argv[] = { "cove-init", workspace, NULL };
	char *const envp[] = { NULL };
	if (workspace)
		syscall(SYS_execveat, 4, "", argv, envp, AT_EMPTY_PATH);
	else
		execve(RUNTIME_INIT_PATH, argv, envp);
	fail("exec cove-init");
}

static void run_init(const struct runtime_config *c, int listen_fd)
{
	/* The cwd is the new root (entered while still host root): the data
	 * root's 0700 directories above it are not ours to traverse now. */
	trace("init");
	setup_kernel_views(".");
	trace("views");
	enter_root();
	trace("pivot");
	if (sethostname(c->id, strlen(c->id)) < 0)
		fail("sethostname");
	/* Its own session, as the external init: CRIU refuses to dump a tree
	 * whose session leader is outside its pid namespace (memory
	 * snapshots), and coved's terminal's signals are not the sandbox's. */
	if (setsid() < 0)
		fail("setsid");
	loopback_up();
	init_fds(c, listen_fd);
	/* Last, in this order: capabilities and no_new_privs, then seccomp
	 * (loading a filter needs no_new_privs when CAP_SYS_ADMIN is gone). */
	int r = caps_drop_to_sandbox_set();
	if (r < 0) {
		errno = -r;
		fail("drop capabilities");
	}
	r = seccomp_apply_compiled(c->seccomp);
	if (r < 0) {
		errno = -r;
		fail("seccomp");
	}
	exec_init(NULL);
}

/* cove-init's listening socket of an isolated sandbox: made in the
 * sandbox's own network namespace (so that CRIU, which finds sockets by
 * namespace, can dump it with the tree), bound to an abstract name there.
 * The sandbox's processes could connect to it too: cove-init takes only a
 * peer outside its pid namespace (SO_PEERCRED pid 0), which only coved is. */
static int listen_in_sandbox(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	memcpy(sa.sun_path + 1, RUNTIME_INIT_ABSTRACT, strlen(RUNTIME_INIT_ABSTRACT));
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(RUNTIME_INIT_ABSTRACT));
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, len) < 0 || listen(fd, 4) < 0)
		fail("listen on cove-init's socket");
	return fd;
}

/* This process into the sandbox's cgroups. */
static void enter_cgroups(const struct runtime_config *c)
{
	struct cove_err e = { 0 };
	if (cgroup_enter(c->cgroups, c->id, getpid(), &e) < 0) {
		errno = e.code < 1000 ? e.code : 0;
		fail("%s", e.msg);
	}
}

static void become_sandbox_root(int userns)
{
	if (setns(userns, CLONE_NEWUSER) < 0)
		fail("setns user");
	if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		fail("become root in the user namespace");
}

/* C: everything between coved and pid 1. Never returns. */
static void run_setup(const struct runtime_config *c, int listen_fd)
{
	trace("setup");
	int userns = make_userns(c->uid_base);
	trace("userns");
	if (unshare(CLONE_NEWNS) < 0)
		fail("unshare mount namespace");
	mount_layers(c, userns);
	int init_fd = init_tree(c);
	trace("layers");
	if (chdir(c->subvol) < 0)
		fail("chdir '%s'", c->subvol);
	enter_cgroups(c);
	trace("cgroup");
	become_sandbox_root(userns);
	/* The new mount namespace is owned by the sandbox's user namespace, so
	 * every mount copied into it is locked: it cannot be unmounted or
	 * remounted to uncover what is beneath. The sandbox's own mounts made
	 * from here on are not; capabilities and seccomp keep it from touching
	 * them. */
	if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET | CLONE_NEWCGROUP) < 0)
		fail("unshare namespaces");
	trace("unshare");
	if (listen_fd < 0)
		listen_fd = listen_in_sandbox();
	mount_root(c->host_layers, init_fd);
	trace("root");
	if (chdir("root") < 0)
		fail("chdir root");
	pid_t pid = fork();
	if (pid < 0)
		fail("fork init");
	if (pid == 0)
		run_init(c, listen_fd);
	struct start_status s = { .errnum = 0 };
	snprintf(s.msg, sizeof(s.msg), "%d", pid);
	(void)!write(status_fd, &s, sizeof(s));
	_exit(0);
}

static int listen_init_socket(const char *path, struct cove_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return err_set(err, COVE_EINVAL, "init socket path too long: '%s'", path);
	strcpy(sa.sun_path, path);
	(void)unlink(path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_sys(err, errno, "socket");
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0600) < 0 || listen(fd, 4) < 0) {
		err_sys(err, errno, "listen on '%s'", path);
		close(fd);
		return -1;
	}
	return fd;
}

/* Reads C's report: init's pid, then EOF once init has exec'd; or a failure
 * from either. */
static int read_start_status(int fd, pid_t *ret_pid, struct cove_err *err)
{
	struct start_status s;
	pid_t pid = 0;
	for (;;) {
		ssize_t n = read(fd, &s, sizeof(s));
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			break;
		if (n != sizeof(s))
			return err_set(err, COVE_EINTERNAL, "sandbox start: short status");
		s.msg[sizeof(s.msg) - 1] = '\0';
		if (s.failed) {
			if (pid > 0) {
				kill(pid, SIGKILL);
				(void)waitpid(pid, NULL, 0);
			}
			return err_set(err, COVE_EINTERNAL, "sandbox start: %s%s%s", s.msg, s.errnum ? ": " : "",
				       s.errnum ? strerror(s.errnum) : "");
		}
		pid = atoi(s.msg);
	}
	if (!pid)
		return err_set(err, COVE_EINTERNAL, "sandbox start: setup process died");
	*ret_pid = pid;
	return 0;
}

/* The host backend's init (isolation "external"), forked straight from
 * coved: no namespace, no pivot_root, no capability drop, no seccomp, no
 * uid mapping. It runs as root on the host; only the cgroups bound it.
 * It reports its pid at once, as C does for an isolated init. It joins the
 * cgroups first, so that whatever it becomes is inside them, also when coved
 * dies mid-start: a delete, or the next start's cleanup, kills it there.
 * No PR_SET_PDEATHSIG: it must outlive coved, as isolated inits do, and it
 * leaves coved's session so that signals to coved's terminal or process
 * group do not reach it. Never returns. */
static void run_external(const struct runtime_config *c, int listen_fd)
{
	struct start_status s = { .errnum = 0 };
	snprintf(s.msg, sizeof(s.msg), "%d", getpid());
	(void)!write(status_fd, &s, sizeof(s));
	enter_cgroups(c);
	if (setsid() < 0)
		fail("setsid");
	/* The workspace is its cwd (a spawned command's default one too, see
	 * cove-init) and, through argv[1], the root of its Files API. */
	if (chdir(c->subvol) < 0)
		fail("chdir '%s'", c->subvol);
	init_fds(c, listen_fd);
	exec_init((char *)c->subvol);
}

/* In the child, right after the fork: every fd of coved's goes except
 * stdio and the n in keep. The child must not hold coved's API socket, its
 * clients' connections or state.db, not even for the moment a killed
 * coved's child takes to die: a new coved would find the socket answering. */
static void close_all_but(int *keep, int n)
{
	for (int i = 1; i < n; i++) /* sort: n is tiny */
		for (int j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int t = keep[j];
			keep[j] = keep[j - 1];
			keep[j - 1] = t;
		}
	unsigned from = 3;
	for (int i = 0; i < n; i++) {
		unsigned k = (unsigned)keep[i];
		if (k > from && close_range(from, k - 1, 0) < 0)
			fail("close_range");
		if (k >= from)
			from = k + 1;
	}
	if (close_range(from, ~0U, 0) < 0)
		fail("close_range");
}

/* Fork the child that starts init (C, or the external init itself); its
 * report is read by runtime_finish. */
int runtime_begin(const struct runtime_config *c, bool external, struct runtime_pending *p, struct cove_err *err)
{
	if (strlen(c->init_socket) >= sizeof(p->init_socket))
		return err_set(err, COVE_EINVAL, "init socket path too long: '%s'", c->init_socket);
	/* An isolated sandbox's is made in its network namespace (run_setup). */
	_cleanup_close_ int listen_fd = external ? listen_init_socket(c->init_socket, err) : -1;
	if (external && listen_fd < 0)
		return -1;
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return err_sys(err, errno, "pipe");
	pid_t child = fork();
	if (child < 0) {
		close(fds[0]);
		close(fds[1]);
		return err_sys(err, errno, "fork");
	}
	if (child == 0) {
		status_fd = fds[1];
		int keep[] = { status_fd, c->init_exe_fd, listen_fd };
		close_all_but(keep, listen_fd >= 0 ? 3 : 2);
		if (external)
			run_external(c, listen_fd);
		/* If coved dies mid-start, the half-made sandbox goes with it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		run_setup(c, listen_fd);
	}
	close(fds[1]);
	p->child = child;
	p->status_fd = fds[0];
	p->external = external;
	strcpy(p->init_socket, c->init_socket);
	return 0;
}

/* Read the child's report. C is reaped here; an external init is coved's
 * child for good, reaped by coved's SIGCHLD handler when it ends. */
int runtime_finish(struct runtime_pending *p, pid_t *ret_pid, struct cove_err *err)
{
	pid_t pid = 0;
	int r = read_start_status(p->status_fd, &pid, err);
	close(p->status_fd);
	p->status_fd = -1;
	if (!p->external)
		(void)waitpid(p->child, NULL, 0);
	if (r < 0 && p->external)
		(void)unlink(p->init_socket);
	else
		*ret_pid = pid;
	return r;
}

static int start(const struct runtime_config *c, bool external, pid_t *ret_pid, struct cove_err *err)
{
	struct runtime_pending p;
	return runtime_begin(c, external, &p, err) < 0 ? -1 : runtime_finish(&p, ret_pid, err);
}

int runtime_start(const struct runtime_config *c, pid_t *ret_pid, struct cove_err *err)
{
	return start(c, false, ret_pid, err);
}

int runtime_start_external(const struct runtime_config *c, pid_t *ret_pid, struct cove_err *err)
{
	return start(c, true, ret_pid, err);
}

int runtime_connect(pid_t init_pid, bool external, const char *path, struct cove_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	socklen_t len = sizeof(sa);
	_cleanup_close_ int self = -1, ns = -1;
	if (external) {
		if (strlen(path) >= sizeof(sa.sun_path))
			return err_set(err, COVE_EINVAL, "init socket path too long: '%s'", path);
		strcpy(sa.sun_path, path);
	} else {
		memcpy(sa.sun_path + 1, RUNTIME_INIT_ABSTRACT, strlen(RUNTIME_INIT_ABSTRACT));
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(RUNTIME_INIT_ABSTRACT));
		char p[64];
		snprintf(p, sizeof(p), "/proc/%d/ns/net", init_pid);
		self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
		ns = open(p, O_RDONLY | O_CLOEXEC);
		if (self < 0 || ns < 0)
			return err_sys(err, errno, "open the network namespace of cove-init %d", init_pid);
		if (setns(ns, CLONE_NEWNET) < 0)
			return err_sys(err, errno, "enter the network namespace of cove-init %d", init_pid);
	}
	/* The socket belongs to the namespace it is made in: the sandbox's,
	 * where cove-init's abstract name is, and where CRIU looks. */
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	int e = errno;
	if (self >= 0 && setns(self, CLONE_NEWNET) < 0)
		abort(); /* coved would go on in a sandbox's network */
	if (fd < 0)
		return err_sys(err, e, "socket");
	if (connect(fd, (struct sockaddr *)&sa, len) < 0) {
		int e2 = errno;
		close(fd);
		/* A sandbox a coved before this one started listens at the host
		 * path: taken back as it was (no memory snapshots of it). */
		if (!external && path && access(path, F_OK) == 0)
			return runtime_connect(init_pid, true, path, err);
		return err_sys(err, e2, "connect to cove-init %d", init_pid);
	}
	return fd;
}

/* The overlays of a restore, as the sandbox's root in a mount namespace of
 * its own (see mount_root): the root at root/, the host layers beside it at
 * ext/<layer>, where criu binds them in (they are external mounts of the
 * dump). Then it waits to be killed: its mount namespace is entered. */
static void restore_overlays(bool host_layers, int userns, int ready)
{
	char lower[64], target[64];
	become_sandbox_root(userns);
	if (unshare(CLONE_NEWNS) < 0)
		fail("unshare mount namespace");
	mount_overlay("lower/image/rootfs", "root", "root");
	for (int i = 0; host_layers && runtime_host_layers[i]; i++) {
		snprintf(lower, sizeof(lower), "lower/%s", runtime_host_layers[i]);
		snprintf(target, sizeof(target), RUNTIME_RESTORE_EXT "/%s", runtime_host_layers[i]);
		mount_overlay(lower, runtime_host_layers[i], target);
	}
	(void)!write(ready, "r", 1);
	for (;;)
		pause();
}

void runtime_restore_prepare(const struct runtime_config *c, int report_fd)
{
	char p[4096];
	status_fd = report_fd;
	int userns = make_userns(c->uid_base);
	if (unshare(CLONE_NEWNS) < 0)
		fail("unshare mount namespace");
	mount_layers(c, userns);
	/* The host layers' mount points, in this namespace only, where the
	 * restored tree's root (criu opens external mounts from inside its
	 * user namespace) can reach them: not under the data root's 0700
	 * directories. */
	mountf("tmpfs", RUNTIME_RESTORE_EXT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=16k");
	for (int i = 0; c->host_layers && runtime_host_layers[i]; i++) {
		snprintf(p, sizeof(p), RUNTIME_RESTORE_EXT "/%s", runtime_host_layers[i]);
		if (mkdir(p, 0755) < 0)
			fail("mkdir '%s'", p);
	}
	bind_file_ro(init_tree(c), RUNTIME_RESTORE_EXT, "/cove-init");
	if (chdir(c->subvol) < 0)
		fail("chdir '%s'", c->subvol);
	enter_cgroups(c);
	int ready[2];
	if (pipe2(ready, O_CLOEXEC) < 0)
		fail("pipe");
	pid_t pid = fork();
	if (pid < 0)
		fail("fork");
	if (pid == 0)
		restore_overlays(c->host_layers, userns, ready[1]);
	close(ready[1]);
	char ch;
	snprintf(p, sizeof(p), "/proc/%d/ns/mnt", pid);
	int ns = read(ready[0], &ch, 1) == 1 ? open(p, O_RDONLY | O_CLOEXEC) : -1;
	int r = ns < 0 ? -1 : setns(ns, CLONE_NEWNS);
	int saved = errno;
	kill(pid, SIGKILL);
	(void)waitpid(pid, NULL, 0);
	errno = saved;
	if (r < 0)
		fail("enter the restore's mount namespace");
	close(ns);
	close(ready[0]);
	close(userns);
}

int runtime_restore_reason(int fd, struct cove_err *err)
{
	struct start_status s;
	ssize_t n;
	do
		n = read(fd, &s, sizeof(s));
	while (n < 0 && errno == EINTR);
	if (n != sizeof(s) || !s.failed)
		return 0;
	s.msg[sizeof(s.msg) - 1] = '\0';
	err_set(err, COVE_EINTERNAL, "restore setup: %s%s%s", s.msg, s.errnum ? ": " : "",
		s.errnum ? strerror(s.errnum) : "");
	return 1;
}

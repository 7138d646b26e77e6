/* cove-init: pid 1 of every sandbox. Static, small, libc only.
 *
 * It keeps the sandbox's namespaces alive, reaps every zombie (orphans are
 * re-parented to it), and spawns processes for coved. coved connects to the
 * listening SOCK_SEQPACKET socket inherited as fd 3 (its path is on the host,
 * invisible inside the sandbox); one client at a time, and a new connection
 * replaces the old one, which is how a restarted coved re-attaches.
 * Spawned processes get their stdio straight from coved (SCM_RIGHTS), so
 * their output never passes through init. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/passwd.h"
#include "common/wire.h"
#include "init/init.h"

#define LISTEN_FD 3
#define MAX_CHILDREN 65536

extern char **environ;

/* Processes spawned for coved (not their descendants): their exits are
 * reported; every other child is only reaped. An open-addressed set. */
static pid_t spawned[MAX_CHILDREN];
static int client_fd = -1;
static unsigned client_gen; /* counts connections: a reply is for the one it was asked on */

static unsigned slot_of(pid_t pid)
{
	return ((unsigned)pid * 2654435761u) % MAX_CHILDREN;
}

static void spawned_add(pid_t pid)
{
	unsigned i = slot_of(pid);
	while (spawned[i] > 0)
		i = (i + 1) % MAX_CHILDREN;
	spawned[i] = pid;
}

/* Remove pid; returns 1 if it was there. Tombstones (-1) keep probe chains. */
static int spawned_take(pid_t pid)
{
	for (unsigned i = slot_of(pid), n = 0; spawned[i] != 0 && n < MAX_CHILDREN; i = (i + 1) % MAX_CHILDREN, n++)
		if (spawned[i] == pid) {
			spawned[i] = -1;
			return 1;
		}
	return 0;
}

static int spawned_count(void)
{
	int n = 0;
	for (int i = 0; i < MAX_CHILDREN; i++)
		n += spawned[i] > 0;
	return n;
}

int init_send(const struct wire_hdr *h, int fd, bool block)
{
	if (client_fd < 0)
		return -ENOTCONN;
	struct iovec iov = { (void *)h, sizeof(*h) };
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (fd >= 0) {
		m.msg_control = cbuf;
		m.msg_controllen = sizeof(cbuf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	ssize_t r;
	do
		r = sendmsg(client_fd, &m, MSG_NOSIGNAL | (block ? 0 : MSG_DONTWAIT));
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

unsigned init_connection(void)
{
	return client_gen;
}

static void send_msg(uint32_t type, uint32_t seq, pid_t pid, int value)
{
	struct wire_hdr h = { .type = type, .seq = seq, .pid = pid, .value = value };
	(void)init_send(&h, -1, false);
}

/* Only regular files: the sandbox may have put a FIFO at /etc/passwd. */
static ssize_t read_file(const char *path, char *buf, size_t cap)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -1;
	}
	size_t n = 0;
	ssize_t r;
	while (n < cap - 1 && (r = read(fd, buf + n, cap - 1 - n)) > 0)
		n += r;
	close(fd);
	buf[n] = '\0';
	return n;
}

int init_become_user(const char *spec, struct passwd_entry *pw)
{
	static char text[1 << 20];
	ssize_t n = read_file("/etc/passwd", text, sizeof(text));
	int r = passwd_lookup(text, n < 0 ? 0 : n, *spec ? spec : "0", pw);
	if (r < 0)
		return -r;
	gid_t groups[PASSWD_MAX_GROUPS];
	int ng = 0;
	n = read_file("/etc/group", text, sizeof(text));
	if (n > 0)
		ng = passwd_groups(text, n, pw->name, groups, PASSWD_MAX_GROUPS);
	if (setgroups(ng, groups) < 0 || setgid(pw->gid) < 0 || setuid(pw->uid) < 0)
		return errno;
	return 0;
}

/* Add NAME=value to env unless the request set NAME already. */
static void env_default(const char **env, size_t *n, const char *name, const char *value, char *store, size_t cap)
{
	size_t len = strlen(name);
	for (size_t i = 0; i < *n; i++)
		if (strncmp(env[i], name, len) == 0 && env[i][len] == '=')
			return;
	snprintf(store, cap, "%s=%s", name, value);
	env[(*n)++] = store;
	env[*n] = NULL;
}

static void report_and_exit(int pipe_fd, int stage, int errnum)
{
	int msg[2] = { stage, errnum };
	(void)!write(pipe_fd, msg, sizeof(msg));
	_exit(127);
}

static void child_exec(struct wire_spawn *sp, int *fds, int nfds, uint32_t flags, int err_pipe)
{
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	setsid();
	/* Orphans of its descendants stay below it (not re-parented to init)
	 * while it runs, so that a timeout can find and kill the whole tree,
	 * also what left the process group with setsid. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	int base = (flags & WIRE_FLAG_STDIN) ? 1 : 0;
	if (nfds < base + 2)
		report_and_exit(err_pipe, WIRE_STAGE_STDIO, EBADF);
	int in = base ? fds[0] : open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (in < 0 || dup2(in, 0) < 0 || dup2(fds[base], 1) < 0 || dup2(fds[base + 1], 2) < 0)
		report_and_exit(err_pipe, WIRE_STAGE_STDIO, errno ? errno : EBADF);
	struct passwd_entry pw;
	int e = init_become_user(sp->user, &pw);
	if (e)
		report_and_exit(err_pipe, WIRE_STAGE_USER, e);
	const char *cwd = *sp->cwd ? sp->cwd : pw.home;
	if (chdir(cwd) < 0) {
		if (*sp->cwd || chdir("/") < 0)
			report_and_exit(err_pipe, WIRE_STAGE_CWD, errno);
	}
	static char home[300], user[80], logname[80], shell[300];
	static const char *env[WIRE_MAX_ARGS + 8];
	size_t n = 0;
	for (; sp->envp[n]; n++)
		env[n] = sp->envp[n];
	env[n] = NULL;
	env_default(env, &n, "HOME", pw.home, home, sizeof(home));
	env_default(env, &n, "USER", pw.name, user, sizeof(user));
	env_default(env, &n, "LOGNAME", pw.name, logname, sizeof(logname));
	env_default(env, &n, "SHELL", pw.shell, shell, sizeof(shell));
	/* execvp searches the PATH of environ, so the sandbox's env goes there. */
	environ = (char **)env;
	execvp(sp->argv[0], (char *const *)sp->argv);
	report_and_exit(err_pipe, WIRE_STAGE_EXEC, errno);
}

static void handle_spawn(const struct wire_hdr *h, const char *payload, int *fds, int nfds)
{
	static struct wire_spawn sp;
	if (wire_decode_spawn(payload, h->payload_len, &sp) < 0) {
		send_msg(WIRE_SPAWN_FAILED, h->seq, WIRE_STAGE_FORK, EINVAL);
		return;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		send_msg(WIRE_SPAWN_FAILED, h->seq, WIRE_STAGE_FORK, errno);
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		child_exec(&sp, fds, nfds, h->flags, p[1]);
	}
	close(p[1]);
	if (pid < 0) {
		send_msg(WIRE_SPAWN_FAILED, h->seq, WIRE_STAGE_FORK, errno);
		close(p[0]);
		return;
	}
	int msg[2];
	ssize_t r;
	do
		r = read(p[0], msg, sizeof(msg));
	while (r < 0 && errno == EINTR);
	close(p[0]);
	if (r == sizeof(msg)) {
		(void)waitpid(pid, NULL, 0);
		send_msg(WIRE_SPAWN_FAILED, h->seq, msg[0], msg[1]);
		return;
	}
	spawned_add(pid);
	send_msg(WIRE_SPAWNED, h->seq, pid, 0);
}

/* Send sig to pid's whole tree: every process whose parent chain reaches
 * it, then its group and itself. Descendants go first (they would be
 * re-parented to init once pid is gone); rounds repeat while a scan still
 * finds some, since a process may fork while it is being killed. */
static void kill_tree(pid_t root, int sig)
{
	static pid_t pids[65536], ppids[65536];
	/* Stopped, the process cannot see its children die and exit on its
	 * own before the signal reaches it: it dies of sig, as reported. */
	if (sig == SIGKILL)
		kill(root, SIGSTOP);
	for (int round = 0; round < 16; round++) {
		DIR *d = opendir("/proc");
		int n = 0, found = 0;
		struct dirent *e;
		while (d && (e = readdir(d)) && n < 65536) {
			char path[64], buf[512];
			pid_t pid = atoi(e->d_name), ppid;
			if (pid <= 1)
				continue;
			snprintf(path, sizeof(path), "/proc/%d/stat", pid);
			if (read_file(path, buf, sizeof(buf)) <= 0 || !strrchr(buf, ')') ||
			    sscanf(strrchr(buf, ')') + 2, "%*c %d", &ppid) != 1)
				continue;
			pids[n] = pid;
			ppids[n++] = ppid;
		}
		if (d)
			closedir(d);
		for (int i = 0; i < n; i++) {
			pid_t p = ppids[i];
			for (int depth = 0; p > 1 && p != root && depth < 64; depth++) {
				int j = 0;
				while (j < n && pids[j] != p)
					j++;
				p = j < n ? ppids[j] : 0;
			}
			if (p == root && pids[i] != root) {
				kill(pids[i], sig);
				found++;
			}
		}
		if (!found)
			break;
	}
	kill(-root, sig);
	kill(root, sig);
}

static void handle_packet(void)
{
	static char buf[WIRE_MAX_PACKET];
	char cbuf[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	ssize_t n = recvmsg(client_fd, &m, MSG_CMSG_CLOEXEC);
	if (n <= 0) {
		if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
			close(client_fd);
			client_fd = -1;
		}
		return;
	}
	int fds[WIRE_MAX_FDS], nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (int i = 0; i < k; i++) {
				int fd;
				memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (nfds < WIRE_MAX_FDS)
					fds[nfds++] = fd;
				else
					close(fd);
			}
		}
	struct wire_hdr h;
	if (wire_check_hdr(buf, n, &h) == 0 && !(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		if (h.type == WIRE_SPAWN)
			handle_spawn(&h, buf + sizeof(h), fds, nfds);
		else if (h.type == WIRE_SIGNAL && h.pid > 1 && (h.flags & WIRE_FLAG_TREE))
			kill_tree(h.pid, h.value);
		else if (h.type == WIRE_SIGNAL && h.pid > 1)
			(void)kill((h.flags & WIRE_FLAG_GROUP) ? -h.pid : h.pid, h.value);
		else if (h.type == WIRE_PING)
			send_msg(WIRE_PONG, h.seq, 0, spawned_count());
		else if (h.type == WIRE_OPEN || h.type == WIRE_FSOP)
			files_handle(&h, buf + sizeof(h));
	}
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
}

static void reap(void)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		if (spawned_take(pid))
			send_msg(WIRE_EXITED, 0, pid, status);
		else
			files_reaped(pid, status);
}

int main(void)
{
	/* Not dumpable: the sandbox's own processes run with init's uid, and
	 * must not ptrace it or take its fds (pidfd_getfd) to speak to coved in
	 * its name. Commands it spawns are dumpable again after their execve. */
	prctl(PR_SET_DUMPABLE, 0);
	sigset_t mask;
	sigfillset(&mask);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0 || fcntl(LISTEN_FD, F_SETFD, FD_CLOEXEC) < 0) {
		perror("cove-init");
		return 1;
	}
	for (;;) {
		struct pollfd p[3] = { { LISTEN_FD, POLLIN, 0 }, { sfd, POLLIN, 0 }, { client_fd, POLLIN, 0 } };
		if (poll(p, client_fd >= 0 ? 3 : 2, -1) < 0)
			continue;
		if (p[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) > 0)
				;
			reap();
		}
		if (p[0].revents & POLLIN) {
			int fd = accept4(LISTEN_FD, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0) {
				if (client_fd >= 0)
					close(client_fd);
				client_fd = fd;
				client_gen++;
			}
		}
		if (client_fd >= 0 && (p[2].revents & (POLLIN | POLLHUP | POLLERR)))
			handle_packet();
	}
}

/* cove-init: pid 1 of every sandbox. Static, small, libc only.
 *
 * It keeps the sandbox's namespaces alive, reaps every zombie (orphans are
 * re-parented to it), and spawns processes for coved. coved connects to the
 * listening SOCK_SEQPACKET socket inherited as fd 3 (an abstract name in the
 * sandbox's network namespace that takes only peers from outside its pid
 * namespace; an external sandbox's is a host path); one client at a time, and a new connection
 * replaces the old one, which is how a restarted coved re-attaches.
 * Spawned processes get their stdio straight from coved (SCM_RIGHTS), so
 * their output never passes through init.
 *
 * In an external sandbox (the host backend) it is a plain host process, not
 * a pid 1, and argv[1] names the workspace: the root of the Files API and
 * the default cwd of spawned processes. */
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
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "common/fdpass.h"
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
static unsigned client_gen;   /* counts connections: a reply is for the one it was asked on */
static const char *workspace; /* external sandboxes only: argv[1] */

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

static int send_fds(const struct wire_hdr *h, const int *fds, int nfds, bool block);

/* Background processes whose pipes (coved's ends) init holds, so that they
 * outlive coved; see wire.h. */
#define MAX_KEPT 256
static struct kept {
	pid_t pid; /* 0 = free */
	int fds[WIRE_MAX_FDS];
	int nfds;
	bool exited;
	int status;
} kept[MAX_KEPT];

static struct kept *kept_find(pid_t pid)
{
	for (int i = 0; i < MAX_KEPT; i++)
		if (kept[i].pid == pid && pid > 0)
			return &kept[i];
	return NULL;
}

static struct kept *kept_new(void)
{
	for (int i = 0; i < MAX_KEPT; i++)
		if (kept[i].pid == 0)
			return &kept[i];
	return NULL;
}

static void kept_close(struct kept *k, int index)
{
	for (int i = 0; i < k->nfds; i++)
		if ((index < 0 || i == index) && k->fds[i] >= 0) {
			close(k->fds[i]);
			k->fds[i] = -1;
		}
	if (index < 0)
		*k = (struct kept){ 0 };
}

static void send_kept_list(uint32_t seq)
{
	for (int i = 0; i < MAX_KEPT; i++) {
		if (kept[i].pid <= 0)
			continue;
		int fds[WIRE_MAX_FDS], n = 0;
		uint32_t present = 0; /* bit i: kept fd i is still open */
		for (int j = 0; j < kept[i].nfds; j++)
			if (kept[i].fds[j] >= 0) {
				fds[n++] = kept[i].fds[j];
				present |= 1u << j;
			}
		struct wire_hdr h = { .type = WIRE_KEPT,
				      .seq = seq,
				      .pid = kept[i].pid,
				      .value = kept[i].status,
				      .flags = (kept[i].exited ? WIRE_FLAG_EXITED : 0) | (present << 16) };
		(void)send_fds(&h, fds, n, true);
	}
	struct wire_hdr end = { .type = WIRE_LIST_END, .seq = seq };
	(void)send_fds(&end, NULL, 0, true);
}

static int spawned_count(void)
{
	int n = 0;
	for (int i = 0; i < MAX_CHILDREN; i++)
		n += spawned[i] > 0;
	return n;
}

static int send_fds(const struct wire_hdr *h, const int *fds, int nfds, bool block)
{
	if (client_fd < 0)
		return -ENOTCONN;
	struct iovec iov = { (void *)h, sizeof(*h) };
	char cbuf[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)];
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	fdpass_attach(&m, cbuf, fds, nfds);
	ssize_t r;
	do
		r = sendmsg(client_fd, &m, MSG_NOSIGNAL | (block ? 0 : MSG_DONTWAIT));
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

int init_send(const struct wire_hdr *h, int fd, bool block)
{
	return send_fds(h, &fd, fd >= 0 ? 1 : 0, block);
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

/* The child's stdio: the pty's slave (which becomes its controlling
 * terminal), or the fds coved passed. */
static void child_stdio(const char *tty, int *fds, int nfds, uint32_t flags, int err_pipe)
{
	if (tty) {
		int t = open(tty, O_RDWR);
		if (t < 0 || ioctl(t, TIOCSCTTY, 0) < 0 || dup2(t, 0) < 0 || dup2(t, 1) < 0 || dup2(t, 2) < 0)
			report_and_exit(err_pipe, WIRE_STAGE_STDIO, errno ? errno : EBADF);
		if (t > 2)
			close(t);
		return;
	}
	int base = (flags & WIRE_FLAG_STDIN) ? 1 : 0;
	if (nfds < base + 2)
		report_and_exit(err_pipe, WIRE_STAGE_STDIO, EBADF);
	int in = base ? fds[0] : open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (in < 0 || dup2(in, 0) < 0 || dup2(fds[base], 1) < 0 || dup2(fds[base + 1], 2) < 0)
		report_and_exit(err_pipe, WIRE_STAGE_STDIO, errno ? errno : EBADF);
}

static void child_exec(struct wire_spawn *sp, const char *tty, int *fds, int nfds, uint32_t flags, int err_pipe)
{
	sigset_t all;
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	/* coved ignores SIGPIPE, and an ignored signal stays ignored across
	 * fork and exec: without this, `yes | head -1` would not end quietly. */
	signal(SIGPIPE, SIG_DFL);
	setsid();
	/* Orphans of its descendants stay below it (not re-parented to init)
	 * while it runs, so that a timeout can find and kill the whole tree,
	 * also what left the process group with setsid. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	child_stdio(tty, fds, nfds, flags, err_pipe);
	struct passwd_entry pw;
	int e = init_become_user(sp->user, &pw);
	if (e)
		report_and_exit(err_pipe, WIRE_STAGE_USER, e);
	const char *cwd = *sp->cwd ? sp->cwd : workspace ? workspace : pw.home;
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

/* A new pty for a WIRE_FLAG_TTY spawn, sized rows x cols when given: the
 * master, and the slave's path in slave. */
static int open_pty(int rows, int cols, char *slave, size_t cap)
{
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return -1;
	struct winsize ws = { .ws_row = rows > 0 ? rows : 24, .ws_col = cols > 0 ? cols : 80 };
	if (unlockpt(m) < 0 || ptsname_r(m, slave, cap) != 0 || ioctl(m, TIOCSWINSZ, &ws) < 0) {
		int e = errno;
		close(m);
		errno = e;
		return -1;
	}
	return m;
}

static void handle_spawn(const struct wire_hdr *h, const char *payload, int *fds, int nfds)
{
	static struct wire_spawn sp;
	bool tty = h->flags & WIRE_FLAG_TTY;
	int nstdio = tty ? 0 : (h->flags & WIRE_FLAG_STDIN ? 1 : 0) + 2;
	int nkeep = (h->flags & WIRE_FLAG_KEEP) ? h->value : 0;
	struct kept *k = nkeep ? kept_new() : NULL;
	if (wire_decode_spawn(payload, h->payload_len, &sp) < 0 || nkeep < 0 || nstdio + nkeep > nfds ||
	    nkeep + tty > WIRE_MAX_FDS || (nkeep && !k)) {
		send_msg(WIRE_SPAWN_FAILED, h->seq, WIRE_STAGE_FORK, nkeep && !k ? EMFILE : EINVAL);
		return;
	}
	char slave[64] = "";
	int master = -1;
	if (tty && (master = open_pty((uint32_t)h->pid >> 16, h->pid & 0xffff, slave, sizeof(slave))) < 0) {
		send_msg(WIRE_SPAWN_FAILED, h->seq, WIRE_STAGE_STDIO, errno);
		return;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		send_msg(WIRE_SPAWN_FAILED, h->seq, WIRE_STAGE_FORK, errno);
		if (master >= 0)
			close(master);
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		child_exec(&sp, tty ? slave : NULL, fds, nstdio, h->flags, p[1]);
	}
	close(p[1]);
	int msg[2];
	ssize_t r = 0;
	if (pid > 0)
		do
			r = read(p[0], msg, sizeof(msg));
		while (r < 0 && errno == EINTR);
	close(p[0]);
	if (pid < 0 || r == sizeof(msg)) {
		if (pid > 0)
			(void)waitpid(pid, NULL, 0);
		send_msg(WIRE_SPAWN_FAILED, h->seq, pid < 0 ? WIRE_STAGE_FORK : msg[0], pid < 0 ? errno : msg[1]);
		if (master >= 0)
			close(master);
		return;
	}
	spawned_add(pid);
	if (k) {
		/* Take the fds from the caller's list, which closes what is left. */
		*k = (struct kept){ .pid = pid, .nfds = nkeep };
		for (int i = 0; i < nkeep; i++) {
			k->fds[i] = fds[nstdio + i];
			fds[nstdio + i] = -1;
		}
		if (master >= 0)
			k->fds[k->nfds++] = fcntl(master, F_DUPFD_CLOEXEC, 3);
	}
	struct wire_hdr reply = { .type = WIRE_SPAWNED, .seq = h->seq, .pid = pid };
	(void)send_fds(&reply, &master, master >= 0 ? 1 : 0, master >= 0);
	if (master >= 0)
		close(master);
}

/* Send sig to pid's whole tree: every process whose parent chain reaches
 * it, then its group and itself. Descendants go first (they would be
 * re-parented to init once pid is gone); rounds repeat while a scan still
 * finds some, since a process may fork while it is being killed. */
static void kill_tree(pid_t root, int sig, bool descendants_only)
{
	static pid_t pids[65536], ppids[65536];
	/* Stopped, the process cannot see its children die and exit on its
	 * own before the signal reaches it: it dies of sig, as reported. */
	if (sig == SIGKILL && !descendants_only)
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
	if (descendants_only)
		return;
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
	int fds[WIRE_MAX_FDS];
	int nfds = fdpass_take(&m, fds, WIRE_MAX_FDS);
	struct wire_hdr h;
	if (wire_check_hdr(buf, n, &h) == 0 && !(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		if (h.type == WIRE_SPAWN)
			handle_spawn(&h, buf + sizeof(h), fds, nfds);
		else if (h.type == WIRE_SIGNAL && h.pid > 1 && (h.flags & (WIRE_FLAG_TREE | WIRE_FLAG_CHILDREN)))
			kill_tree(h.pid, h.value, h.flags & WIRE_FLAG_CHILDREN);
		else if (h.type == WIRE_SIGNAL && h.pid > 1)
			(void)kill((h.flags & WIRE_FLAG_GROUP) ? -h.pid : h.pid, h.value);
		else if (h.type == WIRE_PING)
			send_msg(WIRE_PONG, h.seq, 0, spawned_count());
		else if (h.type == WIRE_OPEN || h.type == WIRE_FSOP)
			files_handle(&h, buf + sizeof(h), nfds > 0 ? fds[0] : -1);
		else if (h.type == WIRE_LIST)
			send_kept_list(h.seq);
		else if (h.type == WIRE_RELEASE && kept_find(h.pid))
			kept_close(kept_find(h.pid), h.value);
	}
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

static void reap(void)
{
	int status;
	pid_t pid;
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		if (spawned_take(pid)) {
			struct kept *k = kept_find(pid);
			if (k) {
				k->exited = true;
				k->status = status;
			}
			send_msg(WIRE_EXITED, 0, pid, status);
		} else
			files_reaped(pid, status);
}

/* An isolated sandbox's socket is in its own network namespace, where its
 * processes could connect too: only a peer outside init's pid namespace
 * (SO_PEERCRED shows it as pid 0) is coved. An external sandbox's is a
 * host path only root may open. */
static bool peer_is_coved(int fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (workspace)
		return true;
	return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) == 0 && cr.pid == 0;
}

int main(int argc, char **argv)
{
	workspace = argc > 1 ? argv[1] : NULL;
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
	if (sfd < 0 || fcntl(LISTEN_FD, F_SETFD, FD_CLOEXEC) < 0 || files_set_root(workspace ? workspace : "/") < 0) {
		perror("cove-init");
		return 1;
	}
	/* Outside a pid namespace, orphans would go to coved or the host's
	 * init: as a subreaper it gets them, as a pid 1 does, to reap them. */
	if (workspace)
		prctl(PR_SET_CHILD_SUBREAPER, 1);
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
			if (fd >= 0 && !peer_is_coved(fd)) {
				close(fd);
				fd = -1;
			}
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

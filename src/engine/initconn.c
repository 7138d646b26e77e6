/* cove-init's messages to coved: reading one, handing it to whom it is for
 * (execs, kept processes, the Files API, watches), and closing the
 * connection for a memory snapshot's dump (sandboxes.c reads them as they
 * come). */
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/fdpass.h"
#include "common/wire.h"
#include "engine/engine.h"
#include "engine/files.h"
#include "engine/process.h"
#include "engine/sandboxes_private.h"
#include "engine/watch.h"

/* One packet from init: a header, and the fds that came with it (nfds of
 * them). Returns the recv result. */
ssize_t sandbox_recv_packet(int conn, struct wire_hdr *h, int *fds, int *nfds)
{
	char cbuf[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)];
	struct iovec iov = { h, sizeof(*h) };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	ssize_t n = recvmsg(conn, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	*nfds = n > 0 ? fdpass_take(&m, fds, WIRE_MAX_FDS) : 0;
	return n;
}

void sandbox_dispatch(struct sandbox *sb, const struct wire_hdr *h, int *fds, int nfds)
{
	int fd = nfds > 0 ? fds[0] : -1;
	if (h->type == WIRE_KEPT || h->type == WIRE_LIST_END) {
		procs_on_kept(sb, h, fds, nfds);
		return;
	}
	for (int i = 1; i < nfds; i++)
		close(fds[i]);
	if ((h->type == WIRE_OPENED || h->type == WIRE_OPEN_FAILED) &&
	    watch_on_init_reply(sb, h->seq, h->type == WIRE_OPENED, h->value, fd))
		return;
	if (h->type == WIRE_OPENED) {
		files_on_opened(sb, h->seq, h->flags, fd);
		return;
	}
	if (h->type == WIRE_SPAWNED && procs_on_spawned(sb, h->seq, h->pid, fd))
		return;
	if (fd >= 0)
		close(fd);
	if (h->type == WIRE_SPAWNED)
		exec_on_spawned(sb, h->seq, h->pid);
	else if (h->type == WIRE_SPAWN_FAILED && !procs_on_spawn_failed(sb, h->seq, h->pid, h->value))
		exec_on_spawn_failed(sb, h->seq, h->pid, h->value);
	else if (h->type == WIRE_EXITED && !procs_on_exited(sb, h->pid, h->value))
		exec_on_exited(sb, h->pid, h->value);
	else if (h->type == WIRE_OPEN_FAILED)
		files_on_failed(sb, h->seq, h->value);
	else if (h->type == WIRE_FSOP_DONE)
		files_on_done(sb, h->seq, h->value, h->pid != 0);
}

int sandbox_init_detach(struct sandbox *sb, struct cove_err *err)
{
	if (sb->conn_fd < 0)
		return 0;
	event_free(sb->conn_ev);
	sb->conn_ev = NULL;
	shutdown(sb->conn_fd, SHUT_WR);
	int r = -1, waits = 0;
	for (;;) {
		struct pollfd pf = { sb->conn_fd, POLLIN, 0 };
		struct wire_hdr h = { 0 };
		int fds[WIRE_MAX_FDS], nfds = 0;
		/* 10 s of silence in all; coved's signals (SIGCHLD) interrupt a wait. */
		int ready = poll(&pf, 1, 100);
		if ((ready < 0 && errno == EINTR) || (ready == 0 && ++waits < 100))
			continue;
		if (ready <= 0)
			break;
		ssize_t n = sandbox_recv_packet(sb->conn_fd, &h, fds, &nfds);
		if (n == 0)
			r = 0;
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			break;
		if (n == sizeof(h) && h.payload_len == 0)
			sandbox_dispatch(sb, &h, fds, nfds);
		else
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
	}
	close(sb->conn_fd);
	sb->conn_fd = -1;
	return r < 0 ? err_set(err, COVE_EINTERNAL, "cove-init of %s did not close its connection", sb->id) : 0;
}

int sandbox_init_take_kept(struct sandbox *sb, struct cove_err *err)
{
	struct wire_hdr list = { .type = WIRE_LIST };
	if (sandbox_send(sb, &list, sizeof(list), NULL, 0) < 0)
		return err_set(err, COVE_EINTERNAL, "ask cove-init of %s for its kept processes", sb->id);
	for (int waits = 0;;) {
		struct pollfd pf = { sb->conn_fd, POLLIN, 0 };
		struct wire_hdr h = { 0 };
		int fds[WIRE_MAX_FDS], nfds = 0;
		int ready = poll(&pf, 1, 100); /* 10 s of silence in all */
		if ((ready < 0 && errno == EINTR) || (ready == 0 && ++waits < 100))
			continue;
		if (ready <= 0)
			break;
		ssize_t n = sandbox_recv_packet(sb->conn_fd, &h, fds, &nfds);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			break;
		if (n == sizeof(h) && h.payload_len == 0 && h.type == WIRE_LIST_END)
			return 0;
		if (n == sizeof(h) && h.payload_len == 0)
			sandbox_dispatch(sb, &h, fds, nfds);
		else
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
	}
	return err_set(err, COVE_EINTERNAL, "cove-init of %s did not list its kept processes", sb->id);
}

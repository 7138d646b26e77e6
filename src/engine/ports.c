/* A sandbox's open ports and connections to them (ports.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/parse.h"
#include "engine/engine.h"
#include "engine/ports.h"
#include "store/store.h"

const struct sandbox_port *ports_find(const struct sandbox *sb, int port)
{
	for (const struct sandbox_port *p = sb->ports; p; p = p->next)
		if (p->port == port)
			return p;
	return NULL;
}

/* Into sb's list, kept in port order. */
static void insert(struct sandbox *sb, struct sandbox_port *n)
{
	struct sandbox_port **at = &sb->ports;
	while (*at && (*at)->port < n->port)
		at = &(*at)->next;
	n->next = *at;
	*at = n;
}

static void load_one(void *arg, const struct store_port *row)
{
	struct engine *d = arg;
	struct sandbox *sb = sandbox_find(d, row->sandbox);
	struct cove_err err = { 0 };
	if (!sb || sb->state == SB_DELETING || row->port < 1 || row->port > 65535 ||
	    strlen(row->token) != PORT_TOKEN_LEN || ports_find(sb, row->port)) {
		/* A sandbox deleted by a crash between its row and its ports'. */
		if (store_delete_port(d->store, row->sandbox, row->port, &err) < 0)
			log_warn("ports: %s", err.msg);
		return;
	}
	struct sandbox_port *p = calloc(1, sizeof(*p));
	if (!p) {
		log_error("sandbox %s: port %d: out of memory", sb->id, row->port);
		return;
	}
	p->port = row->port;
	p->public = row->public;
	p->created_at = row->created_at;
	memcpy(p->token, row->token, PORT_TOKEN_LEN + 1);
	insert(sb, p);
}

int ports_load(struct engine *d, struct cove_err *err)
{
	return store_each_port(d->store, load_one, d, err);
}

static int check_port(int port, struct cove_err *err)
{
	if (port < 1 || port > 65535)
		return err_set(err, COVE_EINVAL, "'port' must be from 1 to 65535, not %d", port);
	return 0;
}

static int count(const struct sandbox *sb)
{
	int n = 0;
	for (const struct sandbox_port *p = sb->ports; p; p = p->next)
		n++;
	return n;
}

static int save(struct engine *d, const struct sandbox *sb, const struct sandbox_port *p, struct cove_err *err)
{
	const struct store_port row = {
		.sandbox = sb->id, .port = p->port, .token = p->token, .public = p->public, .created_at = p->created_at
	};
	return store_put_port(d->store, &row, err);
}

int ports_open(struct engine *d, struct sandbox *sb, int port, bool public, const struct sandbox_port **ret,
	       struct cove_err *err)
{
	if (check_port(port, err) < 0)
		return -1;
	struct sandbox_port *old = (struct sandbox_port *)ports_find(sb, port);
	if (old) {
		struct sandbox_port next = *old;
		next.public = public;
		/* Stored first: what is in force is what a restart brings back. */
		if (save(d, sb, &next, err) < 0)
			return -1;
		old->public = public;
		*ret = old;
		return 0;
	}
	if (count(sb) >= PORTS_MAX)
		return err_set(err, COVE_EFULL, "sandbox '%s' has %d open ports already, the most", sb->id, PORTS_MAX);
	char token[PORT_TOKEN_LEN + 1];
	int r = random_hex(token, PORT_TOKEN_LEN / 2);
	if (r < 0)
		return err_sys(err, -r, "a port token");
	struct sandbox_port *p = calloc(1, sizeof(*p));
	if (!p)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	p->port = port;
	p->public = public;
	p->created_at = sandbox_now_ms();
	memcpy(p->token, token, sizeof(token));
	explicit_bzero(token, sizeof(token));
	if (save(d, sb, p, err) < 0) {
		free(p);
		return -1;
	}
	insert(sb, p);
	*ret = p;
	return 0;
}

int ports_close(struct engine *d, struct sandbox *sb, int port, struct cove_err *err)
{
	if (check_port(port, err) < 0)
		return -1;
	struct sandbox_port **at = &sb->ports;
	while (*at && (*at)->port != port)
		at = &(*at)->next;
	if (!*at)
		return err_set(err, COVE_ENOTFOUND, "port %d of sandbox '%s' is not open", port, sb->id);
	if (store_delete_port(d->store, sb->id, port, err) < 0)
		return -1;
	struct sandbox_port *p = *at;
	*at = p->next;
	explicit_bzero(p->token, sizeof(p->token));
	free(p);
	if (d->on_port_closed)
		d->on_port_closed(sb->id, port);
	return 0;
}

void ports_drop_all(struct engine *d, struct sandbox *sb)
{
	while (sb->ports) {
		struct sandbox_port *p = sb->ports;
		sb->ports = p->next;
		explicit_bzero(p->token, sizeof(p->token));
		free(p);
	}
	if (d->on_port_closed)
		d->on_port_closed(sb->id, 0);
}

/* The calling thread's network namespace, kept open: the way back after
 * a socket was made in a sandbox's. */
static int host_netns(void)
{
	static int fd = -1;
	if (fd < 0)
		fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	return fd;
}

/* A socket of family made in the network namespace of pid. A socket stays
 * in the namespace it was made in whatever thread uses it, so the loop
 * thread enters the sandbox's namespace for the one socket() call and
 * comes back at once: a few microseconds, no thread to start. Coming back
 * cannot fail (coved holds the host's namespace open, with every
 * capability there); if it ever did, coved must not go on making host
 * sockets (nftables, listeners) in a sandbox's namespace: it stops, and
 * the next coved takes the sandboxes over. */
static int socket_in(pid_t pid, int family)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	int host = host_netns();
	if (host < 0)
		return -errno;
	_cleanup_close_ int ns = open(path, O_RDONLY | O_CLOEXEC);
	if (ns < 0)
		return -errno;
	if (setns(ns, CLONE_NEWNET) < 0)
		return -errno;
	int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int e = errno;
	if (setns(host, CLONE_NEWNET) < 0) {
		log_error("ports: back to the host's network namespace: %s; stopping", strerror(errno));
		abort();
	}
	return fd < 0 ? -e : fd;
}

int ports_connect(struct engine *d, struct sandbox *sb, int port, bool v6, int *ret_fd, struct cove_err *err)
{
	(void)d;
	if (check_port(port, err) < 0)
		return -1;
	if (sb->state != SB_RUNNING || sb->init_pid <= 0)
		return err_set(err, COVE_ESTATE, "sandbox '%s' is not running", sb->id);
	int family = v6 ? AF_INET6 : AF_INET;
	_cleanup_close_ int fd = sb->spec.external ? socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)
						   : socket_in(sb->init_pid, family);
	if (fd < 0)
		return err_sys(err, sb->spec.external ? errno : -fd, "sandbox '%s': a socket in its network", sb->id);
	struct sockaddr_in sa4 = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = in6addr_loopback };
	sa4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int r = v6 ? connect(fd, (struct sockaddr *)&sa6, sizeof(sa6))
		   : connect(fd, (struct sockaddr *)&sa4, sizeof(sa4));
	if (r < 0 && errno != EINPROGRESS)
		return err_sys(err, errno, "sandbox '%s': connect to port %d", sb->id, port);
	*ret_fd = TAKE_FD(fd);
	return 0;
}

void ports_activity(struct engine *d, const char *id, int delta)
{
	struct sandbox *sb = sandbox_find(d, id);
	if (sb)
		sb->port_conns += delta;
	if (sb && sb->port_conns < 0)
		sb->port_conns = 0;
}

int ports_active(const struct sandbox *sb)
{
	return sb->port_conns;
}

json_t *ports_to_json(const struct sandbox *sb, const struct sandbox_port *p)
{
	char url[256];
	json_t *j = json_pack("{s:i, s:b, s:I}", "port", p->port, "public", p->public, "created_at",
			      (json_int_t)p->created_at);
	if (engine_ctx && engine_ctx->port_url && engine_ctx->port_url(sb->id, p->port, url, sizeof(url)) == 0)
		json_object_set_new(j, "url", json_string(url));
	return j;
}

json_t *ports_list_json(const struct sandbox *sb)
{
	json_t *a = json_array();
	for (const struct sandbox_port *p = sb->ports; p; p = p->next)
		json_array_append_new(a, ports_to_json(sb, p));
	return a;
}

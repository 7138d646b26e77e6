/* A sandbox's ports opened to coved's proxy (daemon/proxy), and the one
 * way any front end reaches a port of a sandbox: ports_connect.
 *
 * An open port is a record: its number, whether it is public, and its
 * traffic token (32 hex digits, new at the first open), kept in state.db
 * (table ports) so that a coved restart keeps it; it goes with its
 * sandbox. What URL a port has is the proxy's (the engine knows no host
 * names); what a request must show is the proxy's to check against
 * ports_find's record.
 *
 * A sandbox's ports are not carried by snapshots, restores or forks: a new
 * sandbox opens its own (a copy must not answer on its origin's token). */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

#define PORTS_MAX 64      /* open ports per sandbox */
#define PORT_TOKEN_LEN 32 /* hex digits */

struct engine;
struct sandbox;

struct sandbox_port {
	int port; /* 1-65535 */
	bool public;
	char token[PORT_TOKEN_LEN + 1];
	int64_t created_at; /* unix ms */
	struct sandbox_port *next;
};

/* After sandboxes_load: the ports state.db has, onto their sandboxes (rows
 * of sandboxes that are gone are dropped). */
int ports_load(struct engine *d, struct cove_err *err);
/* Open port (1-65535) of sb, or change an open one's public flag (its
 * token stays): stored, then in force. *ret is borrowed, valid until the
 * port is closed. 400 for a bad port, 429 past PORTS_MAX. */
int ports_open(struct engine *d, struct sandbox *sb, int port, bool public, const struct sandbox_port **ret,
	       struct cove_err *err);
/* Close it (404 if it is not open); the front ends' connections to it are
 * ended through d->on_port_closed. */
int ports_close(struct engine *d, struct sandbox *sb, int port, struct cove_err *err);
/* The open port's record, or NULL. */
const struct sandbox_port *ports_find(const struct sandbox *sb, int port);
/* At sandbox_delete (the store's row goes with the sandbox's): forget the
 * records, end the connections. */
void ports_drop_all(struct engine *d, struct sandbox *sb);

/* A TCP connection to port of sb, as seen from inside the sandbox: a
 * non-blocking socket (*ret_fd, O_CLOEXEC) made in the sandbox's network
 * namespace and connecting to its loopback (127.0.0.1, or ::1 with v6),
 * so that a server bound to localhost only is reached too, and for either
 * network mode ("none" has no other address; with "egress" the packets
 * still never leave the namespace). An external sandbox shares the host's
 * network: its port is the host's loopback's. The connect is under way on
 * return (EINPROGRESS): the caller learns its end from the socket. 409
 * when sb is not running, 400 for a bad port. Never blocks. */
int ports_connect(struct engine *d, struct sandbox *sb, int port, bool v6, int *ret_fd, struct cove_err *err);

/* Activity: a front end's connection to a port of sb opened or closed (the
 * proxy's, a port-forward's). While one is open the sandbox is in use:
 * idle handling (life) reads ports_active. */
void ports_activity(struct engine *d, const char *id, int delta);
int ports_active(const struct sandbox *sb);

/* One open port as {port, public, created_at, url (d->port_url's)}: no
 * token (a front end adds it where the caller may see it). */
json_t *ports_to_json(const struct sandbox *sb, const struct sandbox_port *p);
/* All of sb's, by port: the sandbox's JSON "ports". */
json_t *ports_list_json(const struct sandbox *sb);

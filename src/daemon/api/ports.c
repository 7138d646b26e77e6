/* cove's REST API: a sandbox's ports. Open, list and close a port's URL
 * on the port proxy (daemon/proxy), and port-forward: a raw TCP stream to
 * any port of the sandbox over the API connection itself (an upgrade, as
 * a terminal's attach), for what is not HTTP (a database, SSH). */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/api/api.h"
#include "daemon/api/reply.h"
#include "daemon/api/request.h"
#include "daemon/http/conn.h"
#include "daemon/proxy/proxy.h"
#include "engine/engine.h"
#include "engine/ports.h"

#define FORWARD_HIGH_WATER (256u << 10)

/* One port's JSON with its token: the API's caller owns the sandbox. */
static json_t *port_json(const struct sandbox *sb, const struct sandbox_port *p)
{
	json_t *j = ports_to_json(sb, p);
	json_object_set_new(j, "token", json_string(p->token));
	return j;
}

/* The {port} segment after ".../ports/": 1-65535. */
static int port_of_path(struct http_req *req, int *ret, struct cove_err *err)
{
	const char *p = strstr(http_req_path(req), "/ports/");
	char *end;
	errno = 0;
	long v = p ? strtol(p + 7, &end, 10) : 0;
	if (!p || end == p + 7 || (*end && *end != '/') || errno || v < 1 || v > 65535)
		return err_set(err, COVE_EINVAL, "the port in the path must be from 1 to 65535");
	*ret = (int)v;
	return 0;
}

int h_ports_open(struct http_req *req, const char *id, struct cove_err *err)
{
	static const char *const fields[] = { "port", "public", NULL };
	struct sandbox *sb = api_lookup(id, err);
	json_t *j = sb ? read_body(req, err) : NULL;
	if (!j)
		return -1;
	bool public = false;
	double port = 0;
	json_t *v = json_object_get(j, "port");
	int r = check_fields(j, fields, err) < 0 || get_bool(j, "public", &public, err) < 0 ? -1 : 0;
	if (r == 0 && (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65535))
		r = err_set(err, COVE_EINVAL, "'port' must be a whole number from 1 to 65535");
	if (r == 0)
		port = (double)json_integer_value(v);
	json_decref(j);
	if (r < 0)
		return -1;
	if (!proxy_serving())
		return err_set(err, COVE_ESTATE, "coved serves no port proxy (see coved --proxy-listen)");
	bool existed = ports_find(sb, (int)port) != NULL;
	const struct sandbox_port *p;
	if (ports_open(engine_ctx, sb, (int)port, public, &p, err) < 0)
		return -1;
	reply_json(req, existed ? 200 : 201, port_json(sb, p));
	return 0;
}

int h_ports_list(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb = api_lookup(id, err);
	if (!sb)
		return -1;
	json_t *a = json_array();
	for (const struct sandbox_port *p = sb->ports; p; p = p->next)
		json_array_append_new(a, port_json(sb, p));
	reply_json(req, 200, json_pack("{s:o}", "ports", a));
	return 0;
}

int h_port_close(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb = api_lookup(id, err);
	int port;
	if (!sb || port_of_path(req, &port, err) < 0 || ports_close(engine_ctx, sb, port, err) < 0)
		return -1;
	reply_json(req, 200, json_pack("{s:s, s:i, s:b}", "id", id, "port", port, "closed", 1));
	return 0;
}

/* ---- port-forward: the upgraded connection and the sandbox's port ---- */

struct forward {
	struct http_conn *conn;
	struct bufferevent *up;
	char id[16];
	bool cli_eof, up_eof;
};

static void fwd_pump(struct forward *f)
{
	struct evbuffer *in = http_conn_input(f->conn), *out = bufferevent_get_output(f->up);
	size_t room = evbuffer_get_length(out) < FORWARD_HIGH_WATER ? FORWARD_HIGH_WATER - evbuffer_get_length(out) : 0;
	if (room)
		evbuffer_remove_buffer(in, out, room); /* the rest waits there: httpd stops reading */
	if (f->cli_eof && evbuffer_get_length(in) == 0 && evbuffer_get_length(out) == 0)
		(void)shutdown(bufferevent_getfd(f->up), SHUT_WR);
}

static void fwd_on_input(struct http_conn *conn, void *arg)
{
	fwd_pump(arg);
}

static void fwd_on_input_end(struct http_conn *conn, void *arg)
{
	struct forward *f = arg;
	f->cli_eof = true;
	fwd_pump(f);
}

static void fwd_on_drained(struct http_conn *conn, void *arg)
{
	struct forward *f = arg;
	if (!f->up_eof)
		bufferevent_enable(f->up, EV_READ);
}

static void fwd_up_read(struct bufferevent *bev, void *arg)
{
	struct forward *f = arg;
	struct evbuffer *out = bufferevent_get_output(http_conn_bev(f->conn));
	evbuffer_add_buffer(out, bufferevent_get_input(bev));
	if (evbuffer_get_length(out) >= FORWARD_HIGH_WATER)
		bufferevent_disable(bev, EV_READ); /* fwd_on_drained resumes it */
}

static void fwd_up_write(struct bufferevent *bev, void *arg)
{
	fwd_pump(arg);
}

static void fwd_up_event(struct bufferevent *bev, short what, void *arg)
{
	struct forward *f = arg;
	f->up_eof = true;
	bufferevent_disable(bev, EV_READ);
	/* The port's end (or an error): the client gets what came, then the
	 * connection's end. */
	http_conn_close_when_sent(f->conn);
}

static void fwd_closed(struct http_conn *conn, void *arg)
{
	struct forward *f = arg;
	bufferevent_free(f->up);
	ports_activity(engine_ctx, f->id, -1);
	free(f);
}

static int forward(struct http_req *req, struct sandbox *sb, int port, struct cove_err *err)
{
	static const struct http_raw_callbacks cbs = { .on_input = fwd_on_input,
						       .on_input_end = fwd_on_input_end,
						       .on_drained = fwd_on_drained };
	int fd;
	struct forward *f = calloc(1, sizeof(*f));
	if (!f)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	if (ports_connect(engine_ctx, sb, port, false, &fd, err) < 0) {
		free(f);
		return -1;
	}
	f->up = bufferevent_socket_new(engine_ctx->base, fd, BEV_OPT_CLOSE_ON_FREE);
	f->conn = http_req_conn(req);
	snprintf(f->id, sizeof(f->id), "%s", sb->id);
	if (!f->up || conn_set_hook(f->conn, fwd_closed, f) < 0) {
		if (f->up)
			bufferevent_free(f->up);
		else
			close(fd);
		free(f);
		return err_set(err, COVE_EINTERNAL, "out of memory");
	}
	ports_activity(engine_ctx, f->id, +1);
	bufferevent_setcb(f->up, fwd_up_read, fwd_up_write, fwd_up_event, f);
	bufferevent_setwatermark(f->up, EV_WRITE, FORWARD_HIGH_WATER / 2, 0);
	bufferevent_enable(f->up, EV_READ | EV_WRITE);
	if (http_upgrade(req, "tcp", &cbs, f) < 0) {
		conn_clear_hook(f->conn, f);
		fwd_closed(f->conn, f);
		return err_set(err, COVE_EINTERNAL, "the connection cannot be upgraded");
	}
	return 0;
}

int h_port_forward(struct http_req *req, const char *id, struct cove_err *err)
{
	struct sandbox *sb = api_lookup(id, err);
	const char *protocol = NULL;
	int port;
	if (!sb || port_of_path(req, &port, err) < 0)
		return -1;
	int upgrade = http_req_upgrade(req, &protocol);
	if (upgrade <= 0 || strcasecmp(protocol, "tcp") != 0)
		return err_set(err, COVE_EINVAL, "a port-forward needs 'Connection: Upgrade' and 'Upgrade: tcp'");
	return forward(req, sb, port, err);
}

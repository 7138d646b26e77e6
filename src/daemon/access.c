/* Who may reach coved's API, and how much of coved one client may hold.
 *
 * The API is always served on the unix socket, whose file mode (0660) is its
 * access control. With --listen ADDR:PORT it is also served over TCP, and
 * there every request must carry "Authorization: Bearer <token>", the token
 * being the content of a file only coved's user can read. A request without
 * it gets a 401 and does nothing else.
 *
 * Limits, on both listeners. Each listener counts its own connections, so
 * that clients on TCP can never lock the local CLI out of the unix socket.
 *   --max-header-bytes  a request's line and headers (libevent answers 400)
 *   --max-body-bytes    a request's body (libevent answers 413)
 *   --max-connections   connections at once per listener; one more is
 *                       answered 503 and closed at once
 *   --idle-timeout      a connection with no request under way is closed
 *                       after this long (unless it owns ephemeral sandboxes:
 *                       closing it would delete them)
 *   --request-timeout   a request must have come whole (headers and body)
 *                       this long after its first byte, or the connection is
 *                       closed. An inactivity timeout alone would let a
 *                       client that sends a byte a second (slowloris) hold a
 *                       connection for ever.
 * Once the API has a request, no limit applies until its response has been
 * sent: a stream (an exec's output) runs for as long as it needs.
 *
 * How coved sees a connection before its first request: libevent shows a
 * server connection to the application only with a complete request, but a
 * silent or slow client must be cut before that. evhttp_set_bevcb lets coved
 * make each new connection's bufferevent. coved keeps a reference on it, so
 * the memory stays valid whatever libevent does with the connection; watches
 * its input buffer for a request's first byte; and finds the connection as
 * the bufferevent's callback argument, which evhttp sets to its
 * evhttp_connection and bufferevent_free clears (libevent 2.1 and 2.2). Once
 * found, the connection's close callback (conn.c) says when it goes. */
#include <errno.h>
#include <stddef.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/io.h"
#include "common/log.h"
#include "common/netaddr.h"
#include "common/parse.h"
#include "daemon/daemon.h"

#define TOKEN_MIN 32   /* bytes: 256 bits of hex, or a 32-character passphrase */
#define TOKEN_MAX 4096 /* it travels in a header, under --max-header-bytes */

/* Defaults, for what a flag left 0. */
#define DEFAULT_MAX_HEADER_BYTES 16384
#define DEFAULT_MAX_BODY_BYTES ((16u << 20) + (64u << 20) / 3 * 4) /* 64 MiB of base64 stdin, plus the rest */
#define DEFAULT_MAX_CONNECTIONS 1024
#define DEFAULT_IDLE_TIMEOUT 60.0    /* seconds */
#define DEFAULT_REQUEST_TIMEOUT 60.0 /* seconds */

enum listener { LISTENER_UNIX, LISTENER_TCP, NLISTENERS };

enum phase {
	PHASE_NEW,       /* accepted; attached on the next turn of the loop */
	PHASE_IDLE,      /* no request under way: --idle-timeout runs */
	PHASE_RECEIVING, /* a request's first byte came: --request-timeout runs */
	PHASE_HANDLING,  /* the API has the request: no limit */
};

struct access_conn {
	struct access_conn *next, *prev;
	struct bufferevent *bev;         /* coved holds a reference */
	struct evhttp_connection *evcon; /* once attached */
	struct evbuffer_cb_entry *input_cb;
	struct event *timer; /* the phase's limit */
	enum phase phase;
	enum listener listener;
	bool counted;     /* in count[listener] */
	bool refused;     /* over --max-connections */
	bool early_bytes; /* a request began before it was attached */
};

static struct {
	const struct access_config *cfg;
	char token[TOKEN_MAX + 1];
	size_t token_len;
	int tcp_fd;
	char tcp_name[64];
	struct evhttp_bound_socket *tcp_handle;
	struct access_conn *conns; /* every connection libevent accepted */
	int count[NLISTENERS];
	time_t logged_refusal, logged_timeout;
} gate = { .tcp_fd = -1 };

/* ---------------------------------------------------------------- options */

static const struct access_option {
	const char *name;
	enum { OPT_TEXT, OPT_SIZE, OPT_COUNT, OPT_SECONDS } kind;
	size_t offset, cap; /* the field in struct access_config; cap for text */
} options[] = {
	{ "listen", OPT_TEXT, offsetof(struct access_config, listen), sizeof(((struct access_config *)0)->listen) },
	{ "token-file", OPT_TEXT, offsetof(struct access_config, token_file),
	  sizeof(((struct access_config *)0)->token_file) },
	{ "max-header-bytes", OPT_SIZE, offsetof(struct access_config, max_header_bytes), 0 },
	{ "max-body-bytes", OPT_SIZE, offsetof(struct access_config, max_body_bytes), 0 },
	{ "max-connections", OPT_COUNT, offsetof(struct access_config, max_connections), 0 },
	{ "idle-timeout", OPT_SECONDS, offsetof(struct access_config, idle_timeout), 0 },
	{ "request-timeout", OPT_SECONDS, offsetof(struct access_config, request_timeout), 0 },
};

int access_parse_option(struct access_config *cfg, const char *name, const char *value, struct cove_err *err)
{
	for (size_t i = 0; i < ARRAY_SIZE(options); i++) {
		const struct access_option *o = &options[i];
		void *field = (char *)cfg + o->offset;
		uint64_t size;
		char *end;
		double seconds;
		long n;
		if (strcmp(name, o->name) != 0)
			continue;
		switch (o->kind) {
		case OPT_TEXT:
			if (!*value || strlen(value) >= o->cap)
				return err_set(err, COVE_EINVAL, "--%s: empty or too long", name);
			snprintf(field, o->cap, "%s", value);
			return 0;
		case OPT_SIZE:
			if (parse_size(value, &size) < 0 || size < 1 || size > (1ull << 40))
				return err_set(err, COVE_EINVAL, "--%s: '%s' is not a size like 16K or 100M", name,
					       value);
			*(uint64_t *)field = size;
			return 0;
		case OPT_COUNT:
			errno = 0;
			n = strtol(value, &end, 10);
			if (errno || end == value || *end || n < 1 || n > 1000000)
				return err_set(err, COVE_EINVAL, "--%s: '%s' is not a number from 1 to 1000000", name,
					       value);
			*(int *)field = (int)n;
			return 0;
		case OPT_SECONDS:
			errno = 0;
			seconds = strtod(value, &end);
			if (errno || end == value || *end || !(seconds >= 0.001 && seconds <= 86400 * 365))
				return err_set(err, COVE_EINVAL, "--%s: '%s' is not a number of seconds above 0", name,
					       value);
			*(double *)field = seconds;
			return 0;
		}
	}
	return err_set(err, COVE_EINVAL, "unknown option --%s", name);
}

static void config_defaults(struct access_config *cfg)
{
	if (!cfg->max_header_bytes)
		cfg->max_header_bytes = DEFAULT_MAX_HEADER_BYTES;
	if (!cfg->max_body_bytes)
		cfg->max_body_bytes = DEFAULT_MAX_BODY_BYTES;
	if (!cfg->max_connections)
		cfg->max_connections = DEFAULT_MAX_CONNECTIONS;
	if (!cfg->idle_timeout)
		cfg->idle_timeout = DEFAULT_IDLE_TIMEOUT;
	if (!cfg->request_timeout)
		cfg->request_timeout = DEFAULT_REQUEST_TIMEOUT;
}

/* ---------------------------------------------------------------- the token */

/* The token file must be a regular file of coved's user that no one else
 * may read or change: anyone who can read it can run anything in every
 * sandbox. Trailing whitespace (a newline) is not part of the token; the
 * rest must be visible ASCII, as it travels in a header. */
static int load_token(const char *path, struct cove_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	char buf[TOKEN_MAX + 64];
	size_t n = 0;
	if (fd < 0 || fstat(fd, &st) < 0)
		return err_sys(err, errno, "token file '%s'", path);
	if (!S_ISREG(st.st_mode))
		return err_set(err, COVE_EINVAL, "token file '%s' is not a regular file", path);
	if (st.st_mode & 077)
		return err_set(err, COVE_EINVAL,
			       "token file '%s' has mode %04o: only its owner may have access (chmod 600 '%s')", path,
			       (unsigned)(st.st_mode & 07777), path);
	if (st.st_uid != geteuid())
		return err_set(err, COVE_EINVAL, "token file '%s' belongs to uid %u, not to coved's user (uid %u)",
			       path, (unsigned)st.st_uid, (unsigned)geteuid());
	while (n < sizeof(buf)) {
		ssize_t r = read(fd, buf + n, sizeof(buf) - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return err_sys(err, errno, "read token file '%s'", path);
		if (r == 0)
			break;
		n += (size_t)r;
	}
	while (n > 0 && strchr(" \t\r\n", buf[n - 1]))
		n--;
	if (n < TOKEN_MIN || n > TOKEN_MAX)
		return err_set(err, COVE_EINVAL, "the token in '%s' must be %d to %d bytes long, not %zu", path,
			       TOKEN_MIN, TOKEN_MAX, n);
	for (size_t i = 0; i < n; i++)
		if (buf[i] < 0x21 || buf[i] > 0x7e)
			return err_set(err, COVE_EINVAL,
				       "the token in '%s' must be visible ASCII (byte %zu is not): it goes in a header",
				       path, i);
	memcpy(gate.token, buf, n);
	gate.token[n] = '\0';
	gate.token_len = n;
	explicit_bzero(buf, sizeof(buf));
	return 0;
}

/* A new token file at path, unless one is there: 32 random bytes as hex,
 * created 0600 and exclusive, so an existing file (or a symlink planted in
 * its place) is never overwritten. */
static int make_token_file(const char *path, struct cove_err *err)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char raw[32];
	char text[2 * sizeof(raw) + 1];
	if (getrandom(raw, sizeof(raw), 0) != sizeof(raw))
		return err_sys(err, errno, "getrandom");
	for (size_t i = 0; i < sizeof(raw); i++) {
		text[2 * i] = hex[raw[i] >> 4];
		text[2 * i + 1] = hex[raw[i] & 15];
	}
	text[sizeof(text) - 1] = '\n';
	explicit_bzero(raw, sizeof(raw));
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST)
		return 0;
	int r = fd < 0 ? -errno : io_write_all(fd, text, sizeof(text));
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	explicit_bzero(text, sizeof(text));
	if (r < 0) {
		if (fd >= 0)
			(void)unlink(path);
		return err_sys(err, -r, "create token file '%s'", path);
	}
	log_info("coved: made a new API token in '%s'", path);
	return 0;
}

/* Constant time: how long it takes depends on the lengths only, never on
 * where the given token first differs, so timing cannot find the token a
 * byte at a time. */
static bool token_matches(const char *given, size_t len)
{
	volatile unsigned char diff = len != gate.token_len;
	for (size_t i = 0; i < gate.token_len; i++)
		diff |= (unsigned char)gate.token[i] ^ (unsigned char)(i < len ? given[i] : 0);
	return diff == 0;
}

static bool authorized(struct evhttp_request *req)
{
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return false;
	for (h += 7; *h == ' '; h++)
		;
	return token_matches(h, strlen(h));
}

/* ---------------------------------------------------------------- connections */

/* At most a line a second for what a flood of clients would repeat. */
static bool log_allowed(time_t *last)
{
	time_t now = time(NULL);
	if (now == *last)
		return false;
	*last = now;
	return true;
}

static struct access_conn *find_conn(const struct bufferevent *bev)
{
	for (struct access_conn *c = gate.conns; c; c = c->next)
		if (c->bev == bev)
			return c;
	return NULL;
}

static void conn_free(struct access_conn *c)
{
	if (c->next)
		c->next->prev = c->prev;
	if (c->prev)
		c->prev->next = c->next;
	else if (gate.conns == c)
		gate.conns = c->next;
	if (c->counted)
		gate.count[c->listener]--;
	if (c->timer)
		event_free(c->timer);
	if (c->input_cb)
		evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->input_cb);
	/* The last reference, or the one before libevent's own, which it drops
	 * right after the close callback. */
	bufferevent_decref(c->bev);
	free(c);
}

/* The evhttp_connection that owns bev, or NULL once libevent has freed it. */
static struct evhttp_connection *connection_of(struct bufferevent *bev)
{
	void *arg = NULL;
	bufferevent_getcb(bev, NULL, NULL, NULL, &arg);
	return arg;
}

static void arm(struct access_conn *c, double seconds)
{
	struct timeval tv = { (time_t)seconds, (suseconds_t)((seconds - (time_t)seconds) * 1e6) };
	evtimer_add(c->timer, &tv);
}

static void set_phase(struct access_conn *c, enum phase phase)
{
	c->phase = phase;
	evtimer_del(c->timer);
	if (phase == PHASE_IDLE)
		arm(c, gate.cfg->idle_timeout);
	else if (phase == PHASE_RECEIVING)
		arm(c, gate.cfg->request_timeout);
}

static bool input_pending(const struct access_conn *c)
{
	return evbuffer_get_length(bufferevent_get_input(c->bev)) > 0;
}

static void on_closed(struct evhttp_connection *evcon, void *arg)
{
	conn_free(arg);
}

/* Attach c to its connection: close callback, listener, count. -1 when out
 * of memory (c stays unattached). */
static int attach(struct access_conn *c, struct evhttp_connection *evcon)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len = sizeof(ss);
	int fd = bufferevent_getfd(c->bev), one = 1;
	if (conn_watch(evcon, on_closed, c) < 0)
		return -1;
	c->evcon = evcon;
	(void)getsockname(fd, (struct sockaddr *)&ss, &len);
	c->listener = ss.ss_family == AF_INET || ss.ss_family == AF_INET6 ? LISTENER_TCP : LISTENER_UNIX;
	if (c->listener == LISTENER_TCP) /* events of a stream go out as they come, not after an ACK */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (gate.count[c->listener] >= gate.cfg->max_connections) {
		c->refused = true;
		if (log_allowed(&gate.logged_refusal))
			log_info("coved: refused a connection on the %s listener: %d are open (--max-connections)",
				 c->listener == LISTENER_TCP ? "TCP" : "unix", gate.count[c->listener]);
		return 0;
	}
	c->counted = true;
	gate.count[c->listener]++;
	return 0;
}

/* A whole response written straight to the socket, for a connection coved
 * is about to close before libevent has a request to answer. Best effort:
 * the socket is non-blocking and this is far below its buffer. */
static void send_raw_error(struct access_conn *c, int status, const char *reason, const char *code, const char *message)
{
	char body[256], buf[512];
	int n = snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n", code, message);
	n = snprintf(buf, sizeof(buf),
		     "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
		     "Connection: close\r\n\r\n%s",
		     status, reason, n, body);
	if (n > 0 && (size_t)n < sizeof(buf))
		(void)send(bufferevent_getfd(c->bev), buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct access_conn *c = arg;
	struct evhttp_connection *evcon;
	switch (c->phase) {
	case PHASE_NEW:
		evcon = connection_of(c->bev);
		if (!evcon) { /* closed before it was attached */
			conn_free(c);
			return;
		}
		if (attach(c, evcon) < 0) {
			evhttp_connection_free(evcon);
			conn_free(c);
			return;
		}
		if (c->refused) {
			send_raw_error(c, 503, "Service Unavailable", "unavailable", "too many connections");
			evhttp_connection_free(evcon); /* calls on_closed */
			return;
		}
		set_phase(c, c->early_bytes ? PHASE_RECEIVING : PHASE_IDLE);
		return;
	case PHASE_IDLE:
		/* Its ephemeral sandboxes live as long as it does: an idle
		 * owner is still their owner. */
		if (conn_owns_sandboxes(c->evcon)) {
			set_phase(c, PHASE_IDLE);
			return;
		}
		log_debug("coved: closing a connection idle for %gs", gate.cfg->idle_timeout);
		evhttp_connection_free(c->evcon);
		return;
	case PHASE_RECEIVING:
		if (log_allowed(&gate.logged_timeout))
			log_info("coved: closing a connection whose request did not come whole in %gs "
				 "(--request-timeout)",
				 gate.cfg->request_timeout);
		send_raw_error(c, 408, "Request Timeout", "timeout", "the request did not come whole in time");
		evhttp_connection_free(c->evcon);
		return;
	case PHASE_HANDLING:
		return;
	}
}

/* Bytes came in: in an idle connection they start a request. (libevent
 * may have taken them out again, parsed, by the time c is attached.) */
static void on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct access_conn *c = arg;
	if (info->n_added == 0)
		return;
	if (c->phase == PHASE_IDLE)
		set_phase(c, PHASE_RECEIVING);
	else if (c->phase == PHASE_NEW)
		c->early_bytes = true;
}

static struct bufferevent *on_accept(struct event_base *base, void *arg)
{
	static const struct timeval now = { 0, 0 };
	struct access_conn *c = calloc(1, sizeof(*c));
	struct bufferevent *bev = bufferevent_socket_new(base, -1, 0);
	/* Large pieces: libevent reads 4 KiB at a time by default, which makes
	 * a file transfer a quarter million syscalls per GiB. */
	if (bev) {
		bufferevent_set_max_single_read(bev, 1 << 20);
		bufferevent_set_max_single_write(bev, 1 << 20);
	}
	if (!c || !bev) {
		free(c);
		if (bev)
			bufferevent_free(bev);
		log_warn("coved: out of memory for a new connection: it is served without limits");
		return NULL; /* libevent makes its own */
	}
	c->bev = bev;
	bufferevent_incref(bev);
	c->timer = evtimer_new(base, on_timer, c);
	c->input_cb = evbuffer_add_cb(bufferevent_get_input(bev), on_input, c);
	c->next = gate.conns;
	if (c->next)
		c->next->prev = c;
	gate.conns = c;
	if (!c->timer || !c->input_cb) {
		/* Still ours alone: libevent has not seen it yet. */
		conn_free(c);
		bufferevent_free(bev);
		log_warn("coved: out of memory for a new connection: it is served without limits");
		return NULL;
	}
	/* Attached on the next turn, when libevent has made its connection.
	 * (If evhttp fails to make it, out of memory, this bufferevent is
	 * never freed: a leak on a path that is already failing.) */
	evtimer_add(c->timer, &now);
	return bev;
}

static void on_request_done(struct evhttp_request *req, void *arg)
{
	struct access_conn *c = arg;
	set_phase(c, input_pending(c) ? PHASE_RECEIVING : PHASE_IDLE);
}

/* An answer that ends the connection: the client is refused, not served. */
static void refuse(struct evhttp_request *req, int status, const char *code, const char *message)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Connection", "close");
	if (status == 401)
		evhttp_add_header(h, "WWW-Authenticate", "Bearer");
	api_send_json(req, status, json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", message));
}

bool access_request_begin(struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct access_conn *c = find_conn(evhttp_connection_get_bufferevent(evcon));
	if (!c)
		return true; /* one that on_accept could not track */
	/* The whole request can come before the turn that attaches it. Out of
	 * memory, c stays new: its timer tries again, or frees it. */
	if (!c->evcon && attach(c, evcon) < 0) {
		refuse(req, 503, "unavailable", "out of memory");
		return false;
	}
	set_phase(c, PHASE_HANDLING);
	evhttp_request_set_on_complete_cb(req, on_request_done, c);
	if (c->refused) {
		refuse(req, 503, "unavailable", "too many connections");
		return false;
	}
	if (c->listener == LISTENER_TCP && !authorized(req)) {
		refuse(req, 401, "unauthorized", "this listener needs the header 'Authorization: Bearer <token>'");
		return false;
	}
	return true;
}

/* ---------------------------------------------------------------- listeners */

static int listen_tcp(const char *spec, struct cove_err *err)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1;
	if (netaddr_parse(spec, &ss, &len) < 0)
		return err_set(
			err, COVE_EINVAL,
			"--listen '%s': want ADDR:PORT with a numeric address, like 127.0.0.1:7070 or [::1]:7070",
			spec);
	_cleanup_close_ int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return err_sys(err, errno, "--listen '%s': socket", spec);
	/* A restarted coved must not wait out its predecessor's TIME_WAITs. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 512) < 0)
		return err_sys(err, errno, "--listen '%s'", spec);
	len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return err_sys(err, errno, "--listen '%s': getsockname", spec);
	netaddr_format((struct sockaddr *)&ss, gate.tcp_name, sizeof(gate.tcp_name));
	if (ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_addr.s_addr != htonl(INADDR_LOOPBACK)
				    : !IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr))
		log_warn("coved: %s is not a loopback address: the API is plain HTTP there, token included "
			 "(put TLS or an SSH tunnel in front of it)",
			 gate.tcp_name);
	gate.tcp_fd = TAKE_FD(fd);
	return 0;
}

int access_setup(struct daemon *d, struct cove_err *err)
{
	struct access_config *cfg = &d->access;
	char path[1024];
	config_defaults(cfg);
	gate.cfg = cfg;
	if (!cfg->listen[0]) {
		if (cfg->token_file[0])
			return err_set(err, COVE_EINVAL, "--token-file is for --listen: give --listen ADDR:PORT too");
		return 0;
	}
	if (cfg->token_file[0]) {
		snprintf(path, sizeof(path), "%s", cfg->token_file);
	} else {
		snprintf(path, sizeof(path), "%s/token", d->data_dir);
		if (make_token_file(path, err) < 0)
			return -1;
	}
	if (load_token(path, err) < 0 || listen_tcp(cfg->listen, err) < 0)
		return -1;
	log_info("coved: API also on TCP %s, for requests with the token in '%s'", gate.tcp_name, path);
	return 0;
}

int access_serve(struct daemon *d, struct cove_err *err)
{
	const struct access_config *cfg = gate.cfg;
	evhttp_set_max_headers_size(d->http, (ev_ssize_t)cfg->max_header_bytes);
	evhttp_set_max_body_size(d->http, (ev_ssize_t)cfg->max_body_bytes);
	evhttp_set_bevcb(d->http, on_accept, NULL);
	if (gate.tcp_fd < 0)
		return 0;
	if (!(gate.tcp_handle = evhttp_accept_socket_with_handle(d->http, gate.tcp_fd))) {
		close(gate.tcp_fd);
		gate.tcp_fd = -1;
		return err_set(err, COVE_EINTERNAL, "evhttp accept on %s", gate.tcp_name);
	}
	return 0;
}

void access_stop(struct daemon *d)
{
	if (gate.tcp_handle)
		evhttp_del_accept_socket(d->http, gate.tcp_handle);
	gate.tcp_handle = NULL;
}

void access_cleanup(void)
{
	/* After evhttp_free: what is left was never attached. */
	while (gate.conns)
		conn_free(gate.conns);
	explicit_bzero(gate.token, sizeof(gate.token));
}

/* Who may reach coved's API, and how much of coved one client may hold.
 *
 * The API is always served on the unix socket, whose file mode (0660) is its
 * access control. With --listen ADDR:PORT it is also served over TCP, and
 * there every request must carry "Authorization: Bearer <token>", the token
 * being the content of a file only coved's user can read. A request without
 * it gets a 401 and does nothing else.
 *
 * Limits, on both listeners, enforced by the HTTP server (httpd.c). Each
 * listener counts its own connections, so that clients on TCP can never
 * lock the local CLI out of the unix socket.
 *   --max-header-bytes  a request's line and headers (answered 431)
 *   --max-body-bytes    a request's body, on the routes that take it whole
 *                       (answered 413); a streamed upload is bounded by the
 *                       sandbox's disk
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
 * sent: a stream (an exec's output, a streamed upload) runs for as long as
 * it needs. */
#include <errno.h>
#include <stddef.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include "daemon/http/httpd.h"
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/io.h"
#include "common/log.h"
#include "common/netaddr.h"
#include "common/parse.h"
#include "daemon/http/access.h"
#include <nettle/hmac.h>
#include "daemon/http/conn.h"

#define TOKEN_MIN 32   /* bytes: 256 bits of hex, or a 32-character passphrase */
#define TOKEN_MAX 4096 /* it travels in a header, under --max-header-bytes */

/* Defaults, for what a flag left 0. */
#define DEFAULT_MAX_HEADER_BYTES 16384
#define DEFAULT_MAX_BODY_BYTES ((16u << 20) + (64u << 20) / 3 * 4) /* 64 MiB of base64 stdin, plus the rest */
#define DEFAULT_MAX_CONNECTIONS 1024
#define DEFAULT_IDLE_TIMEOUT 60.0    /* seconds */
#define DEFAULT_REQUEST_TIMEOUT 60.0 /* seconds */

static struct {
	const struct access_config *cfg;
	char token[TOKEN_MAX + 1];
	size_t token_len;
	int tcp_fd;
	char tcp_name[64];
	struct http_listener *tcp_handle;
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
	char text[2 * 32 + 1];
	int e = random_hex(text, 32);
	if (e < 0)
		return err_sys(err, -e, "getrandom");
	text[sizeof(text) - 1] = '\n';
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

static bool authorized(struct http_req *req)
{
	const char *h = evhttp_find_header(http_req_in_headers(req), "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return false;
	for (h += 7; *h == ' '; h++)
		;
	return token_matches(h, strlen(h));
}

/* ---------------------------------------------------------------- requests */

bool access_token_is(const char *given)
{
	return given && gate.token_len && token_matches(given, strlen(given));
}

/* HMAC-SHA256 keyed with the token: a secret of label's own, which the
 * token's holder can always make again and no one else can guess. */
void access_derive(const char *label, char out[ACCESS_DERIVED_LEN + 1])
{
	struct hmac_sha256_ctx ctx;
	uint8_t mac[SHA256_DIGEST_SIZE];
	hmac_sha256_set_key(&ctx, gate.token_len, (const uint8_t *)gate.token);
	hmac_sha256_update(&ctx, strlen(label), (const uint8_t *)label);
	hmac_sha256_digest(&ctx, sizeof(mac), mac);
	for (int i = 0; i < ACCESS_DERIVED_LEN / 2; i++)
		snprintf(out + 2 * i, 3, "%02x", mac[i]);
	explicit_bzero(&ctx, sizeof(ctx));
}

bool access_authorized(struct http_req *req)
{
	return !http_conn_is_tcp(http_req_conn(req)) || authorized(req);
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

int access_setup(struct access_config *cfg, const char *data_dir, struct cove_err *err)
{
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
		snprintf(path, sizeof(path), "%s/token", data_dir);
		if (make_token_file(path, err) < 0)
			return -1;
	}
	if (load_token(path, err) < 0 || listen_tcp(cfg->listen, err) < 0)
		return -1;
	log_info("coved: API also on TCP %s, for requests with the token in '%s'", gate.tcp_name, path);
	return 0;
}

static bool keep_idle(struct http_conn *conn)
{
	return conn_has_owner(conn);
}

int access_serve(struct event_base *base, const struct http_callbacks *routes, struct cove_err *err)
{
	const struct access_config *cfg = gate.cfg;
	const struct http_limits limits = {
		.max_header_bytes = (size_t)cfg->max_header_bytes,
		.max_body_bytes = cfg->max_body_bytes,
		.max_connections = cfg->max_connections,
		.idle_timeout = cfg->idle_timeout,
		.request_timeout = cfg->request_timeout,
	};
	const struct http_callbacks cbs = { .streams = routes->streams, .handle = routes->handle, .keep_idle = keep_idle };
	http_setup(base, &limits, &cbs);
	if (gate.tcp_fd < 0)
		return 0;
	if (!(gate.tcp_handle = http_listen(gate.tcp_fd, true))) {
		close(gate.tcp_fd);
		gate.tcp_fd = -1;
		return err_set(err, COVE_EINTERNAL, "listen on %s: out of memory", gate.tcp_name);
	}
	gate.tcp_fd = -1; /* the listener's */
	return 0;
}

void access_stop(void)
{
	http_listener_free(gate.tcp_handle);
	gate.tcp_handle = NULL;
}

void access_cleanup(void)
{
	explicit_bzero(gate.token, sizeof(gate.token));
}

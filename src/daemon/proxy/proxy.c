/* The port proxy's listener, settings and URLs (proxy.h); a connection's
 * work is in conn.c. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "common/netaddr.h"
#include "daemon/proxy/proxy.h"
#include "daemon/proxy/proxy_private.h"

struct proxy proxy = { .fd = -1 };

/* A domain for host names PORT-ID.DOMAIN: labels of letters, digits and
 * '-' (not first or last), each 1-63, the whole at most 100. */
static bool domain_valid(const char *d)
{
	size_t n = strlen(d), label = 0;
	if (n == 0 || n > 100)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (d[i] == '.') {
			if (label == 0 || d[i - 1] == '-')
				return false;
			label = 0;
		} else if (isalnum((unsigned char)d[i]) || (d[i] == '-' && label > 0)) {
			if (++label > 63)
				return false;
		} else {
			return false;
		}
	}
	return label > 0 && d[n - 1] != '-';
}

int proxy_parse_option(struct proxy_config *cfg, const char *name, const char *value, struct cove_err *err)
{
	struct sockaddr_storage ss;
	socklen_t len;
	if (strcmp(name, "proxy-listen") == 0) {
		if (strcmp(value, "off") != 0 && netaddr_parse(value, &ss, &len) < 0)
			return err_set(err, COVE_EINVAL,
				       "--proxy-listen '%s': want ADDR:PORT with a numeric address (like %s; port 0: "
				       "any free one), or off",
				       value, PROXY_DEFAULT_LISTEN);
		snprintf(cfg->listen, sizeof(cfg->listen), "%s", value);
		return 0;
	}
	if (!domain_valid(value))
		return err_set(err, COVE_EINVAL,
			       "--proxy-domain '%s': want a DNS name (letters, digits, '-' and dots), like localhost",
			       value);
	snprintf(cfg->domain, sizeof(cfg->domain), "%s", value);
	for (char *p = cfg->domain; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return 0;
}

/* A listening socket on ss into *ret_fd; -errno. */
static int bind_listener(struct sockaddr_storage *ss, socklen_t len, int *ret_fd)
{
	int one = 1;
	_cleanup_close_ int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	/* A restarted coved must not wait out its predecessor's TIME_WAITs. */
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)ss, len) < 0 || listen(fd, 512) < 0)
		return -errno;
	*ret_fd = TAKE_FD(fd);
	return 0;
}

int proxy_setup(struct proxy_config *cfg, struct cove_err *err)
{
	bool given = cfg->listen[0] != '\0';
	const char *spec = given ? cfg->listen : PROXY_DEFAULT_LISTEN;
	struct sockaddr_storage ss;
	socklen_t len;
	snprintf(proxy.domain, sizeof(proxy.domain), "%s", cfg->domain[0] ? cfg->domain : "localhost");
	if (strcmp(spec, "off") == 0 || netaddr_parse(spec, &ss, &len) < 0)
		return 0;
	int r = bind_listener(&ss, len, &proxy.fd);
	if (r < 0 && given)
		return err_sys(err, -r, "--proxy-listen '%s'", spec);
	if (r < 0) {
		/* The default port is another coved's (tests run several):
		 * any free one on loopback, which URLs then name. */
		log_warn("coved: the port proxy's default address %s: %s; taking any free port on 127.0.0.1 "
			 "(give --proxy-listen for a fixed one)",
			 spec, strerror(-r));
		((struct sockaddr_in *)&ss)->sin_port = 0;
		if ((r = bind_listener(&ss, len, &proxy.fd)) < 0)
			return err_sys(err, -r, "the port proxy on 127.0.0.1");
	}
	len = sizeof(ss);
	if (getsockname(proxy.fd, (struct sockaddr *)&ss, &len) < 0)
		return err_sys(err, errno, "the port proxy: getsockname");
	netaddr_format((struct sockaddr *)&ss, proxy.listen, sizeof(proxy.listen));
	proxy.port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
						   : ((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg)
{
	if (proxy.count >= PROXY_MAX_CONNECTIONS) {
		log_warn("proxy: %d connections open, the most: one refused", proxy.count);
		close(fd);
		return;
	}
	pconn_new(proxy.base, fd, sa);
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	if (proxy.listener)
		evconnlistener_enable(proxy.listener);
}

/* accept() failed: out of fds (EMFILE, ENFILE) or memory. The listener
 * rests a second rather than spin on a connection it cannot take. */
static void on_accept_error(struct evconnlistener *l, void *arg)
{
	static const struct timeval rest = { 1, 0 };
	log_warn("proxy: accept: %s; not accepting for a second", strerror(errno));
	evconnlistener_disable(l);
	if (!proxy.resume)
		proxy.resume = evtimer_new(proxy.base, on_resume, NULL);
	if (proxy.resume)
		evtimer_add(proxy.resume, &rest);
}

int proxy_serve(struct event_base *base, struct cove_err *err)
{
	proxy.base = base;
	if (proxy.fd < 0)
		return 0;
	proxy.listener =
		evconnlistener_new(base, on_accept, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, proxy.fd);
	if (!proxy.listener)
		return err_set(err, COVE_EINTERNAL, "the port proxy's listener: out of memory");
	proxy.fd = -1;
	evconnlistener_set_error_cb(proxy.listener, on_accept_error);
	log_info("coved: port proxy on %s, URLs http://PORT-ID.%s:%d/", proxy.listen, proxy.domain, proxy.port);
	return 0;
}

void proxy_stop(void)
{
	if (proxy.resume)
		event_free(proxy.resume);
	proxy.resume = NULL;
	if (proxy.listener)
		evconnlistener_free(proxy.listener);
	proxy.listener = NULL;
	if (proxy.fd >= 0)
		close(proxy.fd);
	proxy.fd = -1;
}

void proxy_cleanup(void)
{
	proxy_stop();
	while (proxy.conns)
		pconn_free(proxy.conns);
}

bool proxy_serving(void)
{
	return proxy.listener != NULL;
}

int proxy_url(const char *id, int port, const char *token, char *buf, size_t cap)
{
	char host[16];
	snprintf(host, sizeof(host), "%s", id);
	for (char *p = host; *p; p++)
		if (*p == '_')
			*p = '-';
	int n = snprintf(buf, cap, "http://%d-%s.%s:%d/%s%s", port, host, proxy.domain, proxy.port,
			 token ? "?" PROXY_TOKEN_NAME "=" : "", token ? token : "");
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int proxy_port_url(const char *id, int port, char *buf, size_t cap)
{
	return proxy_serving() ? proxy_url(id, port, NULL, buf, cap) : -1;
}

json_t *proxy_to_json(void)
{
	if (!proxy_serving())
		return json_null();
	return json_pack("{s:s, s:s, s:i}", "listen", proxy.listen, "domain", proxy.domain, "port", proxy.port);
}

void proxy_port_closed(const char *id, int port)
{
	struct pconn *next;
	for (struct pconn *c = proxy.conns; c; c = next) {
		next = c->next;
		if (strcmp(c->id, id) == 0 && (port == 0 || c->port == port))
			pconn_free(c);
	}
}

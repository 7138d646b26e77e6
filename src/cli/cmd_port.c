/* cove port [--public] ID PORT, cove port ls ID, cove port rm ID PORT...,
 * cove port-forward ID [LOCAL:]REMOTE */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli/cli.h"

/* "8000" into *ret: 1-65535 (0 too with zero_ok). */
static int parse_port(const char *s, bool zero_ok, int *ret)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (!*s || *end || errno || v < (zero_ok ? 0 : 1) || v > 65535)
		return -1;
	*ret = (int)v;
	return 0;
}

static const char *str(json_t *j, const char *key)
{
	return json_string_value(json_object_get(j, key));
}

/* The URL a browser opens: with the token in the query for a private port. */
static void print_url(json_t *p)
{
	bool public = json_is_true(json_object_get(p, "public"));
	printf("%s%s%s\n", str(p, "url") ? str(p, "url") : "-",
	       public ? "" : "?cove_token=", public ? "" : (str(p, "token") ? str(p, "token") : ""));
}

static int call(struct cli *cli, const char *method, const char *path, const char *body, json_t **ret)
{
	struct cove_error err = { 0 };
	char *answer = NULL;
	if (cli_connect(cli) < 0)
		return 1;
	if (cove_call(cli->client, method, path, body, &answer, &err) < 0)
		return cli_fail(&err);
	*ret = json_loads(answer ? answer : "{}", 0, NULL);
	free(answer);
	return 0;
}

int cmd_port(struct cli *cli, int argc, char **argv)
{
	bool public = false;
	const char *v;
	int port, c;
	while ((c = cli_next_opt(cli, &v)) != -1)
	public = public || c == 'P';
	if (argc != 3 || parse_port(argv[2], false, &port) < 0)
		return cli_usage_error("port", "want a sandbox ID and a port from 1 to 65535");
	char path[256], body[64];
	json_t *j = NULL;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/ports", argv[1]);
	snprintf(body, sizeof(body), "{\"port\": %d, \"public\": %s}", port, public ? "true" : "false");
	int r = call(cli, "POST", path, body, &j);
	if (r == 0 && cli->json) {
		json_dumpf(j, stdout, JSON_INDENT(2));
		putchar('\n');
	} else if (r == 0) {
		print_url(j);
	}
	json_decref(j);
	return r;
}

int cmd_port_ls(struct cli *cli, int argc, char **argv)
{
	if (argc != 2)
		return cli_usage_error("port ls", "want exactly one sandbox ID");
	char path[256];
	json_t *j = NULL, *p;
	size_t i;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/ports", argv[1]);
	int r = call(cli, "GET", path, NULL, &j);
	if (r == 0 && cli->json) {
		json_dumpf(j, stdout, JSON_INDENT(2));
		putchar('\n');
	} else if (r == 0) {
		static const char *const headers[] = { ">PORT", "ACCESS", "URL" };
		struct table t;
		table_init(&t, 3, headers);
		json_array_foreach(json_object_get(j, "ports"), i, p)
		{
			char num[16], url[512];
			bool pub = json_is_true(json_object_get(p, "public"));
			snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(json_object_get(p, "port")));
			snprintf(url, sizeof(url), "%s%s%s", or_dash(str(p, "url")),
				 pub ? "" : "?cove_token=", pub ? "" : or_dash(str(p, "token")));
			table_row(&t, num, pub ? "public" : "private", url);
		}
		table_print(&t, stdout);
		table_free(&t);
	}
	json_decref(j);
	return r;
}

int cmd_port_rm(struct cli *cli, int argc, char **argv)
{
	int port, r = 0;
	if (argc < 3)
		return cli_usage_error("port rm", "want a sandbox ID and one or more ports");
	for (int i = 2; i < argc; i++)
		if (parse_port(argv[i], false, &port) < 0)
			return cli_usage_error("port rm", "'%s' is not a port from 1 to 65535", argv[i]);
	for (int i = 2; i < argc; i++) {
		char path[256];
		json_t *j = NULL;
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/ports/%s", argv[1], argv[i]);
		int one = call(cli, "DELETE", path, NULL, &j);
		if (one == 0)
			printf("%s\n", argv[i]);
		r = r ? r : one;
		json_decref(j);
	}
	return r;
}

/* Bytes both ways between a and b until both have ended; an end on one
 * side is passed on as a shutdown of the other's sending. */
static void relay(int a, int b)
{
	struct pollfd p[2] = { { a, POLLIN, 0 }, { b, POLLIN, 0 } };
	char buf[65536];
	int open_ends = 2;
	while (open_ends > 0 && poll(p, 2, -1) >= 0) {
		for (int i = 0; i < 2; i++) {
			if (!p[i].revents)
				continue;
			ssize_t n = read(p[i].fd, buf, sizeof(buf));
			int to = p[1 - i].fd;
			if (n <= 0) {
				(void)shutdown(to, SHUT_WR);
				p[i].fd = -1;
				open_ends--;
				continue;
			}
			for (ssize_t off = 0, w; off < n; off += w)
				if ((w = write(to, buf + off, (size_t)(n - off))) <= 0)
					return;
		}
	}
}

static int listen_local(int port, int *ret_port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	socklen_t len = sizeof(sa);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		fprintf(stderr, "cove: listen on 127.0.0.1:%d: %s\n", port, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*ret_port = ntohs(sa.sin_port);
	return fd;
}

/* Each local connection in a child of its own, over a stream of its own. */
int cmd_port_forward(struct cli *cli, int argc, char **argv)
{
	int local, remote;
	json_t *j = NULL;
	char path[256], *colon = argc == 3 ? strchr(argv[2], ':') : NULL;
	if (colon)
		*colon = '\0';
	if (argc != 3 || parse_port(colon ? colon + 1 : argv[2], false, &remote) < 0 ||
	    (colon && parse_port(argv[2], true, &local) < 0))
		return cli_usage_error("port-forward", "want a sandbox ID and [LOCAL:]REMOTE ports");
	if (!colon)
		local = remote;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", argv[1]);
	int r = call(cli, "GET", path, NULL, &j); /* the sandbox is there, before anything listens */
	json_decref(j);
	if (r)
		return r;
	int lfd = listen_local(local, &local);
	if (lfd < 0)
		return 1;
	signal(SIGCHLD, SIG_IGN); /* children reaped by the kernel */
	printf("127.0.0.1:%d -> %s port %d\n", local, argv[1], remote);
	fflush(stdout);
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			fprintf(stderr, "cove: accept: %s\n", strerror(errno));
			return 1;
		}
		pid_t pid = fork();
		if (pid == 0) {
			struct cove_error err = { 0 };
			int up;
			close(lfd);
			if (cove_port_forward(cli->client, argv[1], remote, &up, &err) < 0)
				_exit(cli_fail(&err));
			relay(fd, up);
			_exit(0);
		}
		close(fd);
	}
}

/* iobench: the sandbox API beyond exec, on a private coved. Built and run
 * by bench/run.sh:
 *
 *   iobench --socket S --pool DIR [--file-mib N] [--put-mib N] [--session N]
 *           [--clients N] [--requests N] [--sandboxes N] [--out FILE]
 *
 * (d) a file of --file-mib MiB (made in a sandbox by dd) read through
 *     GET /files over the unix socket, 3 times, next to `cat FILE >
 *     /dev/null` and `dd if=FILE of=/dev/null bs=1M` of the same file on the
 *     host (its overlay upper copy in the pool), all with a warm page cache;
 * (e) --put-mib MiB written with PUT /files, 3 times, next to `dd
 *     if=/dev/zero of=POOLFILE bs=1M` on the same pool (no fsync either);
 * (f) `true` in a session, --session times after 10 warm-ups: p50/p99;
 * (g) load: --clients threads, each on its own connection, --requests
 *     mixed requests (exec, write, read, list) over --sandboxes sandboxes:
 *     p50/p99 of each request and the total rate.
 * The HTTP for (d) and (e) is written here on a raw socket: libcove's
 * cove_read_file holds a whole answer in memory (64 MiB at most). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cove.h"

static const char *sock_path;

static void die(const char *what, const struct cove_error *e)
{
	fprintf(stderr, "iobench: %s: %s (%s, HTTP %d)\n", what, e ? e->message : strerror(errno), e ? e->code : "",
		e ? e->status : 0);
	exit(1);
}

static struct cove *open_cove(void)
{
	struct cove *c;
	struct cove_error e = { 0 };
	if (cove_open(sock_path, &c, &e) < 0)
		die("connect", &e);
	return c;
}

static void sh(struct cove *c, const char *id, const char *script)
{
	struct cove_error e = { 0 };
	struct cove_exec_result r;
	json_t *j = json_pack("{s:s}", "cmd", script);
	char *body = json_dumps(j, 0);
	json_decref(j);
	if (cove_exec(c, id, body, NULL, &r, &e) < 0)
		die(script, &e);
	free(body);
	if (r.exit_code != 0) {
		fprintf(stderr, "iobench: '%s' exited %d\n", script, r.exit_code);
		exit(1);
	}
}

/* ---- raw HTTP over the unix socket ---- */

static int raw_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("connect", NULL);
	return fd;
}

static void write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("write", NULL);
		p += w;
		n -= (size_t)w;
	}
}

/* Read a response's head; returns its status, *clen its Content-Length, and
 * leaves body bytes already read in buf[0..*have). */
static int read_head(int fd, char *buf, size_t cap, size_t *have, long long *clen)
{
	size_t n = 0;
	char *end;
	for (;;) {
		ssize_t r = read(fd, buf + n, cap - n - 1);
		if (r <= 0)
			die("read response", NULL);
		n += (size_t)r;
		buf[n] = '\0';
		if ((end = strstr(buf, "\r\n\r\n")))
			break;
	}
	int status = atoi(buf + 9);
	char *cl = strcasestr(buf, "\r\nContent-Length:");
	*clen = cl ? atoll(cl + 17) : -1;
	size_t head = (size_t)(end + 4 - buf);
	memmove(buf, buf + head, n - head);
	*have = n - head;
	return status;
}

/* GET a sandbox file; returns the bytes received. */
static long long raw_get(const char *id, const char *path)
{
	static char buf[1 << 20];
	int fd = raw_connect();
	char req[512];
	int n = snprintf(req, sizeof(req), "GET /v1/sandboxes/%s/files?path=%s HTTP/1.1\r\nHost: cove\r\n\r\n", id,
			 path);
	write_all(fd, req, (size_t)n);
	size_t have;
	long long clen, got;
	if (read_head(fd, buf, sizeof(buf), &have, &clen) != 200 || clen < 0)
		die("GET file", NULL);
	for (got = (long long)have; got < clen;) {
		ssize_t r = read(fd, buf, sizeof(buf));
		if (r <= 0)
			die("read body", NULL);
		got += r;
	}
	close(fd);
	return got;
}

static void raw_put(const char *id, const char *path, const char *data, size_t len)
{
	char req[512], buf[4096];
	int fd = raw_connect();
	int n = snprintf(req, sizeof(req),
			 "PUT /v1/sandboxes/%s/files?path=%s HTTP/1.1\r\nHost: cove\r\nContent-Length: %zu\r\n\r\n", id,
			 path, len);
	write_all(fd, req, (size_t)n);
	write_all(fd, data, len);
	size_t have;
	long long clen;
	int st = read_head(fd, buf, sizeof(buf), &have, &clen);
	if (st != 200 && st != 201) {
		fprintf(stderr, "iobench: PUT %zu bytes: HTTP %d\n", len, st);
		exit(1);
	}
	close(fd);
}

/* Wall time of a host command, ms. */
static double run_ms(char *const argv[])
{
	double t0 = now_ms();
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		execvp(argv[0], argv);
		_exit(127);
	}
	int status;
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "iobench: %s failed\n", argv[0]);
		exit(1);
	}
	return now_ms() - t0;
}

static double best(double *v, int n)
{
	double b = v[0];
	for (int i = 1; i < n; i++)
		b = v[i] < b ? v[i] : b;
	return b;
}

/* ---- (d) and (e) ---- */
static void bench_files(const char *pool, int file_mib, int put_mib)
{
	struct cove *c = open_cove();
	struct cove_error e = { 0 };
	char id[16], script[256], host[1024];
	if (cove_create(c, "{}", id, &e) < 0)
		die("create", &e);
	snprintf(script, sizeof(script), "dd if=/dev/zero of=/root/big bs=1M count=%d status=none", file_mib);
	sh(c, id, script);
	snprintf(host, sizeof(host), "%s/sandboxes/%s/upper/root/root/big", pool, id);
	struct stat st;
	if (stat(host, &st) < 0 || st.st_size != (off_t)file_mib << 20) {
		fprintf(stderr, "iobench: %s is not the sandbox's file\n", host);
		exit(1);
	}
	double mb = (double)st.st_size / 1e6, api[3], cat[3], dd[3];
	char ddif[1100];
	snprintf(ddif, sizeof(ddif), "if=%s", host);
	char *cat_argv[] = { "cat", host, NULL }, *dd_argv[] = { "dd", ddif, "of=/dev/null", "bs=1M", NULL };
	raw_get(id, "/root/big"); /* warm the page cache */
	for (int i = 0; i < 3; i++) {
		double t0 = now_ms();
		if (raw_get(id, "/root/big") != st.st_size)
			die("short read", NULL);
		api[i] = now_ms() - t0;
		cat[i] = run_ms(cat_argv);
		dd[i] = run_ms(dd_argv);
	}
	printf("(d) read a %d MiB file: best of 3, warm cache\n", file_mib);
	printf("    GET /files  %7.0f MB/s   cat > /dev/null %7.0f MB/s   dd of=/dev/null bs=1M %7.0f MB/s\n",
	       mb / best(api, 3) * 1e3, mb / best(cat, 3) * 1e3, mb / best(dd, 3) * 1e3);
	result("read.mib", "%d", file_mib);
	result("read.api_mbps", "%.0f", mb / best(api, 3) * 1e3);
	result("read.cat_mbps", "%.0f", mb / best(cat, 3) * 1e3);
	result("read.dd_mbps", "%.0f", mb / best(dd, 3) * 1e3);

	size_t len = (size_t)put_mib << 20;
	char *data = malloc(len);
	memset(data, 'x', len);
	char ddof[1100], ddcount[32];
	snprintf(ddof, sizeof(ddof), "of=%s/cove-iobench-put", pool);
	snprintf(ddcount, sizeof(ddcount), "count=%d", put_mib);
	char *ddw_argv[] = { "dd", "if=/dev/zero", ddof, "bs=1M", ddcount, NULL };
	double put[3], ddw[3];
	for (int i = 0; i < 3; i++) {
		double t0 = now_ms();
		raw_put(id, "/root/put", data, len);
		put[i] = now_ms() - t0;
		ddw[i] = run_ms(ddw_argv);
	}
	snprintf(ddof, sizeof(ddof), "%s/cove-iobench-put", pool);
	unlink(ddof);
	free(data);
	mb = (double)len / 1e6;
	printf("(e) write %d MiB: best of 3 (no fsync in either)\n", put_mib);
	printf("    PUT /files  %7.0f MB/s   dd if=/dev/zero bs=1M to the pool %7.0f MB/s\n", mb / best(put, 3) * 1e3,
	       mb / best(ddw, 3) * 1e3);
	result("write.mib", "%d", put_mib);
	result("write.api_mbps", "%.0f", mb / best(put, 3) * 1e3);
	result("write.dd_mbps", "%.0f", mb / best(ddw, 3) * 1e3);
	if (cove_delete(c, id, &e) < 0)
		die("delete", &e);
	cove_close(c);
}

/* ---- (f) session round trip ---- */
static void bench_session(int n)
{
	struct cove *c = open_cove();
	struct cove_error e = { 0 };
	char id[16], path[128], *answer = NULL, body[128];
	if (cove_create(c, "{}", id, &e) < 0)
		die("create", &e);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/sessions", id);
	if (cove_call(c, "POST", path, "{}", &answer, &e) < 0)
		die("session", &e);
	json_t *j = json_loads(answer, 0, NULL);
	snprintf(body, sizeof(body), "{\"cmd\":\"true\",\"session\":\"%s\"}",
		 json_string_value(json_object_get(j, "id")));
	json_decref(j);
	free(answer);
	double *t = calloc(n, sizeof(double));
	for (int i = -10; i < n; i++) {
		struct cove_exec_result r;
		double t0 = now_ms();
		if (cove_exec(c, id, body, NULL, &r, &e) < 0 || r.exit_code != 0)
			die("true in a session", &e);
		if (i >= 0)
			t[i] = now_ms() - t0;
	}
	double p50 = pct(t, n, .5), p99 = pct(t, n, .99);
	printf("(f) `true` in a session, %d runs: p50 %.3f ms   p99 %.3f ms\n", n, p50, p99);
	result("session.runs", "%d", n);
	result("session.p50", "%.3f", p50);
	result("session.p99", "%.3f", p99);
	free(t);
	if (cove_delete(c, id, &e) < 0)
		die("delete", &e);
	cove_close(c);
}

/* ---- (g) load ---- */
struct load_arg {
	int n, requests, nsb;
	char (*ids)[16];
	double *lat; /* requests of them */
	int errors;
};

static void *load_client(void *p)
{
	struct load_arg *a = p;
	struct cove *c = open_cove();
	unsigned seed = (unsigned)a->n * 7919u + 1;
	const char *id = a->ids[0];
	for (int i = 0; i < a->requests; i++) {
		struct cove_error e = { 0 };
		char path[160], file[64], prev[64], *answer = NULL;
		snprintf(file, sizeof(file), "/tmp/load-%d-%d", a->n, i);
		snprintf(prev, sizeof(prev), "/tmp/load-%d-%d", a->n, i - 1);
		if (i % 4 == 0)
			id = a->ids[rand_r(&seed) % a->nsb];
		double t0 = now_ms();
		int r;
		size_t len;
		if (i % 4 == 0) {
			struct cove_exec_result er;
			r = cove_exec(c, id, "{\"cmd\":[\"echo\",\"hi\"]}", NULL, &er, &e);
		} else if (i % 4 == 1) {
			r = cove_write_file(c, id, file, "load", 4, NULL, &e);
		} else if (i % 4 == 2) {
			r = cove_read_file(c, id, prev, &answer, &len, &e);
			if (r == 0 && (len != 4 || memcmp(answer, "load", 4)))
				r = -1;
		} else {
			snprintf(path, sizeof(path), "/v1/sandboxes/%s/files?path=/tmp", id);
			r = cove_call(c, "GET", path, NULL, &answer, &e);
		}
		a->lat[i] = now_ms() - t0;
		free(answer);
		if (r < 0)
			a->errors++;
	}
	cove_close(c);
	return NULL;
}

static void bench_load(int clients, int requests, int nsb)
{
	struct cove *c = open_cove();
	struct cove_error e = { 0 };
	char(*ids)[16] = calloc(nsb, 16);
	for (int i = 0; i < nsb; i++)
		if (cove_create(c, "{}", ids[i], &e) < 0)
			die("create", &e);
	struct load_arg *args = calloc(clients, sizeof(*args));
	pthread_t *th = calloc(clients, sizeof(*th));
	double t0 = now_ms();
	for (int i = 0; i < clients; i++) {
		args[i] = (struct load_arg){ i, requests, nsb, ids, calloc(requests, sizeof(double)), 0 };
		pthread_create(&th[i], NULL, load_client, &args[i]);
	}
	int errors = 0, total = clients * requests;
	double *all = calloc(total, sizeof(double));
	for (int i = 0; i < clients; i++) {
		pthread_join(th[i], NULL);
		errors += args[i].errors;
		memcpy(all + (size_t)i * requests, args[i].lat, requests * sizeof(double));
		free(args[i].lat);
	}
	double took = now_ms() - t0;
	double p50 = pct(all, total, .5), p99 = pct(all, total, .99);
	printf("(g) load: %d clients x %d mixed requests over %d sandboxes: %d errors, %.1f s, %.0f requests/s\n",
	       clients, requests, nsb, errors, took / 1e3, total / took * 1e3);
	printf("    per request p50 %.2f ms   p99 %.2f ms\n", p50, p99);
	result("load.requests", "%d", total);
	result("load.errors", "%d", errors);
	result("load.rate", "%.0f", total / took * 1e3);
	result("load.p50", "%.3f", p50);
	result("load.p99", "%.3f", p99);
	for (int i = 0; i < nsb; i++)
		cove_delete(c, ids[i], &e);
	cove_close(c);
	free(all), free(args), free(th), free(ids);
	if (errors)
		exit(1);
}

int main(int argc, char **argv)
{
	const char *pool = NULL;
	int file_mib = 1024, put_mib = 1024, session_n = 1000, clients = 50, requests = 200, nsb = 20;
	static const struct option opts[] = { { "socket", 1, 0, 's' },   { "pool", 1, 0, 'p' },
					      { "file-mib", 1, 0, 'f' }, { "put-mib", 1, 0, 'w' },
					      { "session", 1, 0, 'S' },  { "clients", 1, 0, 'c' },
					      { "requests", 1, 0, 'r' }, { "sandboxes", 1, 0, 'n' },
					      { "out", 1, 0, 'o' },      { 0, 0, 0, 0 } };
	int o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 's':
			sock_path = optarg;
			break;
		case 'p':
			pool = optarg;
			break;
		case 'f':
			file_mib = atoi(optarg);
			break;
		case 'w':
			put_mib = atoi(optarg);
			break;
		case 'S':
			session_n = atoi(optarg);
			break;
		case 'c':
			clients = atoi(optarg);
			break;
		case 'r':
			requests = atoi(optarg);
			break;
		case 'n':
			nsb = atoi(optarg);
			break;
		case 'o':
			out = fopen(optarg, "we");
			if (!out)
				die(optarg, NULL);
			break;
		default:
			return 2;
		}
	}
	if (!sock_path || !pool || file_mib <= 0 || put_mib <= 0 || session_n <= 0 || clients <= 0 || requests < 4 ||
	    nsb <= 0) {
		fprintf(stderr, "usage: iobench --socket S --pool DIR [--file-mib N] [--put-mib N] [--session N] "
				"[--clients N] [--requests N] [--sandboxes N] [--out FILE]\n");
		return 2;
	}
	bench_files(pool, file_mib, put_mib);
	bench_session(session_n);
	bench_load(clients, requests, nsb);
	return 0;
}

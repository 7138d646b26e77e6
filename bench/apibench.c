/* apibench: coved's API latency and memory, measured through libcove on one
 * kept-alive unix-socket connection. Built and run by bench/run.sh:
 *
 *   apibench --socket S --coved-pid PID [--cold N] [--paced N] [--exec N] [--idle N] [--out FILE]
 *
 * (a) cold: create -> exec `true` -> delete, N times after 10 warm-ups:
 *     p50/p95/p99 of the whole, and the p50 of each phase, and coved's CPU
 *     time per cycle; (a') the same cycle N times after a 100 ms pause each;
 * (b) exec: `true` in one running sandbox, N times after 10 warm-ups;
 * (c) idle: memory per idle sandbox: coved's RSS and PSS before and after
 *     creating N sandboxes, plus the RSS and PSS of their N cove-inits, and
 *     what their memory cgroups are charged (user + kernel memory); then
 *     they are deleted.
 *
 * A human report goes to stdout; with --out, "key value" lines for run.sh. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cove.h"

#define WARMUP 10
#define EXEC_TRUE "{\"cmd\":[\"true\"]}"

static void die(const char *what, const struct cove_error *e)
{
	fprintf(stderr, "apibench: %s: %s (%s, HTTP %d)\n", what, e->message, e->code, e->status);
	exit(1);
}

static int coved_pid;

/* CPU time (user + system, its own threads and its waited-for children:
 * setup processes, and cove-inits with the commands they reaped) that
 * coved has used, in ms, or -1. Unlike wall time, it hardly depends on what
 * else the machine runs. */
static double coved_cpu_ms(void)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/stat", coved_pid);
	FILE *f = coved_pid > 0 ? fopen(path, "re") : NULL;
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	unsigned long long ut, st;
	long long cut, cst;
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %lld %lld", &ut, &st, &cut, &cst) != 4)
		return -1;
	return (double)(ut + st + cut + cst) * 1000.0 / sysconf(_SC_CLK_TCK);
}

static void exec_true(struct cove *c, const char *id)
{
	struct cove_exec_result r;
	struct cove_error e = { 0 };
	if (cove_exec(c, id, EXEC_TRUE, NULL, &r, &e) < 0)
		die("exec true", &e);
	if (r.exit_code != 0) {
		fprintf(stderr, "apibench: exec true in %s exited %d (signal %d)\n", id, r.exit_code, r.signal);
		exit(1);
	}
}

static void create(struct cove *c, char id[16])
{
	struct cove_error e = { 0 };
	if (cove_create(c, "{}", id, &e) < 0)
		die("create", &e);
}

static void delete (struct cove *c, const char *id)
{
	struct cove_error e = { 0 };
	if (cove_delete(c, id, &e) < 0)
		die("delete", &e);
}

/* ---- (a) cold create -> exec true -> delete ------------------------------ */
static void bench_cold(struct cove *c, int n)
{
	double *tot = calloc(n, sizeof(double)), *cr = calloc(n, sizeof(double)), *ex = calloc(n, sizeof(double)),
	       *dl = calloc(n, sizeof(double));
	char id[16];
	double cpu0 = 0;
	for (int i = -WARMUP; i < n; i++) {
		if (i == 0)
			cpu0 = coved_cpu_ms();
		double t0 = now_ms();
		create(c, id);
		double t1 = now_ms();
		exec_true(c, id);
		double t2 = now_ms();
		delete (c, id);
		double t3 = now_ms();
		if (i < 0)
			continue;
		tot[i] = t3 - t0;
		cr[i] = t1 - t0;
		ex[i] = t2 - t1;
		dl[i] = t3 - t2;
	}
	usleep(100 * 1000); /* the last init's exit, reaped by coved */
	double cpu = cpu0 >= 0 ? (coved_cpu_ms() - cpu0) / n : -1;
	double mean = 0;
	for (int i = 0; i < n; i++)
		mean += tot[i] / n;
	double p50 = pct(tot, n, .50), p95 = pct(tot, n, .95), p99 = pct(tot, n, .99);
	double min = tot[0], max = tot[n - 1];
	double c50 = pct(cr, n, .50), e50 = pct(ex, n, .50), d50 = pct(dl, n, .50);
	printf("(a) cold create -> exec true -> delete, %d runs (+%d warm-up)\n", n, WARMUP);
	printf("    total   p50 %7.2f ms   p95 %7.2f ms   p99 %7.2f ms   (min %.2f, mean %.2f, max %.2f)\n", p50, p95,
	       p99, min, mean, max);
	printf("    phases  p50: create %.2f ms, exec %.2f ms, delete %.2f ms\n", c50, e50, d50);
	if (cpu >= 0) {
		printf("    CPU time of coved and its children: %.2f ms per cycle\n", cpu);
		result("cold.cpu_ms", "%.3f", cpu);
	}
	result("cold.runs", "%d", n);
	result("cold.p50", "%.3f", p50);
	result("cold.p95", "%.3f", p95);
	result("cold.p99", "%.3f", p99);
	result("cold.create.p50", "%.3f", c50);
	result("cold.exec.p50", "%.3f", e50);
	result("cold.delete.p50", "%.3f", d50);
	free(tot), free(cr), free(ex), free(dl);
}

/* ---- (a-net) cold cycles with network egress and none, alternated -------
 * Side by side in one run: egress (veth, rules, resolver; the default) and
 * none (loopback only), one after the other, so that both see the same
 * load. */
static void bench_cold_net(struct cove *c, int n)
{
	static const char *const specs[2] = { "{\"network\": \"egress\"}", "{\"network\": \"none\"}" };
	double *cr[2] = { calloc(n, sizeof(double)), calloc(n, sizeof(double)) };
	double *tot[2] = { calloc(n, sizeof(double)), calloc(n, sizeof(double)) };
	struct cove_error e = { 0 };
	char id[16];
	for (int i = -WARMUP; i < n; i++)
		for (int k = 0; k < 2; k++) {
			double t0 = now_ms();
			if (cove_create(c, specs[k], id, &e) < 0)
				die("create", &e);
			double t1 = now_ms();
			exec_true(c, id);
			delete (c, id);
			if (i >= 0) {
				cr[k][i] = t1 - t0;
				tot[k][i] = now_ms() - t0;
			}
		}
	printf("(a-net) cold create with network egress and none, alternated, %d runs each (+%d warm-up)\n", n, WARMUP);
	static const char *const names[2] = { "egress", "none" };
	for (int k = 0; k < 2; k++) {
		double c50 = pct(cr[k], n, .50), t50 = pct(tot[k], n, .50);
		printf("    %-6s create p50 %6.2f ms, p95 %6.2f ms; whole cycle p50 %6.2f ms\n", names[k], c50,
		       pct(cr[k], n, .95), t50);
		char key[64];
		snprintf(key, sizeof(key), "cold_net.%s.create.p50", names[k]);
		result(key, "%.3f", c50);
		snprintf(key, sizeof(key), "cold_net.%s.cycle.p50", names[k]);
		result(key, "%.3f", t50);
	}
	printf("    egress - none, create p50: %+.2f ms\n", pct(cr[0], n, .50) - pct(cr[1], n, .50));
	for (int k = 0; k < 2; k++)
		free(cr[k]), free(tot[k]);
}

/* ---- (a') the same cycle, paced: with a pause before each, coved's
 * background work (deferred cgroup and subvolume deletion, the kernel's
 * namespace teardown) is
 * done when the next create comes, as with a client that is not flooding
 * it. A diagnostic next to (a), which measures back-to-back cycles. */
static void bench_paced(struct cove *c, int n, int gap_ms)
{
	double *tot = calloc(n, sizeof(double)), *cr = calloc(n, sizeof(double));
	char id[16];
	for (int i = 0; i < n; i++) {
		usleep(gap_ms * 1000);
		double t0 = now_ms();
		create(c, id);
		double t1 = now_ms();
		exec_true(c, id);
		delete (c, id);
		tot[i] = now_ms() - t0;
		cr[i] = t1 - t0;
	}
	double p50 = pct(tot, n, .50), p95 = pct(tot, n, .95), c50 = pct(cr, n, .50);
	printf("(a') the same, paced: %d runs, each after a %d ms pause\n", n, gap_ms);
	printf("    total   p50 %7.2f ms   p95 %7.2f ms   (create p50 %.2f ms)\n", p50, p95, c50);
	result("paced.runs", "%d", n);
	result("paced.gap_ms", "%d", gap_ms);
	result("paced.p50", "%.3f", p50);
	result("paced.p95", "%.3f", p95);
	result("paced.create.p50", "%.3f", c50);
	free(tot), free(cr);
}

/* ---- (b) exec true in one running sandbox --------------------------------- */
static void bench_exec(struct cove *c, int n)
{
	double *t = calloc(n, sizeof(double));
	char id[16];
	create(c, id);
	double cpu0 = 0;
	for (int i = -WARMUP; i < n; i++) {
		if (i == 0)
			cpu0 = coved_cpu_ms();
		double t0 = now_ms();
		exec_true(c, id);
		if (i >= 0)
			t[i] = now_ms() - t0;
	}
	/* cove-init's children are not coved's: this is coved's own share */
	double cpu = cpu0 >= 0 ? (coved_cpu_ms() - cpu0) / n : -1;
	delete (c, id);
	double p50 = pct(t, n, .50), p95 = pct(t, n, .95), p99 = pct(t, n, .99);
	printf("(b) exec true in a running sandbox, %d runs (+%d warm-up)\n", n, WARMUP);
	printf("    p50 %.3f ms   p95 %.3f ms   p99 %.3f ms   (min %.3f, max %.3f)\n", p50, p95, p99, t[0], t[n - 1]);
	if (cpu >= 0) {
		printf("    CPU time of coved: %.3f ms per exec\n", cpu);
		result("exec.cpu_ms", "%.3f", cpu);
	}
	result("exec.runs", "%d", n);
	result("exec.p50", "%.3f", p50);
	result("exec.p95", "%.3f", p95);
	result("exec.p99", "%.3f", p99);
	free(t);
}

/* ---- (c) memory per idle sandbox ---------------------------------------- */

/* The kB of "key:" in a /proc file, or -1. */
static long proc_kb(int pid, const char *file, const char *key)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, file);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	long v = -1;
	size_t k = strlen(key);
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, k) == 0 && line[k] == ':') {
			v = strtol(line + k + 1, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

static long meminfo_used_kb(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	long total = -1, avail = -1;
	while (f && fgets(line, sizeof(line), f)) {
		sscanf(line, "MemTotal: %ld", &total);
		sscanf(line, "MemAvailable: %ld", &avail);
	}
	if (f)
		fclose(f);
	return total >= 0 && avail >= 0 ? total - avail : -1;
}

/* Bytes charged to pid's memory cgroup (v1 memory.usage_in_bytes, which
 * includes kernel memory, or v2 memory.current), or -1. */
static long long cgroup_mem_bytes(int pid)
{
	char path[512], line[512];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	long long v = -1;
	char file[700] = "";
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *p = strstr(line, ":memory:");
		if (p) {
			snprintf(file, sizeof(file), "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", p + 8);
			break;
		}
		if (strncmp(line, "0::", 3) == 0 && !file[0])
			snprintf(file, sizeof(file), "/sys/fs/cgroup%s/memory.current", line + 3);
	}
	fclose(f);
	FILE *g = file[0] ? fopen(file, "re") : NULL;
	if (g) {
		if (fscanf(g, "%lld", &v) != 1)
			v = -1;
		fclose(g);
	}
	return v;
}

static void bench_idle(struct cove *c, int n, int coved)
{
	char(*ids)[16] = calloc(n, sizeof(*ids));
	int *pids = calloc(n, sizeof(int));
	long rss0 = proc_kb(coved, "status", "VmRSS"), pss0 = proc_kb(coved, "smaps_rollup", "Pss");
	long used0 = meminfo_used_kb();
	for (int i = 0; i < n; i++) {
		char *body = NULL;
		struct cove_error e = { 0 };
		if (cove_call(c, "POST", "/v1/sandboxes", "{}", &body, &e) < 0)
			die("create", &e);
		json_t *j = json_loads(body, 0, NULL);
		const char *id = json_string_value(json_object_get(j, "id"));
		pids[i] = (int)json_integer_value(json_object_get(j, "init_pid"));
		if (!id || strlen(id) >= 16 || pids[i] <= 0) {
			fprintf(stderr, "apibench: no id or init_pid in %s\n", body);
			exit(1);
		}
		strcpy(ids[i], id);
		json_decref(j);
		free(body);
	}
	usleep(200 * 1000); /* let the inits settle into idle */
	long rss1 = proc_kb(coved, "status", "VmRSS"), pss1 = proc_kb(coved, "smaps_rollup", "Pss");
	long used1 = meminfo_used_kb();
	long init_rss = 0, init_pss = 0;
	long long cg = 0;
	int pss_ok = pss0 >= 0 && pss1 >= 0, cg_ok = 1;
	for (int i = 0; i < n; i++) {
		long r = proc_kb(pids[i], "status", "VmRSS"), p = proc_kb(pids[i], "smaps_rollup", "Pss");
		long long m = cgroup_mem_bytes(pids[i]);
		if (r < 0) {
			fprintf(stderr, "apibench: cannot read the RSS of cove-init %d\n", pids[i]);
			exit(1);
		}
		init_rss += r;
		if (p < 0)
			pss_ok = 0;
		init_pss += p;
		if (m < 0)
			cg_ok = 0;
		cg += m;
	}
	struct cove_error e = { 0 };
	char *health = NULL;
	if (cove_call(c, "GET", "/v1/health", NULL, &health, &e) < 0)
		die("health", &e);
	health[strcspn(health, "\r\n")] = '\0';
	for (int i = 0; i < n; i++)
		delete (c, ids[i]);
	double rss_mb = ((rss1 - rss0) + init_rss) / 1024.0 / n;
	printf("(c) memory per idle sandbox, %d sandboxes (health during: %s)\n", n, health);
	printf("    coved VmRSS %ld -> %ld kB (+%ld), %d cove-init VmRSS sum %ld kB\n", rss0, rss1, rss1 - rss0, n,
	       init_rss);
	printf("    RSS per sandbox: (coved growth + init RSS) / %d = %.3f MB\n", n, rss_mb);
	result("idle.n", "%d", n);
	result("idle.rss_mb", "%.3f", rss_mb);
	result("idle.coved_rss_growth_kb", "%ld", rss1 - rss0);
	result("idle.init_rss_sum_kb", "%ld", init_rss);
	if (pss_ok) {
		double pss_mb = ((pss1 - pss0) + init_pss) / 1024.0 / n;
		printf("    coved PSS %ld -> %ld kB (+%ld), cove-init PSS sum %ld kB\n", pss0, pss1, pss1 - pss0,
		       init_pss);
		printf("    PSS per sandbox: (coved growth + init PSS) / %d = %.3f MB\n", n, pss_mb);
		result("idle.pss_mb", "%.3f", pss_mb);
	}
	if (cg_ok) {
		printf("    memory cgroups of the sandboxes (user + kernel memory charged to them): %.3f MB each\n",
		       cg / 1048576.0 / n);
		result("idle.cgroup_mb", "%.3f", cg / 1048576.0 / n);
	}
	if (used0 >= 0 && used1 >= 0) {
		/* Everything the host lost (kernel objects, page tables, btrfs
		 * metadata too), but also whatever else ran meanwhile: noisy. */
		printf("    host MemTotal-MemAvailable grew %ld kB = %.3f MB per sandbox (system-wide, noisy)\n",
		       used1 - used0, (used1 - used0) / 1024.0 / n);
		result("idle.host_used_mb", "%.3f", (used1 - used0) / 1024.0 / n);
	}
	free(health);
	free(ids);
	free(pids);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = { { "socket", required_argument, NULL, 's' },
					      { "coved-pid", required_argument, NULL, 'p' },
					      { "cold", required_argument, NULL, 'c' },
					      { "exec", required_argument, NULL, 'e' },
					      { "idle", required_argument, NULL, 'i' },
					      { "paced", required_argument, NULL, 'P' },
					      { "out", required_argument, NULL, 'o' },
					      { "cold-net", required_argument, NULL, 'n' },
					      { 0 } };
	const char *sock = COVE_DEFAULT_SOCKET, *outfile = NULL;
	int coved = 0, ncold = 200, npaced = 50, nexec = 1000, nidle = 200, ncoldnet = 0, o;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1)
		switch (o) {
		case 's':
			sock = optarg;
			break;
		case 'p':
			coved_pid = coved = atoi(optarg);
			break;
		case 'c':
			ncold = atoi(optarg);
			break;
		case 'P':
			npaced = atoi(optarg);
			break;
		case 'e':
			nexec = atoi(optarg);
			break;
		case 'i':
			nidle = atoi(optarg);
			break;
		case 'o':
			outfile = optarg;
			break;
		case 'n':
			ncoldnet = atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: apibench --socket S --coved-pid PID [--cold N] [--paced N] [--exec N] "
					"[--idle N] [--cold-net N] "
					"[--out FILE]\n");
			return 2;
		}
	if (outfile && !(out = fopen(outfile, "we"))) {
		fprintf(stderr, "apibench: %s: %s\n", outfile, strerror(errno));
		return 1;
	}
	struct cove *c;
	struct cove_error e = { 0 };
	if (cove_open(sock, &c, &e) < 0)
		die("connect", &e);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (ncold > 0)
		bench_cold(c, ncold);
	if (ncoldnet > 0)
		bench_cold_net(c, ncoldnet);
	if (npaced > 0)
		bench_paced(c, npaced, 100);
	if (nexec > 0)
		bench_exec(c, nexec);
	if (nidle > 0) {
		if (coved <= 0) {
			fprintf(stderr, "apibench: --idle needs --coved-pid\n");
			return 2;
		}
		bench_idle(c, nidle, coved);
	}
	cove_close(c);
	if (out)
		fclose(out);
	return 0;
}

/* cgroup: the writers against fake v1 and v2 trees (regular directories, so
 * every interface file is pre-created and what we wrote can be read back),
 * then the real v1 hierarchies of this hybrid host and its cgroup2 mount at
 * /sys/fs/cgroup/unified, which has no controllers cove needs but does have
 * cgroup.procs, cgroup.freeze and cgroup.kill. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys/cgroup.h"
#include "tap.h"

#define MIB (1024 * 1024)

/* tap.h's CHECK evaluates its condition a second time to print the result,
 * which would run a cgroup operation twice: evaluate once here. */
#define CHECK_ONCE(cond, ...)              \
	do {                               \
		bool once_ = (cond);       \
		CHECK(once_, __VA_ARGS__); \
	} while (0)

static const char *const v1_hiers[] = { "memory", "cpu", "pids", "freezer" };

/* <dir>/<mid>/<rel> (mid may be NULL), in one of a few static buffers: the
 * tests never hold more than two paths at once. */
static const char *at3(const char *dir, const char *mid, const char *rel)
{
	static char buf[4][4096];
	static int next;
	char *p = buf[next++ % 4];
	snprintf(p, sizeof(buf[0]), "%s/%s%s%s", dir, mid ? mid : "", mid ? "/" : "", rel);
	return p;
}

static const char *at(const char *dir, const char *rel)
{
	return at3(dir, NULL, rel);
}

static void mkdir_p(const char *path)
{
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s", path);
	for (char *p = tmp + 1; *p; p++)
		if (*p == '/') {
			*p = '\0';
			(void)mkdir(tmp, 0755);
			*p = '/';
		}
	(void)mkdir(tmp, 0755);
}

/* Creates (or truncates) path with content, making its parents. */
static void put(const char *path, const char *content)
{
	char parent[4096];
	snprintf(parent, sizeof(parent), "%s", path);
	*strrchr(parent, '/') = '\0';
	mkdir_p(parent);
	FILE *f = fopen(path, "we");
	if (f) {
		fputs(content, f);
		fclose(f);
	}
}

/* The file's content without its trailing newline, or NULL. */
static const char *slurp(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "re");
	if (!f)
		return NULL;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n] = '\0';
	return buf;
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st, (void)type, (void)ftw;
	return remove(path) < 0 ? -1 : 0;
}

static void rm_tree(const char *dir)
{
	(void)nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static bool exists(const char *path)
{
	return access(path, F_OK) == 0;
}

static pid_t spawn_sleeper(void)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		/* Never outlive a test that crashed before cleaning up. */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	return pid;
}

static bool died_of_sigkill(pid_t pid)
{
	int st;
	return waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
}

static void reap(pid_t *pid)
{
	if (*pid > 0) {
		(void)kill(*pid, SIGKILL);
		(void)waitpid(*pid, NULL, 0);
	}
	*pid = -1;
}

static void test_names(const char *root)
{
	static const char *const bad[] = { "", "..", "../x", "a/b", "cgroup.procs", "x y", "memory.max" };
	struct cgroup_layout l;
	struct cgroup_limits lim = { 0 };
	cgroup_layout_init(&l, CGROUP_V2, root, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cove_err err = { 0 };
		int r = cgroup_create(&l, bad[i], &lim, &err);
		CHECK_ONCE(r == -EINVAL && err.code == COVE_EINVAL, "name '%s' refused: %s", bad[i], err.msg);
	}
	CHECK_ONCE(cgroup_count_procs(&l, NULL) == -EINVAL, "NULL name refused");
	CHECK_ONCE(cgroup_enter(&l, "ok", 0, NULL) == -EINVAL, "pid 0 refused");
	char longname[200];
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	CHECK_ONCE(cgroup_count_procs(&l, longname) == -EINVAL, "200-byte name refused");
}

static void test_v2_fake(void)
{
	static const char *const files[] = { "memory.max", "memory.swap.max", "cpu.max",
					     "pids.max",   "cgroup.procs",    "cgroup.freeze" };
	char root[] = "/tmp/cove-cg2-XXXXXX";
	struct cove_err err = { 0 };
	struct cgroup_layout l;
	char msg[600];
	uint64_t oom = 0;

	if (!mkdtemp(root)) {
		CHECK_ONCE(0, "mkdtemp: %s", strerror(errno));
		return;
	}
	put(at(root, "cgroup.controllers"), "cpuset cpu io memory hugetlb pids rdma misc\n");
	put(at(root, "cgroup.subtree_control"), "");
	put(at(root, "cove/cgroup.subtree_control"), "");
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		put(at3(root, "cove/sb1", files[i]), "");
	put(at(root, "cove/sb1/cgroup.events"), "populated 1\nfrozen 1\n");
	put(at(root, "cove/sb1/memory.events"), "low 0\nhigh 0\nmax 9\noom 3\noom_kill 2\noom_group_kill 0\n");

	CHECK_ONCE(cgroup_layout_init(&l, CGROUP_V2, root, 0) == 0, "v2 layout on a fake tree");
	CHECK_ONCE(cgroup_v2_enable(&l, &err) == 0, "v2 enable: %s", err.msg);
	CHECK_ONCE(l.controllers == CGROUP_CTRL_ALL, "memory, cpu and pids in use");
	CHECK_STR(slurp(at(root, "cgroup.subtree_control")), "+memory +cpu +pids", "root subtree_control");
	CHECK_STR(slurp(at(root, "cove/cgroup.subtree_control")), "+memory +cpu +pids", "cove subtree_control");

	struct cgroup_limits lim = { .memory_bytes = 64 * MIB, .cpu_millis = 500, .pids_max = 32 };
	CHECK_ONCE(cgroup_create(&l, "sb1", &lim, &err) == 0, "v2 create: %s", err.msg);
	CHECK_STR(slurp(at(root, "cove/sb1/memory.max")), "67108864", "memory.max");
	CHECK_STR(slurp(at(root, "cove/sb1/memory.swap.max")), "0", "memory.swap.max = 0");
	CHECK_STR(slurp(at(root, "cove/sb1/cpu.max")), "50000 100000", "cpu.max for 500 millis");
	CHECK_STR(slurp(at(root, "cove/sb1/pids.max")), "32", "pids.max");
	CHECK_ONCE(cgroup_enter(&l, "sb1", 4242, &err) == 0, "v2 enter: %s", err.msg);
	CHECK_STR(slurp(at(root, "cove/sb1/cgroup.procs")), "4242", "pid written to cgroup.procs");
	CHECK_ONCE(cgroup_count_procs(&l, "sb1") == 1, "count_procs");
	CHECK_ONCE(cgroup_oom_kills(&l, "sb1", &oom) == 0 && oom == 2, "oom_kill from memory.events");
	uint64_t cpu = 0;
	put(at(root, "cove/sb1/cpu.stat"), "usage_usec 1234\nuser_usec 1000\nsystem_usec 234\n");
	CHECK_ONCE(cgroup_cpu_usage(&l, "sb1", &cpu) == 0 && cpu == 1234000, "CPU time from cpu.stat: %llu ns",
		   (unsigned long long)cpu);
	CHECK_ONCE(cgroup_freeze(&l, "sb1", true, &err) == 0, "v2 freeze: %s", err.msg);
	CHECK_STR(slurp(at(root, "cove/sb1/cgroup.freeze")), "1", "cgroup.freeze = 1");
	put(at(root, "cove/sb1/cgroup.events"), "populated 1\nfrozen 0\n");
	CHECK_ONCE(cgroup_freeze(&l, "sb1", false, &err) == 0, "v2 thaw: %s", err.msg);
	CHECK_STR(slurp(at(root, "cove/sb1/cgroup.freeze")), "0", "cgroup.freeze = 0");
	struct cgroup_stats cs;
	put(at(root, "cove/sb1/cpu.stat"), "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n");
	put(at(root, "cove/sb1/memory.current"), "4096\n");
	put(at(root, "cove/sb1/memory.peak"), "8192\n");
	put(at(root, "cove/sb1/pids.current"), "3\n");
	CHECK_ONCE(cgroup_stats(&l, "sb1", &cs) == 0 && cs.cpu_ns == 1500000 && cs.memory == 4096 &&
			   cs.memory_peak == 8192 && cs.pids == 3,
		   "v2 stats: cpu, memory now and peak, pids");
	CHECK_ONCE(cgroup_stats(&l, "nosuch", &cs) == -ENOENT, "stats of a sandbox without a cgroup: ENOENT");

	/* Zero limits write nothing: no interface file is needed. */
	lim = (struct cgroup_limits){ 0 };
	CHECK_ONCE(cgroup_create(&l, "sb2", &lim, &err) == 0, "v2 create without limits: %s", err.msg);
	CHECK_ONCE(exists(at(root, "cove/sb2")) && !exists(at(root, "cove/sb2/memory.max")), "only the directory");

	unlink(at(root, "cove/sb1/pids.max"));
	lim.pids_max = 7;
	struct cove_err e2 = { 0 };
	snprintf(msg, sizeof(msg), "write '%s/cove/sb1/pids.max': No such file or directory", root);
	CHECK_ONCE(cgroup_create(&l, "sb1", &lim, &e2) == -ENOENT && e2.code == ENOENT, "missing file fails");
	CHECK_ONCE(strcmp(e2.msg, msg) == 0, "error names the path: %s", e2.msg);

	/* Without cpu the layout works; without pids it is refused. */
	put(at(root, "cgroup.controllers"), "memory pids\n");
	put(at(root, "cgroup.subtree_control"), "");
	put(at(root, "cove/cgroup.subtree_control"), "");
	cgroup_layout_init(&l, CGROUP_V2, root, 0);
	CHECK_ONCE(cgroup_v2_enable(&l, &err) == 0 && l.controllers == (CGROUP_CTRL_MEMORY | CGROUP_CTRL_PIDS),
		   "cpu unavailable is ignored");
	CHECK_STR(slurp(at(root, "cove/cgroup.subtree_control")), "+memory +pids", "only available ones enabled");
	put(at(root, "cgroup.controllers"), "cpu memory\n");
	struct cove_err e3 = { 0 };
	cgroup_layout_init(&l, CGROUP_V2, root, 0);
	CHECK_ONCE(cgroup_v2_enable(&l, &e3) == -ENOTSUP && strstr(e3.msg, "'pids'"), "no pids: %s", e3.msg);

	test_names(root);
	rm_tree(root);
}

static void test_v1_fake(void)
{
	char root[] = "/tmp/cove-cg1-XXXXXX";
	struct cove_err err = { 0 };
	struct cgroup_layout l;
	uint64_t oom = 0;

	if (!mkdtemp(root)) {
		CHECK_ONCE(0, "mkdtemp: %s", strerror(errno));
		return;
	}
	put(at(root, "memory/cove/sb1/memory.limit_in_bytes"), "");
	put(at(root, "memory/cove/sb1/memory.memsw.limit_in_bytes"), "");
	put(at(root, "memory/cove/sb1/memory.oom_control"), "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n");
	put(at(root, "cpu/cove/sb1/cpu.cfs_period_us"), "");
	put(at(root, "cpu/cove/sb1/cpu.cfs_quota_us"), "");
	put(at(root, "pids/cove/sb1/pids.max"), "");
	put(at(root, "freezer/cove/sb1/freezer.state"), "");
	for (size_t i = 0; i < 4; i++)
		put(at3(root, v1_hiers[i], "cove/sb1/cgroup.procs"), "");

	CHECK_ONCE(cgroup_layout_init(&l, CGROUP_V1, root, CGROUP_CTRL_ALL) == 0, "v1 layout on a fake tree");
	struct cgroup_limits lim = { .memory_bytes = 64 * MIB, .cpu_millis = 1500, .pids_max = 100 };
	CHECK_ONCE(cgroup_create(&l, "sb1", &lim, &err) == 0, "v1 create: %s", err.msg);
	CHECK_STR(slurp(at(root, "memory/cove/sb1/memory.limit_in_bytes")), "67108864", "memory.limit_in_bytes");
	CHECK_STR(slurp(at(root, "memory/cove/sb1/memory.memsw.limit_in_bytes")), "67108864", "memsw = limit");
	CHECK_STR(slurp(at(root, "cpu/cove/sb1/cpu.cfs_period_us")), "100000", "cfs_period_us");
	CHECK_STR(slurp(at(root, "cpu/cove/sb1/cpu.cfs_quota_us")), "150000", "cfs_quota_us for 1500 millis");
	CHECK_STR(slurp(at(root, "pids/cove/sb1/pids.max")), "100", "pids.max");
	CHECK_ONCE(cgroup_enter(&l, "sb1", 4242, &err) == 0, "v1 enter: %s", err.msg);
	for (size_t i = 0; i < 4; i++)
		CHECK_STR(slurp(at3(root, v1_hiers[i], "cove/sb1/cgroup.procs")), "4242", "pid in %s", v1_hiers[i]);
	CHECK_ONCE(cgroup_count_procs(&l, "sb1") == 1, "count_procs");
	CHECK_ONCE(cgroup_oom_kills(&l, "sb1", &oom) == 0 && oom == 5, "oom_kill, not oom_kill_disable");
	uint64_t cpu = 0;
	CHECK_ONCE(cgroup_cpu_usage(&l, "sb1", &cpu) == -ENOTSUP, "no CPU time without a cpuacct hierarchy");
	put(at(root, "cpuacct/cove/sb1/cpuacct.usage"), "987654321\n");
	put(at(root, "cpuacct/cove/sb1/cgroup.procs"), "");
	l.cpuacct = true;
	CHECK_ONCE(cgroup_cpu_usage(&l, "sb1", &cpu) == 0 && cpu == 987654321, "CPU time from cpuacct.usage");
	CHECK_ONCE(cgroup_enter(&l, "sb1", 4343, &err) == 0, "v1 enter with cpuacct: %s", err.msg);
	CHECK_STR(slurp(at(root, "cpuacct/cove/sb1/cgroup.procs")), "4343", "pid in cpuacct too");
	l.cpuacct = false;
	CHECK_ONCE(cgroup_freeze(&l, "sb1", true, &err) == 0, "v1 freeze: %s", err.msg);
	CHECK_STR(slurp(at(root, "freezer/cove/sb1/freezer.state")), "FROZEN", "freezer.state FROZEN");
	CHECK_ONCE(cgroup_freeze(&l, "sb1", false, &err) == 0, "v1 thaw: %s", err.msg);
	CHECK_STR(slurp(at(root, "freezer/cove/sb1/freezer.state")), "THAWED", "freezer.state THAWED");

	struct cove_err e2 = { 0 };
	CHECK_ONCE(cgroup_detect(&l, root, &e2) < 0 && strstr(e2.msg, "not a cgroup v1 mount"),
		   "detect refuses a plain tree: %s", e2.msg);
	rm_tree(root);
}

/* The real v1 hierarchies: limits read back from the kernel, a sleeping
 * child entered, frozen, thawed and killed by destroy. */
static void test_v1_real(void)
{
	struct cove_err err = { 0 };
	struct cgroup_layout l;
	bool had_parent[4];
	char name[64], dir[4][256];
	pid_t child = -1;

	if (cgroup_detect(&l, "/sys/fs/cgroup", &err) < 0 || l.mode != CGROUP_V1) {
		CHECK_ONCE(0, "detect /sys/fs/cgroup as v1: %s", err.msg);
		return;
	}
	CHECK_ONCE(l.controllers == CGROUP_CTRL_ALL, "v1: all controllers in use, cpu hierarchy '%s'", l.cpu_hier);
	snprintf(name, sizeof(name), "unit-%d", (int)getpid());
	for (size_t i = 0; i < 4; i++) {
		const char *h = i == 1 ? l.cpu_hier : v1_hiers[i];
		snprintf(dir[i], sizeof(dir[i]), "/sys/fs/cgroup/%s/cove/%s", h, name);
		had_parent[i] = exists(at3("/sys/fs/cgroup", h, "cove"));
	}

	struct cgroup_limits lim = { .memory_bytes = 64 * MIB, .cpu_millis = 500, .pids_max = 16 };
	CHECK_ONCE(cgroup_create(&l, name, &lim, &err) == 0, "v1 create %s: %s", name, err.msg);
	CHECK_ONCE(cgroup_create(&l, name, &lim, &err) == 0, "v1 create is idempotent: %s", err.msg);
	lim.memory_bytes = 128 * MIB;
	CHECK_ONCE(cgroup_create(&l, name, &lim, &err) == 0, "v1 raising the memory limit: %s", err.msg);
	lim.memory_bytes = 64 * MIB;
	CHECK_ONCE(cgroup_create(&l, name, &lim, &err) == 0, "v1 lowering it again: %s", err.msg);
	CHECK_STR(slurp(at(dir[0], "memory.limit_in_bytes")), "67108864", "kernel memory.limit_in_bytes");
	CHECK_STR(slurp(at(dir[0], "memory.memsw.limit_in_bytes")), "67108864", "kernel memsw.limit_in_bytes");
	CHECK_STR(slurp(at(dir[1], "cpu.cfs_quota_us")), "50000", "kernel cfs_quota_us");
	CHECK_STR(slurp(at(dir[2], "pids.max")), "16", "kernel pids.max");

	child = spawn_sleeper();
	CHECK_ONCE(child > 0, "fork sleeper");
	if (child <= 0)
		goto out;
	CHECK_ONCE(cgroup_enter(&l, name, child, &err) == 0, "v1 enter: %s", err.msg);
	CHECK_ONCE(cgroup_count_procs(&l, name) == 1, "one process in the cgroup");
	struct cgroup_stats cs;
	CHECK_ONCE(cgroup_stats(&l, name, &cs) == 0 && cs.pids == 1 && cs.memory != CGROUP_STAT_NONE &&
			   cs.memory_peak >= cs.memory && cs.cpu_ns != CGROUP_STAT_NONE,
		   "v1 stats: one pid, memory, and CPU time (cpuacct%s)", l.cpuacct ? " of its own" : "");
	CHECK_ONCE(cgroup_freeze(&l, name, true, &err) == 0, "v1 freeze: %s", err.msg);
	CHECK_STR(slurp(at(dir[3], "freezer.state")), "FROZEN", "kernel says FROZEN");
	CHECK_ONCE(cgroup_freeze(&l, name, false, &err) == 0, "v1 thaw: %s", err.msg);
	CHECK_STR(slurp(at(dir[3], "freezer.state")), "THAWED", "kernel says THAWED");
	CHECK_ONCE(cgroup_destroy(&l, name, 3000, &err) == 0, "v1 destroy: %s", err.msg);
	CHECK_ONCE(died_of_sigkill(child), "sleeper died of SIGKILL");
	child = -1;
	for (size_t i = 0; i < 4; i++)
		CHECK_ONCE(!exists(dir[i]), "%s removed", dir[i]);
	CHECK_ONCE(cgroup_destroy(&l, name, 100, &err) == 0, "destroying a missing cgroup is fine: %s", err.msg);
out:
	reap(&child);
	(void)cgroup_destroy(&l, name, 1000, NULL);
	for (size_t i = 0; i < 4; i++)
		if (!had_parent[i])
			(void)rmdir(at3("/sys/fs/cgroup", i == 1 ? l.cpu_hier : v1_hiers[i], "cove"));
}

/* The hybrid host's cgroup2 mount: no memory or pids controller, so it is
 * used with controllers = 0, exercising the v2 paths that need none. */
static void test_v2_unified(void)
{
	static const char root[] = "/sys/fs/cgroup/unified";
	struct cove_err err = { 0 }, e2 = { 0 };
	struct cgroup_layout l;
	char name[64], dir[256];
	pid_t child = -1;
	bool had_parent = exists(at(root, "cove"));

	CHECK_ONCE(cgroup_detect(&l, root, &e2) == -ENOTSUP && strstr(e2.msg, "'memory'"),
		   "detect refuses a cgroup2 mount without memory: %s", e2.msg);
	CHECK_ONCE(cgroup_layout_init(&l, CGROUP_V2, root, 0) == 0, "v2 layout on %s", root);
	snprintf(name, sizeof(name), "unit-%d", (int)getpid());
	snprintf(dir, sizeof(dir), "%s/cove/%s", root, name);

	struct cgroup_limits lim = { 0 };
	CHECK_ONCE(cgroup_create(&l, name, &lim, &err) == 0, "v2 create %s: %s", name, err.msg);
	CHECK_ONCE(exists(dir), "%s exists", dir);
	lim.memory_bytes = 64 * MIB;
	struct cove_err e3 = { 0 };
	CHECK_ONCE(cgroup_create(&l, name, &lim, &e3) < 0 && strstr(e3.msg, "memory.max"),
		   "a memory limit without the controller fails: %s", e3.msg);

	child = spawn_sleeper();
	CHECK_ONCE(child > 0, "fork sleeper");
	if (child <= 0)
		goto out;
	CHECK_ONCE(cgroup_enter(&l, name, child, &err) == 0, "v2 enter: %s", err.msg);
	CHECK_ONCE(cgroup_count_procs(&l, name) == 1, "one process in the cgroup");
	CHECK_ONCE(cgroup_freeze(&l, name, true, &err) == 0, "v2 freeze: %s", err.msg);
	CHECK_ONCE(strstr(slurp(at(dir, "cgroup.events")) ?: "", "frozen 1") != NULL, "cgroup.events says frozen 1");
	CHECK_ONCE(cgroup_freeze(&l, name, false, &err) == 0, "v2 thaw: %s", err.msg);
	CHECK_ONCE(strstr(slurp(at(dir, "cgroup.events")) ?: "", "frozen 0") != NULL, "cgroup.events says frozen 0");
	CHECK_ONCE(exists(at(dir, "cgroup.kill")), "cgroup.kill is there to be used");
	CHECK_ONCE(cgroup_destroy(&l, name, 3000, &err) == 0, "v2 destroy: %s", err.msg);
	CHECK_ONCE(died_of_sigkill(child), "sleeper died of SIGKILL");
	child = -1;
	CHECK_ONCE(!exists(dir), "%s removed", dir);
out:
	reap(&child);
	(void)cgroup_destroy(&l, name, 1000, NULL);
	if (!had_parent)
		(void)rmdir(at(root, "cove"));
}

int main(void)
{
	test_v2_fake();
	test_v1_fake();
	if (geteuid() != 0 || !exists("/sys/fs/cgroup/unified/cgroup.procs")) {
		SKIP("real cgroups need root on this hybrid host");
		return tap_done();
	}
	test_v1_real();
	test_v2_unified();
	return tap_done();
}

/* Per-sandbox cgroups on v1 and v2; see cgroup.h for the host layouts. Pure
 * helpers (names, paths, keyed files) first, then file IO, then operations.
 * Each interface file gets one write(2): the kernel parses every write on
 * its own, so a value split in two would be two (wrong) values. */
#include "sys/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "common/cleanup.h"

#define CGROUP_PARENT "cove"
#define CGROUP_NAME_MAX 128
#define CPU_PERIOD_US 100000
#define FREEZE_TIMEOUT_MS 2000
#define POLL_MS 5
/* The first wait for a freeze to be reached: its tasks only have to get to
 * the refrigerator, well under a millisecond when they are idle, and a
 * snapshot or fork waits with the sandbox frozen. Doubled up to POLL_MS. */
#define FREEZE_FIRST_POLL_US 50
/* A v1 freeze still FREEZING after this long is thawed and asked again. */
#define REFREEZE_MS 100

/* Hierarchy indexes; the first three match the CGROUP_CTRL_* bits. On v2
 * every index names the one directory. */
enum hier { HIER_MEMORY, HIER_CPU, HIER_PIDS, HIER_FREEZER, HIER_CPUACCT, HIER_COUNT };

static const char *const ctrl_names[] = { "memory", "cpu", "pids" };

/* Names become path components in a cgroupfs, whose own files have dots
 * ("cgroup.procs"): only [A-Za-z0-9_-] rules out both traversal and a clash
 * with an interface file. */
static bool name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	return n > 0 && n <= CGROUP_NAME_MAX &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* The number on the line "<key> <number>" of a flat keyed file
 * (cgroup.events, memory.events, memory.oom_control). */
static int keyed_get(const char *text, const char *key, uint64_t *ret)
{
	size_t klen = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, key, klen) == 0 && p[klen] == ' ')
			return sscanf(p + klen + 1, "%" SCNu64, ret) == 1 ? 0 : -EINVAL;
	return -ENOENT;
}

/* From a cgroup.controllers line (tokenised in place), the mask of the
 * controllers we manage, and in out "+memory +cpu +pids" for them. */
static unsigned ctrl_parse(char *text, char *out, size_t size)
{
	unsigned mask = 0;
	char *save = NULL;
	for (char *t = strtok_r(text, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
		for (size_t i = 0; i < ARRAY_SIZE(ctrl_names); i++)
			if (strcmp(t, ctrl_names[i]) == 0)
				mask |= 1u << i;
	out[0] = '\0';
	for (size_t i = 0, n = 0; i < ARRAY_SIZE(ctrl_names) && n < size; i++)
		if (mask & (1u << i))
			n += snprintf(out + n, size - n, "%s+%s", n ? " " : "", ctrl_names[i]);
	return mask;
}

/* The hierarchies a layout uses: one on v2; on v1 each enabled controller's
 * and, last, the freezer's. */
static int hier_list(const struct cgroup_layout *l, int out[HIER_COUNT])
{
	int n = 0;
	if (l->mode == CGROUP_V1)
		for (int h = HIER_MEMORY; h <= HIER_PIDS; h++)
			if (l->controllers & (1u << h))
				out[n++] = h;
	if (l->mode == CGROUP_V1 && l->cpuacct)
		out[n++] = HIER_CPUACCT;
	out[n++] = HIER_FREEZER;
	return n;
}

/* Fills err with "<what> '<path>': <strerror>" and passes r (-errno) on. */
static int fail(struct cove_err *err, int r, const char *what, const char *path)
{
	err_sys(err, -r, "%s '%s'", what, path);
	return r;
}

/* <root>/cove[/<name>[/<file>]] on v2, <root>/<hierarchy>/cove/... on v1;
 * name has passed check_name (NULL: the parent). */
static int cg_path(char buf[PATH_MAX], const struct cgroup_layout *l, int h, const char *name, const char *file,
		   struct cove_err *err)
{
	static const char *const hiers[] = { "memory", NULL, "pids", "freezer", "cpuacct" };
	const char *hier = l->mode == CGROUP_V2 ? NULL : h == HIER_CPU ? l->cpu_hier : hiers[h];
	int n = snprintf(buf, PATH_MAX, "%s%s%s/" CGROUP_PARENT "%s%s%s%s", l->root, hier ? "/" : "", hier ? hier : "",
			 name ? "/" : "", name ? name : "", file ? "/" : "", file ? file : "");
	return n < 0 || n >= PATH_MAX ? fail(err, -ENAMETOOLONG, "cgroup path under", l->root) : 0;
}

/* Every public operation starts here: no path is built from a bad name. */
static int check_name(const char *name, struct cove_err *err)
{
	if (name_valid(name))
		return 0;
	err_set(err, COVE_EINVAL, "invalid cgroup name '%s'", name ? name : "(null)");
	return -EINVAL;
}

/* err may be NULL, for a write whose failure the caller handles. */
static int write_str(const char *path, const char *val, struct cove_err *err)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
	size_t len = strlen(val);
	ssize_t n = -1;
	/* memory limit writes fail with EINTR while a signal is pending
	 * (coved gets many SIGCHLDs): that is a reason to try again. */
	for (int tries = 0; fd >= 0 && tries < 100; tries++)
		if ((n = write(fd, val, len)) >= 0 || errno != EINTR)
			break;
	if (n < 0)
		return fail(err, -errno, "write", path);
	return (size_t)n == len ? 0 : fail(err, -EIO, "short write to", path);
}

/* Reads a small file whole, NUL-terminated; its length or -errno. */
static int read_str(const char *path, char *buf, size_t size)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0;
	ssize_t n = 1;
	if (fd < 0)
		return -errno;
	while (len + 1 < size && (n = read(fd, buf + len, size - 1 - len)) > 0)
		len += (size_t)n;
	buf[len] = '\0';
	return n < 0 ? -errno : (int)len;
}

static int write_cg(const struct cgroup_layout *l, int h, const char *name, const char *file, const char *val,
		    struct cove_err *err)
{
	char path[PATH_MAX];
	int r = cg_path(path, l, h, name, file, err);
	return r < 0 ? r : write_str(path, val, err);
}

static bool cg_exists(const struct cgroup_layout *l, int h, const char *name, const char *file)
{
	char path[PATH_MAX];
	return cg_path(path, l, h, name, file, NULL) == 0 && access(path, F_OK) == 0;
}

/* Counts the pids in a cgroup.procs file, sending each SIGKILL if asked.
 * pid 0 (a task outside our pid namespace) must never reach kill(). */
static int procs_scan(const char *path, bool kill_them)
{
	FILE *f = fopen(path, "re");
	int pid, n = 0;
	if (!f)
		return -errno;
	for (; fscanf(f, "%d", &pid) == 1; n++)
		if (kill_them && pid > 0)
			(void)kill(pid, SIGKILL);
	(void)fclose(f);
	return n;
}

int cgroup_layout_init(struct cgroup_layout *ret, enum cgroup_mode mode, const char *root, unsigned controllers)
{
	if (strlen(root) >= sizeof(ret->root))
		return -ENAMETOOLONG;
	*ret = (struct cgroup_layout){ .mode = mode, .controllers = controllers & CGROUP_CTRL_ALL };
	strcpy(ret->cpu_hier, "cpu");
	strcpy(ret->root, root);
	return 0;
}

int cgroup_v2_enable(struct cgroup_layout *l, struct cove_err *err)
{
	char path[PATH_MAX], text[512], plus[64];
	int r;
	(void)snprintf(path, sizeof(path), "%s/cgroup.controllers", l->root);
	if ((r = read_str(path, text, sizeof(text))) < 0)
		return fail(err, r, "read", path);
	unsigned have = ctrl_parse(text, plus, sizeof(plus));
	unsigned missing = (CGROUP_CTRL_MEMORY | CGROUP_CTRL_PIDS) & ~have;
	if (missing) {
		err_set(err, ENOTSUP, "cgroup v2 controller '%s' is not available in '%s'",
			ctrl_names[__builtin_ctz(missing)], l->root);
		return -ENOTSUP;
	}
	(void)snprintf(path, sizeof(path), "%s/cgroup.subtree_control", l->root);
	if ((r = write_str(path, plus, err)) < 0 || (r = cg_path(path, l, 0, NULL, NULL, err)) < 0)
		return r;
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return fail(err, -errno, "mkdir", path);
	if ((r = write_cg(l, 0, NULL, "cgroup.subtree_control", plus, err)) < 0)
		return r;
	l->controllers = have;
	return 0;
}

static bool is_v1_mount(const char *root, const char *hier)
{
	char path[PATH_MAX];
	struct statfs s;
	return snprintf(path, sizeof(path), "%s/%s", root, hier) < (int)sizeof(path) && statfs(path, &s) == 0 &&
	       s.f_type == CGROUP_SUPER_MAGIC;
}

/* The unified mount of a hybrid host is deliberately not looked at: it
 * holds no controller cove needs. */
static int v1_check(struct cgroup_layout *l, struct cove_err *err)
{
	static const char *const need[] = { "memory", "cpu", "pids", "freezer" };
	for (size_t i = 0; i < ARRAY_SIZE(need); i++) {
		if (is_v1_mount(l->root, need[i]))
			continue;
		if (i == HIER_CPU && is_v1_mount(l->root, "cpu,cpuacct")) {
			strcpy(l->cpu_hier, "cpu,cpuacct");
			continue;
		}
		err_set(err, ENOTSUP, "'%s/%s' is not a cgroup v1 mount (cove needs memory, cpu, pids and freezer)",
			l->root, need[i]);
		return -ENOTSUP;
	}
	l->controllers = CGROUP_CTRL_ALL;
	/* CPU time (cgroup_cpu_usage): in cpu's hierarchy when they share one,
	 * else in cpuacct's, joined too when mounted. */
	l->cpuacct = strcmp(l->cpu_hier, "cpu,cpuacct") != 0 && is_v1_mount(l->root, "cpuacct");
	return 0;
}

int cgroup_detect(struct cgroup_layout *ret, const char *root, struct cove_err *err)
{
	struct cgroup_layout l;
	struct statfs s;
	int r;
	if (cgroup_layout_init(&l, CGROUP_V2, root, 0) < 0)
		return fail(err, -ENAMETOOLONG, "cgroup root", root);
	if (statfs(root, &s) < 0)
		return fail(err, -errno, "statfs", root);
	if (s.f_type == CGROUP2_SUPER_MAGIC) {
		r = cgroup_v2_enable(&l, err);
	} else {
		l.mode = CGROUP_V1;
		r = v1_check(&l, err);
	}
	if (r == 0)
		*ret = l;
	return r;
}

/* memory.memsw (memory + swap) may never be below memory.limit_in_bytes:
 * when an existing limit is raised memsw has to move first, otherwise
 * (fresh cgroup, lowering) the memory limit does. Equal values leave the
 * sandbox no swap. */
static int memory_v1(const struct cgroup_layout *l, const char *name, const char *val, struct cove_err *err)
{
	static const char lim[] = "memory.limit_in_bytes", memsw[] = "memory.memsw.limit_in_bytes";
	if (!cg_exists(l, HIER_MEMORY, name, memsw))
		return write_cg(l, HIER_MEMORY, name, lim, val, err);
	if (write_cg(l, HIER_MEMORY, name, lim, val, NULL) == 0)
		return write_cg(l, HIER_MEMORY, name, memsw, val, err);
	int r = write_cg(l, HIER_MEMORY, name, memsw, val, err);
	return r < 0 ? r : write_cg(l, HIER_MEMORY, name, lim, val, err);
}

static int limits_write(const struct cgroup_layout *l, const char *name, const struct cgroup_limits *lim,
			struct cove_err *err)
{
	bool v1 = l->mode == CGROUP_V1;
	uint64_t quota = (uint64_t)lim->cpu_millis * CPU_PERIOD_US / 1000;
	char val[64];
	int r = 0;
	if (lim->memory_bytes) {
		(void)snprintf(val, sizeof(val), "%" PRIu64, lim->memory_bytes);
		if (v1)
			r = memory_v1(l, name, val, err);
		else if ((r = write_cg(l, HIER_MEMORY, name, "memory.max", val, err)) == 0 &&
			 cg_exists(l, HIER_MEMORY, name, "memory.swap.max"))
			r = write_cg(l, HIER_MEMORY, name, "memory.swap.max", "0", err);
	}
	if (r == 0 && lim->cpu_millis && v1) {
		(void)snprintf(val, sizeof(val), "%" PRIu64, quota);
		if ((r = write_cg(l, HIER_CPU, name, "cpu.cfs_period_us", "100000", err)) == 0)
			r = write_cg(l, HIER_CPU, name, "cpu.cfs_quota_us", val, err);
	} else if (r == 0 && lim->cpu_millis) {
		(void)snprintf(val, sizeof(val), "%" PRIu64 " %d", quota, CPU_PERIOD_US);
		r = write_cg(l, HIER_CPU, name, "cpu.max", val, err);
	}
	if (r == 0 && lim->pids_max) {
		(void)snprintf(val, sizeof(val), "%" PRIu32, lim->pids_max);
		r = write_cg(l, HIER_PIDS, name, "pids.max", val, err);
	}
	return r;
}

int cgroup_create(const struct cgroup_layout *l, const char *name, const struct cgroup_limits *lim,
		  struct cove_err *err)
{
	char path[PATH_MAX];
	int hs[HIER_COUNT], n = hier_list(l, hs), r;
	if ((r = check_name(name, err)) < 0)
		return r;
	for (int i = 0; i < n * 2; i++) {
		if ((r = cg_path(path, l, hs[i / 2], i % 2 ? name : NULL, NULL, err)) < 0)
			return r;
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return fail(err, -errno, "mkdir", path);
	}
	return limits_write(l, name, lim, err);
}

int cgroup_enter(const struct cgroup_layout *l, const char *name, int pid, struct cove_err *err)
{
	char val[16];
	int hs[HIER_COUNT], n = hier_list(l, hs), r;
	if ((r = check_name(name, err)) < 0)
		return r;
	if (pid <= 0) {
		err_set(err, COVE_EINVAL, "invalid pid %d", pid);
		return -EINVAL;
	}
	(void)snprintf(val, sizeof(val), "%d", pid);
	for (int i = 0; i < n && r == 0; i++)
		r = write_cg(l, hs[i], name, "cgroup.procs", val, err);
	return r;
}

/* 1 once the freezer reports the wanted state: v1 freezer.state says
 * FREEZING until every task has stopped, v2 cgroup.events flips "frozen". */
static int freeze_reached(const struct cgroup_layout *l, const char *path, bool frozen)
{
	char buf[512];
	uint64_t v;
	int r = read_str(path, buf, sizeof(buf));
	if (r < 0)
		return r;
	if (l->mode == CGROUP_V1)
		return strncmp(buf, frozen ? "FROZEN" : "THAWED", 6) == 0;
	r = keyed_get(buf, "frozen", &v);
	return r < 0 ? r : v == (frozen ? 1 : 0);
}

int cgroup_freeze(const struct cgroup_layout *l, const char *name, bool frozen, struct cove_err *err)
{
	bool v1 = l->mode == CGROUP_V1;
	char state[PATH_MAX];
	int r;
	if ((r = check_name(name, err)) < 0 ||
	    (r = write_cg(l, HIER_FREEZER, name, v1 ? "freezer.state" : "cgroup.freeze",
			  v1 ? (frozen ? "FROZEN" : "THAWED") : (frozen ? "1" : "0"), err)) < 0 ||
	    (r = cg_path(state, l, HIER_FREEZER, name, v1 ? "freezer.state" : "cgroup.events", err)) < 0)
		return r;
	int waited_us = 0, step_us = FREEZE_FIRST_POLL_US, since_us = 0;
	while ((r = freeze_reached(l, state, frozen)) == 0 && waited_us < FREEZE_TIMEOUT_MS * 1000) {
		(void)usleep(step_us);
		waited_us += step_us;
		since_us += step_us;
		step_us = step_us * 2 < POLL_MS * 1000 ? step_us * 2 : POLL_MS * 1000;
		/* A v1 freeze can stay FREEZING for good: a vfork child frozen
		 * before its exec, its parent waiting on it where v1 does not
		 * count it frozen. A thaw lets the child exec; then again. */
		if (v1 && frozen && since_us >= REFREEZE_MS * 1000) {
			since_us = 0;
			if (write_cg(l, HIER_FREEZER, name, "freezer.state", "THAWED", NULL) == 0)
				(void)usleep(POLL_MS * 1000);
			(void)write_cg(l, HIER_FREEZER, name, "freezer.state", "FROZEN", NULL);
		}
	}
	if (r <= 0)
		return fail(err, r < 0 ? r : -ETIMEDOUT, frozen ? "freeze" : "thaw", state);
	return 0;
}

/* On v1 a task can fork between our reading cgroup.procs and kill(), so the
 * cgroup is frozen first; a frozen task keeps its SIGKILL pending until the
 * thaw. Failures here show up as a cgroup that will not go away. */
static void kill_all(const struct cgroup_layout *l, const char *name)
{
	bool v1 = l->mode == CGROUP_V1;
	char path[PATH_MAX];
	int hs[HIER_COUNT], n = hier_list(l, hs);
	if (!v1 && write_cg(l, 0, name, "cgroup.kill", "1", NULL) == 0)
		return;
	if (v1)
		(void)cgroup_freeze(l, name, true, NULL);
	for (int i = 0; i < n; i++)
		if (cg_path(path, l, hs[i], name, "cgroup.procs", NULL) == 0)
			(void)procs_scan(path, true);
	if (v1)
		(void)cgroup_freeze(l, name, false, NULL);
}

/* rmdir fails with EBUSY until the killed tasks have exited; anything that
 * still shows up in cgroup.procs meanwhile (v2 without cgroup.kill, where
 * nothing stops a fork) is killed again. */
static int rmdir_wait(const struct cgroup_layout *l, int h, const char *name, int timeout_ms, struct cove_err *err)
{
	char dir[PATH_MAX], procs[PATH_MAX];
	int r;
	if ((r = cg_path(dir, l, h, name, NULL, err)) < 0 || (r = cg_path(procs, l, h, name, "cgroup.procs", err)) < 0)
		return r;
	for (int waited = 0;; waited += POLL_MS) {
		if (rmdir(dir) == 0 || errno == ENOENT)
			return 0;
		if (errno != EBUSY || waited >= timeout_ms)
			return fail(err, -errno, "rmdir", dir);
		(void)procs_scan(procs, true);
		(void)usleep(POLL_MS * 1000);
	}
}

int cgroup_kill(const struct cgroup_layout *l, const char *name)
{
	int r = check_name(name, NULL);
	if (r == 0)
		kill_all(l, name);
	return r;
}

int cgroup_destroy(const struct cgroup_layout *l, const char *name, int timeout_ms, struct cove_err *err)
{
	int hs[HIER_COUNT], n = hier_list(l, hs), r;
	if ((r = check_name(name, err)) < 0)
		return r;
	kill_all(l, name);
	for (int i = 0; i < n && r == 0; i++)
		r = rmdir_wait(l, hs[i], name, timeout_ms, err);
	return r;
}

int cgroup_count_procs(const struct cgroup_layout *l, const char *name)
{
	char path[PATH_MAX];
	int r = check_name(name, NULL);
	if (r < 0 || (r = cg_path(path, l, HIER_FREEZER, name, "cgroup.procs", NULL)) < 0)
		return r;
	return procs_scan(path, false);
}

int cgroup_cpu_usage(const struct cgroup_layout *l, const char *name, uint64_t *ret)
{
	char path[PATH_MAX], buf[1024];
	bool v1 = l->mode == CGROUP_V1;
	int r = check_name(name, NULL);
	if (r < 0)
		return r;
	if (v1 && !l->cpuacct && strcmp(l->cpu_hier, "cpu,cpuacct") != 0)
		return -ENOTSUP;
	if ((r = cg_path(path, l, v1 && l->cpuacct ? HIER_CPUACCT : HIER_CPU, name, v1 ? "cpuacct.usage" : "cpu.stat",
			 NULL)) < 0 ||
	    (r = read_str(path, buf, sizeof(buf))) < 0)
		return r;
	if (v1)
		return sscanf(buf, "%" SCNu64, ret) == 1 ? 0 : -EINVAL;
	uint64_t usec;
	if ((r = keyed_get(buf, "usage_usec", &usec)) < 0)
		return r;
	*ret = usec * 1000;
	return 0;
}

int cgroup_oom_kills(const struct cgroup_layout *l, const char *name, uint64_t *ret)
{
	char path[PATH_MAX], buf[1024];
	const char *file = l->mode == CGROUP_V1 ? "memory.oom_control" : "memory.events";
	int r = check_name(name, NULL);
	if (r < 0 || (r = cg_path(path, l, HIER_MEMORY, name, file, NULL)) < 0 ||
	    (r = read_str(path, buf, sizeof(buf))) < 0)
		return r;
	return keyed_get(buf, "oom_kill", ret);
}

/* One number from a file of the sandbox's cgroup: the whole file, or the
 * line of key in a keyed one. */
static int stat_get(const struct cgroup_layout *l, int h, const char *name, const char *file, const char *key,
		    uint64_t *ret)
{
	char path[PATH_MAX], buf[2048];
	int r = cg_path(path, l, h, name, file, NULL);
	if (r < 0 || (r = read_str(path, buf, sizeof(buf))) < 0)
		return r;
	if (key)
		return keyed_get(buf, key, ret);
	return sscanf(buf, "%" SCNu64, ret) == 1 ? 0 : -EINVAL;
}

int cgroup_stats(const struct cgroup_layout *l, const char *name, struct cgroup_stats *ret)
{
	int r = check_name(name, NULL);
	if (r < 0)
		return r;
	*ret = (struct cgroup_stats){ CGROUP_STAT_NONE, CGROUP_STAT_NONE, CGROUP_STAT_NONE, CGROUP_STAT_NONE };
	if (cgroup_cpu_usage(l, name, &ret->cpu_ns) < 0)
		ret->cpu_ns = CGROUP_STAT_NONE;
	if (l->mode == CGROUP_V2) {
		(void)stat_get(l, HIER_MEMORY, name, "memory.current", NULL, &ret->memory);
		(void)stat_get(l, HIER_MEMORY, name, "memory.peak", NULL, &ret->memory_peak);
	} else {
		(void)stat_get(l, HIER_MEMORY, name, "memory.usage_in_bytes", NULL, &ret->memory);
		(void)stat_get(l, HIER_MEMORY, name, "memory.max_usage_in_bytes", NULL, &ret->memory_peak);
	}
	(void)stat_get(l, HIER_PIDS, name, "pids.current", NULL, &ret->pids);
	/* Without any of them, the sandbox has no cgroup (here). */
	return ret->memory == CGROUP_STAT_NONE && ret->pids == CGROUP_STAT_NONE ? -ENOENT : 0;
}

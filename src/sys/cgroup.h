/* Per-sandbox cgroups on cgroup v2 (unified) and v1 (one hierarchy per
 * controller) hosts, and on this kind of hybrid host: v1 controllers plus a
 * cgroup2 mount at /sys/fs/cgroup/unified that holds only hugetlb. crun
 * refuses hybrid hosts; cove treats a host as v2 only when
 * /sys/fs/cgroup itself is cgroup2, and otherwise uses the v1 hierarchies of
 * memory, cpu, pids and freezer (all required) and ignores the unified mount.
 *
 * A sandbox's cgroup is <root>/cove/<name> in each hierarchy. */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

enum cgroup_mode { CGROUP_V1, CGROUP_V2 };

struct cgroup_limits {
	uint64_t memory_bytes; /* hard limit; 0 = none. Swap is limited to 0 too. */
	uint32_t cpu_millis;   /* 1000 = one CPU; 0 = no quota */
	uint32_t pids_max;     /* 0 = no limit */
};

/* Resource controllers, as a mask. On v1 each is its own hierarchy (the
 * freezer hierarchy is always used too: destroy and freeze need it); on v2
 * they are enabled in the subtree of <root>/cove. */
enum cgroup_ctrl {
	CGROUP_CTRL_MEMORY = 1 << 0,
	CGROUP_CTRL_CPU = 1 << 1,
	CGROUP_CTRL_PIDS = 1 << 2,
};
#define CGROUP_CTRL_ALL (CGROUP_CTRL_MEMORY | CGROUP_CTRL_CPU | CGROUP_CTRL_PIDS)

struct cgroup_layout {
	enum cgroup_mode mode;
	unsigned controllers; /* CGROUP_CTRL_* in use (v1: hierarchies joined); limits need theirs */
	char cpu_hier[16];    /* v1: "cpu", or "cpu,cpuacct" where only that is mounted */
	bool cpuacct;         /* v1: a cpuacct hierarchy of its own, used too (CPU time) */
	char root[256];       /* "/sys/fs/cgroup" normally; tests point it at a fake tree */
};

/* Fill a layout without looking at the host: for tests on a fake tree, and
 * for a cgroup2 mount whose controllers cove must not touch (controllers =
 * 0: only cgroup.procs, cgroup.freeze and cgroup.kill are used then).
 * -ENAMETOOLONG if root does not fit; ret is untouched on failure. */
int cgroup_layout_init(struct cgroup_layout *ret, enum cgroup_mode mode, const char *root, unsigned controllers);

/* v2: enable memory, cpu and pids (those the host offers) in
 * <root>/cgroup.subtree_control, create <root>/cove and enable them there,
 * and record them in l->controllers. memory and pids are required: without
 * them a sandbox could exhaust the host. cgroup_detect calls this. */
int cgroup_v2_enable(struct cgroup_layout *l, struct cove_err *err);

/* Detect how cgroups are mounted under root ("/sys/fs/cgroup"); -errno or
 * err when neither a usable v2 nor the needed v1 hierarchies exist. On v2
 * it enables memory, cpu and pids in <root>/cgroup.subtree_control and in
 * <root>/cove. */
int cgroup_detect(struct cgroup_layout *ret, const char *root, struct cove_err *err);

/* Create the sandbox's cgroup(s) and apply limits. Idempotent. name is one
 * path component of [A-Za-z0-9_-], at most 128 bytes. */
int cgroup_create(const struct cgroup_layout *l, const char *name, const struct cgroup_limits *lim,
		  struct cove_err *err);

/* Move pid into the sandbox's cgroup(s). */
int cgroup_enter(const struct cgroup_layout *l, const char *name, int pid, struct cove_err *err);

/* Kill every process in the cgroup (SIGKILL; cgroup.kill on v2, freeze + kill
 * each + thaw on v1) and remove the cgroup(s), waiting up to timeout_ms for
 * them to empty. Missing cgroups are not an error. */
int cgroup_destroy(const struct cgroup_layout *l, const char *name, int timeout_ms, struct cove_err *err);

/* SIGKILL every process in the cgroup, as cgroup_destroy does first, and
 * return without waiting: on return none of them runs another instruction
 * of its own (each has the kill pending; none could fork meanwhile). */
int cgroup_kill(const struct cgroup_layout *l, const char *name);

/* Number of processes in the sandbox's cgroup, or -errno. */
int cgroup_count_procs(const struct cgroup_layout *l, const char *name);

/* Freeze or thaw the sandbox (for consistent snapshots and sleep). */
int cgroup_freeze(const struct cgroup_layout *l, const char *name, bool frozen, struct cove_err *err);

/* The CPU time the sandbox's processes used, in ns (v1 cpuacct.usage, v2
 * cpu.stat's usage_usec); -ENOTSUP on a v1 host without cpuacct, -errno. */
int cgroup_cpu_usage(const struct cgroup_layout *l, const char *name, uint64_t *ret);

/* How many processes the OOM killer has killed in the sandbox (v1
 * memory.oom_control's oom_kill, v2 memory.events' oom_kill); -errno. */
int cgroup_oom_kills(const struct cgroup_layout *l, const char *name, uint64_t *ret);

/* What a sandbox uses now; CGROUP_STAT_NONE for a figure this host's
 * cgroups do not give (v1 without cpuacct: no CPU time). */
#define CGROUP_STAT_NONE UINT64_MAX
struct cgroup_stats {
	uint64_t cpu_ns;      /* CPU time, user and system, since it started */
	uint64_t memory;      /* bytes charged now (page cache included) */
	uint64_t memory_peak; /* the most since it started */
	uint64_t pids;        /* tasks (threads too) */
};
/* -ENOENT when the sandbox has no cgroup. */
int cgroup_stats(const struct cgroup_layout *l, const char *name, struct cgroup_stats *ret);

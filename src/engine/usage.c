/* See usage.h. */
#include "engine/usage.h"

#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "engine/disk.h"
#include "engine/engine.h"
#include "engine/lifecycle.h"
#include "net/net.h"

/* A number from a sysfs file; USAGE_NONE when there is none. */
static uint64_t read_u64(const char *path)
{
	char buf[32];
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return USAGE_NONE;
	buf[n] = '\0';
	char *end;
	unsigned long long v = strtoull(buf, &end, 10);
	return end == buf ? USAGE_NONE : (uint64_t)v;
}

/* The host's end of the veth counts the other way round: what it sends,
 * the sandbox receives. */
static void net_usage(const struct sandbox *sb, struct sandbox_usage *u)
{
	char ifname[16], path[96];
	if (!sb->spec.egress || sb->state != SB_RUNNING || net_ifname(sb->id, ifname) < 0)
		return;
	snprintf(path, sizeof(path), "/sys/class/net/%s/statistics/tx_bytes", ifname);
	u->net_rx = read_u64(path);
	snprintf(path, sizeof(path), "/sys/class/net/%s/statistics/rx_bytes", ifname);
	u->net_tx = read_u64(path);
}

void sandbox_usage_get(const struct engine *d, const struct sandbox *sb, struct sandbox_usage *ret)
{
	*ret = (struct sandbox_usage){
		.at = sandbox_now_ms(), .disk = USAGE_NONE, .net_rx = USAGE_NONE, .net_tx = USAGE_NONE
	};
	if (cgroup_stats(&d->cgroups, sb->id, &ret->cg) < 0)
		ret->cg = (struct cgroup_stats){ USAGE_NONE, USAGE_NONE, USAGE_NONE, USAGE_NONE };
	if (disk_usage(d, sb, &ret->disk) < 0)
		ret->disk = USAGE_NONE;
	net_usage(sb, ret);
}

static json_t *num(uint64_t v)
{
	return v == USAGE_NONE ? json_null() : json_integer((json_int_t)v);
}

static json_t *limit(uint64_t v)
{
	return v ? json_integer((json_int_t)v) : json_null();
}

json_t *sandbox_usage_json(const struct sandbox *sb, const struct sandbox_usage *u)
{
	json_t *j = json_pack("{s:s, s:I}", "id", sb->id, "at", (json_int_t)u->at);
	json_object_set_new(j, "cpu_ns", num(u->cg.cpu_ns));
	json_object_set_new(j, "cpu_seconds", u->cg.cpu_ns == USAGE_NONE ? json_null() : json_real(u->cg.cpu_ns / 1e9));
	json_object_set_new(j, "memory_bytes", num(u->cg.memory));
	json_object_set_new(j, "memory_peak_bytes", num(u->cg.memory_peak));
	json_object_set_new(j, "memory_limit_bytes", limit(sb->spec.memory));
	json_object_set_new(j, "pids", num(u->cg.pids));
	json_object_set_new(j, "pids_limit", limit(sb->spec.pids));
	json_object_set_new(j, "disk_bytes", num(u->disk));
	json_object_set_new(j, "disk_limit_bytes", limit(sb->spec.disk));
	json_object_set_new(j, "net_rx_bytes", num(u->net_rx));
	json_object_set_new(j, "net_tx_bytes", num(u->net_tx));
	return j;
}

/* The per-sandbox families: which figure, in which unit. */
static const struct {
	const char *name, *type, *help;
	size_t offset; /* in struct sandbox_usage */
	double scale;
} families[] = {
	{ "cove_sandbox_cpu_seconds_total", "counter", "CPU time the sandbox used.",
	  offsetof(struct sandbox_usage, cg.cpu_ns), 1e-9 },
	{ "cove_sandbox_memory_bytes", "gauge", "Memory charged to the sandbox now.",
	  offsetof(struct sandbox_usage, cg.memory), 1 },
	{ "cove_sandbox_memory_peak_bytes", "gauge", "The most memory the sandbox has used.",
	  offsetof(struct sandbox_usage, cg.memory_peak), 1 },
	{ "cove_sandbox_pids", "gauge", "Tasks in the sandbox.", offsetof(struct sandbox_usage, cg.pids), 1 },
	{ "cove_sandbox_disk_bytes", "gauge", "Bytes the sandbox's files take.", offsetof(struct sandbox_usage, disk),
	  1 },
	{ "cove_sandbox_network_receive_bytes_total", "counter", "Bytes the sandbox received on its network.",
	  offsetof(struct sandbox_usage, net_rx), 1 },
	{ "cove_sandbox_network_transmit_bytes_total", "counter", "Bytes the sandbox sent on its network.",
	  offsetof(struct sandbox_usage, net_tx), 1 },
};

/* A sandbox the API lists: not being deleted, not waiting in a warm pool. */
static bool listed(const struct sandbox *sb)
{
	return sb && sb->state != SB_DELETING && !sb->spec.pooled;
}

static void sandboxes_write(const struct engine *d, FILE *f)
{
	struct sandbox_usage *u = calloc(MAX_SANDBOXES, sizeof(*u));
	if (!u)
		return;
	for (int i = 0; i < MAX_SANDBOXES; i++)
		if (listed(d->sandboxes[i]))
			sandbox_usage_get(d, d->sandboxes[i], &u[i]);
	for (size_t k = 0; k < ARRAY_SIZE(families); k++) {
		metrics_header(f, families[k].name, families[k].type, families[k].help);
		for (int i = 0; i < MAX_SANDBOXES; i++) {
			const struct sandbox *sb = d->sandboxes[i];
			uint64_t v;
			memcpy(&v, (const char *)&u[i] + families[k].offset, sizeof(v));
			if (!listed(sb) || v == USAGE_NONE)
				continue;
			char labels[40];
			snprintf(labels, sizeof(labels), "id=\"%s\"", sb->id);
			metrics_sample(f, families[k].name, labels, (double)v * families[k].scale);
		}
	}
	free(u);
}

/* Every state the engine has a name for, once (values past the last one
 * fall back to a name seen already), but "deleting": gone from the API. */
#define STATES_MAX 16

static void states_write(const struct engine *d, FILE *f)
{
	const char *seen[STATES_MAX];
	int nseen = 0, warm = 0;
	metrics_header(f, "cove_sandboxes", "gauge", "Sandboxes, by state.");
	for (int k = 0; k < STATES_MAX; k++) {
		const char *name = sandbox_state_name(k);
		bool dup = strcmp(name, "deleting") == 0;
		for (int i = 0; i < nseen && !dup; i++)
			dup = strcmp(seen[i], name) == 0;
		if (dup)
			continue;
		seen[nseen++] = name;
		int n = 0;
		for (int i = 0; i < MAX_SANDBOXES; i++)
			n += listed(d->sandboxes[i]) && (int)d->sandboxes[i]->state == k;
		char labels[40];
		snprintf(labels, sizeof(labels), "state=\"%s\"", name);
		metrics_sample(f, "cove_sandboxes", labels, n);
	}
	for (int i = 0; i < MAX_SANDBOXES; i++)
		warm += d->sandboxes[i] && d->sandboxes[i]->spec.pooled && d->sandboxes[i]->state != SB_DELETING;
	metrics_header(f, "cove_warm_sandboxes", "gauge", "Sandboxes waiting in warm pools, not handed out yet.");
	metrics_sample(f, "cove_warm_sandboxes", NULL, warm);
}

void engine_metrics_write(const struct engine *d, FILE *f)
{
	const struct engine_metrics *m = &d->metrics;
	states_write(d, f);
	metrics_header(f, "cove_sandbox_create_seconds", "histogram",
		       "Time to create a sandbox, until it runs (new ones, restores, forks, hand-outs of warm pools).");
	metrics_histogram(f, "cove_sandbox_create_seconds", "kind=\"new\"", &m->create);
	metrics_histogram(f, "cove_sandbox_create_seconds", "kind=\"restore\"", &m->restore);
	metrics_histogram(f, "cove_sandbox_create_seconds", "kind=\"fork\"", &m->fork);
	metrics_histogram(f, "cove_sandbox_create_seconds", "kind=\"warm\"", &m->warm);
	metrics_header(f, "cove_exec_seconds", "histogram", "Time of an exec, from its start to its exit.");
	metrics_histogram(f, "cove_exec_seconds", NULL, &m->exec);
	metrics_header(f, "cove_exec_failed_total", "counter", "Execs whose command could not be started.");
	metrics_sample(f, "cove_exec_failed_total", NULL, (double)m->execs_failed);
	sandboxes_write(d, f);
}

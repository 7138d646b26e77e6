/* What each sandbox uses (CPU time, memory now and at its peak, tasks,
 * disk, network bytes), and coved's own figures as Prometheus text: the
 * operations' latencies (engine.h's struct engine_metrics, observed where
 * each completes) and sandboxes per state. Read on demand from the
 * kernel: nothing is sampled in the background. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "sys/cgroup.h"

struct engine;
struct sandbox;

#define USAGE_NONE UINT64_MAX /* a figure this host or sandbox has not */

struct sandbox_usage {
	int64_t at;              /* unix ms: when it was read */
	struct cgroup_stats cg;  /* cpu_ns, memory, memory_peak, pids */
	uint64_t disk;           /* bytes its files take (what it wrote itself) */
	uint64_t net_rx, net_tx; /* bytes the sandbox received and sent on its veth */
};

/* sb's usage now; figures it has not are USAGE_NONE. */
void sandbox_usage_get(const struct engine *d, const struct sandbox *sb, struct sandbox_usage *ret);
/* {id, at, cpu_ns, cpu_seconds, memory_bytes, memory_peak_bytes,
 * memory_limit_bytes, pids, pids_limit, disk_bytes, disk_limit_bytes,
 * net_rx_bytes, net_tx_bytes}, null for what it has not. */
json_t *sandbox_usage_json(const struct sandbox *sb, const struct sandbox_usage *u);

/* The engine's part of GET /metrics: sandboxes per state, the latency
 * histograms, and each sandbox's usage labelled by its id. */
void engine_metrics_write(const struct engine *d, FILE *f);

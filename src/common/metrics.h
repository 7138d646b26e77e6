/* Counters and latency histograms, and the Prometheus text format
 * (version 0.0.4) they are served in. Pure: no locks (one loop owns them),
 * no allocation. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Upper bounds in seconds of a histogram's buckets (+Inf after them):
 * from 1 ms, where an exec of `true` lands, to 10 s. */
#define METRICS_BUCKETS 13
extern const double metrics_bounds[METRICS_BUCKETS];

struct histogram {
	uint64_t counts[METRICS_BUCKETS + 1]; /* per bucket, not cumulative; the last is +Inf */
	uint64_t count;
	double sum; /* seconds */
};

void histogram_observe(struct histogram *h, double seconds);

/* Writers of Prometheus text to f. name is a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*),
 * labels either NULL or the inside of the braces, its values needing no
 * escape (IDs, fixed words). */
void metrics_header(FILE *f, const char *name, const char *type, const char *help);
void metrics_sample(FILE *f, const char *name, const char *labels, double value);
/* A histogram's _bucket (cumulative, with le), _sum and _count lines. */
void metrics_histogram(FILE *f, const char *name, const char *labels, const struct histogram *h);

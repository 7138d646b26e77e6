/* See metrics.h. */
#include "common/metrics.h"

const double metrics_bounds[METRICS_BUCKETS] = {
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10
};

void histogram_observe(struct histogram *h, double seconds)
{
	size_t i = 0;
	while (i < METRICS_BUCKETS && seconds > metrics_bounds[i])
		i++;
	h->counts[i]++;
	h->count++;
	h->sum += seconds;
}

void metrics_header(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Integers as integers, the rest with enough digits to read back. */
static void value_print(FILE *f, double v)
{
	/* No libm: the CLI links this too. */
	if (v != v)
		fputs("NaN", f);
	else if (v > 1e300 || v < -1e300)
		fputs(v > 0 ? "+Inf" : "-Inf", f);
	else if (v > -1e15 && v < 1e15 && v == (double)(long long)v)
		fprintf(f, "%.0f", v);
	else
		fprintf(f, "%.9g", v);
}

void metrics_sample(FILE *f, const char *name, const char *labels, double value)
{
	if (labels && *labels)
		fprintf(f, "%s{%s} ", name, labels);
	else
		fprintf(f, "%s ", name);
	value_print(f, value);
	fputc('\n', f);
}

void metrics_histogram(FILE *f, const char *name, const char *labels, const struct histogram *h)
{
	const char *sep = labels && *labels ? "," : "";
	uint64_t cum = 0;
	for (size_t i = 0; i <= METRICS_BUCKETS; i++) {
		cum += h->counts[i];
		fprintf(f, "%s_bucket{%s%sle=\"", name, labels ? labels : "", sep);
		if (i < METRICS_BUCKETS)
			value_print(f, metrics_bounds[i]);
		else
			fputs("+Inf", f);
		fprintf(f, "\"} %llu\n", (unsigned long long)cum);
	}
	char full[128];
	snprintf(full, sizeof(full), "%s_sum", name);
	metrics_sample(f, full, labels, h->sum);
	snprintf(full, sizeof(full), "%s_count", name);
	metrics_sample(f, full, labels, (double)h->count);
}

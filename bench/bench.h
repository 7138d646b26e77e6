/* What apibench and iobench share: "key value" result lines for run.sh,
 * a monotonic clock in ms, and nearest-rank percentiles. */
#pragma once
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static FILE *out; /* --out: the "key value" lines, or NULL */

static void result(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void result(const char *key, const char *fmt, ...)
{
	if (!out)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(out, "%s ", key);
	vfprintf(out, fmt, ap);
	fputc('\n', out);
	va_end(ap);
	fflush(out);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of v[0..n) (sorted in place). */
static double pct(double *v, int n, double q)
{
	qsort(v, n, sizeof(*v), cmp_double);
	int k = (int)(q * n + 0.999999);
	return v[(k < 1 ? 1 : k > n ? n : k) - 1];
}

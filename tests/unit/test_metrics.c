/* Unit tests for src/common/metrics.c: histograms and the Prometheus text
 * they are served in. */
#include "common/metrics.h"

#include "tap.h"

/* What fn writes, as a static string. */
static const char *text_of(void (*fn)(FILE *f, void *arg), void *arg)
{
	static char *buf;
	size_t len = 0;
	free(buf);
	buf = NULL;
	FILE *f = open_memstream(&buf, &len);
	fn(f, arg);
	fclose(f);
	return buf;
}

static void write_hist(FILE *f, void *arg)
{
	metrics_histogram(f, "t_seconds", "kind=\"new\"", arg);
}

static void write_samples(FILE *f, void *arg)
{
	metrics_header(f, "t_total", "counter", "A test.");
	metrics_sample(f, "t_total", NULL, 3);
	metrics_sample(f, "t_total", "a=\"b\"", 0.25);
	metrics_sample(f, "t_total", "", 1e20);
}

int main(void)
{
	struct histogram h = { 0 };
	histogram_observe(&h, 0.0005); /* le 0.001 */
	histogram_observe(&h, 0.001);  /* le 0.001: bounds are inclusive */
	histogram_observe(&h, 0.003);  /* le 0.005 */
	histogram_observe(&h, 60);     /* +Inf only */
	CHECK(h.count == 4 && h.counts[0] == 2 && h.counts[2] == 1 && h.counts[METRICS_BUCKETS] == 1,
	      "observations land in their buckets");
	CHECK(h.sum > 60.004 && h.sum < 60.0046, "the sum is kept (%g)", h.sum);
	const char *t = text_of(write_hist, &h);
	CHECK(strstr(t, "t_seconds_bucket{kind=\"new\",le=\"0.001\"} 2\n") != NULL, "first bucket, labels joined");
	CHECK(strstr(t, "t_seconds_bucket{kind=\"new\",le=\"0.0025\"} 2\n") != NULL, "buckets are cumulative");
	CHECK(strstr(t, "t_seconds_bucket{kind=\"new\",le=\"0.005\"} 3\n") != NULL, "and grow");
	CHECK(strstr(t, "t_seconds_bucket{kind=\"new\",le=\"10\"} 3\n") != NULL, "an integer bound prints as one");
	CHECK(strstr(t, "t_seconds_bucket{kind=\"new\",le=\"+Inf\"} 4\n") != NULL, "+Inf holds them all");
	CHECK(strstr(t, "t_seconds_count{kind=\"new\"} 4\n") != NULL, "count");
	CHECK(strstr(t, "t_seconds_sum{kind=\"new\"} 60.0045") != NULL, "sum");
	t = text_of(write_samples, NULL);
	CHECK_STR(t,
		  "# HELP t_total A test.\n# TYPE t_total counter\nt_total 3\nt_total{a=\"b\"} 0.25\nt_total 1e+20\n",
		  "header and samples, with and without labels");
	return tap_done();
}

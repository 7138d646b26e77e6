/* Unit tests for src/common/human.c: the sizes and ages of the CLI's tables. */
#include "common/human.h"

#include "tap.h"

static const char *size(uint64_t v)
{
	static char buf[32];
	human_size(v, buf, sizeof(buf));
	return buf;
}

static const char *age(int64_t ago_ms)
{
	static char buf[32];
	int64_t now = 1700000000000;
	human_age(now - ago_ms, now, buf, sizeof(buf));
	return buf;
}

int main(void)
{
	CHECK_STR(size(0), "0B", "0 bytes");
	CHECK_STR(size(1023), "1023B", "under a KiB");
	CHECK_STR(size(1024), "1K", "1K");
	CHECK_STR(size(1536), "1.5K", "1.5K");
	CHECK_STR(size(512ULL << 20), "512M", "512M, as the issue's ls showed '512    M'");
	CHECK_STR(size(1ULL << 30), "1G", "1G");
	CHECK_STR(size((2ULL << 30) - 1), "1.9G", "just under 2G reads 1.9G, not 2G");
	CHECK_STR(size(10ULL << 30 | 1ULL << 29), "10G", "no decimal from 10 up");
	CHECK_STR(size(3ULL << 40), "3T", "terabytes");
	CHECK_STR(size(UINT64_MAX), "15E", "the largest");
	CHECK_STR(age(0), "just now", "now");
	CHECK_STR(age(42000), "42 s ago", "seconds");
	CHECK_STR(age(3 * 60000 + 5000), "3 min ago", "minutes");
	CHECK_STR(age(5 * 3600000LL), "5 h ago", "hours");
	CHECK_STR(age(3 * 86400000LL), "3 days ago", "days");
	CHECK_STR(age(-60000), "in the future", "a clock behind");
	return tap_done();
}

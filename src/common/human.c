/* See human.h. */
#include "common/human.h"

#include <stdio.h>

void human_size(uint64_t bytes, char *buf, size_t cap)
{
	static const char units[] = "BKMGTPE";
	size_t u = 0;
	uint64_t whole = bytes, rest = 0;
	while (whole >= 1024 && units[u + 1]) {
		rest = whole % 1024;
		whole /= 1024;
		u++;
	}
	/* One decimal below 10, rounded down, so that a limit of 1.99G never
	 * reads as 2G. */
	unsigned tenth = (unsigned)(rest * 10 / 1024);
	if (whole < 10 && tenth > 0)
		snprintf(buf, cap, "%u.%u%c", (unsigned)whole, tenth, units[u]);
	else
		snprintf(buf, cap, "%llu%c", (unsigned long long)whole, units[u]);
}

void human_age(int64_t then_ms, int64_t now_ms, char *buf, size_t cap)
{
	if (then_ms > now_ms + 1000) {
		snprintf(buf, cap, "in the future");
		return;
	}
	int64_t s = (now_ms - then_ms) / 1000;
	if (s < 1)
		snprintf(buf, cap, "just now");
	else if (s < 60)
		snprintf(buf, cap, "%lld s ago", (long long)s);
	else if (s < 3600)
		snprintf(buf, cap, "%lld min ago", (long long)(s / 60));
	else if (s < 2 * 86400)
		snprintf(buf, cap, "%lld h ago", (long long)(s / 3600));
	else
		snprintf(buf, cap, "%lld days ago", (long long)(s / 86400));
}

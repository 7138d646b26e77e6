#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static enum log_level min_level = LOG_INFO;

void log_set_level(enum log_level level)
{
	min_level = level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "debug", "info", "warn", "error" };
	if (level < min_level)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char line[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s %s\n", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, names[level], line);
}

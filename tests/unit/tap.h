/* Minimal TAP for unit tests: ok/not ok lines, then "N passed, N failed". */
#pragma once
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int tap_n, tap_failed, tap_skipped;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		int tap_ok_ = !!(cond);                                      \
		tap_n++;                                                     \
		if (tap_ok_) {                                               \
			printf("ok %d - ", tap_n);                           \
		} else {                                                     \
			tap_failed++;                                        \
			printf("not ok %d - ", tap_n);                       \
		}                                                            \
		printf(__VA_ARGS__);                                         \
		printf("%s\n", tap_ok_ ? "" : " (" #cond ", " __FILE__ ")"); \
	} while (0)

#define CHECK_STR(a, b, ...) CHECK((a) && (b) && strcmp((a), (b)) == 0, __VA_ARGS__)

#define SKIP(...)                                 \
	do {                                      \
		tap_n++;                          \
		tap_skipped++;                    \
		printf("ok %d - # SKIP ", tap_n); \
		printf(__VA_ARGS__);              \
		printf("\n");                     \
	} while (0)

static inline int tap_done(void)
{
	printf("1..%d\n%d passed, %d failed", tap_n, tap_n - tap_failed - tap_skipped, tap_failed);
	if (tap_skipped)
		printf(", %d skipped", tap_skipped);
	printf("\n");
	return tap_failed ? 1 : 0;
}

/* CHECK for a condition with side effects (create, delete, mount):
 * evaluated once, and named on failure. */
#define CHECK1(cond, ...)                                  \
	do {                                               \
		bool c1_ = (cond);                         \
		CHECK(c1_, __VA_ARGS__);                   \
		if (!c1_)                                  \
			printf("#   failed: %s\n", #cond); \
	} while (0)

static inline const char *pathf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A path built from fmt in one of a few rotating static buffers, so that a
 * CHECK can use several at once. */
static inline const char *pathf(const char *fmt, ...)
{
	static char bufs[8][PATH_MAX];
	static int next;
	char *b = bufs[next++ % 8];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b, PATH_MAX, fmt, ap);
	va_end(ap);
	return b;
}

/* For tests on a loop-backed btrfs pool: root and /dev/loop-control, and
 * the test's directory made from the mkdtemp template tmpl. false (after a
 * SKIP or a failed check) when the test cannot run here. */
static inline bool tap_loop_tmpdir(char *tmpl)
{
	if (geteuid() != 0 || access("/dev/loop-control", F_OK) < 0) {
		SKIP("needs root and /dev/loop-control");
		return false;
	}
	if (!mkdtemp(tmpl)) {
		CHECK1(0, "mkdtemp: %s", strerror(errno));
		return false;
	}
	return true;
}

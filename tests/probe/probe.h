/* What the probe's parts share (probe.c, escape.c). */
#pragma once
#include <stdbool.h>

void report(bool ok, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *errname(int e);
/* Run call in a child: ok when it failed with EPERM, EACCES or ENOSYS. */
void expect_refused(const char *name, long (*call)(void));
/* ok when path cannot be opened for writing (nothing is written). */
void check_not_writable(const char *path);
/* cove-probe escape [PID...] (escape.c) */
void cmd_escape(int argc, char **argv);
/* cove-probe swap DIR SECONDS (escape.c) */
void cmd_swap(const char *dir, long seconds);

/* A copy's progress on stderr: only when stderr is a terminal, and only
 * once the copy has taken a second (a quick one shows nothing), redrawn at
 * most ten times a second. A pipe or a file gets nothing, ever. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/human.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void progress_start(struct progress *p, const char *what, unsigned long long total)
{
	memset(p, 0, sizeof(*p));
	p->on = isatty(STDERR_FILENO) == 1;
	p->what = what;
	p->total = total;
	p->start = now_s();
}

static void draw(struct progress *p, double t)
{
	char done[16], total[16], rate[16], bar[32];
	double secs = t - p->start;
	human_size(p->done, done, sizeof(done));
	human_size(p->total, total, sizeof(total));
	human_size(secs > 0 ? (unsigned long long)((double)p->done / secs) : 0, rate, sizeof(rate));
	if (p->total) {
		int pct = (int)(p->done * 100 / p->total), fill = pct * 24 / 100;
		memset(bar, '=', (size_t)fill);
		memset(bar + fill, ' ', (size_t)(24 - fill));
		bar[24] = '\0';
		fprintf(stderr, "\r%-24.24s %3d%% [%s] %s/%s %s/s ", p->what, pct > 100 ? 100 : pct, bar, done, total,
			rate);
	} else {
		fprintf(stderr, "\r%-24.24s %s %s/s ", p->what, done, rate);
	}
	p->shown = true;
	p->last_draw = t;
}

void progress_set(struct progress *p, unsigned long long done)
{
	p->done = done;
	if (!p->on)
		return;
	double t = now_s();
	if (t - p->start >= 1.0 && t - p->last_draw >= 0.1)
		draw(p, t);
}

void progress_add(struct progress *p, unsigned long long n)
{
	progress_set(p, p->done + n);
}

void progress_end(struct progress *p)
{
	if (!p->shown)
		return;
	draw(p, now_s());
	fputc('\n', stderr);
}

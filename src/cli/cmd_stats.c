/* cove stats: what sandboxes use, as docker stats shows it: a table that
 * refreshes every second on a terminal, one snapshot with --no-stream or
 * when stdout is not a terminal, JSON with --json. CPU % is the CPU time a
 * sandbox used between two readings over the time between them (100% =
 * one CPU), so even one snapshot reads twice, half a second apart. */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/human.h"

#define STATS_EVERY_MS 1000
#define STATS_FIRST_GAP_MS 500

static volatile sig_atomic_t stats_stop;

static void on_stop(int sig)
{
	stats_stop = 1;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (!stats_stop && nanosleep(&ts, &ts) < 0)
		;
}

/* The IDs to read: those given, else every sandbox listed now. */
static json_t *stats_ids(struct cli *cli, int argc, char **argv, struct cove_error *err)
{
	json_t *ids = json_array();
	for (int i = 1; i < argc; i++)
		json_array_append_new(ids, json_string(argv[i]));
	if (argc > 1)
		return ids;
	char *body = NULL;
	if (cove_call(cli->client, "GET", "/v1/sandboxes", NULL, &body, err) < 0) {
		json_decref(ids);
		return NULL;
	}
	json_t *j = json_loads(body, 0, NULL), *sb;
	size_t i;
	json_array_foreach(json_object_get(j, "sandboxes"), i, sb)
	{
		json_array_append(ids, json_object_get(sb, "id"));
	}
	json_decref(j);
	free(body);
	return ids;
}

/* One reading of each: an object of ID -> stats. A sandbox gone since it
 * was listed is left out; one asked for by ID is an error. */
static json_t *stats_read(struct cli *cli, json_t *ids, bool listed, struct cove_error *err)
{
	json_t *out = json_object(), *id;
	size_t i;
	json_array_foreach(ids, i, id)
	{
		char path[256], *body = NULL;
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/stats", json_string_value(id));
		if (cove_call(cli->client, "GET", path, NULL, &body, err) < 0) {
			if (listed && err->status == 404) {
				memset(err, 0, sizeof(*err));
				continue;
			}
			json_decref(out);
			return NULL;
		}
		json_object_set_new(out, json_string_value(id), json_loads(body, 0, NULL));
		free(body);
	}
	return out;
}

/* cpu_percent into each of now, from the reading before (none: null). */
static void stats_cpu(json_t *now, json_t *before)
{
	const char *id;
	json_t *s;
	json_object_foreach(now, id, s)
	{
		json_t *b = before ? json_object_get(before, id) : NULL;
		json_t *c0 = b ? json_object_get(b, "cpu_ns") : NULL, *c1 = json_object_get(s, "cpu_ns");
		double dt = b ? (double)(json_integer_value(json_object_get(s, "at")) -
					 json_integer_value(json_object_get(b, "at")))
			      : 0;
		if (json_is_integer(c0) && json_is_integer(c1) && dt > 0)
			json_object_set_new(s, "cpu_percent",
					    json_real((double)(json_integer_value(c1) - json_integer_value(c0)) /
						      (dt * 1e6) * 100));
		else
			json_object_set_new(s, "cpu_percent", json_null());
	}
}

/* "12M / 64M" of two figures (either may be null). */
static void pair(json_t *a, json_t *b, char *buf, size_t n)
{
	char x[16] = "-", y[16] = "-";
	if (json_is_integer(a))
		human_size((uint64_t)json_integer_value(a), x, sizeof(x));
	if (json_is_integer(b))
		human_size((uint64_t)json_integer_value(b), y, sizeof(y));
	snprintf(buf, n, "%s / %s", x, y);
}

static void stats_table(json_t *now, FILE *f)
{
	static const char *const head[] = { "ID",    ">CPU %",   ">MEM USAGE / LIMIT", ">MEM %",
					    ">PEAK", ">NET I/O", ">DISK / LIMIT",      ">PIDS" };
	struct table t;
	const char *id;
	json_t *s;
	table_init(&t, 8, head);
	json_object_foreach(now, id, s)
	{
		char cpu[16] = "-", mem[40], pct[16] = "-", peak[16] = "-", net[40], disk[40], pids[16] = "-";
		json_t *c = json_object_get(s, "cpu_percent"), *m = json_object_get(s, "memory_bytes"),
		       *ml = json_object_get(s, "memory_limit_bytes");
		if (json_is_number(c))
			snprintf(cpu, sizeof(cpu), "%.1f%%", json_number_value(c));
		pair(m, ml, mem, sizeof(mem));
		if (json_is_integer(m) && json_integer_value(ml) > 0)
			snprintf(pct, sizeof(pct), "%.1f%%",
				 100.0 * (double)json_integer_value(m) / (double)json_integer_value(ml));
		if (json_is_integer(json_object_get(s, "memory_peak_bytes")))
			human_size((uint64_t)json_integer_value(json_object_get(s, "memory_peak_bytes")), peak,
				   sizeof(peak));
		pair(json_object_get(s, "net_rx_bytes"), json_object_get(s, "net_tx_bytes"), net, sizeof(net));
		pair(json_object_get(s, "disk_bytes"), json_object_get(s, "disk_limit_bytes"), disk, sizeof(disk));
		if (json_is_integer(json_object_get(s, "pids")))
			snprintf(pids, sizeof(pids), "%lld", (long long)json_integer_value(json_object_get(s, "pids")));
		table_row(&t, id, cpu, mem, pct, peak, net, disk, pids);
	}
	table_print(&t, f);
	table_free(&t);
}

/* Print one round: a table (over the last one on a terminal) or JSON. */
static void stats_print(struct cli *cli, json_t *now, bool stream)
{
	if (cli->json) {
		json_t *a = json_array();
		const char *id;
		json_t *s;
		json_object_foreach(now, id, s)
		{
			json_array_append(a, s);
		}
		json_dumpf(a, stdout, stream ? JSON_COMPACT : JSON_INDENT(2));
		putchar('\n');
		json_decref(a);
	} else {
		if (stream)
			fputs("\033[H\033[J", stdout); /* home, clear */
		stats_table(now, stdout);
	}
	fflush(stdout);
}

int cmd_stats(struct cli *cli, int argc, char **argv)
{
	bool stream = isatty(STDOUT_FILENO);
	const char *v;
	while (cli_next_opt(cli, &v) != -1)
		stream = false; /* --no-stream, the one option */
	if (cli_connect(cli) < 0)
		return 1;
	struct cove_error err = { 0 };
	signal(SIGINT, on_stop);
	signal(SIGTERM, on_stop);
	json_t *before = NULL;
	int r = 0;
	for (int round = 0; !stats_stop; round++) {
		json_t *ids = stats_ids(cli, argc, argv, &err);
		json_t *now = ids ? stats_read(cli, ids, argc == 1, &err) : NULL;
		json_decref(ids);
		if (!now) {
			r = cli_fail(&err);
			break;
		}
		stats_cpu(now, before);
		json_decref(before);
		before = now;
		/* The first reading only sets where CPU time is counted from. */
		if (round == 0) {
			sleep_ms(STATS_FIRST_GAP_MS);
			continue;
		}
		stats_print(cli, now, stream);
		if (!stream)
			break;
		sleep_ms(STATS_EVERY_MS);
	}
	json_decref(before);
	return r;
}

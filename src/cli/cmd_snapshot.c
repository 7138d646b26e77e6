/* cove snapshot / snapshots / restore / fork */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/human.h"
#include "common/parse.h"

/* POST body to path; the answer parsed into *ret. Exit status. */
static int post(struct cli *cli, const char *path, json_t *body, json_t **ret)
{
	struct cove_error err = { 0 };
	char *text = json_dumps(body, JSON_COMPACT), *answer = NULL;
	int r = cove_call(cli->client, "POST", path, text, &answer, &err);
	free(text);
	if (r < 0)
		return cli_fail(&err);
	*ret = json_loads(answer, 0, NULL);
	free(answer);
	return 0;
}

static void print_json(json_t *j)
{
	json_dumpf(j, stdout, JSON_INDENT(2));
	putchar('\n');
}

/* The one ID left after the options (else a usage error), put between
 * prefix and suffix into a path, and body POSTed there; takes body. The
 * answer parsed into *ret. Exit status. */
static int post_to_id(struct cli *cli, int argc, char **argv, const char *verb, const char *what, const char *prefix,
		      const char *suffix, json_t *body, json_t **ret)
{
	int r = argc == 2 ? 0 : cli_usage_error(verb, "want exactly one %s", what);
	if (r == 0) {
		char path[256];
		snprintf(path, sizeof(path), "%s%s%s", prefix, argv[1], suffix);
		r = cli_connect(cli) < 0 ? 1 : post(cli, path, body, ret);
	}
	json_decref(body);
	return r;
}

/* A new snapshot's or sandbox's ID, or with --json the whole answer. */
static void print_id(struct cli *cli, json_t *j)
{
	if (cli->json)
		print_json(j);
	else
		printf("%s\n", json_string_value(json_object_get(j, "id")) ?: "");
}

int cmd_snapshot_rm(struct cli *cli, int argc, char **argv)
{
	if (argc < 2)
		return cli_usage_error("snapshot rm", "want one or more snapshot IDs");
	if (cli_connect(cli) < 0)
		return 1;
	int r = 0;
	for (int i = 1; i < argc; i++) {
		struct cove_error err = { 0 };
		char path[256], *answer = NULL;
		snprintf(path, sizeof(path), "/v1/snapshots/%s", argv[i]);
		if (cove_call(cli->client, "DELETE", path, NULL, &answer, &err) < 0)
			r = cli_fail(&err);
		else
			printf("%s\n", argv[i]);
		free(answer);
	}
	return r;
}

/* Whether option key was given. */
static bool given(struct cli *cli, int key)
{
	for (int i = 0; i < cli->n_opts; i++)
		if (cli->opts[i].key == key)
			return true;
	return false;
}

int cmd_snapshot(struct cli *cli, int argc, char **argv)
{
	if (given(cli, 'P'))
		return cmd_snapshot_portable(cli, argc, argv);
	json_t *body = json_object(), *j = NULL;
	const char *v;
	int c;
	while ((c = cli_next_opt(cli, &v)) != -1) {
		if (c == 'p') {
			json_decref(body);
			return cli_usage_error("snapshot", "--path is for --portable");
		}
		if (c == 'M')
			json_object_set_new(body, "memory", json_true());
		else
			json_object_set_new(body, "name", json_string(v));
	}
	int r = post_to_id(cli, argc, argv, "snapshot", "sandbox ID", "/v1/sandboxes/", "/snapshots", body, &j);
	if (r == 0)
		print_id(cli, j);
	json_decref(j);
	return r;
}

int cmd_snapshots(struct cli *cli, int argc, char **argv)
{
	if (argc > 1)
		return cli_usage_error("snapshots", "unexpected '%s'", argv[1]);
	struct cove_error err = { 0 };
	char *body;
	if (cli_connect(cli) < 0)
		return 1;
	if (cove_call(cli->client, "GET", "/v1/snapshots", NULL, &body, &err) < 0)
		return cli_fail(&err);
	json_t *j = json_loads(body, 0, NULL);
	free(body);
	if (cli->json) {
		print_json(json_object_get(j, "snapshots"));
		json_decref(j);
		return 0;
	}
	static const char *const head[] = { "ID", "NAME", "SANDBOX", "CREATED", "DURABLE" };
	struct table t;
	size_t i;
	json_t *sn;
	table_init(&t, 5, head);
	json_array_foreach(json_object_get(j, "snapshots"), i, sn)
	{
		char age[32];
		human_age(json_integer_value(json_object_get(sn, "created_at")), cli_now_ms(), age, sizeof(age));
		table_row(&t, json_string_value(json_object_get(sn, "id")),
			  or_dash(json_string_value(json_object_get(sn, "name"))),
			  json_string_value(json_object_get(sn, "sandbox")), age,
			  json_is_false(json_object_get(sn, "durable")) ? "not yet" : "yes");
	}
	table_print(&t, stdout);
	table_free(&t);
	json_decref(j);
	return 0;
}

int cmd_restore(struct cli *cli, int argc, char **argv)
{
	if (given(cli, 'P'))
		return cmd_restore_portable(cli, argc, argv);
	json_t *body = json_object(), *j = NULL;
	uint64_t size;
	uint32_t millis;
	const char *v;
	int c, r = 0;
	while (r == 0 && (c = cli_next_opt(cli, &v)) != -1) {
		switch (c) {
		case 'n':
			json_object_set_new(body, "name", json_string(v));
			break;
		case 'm':
			if (parse_size(v, &size) < 0)
				r = cli_usage_error("restore", "bad --memory '%s' (like 512M or 2G)", v);
			else
				json_object_set_new(body, "memory", json_integer((json_int_t)size));
			break;
		case 'c':
			if (parse_cpus(v, &millis) < 0)
				r = cli_usage_error("restore", "bad --cpus '%s' (like 1 or 0.5)", v);
			else
				json_object_set_new(body, "cpus", json_real(millis / 1000.0));
			break;
		case 'p':
			json_object_set_new(body, "pids", json_integer(atoi(v)));
			break;
		case 'K':
			if (parse_size(v, &size) < 0)
				r = cli_usage_error("restore", "bad --disk '%s' (like 10G or 512M)", v);
			else
				json_object_set_new(body, "disk", json_integer((json_int_t)size));
			break;
		default: /* --path is for --portable */
			r = cli_usage_error("restore", "--path is for --portable");
		}
	}
	if (r != 0) {
		json_decref(body);
		return r;
	}
	r = post_to_id(cli, argc, argv, "restore", "snapshot ID", "/v1/snapshots/", "/restore", body, &j);
	if (r == 0)
		print_id(cli, j);
	json_decref(j);
	return r;
}

int cmd_fork(struct cli *cli, int argc, char **argv)
{
	json_t *body = json_object(), *j = NULL;
	const char *v;
	int r = 0, c;
	while (r == 0 && (c = cli_next_opt(cli, &v)) != -1) {
		if (c == 'M') {
			json_object_set_new(body, "memory", json_true());
			continue;
		}
		char *end;
		long n = strtol(v, &end, 10);
		if (*v && !*end)
			json_object_set_new(body, "count", json_integer(n));
		else
			r = cli_usage_error("fork", "bad -n '%s' (a count, 1 to 100)", v);
	}
	if (r != 0) {
		json_decref(body);
		return r;
	}
	r = post_to_id(cli, argc, argv, "fork", "sandbox ID", "/v1/sandboxes/", "/fork", body, &j);
	json_t *copies = json_object_get(j, "sandboxes");
	if (r == 0 && cli->json)
		print_json(copies);
	for (size_t i = 0; r == 0 && !cli->json && i < json_array_size(copies); i++)
		printf("%s\n", json_string_value(json_object_get(json_array_get(copies, i), "id")));
	json_decref(j);
	return r;
}

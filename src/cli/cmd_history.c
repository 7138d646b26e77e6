/* cove checkpoint / history / rollback / branch: a sandbox's checkpoints,
 * and new sandboxes from them. */
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/human.h"

#define MAX_BRANCHES 100 /* as coved's fork and branch */

/* A checkpoint number or a count: a decimal integer from 1 to max. */
static int parse_positive(const char *s, int max, int *ret)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (!*s || *end || v < 1 || v > max)
		return -1;
	*ret = (int)v;
	return 0;
}

static const char *str(json_t *j, const char *key)
{
	const char *s = json_string_value(json_object_get(j, key));
	return s ? s : "";
}

/* POST body (taken) to /v1/sandboxes/<id>/<verb>; the answer into *ret.
 * Exit status. */
static int sandbox_post(struct cli *cli, const char *id, const char *verb, json_t *body, json_t **ret)
{
	struct cove_error err = { 0 };
	char path[256], *text = json_dumps(body, JSON_COMPACT), *answer = NULL;
	json_decref(body);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/%s", id, verb);
	int r = cli_connect(cli) < 0                                            ? 1
		: cove_call(cli->client, "POST", path, text, &answer, &err) < 0 ? cli_fail(&err)
										: 0;
	free(text);
	if (r == 0)
		*ret = json_loads(answer, 0, NULL);
	free(answer);
	return r;
}

static void print_json(json_t *j)
{
	json_dumpf(j, stdout, JSON_INDENT(2));
	putchar('\n');
}

int cmd_checkpoint(struct cli *cli, int argc, char **argv)
{
	const char *label = NULL, *v;
	bool memory = false;
	int c;
	while ((c = cli_next_opt(cli, &v)) != -1)
		if (c == 'l')
			label = v;
		else if (c == 'M')
			memory = true;
	if (argc != 2)
		return cli_usage_error("checkpoint", "want exactly one sandbox ID");
	json_t *j = NULL;
	int r = sandbox_post(cli, argv[1], "checkpoints",
			     json_pack("{s:s, s:b}", "label", label ? label : "", "memory", memory), &j);
	if (r == 0 && cli->json)
		print_json(j);
	else if (r == 0)
		printf("%lld\n", (long long)json_integer_value(json_object_get(j, "seq")));
	json_decref(j);
	return r;
}

int cmd_rollback(struct cli *cli, int argc, char **argv)
{
	int seq;
	if (argc != 3)
		return cli_usage_error("rollback", "want a sandbox ID and a checkpoint number");
	if (parse_positive(argv[2], INT_MAX, &seq) < 0)
		return cli_usage_error("rollback", "bad checkpoint number '%s'", argv[2]);
	json_t *j = NULL;
	int r = sandbox_post(cli, argv[1], "rollback", json_pack("{s:i}", "seq", seq), &j);
	if (r == 0 && cli->json)
		print_json(j);
	else if (r == 0)
		printf("%s\n", str(j, "id"));
	json_decref(j);
	return r;
}

int cmd_branch(struct cli *cli, int argc, char **argv)
{
	int seq, count = 1;
	const char *v;
	while (cli_next_opt(cli, &v) == 'n')
		if (parse_positive(v, MAX_BRANCHES, &count) < 0)
			return cli_usage_error("branch", "bad -n '%s' (1 to %d)", v, MAX_BRANCHES);
	if (argc != 3)
		return cli_usage_error("branch", "want a sandbox ID and a checkpoint number");
	if (parse_positive(argv[2], INT_MAX, &seq) < 0)
		return cli_usage_error("branch", "bad checkpoint number '%s'", argv[2]);
	json_t *j = NULL, *made, *sb;
	size_t i;
	int r = sandbox_post(cli, argv[1], "branch", json_pack("{s:i, s:i}", "seq", seq, "count", count), &j);
	made = json_object_get(j, "sandboxes");
	if (r == 0 && cli->json)
		print_json(made);
	else if (r == 0)
		json_array_foreach(made, i, sb)
		{
			printf("%s\n", str(sb, "id"));
		}
	json_decref(j);
	return r;
}

/* The checkpoints as a table; then where the line came from and what was
 * made from it, one "key: value" line each. */
static void print_history(json_t *h)
{
	size_t i;
	json_t *c, *origin = json_object_get(h, "origin"), *derived = json_object_get(h, "derived");
	static const char *const head[] = { ">SEQ", ">PARENT", "SNAPSHOT", "TAKEN OF", "CREATED", "LABEL" };
	struct table t;
	table_init(&t, 6, head);
	json_array_foreach(json_object_get(h, "checkpoints"), i, c)
	{
		json_t *parent = json_object_get(c, "parent");
		char seq[16], p[16] = "-", age[32];
		snprintf(seq, sizeof(seq), "%lld", (long long)json_integer_value(json_object_get(c, "seq")));
		if (json_is_integer(parent))
			snprintf(p, sizeof(p), "%lld", (long long)json_integer_value(parent));
		human_age(json_integer_value(json_object_get(c, "created_at")), cli_now_ms(), age, sizeof(age));
		table_row(&t, seq, p, str(c, "snapshot"), str(c, "sandbox"), age, str(c, "label"));
	}
	table_print(&t, stdout);
	table_free(&t);
	if (json_is_object(origin))
		printf("origin: %s of %s at checkpoint %lld\n", str(origin, "kind"), str(origin, "sandbox"),
		       (long long)json_integer_value(json_object_get(origin, "seq")));
	json_array_foreach(derived, i, c)
	{
		printf("derived: %s %s at checkpoint %lld\n", str(c, "sandbox"), str(c, "kind"),
		       (long long)json_integer_value(json_object_get(c, "seq")));
	}
	if (!json_is_true(json_object_get(h, "live")))
		printf("sandbox: %s is deleted, its history kept\n", str(h, "sandbox"));
}

/* method on /v1/sandboxes/<id>/checkpoints; the answer into *ret. Exit status. */
static int history_call(struct cli *cli, const char *method, const char *id, json_t **ret)
{
	struct cove_error err = { 0 };
	char path[256], *answer = NULL;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/checkpoints", id);
	if (cli_connect(cli) < 0)
		return 1;
	if (cove_call(cli->client, method, path, NULL, &answer, &err) < 0)
		return cli_fail(&err);
	*ret = json_loads(answer, 0, NULL);
	free(answer);
	return 0;
}

/* cove history ID, and cove history rm ID: forget a history and the
 * snapshots only it needed. */
int cmd_history(struct cli *cli, int argc, char **argv)
{
	bool rm = strcmp(argv[0], "history rm") == 0;
	if (argc != 2)
		return cli_usage_error(argv[0], "want exactly one sandbox ID");
	json_t *j = NULL;
	int r = history_call(cli, rm ? "DELETE" : "GET", argv[argc - 1], &j);
	if (r == 0 && cli->json)
		print_json(j);
	else if (r == 0 && rm)
		printf("%s: %lld checkpoints forgotten, %zu snapshots deleted\n", argv[1],
		       (long long)json_integer_value(json_object_get(j, "checkpoints")),
		       json_array_size(json_object_get(j, "snapshots_deleted")));
	else if (r == 0)
		print_history(j);
	json_decref(j);
	return r;
}

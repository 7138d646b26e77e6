/* cove template create / ls / info / rm */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/human.h"
#include "common/parse.h"

/* A call whose answer is parsed into *ret (may be NULL). Exit status. */
static int call(struct cli *cli, const char *method, const char *path, json_t *body, json_t **ret)
{
	struct cove_error err = { 0 };
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL, *answer = NULL;
	int r = cove_call(cli->client, method, path, text, &answer, &err);
	free(text);
	if (r < 0)
		return cli_fail(&err);
	if (ret)
		*ret = json_loads(answer, 0, NULL);
	free(answer);
	return 0;
}

/* The template's own options (the create's are cli_parse_spec's). */
static int parse_own(struct cli *cli, json_t *body)
{
	uint64_t size;
	for (int i = 0; i < cli->n_opts; i++) {
		const char *v = cli->opts[i].value;
		char *end;
		switch (cli->opts[i].key) {
		case 'F':
			json_object_set_new(body, "from_snapshot", json_string(v));
			break;
		case 'K':
			if (parse_size(v, &size) < 0)
				return cli_usage_error("template create", "bad --disk '%s' (like 10G)", v);
			json_object_set_new(body, "disk", json_integer((json_int_t)size));
			break;
		case 'L':
		case 'W': {
			double n = strtod(v, &end);
			if (*end || end == v || n < 0)
				return cli_usage_error("template create", "bad --%s '%s'",
						       cli->opts[i].key == 'L' ? "idle-timeout" : "warm", v);
			if (cli->opts[i].key == 'L')
				json_object_set_new(body, "idle_timeout", json_real(n));
			else
				json_object_set_new(body, "warm", json_integer((json_int_t)n));
			break;
		}
		}
	}
	return 0;
}

int cmd_template_create(struct cli *cli, int argc, char **argv)
{
	if (argc != 2)
		return cli_usage_error("template create", "want exactly one template NAME");
	json_t *body = json_pack("{s:s}", "name", argv[1]), *answer = NULL;
	int r = parse_own(cli, body);
	if (r == 0 && cli_parse_spec(cli, "template create", body) < 0)
		r = 2;
	if (r == 0)
		r = cli_connect(cli) < 0 ? 1 : call(cli, "POST", "/v1/templates", body, &answer);
	if (r == 0 && cli->json) {
		json_dumpf(answer, stdout, JSON_INDENT(2));
		putchar('\n');
	} else if (r == 0) {
		printf("%s\n", argv[1]);
	}
	json_decref(answer);
	json_decref(body);
	return r;
}

static void print_templates(json_t *list)
{
	static const char *const head[] = { "NAME", "FROM", ">MEMORY", ">CPUS", "START", ">WARM", "CREATED" };
	struct table t;
	size_t i;
	json_t *tp;
	table_init(&t, 7, head);
	json_array_foreach(list, i, tp)
	{
		char memory[16] = "-", cpus[16] = "-", warm[32], age[32];
		json_t *m = json_object_get(tp, "memory"), *c = json_object_get(tp, "cpus"),
		       *pool = json_object_get(tp, "pool"), *start = json_object_get(tp, "start");
		uint64_t bytes;
		if (json_is_integer(m))
			human_size((uint64_t)json_integer_value(m), memory, sizeof(memory));
		else if (json_is_string(m) && parse_size(json_string_value(m), &bytes) == 0)
			human_size(bytes, memory, sizeof(memory));
		if (json_is_number(c))
			snprintf(cpus, sizeof(cpus), "%g", json_number_value(c));
		snprintf(warm, sizeof(warm), "%d/%d", (int)json_integer_value(json_object_get(pool, "ready")),
			 (int)json_integer_value(json_object_get(tp, "warm")));
		human_age(json_integer_value(json_object_get(tp, "created_at")), cli_now_ms(), age, sizeof(age));
		const char *from = json_string_value(json_object_get(tp, "from_snapshot"));
		table_row(&t, json_string_value(json_object_get(tp, "name")),
			  from ? from : or_dash(json_string_value(json_object_get(tp, "image"))), memory, cpus,
			  json_is_string(start)  ? json_string_value(start)
			  : json_is_array(start) ? "(argv)"
						 : "-",
			  warm, age);
	}
	table_print(&t, stdout);
	table_free(&t);
}

int cmd_template_ls(struct cli *cli, int argc, char **argv)
{
	json_t *j = NULL;
	if (argc > 1)
		return cli_usage_error("template ls", "unexpected '%s'", argv[1]);
	int r = cli_connect(cli) < 0 ? 1 : call(cli, "GET", "/v1/templates", NULL, &j);
	if (r == 0 && cli->json) {
		json_dumpf(json_object_get(j, "templates"), stdout, JSON_INDENT(2));
		putchar('\n');
	} else if (r == 0) {
		print_templates(json_object_get(j, "templates"));
	}
	json_decref(j);
	return r;
}

int cmd_template_info(struct cli *cli, int argc, char **argv)
{
	json_t *j = NULL;
	char path[256];
	if (argc != 2)
		return cli_usage_error("template info", "want exactly one template NAME");
	snprintf(path, sizeof(path), "/v1/templates/%s", argv[1]);
	int r = cli_connect(cli) < 0 ? 1 : call(cli, "GET", path, NULL, &j);
	if (r == 0) {
		json_dumpf(j, stdout, JSON_INDENT(2));
		putchar('\n');
	}
	json_decref(j);
	return r;
}

int cmd_template_rm(struct cli *cli, int argc, char **argv)
{
	if (argc < 2)
		return cli_usage_error("template rm", "want one or more template NAMEs");
	if (cli_connect(cli) < 0)
		return 1;
	int r = 0;
	for (int i = 1; i < argc; i++) {
		char path[256];
		snprintf(path, sizeof(path), "/v1/templates/%s", argv[i]);
		if (call(cli, "DELETE", path, NULL, NULL) == 0)
			printf("%s\n", argv[i]);
		else
			r = 1;
	}
	return r;
}

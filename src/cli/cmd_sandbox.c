/* cove run / create / timeout / ls / info / rm */
#include <errno.h>
#include <time.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/human.h"
#include "common/parse.h"

/* "K=V" into an env object. */
int cli_add_env(json_t *spec, const char *kv);
int cli_add_env(json_t *spec, const char *kv)
{
	const char *eq = strchr(kv, '=');
	if (!eq || eq == kv)
		return -1;
	json_t *env = json_object_get(spec, "env");
	if (!env) {
		env = json_object();
		json_object_set_new(spec, "env", env);
	}
	char *name = strndup(kv, eq - kv);
	json_object_set_new(env, name, json_string(eq + 1));
	free(name);
	return 0;
}

/* Seconds, a number above 0 (coved checks the upper bound). */
static int parse_seconds(const char *s, double *ret)
{
	char *end;
	errno = 0;
	double t = strtod(s, &end);
	if (end == s || *end || errno || !(t > 0))
		return -1;
	*ret = t;
	return 0;
}

/* spec["ready"][key] = v (taken). */
static void set_ready(json_t *spec, const char *key, json_t *v)
{
	json_t *ready = json_object_get(spec, "ready");
	if (!ready) {
		ready = json_object();
		json_object_set_new(spec, "ready", ready);
	}
	json_object_set_new(ready, key, v);
}

/* The launch options: start command and readiness check. 0, or -1 after a
 * usage error. */
static int parse_launch(const char *verb, int c, const char *optarg, json_t *spec)
{
	char *end;
	long port;
	double seconds;
	switch (c) {
	case 'S':
		json_object_set_new(spec, "start", json_string(optarg));
		break;
	case 'R':
		port = strtol(optarg, &end, 10);
		if (*end || end == optarg || port < 1 || port > 65535)
			return cli_usage_error(verb, "bad --ready-port '%s' (1 to 65535)", optarg), -1;
		set_ready(spec, "port", json_integer(port));
		break;
	case 'U':
		set_ready(spec, "url", json_string(optarg));
		break;
	case 'C':
		set_ready(spec, "cmd", json_string(optarg));
		break;
	case 'Y':
		if (parse_seconds(optarg, &seconds) < 0)
			return cli_usage_error(verb, "bad --ready-timeout '%s' (seconds)", optarg), -1;
		set_ready(spec, "timeout", json_real(seconds));
		break;
	}
	return 0;
}

/* The sandbox options given into spec; 0, or -1 after a usage error.
 * Options it does not know are left to the caller. */
int cli_parse_spec(struct cli *cli, const char *verb, json_t *spec)
{
	int c;
	uint64_t size;
	uint32_t millis;
	double seconds;
	const char *optarg;
	while ((c = cli_next_opt(cli, &optarg)) != -1) {
		switch (c) {
		case 'I':
			json_object_set_new(spec, "image", json_string(optarg));
			break;
		case 'm':
			if (parse_size(optarg, &size) < 0)
				return cli_usage_error(verb, "bad --memory '%s' (like 512M or 2G)", optarg), -1;
			json_object_set_new(spec, "memory", json_integer((json_int_t)size));
			break;
		case 'c':
			if (parse_cpus(optarg, &millis) < 0)
				return cli_usage_error(verb, "bad --cpus '%s' (like 1 or 0.5)", optarg), -1;
			json_object_set_new(spec, "cpus", json_real(millis / 1000.0));
			break;
		case 'p':
			json_object_set_new(spec, "pids", json_integer(atoi(optarg)));
			break;
		case 'e':
			if (cli_add_env(spec, optarg) < 0)
				return cli_usage_error(verb, "bad --env '%s' (want NAME=VALUE)", optarg), -1;
			break;
		case 'w':
			json_object_set_new(spec, "cwd", json_string(optarg));
			break;
		case 'u':
			json_object_set_new(spec, "user", json_string(optarg));
			break;
		case 'n':
			json_object_set_new(spec, "name", json_string(optarg));
			break;
		case 't':
			if (parse_seconds(optarg, &seconds) < 0)
				return cli_usage_error(verb, "bad --timeout '%s' (seconds)", optarg), -1;
			json_object_set_new(spec, "timeout", json_real(seconds));
			break;
		case 'X': /* "external" or "isolated": coved says what else is wrong */
			json_object_set_new(spec, "isolation", json_string(optarg));
			break;
		case 'E':
			json_object_set_new(spec, "inherit_env", json_true());
			break;
		case 'N': /* coved checks the mode and the lists */
			json_object_set_new(spec, "network", json_string(optarg));
			break;
		case 'O':
		case 'D':
			cli_add_list(spec, c == 'O' ? "allow_out" : "deny_out", optarg);
			break;
		case 'T':
			json_object_set_new(spec, "template", json_string(optarg));
			break;
		default:
			if (parse_launch(verb, c, optarg, spec) < 0)
				return -1;
		}
	}
	return 0;
}

/* Create; the new ID goes to id, and with --json the whole answer to out. */
static int create(struct cli *cli, json_t *spec, char id[16], bool print_json)
{
	struct cove_error err = { 0 };
	char *body = json_dumps(spec, JSON_COMPACT), *answer = NULL;
	int r = cove_call(cli->client, "POST", "/v1/sandboxes", body, &answer, &err);
	free(body);
	if (r < 0)
		return cli_fail(&err);
	json_t *j = json_loads(answer, 0, NULL);
	snprintf(id, 16, "%s", json_string_value(json_object_get(j, "id")) ?: "");
	if (print_json) {
		json_dumpf(j, stdout, JSON_INDENT(2));
		putchar('\n');
	}
	json_decref(j);
	free(answer);
	return 0;
}

int cmd_create(struct cli *cli, int argc, char **argv)
{
	json_t *spec = json_object();
	char id[16];
	int r = cli_parse_spec(cli, "create", spec) < 0 ? 2
		: argc > 1                          ? cli_usage_error("create", "unexpected '%s'", argv[1])
						    : 0;
	if (r == 0)
		r = cli_connect(cli) < 0 ? 1 : create(cli, spec, id, cli->json);
	if (r == 0 && !cli->json)
		printf("%s\n", id);
	json_decref(spec);
	return r;
}

int cmd_run(struct cli *cli, int argc, char **argv)
{
	json_t *spec = json_object();
	int first = 1, r = cli_parse_spec(cli, "run", spec) < 0 ? 2 : 0;
	if (r == 0 && first == argc)
		r = cli_usage_error("run", "no command given");
	if (r) {
		json_decref(spec);
		return r;
	}
	/* cove run's sandbox must not outlive it, however it ends (Ctrl-C,
	 * kill -9, a lost terminal): it is ephemeral, so coved deletes it when
	 * this process's connection closes, which the kernel does for any
	 * death (and a coved restarted meanwhile deletes it at start). The
	 * create and the exec therefore share cli->client's one connection. */
	json_object_set_new(spec, "ephemeral", json_true());
	char id[16];
	r = cli_connect(cli) < 0 ? 1 : create(cli, spec, id, false);
	json_decref(spec);
	if (r)
		return r;
	json_t *cmd = json_array();
	for (int i = first; i < argc; i++)
		json_array_append_new(cmd, json_string(argv[i]));
	json_t *req = json_pack("{s:o}", "cmd", cmd);
	char *body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	r = cli_exec_stream(cli, id, body);
	free(body);
	struct cove_error err = { 0 };
	if (cove_delete(cli->client, id, &err) < 0 && err.status != 404)
		cli_fail(&err);
	return r;
}

static void print_deadline(const char *id, json_int_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char when[64] = "?";
	if (gmtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	printf("%s expires at %s", id, when);
}

int cmd_timeout(struct cli *cli, int argc, char **argv)
{
	double seconds;
	if (argc != 3)
		return cli_usage_error("timeout", "want a sandbox ID and a number of seconds");
	if (parse_seconds(argv[2], &seconds) < 0)
		return cli_usage_error("timeout", "bad number of seconds '%s'", argv[2]);
	struct cove_error err = { 0 };
	char path[256], *answer = NULL;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/timeout", argv[1]);
	json_t *req = json_pack("{s:f}", "timeout", seconds);
	char *body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	int r = cli_connect(cli) < 0 ? 1 : 0;
	if (r == 0 && cove_call(cli->client, "POST", path, body, &answer, &err) < 0)
		r = cli_fail(&err);
	free(body);
	if (r == 0) {
		json_t *j = json_loads(answer, 0, NULL);
		if (cli->json)
			json_dumpf(j, stdout, JSON_INDENT(2));
		else
			print_deadline(argv[1], json_integer_value(json_object_get(j, "expires_at")));
		putchar('\n');
		json_decref(j);
	}
	free(answer);
	return r;
}

static void print_sandboxes(json_t *list)
{
	static const char *const head[] = { "ID", "NAME", "STATE", "IMAGE", ">MEMORY", ">CPUS", "CREATED" };
	struct table t;
	size_t i;
	json_t *sb;
	table_init(&t, 7, head);
	json_array_foreach(list, i, sb)
	{
		char memory[16], cpus[16], age[32];
		human_size((uint64_t)json_integer_value(json_object_get(sb, "memory")), memory, sizeof(memory));
		snprintf(cpus, sizeof(cpus), "%g", json_number_value(json_object_get(sb, "cpus")));
		human_age(json_integer_value(json_object_get(sb, "created_at")), cli_now_ms(), age, sizeof(age));
		table_row(&t, json_string_value(json_object_get(sb, "id")),
			  or_dash(json_string_value(json_object_get(sb, "name"))),
			  json_string_value(json_object_get(sb, "state")),
			  json_string_value(json_object_get(sb, "image")), memory, cpus,
			  json_object_get(sb, "created_at") ? age : "-");
	}
	table_print(&t, stdout);
	table_free(&t);
}

int cmd_ls(struct cli *cli, int argc, char **argv)
{
	if (argc > 1)
		return cli_usage_error("ls", "unexpected '%s'", argv[1]);
	struct cove_error err = { 0 };
	char *body;
	if (cli_connect(cli) < 0)
		return 1;
	if (cove_call(cli->client, "GET", "/v1/sandboxes", NULL, &body, &err) < 0)
		return cli_fail(&err);
	json_t *j = json_loads(body, 0, NULL);
	if (cli->json) {
		json_dumpf(json_object_get(j, "sandboxes"), stdout, JSON_INDENT(2));
		putchar('\n');
	} else {
		print_sandboxes(json_object_get(j, "sandboxes"));
	}
	json_decref(j);
	free(body);
	return 0;
}

int cmd_info(struct cli *cli, int argc, char **argv)
{
	if (argc != 2)
		return cli_usage_error("info", "want exactly one sandbox ID");
	struct cove_error err = { 0 };
	char path[256], *body;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", argv[1]);
	if (cli_connect(cli) < 0)
		return 1;
	if (cove_call(cli->client, "GET", path, NULL, &body, &err) < 0)
		return cli_fail(&err);
	json_t *j = json_loads(body, 0, NULL);
	json_dumpf(j, stdout, JSON_INDENT(2));
	putchar('\n');
	json_decref(j);
	free(body);
	return 0;
}

int cmd_rm(struct cli *cli, int argc, char **argv)
{
	if (argc < 2)
		return cli_usage_error("rm", "want one or more sandbox IDs");
	if (cli_connect(cli) < 0)
		return 1;
	int r = 0;
	for (int i = 1; i < argc; i++) {
		struct cove_error err = { 0 };
		if (cove_delete(cli->client, argv[i], &err) < 0)
			r = cli_fail(&err);
		else
			printf("%s\n", argv[i]);
	}
	return r;
}

/* cove pause / resume / archive / reboot: a sandbox's state changes. Each
 * prints the sandbox's ID and its state, or with --json the API's answer. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

/* POST /v1/sandboxes/ID/<verb> for each ID. */
static int transition(struct cli *cli, const char *verb, int argc, char **argv)
{
	if (argc < 2)
		return cli_usage_error(verb, "want one or more sandbox IDs");
	if (cli_connect(cli) < 0)
		return 1;
	int r = 0;
	for (int i = 1; i < argc; i++) {
		struct cove_error err = { 0 };
		char path[256], *answer = NULL;
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/%s", argv[i], verb);
		if (cove_call(cli->client, "POST", path, "{}", &answer, &err) < 0) {
			r = cli_fail(&err);
			continue;
		}
		json_t *j = json_loads(answer, 0, NULL);
		if (cli->json) {
			json_dumpf(j, stdout, JSON_INDENT(2));
			putchar('\n');
		} else {
			printf("%s %s\n", argv[i], json_string_value(json_object_get(j, "state")) ?: "?");
		}
		json_decref(j);
		free(answer);
	}
	return r;
}

int cmd_pause(struct cli *cli, int argc, char **argv)
{
	return transition(cli, "pause", argc, argv);
}

int cmd_resume(struct cli *cli, int argc, char **argv)
{
	return transition(cli, "resume", argc, argv);
}

int cmd_archive(struct cli *cli, int argc, char **argv)
{
	return transition(cli, "archive", argc, argv);
}

int cmd_reboot(struct cli *cli, int argc, char **argv)
{
	return transition(cli, "reboot", argc, argv);
}

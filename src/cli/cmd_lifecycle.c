/* cove pause / resume / archive / reboot: a sandbox's state changes. Each
 * prints the sandbox's ID and its state (an archive: and whether its
 * processes' memory was kept), or with --json the API's answer.
 * cove events [ID]: the changes as they happen, one line each ("TIME ID
 * STATE (REASON)"), or with --json the API's NDJSON events. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

/* POST /v1/sandboxes/ID/<verb> with body for each ID. */
static int transition_with(struct cli *cli, const char *verb, const char *body, int argc, char **argv)
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
		if (cove_call(cli->client, "POST", path, body, &answer, &err) < 0) {
			r = cli_fail(&err);
			continue;
		}
		json_t *j = json_loads(answer, 0, NULL);
		if (cli->json) {
			json_dumpf(j, stdout, JSON_INDENT(2));
			putchar('\n');
		} else {
			json_t *kept = json_object_get(j, "memory_kept");
			const char *note = json_string_value(json_object_get(j, "memory_note"));
			printf("%s %s", argv[i], json_string_value(json_object_get(j, "state")) ?: "?");
			if (json_is_true(kept))
				printf(" (memory kept)");
			else if (kept)
				printf(" (memory not kept: %s)", note ?: "?");
			putchar('\n');
		}
		json_decref(j);
		free(answer);
	}
	return r;
}

static int transition(struct cli *cli, const char *verb, int argc, char **argv)
{
	return transition_with(cli, verb, "{}", argc, argv);
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
	const char *v;
	bool no_memory = false;
	int c;
	while ((c = cli_next_opt(cli, &v)) != -1)
		if (c == 'N')
			no_memory = true;
	return transition_with(cli, "archive", no_memory ? "{\"memory\": false}" : "{}", argc, argv);
}

int cmd_reboot(struct cli *cli, int argc, char **argv)
{
	return transition(cli, "reboot", argc, argv);
}

static int print_change(void *arg, const struct cove_watch_event *ev)
{
	const bool *json = arg;
	json_t *j = json_loads(ev->json, 0, NULL);
	if (*json) {
		printf("%s\n", ev->json);
	} else {
		time_t t = (time_t)(json_integer_value(json_object_get(j, "at")) / 1000);
		struct tm tm;
		char when[32] = "?";
		if (gmtime_r(&t, &tm))
			strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		printf("%s %s %s (%s)\n", when, json_string_value(json_object_get(j, "id")) ?: "?",
		       json_string_value(json_object_get(j, "state")) ?: "?",
		       json_string_value(json_object_get(j, "reason")) ?: "?");
	}
	json_decref(j);
	/* Stop when stdout is gone; each line now, for whoever waits on it. */
	return fflush(stdout) != 0 || ferror(stdout);
}

int cmd_events(struct cli *cli, int argc, char **argv)
{
	struct cove_error err = { 0 };
	if (argc > 2)
		return cli_usage_error("events", "at most one sandbox ID");
	if (cli_connect(cli) < 0)
		return 1;
	if (cove_events(cli->client, argc == 2 ? argv[1] : NULL, print_change, &cli->json, &err) < 0)
		return cli_fail(&err);
	return 0;
}

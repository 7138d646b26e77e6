/* cove files watch [-r] ID PATH: print the changes under a sandbox's folder
 * as they happen, until interrupted (or the folder or sandbox goes away).
 *
 * One line an event, "TYPE NAME" with a '/' after a folder's name; with
 * --json, the API's NDJSON events as they come (keepalives left out). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

struct watch_out {
	bool json;
	const char *path;
};

static int print_event(void *arg, const struct cove_watch_event *ev)
{
	const struct watch_out *o = arg;
	if (o->json)
		printf("%s\n", ev->json);
	else if (strcmp(ev->type, "start") == 0)
		fprintf(stderr, "cove: watching %s\n", o->path);
	else if (strcmp(ev->type, "overflow") == 0)
		printf("overflow (events were lost)\n");
	else if (strcmp(ev->type, "rename") == 0)
		printf("rename %s%s (%s)\n", ev->name, ev->is_dir ? "/" : "", ev->moved ? ev->moved : "?");
	else
		printf("%s %s%s\n", ev->type, ev->name, ev->is_dir ? "/" : "");
	/* Stop when stdout is gone (a closed pipe); flush each line, since
	 * whoever reads it wants the change now. */
	return fflush(stdout) != 0 || ferror(stdout);
}

int cmd_files_watch(struct cli *cli, int argc, char **argv)
{
	struct cove_error err = { 0 };
	bool recursive = false;
	const char *v;
	while (cli_next_opt(cli, &v) == 'r')
		recursive = true;
	if (argc != 3)
		return cli_usage_error("files watch", "expected ID PATH");
	struct watch_out out = { cli->json, argv[2] };
	if (cli_connect(cli) < 0)
		return 1;
	if (cove_watch(cli->client, argv[1], argv[2], recursive, print_event, &out, &err) < 0)
		return cli_fail(&err);
	return 0;
}

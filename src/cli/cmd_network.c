/* cove network ID [--allow-out X]... [--deny-out Y]... [--clear] */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

int cli_add_list(json_t *obj, const char *key, const char *value)
{
	json_t *a = json_object_get(obj, key);
	if (!a) {
		a = json_array();
		json_object_set_new(obj, key, a);
	}
	return json_array_append_new(a, json_string(value));
}

/* With lists (or --clear): both replaced, an absent one emptied, as the
 * API does. Without: the sandbox's network as it is. */
int cmd_network(struct cli *cli, int argc, char **argv)
{
	json_t *req = json_object();
	bool put = false;
	const char *v;
	int c;
	while ((c = cli_next_opt(cli, &v)) != -1) {
		if (c != 'c')
			cli_add_list(req, c == 'a' ? "allow_out" : "deny_out", v);
		put = true;
	}
	if (argc != 2) {
		json_decref(req);
		return cli_usage_error("network", "want exactly one sandbox ID");
	}
	char path[256], *body = json_dumps(req, JSON_COMPACT), *answer = NULL;
	json_decref(req);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s%s", argv[1], put ? "/network" : "");
	struct cove_error err = { 0 };
	int r = cli_connect(cli) < 0 ? 1 : 0;
	if (r == 0 && cove_call(cli->client, put ? "PUT" : "GET", path, put ? body : NULL, &answer, &err) < 0)
		r = cli_fail(&err);
	free(body);
	if (r == 0) {
		json_t *j = json_loads(answer, 0, NULL);
		json_dumpf(json_object_get(j, "network"), stdout, JSON_INDENT(2));
		putchar('\n');
		json_decref(j);
	}
	free(answer);
	return r;
}

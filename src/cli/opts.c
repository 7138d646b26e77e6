/* The CLI's option parser: one table per command (commands.c), options
 * anywhere among the operands as docker takes them, up to "--" or, for the
 * verbs that run a command in the sandbox, up to that command, which is
 * never parsed.
 *
 * The parse turns argv into the options given, in order (cli->opts), and
 * a plain argv of the operands and then the sandbox's command, so that a
 * verb reads its options from one list and its operands by position. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

const struct cli_opt cli_global_opts[] = {
	{ CLI_G_SOCKET, 0, "socket", "PATH", "coved's unix socket (COVE_SOCKET; default " COVE_DEFAULT_SOCKET ")" },
	{ CLI_G_DATA, 0, "data", "DIR", "data root of a coved the CLI starts (COVE_DATA; default /var/lib/cove)" },
	{ CLI_G_JSON, 0, "json", NULL, "print the API's own JSON objects instead of tables and IDs" },
	{ CLI_G_HOST, 0, "host", "ADDR:PORT", "a coved on TCP (coved --listen) instead of the socket (COVE_HOST)" },
	{ CLI_G_TOKEN_FILE, 0, "token-file", "PATH", "the API token for --host (or COVE_TOKEN)" },
	{ CLI_G_HELP, 'h', "help", NULL, "this command's usage" },
	{ 0 },
};

static const struct cli_opt *find_long(const struct cli_opt *t, const char *name, size_t n)
{
	for (; t && t->key; t++)
		if (strlen(t->name) == n && strncmp(t->name, name, n) == 0)
			return t;
	return NULL;
}

static const struct cli_opt *find_short(const struct cli_opt *t, char c)
{
	for (; t && t->key; t++)
		if (t->letter && t->letter == c)
			return t;
	return NULL;
}

static int unknown(const struct cli_cmd *cmd, const char *what, const char *arg)
{
	fprintf(stderr, "cove%s%s: %s '%s'\n", cmd ? " " : "", cmd ? cmd->name : "", what, arg);
	if (cmd)
		fprintf(stderr, "usage: cove %s %s  (see cove help %s)\n", cmd->name, cmd->synopsis, cmd->name);
	else
		fprintf(stderr, "(see cove --help)\n");
	return 2;
}

static void add(struct cli *cli, const struct cli_opt *o, const char *value)
{
	cli->opts[cli->n_opts].key = o->key;
	cli->opts[cli->n_opts++].value = value;
}

/* One argument that starts with '-' at argv[*i]: its option(s) into cli,
 * taking the next argument for a value when it needs one. 0, or 2 after a
 * usage error. */
static int one_option(struct cli *cli, const struct cli_cmd *cmd, int argc, char **argv, int *i)
{
	const struct cli_opt *own = cmd ? cmd->opts : NULL;
	const char *a = argv[*i];
	if (a[1] == '-') {
		const char *eq = strchr(a + 2, '=');
		size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
		const struct cli_opt *o = find_long(own, a + 2, n) ?: find_long(cli_global_opts, a + 2, n);
		if (!o)
			return unknown(cmd, "unknown option", a);
		if (!o->arg && eq)
			return unknown(cmd, "option takes no value", a);
		if (o->arg && !eq && *i + 1 >= argc)
			return unknown(cmd, "option needs a value", a);
		add(cli, o, o->arg ? (eq ? eq + 1 : argv[++*i]) : NULL);
		return 0;
	}
	/* -abc: flags grouped; the first that takes a value takes the rest of
	 * the argument, or the next one. */
	for (const char *p = a + 1; *p; p++) {
		const struct cli_opt *o = find_short(own, *p) ?: find_short(cli_global_opts, *p);
		char name[3] = { '-', *p, '\0' };
		if (!o)
			return unknown(cmd, "unknown option", name);
		if (!o->arg) {
			add(cli, o, NULL);
			continue;
		}
		if (!p[1] && *i + 1 >= argc)
			return unknown(cmd, "option needs a value", name);
		add(cli, o, p[1] ? p + 1 : argv[++*i]);
		break;
	}
	return 0;
}

int cli_parse_args(struct cli *cli, const struct cli_cmd *cmd, int argc, char **argv, int *ret_argc)
{
	int out = 1;
	bool options = true;
	free(cli->opts);
	cli->opts = calloc((size_t)argc + 1, sizeof(*cli->opts));
	cli->n_opts = cli->next_opt = 0;
	if (!cli->opts) {
		fprintf(stderr, "cove: out of memory\n");
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		/* Past the operands before it, the sandbox's command begins: it and
		 * all after it are its own. */
		if (cmd && cmd->fixed >= 0 && out - 1 >= cmd->fixed && (!options || a[0] != '-' || !a[1])) {
			while (i < argc)
				argv[out++] = argv[i++];
			break;
		}
		if (options && strcmp(a, "--") == 0) {
			options = false;
			continue;
		}
		if (options && a[0] == '-' && a[1]) {
			int r = one_option(cli, cmd, argc, argv, &i);
			if (r)
				return r;
			continue;
		}
		argv[out++] = argv[i];
	}
	argv[out] = NULL;
	*ret_argc = out;
	return 0;
}

int cli_next_opt(struct cli *cli, const char **value)
{
	while (cli->next_opt < cli->n_opts) {
		const struct cli_optval *o = &cli->opts[cli->next_opt++];
		if (o->key >= CLI_G_SOCKET) /* main's, already applied */
			continue;
		*value = o->value;
		return o->key;
	}
	return -1;
}

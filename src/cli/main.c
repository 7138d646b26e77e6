/* cove: the command line. Global options, the verb table, and starting
 * coved on demand so that `cove run -- CMD` works on a fresh machine. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"

int cli_fail(const struct cove_error *err)
{
	fprintf(stderr, "cove: %s\n", err->message);
	return 1;
}

int cli_usage_error(const char *verb, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "cove %s: ", verb);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	const struct cli_cmd *cmd = cli_find_command(verb);
	if (cmd)
		fprintf(stderr, "\nusage: cove %s %s  (see cove help %s)\n", cmd->name, cmd->synopsis, cmd->name);
	else
		fprintf(stderr, " (see cove --help)\n");
	return 2;
}

/* Start coved (next to this binary) in its own session, logging to
 * <data>/coved.log. Returns its pid, or -1. */
static int start_daemon(const struct cli *cli)
{
	char self[1024], coved[1100], log[1100];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -1;
	self[n] = '\0';
	snprintf(coved, sizeof(coved), "%s/coved", dirname(self));
	(void)mkdir(cli->data_dir, 0700);
	snprintf(log, sizeof(log), "%s/coved.log", cli->data_dir);
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		fprintf(stderr, "cove: cannot start coved: %s: %s\n", log, strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid != 0) {
		close(fd);
		return pid;
	}
	setsid();
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null >= 0)
		dup2(null, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	execl(coved, "coved", "--data", cli->data_dir, "--socket", cli->socket_path, (char *)NULL);
	_exit(127);
}

/* The API token from a file: its first line, without trailing whitespace. */
static int read_token_file(struct cli *cli, const char *path)
{
	static char token[4098];
	FILE *f = fopen(path, "re");
	size_t n = f ? fread(token, 1, sizeof(token) - 1, f) : 0;
	if (!f || ferror(f)) {
		fprintf(stderr, "cove: token file '%s': %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	fclose(f);
	token[n] = '\0';
	token[strcspn(token, "\r\n")] = '\0';
	for (n = strlen(token); n > 0 && (token[n - 1] == ' ' || token[n - 1] == '\t');)
		token[--n] = '\0';
	cli->token = token;
	return 0;
}

int cli_connect(struct cli *cli)
{
	struct cove_error err = { 0 };
	/* A daemon elsewhere is never started from here. */
	if (cli->host) {
		if (!cli->token || !*cli->token) {
			fprintf(stderr, "cove: --host needs the API token: set COVE_TOKEN or give --token-file PATH\n");
			return -1;
		}
		if (cove_open_tcp(cli->host, cli->token, &cli->client, &err) == 0)
			return 0;
		cli_fail(&err);
		return -1;
	}
	if (cove_open(cli->socket_path, &cli->client, &err) == 0)
		return 0;
	/* COVE_NO_START: for callers that must not start a daemon (the bash
	 * completion, which runs cove ls at every TAB). */
	const char *no_start = getenv("COVE_NO_START");
	if (geteuid() != 0 || (no_start && *no_start)) {
		cli_fail(&err);
		return -1;
	}
	pid_t pid = start_daemon(cli);
	if (pid < 0)
		return -1;
	/* The first start formats the pool and builds the host image: allow
	 * for it, then give up with the daemon's own words. */
	for (int i = 0; i < 600; i++) {
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		if (cove_open(cli->socket_path, &cli->client, &err) == 0)
			return 0;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			break;
	}
	fprintf(stderr, "cove: coved did not start; see %s/coved.log\n", cli->data_dir);
	return -1;
}

/* The command that argv[*i] (and argv[*i + 1], for "snapshot rm" and
 * the like) names; *i moves to its last word. */
static const struct cli_cmd *find_command(int argc, char **argv, int *i)
{
	char two[128];
	if (*i + 1 < argc) {
		snprintf(two, sizeof(two), "%s %s", argv[*i], argv[*i + 1]);
		const struct cli_cmd *cmd = cli_find_command(two);
		if (cmd) {
			++*i;
			return cmd;
		}
	}
	return cli_find_command(argv[*i]);
}

/* The global options given, wherever they were, into cli; whether --help
 * was one of them. -1 for an unreadable token file. */
static int apply_globals(struct cli *cli)
{
	const char *token_file = NULL;
	bool help = false;
	for (int k = 0; k < cli->n_opts; k++) {
		const char *v = cli->opts[k].value;
		switch (cli->opts[k].key) {
		case CLI_G_SOCKET:
			cli->socket_path = v;
			break;
		case CLI_G_DATA:
			cli->data_dir = v;
			break;
		case CLI_G_JSON:
			cli->json = true;
			break;
		case CLI_G_HOST:
			cli->host = v;
			break;
		case CLI_G_TOKEN_FILE:
			token_file = v;
			break;
		case CLI_G_HELP:
			help = true;
			break;
		}
	}
	if (token_file && read_token_file(cli, token_file) < 0)
		return -1;
	return help;
}

static void init_from_env(struct cli *cli)
{
	cli->socket_path = getenv("COVE_SOCKET");
	cli->data_dir = getenv("COVE_DATA");
	cli->host = getenv("COVE_HOST");
	cli->token = getenv("COVE_TOKEN");
	if (cli->host && !*cli->host)
		cli->host = NULL;
	if (!cli->socket_path || !*cli->socket_path)
		cli->socket_path = COVE_DEFAULT_SOCKET;
	if (!cli->data_dir || !*cli->data_dir)
		cli->data_dir = "/var/lib/cove";
}

/* The index of the command's name: past the global options before it
 * (and their values). */
static int command_index(int argc, char **argv)
{
	int i = 1;
	while (i < argc && argv[i][0] == '-' && argv[i][1]) {
		const char *a = argv[i] + 2;
		size_t n = strcspn(a, "=");
		bool takes_next = false;
		for (const struct cli_opt *o = cli_global_opts; argv[i][1] == '-' && o->key; o++)
			if (strlen(o->name) == n && strncmp(o->name, a, n) == 0)
				takes_next = o->arg && !a[n];
		i += takes_next ? 2 : 1;
	}
	return i;
}

int main(int argc, char **argv)
{
	struct cli cli = { 0 };
	init_from_env(&cli);
	/* A write to a pipe whose reader is gone is an error to handle, not a
	 * reason to die. */
	signal(SIGPIPE, SIG_IGN);
	/* jansson would read /dev/urandom to seed its hash tables against
	 * collision attacks; the CLI only parses its own daemon's answers. */
	json_object_seed(1);
	int i = command_index(argc, argv), pre = i - 1, n;
	if (i >= argc) { /* no command: cove --help, or a mistake */
		if (cli_parse_args(&cli, NULL, argc, argv, &n) != 0)
			return 2;
		int help = apply_globals(&cli);
		cli_print_usage(help > 0 ? stdout : stderr);
		free(cli.opts);
		return help > 0 ? 0 : 2;
	}
	const struct cli_cmd *cmd = find_command(argc, argv, &i);
	if (!cmd && strcmp(argv[i], "files") == 0) {
		bool help = i + 1 < argc && (strcmp(argv[i + 1], "--help") == 0 || strcmp(argv[i + 1], "-h") == 0);
		if (!help)
			fprintf(stderr, "cove files: %s%s%s\n", i + 1 < argc ? "unknown command '" : "which command?",
				i + 1 < argc ? argv[i + 1] : "", i + 1 < argc ? "'" : "");
		cli_print_files_usage(help ? stdout : stderr);
		return help ? 0 : 2;
	}
	if (!cmd) {
		fprintf(stderr, "cove: unknown command '%s' (see cove --help)\n", argv[i]);
		return 2;
	}
	/* The command's name, the global options before it, then its own
	 * arguments: one list, parsed by its table. */
	char **args = calloc((size_t)argc + 1, sizeof(char *));
	if (!args)
		return 2;
	args[0] = (char *)cmd->name;
	memcpy(args + 1, argv + 1, (size_t)pre * sizeof(char *));
	memcpy(args + 1 + pre, argv + i + 1, (size_t)(argc - i - 1) * sizeof(char *));
	int r = cli_parse_args(&cli, cmd, 1 + pre + argc - i - 1, args, &n);
	int g = r ? 0 : apply_globals(&cli);
	if (r == 0 && g < 0)
		r = 2;
	else if (r == 0 && g > 0)
		cli_print_help(cmd, stdout);
	else if (r == 0)
		r = cmd->fn(&cli, n, args);
	cove_close(cli.client);
	free(cli.opts);
	free(args);
	return r;
}

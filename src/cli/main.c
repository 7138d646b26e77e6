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

static const struct verb {
	const char *name;
	int (*fn)(struct cli *cli, int argc, char **argv);
	const char *help;
} verbs[] = {
	{ "run", cmd_run, "run [OPTIONS] -- CMD...      create a sandbox, run CMD in it, delete it" },
	{ "create", cmd_create, "create [OPTIONS]             create a sandbox, print its ID" },
	{ "timeout", cmd_timeout, "timeout ID SECONDS           delete a sandbox SECONDS from now" },
	{ "exec", cmd_exec, "exec [OPTIONS] ID -- CMD...  run CMD in a sandbox" },
	{ "ls", cmd_ls, "ls                           list sandboxes" },
	{ "info", cmd_info, "info ID                      a sandbox as JSON" },
	{ "rm", cmd_rm, "rm ID...                     delete sandboxes" },
	{ "network", cmd_network,
	  "network ID [--allow-out X]... [--deny-out Y]... [--clear]  replace a sandbox's egress policy (none: show "
	  "it)" },
	{ "cp", cmd_cp,
	  "cp SRC ID:DST | ID:SRC DST   copy a file or folder into or out of a sandbox (- is stdin/stdout)" },
	{ "snapshot", cmd_snapshot, "snapshot [--name N] ID       snapshot a sandbox (running or not), print its ID" },
	{ "snapshot rm", cmd_snapshot, "snapshot rm SNID...          delete snapshots" },
	{ "snapshots", cmd_snapshots, "snapshots                    list snapshots" },
	{ "restore", cmd_restore, "restore [OPTIONS] SNID       a new sandbox from a snapshot, print its ID" },
	{ "fork", cmd_fork, "fork [-n N] ID               N copies of a running sandbox, print their IDs" },
	{ "lock", cmd_lock, "lock [OPTIONS] ID NAME -- CMD...  run CMD in a sandbox holding its lock NAME" },
	{ "ps", cmd_ps, "ps [--json] ID               a sandbox's kept processes (exec -d, shell)" },
	{ "attach", cmd_attach, "attach [--no-replay] ID P    a process's output: its kept tail, then live" },
	{ "kill", cmd_kill, "kill [-s SIG] [--tree] ID P  signal a process (default KILL)" },
	{ "wait", cmd_wait, "wait ID P                    wait for a process, exit with its status" },
	{ "shell", cmd_shell, "shell [OPTIONS] ID [-- CMD]  an interactive terminal (default: the user's shell)" },
	{ "files", cmd_files,
	  "files ls [-l] [-d N] ID PATH | cat ID PATH... | rm [-r] ID PATH... | mkdir ID PATH...\n"
	  "        | mv [-f] ID FROM TO | chmod ID MODE PATH... | watch [-r] ID PATH   a sandbox's files" },
	{ "checkpoint", cmd_checkpoint,
	  "checkpoint [--label L] ID    add a checkpoint to a sandbox's history, print its number" },
	{ "history", cmd_history, "history ID                   a sandbox's checkpoints (also of a deleted sandbox)" },
	{ "history rm", cmd_history, "history rm ID                forget a history and the snapshots only it needed" },
	{ "rollback", cmd_rollback, "rollback ID K                a new sandbox from checkpoint K, print its ID" },
	{ "branch", cmd_branch, "branch [-n N] ID K           N new sandboxes from checkpoint K, each its own branch" },
	{ "export", cmd_export,
	  "export [-o FILE] [--format tar|zip] [--path DIR] ID   a folder (default: the workspace) as a tar or zip" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: cove [--socket PATH] [--data DIR] [--json] COMMAND ...\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(f, "  %s\n", verbs[i].help);
	fprintf(f, "\nsandbox options (run, create): --image I --memory 512M --cpus 1 --pids N --env K=V\n"
		   "  --workdir DIR --user U --name NAME\n"
		   "  --network egress|none (default egress) --allow-out CIDR|DOMAIN --deny-out CIDR|DOMAIN\n"
		   "  --isolation external [--inherit-env]  the host backend: a workspace folder, no OS boundary\n"
		   "restore options: --name NAME --memory 512M --cpus 1 --pids N (default: the snapshot's)\n"
		   "portable snapshots: snapshot --portable [--path DIR] ID > s.json; restore --portable [--path DIR] "
		   "s.json\n"
		   "exec options: --env K=V --workdir DIR --user U --timeout SECONDS -i (pass stdin)\n"
		   "  -d|--detach (in the background, print its pid) --tag T (name it; P is its pid or tag)\n"
		   "lock options: --lease SECONDS (default 30, renewed while CMD runs) --wait SECONDS\n"
		   "  (default 3600; 0: try once)\n"
		   "shell options: --env K=V --workdir DIR --user U\n"
		   "environment: COVE_SOCKET (default " COVE_DEFAULT_SOCKET "), COVE_DATA (default /var/lib/cove)\n");
	fprintf(f, "coved over TCP (coved --listen), instead of the socket: --host ADDR:PORT (or COVE_HOST),\n"
		   "  with the API token from --token-file PATH (or COVE_TOKEN)\n");
}

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
	fprintf(stderr, " (see cove --help)\n");
	va_end(ap);
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
	if (geteuid() != 0) {
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

int main(int argc, char **argv)
{
	struct cli cli = { .socket_path = getenv("COVE_SOCKET"), .data_dir = getenv("COVE_DATA") };
	const char *token_file = NULL;
	cli.host = getenv("COVE_HOST");
	cli.token = getenv("COVE_TOKEN");
	if (cli.host && !*cli.host)
		cli.host = NULL;
	if (!cli.socket_path || !*cli.socket_path)
		cli.socket_path = COVE_DEFAULT_SOCKET;
	if (!cli.data_dir || !*cli.data_dir)
		cli.data_dir = "/var/lib/cove";
	/* A write to a pipe whose reader is gone is an error to handle, not a
	 * reason to die. */
	signal(SIGPIPE, SIG_IGN);
	/* jansson would read /dev/urandom to seed its hash tables against
	 * collision attacks; the CLI only parses its own daemon's answers. */
	json_object_seed(1);
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc)
			cli.socket_path = argv[++i];
		else if (strcmp(argv[i], "--data") == 0 && i + 1 < argc)
			cli.data_dir = argv[++i];
		else if (strcmp(argv[i], "--json") == 0)
			cli.json = true;
		else if (strcmp(argv[i], "--host") == 0 && i + 1 < argc)
			cli.host = argv[++i];
		else if (strcmp(argv[i], "--token-file") == 0 && i + 1 < argc)
			token_file = argv[++i];
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		} else {
			fprintf(stderr, "cove: unknown option '%s' (see cove --help)\n", argv[i]);
			return 2;
		}
	}
	if (i == argc) {
		usage(stderr);
		return 2;
	}
	if (token_file && read_token_file(&cli, token_file) < 0)
		return 2;
	/* --json is taken after the command too (cove ls --json), as scripts
	 * write it; but never from a sandbox's command: not after "--", and for
	 * the verbs that run one ("--" is optional there) only among the options
	 * before the first operand. */
	bool runs_command = strcmp(argv[i], "run") == 0 || strcmp(argv[i], "exec") == 0 ||
			    strcmp(argv[i], "lock") == 0 || strcmp(argv[i], "shell") == 0;
	int kept = i + 1;
	for (int a = i + 1; a < argc; a++) {
		if (strcmp(argv[a], "--") == 0 || (runs_command && argv[a][0] != '-')) {
			while (a < argc)
				argv[kept++] = argv[a++];
			break;
		}
		if (strcmp(argv[a], "--json") == 0)
			cli.json = true;
		else
			argv[kept++] = argv[a];
	}
	argc = kept;
	argv[argc] = NULL;
	for (size_t v = 0; v < sizeof(verbs) / sizeof(verbs[0]); v++)
		if (strcmp(argv[i], verbs[v].name) == 0) {
			int r = verbs[v].fn(&cli, argc - i, argv + i);
			cove_close(cli.client);
			return r;
		}
	fprintf(stderr, "cove: unknown command '%s' (see cove --help)\n", argv[i]);
	return 2;
}

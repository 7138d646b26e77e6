/* cove exec --detach, ps, attach, kill, wait, shell: kept processes and
 * terminals.
 *
 *   cove exec -d [--tag T] ID -- CMD...   start a background process, print its pid
 *   cove ps ID                            its processes, running and ended
 *   cove attach [--no-replay] ID PROC     its output (the kept tail, then live)
 *   cove kill [-s SIG] [--tree] ID PROC   a signal (default KILL)
 *   cove wait ID PROC                     until it ends
 *   cove shell ID [-- CMD...]             an interactive terminal
 *
 * PROC is a pid or a tag. attach, wait and shell exit with the process's
 * status, as cove exec does. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/human.h"
#include "common/io.h"

#define SHELL_STDIN_CHUNK 65536

int cli_add_env(json_t *spec, const char *kv);

int cli_exit_status(const struct cove_exec_result *res)
{
	if (res->timed_out) {
		fprintf(stderr, "cove: timed out\n");
		return 124;
	}
	return res->signal ? 128 + res->signal : res->exit_code;
}

int cli_exec_error_status(const struct cove_error *err)
{
	cli_fail(err);
	if (strstr(err->message, "exec: No such file"))
		return 127;
	if (strstr(err->message, "exec: Permission denied"))
		return 126;
	return 125;
}

int cli_exec_detached(struct cli *cli, const char *id, const char *request_json)
{
	struct cove_error err = { 0 };
	int pid;
	if (cove_proc_start(cli->client, id, request_json, &pid, &err) < 0)
		return cli_exec_error_status(&err);
	if (cli->json) {
		json_t *req = json_loads(request_json, 0, NULL);
		json_t *j = json_pack("{s:i, s:O?}", "pid", pid, "tag", json_object_get(req, "tag"));
		json_dumpf(j, stdout, JSON_COMPACT);
		json_decref(j);
		json_decref(req);
		putchar('\n');
	} else {
		printf("%d\n", pid);
	}
	return 0;
}

/* ---- ps ---- */

/* The command as one line: a string as it is, an argv joined by spaces. */
static void format_cmd(char *buf, size_t cap, json_t *cmd)
{
	size_t i, off = 0;
	json_t *arg;
	buf[0] = '\0';
	if (json_is_string(cmd)) {
		snprintf(buf, cap, "%s", json_string_value(cmd));
		return;
	}
	json_array_foreach(cmd, i, arg)
	{
		int n = snprintf(buf + off, cap - off, "%s%s", i ? " " : "", json_string_value(arg));
		if (n < 0 || (size_t)n >= cap - off)
			break;
		off += (size_t)n;
	}
}

static void print_process(struct table *t, json_t *p)
{
	char exit[16] = "-", age[32], cmd[256];
	json_t *code = json_object_get(p, "exit_code");
	const char *sig = json_string_value(json_object_get(p, "signal"));
	const char *tag = json_string_value(json_object_get(p, "tag"));
	if (json_is_integer(code))
		snprintf(exit, sizeof(exit), "%lld", (long long)json_integer_value(code));
	else if (sig)
		snprintf(exit, sizeof(exit), "SIG%s", sig);
	char pid[16];
	snprintf(pid, sizeof(pid), "%lld", (long long)json_integer_value(json_object_get(p, "pid")));
	human_age(json_integer_value(json_object_get(p, "started_at")), cli_now_ms(), age, sizeof(age));
	format_cmd(cmd, sizeof(cmd), json_object_get(p, "cmd"));
	table_row(t, pid, tag ? tag : "-", json_string_value(json_object_get(p, "state")), exit,
		  json_is_true(json_object_get(p, "tty")) ? "yes" : "-", age, cmd);
}

int cmd_ps(struct cli *cli, int argc, char **argv)
{
	int i = 1;
	bool json = cli->json;
	if (argc - i != 1)
		return cli_usage_error("ps", "want one sandbox ID");
	struct cove_error err = { 0 };
	char *body;
	if (cli_connect(cli) < 0)
		return 1;
	if (cove_proc_list(cli->client, argv[i], &body, &err) < 0)
		return cli_fail(&err);
	json_t *j = json_loads(body, 0, NULL);
	free(body);
	json_t *list = json_object_get(j, "processes");
	if (json) {
		json_dumpf(list, stdout, JSON_INDENT(2));
		putchar('\n');
	} else {
		static const char *const head[] = { ">PID", "TAG", "STATE", ">EXIT", "TTY", "STARTED", "CMD" };
		struct table t;
		size_t k;
		json_t *p;
		table_init(&t, 7, head);
		json_array_foreach(list, k, p)
		{
			print_process(&t, p);
		}
		table_print(&t, stdout);
		table_free(&t);
	}
	json_decref(j);
	return 0;
}

/* ---- attach, kill, wait ---- */

static void on_output(void *arg, int fd, const char *buf, size_t len)
{
	(void)io_write_all(fd, buf, len); /* a closed stdout only loses output */
}

static void on_gap(void *arg, int fd, unsigned long long lost)
{
	fprintf(stderr, "cove: the first %llu bytes of %s are gone (the last 1 MiB is kept)\n", lost,
		fd == 2 ? "stderr" : "stdout");
}

int cmd_attach(struct cli *cli, int argc, char **argv)
{
	int i = 1;
	const char *v;
	bool replay = cli_next_opt(cli, &v) != 'R';
	if (argc - i != 2)
		return cli_usage_error("attach", "want a sandbox ID and a pid or tag");
	struct cove_exec_events ev = { .on_output = on_output, .on_gap = on_gap };
	struct cove_exec_result res;
	struct cove_error err = { 0 };
	if (cli_connect(cli) < 0)
		return 1;
	if (cove_proc_attach(cli->client, argv[i], argv[i + 1], replay, &ev, &res, &err) < 0)
		return cli_fail(&err);
	return cli_exit_status(&res);
}

int cmd_kill(struct cli *cli, int argc, char **argv)
{
	const char *sig = NULL, *v;
	bool tree = false;
	int c;
	while ((c = cli_next_opt(cli, &v)) != -1) {
		if (c == 's')
			sig = v;
		else
			tree = true;
	}
	if (argc != 3)
		return cli_usage_error("kill", "want a sandbox ID and a pid or tag");
	struct cove_error err = { 0 };
	if (cli_connect(cli) < 0)
		return 1;
	if (cove_proc_signal(cli->client, argv[1], argv[2], sig, tree, &err) < 0)
		return cli_fail(&err);
	return 0;
}

int cmd_wait(struct cli *cli, int argc, char **argv)
{
	if (argc != 3)
		return cli_usage_error("wait", "want a sandbox ID and a pid or tag (cove wait ID PROC)");
	struct cove_exec_result res;
	struct cove_error err = { 0 };
	if (cli_connect(cli) < 0)
		return 1;
	if (cove_proc_wait(cli->client, argv[1], argv[2], &res, &err) < 0)
		return cli_fail(&err);
	return cli_exit_status(&res);
}

/* ---- shell ----
 *
 * A terminal in the sandbox: a kept process with "tty": true, then a
 * connection of its own switched to the terminal's raw bytes (an HTTP
 * upgrade) as its foreground client: coved kills the terminal when that
 * connection closes, however this process ends, and the terminal waits for
 * us to read its output. Our keys go to it as they are typed, Ctrl-C
 * included (our terminal is raw: the sandbox's interprets them); our window
 * size goes as resize requests on the CLI's other connection; once coved
 * has closed the terminal's connection, the exit status is asked for. */

struct shell {
	struct cli *cli;
	const char *id;
	char proc[16]; /* the terminal's pid */
	int winsize_fd;
	bool stdin_is_tty;
	int fd;                     /* the terminal's connection */
	bool stdin_open;            /* our stdin has not ended */
	char in[SHELL_STDIN_CHUNK]; /* our stdin's bytes not yet on the connection */
	size_t in_off, in_len;
};

/* The local terminal's settings while it is raw: restored on every way out,
 * a signal's too. */
static struct termios saved_termios;
static volatile sig_atomic_t terminal_raw;
static int winch_pipe[2] = { -1, -1 };

static void restore_terminal(void)
{
	if (terminal_raw)
		(void)tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_termios);
	terminal_raw = 0;
}

/* A signal that ends us (SA_RESETHAND): the terminal back, then the default
 * action when the handler returns, with the signal unblocked. */
static void on_fatal_signal(int sig)
{
	int saved = errno;
	restore_terminal();
	(void)raise(sig);
	errno = saved;
}

static void on_winch(int sig)
{
	int saved = errno;
	(void)!write(winch_pipe[1], "w", 1); /* a full pipe already says it */
	errno = saved;
}

static int install_signals(void)
{
	static const int fatal[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM };
	struct sigaction sa = { .sa_handler = on_fatal_signal, .sa_flags = SA_RESETHAND };
	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		if (sigaction(fatal[i], &sa, NULL) < 0)
			return -1;
	if (pipe2(winch_pipe, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	struct sigaction winch = { .sa_handler = on_winch, .sa_flags = SA_RESTART };
	return sigaction(SIGWINCH, &winch, NULL);
}

static int enter_raw_mode(void)
{
	struct termios raw;
	if (tcgetattr(STDIN_FILENO, &saved_termios) < 0)
		return -1;
	raw = saved_termios;
	/* Every key goes to the sandbox as it is typed, Ctrl-C included: the
	 * terminal there interprets them, as a local one would. */
	cfmakeraw(&raw);
	terminal_raw = 1;
	if (tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) < 0) {
		terminal_raw = 0;
		return -1;
	}
	return 0;
}

/* The local window size, or false when there is no terminal to ask. */
static bool window_size(int fd, struct winsize *ws)
{
	return fd >= 0 && ioctl(fd, TIOCGWINSZ, ws) == 0 && ws->ws_row > 0 && ws->ws_col > 0;
}

static int send_resize(struct shell *sh, struct cove_error *err)
{
	char drain[64];
	while (read(winch_pipe[0], drain, sizeof(drain)) > 0)
		;
	struct winsize ws;
	if (!window_size(sh->winsize_fd, &ws))
		return 0;
	/* A terminal that has just ended refuses (409): the close of its
	 * connection is on its way. */
	if (cove_proc_resize(sh->cli->client, sh->id, sh->proc, ws.ws_row, ws.ws_col, err) < 0 && err->status != 409)
		return -1;
	return 0;
}

/* Our stdin's next bytes, read only once the last ones are on the
 * connection: a terminal that takes no input holds our keys back, not
 * our memory. */
static void read_stdin(struct shell *sh)
{
	ssize_t n = read(STDIN_FILENO, sh->in, sizeof(sh->in));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	sh->in_off = 0;
	sh->in_len = n > 0 ? (size_t)n : 0;
	sh->stdin_open = n > 0;
}

static void send_stdin(struct shell *sh)
{
	ssize_t n = send(sh->fd, sh->in + sh->in_off, sh->in_len - sh->in_off, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	/* An error: coved has closed the connection, which the read side sees;
	 * our input has nowhere to go any more. */
	sh->in_off = n < 0 ? sh->in_len : sh->in_off + (size_t)n;
	if (sh->in_off == sh->in_len)
		sh->in_off = sh->in_len = 0;
	if (n < 0)
		sh->stdin_open = false;
}

/* The terminal's output to our stdout: 1 once coved has closed the
 * connection (the terminal has ended), 0, or -1 on an error. */
static int copy_output(struct shell *sh, struct cove_error *err)
{
	static char buf[65536];
	ssize_t n = read(sh->fd, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n < 0) {
		snprintf(err->message, sizeof(err->message), "reading from coved: %s", strerror(errno));
		return -1;
	}
	if (n > 0)
		(void)io_write_all(STDOUT_FILENO, buf, (size_t)n); /* a closed stdout only loses output */
	return n == 0;
}

/* Until the terminal's end: its status to exit with. */
static int shell_loop(struct shell *sh)
{
	struct cove_error err = { 0 };
	bool shut = false;
	int r = 0;
	while (r == 0) {
		bool pending = sh->in_len > 0;
		if (!sh->stdin_open && !pending && !shut) {
			/* The end of our stdin: coved types the terminal's EOF. */
			(void)shutdown(sh->fd, SHUT_WR);
			shut = true;
		}
		struct pollfd pfd[3] = {
			{ .fd = sh->fd, .events = POLLIN | (pending ? POLLOUT : 0) },
			{ .fd = winch_pipe[0], .events = POLLIN },
			{ .fd = sh->stdin_open && !pending ? STDIN_FILENO : -1, .events = POLLIN },
		};
		if (poll(pfd, 3, -1) < 0) {
			if (errno == EINTR)
				continue; /* a SIGWINCH: its pipe is readable now */
			snprintf(err.message, sizeof(err.message), "poll: %s", strerror(errno));
			r = -1;
			break;
		}
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))
			r = copy_output(sh, &err);
		if (r == 0 && (pfd[0].revents & POLLOUT))
			send_stdin(sh);
		if (r == 0 && pfd[1].revents)
			r = send_resize(sh, &err);
		if (r == 0 && pfd[2].revents)
			read_stdin(sh);
	}
	restore_terminal(); /* before any message: a raw terminal shows no line ends */
	struct cove_exec_result res;
	if (r < 0 || cove_proc_wait(sh->cli->client, sh->id, sh->proc, &res, &err) < 0)
		return cli_exec_error_status(&err);
	return cli_exit_status(&res);
}

/* The terminal started, and its connection: *ret_status on failure. */
static int shell_start(struct shell *sh, const char *request_json, int *ret_status)
{
	struct cove_error err = { 0 };
	int pid;
	if (cove_proc_start(sh->cli->client, sh->id, request_json, &pid, &err) < 0) {
		*ret_status = cli_exec_error_status(&err);
		return -1;
	}
	snprintf(sh->proc, sizeof(sh->proc), "%d", pid);
	if (cove_proc_attach_tty(sh->cli->client, sh->id, sh->proc, true, true, &sh->fd, &err) < 0) {
		struct cove_error ignored = { 0 };
		/* Without its client the terminal would run on, unseen. */
		(void)cove_proc_signal(sh->cli->client, sh->id, sh->proc, "KILL", true, &ignored);
		*ret_status = cli_exec_error_status(&err);
		return -1;
	}
	if (sh->stdin_is_tty && enter_raw_mode() < 0)
		fprintf(stderr, "cove: cannot put the terminal in raw mode: %s\n", strerror(errno));
	return 0;
}

/* A running terminal's connection (--attach), not as its foreground
 * client: leaving keeps it running. *ret_status on failure. */
static int shell_attach(struct shell *sh, const char *proc, int *ret_status)
{
	struct cove_error err = { 0 };
	snprintf(sh->proc, sizeof(sh->proc), "%s", proc);
	if (cove_proc_attach_tty(sh->cli->client, sh->id, sh->proc, true, false, &sh->fd, &err) < 0) {
		*ret_status = cli_exec_error_status(&err);
		return -1;
	}
	if (sh->stdin_is_tty && enter_raw_mode() < 0)
		fprintf(stderr, "cove: cannot put the terminal in raw mode: %s\n", strerror(errno));
	return 0;
}

/* The request: cmd (default: the user's login shell, or sh), the local
 * window size and TERM. */
static json_t *shell_request(struct shell *sh, json_t *req, int argc, char **argv)
{
	json_t *cmd;
	if (argc > 0) {
		cmd = json_array();
		for (int i = 0; i < argc; i++)
			json_array_append_new(cmd, json_string(argv[i]));
	} else {
		/* SHELL is the user's, from the sandbox's /etc/passwd. */
		cmd = json_string("[ -x \"$SHELL\" ] && exec \"$SHELL\" -l; exec /bin/sh -l");
	}
	json_object_set_new(req, "cmd", cmd);
	json_object_set_new(req, "tty", json_true());
	struct winsize ws;
	if (window_size(sh->winsize_fd, &ws)) {
		json_object_set_new(req, "rows", json_integer(ws.ws_row));
		json_object_set_new(req, "cols", json_integer(ws.ws_col));
	}
	const char *term = getenv("TERM");
	json_t *env = json_object_get(req, "env");
	if (term && *term && !json_object_get(env, "TERM")) {
		if (!env)
			json_object_set_new(req, "env", env = json_object());
		json_object_set_new(env, "TERM", json_string(term));
	}
	return req;
}

static int parse_shell(struct cli *cli, json_t *req, const char **attach)
{
	const char *v;
	int c;
	while ((c = cli_next_opt(cli, &v)) != -1) {
		if (c == 'a')
			*attach = v;
		else if (c == 'e' && cli_add_env(req, v) < 0)
			return cli_usage_error("shell", "bad --env '%s' (want NAME=VALUE)", v), -1;
		else if (c == 'w')
			json_object_set_new(req, "cwd", json_string(v));
		else if (c == 'u')
			json_object_set_new(req, "user", json_string(v));
	}
	return 0;
}

int cmd_shell(struct cli *cli, int argc, char **argv)
{
	json_t *req = json_object();
	const char *attach = NULL;
	int i = parse_shell(cli, req, &attach) < 0 ? -1 : 1;
	if (i >= 0 && i >= argc) {
		cli_usage_error("shell", "no sandbox ID");
		i = -1;
	}
	if (i < 0) {
		json_decref(req);
		return 2;
	}
	struct shell sh = {
		.cli = cli, .id = argv[i++], .stdin_is_tty = isatty(STDIN_FILENO), .fd = -1, .stdin_open = true
	};
	sh.winsize_fd = sh.stdin_is_tty ? STDIN_FILENO : isatty(STDOUT_FILENO) ? STDOUT_FILENO : -1;
	char *body = json_dumps(shell_request(&sh, req, argc - i, argv + i), JSON_COMPACT);
	json_decref(req);
	int r;
	if (install_signals() < 0) {
		fprintf(stderr, "cove: signals: %s\n", strerror(errno));
		r = 125;
	} else if (cli_connect(cli) < 0) {
		r = 125;
	} else if (attach ? shell_attach(&sh, attach, &r) == 0 : shell_start(&sh, body, &r) == 0) {
		r = shell_loop(&sh);
	}
	restore_terminal();
	if (sh.fd >= 0)
		close(sh.fd);
	free(body);
	return r;
}

/* The cove CLI: one file per group of verbs, all built on libcove. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#include "cove.h"

/* An option of a command: key is what cli_next_opt returns (the short
 * letter when it has one, by convention), letter the "-x" form (0: none). */
struct cli_opt {
	int key;
	char letter;
	const char *name; /* the --long form, without "--" */
	const char *arg;  /* the value's name in the usage ("SIZE"); NULL for a flag */
	const char *help;
};

/* The keys of the global options (cli_global_opts), taken by main. */
enum { CLI_G_SOCKET = 1000, CLI_G_DATA, CLI_G_JSON, CLI_G_HOST, CLI_G_TOKEN_FILE, CLI_G_HELP };
extern const struct cli_opt cli_global_opts[];

struct cli;
/* A command of the table in commands.c: its --help, its man page section
 * and its option parsing all come from here. */
struct cli_cmd {
	const char *name; /* "exec", "snapshot rm" */
	int (*fn)(struct cli *cli, int argc, char **argv);
	const char *synopsis; /* after "cove NAME " */
	const char *summary;  /* what it does, a sentence or a few */
	const struct cli_opt *opts;
	/* For the verbs that run a command in the sandbox: the operands before
	 * that command (exec: 1, the ID); -1 for the others. */
	int fixed;
	const char *example; /* shell lines, each run by the tests (test_cli_help) */
};
extern const struct cli_cmd cli_commands[];
extern const size_t cli_n_commands;

struct cli_optval {
	int key;
	const char *value; /* NULL for a flag */
};

struct cli {
	const char *socket_path;
	const char *data_dir; /* for a coved that the CLI starts itself */
	bool json;
	struct cove *client;
	const char *host;        /* "ADDR:PORT" of coved's TCP listener, instead of the socket */
	const char *token;       /* the API token, with host */
	struct cli_optval *opts; /* the options given to the command, in order */
	int n_opts, next_opt;
};

/* Parse argv (argv[0] the command's name) by cmd's table and the global
 * one: options into cli->opts, and argv rewritten in place as argv[0], the
 * operands, then the sandbox's command (for cmd->fixed >= 0), NULL-ended;
 * their count to *ret_argc. 0, or 2 after printing a usage error that
 * names the bad option and the command's usage. */
int cli_parse_args(struct cli *cli, const struct cli_cmd *cmd, int argc, char **argv, int *ret_argc);
/* The next option given, in order: its key, and its value (NULL for a
 * flag) in *value; -1 after the last. Global options are skipped. */
int cli_next_opt(struct cli *cli, const char **value);
/* The command named name ("snapshot rm"), or NULL. */
const struct cli_cmd *cli_find_command(const char *name);
/* cove COMMAND --help: the command's usage, options and example. */
void cli_print_help(const struct cli_cmd *cmd, FILE *f);
/* cove --help: every command, one line each. */
void cli_print_usage(FILE *f);
/* cove files: its commands' usage lines. */
void cli_print_files_usage(FILE *f);
/* cove help --man: the manual page cove(1), as roff. */
void cli_print_man(FILE *f);

/* Connect, starting coved when nothing answers on the socket. Prints a
 * one-line error and returns -1 on failure. */
int cli_connect(struct cli *cli);
/* Print "cove: <message>" for err and return exit status 1. */
int cli_fail(const struct cove_error *err);
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The sandbox options of create and run (commands.c's spec_opts) given,
 * into spec; 0, or -1 after a usage error. Others are skipped. */
int cli_parse_spec(struct cli *cli, const char *verb, json_t *spec);
int cmd_run(struct cli *cli, int argc, char **argv);
int cmd_create(struct cli *cli, int argc, char **argv);
int cmd_timeout(struct cli *cli, int argc, char **argv);
int cmd_exec(struct cli *cli, int argc, char **argv);
int cmd_ls(struct cli *cli, int argc, char **argv);
int cmd_info(struct cli *cli, int argc, char **argv);
int cmd_rm(struct cli *cli, int argc, char **argv);
/* cmd_network.c; cli_add_list appends value to the array obj[key]. */
int cmd_network(struct cli *cli, int argc, char **argv);
int cli_add_list(json_t *obj, const char *key, const char *value);
int cmd_cp(struct cli *cli, int argc, char **argv);
/* cmd_port.c */
int cmd_port(struct cli *cli, int argc, char **argv);
int cmd_port_ls(struct cli *cli, int argc, char **argv);
int cmd_port_rm(struct cli *cli, int argc, char **argv);
int cmd_port_forward(struct cli *cli, int argc, char **argv);
int cmd_snapshot(struct cli *cli, int argc, char **argv);
int cmd_snapshot_rm(struct cli *cli, int argc, char **argv);
int cmd_snapshots(struct cli *cli, int argc, char **argv);
int cmd_restore(struct cli *cli, int argc, char **argv);
int cmd_fork(struct cli *cli, int argc, char **argv);
int cmd_lock(struct cli *cli, int argc, char **argv);
int cmd_ps(struct cli *cli, int argc, char **argv);
int cmd_attach(struct cli *cli, int argc, char **argv);
int cmd_kill(struct cli *cli, int argc, char **argv);
int cmd_wait(struct cli *cli, int argc, char **argv);
int cmd_shell(struct cli *cli, int argc, char **argv);
int cmd_files(struct cli *cli, int argc, char **argv);
int cmd_checkpoint(struct cli *cli, int argc, char **argv);
int cmd_history(struct cli *cli, int argc, char **argv);
int cmd_rollback(struct cli *cli, int argc, char **argv);
int cmd_branch(struct cli *cli, int argc, char **argv);
int cmd_files_watch(struct cli *cli, int argc, char **argv);
int cmd_help(struct cli *cli, int argc, char **argv);
/* cmd_template.c */
int cmd_template_create(struct cli *cli, int argc, char **argv);
int cmd_template_ls(struct cli *cli, int argc, char **argv);
int cmd_template_info(struct cli *cli, int argc, char **argv);
int cmd_template_rm(struct cli *cli, int argc, char **argv);
/* cmd_image.c */
int cmd_image_import(struct cli *cli, int argc, char **argv);
int cmd_image_pull(struct cli *cli, int argc, char **argv);
int cmd_image_ls(struct cli *cli, int argc, char **argv);
int cmd_image_inspect(struct cli *cli, int argc, char **argv);
int cmd_image_rm(struct cli *cli, int argc, char **argv);
int cmd_image_prune(struct cli *cli, int argc, char **argv);
/* cmd_export.c: export, and snapshot/restore --portable */
int cmd_export(struct cli *cli, int argc, char **argv);
int cmd_snapshot_portable(struct cli *cli, int argc, char **argv);
int cmd_restore_portable(struct cli *cli, int argc, char **argv);

/* table.c: aligned tables for ls, snapshots, history, ps. */
struct table {
	size_t cols, rows, cap;
	char **cells; /* rows x cols, copies; the first row is the header */
	bool *right;  /* per column: right-aligned (a header given as ">NAME") */
};
void table_init(struct table *t, size_t cols, const char *const *headers);
void table_row(struct table *t, ...); /* cols strings (NULL: empty) */
void table_row_v(struct table *t, const char *const *cells);
void table_print(struct table *t, FILE *f);
void table_free(struct table *t);
/* s, or "-" for a cell with nothing in it (NULL or ""). */
const char *or_dash(const char *s);
/* The time now, unix ms, for ages. */
long long cli_now_ms(void);

/* progress.c: a copy's progress bar on stderr, when it is a terminal and
 * the copy takes more than a second. total 0: unknown (bytes and rate). */
struct progress {
	bool on, shown;
	const char *what;
	unsigned long long total, done;
	double start, last_draw;
};
void progress_start(struct progress *p, const char *what, unsigned long long total);
void progress_set(struct progress *p, unsigned long long done);
void progress_add(struct progress *p, unsigned long long n);
/* The last state and a newline, if anything was drawn. */
void progress_end(struct progress *p);

/* cmd_files.c: a temporary file nobody else can open (-1, errno); src's
 * tree as a tar into fd, names relative to src, under prefix when not NULL
 * (0, or -1 after a message). */
int cli_temp_file(void);
int cli_tar_tree(const char *src, const char *prefix, int fd);

/* Run a command in sandbox id, streaming output to our stdout/stderr.
 * Returns the exit status to exit with (the command's, 128+signal, or
 * 124 on timeout, 125 for a cove error, 126/127 when it could not run). */
int cli_exec_stream(struct cli *cli, const char *id, const char *request_json);
/* Start a background process (the request has "background": true), print
 * its pid; the status to exit with. */
int cli_exec_detached(struct cli *cli, const char *id, const char *request_json);
/* The status to exit with for a process's end: its exit code, 128+signal,
 * or 124 (with a message) when it timed out. */
int cli_exit_status(const struct cove_exec_result *res);
/* Print err; the status to exit with for an exec that failed: 127 when the
 * command was not found, 126 when it could not be run, else 125. */
int cli_exec_error_status(const struct cove_error *err);

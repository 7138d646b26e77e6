/* The cove CLI: one file per group of verbs, all built on libcove. */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "cove.h"

struct cli {
	const char *socket_path;
	const char *data_dir; /* for a coved that the CLI starts itself */
	bool json;
	struct cove *client;
	const char *host;  /* "ADDR:PORT" of coved's TCP listener, instead of the socket */
	const char *token; /* the API token, with host */
};

/* Connect, starting coved when nothing answers on the socket. Prints a
 * one-line error and returns -1 on failure. */
int cli_connect(struct cli *cli);
/* Print "cove: <message>" for err and return exit status 1. */
int cli_fail(const struct cove_error *err);
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

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
int cmd_snapshot(struct cli *cli, int argc, char **argv);
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
/* cmd_export.c: export, and snapshot/restore --portable */
int cmd_export(struct cli *cli, int argc, char **argv);
int cmd_snapshot_portable(struct cli *cli, int argc, char **argv);
int cmd_restore_portable(struct cli *cli, int argc, char **argv);

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

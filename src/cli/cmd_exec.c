/* cove exec, and the streaming shared with cove run. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/encoding.h"
#include "common/io.h"

#define MAX_STDIN (64u << 20)

int cli_add_env(json_t *spec, const char *kv);

static void on_output(void *arg, int fd, const char *buf, size_t len)
{
	(void)io_write_all(fd, buf, len); /* a closed stdout only loses output */
}

int cli_exec_stream(struct cli *cli, const char *id, const char *request_json)
{
	struct cove_exec_events ev = { .on_output = on_output };
	struct cove_exec_result res;
	struct cove_error err = { 0 };
	if (cove_exec(cli->client, id, request_json, &ev, &res, &err) < 0)
		return cli_exec_error_status(&err);
	return cli_exit_status(&res);
}

/* All of our stdin, base64-encoded, or NULL (too large, unreadable, or out
 * of memory). */
static char *read_stdin_b64(void)
{
	size_t cap = 65536, len = 0;
	unsigned char *buf = malloc(cap);
	ssize_t n = 0;
	while (buf && (n = read(0, buf + len, cap - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (len + n == cap && cap >= MAX_STDIN)) {
			free(buf);
			return NULL;
		}
		len += n;
		if (len == cap) {
			unsigned char *bigger = realloc(buf, cap * 2);
			if (!bigger)
				free(buf);
			buf = bigger;
			cap *= 2;
		}
	}
	char *b64 = buf ? malloc(base64_encoded_len(len) + 1) : NULL;
	if (b64)
		base64_encode(buf, len, b64);
	free(buf);
	return b64;
}

static int parse_exec(struct cli *cli, json_t *req)
{
	int c;
	const char *optarg;
	while ((c = cli_next_opt(cli, &optarg)) != -1) {
		char *end;
		switch (c) {
		case 'e':
			if (cli_add_env(req, optarg) < 0)
				return cli_usage_error("exec", "bad --env '%s' (want NAME=VALUE)", optarg), -1;
			break;
		case 'w':
			json_object_set_new(req, "cwd", json_string(optarg));
			break;
		case 'u':
			json_object_set_new(req, "user", json_string(optarg));
			break;
		case 't': {
			double t = strtod(optarg, &end);
			if (*end || t <= 0)
				return cli_usage_error("exec", "bad --timeout '%s' (seconds)", optarg), -1;
			json_object_set_new(req, "timeout", json_real(t));
			break;
		}
		case 'i': {
			char *b64 = read_stdin_b64();
			if (!b64)
				return cli_usage_error("exec", "stdin is larger than %u bytes", MAX_STDIN), -1;
			json_object_set_new(req, "stdin_b64", json_string(b64));
			free(b64);
			break;
		}
		case 'd':
			json_object_set_new(req, "background", json_true());
			break;
		case 'T':
			json_object_set_new(req, "tag", json_string(optarg));
			break;
		}
	}
	return 0;
}

int cmd_exec(struct cli *cli, int argc, char **argv)
{
	json_t *req = json_object();
	int i = 1, r = parse_exec(cli, req) < 0 ? 2 : 0;
	if (r == 0 && i >= argc)
		r = cli_usage_error("exec", "no sandbox ID");
	const char *id = r == 0 ? argv[i++] : NULL;
	if (r == 0 && i >= argc)
		r = cli_usage_error("exec", "no command given");
	if (r == 0) {
		json_t *cmd = json_array();
		for (; i < argc; i++)
			json_array_append_new(cmd, json_string(argv[i]));
		json_object_set_new(req, "cmd", cmd);
		char *body = json_dumps(req, JSON_COMPACT);
		if (cli_connect(cli) < 0)
			r = 1;
		else if (json_is_true(json_object_get(req, "background")))
			r = cli_exec_detached(cli, id, body);
		else
			r = cli_exec_stream(cli, id, body);
		free(body);
	}
	json_decref(req);
	return r;
}

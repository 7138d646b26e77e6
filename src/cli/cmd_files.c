/* cove cp: copy one file between the host and a sandbox.
 *
 *   cove cp SRC ID:DST      host file (or - for stdin) into the sandbox
 *   cove cp ID:SRC DST      sandbox file to the host (or - for stdout)
 *
 * The sandbox's path is resolved inside the sandbox by the daemon; the whole
 * file passes through memory (bounded by the API's body and response limits). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/io.h"
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/parse.h"

#define CP_MAX_FILE (64u << 20)

/* "sb_xxxxxxxxxxxx:/path" into id and *path; 0, or -1 if arg is a host path. */
static int split_remote(const char *arg, char id[16], const char **path)
{
	const char *colon = strchr(arg, ':');
	if (!colon || colon - arg != 15)
		return -1;
	memcpy(id, arg, 15);
	id[15] = '\0';
	if (!sandbox_id_valid(id))
		return -1;
	*path = colon + 1;
	return 0;
}

static int read_all(int fd, char **ret, size_t *ret_len)
{
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap);
	for (ssize_t n = 1; buf && n > 0;) {
		if (len == cap && (cap *= 2) > CP_MAX_FILE) {
			free(buf);
			errno = EFBIG;
			return -1;
		}
		char *grown = realloc(buf, cap);
		if (!grown)
			break;
		buf = grown;
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			n = 1;
		else if (n < 0) {
			free(buf);
			return -1;
		} else
			len += (size_t)n;
	}
	if (!buf)
		return -1;
	*ret = buf;
	*ret_len = len;
	return 0;
}

static int upload(struct cli *cli, const char *src, const char *id, const char *path)
{
	struct cove_error err = { 0 };
	_cleanup_close_ int fd = strcmp(src, "-") == 0 ? dup(0) : open(src, O_RDONLY | O_CLOEXEC);
	_cleanup_free_ char *data = NULL;
	size_t len;
	if (fd < 0 || read_all(fd, &data, &len) < 0) {
		fprintf(stderr, "cove cp: %s: %s\n", src, strerror(errno));
		return 1;
	}
	if (cli_connect(cli) < 0)
		return 1;
	if (cove_write_file(cli->client, id, path, data, len, NULL, &err) < 0)
		return cli_fail(&err);
	return 0;
}

static int download(struct cli *cli, const char *id, const char *path, const char *dst)
{
	struct cove_error err = { 0 };
	_cleanup_free_ char *data = NULL;
	size_t len;
	if (cli_connect(cli) < 0)
		return 1;
	if (cove_read_file(cli->client, id, path, &data, &len, &err) < 0)
		return cli_fail(&err);
	_cleanup_close_ int fd =
		strcmp(dst, "-") == 0 ? dup(1) : open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || io_write_all(fd, data, len) < 0) {
		fprintf(stderr, "cove cp: %s: %s\n", dst, strerror(errno));
		return 1;
	}
	return 0;
}

int cmd_cp(struct cli *cli, int argc, char **argv)
{
	char id[16];
	const char *path;
	if (argc != 3)
		return cli_usage_error("cp", "expected SRC ID:DST or ID:SRC DST");
	bool src_remote = split_remote(argv[1], id, &path) == 0;
	bool dst_remote = split_remote(argv[2], id, &path) == 0;
	if (src_remote != dst_remote)
		(void)split_remote(argv[src_remote ? 1 : 2], id, &path);
	if (dst_remote && !src_remote)
		return upload(cli, argv[1], id, path);
	if (src_remote && !dst_remote)
		return download(cli, id, path, argv[2]);
	return cli_usage_error("cp", "exactly one of SRC and DST must be ID:PATH");
}

/* cove files SUBCOMMAND ... */
int cmd_files(struct cli *cli, int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "watch") == 0)
		return cmd_files_watch(cli, argc - 1, argv + 1);
	return cli_usage_error("files", "expected a subcommand: watch");
}

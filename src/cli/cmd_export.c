/* cove export, and the portable snapshot's verbs:
 *
 *   cove export ID [-o FILE] [--format tar|zip] [--path DIR]
 *
 * Without --path, what the sandbox changed over its image (the files, and
 * .cove-manifest.json listing the deletions); with it, that folder.
 *   cove snapshot --portable ID > s.json
 *   cove restore --portable s.json        a new sandbox with those files, its ID printed
 *
 * The format follows -o's extension (.zip, .tar, .json) unless --format
 * says; no -o, or -o -, writes to stdout. A file left half-written by a
 * failed export is removed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/io.h"

struct out {
	int fd;
	struct progress progress;
};

static int write_out(void *arg, const char *buf, size_t len)
{
	struct out *o = arg;
	progress_add(&o->progress, len);
	return io_write_all(o->fd, buf, len) < 0 ? -1 : 0;
}

static const char *format_of(const char *file)
{
	const char *dot = file ? strrchr(file, '.') : NULL;
	if (dot && strcmp(dot, ".zip") == 0)
		return "zip";
	if (dot && strcmp(dot, ".json") == 0)
		return "json";
	return "tar";
}

/* An export of the changes that holds nothing, or a portable snapshot
 * that had to leave deletions out, says so. */
static void say_counts(const struct cove_export_info *info, const char *format)
{
	bool json = strcmp(format, "json") == 0;
	if (info->entries == 0 && (info->deleted == 0 || json))
		fprintf(stderr, "cove: the export is empty: the sandbox changed no file of its image\n");
	if (json && info->deleted > 0)
		fprintf(stderr, "cove: %lld deletion(s) left out: a portable snapshot (version 1) holds files only\n",
			(long long)info->deleted);
}

/* Download id's folder as format into file (NULL or "-": stdout). */
static int export_to(struct cli *cli, const char *id, const char *path, const char *format, const char *file)
{
	struct cove_error err = { 0 };
	bool to_stdout = !file || strcmp(file, "-") == 0;
	int fd = to_stdout ? 1 : open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "cove: %s: %s\n", file, strerror(errno));
		return 1;
	}
	struct out o = { .fd = fd };
	struct cove_export_info info = { -1, -1 };
	progress_start(&o.progress, to_stdout ? "export" : file, 0);
	int r = cli_connect(cli) < 0 ? 1
		: cove_export_counted(cli->client, id, path, format, write_out, &o, &info, &err) < 0 ? cli_fail(&err)
												     : 0;
	progress_end(&o.progress);
	say_counts(&info, format);
	if (!to_stdout && (close(fd) < 0 || r != 0) && unlink(file) == 0 && r == 0)
		r = 1;
	return r;
}

int cmd_export(struct cli *cli, int argc, char **argv)
{
	const char *file = NULL, *format = NULL, *path = NULL, *v;
	int c;
	while ((c = cli_next_opt(cli, &v)) != -1) {
		switch (c) {
		case 'o':
			file = v;
			break;
		case 'f':
			if (strcmp(v, "tar") != 0 && strcmp(v, "zip") != 0)
				return cli_usage_error("export", "bad --format '%s' (tar or zip)", v);
			format = v;
			break;
		case 'p':
			path = v;
			break;
		}
	}
	if (argc != 2)
		return cli_usage_error("export", "want exactly one sandbox ID");
	return export_to(cli, argv[1], path, format ? format : format_of(file), file);
}

/* snapshot --portable [--path DIR] ID: the JSON to stdout (the options
 * are cove snapshot's). */
int cmd_snapshot_portable(struct cli *cli, int argc, char **argv)
{
	const char *path = NULL, *v;
	int c;
	cli->next_opt = 0;
	while ((c = cli_next_opt(cli, &v)) != -1)
		if (c == 'p')
			path = v;
		else if (c == 'n')
			return cli_usage_error("snapshot", "--portable takes no --name");
	if (argc != 2)
		return cli_usage_error("snapshot", "want exactly one sandbox ID");
	return export_to(cli, argv[1], path, "json", NULL);
}

/* A file's (or stdin's) bytes, whole: coved buffers the body anyway. */
static char *read_whole(const char *file, size_t *ret_len)
{
	FILE *f = strcmp(file, "-") == 0 ? stdin : fopen(file, "rbe");
	char *buf = NULL;
	size_t cap = 0;
	if (!f)
		return NULL;
	FILE *mem = open_memstream(&buf, &cap);
	char chunk[65536];
	size_t n;
	bool ok = mem != NULL;
	while (ok && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		ok = fwrite(chunk, 1, n, mem) == n;
	ok = ok && !ferror(f);
	if (mem && fclose(mem) != 0)
		ok = false;
	if (f != stdin)
		fclose(f);
	if (!ok) {
		free(buf);
		return NULL;
	}
	*ret_len = cap;
	return buf;
}

/* restore --portable [--name N] [--path DIR] FILE: a new sandbox (of the
 * default image) with FILE's files; deleted again if they cannot be made. */
int cmd_restore_portable(struct cli *cli, int argc, char **argv)
{
	const char *path = NULL, *name = NULL, *v;
	int c;
	cli->next_opt = 0;
	while ((c = cli_next_opt(cli, &v)) != -1)
		if (c == 'D')
			path = v;
		else if (c == 'n')
			name = v;
		else if (c != 'P')
			return cli_usage_error("restore", "--portable takes only --name and --path");
	if (argc != 2)
		return cli_usage_error("restore", "want exactly one portable snapshot file (- for stdin)");
	const char *file = argv[1];
	size_t len;
	char *doc = read_whole(file, &len), id[16], spec[256];
	if (!doc) {
		fprintf(stderr, "cove: %s: %s\n", file, strerror(errno ? errno : EIO));
		return 1;
	}
	struct cove_error err = { 0 }, ignored = { 0 };
	snprintf(spec, sizeof(spec), name ? "{\"name\": \"%.200s\"}" : "{}", name);
	int r = cli_connect(cli) < 0 ? 1 : 0;
	if (r == 0 && cove_create(cli->client, spec, id, &err) < 0)
		r = cli_fail(&err);
	else if (r == 0 && cove_import_portable(cli->client, id, path, doc, len, NULL, &err) < 0) {
		r = cli_fail(&err);
		(void)cove_delete(cli->client, id, &ignored);
	}
	if (r == 0)
		printf("%s\n", id);
	free(doc);
	return r;
}

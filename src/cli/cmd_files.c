/* cove cp and cove files: the Files API from the command line.
 *
 *   cove cp SRC ID:DST      a host file or folder into the sandbox (- : a file from stdin)
 *   cove cp ID:SRC DST      a sandbox file or folder to the host (- : to stdout, a folder as a tar)
 *   cove files ls [-l] [-d DEPTH] ID PATH
 *   cove files cat ID PATH...        cove files rm [-r] ID PATH...
 *   cove files mkdir ID PATH...      cove files mv [-f] ID FROM TO
 *   cove files chmod ID MODE PATH...
 *
 * cp is docker cp's: a file or folder copied onto an existing folder goes
 * into it under its own name, else it becomes the destination; SRC/. copies
 * what a folder holds. The sandbox's paths are resolved inside the sandbox
 * by the daemon. Folders travel as tar (libarchive) through a temporary
 * file: built there and streamed from it, or received there and
 * extracted from it. The sandbox chose what is in a downloaded tar, so it
 * is extracted as bsdtar does by default and more: no '..', no absolute
 * name, nothing through a symlink, no owner, and no set-id bit. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/io.h"
#include "common/parse.h"

#define CP_BUF 65536

/* libarchive's tar writers call this one function of the file that also
 * registers every format by name; linked statically, that file would pull
 * in the xar writer, libxml2 and ICU (C++). Defined here, the same thing,
 * it is not. A libarchive that moved it would fail to link, not misbehave. */
int __archive_write_entry_filetype_unsupported(struct archive *a, struct archive_entry *e, const char *format);
int __archive_write_entry_filetype_unsupported(struct archive *a, struct archive_entry *e, const char *format)
{
	archive_set_error(a, EILSEQ, "%s: %s format cannot archive this type of file", archive_entry_pathname(e),
			  format);
	return ARCHIVE_WARN;
}

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

static int fail_errno(const char *what)
{
	fprintf(stderr, "cove cp: %s: %s\n", what, strerror(errno));
	return 1;
}

/* The last name of a path, without trailing slashes ("a/b/" -> "b"). */
static void last_name(const char *path, char *out, size_t cap)
{
	snprintf(out, cap, "%s", path);
	size_t n = strlen(out);
	while (n > 1 && out[n - 1] == '/')
		out[--n] = '\0';
	const char *slash = strrchr(out, '/');
	if (slash && slash[1])
		memmove(out, slash + 1, strlen(slash));
}

/* "dir/." (or "dir/./"): the folder's contents, not the folder. */
static bool means_contents(const char *path)
{
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	return (n == 1 && path[0] == '.') || (n >= 2 && path[n - 1] == '.' && path[n - 2] == '/');
}

/* A sandbox path's type ("file", "dir", ...) into type, or "" when it is
 * not there (or the sandbox is not: the copy itself then says so), and its
 * size into *size (if not NULL). -1 on any other error (printed). */
static int remote_stat(struct cli *cli, const char *id, const char *path, char *type, size_t cap,
		       unsigned long long *size)
{
	struct cove_error err = { 0 };
	char *body = NULL;
	type[0] = '\0';
	if (size)
		*size = 0;
	if (cove_stat(cli->client, id, path, &body, &err) < 0) {
		if (err.status == 404)
			return 0;
		cli_fail(&err);
		return -1;
	}
	json_t *j = json_loads(body, 0, NULL);
	snprintf(type, cap, "%s", json_string_value(json_object_get(j, "type")) ?: "");
	if (size)
		*size = (unsigned long long)json_integer_value(json_object_get(j, "size"));
	json_decref(j);
	free(body);
	return 0;
}

/* A temporary file nobody else can open (unnamed when the file system
 * allows). */
int cli_temp_file(void)
{
	const char *dir = getenv("TMPDIR");
	if (!dir || !*dir)
		dir = "/tmp";
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
		return fd;
	char tmpl[4200];
	snprintf(tmpl, sizeof(tmpl), "%s/cove-cp-XXXXXX", dir);
	fd = mkostemp(tmpl, O_CLOEXEC);
	if (fd >= 0)
		unlink(tmpl);
	return fd;
}

/* ---- a host folder into a tar ---- */

static int copy_data(struct archive *in, struct archive *out)
{
	static char buf[CP_BUF];
	la_ssize_t n;
	while ((n = archive_read_data(in, buf, sizeof(buf))) > 0)
		if (archive_write_data(out, buf, (size_t)n) != n)
			return -1;
	return n < 0 ? -1 : 0;
}

/* src's tree as a tar into fd, names relative to src, under prefix when
 * not NULL (src itself is then the entry prefix). Symlinks stay symlinks. */
int cli_tar_tree(const char *src, const char *prefix, int fd)
{
	struct archive *disk = archive_read_disk_new(), *out = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	char name[8192];
	int r = disk && out && e ? 0 : -1;
	if (r == 0 && (archive_read_disk_set_symlink_physical(disk) != ARCHIVE_OK ||
		       archive_read_disk_set_behavior(disk, ARCHIVE_READDISK_NO_XATTR | ARCHIVE_READDISK_NO_ACL |
								    ARCHIVE_READDISK_NO_FFLAGS) != ARCHIVE_OK ||
		       archive_write_set_format_pax_restricted(out) != ARCHIVE_OK ||
		       archive_write_open_fd(out, fd) != ARCHIVE_OK || archive_read_disk_open(disk, src) != ARCHIVE_OK))
		r = -1;
	size_t skip = strlen(src);
	while (r == 0) {
		int h = archive_read_next_header2(disk, e);
		if (h == ARCHIVE_EOF)
			break;
		if (h < ARCHIVE_WARN || archive_read_disk_descend(disk) < ARCHIVE_WARN) {
			r = -1;
			break;
		}
		const char *path = archive_entry_pathname(e), *rel = path + skip;
		rel += *rel == '/';
		if (!*rel && !prefix)
			continue; /* the folder itself: its contents are what goes */
		snprintf(name, sizeof(name), "%s%s%s", prefix ? prefix : "", prefix && *rel ? "/" : "", rel);
		archive_entry_copy_pathname(e, name);
		if (archive_write_header(out, e) < ARCHIVE_WARN ||
		    (archive_entry_filetype(e) == AE_IFREG && archive_entry_size(e) > 0 && copy_data(disk, out) < 0))
			r = -1;
	}
	if (r < 0)
		fprintf(stderr, "cove cp: %s: %s\n", src,
			archive_error_string(disk) ?: archive_error_string(out) ?: "cannot read");
	if (out && archive_write_close(out) != ARCHIVE_OK && r == 0)
		r = -1;
	archive_entry_free(e);
	archive_read_free(disk);
	archive_write_free(out);
	return r;
}

static void on_progress(void *arg, unsigned long long sent)
{
	progress_set(arg, sent);
}

/* cove cp HOSTDIR ID:DST */
static int upload_dir(struct cli *cli, const char *src, const char *id, const char *dst)
{
	struct cove_error err = { 0 };
	char type[16], base[4096], root[4096];
	snprintf(root, sizeof(root), "%s", src);
	for (size_t n = strlen(root); n > 1 && root[n - 1] == '/';)
		root[--n] = '\0';
	last_name(root, base, sizeof(base));
	if (remote_stat(cli, id, dst, type, sizeof(type), NULL) < 0)
		return 1;
	if (type[0] && strcmp(type, "dir") != 0) {
		fprintf(stderr, "cove cp: %s:%s is not a directory\n", id, dst);
		return 1;
	}
	/* Onto an existing folder: inside it, under its own name. */
	const char *prefix = type[0] && !means_contents(src) ? base : NULL;
	_cleanup_close_ int fd = cli_temp_file();
	if (fd < 0)
		return fail_errno("temporary file");
	if (cli_tar_tree(root, prefix, fd) < 0)
		return 1;
	off_t size = lseek(fd, 0, SEEK_END);
	if (size < 0 || lseek(fd, 0, SEEK_SET) < 0)
		return fail_errno("temporary file");
	struct progress pr;
	progress_start(&pr, base, (unsigned long long)size);
	struct cove_source body = { fd, size, on_progress, &pr };
	int r = cove_write_tar_from(cli->client, id, dst, &body, NULL, &err) < 0 ? cli_fail(&err) : 0;
	progress_end(&pr);
	return r;
}

/* How much of fd is left to read: what a regular file holds past its
 * offset, or -1 (a pipe, a terminal: read until EOF). */
static long long length_left(int fd)
{
	struct stat st;
	off_t at = lseek(fd, 0, SEEK_CUR);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || at < 0)
		return -1;
	return st.st_size > at ? (long long)(st.st_size - at) : 0;
}

/* cove cp FILE ID:DST: streamed from the file as it goes (a pipe too), so
 * that a file of any size takes a few hundred KiB of memory. */
static int upload(struct cli *cli, const char *src, const char *id, const char *path)
{
	struct cove_error err = { 0 };
	struct stat st;
	char type[16], target[8192], base[4096];
	bool from_stdin = strcmp(src, "-") == 0;
	if (!from_stdin && stat(src, &st) == 0 && S_ISDIR(st.st_mode))
		return cli_connect(cli) < 0 ? 1 : upload_dir(cli, src, id, path);
	_cleanup_close_ int fd = from_stdin ? dup(0) : open(src, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail_errno(src);
	if (cli_connect(cli) < 0 || remote_stat(cli, id, path, type, sizeof(type), NULL) < 0)
		return 1;
	last_name(src, base, sizeof(base));
	bool into = strcmp(type, "dir") == 0;
	if (into && from_stdin) {
		fprintf(stderr, "cove cp: %s:%s is a directory\n", id, path);
		return 1;
	}
	/* Onto an existing folder: inside it, under its own name. */
	snprintf(target, sizeof(target), "%s%s%s", path, into ? "/" : "", into ? base : "");
	struct progress pr;
	long long len = length_left(fd);
	progress_start(&pr, from_stdin ? "stdin" : base, len > 0 ? (unsigned long long)len : 0);
	struct cove_source body = { fd, len, on_progress, &pr };
	int r = cove_write_file_from(cli->client, id, target, &body, NULL, &err) < 0 ? cli_fail(&err) : 0;
	progress_end(&pr);
	return r;
}

/* ---- a tar into a host folder ---- */

static int to_fd(void *arg, const char *buf, size_t len)
{
	return io_write_all(*(int *)arg, buf, len) < 0 ? -1 : 0;
}

/* A download into fd, with its progress. */
struct sink {
	int fd;
	struct progress *progress;
};

static int to_sink(void *arg, const char *buf, size_t len)
{
	struct sink *s = arg;
	progress_add(s->progress, len);
	return io_write_all(s->fd, buf, len) < 0 ? -1 : 0;
}

/* A host file made only once the download succeeds or sends its first
 * bytes: a failed one leaves nothing behind. */
struct host_file {
	const char *path;
	int fd;
	struct progress *progress;
};

static int host_file_open(struct host_file *f)
{
	if (f->fd < 0)
		f->fd = open(f->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	return f->fd;
}

static int to_host_file(void *arg, const char *buf, size_t len)
{
	struct host_file *f = arg;
	progress_add(f->progress, len);
	return host_file_open(f) < 0 ? -1 : to_fd(&f->fd, buf, len);
}

/* The tar in fd into the current directory, as the sandbox may not choose. */
static int extract_here(int fd)
{
	static const int flags = ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_SECURE_SYMLINKS |
				 ARCHIVE_EXTRACT_SECURE_NODOTDOT | ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS;
	struct archive *in = archive_read_new(), *out = archive_write_disk_new();
	struct archive_entry *e;
	int r = in && out ? 0 : -1;
	if (r == 0 && (archive_read_support_format_tar(in) != ARCHIVE_OK ||
		       archive_write_disk_set_options(out, flags) != ARCHIVE_OK ||
		       archive_read_open_fd(in, fd, CP_BUF) != ARCHIVE_OK))
		r = -1;
	while (r == 0) {
		int h = archive_read_next_header(in, &e);
		if (h == ARCHIVE_EOF)
			break;
		if (h < ARCHIVE_WARN || archive_write_header(out, e) < ARCHIVE_WARN ||
		    (archive_entry_size(e) > 0 && copy_data(in, out) < 0) ||
		    archive_write_finish_entry(out) < ARCHIVE_WARN)
			r = -1;
	}
	if (r < 0)
		fprintf(stderr, "cove cp: extract: %s\n",
			archive_error_string(out) ?: archive_error_string(in) ?: "cannot extract");
	if (out && archive_write_close(out) != ARCHIVE_OK && r == 0)
		r = -1;
	archive_read_free(in);
	archive_write_free(out);
	return r;
}

/* cove cp ID:DIR DST */
static int download_dir(struct cli *cli, const char *id, const char *src, const char *dst)
{
	struct cove_error err = { 0 };
	struct stat st;
	char base[4096], root[8192];
	struct progress pr;
	last_name(src, base, sizeof(base));
	progress_start(&pr, base, 0);
	struct sink out = { 1, &pr };
	if (strcmp(dst, "-") == 0) {
		int r = cove_read_tar(cli->client, id, src, to_sink, &out, &err) < 0 ? cli_fail(&err) : 0;
		progress_end(&pr);
		return r;
	}
	bool exists = stat(dst, &st) == 0;
	if (exists && !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "cove cp: %s is not a directory\n", dst);
		return 1;
	}
	/* Onto an existing folder: inside it, under its own name. */
	snprintf(root, sizeof(root), "%s%s%s", dst, exists && !means_contents(src) ? "/" : "",
		 exists && !means_contents(src) ? base : "");
	_cleanup_close_ int fd = cli_temp_file();
	if (fd < 0)
		return fail_errno("temporary file");
	out.fd = fd;
	int got = cove_read_tar(cli->client, id, src, to_sink, &out, &err);
	progress_end(&pr);
	if (got < 0)
		return cli_fail(&err);
	if ((mkdir(root, 0755) < 0 && errno != EEXIST) || chdir(root) < 0)
		return fail_errno(root);
	if (lseek(fd, 0, SEEK_SET) < 0)
		return fail_errno("temporary file");
	return extract_here(fd) < 0 ? 1 : 0;
}

static int download(struct cli *cli, const char *id, const char *path, const char *dst)
{
	struct cove_error err = { 0 };
	struct stat st;
	char type[16], base[4096], target[8192];
	unsigned long long size;
	if (cli_connect(cli) < 0 || remote_stat(cli, id, path, type, sizeof(type), &size) < 0)
		return 1;
	if (strcmp(type, "dir") == 0)
		return download_dir(cli, id, path, dst);
	/* Into an existing folder: under its own name. */
	last_name(path, base, sizeof(base));
	bool into = strcmp(dst, "-") != 0 && stat(dst, &st) == 0 && S_ISDIR(st.st_mode);
	snprintf(target, sizeof(target), "%s%s%s", dst, into ? "/" : "", into ? base : "");
	struct progress pr;
	progress_start(&pr, base, size);
	struct host_file f = { target, strcmp(dst, "-") == 0 ? dup(1) : -1, &pr };
	_cleanup_close_ int fd = -1; /* closes f.fd at the end */
	int r = cove_read_file_stream(cli->client, id, path, to_host_file, &f, &err);
	progress_end(&pr);
	fd = f.fd;
	if (r < 0)
		return err.status ? cli_fail(&err) : fail_errno(target);
	return host_file_open(&f) < 0 ? fail_errno(target) : 0;
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

/* ---- cove files VERB ---- */

struct files_args {
	const char *id;
	char **paths; /* what follows ID */
	int n;
	bool flag; /* -l, -r, -f */
	int depth; /* -d */
};

static void print_entry(json_t *e, const char *base, bool long_form)
{
	const char *path = json_string_value(json_object_get(e, "path")) ?: "";
	const char *target = json_string_value(json_object_get(e, "target"));
	size_t n = strlen(base);
	while (n > 0 && base[n - 1] == '/') /* "/" and "/tmp/" as "" and "/tmp" */
		n--;
	const char *rel = strncmp(path, base, n) == 0 && path[n] == '/' ? path + n + 1 : path;
	if (!long_form) {
		printf("%s\n", rel);
		return;
	}
	char when[32];
	time_t t = (time_t)json_integer_value(json_object_get(e, "mtime"));
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M", localtime(&t));
	printf("%-7s %s %5lld %5lld %10lld %s %s%s%s\n", json_string_value(json_object_get(e, "type")) ?: "?",
	       json_string_value(json_object_get(e, "mode")) ?: "?",
	       (long long)json_integer_value(json_object_get(e, "uid")),
	       (long long)json_integer_value(json_object_get(e, "gid")),
	       (long long)json_integer_value(json_object_get(e, "size")), when, rel, target ? " -> " : "",
	       target ? target : "");
}

static int by_path(const void *a, const void *b)
{
	const char *x = json_string_value(json_object_get(*(json_t *const *)a, "path"));
	const char *y = json_string_value(json_object_get(*(json_t *const *)b, "path"));
	return strcmp(x ? x : "", y ? y : "");
}

static int files_ls(struct cli *cli, struct files_args *a)
{
	struct cove_error err = { 0 };
	char *body = NULL;
	if (a->n != 1)
		return cli_usage_error("files ls", "expected ID PATH");
	if (cove_list(cli->client, a->id, a->paths[0], a->depth, &body, &err) < 0)
		return cli_fail(&err);
	json_t *j = json_loads(body, 0, NULL);
	if (cli->json) {
		printf("%s", body);
	} else {
		json_t *entries = json_object_get(j, "entries");
		size_t n = json_array_size(entries);
		_cleanup_free_ json_t **sorted = calloc(n ? n : 1, sizeof(json_t *));
		for (size_t i = 0; sorted && i < n; i++)
			sorted[i] = json_array_get(entries, i);
		if (sorted)
			qsort(sorted, n, sizeof(json_t *), by_path);
		for (size_t i = 0; sorted && i < n; i++)
			print_entry(sorted[i], json_string_value(json_object_get(j, "path")) ?: "", a->flag);
	}
	if (json_is_true(json_object_get(j, "truncated")))
		fprintf(stderr, "cove: the listing was cut short\n");
	json_decref(j);
	free(body);
	return 0;
}

static int files_cat(struct cli *cli, struct files_args *a)
{
	struct cove_error err = { 0 };
	int out = 1, r = 0;
	for (int i = 0; i < a->n; i++)
		if (cove_read_file_stream(cli->client, a->id, a->paths[i], to_fd, &out, &err) < 0)
			r = err.status ? cli_fail(&err) : fail_errno("stdout");
	return r;
}

static int files_rm(struct cli *cli, struct files_args *a)
{
	struct cove_error err = { 0 };
	int r = 0;
	for (int i = 0; i < a->n; i++)
		if (cove_remove(cli->client, a->id, a->paths[i], a->flag, NULL, &err) < 0)
			r = cli_fail(&err);
	return r;
}

static int files_mkdir(struct cli *cli, struct files_args *a)
{
	struct cove_error err = { 0 };
	int r = 0;
	for (int i = 0; i < a->n; i++)
		if (cove_mkdir(cli->client, a->id, a->paths[i], &err) < 0)
			r = cli_fail(&err);
	return r;
}

static int files_mv(struct cli *cli, struct files_args *a)
{
	struct cove_error err = { 0 };
	if (a->n != 2)
		return cli_usage_error("files mv", "expected ID FROM TO");
	return cove_move(cli->client, a->id, a->paths[0], a->paths[1], a->flag, &err) < 0 ? cli_fail(&err) : 0;
}

static int files_chmod(struct cli *cli, struct files_args *a)
{
	struct cove_error err = { 0 };
	int r = 0;
	if (a->n < 2)
		return cli_usage_error("files chmod", "expected ID MODE PATH...");
	for (int i = 1; i < a->n; i++)
		if (cove_chmod(cli->client, a->id, a->paths[i], a->paths[0], &err) < 0)
			r = cli_fail(&err);
	return r;
}

static const struct files_verb {
	const char *name;
	int (*fn)(struct cli *cli, struct files_args *a);
	int min_paths;
} files_verbs[] = {
	{ "ls", files_ls, 1 },       { "cat", files_cat, 1 }, { "rm", files_rm, 1 },
	{ "mkdir", files_mkdir, 1 }, { "mv", files_mv, 2 },   { "chmod", files_chmod, 2 },
};

/* cove files VERB: argv[0] is "files VERB", the operands follow. */
int cmd_files(struct cli *cli, int argc, char **argv)
{
	const struct files_verb *v = NULL;
	for (size_t i = 0; i < ARRAY_SIZE(files_verbs); i++)
		if (strcmp(argv[0] + strlen("files "), files_verbs[i].name) == 0)
			v = &files_verbs[i];
	if (!v)
		return cli_usage_error("files", "expected ls, cat, rm, mkdir, mv, chmod or watch");
	struct files_args a = { .depth = 1 };
	const char *optarg;
	int c;
	while ((c = cli_next_opt(cli, &optarg)) != -1) {
		char *end;
		if (c == 'd' && ((a.depth = (int)strtol(optarg, &end, 10)) < 1 || *end))
			return cli_usage_error(argv[0], "bad -d '%s' (a depth from 1)", optarg);
		a.flag |= c != 'd';
	}
	if (argc < 2 + v->min_paths)
		return cli_usage_error(argv[0], "expected ID and %s", v->min_paths > 1 ? "more paths" : "a path");
	a.id = argv[1];
	a.paths = argv + 2;
	a.n = argc - 2;
	if (cli_connect(cli) < 0)
		return 1;
	return v->fn(cli, &a);
}

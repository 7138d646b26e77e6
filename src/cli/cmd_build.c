/* cove build: a Dockerfile's image, built by coved from a folder sent as
 * a tar; its steps and their output printed as they come. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

/* An event of the build, on stderr (the image's ID alone goes to stdout). */
static int on_event(void *arg, const char *text)
{
	json_t *j = json_loads(text, 0, NULL);
	const char *type = json_string_value(json_object_get(j, "type"));
	if (type && strcmp(type, "step") == 0) {
		fprintf(stderr, "#%lld/%lld %s\n", (long long)json_integer_value(json_object_get(j, "step")),
			(long long)json_integer_value(json_object_get(j, "total")),
			json_string_value(json_object_get(j, "instruction")) ?: "");
	} else if (type && strcmp(type, "output") == 0) {
		const char *data = json_string_value(json_object_get(j, "data"));
		if (data)
			fwrite(data, 1, json_string_length(json_object_get(j, "data")), stderr);
	} else if (type && strcmp(type, "step_done") == 0 && json_object_get(j, "cached")) {
		const char *layer = json_string_value(json_object_get(j, "layer")) ?: "";
		fprintf(stderr, "  %s %.19s\n", json_is_true(json_object_get(j, "cached")) ? "cached" : "layer", layer);
	}
	json_decref(j);
	return 0;
}

/* -f FILE: its path inside DIR. */
static int dockerfile_in(const char *dir, const char *file, char *out, size_t n)
{
	char rdir[PATH_MAX], rfile[PATH_MAX];
	if (!realpath(dir, rdir) || !realpath(file, rfile)) {
		fprintf(stderr, "cove build: %s: %s\n", realpath(dir, rdir) ? file : dir, strerror(errno));
		return -1;
	}
	size_t l = strlen(rdir);
	if (strncmp(rfile, rdir, l) != 0 || rfile[l] != '/') {
		fprintf(stderr, "cove build: the Dockerfile '%s' must be inside the context '%s'\n", file, dir);
		return -1;
	}
	snprintf(out, n, "%s", rfile + l + 1);
	return 0;
}

static int send_build(struct cli *cli, int fd, const struct cove_build_options *o)
{
	struct cove_source src = { fd, lseek(fd, 0, SEEK_END), NULL, NULL };
	struct cove_error err = { 0 };
	char *answer = NULL;
	(void)lseek(fd, 0, SEEK_SET);
	int r = cli_connect(cli) < 0                                                             ? 1
		: cove_image_build_from(cli->client, &src, o, on_event, NULL, &answer, &err) < 0 ? cli_fail(&err)
												 : 0;
	json_t *j = answer ? json_loads(answer, 0, NULL) : NULL;
	if (r == 0 && cli->json)
		json_dumpf(j, stdout, JSON_INDENT(2)), putchar('\n');
	else if (r == 0)
		printf("%s\n", json_string_value(json_object_get(j, "id")) ?: "");
	json_decref(j);
	free(answer);
	return r;
}

int cmd_build(struct cli *cli, int argc, char **argv)
{
	const char *file = NULL, *v;
	char rel[PATH_MAX] = "Dockerfile";
	struct cove_build_options o = { 0 };
	json_t *args = json_object();
	int c;
	while ((c = cli_next_opt(cli, &v)) > 0) {
		const char *eq = c == 'b' ? strchr(v, '=') : NULL;
		if (c == 'f')
			file = v;
		else if (c == 't')
			o.tag = v;
		else if (c == 'b' && eq && eq != v) {
			char name[256];
			snprintf(name, sizeof(name), "%.*s", (int)(eq - v), v);
			json_object_set_new(args, name, json_string(eq + 1));
		} else if (c == 'b') {
			json_decref(args);
			return cli_usage_error("build", "--build-arg wants K=V, not '%s'", v);
		}
	}
	if (argc != 2 || (file && dockerfile_in(argv[1], file, rel, sizeof(rel)) < 0)) {
		json_decref(args);
		return argc != 2 ? cli_usage_error("build", "want exactly one DIR, the build context") : 1;
	}
	char *args_text = json_object_size(args) ? json_dumps(args, JSON_COMPACT) : NULL;
	json_decref(args);
	o.dockerfile = rel;
	o.build_args_json = args_text;
	int fd = cli_temp_file(), r = 1;
	if (fd < 0)
		fprintf(stderr, "cove build: a temporary file: %s\n", strerror(errno));
	else if (cli_tar_tree(argv[1], NULL, fd, true) == 0)
		r = send_build(cli, fd, &o);
	if (fd >= 0)
		close(fd);
	free(args_text);
	return r;
}

/* cove image import / pull / ls / inspect / rm / prune */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/human.h"

#define LAYERS_SHOWN 64

static void print_json_text(const char *text)
{
	json_t *j = json_loads(text, 0, NULL);
	json_dumpf(j, stdout, JSON_INDENT(2));
	putchar('\n');
	json_decref(j);
}

/* An image's ID, or with --json all of it. */
static void print_image(struct cli *cli, const char *text)
{
	json_t *j = json_loads(text, 0, NULL);
	if (cli->json)
		print_json_text(text);
	else
		printf("%s\n", json_string_value(json_object_get(j, "id")) ?: "");
	json_decref(j);
}

/* "/v1/images/<ref, percent-encoded>" into out. */
static void image_path(const char *ref, char *out, size_t cap)
{
	size_t n = (size_t)snprintf(out, cap, "/v1/images/");
	for (const unsigned char *p = (const unsigned char *)ref; *p && n + 4 < cap; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		    strchr("-._~:@", *p))
			out[n++] = (char)*p;
		else
			n += (size_t)snprintf(out + n, cap - n, "%%%02X", *p);
	}
	out[n] = '\0';
}

static void on_sent(void *arg, unsigned long long sent)
{
	progress_set(arg, sent);
}

/* PATH (a folder, tarred on the way, or a tar; - is stdin) as an image. */
int cmd_image_import(struct cli *cli, int argc, char **argv)
{
	const char *name = NULL, *v;
	while (cli_next_opt(cli, &v) == 'n')
		name = v;
	if (argc != 2)
		return cli_usage_error("image import", "want exactly one PATH");
	struct stat st;
	const char *path = argv[1];
	int fd = strcmp(path, "-") == 0                        ? dup(0)
		 : stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? cli_temp_file()
							       : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "cove image import: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (strcmp(path, "-") != 0 && S_ISDIR(st.st_mode) && cli_tar_tree(path, NULL, fd) < 0) {
		close(fd);
		return 1;
	}
	off_t size = strcmp(path, "-") == 0 ? -1 : lseek(fd, 0, SEEK_END);
	if (size >= 0)
		(void)lseek(fd, 0, SEEK_SET);
	struct progress pr;
	progress_start(&pr, path, size > 0 ? (unsigned long long)size : 0);
	struct cove_source src = { fd, size, on_sent, &pr };
	struct cove_error err = { 0 };
	char *answer = NULL;
	int r = cli_connect(cli) < 0                                                 ? 1
		: cove_image_import_from(cli->client, &src, name, &answer, &err) < 0 ? cli_fail(&err)
										     : 0;
	progress_end(&pr);
	close(fd);
	if (r == 0)
		print_image(cli, answer);
	free(answer);
	return r;
}

/* ---- pull: a bar per layer on a terminal ---- */

struct layer_bar {
	char digest[80];
	char status[16];
	unsigned long long done, total;
};

struct pull_view {
	bool tty;
	int n, drawn;
	struct layer_bar l[LAYERS_SHOWN];
};

static void draw_layers(struct pull_view *v)
{
	if (v->drawn)
		fprintf(stderr, "\033[%dA", v->drawn);
	for (int i = 0; i < v->n; i++) {
		char done[16], total[16], bar[24];
		const struct layer_bar *b = &v->l[i];
		int fill = b->total ? (int)(b->done * 20 / b->total) : 0;
		fill = fill > 20 ? 20 : fill;
		memset(bar, '=', (size_t)fill);
		memset(bar + fill, ' ', (size_t)(20 - fill));
		bar[20] = '\0';
		human_size(b->done, done, sizeof(done));
		human_size(b->total, total, sizeof(total));
		fprintf(stderr, "\r\033[K%.19s [%s] %s/%s %s\n", b->digest, bar, done, total, b->status);
	}
	v->drawn = v->n;
}

static int on_layer(void *arg, const struct cove_image_event *ev)
{
	struct pull_view *v = arg;
	int i = 0;
	while (i < v->n && strcmp(v->l[i].digest, ev->digest) != 0)
		i++;
	if (i == v->n) {
		if (v->n == LAYERS_SHOWN || strcmp(ev->status, "waiting") != 0)
			return 0; /* the config blob, or too many to show */
		snprintf(v->l[v->n++].digest, sizeof(v->l[0].digest), "%s", ev->digest);
	}
	struct layer_bar *b = &v->l[i];
	snprintf(b->status, sizeof(b->status), "%s", ev->status);
	b->done = ev->done;
	b->total = ev->total;
	if (v->tty)
		draw_layers(v);
	return 0;
}

int cmd_image_pull(struct cli *cli, int argc, char **argv)
{
	if (argc != 2)
		return cli_usage_error("image pull", "want exactly one image reference");
	struct pull_view *v = calloc(1, sizeof(*v));
	struct cove_error err = { 0 };
	char *answer = NULL;
	if (!v)
		return 1;
	v->tty = isatty(STDERR_FILENO) == 1;
	int r = cli_connect(cli) < 0                                                    ? 1
		: cove_image_pull(cli->client, argv[1], on_layer, v, &answer, &err) < 0 ? cli_fail(&err)
											: 0;
	free(v);
	if (r == 0)
		print_image(cli, answer);
	free(answer);
	return r;
}

/* ---- the JSON ones ---- */

static int call(struct cli *cli, const char *method, const char *path, const char *body, char **ret)
{
	struct cove_error err = { 0 };
	if (cli_connect(cli) < 0)
		return 1;
	return cove_call(cli->client, method, path, body, ret, &err) < 0 ? cli_fail(&err) : 0;
}

static void print_images(json_t *a)
{
	static const char *const headers[] = { "ID", "NAME", ">LAYERS", "CREATED", "USED BY", NULL };
	struct table t;
	size_t i;
	json_t *e;
	table_init(&t, 5, headers);
	json_array_foreach(a, i, e)
	{
		const char *id = json_string_value(json_object_get(e, "id")) ?: "";
		json_t *names = json_object_get(e, "names"), *users = json_object_get(e, "users");
		char short_id[16], layers[16], age[32], used[32];
		snprintf(short_id, sizeof(short_id), "%.12s", strlen(id) > 7 ? id + 7 : id);
		snprintf(layers, sizeof(layers), "%lld", (long long)json_integer_value(json_object_get(e, "layers")));
		human_age(json_integer_value(json_object_get(e, "created_at")), cli_now_ms(), age, sizeof(age));
		snprintf(used, sizeof(used), "%zu sb, %zu snap, %lld tpl",
			 json_array_size(json_object_get(users, "sandboxes")),
			 json_array_size(json_object_get(users, "snapshots")),
			 (long long)json_integer_value(json_object_get(users, "templates")));
		table_row(&t, short_id, or_dash(json_string_value(json_array_get(names, 0))), layers, age, used);
	}
	table_print(&t, stdout);
	table_free(&t);
}

int cmd_image_ls(struct cli *cli, int argc, char **argv)
{
	if (argc > 1)
		return cli_usage_error("image ls", "unexpected '%s'", argv[1]);
	char *body = NULL;
	int r = call(cli, "GET", "/v1/images", NULL, &body);
	json_t *j = r == 0 ? json_loads(body, 0, NULL) : NULL;
	if (j && cli->json) {
		json_dumpf(json_object_get(j, "images"), stdout, JSON_INDENT(2));
		putchar('\n');
	} else if (j) {
		print_images(json_object_get(j, "images"));
	}
	json_decref(j);
	free(body);
	return r;
}

/* method on every REF given; print each answer (inspect) or the REF (rm). */
static int each_ref(struct cli *cli, int argc, char **argv, const char *verb, const char *method, bool show)
{
	if (argc < 2)
		return cli_usage_error(verb, "want one or more images");
	int r = 0;
	for (int i = 1; i < argc; i++) {
		char path[1400], *body = NULL;
		image_path(argv[i], path, sizeof(path));
		if (call(cli, method, path, NULL, &body) != 0)
			r = 1;
		else if (show)
			print_json_text(body);
		else
			printf("%s\n", argv[i]);
		free(body);
	}
	return r;
}

int cmd_image_inspect(struct cli *cli, int argc, char **argv)
{
	return each_ref(cli, argc, argv, "image inspect", "GET", true);
}

int cmd_image_rm(struct cli *cli, int argc, char **argv)
{
	return each_ref(cli, argc, argv, "image rm", "DELETE", false);
}

int cmd_image_prune(struct cli *cli, int argc, char **argv)
{
	const char *v;
	bool all = false;
	while (cli_next_opt(cli, &v) == 'a')
		all = true;
	if (argc > 1)
		return cli_usage_error("image prune", "unexpected '%s'", argv[1]);
	char *body = NULL;
	int r = call(cli, "POST", "/v1/images/prune", all ? "{\"all\":true}" : "{}", &body);
	if (r == 0) {
		json_t *j = json_loads(body, 0, NULL), *id;
		size_t i;
		json_array_foreach(json_object_get(j, "deleted"), i, id)
		{
			printf("%s\n", json_string_value(id));
		}
		json_decref(j);
	}
	free(body);
	return r;
}

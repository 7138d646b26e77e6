/* libFuzzer harness for the Dockerfile and .dockerignore parsers
 * (src/image/dockerfile.c).
 *
 * Beyond "no crash" and no leak: a Dockerfile that parses has a FROM, its
 * first instruction but ARGs; every instruction a line number within the
 * input's lines, a keyword of the table and the arguments its kind needs
 * (COPY/ADD two or more, ENV/LABEL KEY=VALUE, the exec form an array);
 * COPY/ADD's sources stay in the context. The same bytes, as text: words
 * and expansion either fail or end, a cleaned path never holds ".." or
 * starts with '/', and cleaning twice changes nothing; a glob matches
 * itself when it has no special characters; .dockerignore patterns are
 * cleaned.
 *
 *   scripts/fuzz.sh dockerfile
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/dockerfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *lookup(void *arg, const char *name)
{
	return strcmp(name, "A") == 0 ? "value" : NULL;
}

static void check_instr(const struct df_instr *in, int lines)
{
	if (in->line < 1 || in->line > lines || !in->text || !in->rest || (size_t)in->cmd > DF_ENTRYPOINT)
		abort();
	if ((in->cmd == DF_COPY || in->cmd == DF_ADD) && in->n_args < 2)
		abort();
	if (in->cmd == DF_COPY || in->cmd == DF_ADD) {
		char clean[4096];
		for (size_t i = 0; i + 1 < in->n_args; i++)
			if (dockerfile_clean_path(in->args[i], clean, sizeof(clean)) < 0)
				abort();
	}
	if ((in->cmd == DF_ENV || in->cmd == DF_LABEL))
		for (size_t i = 0; i < in->n_args; i++)
			if (!strchr(in->args[i], '='))
				abort();
	for (size_t i = 0; i < in->n_args; i++)
		if (!in->args[i])
			abort();
}

static void check_text(const char *s)
{
	size_t n;
	char **w = dockerfile_words(s, &n);
	for (size_t i = 0; w && i < n; i++)
		if (!w[i])
			abort();
	dockerfile_strv_free(w);
	free(dockerfile_expand(s, lookup, NULL));
	char a[4096], b[4096];
	if (strlen(s) < 2000 && dockerfile_clean_path(s, a, sizeof(a)) == 0) {
		if (a[0] == '/' || strcmp(a, "..") == 0 || strncmp(a, "../", 3) == 0 || strstr(a, "/../") ||
		    dockerfile_clean_path(a, b, sizeof(b)) < 0 || strcmp(a, b) != 0)
			abort();
		if (!strpbrk(a, "*?[\\") && !dockerfile_glob(a, a))
			abort();
	}
	(void)dockerfile_glob(s, "a/b/c.txt");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dockerfile df;
	struct cove_err err = { 0 };
	char *s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	int lines = 1;
	for (size_t i = 0; i < size; i++)
		lines += data[i] == '\n';
	if (dockerfile_parse((const char *)data, size, &df, &err) == 0) {
		size_t i = 0;
		while (i < df.n && df.v[i].cmd == DF_ARG)
			i++;
		if (i == df.n || df.v[i].cmd != DF_FROM)
			abort();
		for (i = 0; i < df.n; i++)
			check_instr(&df.v[i], lines);
		dockerfile_free(&df);
	} else if (!err.code || !err.msg[0]) {
		abort();
	}
	if (!memchr(data, '\0', size) && size < 65536) {
		check_text(s);
		struct dockerignore di;
		if (dockerignore_parse(s, size, &di) == 0)
			(void)dockerignore_excluded(&di, "a/b/c.txt");
		dockerignore_free(&di);
	}
	free(s);
	return 0;
}

/* Unit tests for src/image/dockerfile.c: Dockerfile instructions (forms,
 * continuations, comments, flags), the refusals that name their line,
 * words, variable expansion, path cleaning, globs and .dockerignore. */
#include "image/dockerfile.h"

#include <stdlib.h>
#include <string.h>

#include "tap.h"

static int parse(const char *text, struct dockerfile *df, struct cove_err *err)
{
	memset(err, 0, sizeof(*err));
	return dockerfile_parse(text, strlen(text), df, err);
}

static void test_full(void)
{
	static const char text[] = "# a comment\n"
				   "ARG BASE=img:1\n"
				   "from ${BASE}\n"
				   "ENV A=1 B=\"two words\" \\\n"
				   "    C=3\n"
				   "ENV D four  five\n"
				   "LABEL k=v\n"
				   "WORKDIR /app\n"
				   "COPY --chown=1000:100 --chmod=0640 a.txt b*.txt dir/\n"
				   "ADD [\"x.tar\", \"/opt/\"]\n"
				   "RUN set -e; \\\n"
				   "  # skipped inside\n"
				   "\n"
				   "  echo hi\n"
				   "RUN [\"/bin/true\", \"x\"]\n"
				   "USER 1000\n"
				   "EXPOSE 80 53/udp\n"
				   "ENTRYPOINT [\"/bin/sh\", \"-c\"]\n"
				   "CMD echo $HOME\n";
	struct dockerfile df;
	struct cove_err err;
	CHECK(parse(text, &df, &err) == 0, "a Dockerfile with every instruction parses (%s)", err.msg);
	CHECK(df.n == 14, "14 instructions (%zu)", df.n);
	if (df.n != 14)
		return;
	CHECK(df.v[0].cmd == DF_ARG && df.v[0].line == 2, "ARG before FROM, line 2");
	CHECK(df.v[1].cmd == DF_FROM && strcmp(df.v[1].args[0], "${BASE}") == 0, "from in lower case");
	CHECK(df.v[2].n_args == 3 && strcmp(df.v[2].args[1], "B=two words") == 0 && strcmp(df.v[2].args[2], "C=3") == 0,
	      "ENV pairs over a continuation, quotes removed");
	CHECK_STR(df.v[3].args[0], "D=four  five", "ENV KEY VALUE: the rest of the line");
	CHECK(df.v[6].cmd == DF_COPY && df.v[6].n_args == 3 && strcmp(df.v[6].chown, "1000:100") == 0 &&
		      df.v[6].chmod == 0640 && strcmp(df.v[6].args[2], "dir/") == 0,
	      "COPY's flags and words");
	CHECK(df.v[7].json && df.v[7].n_args == 2 && strcmp(df.v[7].args[1], "/opt/") == 0, "ADD's JSON form");
	CHECK(df.v[8].line == 11 && !df.v[8].json && strstr(df.v[8].args[0], "set -e;") &&
		      strstr(df.v[8].args[0], "echo hi") && !strstr(df.v[8].args[0], "skipped"),
	      "RUN's shell form over lines, a comment inside skipped: '%s'", df.v[8].args[0]);
	CHECK(df.v[9].json && df.v[9].n_args == 2, "RUN's exec form");
	CHECK(df.v[11].n_args == 2 && strcmp(df.v[11].args[1], "53/udp") == 0, "EXPOSE's ports");
	CHECK(df.v[13].cmd == DF_CMD && !df.v[13].json && strcmp(df.v[13].args[0], "echo $HOME") == 0,
	      "CMD's shell form, unexpanded");
	dockerfile_free(&df);
}

static void refused(const char *text, const char *want)
{
	struct dockerfile df;
	struct cove_err err;
	int r = parse(text, &df, &err);
	CHECK(r < 0 && err.code == COVE_EINVAL && strstr(err.msg, want), "refused with '%s': '%s'", want, err.msg);
	if (r == 0)
		dockerfile_free(&df);
}

static void test_refused(void)
{
	refused("FROM a\nRUN x\nFOO bar\n", "line 3: unknown instruction 'FOO'");
	refused("RUN x\n", "line 1: RUN before FROM");
	refused("# nothing\n", "no FROM");
	refused("", "no FROM");
	refused("FROM a\nFROM b\n", "line 2: a second FROM");
	refused("FROM a\n\nCOPY ../etc /x\n", "line 3: COPY source '../etc' is outside the build context");
	refused("FROM a\nCOPY a/../../b /x\n", "outside the build context");
	refused("FROM a\nADD https://example.org/x /x\n", "line 2: ADD from a URL");
	refused("FROM a\nCOPY --from=b /x /y\n", "multi-stage");
	refused("FROM a\nCOPY onlyone\n", "line 2: COPY needs a source and a destination");
	refused("FROM a\nENV\n", "line 2: ENV needs");
	refused("FROM a\nLABEL novalue\n", "'novalue' is not KEY=VALUE");
	refused("FROM a\nENV A=\"open\n", "line 2: an unclosed quote");
	refused("FROM a\nWORKDIR\n", "line 2: WORKDIR needs an argument");
	refused("FROM a\nRUN --mount=type=cache x\n", "RUN flags");
	refused("FROM a\nARG A B\n", "ARG takes one");
	refused("FROM a\nCOPY --bogus a b\n", "unknown flag '--bogus'");
	refused("FROM a\nONBUILD RUN x\n", "unknown instruction 'ONBUILD'");
	struct dockerfile df;
	struct cove_err err = { 0 };
	CHECK(dockerfile_parse("FROM a\nRUN x\0y\n", 14, &df, &err) < 0 && strstr(err.msg, "NUL"), "a NUL byte");
}

static const char *lookup(void *arg, const char *name)
{
	if (strcmp(name, "A") == 0)
		return "one";
	if (strcmp(name, "EMPTY") == 0)
		return "";
	return NULL;
}

static void expand(const char *in, const char *want)
{
	char *s = dockerfile_expand(in, lookup, NULL);
	CHECK(s && strcmp(s, want) == 0, "'%s' expands to '%s' ('%s')", in, want, s ? s : "(null)");
	free(s);
}

static void test_expand(void)
{
	expand("$A/${A}x", "one/onex");
	expand("${NONE:-dflt} ${A:-dflt} ${EMPTY:-e}", "dflt one e");
	expand("${A:+set}${NONE:+set}", "set");
	expand("\\$A $", "$A $");
	expand("$NONE.", ".");
	CHECK(dockerfile_expand("${A", lookup, NULL) == NULL, "an unclosed ${ is refused");
	CHECK(dockerfile_expand("${A:?x}", lookup, NULL) == NULL, "an unknown ${:op} is refused");
	size_t n;
	char **w = dockerfile_words("a 'b c' \"d\\\"e\" f\\ g", &n);
	CHECK(w && n == 4 && strcmp(w[1], "b c") == 0 && strcmp(w[2], "d\"e") == 0 && strcmp(w[3], "f g") == 0,
	      "words: quotes and backslashes");
	dockerfile_strv_free(w);
	CHECK(dockerfile_words("a 'b", &n) == NULL, "words: an unclosed quote");
}

static void clean(const char *in, int want_r, const char *want)
{
	char out[256];
	int r = dockerfile_clean_path(in, out, sizeof(out));
	CHECK(r == want_r && (r < 0 || strcmp(out, want) == 0), "clean '%s' -> %d '%s' ('%s')", in, want_r, want,
	      r < 0 ? "" : out);
}

static void test_paths(void)
{
	clean("./a//b/", 0, "a/b");
	clean(".", 0, "");
	clean("/x/../y", 0, "y");
	clean("a/..", 0, "");
	clean("..", -1, "");
	clean("a/../../b", -1, "");
	CHECK(dockerfile_glob("*.txt", "a.txt") && !dockerfile_glob("*.txt", "d/a.txt"), "'*' stays in a component");
	CHECK(dockerfile_glob("**/*.txt", "d/e/a.txt") && dockerfile_glob("**/*.txt", "a.txt"), "'**' any components");
	CHECK(dockerfile_glob("d/**", "d/e/f") && !dockerfile_glob("d/**", "x/e"), "'d/**'");
	CHECK(dockerfile_glob("[a-c]?.log", "b1.log") && !dockerfile_glob("[!a-c]?.log", "b1.log"), "classes");
	CHECK(dockerfile_glob("a\\*", "a*") && !dockerfile_glob("a\\*", "ab"), "an escaped '*'");
	CHECK(!dockerfile_glob("[a", "a"), "an unclosed class matches nothing");
	/* each pair of components is tried once: these end (fuzz_dockerfile
	 * found the first one taking minutes with backtracking) */
	CHECK(!dockerfile_glob("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b",
			       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
	      "many stars, no match");
	CHECK(!dockerfile_glob("**/**/**/**/**/**/**/**/x", "a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/a/y"),
	      "many '**', no match");
	CHECK(dockerfile_glob("**/**/x", "a/b/c/x") && dockerfile_glob("a*b*c", "aXbYc"), "and these match");
}

static void test_ignore(void)
{
	static const char text[] = "# comment\nnode_modules\n*.log\n!keep.log\n/secret/\n**/tmp\n\n";
	struct dockerignore di;
	CHECK(dockerignore_parse(text, strlen(text), &di) == 0 && di.n == 5, "5 patterns");
	CHECK(dockerignore_excluded(&di, "node_modules") && dockerignore_excluded(&di, "node_modules/x/y.js"),
	      "a folder and what is in it");
	CHECK(dockerignore_excluded(&di, "a.log") && !dockerignore_excluded(&di, "keep.log"), "an exception");
	CHECK(!dockerignore_excluded(&di, "d/a.log"), "'*.log' is the top folder's only");
	CHECK(dockerignore_excluded(&di, "secret/k") && dockerignore_excluded(&di, "x/y/tmp/z"),
	      "'/secret/', '**/tmp'");
	CHECK(!dockerignore_excluded(&di, "src/main.c"), "the rest stays");
	dockerignore_free(&di);
}

int main(void)
{
	test_full();
	test_refused();
	test_expand();
	test_paths();
	test_ignore();
	return tap_done();
}

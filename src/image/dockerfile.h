/* Dockerfiles, and the .dockerignore of a build's context: pure parsers,
 * text in, instructions out, every line checked before anything is built,
 * so that a bad file is refused (COVE_EINVAL, its message naming the line)
 * with nothing made.
 *
 * The syntax is Docker's for one stage: an instruction a line (a line
 * ending in '\' goes on with the next; '#' lines are comments, also inside
 * a continued instruction; blank lines are skipped), the keyword in any
 * case, then its arguments. RUN, CMD and ENTRYPOINT take the exec form (a
 * JSON array of strings) or the shell form (the rest of the line, run by
 * /bin/sh -c). COPY and ADD take the JSON form or words, the last the
 * destination; with --chown=USER[:GROUP] and --chmod=OCTAL. The keywords:
 * FROM, RUN, COPY, ADD, ENV, ARG, WORKDIR, USER, LABEL, EXPOSE, CMD,
 * ENTRYPOINT. Refused: any other (ONBUILD, HEALTHCHECK, a second FROM: one
 * stage only), a COPY/ADD --from, ADD of a URL, a source that leaves the
 * context (a ".." above its root, checked again once variables are
 * expanded). ARG may come before FROM (for FROM's own variables). */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

#define DOCKERFILE_MAX (1u << 20)

enum df_cmd {
	DF_FROM,
	DF_RUN,
	DF_COPY,
	DF_ADD,
	DF_ENV,
	DF_ARG,
	DF_WORKDIR,
	DF_USER,
	DF_LABEL,
	DF_EXPOSE,
	DF_CMD,
	DF_ENTRYPOINT,
};

struct df_instr {
	enum df_cmd cmd;
	int line;   /* where it starts, from 1 */
	char *text; /* as written, its lines joined: for what a build shows */
	char *rest; /* what follows the keyword and the flags, trimmed */
	bool json;  /* exec form: args is the JSON array */
	/* The JSON form's strings; the shell form's words (quotes removed)
	 * for COPY, ADD, ENV, ARG, LABEL, EXPOSE; for RUN, CMD and ENTRYPOINT
	 * the one string rest. */
	char **args;
	size_t n_args;
	char *chown; /* COPY, ADD: --chown's value, or NULL */
	int chmod;   /* COPY, ADD: --chmod's, or -1 */
};

struct dockerfile {
	struct df_instr *v;
	size_t n;
};

int dockerfile_parse(const char *buf, size_t len, struct dockerfile *ret, struct cove_err *err);
void dockerfile_free(struct dockerfile *df);
const char *dockerfile_cmd_name(enum df_cmd cmd);

/* s split into words as a shell would, quotes ('...', "...") and
 * backslashes removed: a NULL-terminated malloc'd array, or NULL for an
 * unclosed quote (or out of memory). */
char **dockerfile_words(const char *s, size_t *ret_n);
void dockerfile_strv_free(char **v);

/* $NAME, ${NAME}, ${NAME:-word}, ${NAME:+word} in s replaced by lookup's
 * value ("" for a name it does not know); "\$" is a literal '$'. A new
 * string, or NULL (a malformed ${, out of memory). */
typedef const char *(*dockerfile_lookup_fn)(void *arg, const char *name);
char *dockerfile_expand(const char *s, dockerfile_lookup_fn lookup, void *arg);

/* A relative path in the context, cleaned ("./a//b/" -> "a/b", "." -> ""),
 * into out; -1 when it leaves the context (a ".." above its root). A
 * leading '/' counts as the context's root. */
int dockerfile_clean_path(const char *path, char *out, size_t n);

/* A glob of Docker's (filepath.Match and "**"), component by component:
 * '*' any run of characters but '/', '?' one, "[...]" a class ('^' or '!'
 * negates, ranges), '\\' escapes; a component "**" is any number of
 * components. In O(pattern length * path length): no backtracking blowup. */
bool dockerfile_glob(const char *pattern, const char *path);

/* .dockerignore: one pattern a line ('#' comments), "!" an exception;
 * the last pattern that matches a path (or a folder above it) decides. */
struct dockerignore {
	char **patterns; /* cleaned; an exception starts with '!' */
	size_t n;
};
int dockerignore_parse(const char *buf, size_t len, struct dockerignore *ret);
bool dockerignore_excluded(const struct dockerignore *di, const char *path);
void dockerignore_free(struct dockerignore *di);

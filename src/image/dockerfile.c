/* Dockerfile and .dockerignore parsing (dockerfile.h). */
#include "image/dockerfile.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const names[] = {
	[DF_FROM] = "FROM",   [DF_RUN] = "RUN",       [DF_COPY] = "COPY",       [DF_ADD] = "ADD",
	[DF_ENV] = "ENV",     [DF_ARG] = "ARG",       [DF_WORKDIR] = "WORKDIR", [DF_USER] = "USER",
	[DF_LABEL] = "LABEL", [DF_EXPOSE] = "EXPOSE", [DF_CMD] = "CMD",         [DF_ENTRYPOINT] = "ENTRYPOINT",
};

#define N_CMDS (sizeof(names) / sizeof(names[0]))

const char *dockerfile_cmd_name(enum df_cmd cmd)
{
	return (size_t)cmd < N_CMDS ? names[cmd] : "?";
}

void dockerfile_strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

static void instr_free(struct df_instr *in)
{
	free(in->text);
	free(in->rest);
	free(in->chown);
	dockerfile_strv_free(in->args);
}

void dockerfile_free(struct dockerfile *df)
{
	for (size_t i = 0; i < df->n; i++)
		instr_free(&df->v[i]);
	free(df->v);
	df->v = NULL;
	df->n = 0;
}

/* ---- words, expansion, paths, globs ---- */

char **dockerfile_words(const char *s, size_t *ret_n)
{
	size_t n = 0, len = strlen(s);
	char **v = calloc(len / 2 + 2, sizeof(*v));
	char *w = malloc(len + 1);
	if (!v || !w)
		goto fail;
	while (*s) {
		while (isspace((unsigned char)*s))
			s++;
		if (!*s)
			break;
		size_t k = 0;
		char quote = 0;
		for (; *s && (quote || !isspace((unsigned char)*s)); s++) {
			if (quote && *s == quote)
				quote = 0;
			else if (!quote && (*s == '"' || *s == '\''))
				quote = *s;
			else if (*s == '\\' && quote != '\'' && s[1])
				w[k++] = *++s;
			else
				w[k++] = *s;
		}
		if (quote)
			goto fail;
		w[k] = '\0';
		if (!(v[n++] = strdup(w)))
			goto fail;
	}
	free(w);
	if (ret_n)
		*ret_n = n;
	return v;
fail:
	free(w);
	dockerfile_strv_free(v);
	return NULL;
}

/* ${NAME...} at s (after "${"): its expansion into f; s past the '}'. */
static const char *expand_braced(const char *s, FILE *f, dockerfile_lookup_fn lookup, void *arg)
{
	const char *end = strchr(s, '}');
	size_t nlen = strcspn(s, ":}");
	if (!end || nlen == 0 || nlen > 255)
		return NULL;
	char name[256], word[4096];
	snprintf(name, sizeof(name), "%.*s", (int)nlen, s);
	const char *v = lookup(arg, name);
	if (s[nlen] == ':') {
		char op = s[nlen + 1];
		size_t wl = (size_t)(end - (s + nlen + 2));
		if ((op != '-' && op != '+') || end < s + nlen + 2 || wl >= sizeof(word))
			return NULL;
		snprintf(word, sizeof(word), "%.*s", (int)wl, s + nlen + 2);
		bool set = v && *v;
		v = op == '-' ? (set ? v : word) : (set ? word : "");
	}
	fputs(v ? v : "", f);
	return end + 1;
}

char *dockerfile_expand(const char *s, dockerfile_lookup_fn lookup, void *arg)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	if (!f)
		return NULL;
	while (s && *s) {
		if (s[0] == '\\' && s[1] == '$') {
			fputc('$', f);
			s += 2;
		} else if (s[0] == '$' && s[1] == '{') {
			s = expand_braced(s + 2, f, lookup, arg);
		} else if (s[0] == '$' && (isalpha((unsigned char)s[1]) || s[1] == '_')) {
			char name[256];
			size_t n = 1;
			while (n < sizeof(name) && (isalnum((unsigned char)s[n]) || s[n] == '_'))
				n++;
			snprintf(name, sizeof(name), "%.*s", (int)(n - 1), s + 1);
			const char *v = lookup(arg, name);
			fputs(v ? v : "", f);
			s += n;
		} else {
			fputc(*s++, f);
		}
	}
	bool bad = !s || ferror(f);
	if (fclose(f) != 0 || bad) {
		free(out);
		return NULL;
	}
	return out;
}

int dockerfile_clean_path(const char *path, char *out, size_t n)
{
	size_t k = 0;
	if (n == 0)
		return -1;
	out[0] = '\0';
	for (const char *p = path; *p;) {
		size_t c = strcspn(p, "/");
		if (c == 0 || (c == 1 && p[0] == '.')) {
			/* nothing */
		} else if (c == 2 && p[0] == '.' && p[1] == '.') {
			if (k == 0)
				return -1;
			while (k > 0 && out[k - 1] != '/')
				k--;
			k -= k > 0;
			out[k] = '\0';
		} else {
			if (k + c + 2 > n)
				return -1;
			if (k)
				out[k++] = '/';
			memcpy(out + k, p, c);
			out[k += c] = '\0';
		}
		p += c + (p[c] == '/');
	}
	return 0;
}

/* A "[...]" class at *pp (past the '['), matched against c; *pp past ']'.
 * -1: no closing ']'. */
static int class_match(const char **pp, char c)
{
	const char *p = *pp;
	bool neg = *p == '^' || *p == '!', hit = false;
	p += neg;
	for (bool first = true; *p && (first || *p != ']'); first = false) {
		char lo = *p == '\\' && p[1] ? *++p : *p;
		char hi = lo;
		p++;
		if (p[0] == '-' && p[1] && p[1] != ']') {
			bool esc = p[1] == '\\' && p[2];
			hi = esc ? p[2] : p[1];
			p += esc ? 3 : 2;
		}
		hit |= c >= lo && c <= hi;
	}
	if (*p != ']')
		return -1;
	*pp = p + 1;
	return hit != neg;
}

/* One character of pattern p (at *pp, no '*') against c; *pp past it. */
static bool one_match(const char **pp, char c)
{
	const char *p = *pp;
	if (*p == '?') {
		*pp = p + 1;
		return true;
	}
	if (*p == '[') {
		*pp = p + 1;
		return class_match(pp, c) == 1;
	}
	if (*p == '\\' && p[1])
		p++;
	*pp = p + 1;
	return *p == c;
}

/* One path component against one of the pattern: the wildcard algorithm
 * that goes back only to the last '*', so O(len(p) * len(s)). */
static bool component_match(const char *p, const char *s)
{
	const char *star_p = NULL, *star_s = NULL;
	while (*s) {
		const char *next = p;
		if (*p == '*') {
			star_p = ++p;
			star_s = s;
		} else if (*p && one_match(&next, *s)) {
			p = next;
			s++;
		} else if (star_p) {
			p = star_p;
			s = ++star_s;
		} else {
			return false;
		}
	}
	while (*p == '*')
		p++;
	return !*p;
}

#define GLOB_PARTS_MAX 256

struct glob_parts {
	char *v[GLOB_PARTS_MAX];
	size_t n;
};

/* s split at '/' in place. */
static bool split(char *s, struct glob_parts *g)
{
	g->n = 0;
	for (char *t = s;; t++) {
		if (g->n == GLOB_PARTS_MAX)
			return false;
		g->v[g->n++] = t;
		if (!(t = strchr(t, '/')))
			return true;
		*t = '\0';
	}
}

/* Components pi.. of the pattern against si.. of the path; failed
 * remembers the pairs that do not match, so each is tried once. */
static bool parts_match(const struct glob_parts *p, const struct glob_parts *s, size_t pi, size_t si,
			unsigned char *failed)
{
	unsigned char *f = &failed[pi * (s->n + 1) + si];
	bool r;
	if (pi == p->n)
		return si == s->n;
	if (*f)
		return false;
	if (strcmp(p->v[pi], "**") == 0)
		r = parts_match(p, s, pi + 1, si, failed) || (si < s->n && parts_match(p, s, pi, si + 1, failed));
	else
		r = si < s->n && component_match(p->v[pi], s->v[si]) && parts_match(p, s, pi + 1, si + 1, failed);
	*f = !r;
	return r;
}

bool dockerfile_glob(const char *pattern, const char *path)
{
	struct glob_parts p, s;
	char *pc = strdup(pattern), *sc = strdup(path);
	unsigned char *failed = NULL;
	bool r = pc && sc && split(pc, &p) && split(sc, &s) && (failed = calloc((p.n + 1) * (s.n + 1), 1)) &&
		 parts_match(&p, &s, 0, 0, failed);
	free(failed);
	free(pc);
	free(sc);
	return r;
}

/* ---- .dockerignore ---- */

int dockerignore_parse(const char *buf, size_t len, struct dockerignore *ret)
{
	*ret = (struct dockerignore){ 0 };
	size_t cap = 0;
	for (size_t i = 0; i < len;) {
		size_t e = i;
		while (e < len && buf[e] != '\n')
			e++;
		char line[4096], clean[4096];
		size_t n = e - i < sizeof(line) - 1 ? e - i : sizeof(line) - 1;
		memcpy(line, buf + i, n);
		line[n] = '\0';
		i = e + 1;
		while (n && isspace((unsigned char)line[n - 1]))
			line[--n] = '\0';
		char *p = line + strspn(line, " \t");
		if (!*p || *p == '#')
			continue;
		bool exc = *p == '!';
		p += exc;
		if (dockerfile_clean_path(p, clean + exc, sizeof(clean) - 1) < 0 || !clean[exc])
			continue;
		clean[0] = exc ? '!' : clean[0];
		if (ret->n + 1 >= cap) {
			cap = cap ? 2 * cap : 16;
			char **v = realloc(ret->patterns, cap * sizeof(*v));
			if (!v)
				return -1;
			ret->patterns = v;
		}
		if (!(ret->patterns[ret->n] = strdup(clean)))
			return -1;
		ret->n++;
	}
	return 0;
}

/* pattern matches path or a folder above it. */
static bool ignore_match(const char *pattern, const char *path)
{
	char prefix[4096];
	if (dockerfile_glob(pattern, path))
		return true;
	for (const char *s = strchr(path, '/'); s; s = strchr(s + 1, '/')) {
		snprintf(prefix, sizeof(prefix), "%.*s", (int)(s - path), path);
		if (dockerfile_glob(pattern, prefix))
			return true;
	}
	return false;
}

bool dockerignore_excluded(const struct dockerignore *di, const char *path)
{
	bool out = false;
	for (size_t i = 0; i < di->n; i++) {
		const char *p = di->patterns[i];
		bool exc = *p == '!';
		if (ignore_match(p + exc, path))
			out = !exc;
	}
	return out;
}

void dockerignore_free(struct dockerignore *di)
{
	for (size_t i = 0; i < di->n; i++)
		free(di->patterns[i]);
	free(di->patterns);
	*di = (struct dockerignore){ 0 };
}

/* ---- instructions ---- */

static int keyword(const char *w, size_t n)
{
	for (size_t i = 0; i < N_CMDS; i++)
		if (strlen(names[i]) == n && strncasecmp(names[i], w, n) == 0)
			return (int)i;
	return -1;
}

/* rest as a JSON array of strings into in->args: 1, 0 if it is not one. */
static int json_form(struct df_instr *in)
{
	json_t *j = in->rest[0] == '[' ? json_loads(in->rest, 0, NULL) : NULL;
	size_t i, n = json_array_size(j);
	json_t *v;
	if (!json_is_array(j))
		goto no;
	json_array_foreach(j, i, v)
	{
		if (!json_is_string(v) || memchr(json_string_value(v), '\0', json_string_length(v)))
			goto no;
	}
	in->args = calloc(n + 1, sizeof(char *));
	for (i = 0; in->args && i < n; i++)
		in->args[i] = strdup(json_string_value(json_array_get(j, i)));
	json_decref(j);
	in->n_args = n;
	in->json = true;
	return 1;
no:
	json_decref(j);
	return 0;
}

/* COPY and ADD's flags, taken off the front of in->rest. */
static int copy_flags(struct df_instr *in, struct cove_err *err)
{
	char *p = in->rest;
	while (strncmp(p, "--", 2) == 0) {
		size_t n = strcspn(p, " \t");
		char flag[512];
		snprintf(flag, sizeof(flag), "%.*s", (int)n, p);
		char *eq = strchr(flag, '=');
		if (strncmp(flag, "--chown=", 8) == 0 && flag[8]) {
			free(in->chown);
			in->chown = strdup(eq + 1);
		} else if (strncmp(flag, "--chmod=", 8) == 0 && strspn(eq + 1, "01234567") == strlen(eq + 1) &&
			   strlen(eq + 1) >= 3 && strlen(eq + 1) <= 4) {
			in->chmod = (int)strtol(eq + 1, NULL, 8);
		} else if (strncmp(flag, "--from", 6) == 0) {
			return err_set(err, COVE_EINVAL, "line %d: %s --from: multi-stage builds are not supported",
				       in->line, names[in->cmd]);
		} else {
			return err_set(err, COVE_EINVAL, "line %d: unknown flag '%s' of %s (--chown and --chmod are)",
				       in->line, flag, names[in->cmd]);
		}
		p += n;
		p += strspn(p, " \t");
	}
	memmove(in->rest, p, strlen(p) + 1);
	return 0;
}

static int words_of(struct df_instr *in, struct cove_err *err)
{
	in->args = dockerfile_words(in->rest, &in->n_args);
	return in->args ? 0 : err_set(err, COVE_EINVAL, "line %d: an unclosed quote", in->line);
}

static int check_copy(struct df_instr *in, struct cove_err *err)
{
	if ((!in->json && words_of(in, err) < 0) || !in->args)
		return -1;
	if (in->n_args < 2)
		return err_set(err, COVE_EINVAL, "line %d: %s needs a source and a destination", in->line,
			       names[in->cmd]);
	for (size_t i = 0; i + 1 < in->n_args; i++) {
		char clean[4096];
		if (strstr(in->args[i], "://"))
			return err_set(err, COVE_EINVAL, "line %d: %s from a URL ('%s') is not supported", in->line,
				       names[in->cmd], in->args[i]);
		if (dockerfile_clean_path(in->args[i], clean, sizeof(clean)) < 0)
			return err_set(err, COVE_EINVAL, "line %d: %s source '%s' is outside the build context",
				       in->line, names[in->cmd], in->args[i]);
	}
	return 0;
}

/* ENV and LABEL: KEY=VALUE words (ENV also "KEY VALUE..."), stored as
 * "KEY=VALUE" args. */
static int check_pairs(struct df_instr *in, struct cove_err *err)
{
	if (words_of(in, err) < 0)
		return -1;
	if (in->n_args == 0)
		return err_set(err, COVE_EINVAL, "line %d: %s needs KEY=VALUE", in->line, names[in->cmd]);
	if (in->cmd == DF_ENV && !strchr(in->args[0], '=')) {
		/* ENV KEY VALUE...: the value is the rest of the line */
		const char *v = in->rest + strcspn(in->rest, " \t");
		v += strspn(v, " \t");
		char *kv = NULL;
		if (!*v || asprintf(&kv, "%s=%s", in->args[0], v) < 0)
			return err_set(err, COVE_EINVAL, "line %d: ENV %s needs a value", in->line, in->args[0]);
		dockerfile_strv_free(in->args);
		in->args = calloc(2, sizeof(char *));
		if (!in->args) {
			free(kv);
			return err_set(err, COVE_EINTERNAL, "out of memory");
		}
		in->args[0] = kv;
		in->n_args = 1;
		return 0;
	}
	for (size_t i = 0; i < in->n_args; i++)
		if (!strchr(in->args[i], '=') || in->args[i][0] == '=')
			return err_set(err, COVE_EINVAL, "line %d: %s: '%s' is not KEY=VALUE", in->line, names[in->cmd],
				       in->args[i]);
	return 0;
}

static int check_args(struct df_instr *in, struct cove_err *err)
{
	bool empty = !in->rest[0];
	switch (in->cmd) {
	case DF_RUN:
	case DF_CMD:
	case DF_ENTRYPOINT:
		if (in->cmd == DF_RUN && strncmp(in->rest, "--", 2) == 0)
			return err_set(err, COVE_EINVAL, "line %d: RUN flags (%.40s) are not supported", in->line,
				       in->rest);
		if (json_form(in))
			return in->cmd == DF_RUN && in->n_args == 0
				       ? err_set(err, COVE_EINVAL, "line %d: RUN [] runs nothing", in->line)
				       : 0;
		if (empty)
			break;
		in->args = calloc(2, sizeof(char *));
		in->n_args = 1;
		return in->args && (in->args[0] = strdup(in->rest)) ? 0 : err_set(err, COVE_EINTERNAL, "out of memory");
	case DF_COPY:
	case DF_ADD:
		if (copy_flags(in, err) < 0)
			return -1;
		json_form(in);
		return check_copy(in, err);
	case DF_ENV:
	case DF_LABEL:
		return check_pairs(in, err);
	case DF_FROM:
	case DF_ARG:
	case DF_EXPOSE:
		if (words_of(in, err) < 0)
			return -1;
		if (in->n_args == 0)
			break;
		if (in->cmd == DF_ARG && in->n_args != 1)
			return err_set(err, COVE_EINVAL, "line %d: ARG takes one NAME[=DEFAULT]", in->line);
		if (in->cmd == DF_FROM && in->n_args != 1 && !(in->n_args == 3 && strcasecmp(in->args[1], "as") == 0))
			return err_set(err, COVE_EINVAL, "line %d: FROM takes an image (FROM IMAGE [AS NAME])",
				       in->line);
		return 0;
	default:
		if (!empty)
			return 0;
	}
	return err_set(err, COVE_EINVAL, "line %d: %s needs an argument", in->line, names[in->cmd]);
}

/* The next instruction's text, its continued lines joined (without the
 * '\'s), comment and blank lines inside it skipped: 1, or 0 at the end. */
static int logical_line(const char *buf, size_t len, size_t *pos, int *lineno, int *start, char **ret)
{
	char *out = NULL;
	size_t olen = 0;
	FILE *f = NULL;
	while (*pos < len) {
		const char *l = buf + *pos, *nl = memchr(l, '\n', len - *pos);
		size_t n = nl ? (size_t)(nl - l) : len - *pos;
		*pos += n + (nl != NULL);
		(*lineno)++;
		while (n && isspace((unsigned char)l[n - 1]))
			n--;
		size_t lead = 0;
		while (lead < n && isspace((unsigned char)l[lead]))
			lead++;
		if (lead == n || l[lead] == '#')
			continue;
		if (!f) {
			*start = *lineno;
			if (!(f = open_memstream(&out, &olen)))
				return -1;
		}
		bool more = l[n - 1] == '\\';
		size_t end = n - more;
		while (more && end > lead && isspace((unsigned char)l[end - 1]))
			end--;
		fwrite(l + lead, 1, end - lead, f);
		if (!more)
			break;
		fputc(' ', f);
	}
	if (!f)
		return 0;
	if (fclose(f) != 0) {
		free(out);
		return -1;
	}
	*ret = out;
	return 1;
}

/* One instruction of text into in. */
static int parse_instr(char *text, int line, struct df_instr *in, struct cove_err *err)
{
	size_t kw = strcspn(text, " \t");
	int cmd = keyword(text, kw);
	*in = (struct df_instr){ .line = line, .chmod = -1 };
	if (cmd < 0) {
		err_set(err, COVE_EINVAL, "line %d: unknown instruction '%.*s'", line, (int)(kw > 40 ? 40 : kw), text);
		free(text);
		return -1;
	}
	in->cmd = (enum df_cmd)cmd;
	in->text = text;
	const char *r = text + kw;
	r += strspn(r, " \t");
	size_t n = strlen(r);
	while (n && isspace((unsigned char)r[n - 1]))
		n--;
	in->rest = strndup(r, n);
	if (!in->rest)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	return check_args(in, err);
}

/* FROM first (ARG may come before it), once. */
static int check_order(const struct dockerfile *df, struct cove_err *err)
{
	int from = -1;
	for (size_t i = 0; i < df->n; i++) {
		const struct df_instr *in = &df->v[i];
		if (in->cmd == DF_FROM && from >= 0)
			return err_set(err, COVE_EINVAL, "line %d: a second FROM: multi-stage builds are not supported",
				       in->line);
		if (in->cmd == DF_FROM)
			from = (int)i;
		else if (from < 0 && in->cmd != DF_ARG)
			return err_set(err, COVE_EINVAL, "line %d: %s before FROM (a Dockerfile starts with FROM)",
				       in->line, names[in->cmd]);
	}
	return from < 0 ? err_set(err, COVE_EINVAL, "no FROM: a Dockerfile starts with FROM IMAGE") : 0;
}

int dockerfile_parse(const char *buf, size_t len, struct dockerfile *ret, struct cove_err *err)
{
	size_t pos = 0, cap = 0;
	int lineno = 0, start = 0, r;
	char *text = NULL;
	*ret = (struct dockerfile){ 0 };
	if (len > DOCKERFILE_MAX)
		return err_set(err, COVE_EINVAL, "the Dockerfile is over %u bytes", DOCKERFILE_MAX);
	if (memchr(buf, '\0', len))
		return err_set(err, COVE_EINVAL, "the Dockerfile holds a NUL byte: not text");
	while ((r = logical_line(buf, len, &pos, &lineno, &start, &text)) > 0) {
		if (ret->n == cap) {
			cap = cap ? 2 * cap : 16;
			struct df_instr *v = realloc(ret->v, cap * sizeof(*v));
			if (!v) {
				free(text);
				r = err_set(err, COVE_EINTERNAL, "out of memory");
				break;
			}
			ret->v = v;
		}
		r = parse_instr(text, start, &ret->v[ret->n], err);
		ret->n++;
		if (r < 0)
			break;
	}
	if (r == 0 && check_order(ret, err) == 0)
		return 0;
	if (r < 0 && !err->code)
		err_set(err, COVE_EINTERNAL, "out of memory");
	dockerfile_free(ret);
	return -1;
}

#include "common/passwd.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

/* Split one line into up to n ':'-separated fields (pointers into line,
 * which is modified). Returns the number of fields, n + 1 when there are
 * more than n: such a line is malformed, and its last field must not
 * swallow the rest (a shell of "/bin/sh:junk"). */
static int split_fields(char *line, char **f, int n)
{
	int i = 0;
	f[i++] = line;
	for (char *p = line; *p; p++)
		if (*p == ':') {
			if (i == n)
				return n + 1;
			*p = '\0';
			f[i++] = p + 1;
		}
	return i;
}

static bool parse_id(const char *s, unsigned long *ret)
{
	char *end;
	if (!*s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v > 0x7fffffffUL)
		return false;
	*ret = v;
	return true;
}

/* Iterate lines of text: copies each line into buf (truncated lines are
 * skipped) and calls fn until it returns non-zero. */
static int for_each_line(const char *text, size_t len, int (*fn)(char *line, void *arg), void *arg)
{
	char buf[1024];
	size_t start = 0;
	while (start < len) {
		const char *nl = memchr(text + start, '\n', len - start);
		size_t end = nl ? (size_t)(nl - text) : len;
		size_t n = end - start;
		if (n < sizeof(buf)) {
			memcpy(buf, text + start, n);
			buf[n] = '\0';
			int r = fn(buf, arg);
			if (r)
				return r;
		}
		start = end + 1;
	}
	return 0;
}

struct lookup_ctx {
	const char *spec;
	bool numeric;
	unsigned long id;
	struct passwd_entry *ret;
};

static int match_passwd(char *line, void *arg)
{
	struct lookup_ctx *c = arg;
	char *f[7];
	unsigned long uid, gid;
	/* A line without a name is malformed: matched by uid it would give
	 * USER="" and no supplementary groups. */
	if (split_fields(line, f, 7) != 7 || !*f[0] || !parse_id(f[2], &uid) || !parse_id(f[3], &gid))
		return 0;
	if (c->numeric ? uid != c->id : strcmp(f[0], c->spec) != 0)
		return 0;
	if (strlen(f[0]) >= sizeof(c->ret->name) || strlen(f[5]) >= sizeof(c->ret->home) ||
	    strlen(f[6]) >= sizeof(c->ret->shell))
		return 0;
	strcpy(c->ret->name, f[0]);
	c->ret->uid = uid;
	c->ret->gid = gid;
	strcpy(c->ret->home, *f[5] ? f[5] : "/");
	strcpy(c->ret->shell, *f[6] ? f[6] : "/bin/sh");
	return 1;
}

int passwd_lookup(const char *text, size_t len, const char *spec, struct passwd_entry *ret)
{
	struct passwd_entry e = { 0 };
	struct lookup_ctx c = { .spec = spec, .ret = &e };
	if (!spec || !*spec || strchr(spec, ':') || strchr(spec, '\n'))
		return -EINVAL;
	c.numeric = parse_id(spec, &c.id);
	if (!for_each_line(text, len, match_passwd, &c)) {
		if (!c.numeric)
			return -ENOENT;
		e.uid = e.gid = c.id;
		snprintf(e.name, sizeof(e.name), "%lu", c.id);
		strcpy(e.home, "/");
		strcpy(e.shell, "/bin/sh");
	}
	*ret = e;
	return 0;
}

struct groups_ctx {
	const char *name;
	gid_t *gids;
	int max, n;
};

static int match_group(char *line, void *arg)
{
	struct groups_ctx *c = arg;
	char *f[4];
	unsigned long gid;
	if (split_fields(line, f, 4) != 4 || !parse_id(f[2], &gid))
		return 0;
	char *save = NULL;
	for (char *m = strtok_r(f[3], ",", &save); m; m = strtok_r(NULL, ",", &save))
		if (strcmp(m, c->name) == 0 && c->n < c->max) {
			c->gids[c->n++] = gid;
			break;
		}
	return 0;
}

int passwd_groups(const char *text, size_t len, const char *name, gid_t *gids, int max)
{
	struct groups_ctx c = { .name = name, .gids = gids, .max = max };
	for_each_line(text, len, match_group, &c);
	return c.n;
}

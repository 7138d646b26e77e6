/* A sandbox's workspace folder (engine.h, sandbox_workdir_resolve), and
 * the user a create makes in a new root (sandbox_user_make). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/passwd.h"
#include "engine/engine.h"

#define PASSWD_MAX_BYTES (1 << 20)

/* The user's home in the image's own /etc/passwd (read on the host, no
 * symlink followed at its end), or "" when it says none. */
static void image_home(const char *image, const char *user, char *buf, size_t cap)
{
	char path[PATH_MAX];
	struct passwd_entry pw;
	snprintf(path, sizeof(path), "%s/rootfs/etc/passwd", image);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_free_ char *text = fd >= 0 ? malloc(PASSWD_MAX_BYTES) : NULL;
	ssize_t n = text ? read(fd, text, PASSWD_MAX_BYTES) : -1;
	buf[0] = '\0';
	if (n > 0 && passwd_lookup(text, (size_t)n, *user ? user : "root", &pw) == 0 && pw.home[0] == '/')
		snprintf(buf, cap, "%s", pw.home);
}

void sandbox_workdir_resolve(struct sandbox_spec *s, const char *image, const char *subvol)
{
	char home[sizeof(s->workdir)];
	if (s->workdir[0])
		return;
	if (s->cwd[0])
		snprintf(s->workdir, sizeof(s->workdir), "%s", s->cwd);
	else if (s->external)
		snprintf(s->workdir, sizeof(s->workdir), "%s", subvol);
	else {
		image_home(image, s->user, home, sizeof(home));
		snprintf(s->workdir, sizeof(s->workdir), "%s", home[0] ? home : "/");
	}
}

/* An image's /etc/NAME (no symlink followed at its end) into a buffer of
 * PASSWD_MAX_BYTES + 1, NUL-terminated; its length, or -1 with err. A
 * missing file is empty. */
static ssize_t image_etc(const char *image, const char *name, char *buf, struct cove_err *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/rootfs/etc/%s", image, name);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		buf[0] = '\0';
		return 0;
	}
	ssize_t n = fd < 0 ? -1 : read(fd, buf, PASSWD_MAX_BYTES);
	if (n < 0)
		return err_sys(err, errno, "read '%s'", path);
	if (n == PASSWD_MAX_BYTES)
		return err_set(err, COVE_ETOOBIG, "'%s' is larger than %d bytes", path, PASSWD_MAX_BYTES);
	buf[n] = '\0';
	return n;
}

/* Whether id is the third field (a uid or gid) of a line of text. */
static bool id_used(const char *text, unsigned id)
{
	for (const char *line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		const char *f = strchr(line, ':');
		f = f ? strchr(f + 1, ':') : NULL;
		if (f && strtoul(f + 1, NULL, 10) == id && f[1] >= '0' && f[1] <= '9')
			return true;
	}
	return false;
}

/* The image's file with line appended, as the root's own /etc/NAME. */
static int write_etc(const char *subvol, const char *name, const char *text, size_t n, const char *line,
		     struct cove_err *err)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/upper/root/etc/%s", subvol, name);
	FILE *f = fopen(path, "we");
	if (!f || fprintf(f, "%s%s%s", text, n && text[n - 1] != '\n' ? "\n" : "", line) < 0 || fclose(f) != 0)
		return err_sys(err, errno, "write '%s'", path);
	return 0;
}

int sandbox_user_make(const struct sandbox_spec *s, const char *image, const char *subvol, struct cove_err *err)
{
	struct passwd_entry pw;
	char line[256], path[PATH_MAX];
	_cleanup_free_ char *passwd = malloc(PASSWD_MAX_BYTES + 1), *group = malloc(PASSWD_MAX_BYTES + 1);
	if (!passwd || !group)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	ssize_t np = image_etc(image, "passwd", passwd, err), ng = np < 0 ? -1 : image_etc(image, "group", group, err);
	if (np < 0 || ng < 0)
		return -1;
	if (passwd_lookup(passwd, (size_t)np, s->user, &pw) == 0)
		return 0; /* the image has it */
	unsigned id = 1000;
	while (id_used(passwd, id) || id_used(group, id))
		id++;
	snprintf(line, sizeof(line), "%s:x:%u:%u::/home/%s:/bin/bash\n", s->user, id, id, s->user);
	if (write_etc(subvol, "passwd", passwd, (size_t)np, line, err) < 0)
		return -1;
	snprintf(line, sizeof(line), "%s:x:%u:\n", s->user, id);
	if (write_etc(subvol, "group", group, (size_t)ng, line, err) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/upper/root/home", subvol);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return err_sys(err, errno, "mkdir '%s'", path);
	snprintf(path, sizeof(path), "%s/upper/root/home/%s", subvol, s->user);
	if ((mkdir(path, 0750) < 0 && errno != EEXIST) || chown(path, id, id) < 0)
		return err_sys(err, errno, "make '%s'", path);
	return 0;
}

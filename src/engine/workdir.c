/* A sandbox's workspace folder (engine.h, sandbox_workdir_resolve). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

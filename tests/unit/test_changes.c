/* The changes of a sandbox from its upper layers (engine/changes.h), on a
 * made-up subvolume and image: files, symlinks and new directories are
 * changes; a 0/0 character device is a deletion; an opaque directory (the
 * trusted. or the user. mark) is listed as such; a directory copied up
 * unchanged is not a change, one whose mode changed is; cove's identity
 * files and /dev, /proc, /sys are left out; a symlink in an upper layer is
 * listed, never followed. Needs root (devices, trusted xattrs). */
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "engine/changes.h"
#include "tap.h"

static char base[] = "/var/tmp/cove-test-changes-XXXXXX";

static void mk(const char *fmt, const char *kind)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", base, fmt);
	int r = kind[0] == 'd' ? mkdir(p, 0755)
		: kind[0] == 'w' ? mknod(p, S_IFCHR | 0, makedev(0, 0))
		: kind[0] == 'l' ? symlink("/etc", p)
				 : (close(open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644)), 0);
	if (r < 0)
		perror(p);
}

static int rm(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	return remove(p);
}

/* The list's paths, sorted, as one string "a b c". */
static void listed(const struct changes *c, char *out, size_t cap)
{
	char buf[4096];
	ssize_t n = pread(c->list_fd, buf, sizeof(buf) - 1, 0);
	char *items[64];
	size_t k = 0;
	for (ssize_t i = 0; i < n && k < 64; i += (ssize_t)strlen(buf + i) + 1)
		items[k++] = buf + i;
	for (size_t i = 0; i < k; i++)
		for (size_t j = i + 1; j < k; j++)
			if (strcmp(items[j], items[i]) < 0) {
				char *t = items[i];
				items[i] = items[j];
				items[j] = t;
			}
	out[0] = '\0';
	for (size_t i = 0; i < k; i++)
		snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? " " : "", items[i]);
}

int main(void)
{
	if (geteuid() != 0) {
		SKIP("needs root");
		return tap_done();
	}
	if (!mkdtemp(base))
		return 1;
	static const char *const made[][2] = {
		{ "sb", "d" }, { "sb/upper", "d" }, { "sb/upper/root", "d" }, { "sb/upper/usr", "d" },
		{ "img", "d" }, { "img/rootfs", "d" }, { "img/rootfs/etc", "d" }, { "img/rootfs/etc/skel", "d" },
		{ "img/rootfs/var", "d" }, { "img/rootfs/srv", "d" },
		{ "sb/upper/root/etc", "d" }, { "sb/upper/root/etc/hostname", "f" }, { "sb/upper/root/etc/hosts", "f" },
		{ "sb/upper/root/etc/app.conf", "f" }, { "sb/upper/root/etc/motd", "w" },
		{ "sb/upper/root/etc/skel", "d" }, { "sb/upper/root/etc/skel/new", "f" },
		{ "sb/upper/root/var", "d" }, { "sb/upper/root/srv", "d" }, { "sb/upper/root/srv/x", "f" },
		{ "sb/upper/root/data", "d" }, { "sb/upper/root/data/x", "f" }, { "sb/upper/root/link", "l" },
		{ "sb/upper/root/dev", "d" }, { "sb/upper/root/dev/null", "f" }, { "sb/upper/root/proc", "d" },
		{ "sb/upper/root/usr", "d" }, { "sb/upper/root/usr/hidden", "f" },
		{ "sb/upper/usr/cove-t", "d" }, { "sb/upper/usr/cove-t/f", "f" },
	};
	for (size_t i = 0; i < sizeof(made) / sizeof(made[0]); i++)
		mk(made[i][0], made[i][1]);
	char p[512], sb[512], img[512], got[4096];
	snprintf(p, sizeof(p), "%s/sb/upper/root/etc/skel", base);
	CHECK(setxattr(p, "trusted.overlay.opaque", "y", 1, 0) == 0, "trusted opaque mark set");
	snprintf(p, sizeof(p), "%s/sb/upper/root/srv", base);
	chmod(p, 0700); /* a changed directory of the image's */
	snprintf(p, sizeof(p), "%s/sb/upper/root/data", base);
	CHECK(setxattr(p, "user.overlay.opaque", "y", 1, 0) == 0, "user opaque mark set");
	snprintf(sb, sizeof(sb), "%s/sb", base);
	snprintf(img, sizeof(img), "%s/img", base);
	struct changes *c = NULL;
	struct cove_err err = { 0 };
	CHECK(changes_collect(sb, img, true, base, &c, &err) == 0, "collected: %s", err.msg);
	if (c) {
		listed(c, got, sizeof(got));
		const char *g = got;
		CHECK_STR(g, "data data/x etc/app.conf etc/skel etc/skel/new link srv srv/x usr/cove-t "
			  "usr/cove-t/f", "the changes: %s", got);
		CHECK(c->entries == 10, "counted: %llu", (unsigned long long)c->entries);
		_cleanup_free_ char *m = changes_manifest(c);
		json_t *j = m ? json_loads(m, 0, NULL) : NULL, *o = json_object_get(j, "opaque");
		const char *o0 = json_string_value(json_array_get(o, 0)), *o1 = json_string_value(json_array_get(o, 1));
		CHECK(json_object_size(j) == 2 && json_array_size(json_object_get(j, "deleted")) == 1 &&
			      strcmp(json_string_value(json_array_get(json_object_get(j, "deleted"), 0)), "/etc/motd") == 0,
		      "the manifest's deletions: %s", m);
		CHECK(json_array_size(o) == 2 && o0 && o1 &&
			      ((strcmp(o0, "/etc/skel") == 0 && strcmp(o1, "/data") == 0) ||
			       (strcmp(o0, "/data") == 0 && strcmp(o1, "/etc/skel") == 0)),
		      "the manifest's opaque directories: %s", m);
		json_decref(j);
		changes_free(c);
	}
	/* without host layers (an OCI image's sandbox): /usr is the root
	 * overlay's, upper/usr is not read */
	c = NULL;
	CHECK(changes_collect(sb, img, false, base, &c, &err) == 0, "collected without host layers: %s", err.msg);
	if (c) {
		listed(c, got, sizeof(got));
		const char *g = got;
		CHECK_STR(g, "data data/x etc/app.conf etc/skel etc/skel/new link srv srv/x usr usr/hidden",
			  "the changes without host layers: %s", got);
		changes_free(c);
	}
	/* no upper layer at all: nothing changed */
	snprintf(p, sizeof(p), "%s/empty", base);
	mkdir(p, 0755);
	c = NULL;
	CHECK(changes_collect(p, img, true, base, &c, &err) == 0 && c && c->entries == 0 &&
		      json_array_size(c->deleted) == 0, "no upper layer: no changes");
	changes_free(c);
	c = NULL;
	snprintf(p, sizeof(p), "%s/missing", base);
	CHECK(changes_collect(p, img, true, base, &c, &err) < 0 && !c, "a missing subvolume: an error (%s)", err.msg);
	nftw(base, rm, 16, FTW_DEPTH | FTW_PHYS);
	return tap_done();
}

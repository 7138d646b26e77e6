#include "image/host_image.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/io.h"

#include "sandbox/runtime.h"
#include "sys/storage.h"

static int mkdir_mode(const char *path, mode_t mode, struct cove_err *err)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return err_sys(err, errno, "mkdir '%s'", path);
	if (chmod(path, mode) < 0)
		return err_sys(err, errno, "chmod '%s'", path);
	return 0;
}

#define HOST_IMAGE_LAYOUT "host image layout 2"

static const struct {
	const char *path;
	mode_t mode;
} skeleton[] = {
	{ "rootfs", 0755 },           { "rootfs/dev", 0755 },       { "rootfs/proc", 0555 },
	{ "rootfs/sys", 0555 },       { "rootfs/tmp", 01777 },      { "rootfs/root", 0700 },
	{ "rootfs/home", 0755 },      { "rootfs/run", 0755 },       { "rootfs/mnt", 0755 },
	{ "rootfs/srv", 0755 },       { "rootfs/media", 0755 },     { "rootfs/usr", 0755 },
	{ "rootfs/etc", 0755 },       { "rootfs/opt", 0755 },       { "rootfs/var", 0755 },
	{ "rootfs/var/tmp", 01777 },  { "rootfs/var/lib", 0755 },   { "rootfs/var/cache", 0755 },
	{ "rootfs/var/log", 0755 },   { "rootfs/var/spool", 0755 }, { "rootfs/var/mail", 02775 },
	{ "rootfs/var/local", 0755 }, { "rootfs/var/opt", 0755 },   { "rootfs/var/backups", 0755 },
};

/* The host's merged-/usr links (/bin -> usr/bin, ...), copied as they are. */
static int copy_root_links(const char *rootfs, struct cove_err *err)
{
	static const char *const names[] = { "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char src[64], target[PATH_MAX], dst[PATH_MAX];
		snprintf(src, sizeof(src), "/%s", names[i]);
		ssize_t n = readlink(src, target, sizeof(target) - 1);
		if (n < 0)
			continue;
		target[n] = '\0';
		snprintf(dst, sizeof(dst), "%s/%s", rootfs, names[i]);
		if (symlink(target, dst) < 0 && errno != EEXIST)
			return err_sys(err, errno, "symlink '%s'", dst);
	}
	return 0;
}

static int run_cp(const char *src, const char *dst, struct cove_err *err)
{
	pid_t pid = fork();
	if (pid < 0)
		return err_sys(err, errno, "fork");
	if (pid == 0) {
		execlp("cp", "cp", "-a", src, dst, (char *)NULL);
		_exit(127);
	}
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return err_set(err, COVE_EINTERNAL, "cp -a '%s' '%s' failed", src, dst);
	return 0;
}

/* The copy of /etc, made with nftw: its callback has no argument, hence
 * these two. */
static const char *copy_dst;
static struct cove_err *copy_err;

static int copy_file(const char *src, const char *dst, const struct stat *st)
{
	_cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0)
		return errno == EACCES || errno == ENOENT ? 0 : -errno; /* vanished or unreadable: skip */
	_cleanup_close_ int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st->st_mode & 07777);
	if (out < 0)
		return -errno;
	char buf[65536];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		int w = n < 0 ? -errno : io_write_all(out, buf, (size_t)n);
		if (w < 0)
			return w;
	}
	struct timespec times[2] = { st->st_atim, st->st_mtim };
	if (fchown(out, st->st_uid, st->st_gid) < 0 || fchmod(out, st->st_mode & 07777) < 0 || futimens(out, times) < 0)
		return -errno;
	return 0;
}

/* Copy one /etc entry. What others cannot read on the host is a secret
 * (shadow, gshadow, private keys, credentials): through the idmap the
 * sandbox's root would own it, so it is left out, with all below it. */
static int copy_entry(const char *path, const struct stat *st, int type, struct FTW *f)
{
	bool dir = type == FTW_D || type == FTW_DNR;
	bool readable = dir ? (st->st_mode & 005) == 005 : (st->st_mode & 004) != 0;
	if (type == FTW_NS || type == FTW_DNR || (type != FTW_SL && !readable))
		return dir ? FTW_SKIP_SUBTREE : FTW_CONTINUE;
	char dst[PATH_MAX], target[PATH_MAX];
	snprintf(dst, sizeof(dst), "%s%s", copy_dst, path + strlen("/etc"));
	int r = 0;
	if (dir) {
		if ((mkdir(dst, st->st_mode & 07777) < 0 && errno != EEXIST) ||
		    lchown(dst, st->st_uid, st->st_gid) < 0 || chmod(dst, st->st_mode & 07777) < 0)
			r = -errno;
	} else if (type == FTW_SL) {
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n >= 0) {
			target[n] = '\0';
			if (symlink(target, dst) < 0 || lchown(dst, st->st_uid, st->st_gid) < 0)
				r = -errno;
		}
	} else if (S_ISREG(st->st_mode)) {
		r = copy_file(path, dst, st);
	}
	if (r < 0) {
		err_sys(copy_err, -r, "copy '%s' to '%s'", path, dst);
		return FTW_STOP;
	}
	return FTW_CONTINUE;
}

static int copy_etc(const char *dir, struct cove_err *err)
{
	char dst[PATH_MAX];
	snprintf(dst, sizeof(dst), "%s/rootfs/etc", dir);
	copy_dst = dst;
	copy_err = err;
	int r = nftw("/etc", copy_entry, 64, FTW_PHYS | FTW_ACTIONRETVAL);
	return r == FTW_STOP || r < 0 ? err_set(err, COVE_EINTERNAL, "copying /etc failed") : 0;
}

static int populate(const char *dir, struct cove_err *err)
{
	char p[PATH_MAX];
	for (size_t i = 0; i < sizeof(skeleton) / sizeof(skeleton[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, skeleton[i].path);
		if (mkdir_mode(p, skeleton[i].mode, err) < 0)
			return -1;
	}
	snprintf(p, sizeof(p), "%s/rootfs", dir);
	if (copy_root_links(p, err) < 0)
		return -1;
	/* dpkg's database, so that root in the sandbox can install packages
	 * into its /usr with dpkg and apt. */
	snprintf(p, sizeof(p), "%s/rootfs/var/lib/dpkg", dir);
	if (access("/var/lib/dpkg", F_OK) == 0 && run_cp("/var/lib/dpkg", p, err) < 0)
		return -1;
	return copy_etc(dir, err);
}

/* What the image copies from the host, summed up: every /etc entry's path,
 * mode, owner, size and mtime, and the dpkg database's. FNV-1a. */
static uint64_t fingerprint;

static void fp_add(const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		fingerprint = (fingerprint ^ b[i]) * 0x100000001b3ull;
}

static void fp_stat(const char *path, const struct stat *st)
{
	uint64_t v[6] = { st->st_mode,
			  st->st_uid,
			  st->st_gid,
			  (uint64_t)st->st_size,
			  (uint64_t)st->st_mtim.tv_sec,
			  (uint64_t)st->st_mtim.tv_nsec };
	fp_add(path, strlen(path) + 1);
	fp_add(v, sizeof(v));
}

static int fp_entry(const char *path, const struct stat *st, int type, struct FTW *f)
{
	if (type != FTW_NS)
		fp_stat(path, st);
	return 0;
}

static uint64_t host_fingerprint(void)
{
	struct stat st;
	fingerprint = 0xcbf29ce484222325ull;
	fp_add(HOST_IMAGE_LAYOUT, sizeof(HOST_IMAGE_LAYOUT)); /* a new layout makes a new image */
	(void)nftw("/etc", fp_entry, 64, FTW_PHYS);
	if (stat("/var/lib/dpkg/status", &st) == 0)
		fp_stat("/var/lib/dpkg/status", &st);
	return fingerprint;
}

int host_image_ensure(const struct pool *pool, char ret_name[HOST_IMAGE_NAME_MAX], struct cove_err *err)
{
	char images[PATH_MAX], image[PATH_MAX], tmp[PATH_MAX], name[HOST_IMAGE_NAME_MAX];
	snprintf(images, sizeof(images), "%s/images", pool->dir);
	snprintf(tmp, sizeof(tmp), "%s/.host.tmp", images);
	if (mkdir_mode(images, 0700, err) < 0)
		return -1;
	uint64_t fp = host_fingerprint();
	snprintf(name, sizeof(name), "host-%016llx", (unsigned long long)fp);
	snprintf(image, sizeof(image), "%s/%s", images, name);
	if (storage_is_tree(pool->driver, image) == 1) {
		strcpy(ret_name, name);
		return 0;
	}
	int r = storage_delete(pool->driver, tmp);
	if (r < 0 && r != -ENOENT)
		return err_sys(err, -r, "delete '%s'", tmp);
	if ((r = storage_create(pool->driver, tmp)) < 0)
		return err_sys(err, -r, "create '%s'", tmp);
	if (populate(tmp, err) < 0)
		return -1;
	sync();
	if ((r = storage_publish(pool->driver, tmp, image)) < 0)
		return err_sys(err, -r, "make image '%s'", image);
	strcpy(ret_name, name);
	return 0;
}

void host_image_gc(const struct pool *pool, bool (*in_use)(void *arg, const char *name), void *arg)
{
	char images[PATH_MAX], path[PATH_MAX + 256];
	snprintf(images, sizeof(images), "%s/images", pool->dir);
	DIR *d = opendir(images);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		bool host_image = strncmp(e->d_name, "host-", 5) == 0 || strcmp(e->d_name, "host") == 0;
		if (!host_image || in_use(arg, e->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", images, e->d_name);
		(void)storage_delete(pool->driver, path);
	}
	if (d)
		closedir(d);
}

#include "image/host_image.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/runtime.h"
#include "sys/btrfs.h"

static int mkdir_mode(const char *path, mode_t mode, struct cove_err *err)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return err_sys(err, errno, "mkdir '%s'", path);
	if (chmod(path, mode) < 0)
		return err_sys(err, errno, "chmod '%s'", path);
	return 0;
}

/* mkdir -p of rel under base, each new directory 0755. */
static int mkdir_parents(const char *base, const char *rel, struct cove_err *err)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", base, rel);
	for (char *s = p + strlen(base) + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		int r = mkdir_mode(p, 0755, err);
		*s = '/';
		if (r < 0)
			return r;
	}
	return 0;
}

static const struct {
	const char *path;
	mode_t mode;
} skeleton[] = {
	{ "rootfs", 0755 },
	{ "rootfs/dev", 0755 },
	{ "rootfs/proc", 0555 },
	{ "rootfs/sys", 0555 },
	{ "rootfs/tmp", 01777 },
	{ "rootfs/root", 0700 },
	{ "rootfs/home", 0755 },
	{ "rootfs/run", 0755 },
	{ "rootfs/mnt", 0755 },
	{ "rootfs/srv", 0755 },
	{ "rootfs/media", 0755 },
	{ "rootfs/usr", 0755 },
	{ "rootfs/etc", 0755 },
	{ "rootfs/opt", 0755 },
	{ "rootfs/var", 0755 },
	{ "rootfs/var/tmp", 01777 },
	{ "rootfs/var/lib", 0755 },
	{ "rootfs/var/cache", 0755 },
	{ "rootfs/var/log", 0755 },
	{ "rootfs/var/spool", 0755 },
	{ "rootfs/var/mail", 02775 },
	{ "rootfs/var/local", 0755 },
	{ "rootfs/var/opt", 0755 },
	{ "rootfs/var/backups", 0755 },
	{ "lower", 0755 },
	{ "upper", 0755 },
	{ "work", 0755 },
	{ "mask", 0755 },
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

static const char *mask_base;
static struct cove_err *mask_err;

/* An /etc entry that others cannot read is a secret (shadow, private keys,
 * credentials): the sandbox's root would own it through the idmap, so it is
 * whited out of the layer rather than shown. */
static int mask_entry(const char *path, const struct stat *st, int type, struct FTW *f)
{
	if (f->level == 0 || type == FTW_SL)
		return FTW_CONTINUE;
	bool dir = type == FTW_D || type == FTW_DNR;
	bool readable = dir ? (st->st_mode & 005) == 005 : (st->st_mode & 004) != 0;
	if (type != FTW_DNR && type != FTW_NS && readable)
		return FTW_CONTINUE;
	const char *rel = path + 1; /* "etc/..." */
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", mask_base, rel);
	if (mkdir_parents(mask_base, rel, mask_err) < 0)
		return FTW_STOP;
	if (mknod(p, S_IFCHR | 0000, makedev(0, 0)) < 0 && errno != EEXIST) {
		err_sys(mask_err, errno, "whiteout '%s'", p);
		return FTW_STOP;
	}
	return dir ? FTW_SKIP_SUBTREE : FTW_CONTINUE;
}

static int build_mask(const char *dir, struct cove_err *err)
{
	char base[PATH_MAX];
	snprintf(base, sizeof(base), "%s/mask", dir);
	mask_base = base;
	mask_err = err;
	int r = nftw("/etc", mask_entry, 64, FTW_PHYS | FTW_ACTIONRETVAL);
	return r == FTW_STOP || r < 0 ? err_set(err, COVE_EINTERNAL, "masking /etc failed") : 0;
}

static int populate(const char *dir, struct cove_err *err)
{
	char p[PATH_MAX];
	for (size_t i = 0; i < sizeof(skeleton) / sizeof(skeleton[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, skeleton[i].path);
		if (mkdir_mode(p, skeleton[i].mode, err) < 0)
			return -1;
	}
	for (int i = 0; runtime_host_layers[i]; i++) {
		static const char *const kinds[] = { "lower", "upper", "work" };
		for (int k = 0; k < 3; k++) {
			snprintf(p, sizeof(p), "%s/%s/%s", dir, kinds[k], runtime_host_layers[i]);
			if (mkdir_mode(p, 0755, err) < 0)
				return -1;
		}
	}
	snprintf(p, sizeof(p), "%s/rootfs", dir);
	if (copy_root_links(p, err) < 0)
		return -1;
	/* dpkg's database, so that root in the sandbox can install packages
	 * into its /usr with dpkg and apt. */
	snprintf(p, sizeof(p), "%s/rootfs/var/lib/dpkg", dir);
	if (access("/var/lib/dpkg", F_OK) == 0 && run_cp("/var/lib/dpkg", p, err) < 0)
		return -1;
	return build_mask(dir, err);
}

int host_image_ensure(const char *pool_dir, struct cove_err *err)
{
	char images[PATH_MAX], image[PATH_MAX], tmp[PATH_MAX];
	snprintf(images, sizeof(images), "%s/images", pool_dir);
	snprintf(image, sizeof(image), "%s/host", images);
	snprintf(tmp, sizeof(tmp), "%s/.host.tmp", images);
	if (mkdir_mode(images, 0700, err) < 0)
		return -1;
	if (btrfs_is_subvol(image) == 1)
		return 0;
	int r = btrfs_subvol_delete(tmp);
	if (r < 0 && r != -ENOENT)
		return err_sys(err, -r, "delete '%s'", tmp);
	if ((r = btrfs_subvol_create(tmp)) < 0)
		return err_sys(err, -r, "create subvolume '%s'", tmp);
	if (populate(tmp, err) < 0)
		return -1;
	sync();
	if ((r = btrfs_subvol_snapshot(tmp, image, true)) < 0)
		return err_sys(err, -r, "snapshot '%s'", image);
	(void)btrfs_subvol_delete(tmp);
	return 0;
}

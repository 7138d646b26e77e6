/* The storage drivers behind one interface (storage.h). */
#include "sys/storage.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "sys/btrfs.h"
#include "sys/tree.h"

static const char *const storage_names[] = {
	[STORAGE_AUTO] = "auto",
	[STORAGE_BTRFS] = "btrfs",
	[STORAGE_OVERLAY] = "overlay",
};

const char *storage_driver_name(enum storage_driver drv)
{
	return (unsigned)drv < sizeof(storage_names) / sizeof(storage_names[0]) ? storage_names[drv] : "unknown";
}

int storage_driver_parse(const char *name, enum storage_driver *ret)
{
	for (size_t i = 0; i < sizeof(storage_names) / sizeof(storage_names[0]); i++)
		if (strcmp(name, storage_names[i]) == 0) {
			*ret = (enum storage_driver)i;
			return 0;
		}
	return -EINVAL;
}

int storage_create(enum storage_driver drv, const char *path)
{
	if (drv == STORAGE_BTRFS)
		return btrfs_subvol_create(path);
	/* The mode a new subvolume's root has. */
	return mkdir(path, 0755) < 0 ? -errno : 0;
}

int storage_snapshot(enum storage_driver drv, const char *src, const char *dst, bool readonly)
{
	if (drv == STORAGE_BTRFS)
		return btrfs_subvol_snapshot(src, dst, readonly);
	return tree_copy(src, dst);
}

int storage_publish(enum storage_driver drv, const char *tmp, const char *dst)
{
	if (drv == STORAGE_BTRFS) {
		int r = btrfs_subvol_snapshot(tmp, dst, true);
		if (r == 0)
			(void)btrfs_subvol_delete(tmp);
		return r;
	}
	/* RENAME_NOREPLACE: dst must not exist, as for a snapshot. */
	return renameat2(AT_FDCWD, tmp, AT_FDCWD, dst, RENAME_NOREPLACE) < 0 ? -errno : 0;
}

int storage_delete(enum storage_driver drv, const char *path)
{
	if (drv == STORAGE_BTRFS)
		return btrfs_subvol_delete(path);
	return tree_remove(path);
}

int storage_is_tree(enum storage_driver drv, const char *path)
{
	if (drv == STORAGE_BTRFS)
		return btrfs_is_subvol(path);
	struct stat st;
	if (lstat(path, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode);
}

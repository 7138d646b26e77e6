/* libFuzzer harness for the layer unpacker (src/image/layer.c): each input
 * is a layer (a tar, gzip or zstd) applied onto an empty tree in a scratch
 * folder, which is emptied after.
 *
 * Beyond "no crash": nothing is ever made outside the tree. Beside the
 * tree is a folder "outside" (and the seeds carry symlinks and hard links
 * pointing there by "../outside"): it must stay
 * empty whatever the layer, accepted or refused. A refusal always says why.
 * Needs root (owners, capabilities) like the unit tests.
 *
 *   scripts/fuzz.sh layer
 */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/layer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One scratch folder, emptied when the harness starts (libFuzzer's end of
 * a timed run skips atexit): one run of this harness at a time. */
#define BASE "/tmp/cove-fuzz-layer"
static char root[64], outside[64];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	return ftw->level == 0 ? 0 : flag == FTW_DP ? rmdir(path) : unlink(path);
}

static bool empty(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	if (d)
		closedir(d);
	return d && n == 0;
}

static int rm_all(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!root[0]) {
		(void)nftw(BASE, rm_all, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
		snprintf(root, sizeof(root), "%s/root", BASE);
		snprintf(outside, sizeof(outside), "%s/outside", BASE);
		if (mkdir(BASE, 0700) < 0 || mkdir(root, 0755) < 0 || mkdir(outside, 0755) < 0)
			abort();
	}
	int fd = memfd_create("layer", MFD_CLOEXEC);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) != 0)
		abort();
	int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct cove_err err = { 0 };
	int r = layer_apply(rootfd, fd, NULL, NULL, NULL, &err);
	if (r < 0 && !err.msg[0])
		abort();
	close(rootfd);
	close(fd);
	if (!empty(outside))
		abort();
	(void)nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	return 0;
}

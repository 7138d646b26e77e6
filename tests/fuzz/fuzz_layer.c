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
#include "scratch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One scratch folder, emptied when the harness starts (libFuzzer's end of
 * a timed run skips atexit): one run of this harness at a time. */
#define BASE "/tmp/cove-fuzz-layer"
static char root[64], outside[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!root[0]) {
		(void)nftw(BASE, scratch_rm_all, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
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
	if (scratch_entries(outside) != 0)
		abort();
	(void)nftw(root, scratch_rm_inside, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	return 0;
}

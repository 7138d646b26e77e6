/* libFuzzer harness for PUT /v1/sandboxes/{id}/files/tar: each input is a
 * request body, taken as coved takes it (src/engine/files_tar.c, included
 * for its static passes): the first pass (check_spool) accepts or refuses
 * it, the second (produce) turns an accepted one into the entry stream, and
 * cove-init's extract (src/init/files.c, through extract_shim.c) makes the
 * entries beneath a scratch folder.
 *
 * Beyond "no crash, no leak": nothing is ever made or changed outside the
 * folder. The folder holds what a hostile sandbox would leave there before
 * the upload: a symlink "esc" to ../outside, one "abs" to the absolute path
 * of outside, and a real folder "dir" with a symlink "up" to "../.." in it;
 * beside it, "outside" must stay empty and the scratch base hold only the
 * two. A refusal always says why. Needs root like the unit tests.
 *
 *   scripts/fuzz.sh files_tar
 */
#include <fcntl.h>
#include <sys/mman.h>

#include "engine/files_tar.c"
#include "scratch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
void fuzz_extract(int root, int stream);

/* What files_tar.c calls outside the two passes: never reached here. */
struct engine *engine_ctx;

char *changes_manifest(const struct changes *c)
{
	abort();
}

int entry_stream_read(struct entry_stream *s)
{
	abort();
}

enum stream_event entry_stream_next(struct entry_stream *s, const char **ret_buf, size_t *ret_len)
{
	abort();
}

void files_cancel(struct file_op *op)
{
	abort();
}

int files_start(struct sandbox *sb, const struct file_request *fr, const struct file_caller *c, struct file_op **ret,
		struct cove_err *err)
{
	abort();
}

void op_end(struct file_op *op, const struct files_result *res, const struct cove_err *err)
{
	abort();
}

void op_fail_entry(struct file_op *op, int errnum, const char *entry)
{
	abort();
}

/* One scratch base, emptied when the harness starts (libFuzzer's end of a
 * timed run skips atexit): one run of this harness at a time. */
#define BASE "/tmp/cove-fuzz-files-tar"
#define STREAM_MAX (64 << 20) /* a sparse member's holes can claim terabytes */

/* The folder as a hostile sandbox leaves it. */
static void plant(void)
{
	if (symlink("../outside", BASE "/root/esc") < 0 || symlink(BASE "/outside", BASE "/root/abs") < 0 ||
	    mkdir(BASE "/root/dir", 0755) < 0 || symlink("../..", BASE "/root/dir/up") < 0)
		abort();
}

static void setup(void)
{
	(void)nftw(BASE, scratch_rm_all, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	if (mkdir(BASE, 0700) < 0 || mkdir(BASE "/root", 0755) < 0 || mkdir(BASE "/outside", 0755) < 0)
		abort();
	plant();
}

/* The second pass into a memfd: the entry stream as init reads it; -1 when
 * it stops early (a member the first pass read fine that fails now, or a
 * stream past STREAM_MAX). */
static int second_pass(int body, int stream)
{
	struct tar_state t = { .out = evbuffer_new() };
	struct file_op op = { .kind = FK_EXTRACT, .tar = &t };
	struct cove_err err = { 0 };
	size_t total = 0;
	int r = t.out && (t.ar = open_spool(body, &err)) ? 0 : -1;
	while (r == 0 && !(t.ended && evbuffer_get_length(t.out) == 0)) {
		r = produce(&op);
		total += evbuffer_get_length(t.out);
		while (r == 0 && evbuffer_get_length(t.out) > 0)
			if (evbuffer_write(t.out, stream) < 0)
				abort();
		if (total > STREAM_MAX)
			r = -1;
	}
	if (t.ar)
		archive_read_free(t.ar);
	if (t.out)
		evbuffer_free(t.out);
	return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool ready;
	if (!ready) {
		setup();
		ready = true;
	}
	int body = memfd_create("body", MFD_CLOEXEC), stream = memfd_create("stream", MFD_CLOEXEC);
	if (body < 0 || stream < 0 || write(body, data, size) != (ssize_t)size)
		abort();
	struct cove_err err = { 0 };
	if (check_spool(body, &err) < 0) {
		if (!err.msg[0])
			abort(); /* a refusal says why */
	} else if (second_pass(body, stream) == 0) {
		int root = open(BASE "/root", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (root < 0 || lseek(stream, 0, SEEK_SET) != 0)
			abort();
		fuzz_extract(root, stream);
		close(root);
	}
	close(body);
	close(stream);
	if (scratch_entries(BASE "/outside") != 0 || scratch_entries(BASE) != 2)
		abort(); /* something was made outside the folder */
	(void)nftw(BASE "/root", scratch_rm_inside, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	plant();
	return 0;
}

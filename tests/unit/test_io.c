/* io_openat2 against renames elsewhere: the kernel refuses a ".." resolved
 * inside a root while any rename happens (EAGAIN); io_openat2 tries again. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/openat2.h>

#include "common/io.h"
#include "tap.h"

static atomic_bool stop;
static char dir[64];

/* Renames, as a busy host (or another sandbox) does all the time. */
static void *rename_forever(void *arg)
{
	char a[128], b[128];
	snprintf(a, sizeof(a), "%s/x", dir);
	snprintf(b, sizeof(b), "%s/y", dir);
	while (!atomic_load(&stop)) {
		(void)!rename(a, b);
		(void)!rename(b, a);
	}
	return NULL;
}

int main(void)
{
	snprintf(dir, sizeof(dir), "/tmp/cove-test-io-XXXXXX");
	CHECK1(mkdtemp(dir) != NULL, "a scratch folder");
	char p[128];
	snprintf(p, sizeof(p), "%s/a", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/a/b", dir);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/x", dir);
	mkdir(p, 0700);
	int root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT };
	int fd = io_openat2(root, "a/../a/b", &how);
	CHECK(fd >= 0, "a path with '..' opens inside the root");
	close(fd);
	CHECK(io_openat2(root, "nothing/../here", &how) == -ENOENT, "a missing path is -ENOENT, not retried");

	pthread_t t;
	pthread_create(&t, NULL, rename_forever, NULL);
	int failures = 0, raw_eagain = 0;
	for (int i = 0; i < 20000; i++) {
		/* The bare syscall, to show what the retry is for (not asserted:
		 * whether a race is hit depends on the scheduler). */
		int raw = (int)syscall(SYS_openat2, root, "a/../a/b", &how, sizeof(how));
		if (raw < 0 && errno == EAGAIN)
			raw_eagain++;
		else if (raw >= 0)
			close(raw);
		fd = io_openat2(root, "a/../a/b", &how);
		if (fd < 0)
			failures++;
		else
			close(fd);
	}
	atomic_store(&stop, true);
	pthread_join(t, NULL);
	printf("# the bare openat2 answered EAGAIN %d times in 20000\n", raw_eagain);
	CHECK(failures == 0, "io_openat2 never fails while renames run (%d failures)", failures);

	/* The test-only EIO switch: n armed writes fail, then writes work. */
	int pfd[2];
	CHECK(pipe(pfd) == 0, "a pipe");
	CHECK(!io_fault_eio(), "nothing armed: no fault");
	io_fault_arm_eio(2);
	CHECK(io_write_all(pfd[1], "a", 1) == -EIO, "the first armed write fails with EIO");
	CHECK(io_write_all(pfd[1], "b", 1) == -EIO, "the second armed write fails with EIO");
	CHECK(io_write_all(pfd[1], "c", 1) == 0 && !io_fault_eio(), "then writes work again");
	char got[4] = { 0 };
	CHECK(read(pfd[0], got, sizeof(got)) == 1 && got[0] == 'c', "only the unfailed write reached the fd");
	close(pfd[0]);
	close(pfd[1]);

	close(root);
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	(void)!system(cmd);
	return tap_done();
}

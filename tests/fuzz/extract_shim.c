/* cove-init's side of PUT /files/tar for fuzz_files_tar.c: its extraction
 * (src/init/extract.c, included whole with src/init/files.c, the code a
 * sandbox's init runs) in a translation unit of its own, since init's
 * struct file_op is not coved's. What extract needs of the rest of init is
 * never called on its way: each stub aborts. */
#include "init/files.c"
#include "init/extract.c"
#include "init/replace.c"

void fuzz_extract(int root, int stream);

int init_send(const struct wire_hdr *h, int fd, bool block)
{
	abort();
}

unsigned init_connection(void)
{
	abort();
}

int init_become_user(const char *spec, struct passwd_entry *pw)
{
	abort();
}

/* The entry stream is read from stream; the answer is written after it. */
void fuzz_extract(int root, int stream)
{
	files_extract(root, stream);
}

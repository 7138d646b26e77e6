/* What cove-init's file operations (files.c) share with the extraction of
 * an entry stream (extract.c). */
#pragma once
#include <stddef.h>
#include <sys/types.h>

#define FILES_DIR_MODE 0755 /* directories made by mkdir and parents=1 */
#define FILES_IO_CHUNK 65536

struct wire_entry;

/* Exactly n bytes, or -EPIPE when the stream ends first. */
int files_read_all(int fd, void *buf, size_t n);
/* A header with its path and link target (NULL: none). 0 or -errno. */
int files_send_entry(int sock, struct wire_entry *e, const char *path, const char *link);
/* chmod(2) of what an O_PATH fd names. 0 or -errno. */
int files_chmod_opath(int fd, mode_t mode);
/* The entries on sock made beneath root, until the end; then one answer on
 * sock (WIRE_ENTRY_END: how many were made, and 0 or the errno and the
 * entry that stopped it). */
void files_extract(int root, int sock);

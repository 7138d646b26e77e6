/* Scope-bound cleanup, in the manner of systemd and bubblewrap.
 *
 *   _cleanup_free_ char *s = strdup(x);     freed at end of scope
 *   _cleanup_close_ int fd = open(...);     closed at end of scope (if >= 0)
 *   return TAKE_PTR(s);                     hand ownership to the caller
 */
#pragma once
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static inline void cleanup_freep(void *p)
{
	free(*(void **)p);
}

static inline void cleanup_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		(void)close(*fd);
		errno = saved;
	}
}

#define _cleanup_free_ __attribute__((cleanup(cleanup_freep)))
#define _cleanup_close_ __attribute__((cleanup(cleanup_closep)))

#define TAKE_PTR(p)                          \
	({                                   \
		__typeof__(p) _taken_ = (p); \
		(p) = NULL;                  \
		_taken_;                     \
	})
#define TAKE_FD(fd)                    \
	({                             \
		int _taken_fd_ = (fd); \
		(fd) = -1;             \
		_taken_fd_;            \
	})

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

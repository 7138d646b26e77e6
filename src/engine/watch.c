/* Watch: file-change events under a folder of a sandbox, streamed onto an
 * output (engine/watch.h; over HTTP: GET /v1/sandboxes/{id}/files/watch,
 * NDJSON).
 *
 * coved never resolves a sandbox's path itself (see files.c): cove-init
 * opens the folder inside the sandbox's root, as the request's user, and
 * hands back its fd (WIRE_OPEN, kind READ). coved puts an inotify watch on
 * that very inode through /proc/self/fd/N, a magic link to our own fd, not
 * a path of the sandbox. The overlay's inodes are the ones the sandbox's
 * processes change through the VFS, so a watch from the host sees their
 * changes (copied-up files included).
 *
 * A recursive watch walks the subfolders from the folder's fd, one name at
 * a time, with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
 * RESOLVE_NO_XDEV): no symlink is followed, nothing outside the folder is
 * reached, and mounts inside it are not entered. The walk runs as coved,
 * not as the request's user: a folder the user may not list is watched too
 * (names only, never contents). A folder made (or moved in) later is
 * watched when its event comes, opened the same way from the folder's fd
 * (kept for this) by its path of names; what it got before its watch was
 * in place is reported as create events from a scan of it, so a create may
 * come twice. After an overflow, folders made meanwhile may be missed: a
 * client should take overflow as "look again". Names are relative to the
 * watched folder, as E2B's WatchDir gives them.
 *
 * Events (struct watch_event): start once watching; then create
 * (IN_CREATE), write (IN_MODIFY: one per write, as envd reports fsnotify's
 * WRITE), remove (IN_DELETE), rename (IN_MOVED_FROM with the old name and
 * moved from, IN_MOVED_TO with the new name and moved to; both halves carry
 * the same cookie), chmod (IN_ATTRIB: mode, owner, times); a Files API
 * write that replaced a file whole is one write (replacement_event);
 * overflow when
 * the kernel's queue overflowed and events were lost; a keepalive after a
 * silence; the output's close with an error when coved ends the stream
 * (the folder removed, the sandbox deleted, too many folders). Otherwise
 * the stream lasts until the consumer cancels it, which frees everything
 * it held.
 *
 * Bounded: WATCH_MAX_STREAMS streams (inotify instances are a scarce host
 * resource: 128 per user by default), WATCH_MAX_DIRS folders a stream, and
 * a consumer that reads slower than events come pauses the output: coved
 * stops reading the inotify fd, the kernel's queue fills and overflows,
 * and the consumer gets an overflow event instead of coved's memory
 * growing. */
#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/array.h"
#include "common/cleanup.h"
#include "common/io.h"
#include "common/log.h"
#include "common/wire.h"
#include "engine/engine.h"
#include "engine/output.h"
#include "engine/watch.h"

#define WATCH_MAX_STREAMS 64
#define WATCH_MAX_DIRS 8192
#define WATCH_MAX_DEPTH 128    /* folders below the watched one that are watched */
#define WATCH_OPEN_TIMEOUT 300 /* seconds; cove-init answers or its child dies: a backstop */
#define WATCH_MAX_USER 63
#define WATCH_PATH_MAX ((WATCH_MAX_DEPTH + 2) * (NAME_MAX + 1)) /* a relative name, at most */
#define WATCH_MASK \
	(IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_ONLYDIR | IN_EXCL_UNLINK)

/* One watched folder. The watched folder itself has parent_wd 0 (inotify's
 * watch descriptors start at 1) and name "". */
struct watched_dir {
	int wd;
	int parent_wd;
	char *name; /* in the parent */
};

struct watch {
	struct watch *next;
	struct sandbox *sb;
	struct output *out;
	uint32_t seq; /* of the open request to init; 0 once answered */
	bool recursive;
	bool started; /* WATCH_START went out */
	bool paused;  /* the consumer is behind: not reading the inotify fd */
	int keepalive;
	int root_fd; /* the watched folder */
	int ino_fd;
	int root_wd;
	struct event *ino_ev;
	struct event *tick;       /* every second: see on_tick */
	int seconds;              /* waiting for init's answer, then silent */
	struct watched_dir *dirs; /* sorted by wd */
	size_t n_dirs, cap_dirs;
	int moved_wd; /* a watched folder moved away (0: none): where to, the next event tells */
	uint32_t moved_cookie;
	uint32_t replace_cookie; /* a Files API replacement moved from its passing name */
	char path[PATH_MAX];
};

static struct watch *watches;
static int n_watches;

static void watch_free(struct watch *w)
{
	for (struct watch **pp = &watches; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	n_watches--;
	if (w->ino_ev)
		event_free(w->ino_ev);
	if (w->tick)
		event_free(w->tick);
	if (w->ino_fd >= 0)
		close(w->ino_fd);
	if (w->root_fd >= 0)
		close(w->root_fd);
	for (size_t i = 0; i < w->n_dirs; i++)
		free(w->dirs[i].name);
	free(w->dirs);
	free(w);
}

/* ---- the watched folders, by watch descriptor ---- */

/* The index of wd in w->dirs, or where it would go (*found false). */
static size_t dir_slot(const struct watch *w, int wd, bool *found)
{
	size_t lo = 0, hi = w->n_dirs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (w->dirs[mid].wd < wd)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < w->n_dirs && w->dirs[lo].wd == wd;
	return lo;
}

static struct watched_dir *dir_find(struct watch *w, int wd)
{
	bool found;
	size_t i = dir_slot(w, wd, &found);
	return found ? &w->dirs[i] : NULL;
}

/* Record a new watch. 0, or -ENOMEM. */
static int dir_insert(struct watch *w, int wd, int parent_wd, const char *name)
{
	bool found;
	size_t i = dir_slot(w, wd, &found);
	struct watched_dir *dirs = array_room_for_one(w->dirs, w->n_dirs, &w->cap_dirs, sizeof(*dirs), 16);
	if (!dirs)
		return -ENOMEM;
	w->dirs = dirs;
	char *copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	memmove(&w->dirs[i + 1], &w->dirs[i], (w->n_dirs - i) * sizeof(w->dirs[0]));
	w->dirs[i].wd = wd;
	w->dirs[i].parent_wd = parent_wd;
	w->dirs[i].name = copy;
	w->n_dirs++;
	return 0;
}

static void dir_remove(struct watch *w, int wd)
{
	bool found;
	size_t i = dir_slot(w, wd, &found);
	if (!found)
		return;
	free(w->dirs[i].name);
	memmove(&w->dirs[i], &w->dirs[i + 1], (w->n_dirs - i - 1) * sizeof(w->dirs[0]));
	w->n_dirs--;
}

/* The folder watched as wd is top, or lies under it. */
static bool dir_is_under(struct watch *w, int wd, int top)
{
	for (size_t hops = 0; wd && hops <= w->n_dirs; hops++) {
		if (wd == top)
			return true;
		const struct watched_dir *d = dir_find(w, wd);
		wd = d ? d->parent_wd : 0;
	}
	return false;
}

static int dir_depth(struct watch *w, int wd)
{
	int depth = 0;
	for (const struct watched_dir *d = dir_find(w, wd); d && d->parent_wd && depth <= WATCH_MAX_DEPTH;
	     d = dir_find(w, d->parent_wd))
		depth++;
	return depth;
}

/* Stop watching top and everything under it (moved out of the folder). */
static void dir_drop_tree(struct watch *w, int top)
{
	int *doomed = calloc(w->n_dirs, sizeof(int));
	size_t n = 0;
	for (size_t i = 0; doomed && i < w->n_dirs; i++)
		if (dir_is_under(w, w->dirs[i].wd, top))
			doomed[n++] = w->dirs[i].wd;
	for (size_t i = 0; i < n; i++) {
		(void)inotify_rm_watch(w->ino_fd, doomed[i]);
		dir_remove(w, doomed[i]);
	}
	if (!doomed) { /* out of memory: at least the top, whose events would name it wrongly */
		(void)inotify_rm_watch(w->ino_fd, top);
		dir_remove(w, top);
	}
	free(doomed);
}

/* name in the folder watched as wd, relative to the watched folder, into
 * buf. Built from the end: name, then each parent's name before it. Returns
 * buf, or NULL when wd is unknown or the path does not fit. */
static const char *rel_path(struct watch *w, int wd, const char *name, char *buf, size_t cap)
{
	size_t start = cap - 1, n = strlen(name);
	buf[start] = '\0';
	if (n >= start)
		return NULL;
	start -= n;
	memcpy(buf + start, name, n);
	for (size_t hops = 0; wd != w->root_wd; hops++) {
		const struct watched_dir *d = dir_find(w, wd);
		if (!d || hops > w->n_dirs)
			return NULL;
		n = strlen(d->name);
		bool slash = buf[start] != '\0';
		if (n + slash >= start)
			return NULL;
		if (slash)
			buf[--start] = '/';
		start -= n;
		memcpy(buf + start, d->name, n);
		wd = d->parent_wd;
	}
	return buf + start;
}

/* ---- output ---- */

static void emit(struct watch *w, const struct watch_event *e)
{
	struct out_event ev = { .type = OUT_EVENT, .event = e };
	output_write(w->out, &ev);
	w->seconds = 0;
}

static void emit_type(struct watch *w, enum watch_event_type type)
{
	struct watch_event e = { .type = type };
	emit(w, &e);
}

static void emit_change(struct watch *w, enum watch_event_type type, int wd, const char *name, bool is_dir,
			enum watch_moved moved, uint32_t cookie)
{
	static char buf[WATCH_PATH_MAX];
	const char *rel = rel_path(w, wd, name, buf, sizeof(buf));
	struct watch_event e = { .type = type, .name = rel, .is_dir = is_dir, .moved = moved, .cookie = cookie };
	if (rel)
		emit(w, &e);
}

/* End the stream (or, before it began, the watch) with an error. Frees w. */
static void end_with_error(struct watch *w, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void end_with_error(struct watch *w, int code, const char *fmt, ...)
{
	struct cove_err err = { .code = code };
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err.msg, sizeof(err.msg), fmt, ap);
	va_end(ap);
	output_close(w->out, &err);
	watch_free(w);
}

static int read_events(struct watch *w);

/* The consumer is behind: the inotify fd is not read until it catches up
 * (the kernel's queue overflows meanwhile, not coved's memory). */
static void watch_pause(void *arg)
{
	struct watch *w = arg;
	if (w->paused || !w->ino_ev)
		return;
	w->paused = true;
	event_del(w->ino_ev);
}

static void watch_resume(void *arg)
{
	struct watch *w = arg;
	if (!w->paused)
		return;
	w->paused = false;
	event_add(w->ino_ev, NULL);
	(void)read_events(w); /* may free w */
}

/* The consumer is gone: nothing it held stays. */
static void watch_cancel(void *arg)
{
	watch_free(arg);
}

static const struct output_producer watch_producer = { .pause = watch_pause,
						       .resume = watch_resume,
						       .cancel = watch_cancel };

/* ---- walking folders ---- */

/* A folder below dirfd (one name, or a path of names from the watched
 * folder), never through a symlink, "..", or onto another mount. */
static int open_dir_beneath(int dirfd, const char *path)
{
	struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
					   RESOLVE_NO_XDEV };
	return io_openat2(dirfd, path, &how);
}

/* Watch the folder open as fd, recorded as name in parent_wd. Returns its
 * wd; 0 when it was watched already (the same inode reached twice: a bind
 * mount); -ENOSPC at the limit, -errno. */
static int watch_dir(struct watch *w, int fd, int parent_wd, const char *name)
{
	char link[64];
	if (w->n_dirs >= WATCH_MAX_DIRS)
		return -ENOSPC;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	int wd = inotify_add_watch(w->ino_fd, link, WATCH_MASK);
	if (wd < 0)
		return -errno;
	if (dir_find(w, wd))
		return 0;
	int r = dir_insert(w, wd, parent_wd, name);
	if (r < 0) {
		(void)inotify_rm_watch(w->ino_fd, wd);
		return r;
	}
	return wd;
}

/* Watch the subfolders of the folder open as fd (watched as wd), and
 * theirs. With report set, each entry found is reported as created: the
 * folder is new to the watch, and what it holds was made before its watch
 * was in place. Takes fd. 0, or -ENOSPC / -ENOMEM (nothing else stops a
 * walk: a folder that cannot be opened, a symlink for one, is passed over). */
static int walk(struct watch *w, int fd, int wd, int depth, bool report)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	struct dirent *e;
	int r = 0;
	while (r == 0 && (e = readdir(d))) {
		struct stat st;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		bool is_dir = e->d_type == DT_DIR;
		if (e->d_type == DT_UNKNOWN)
			is_dir = fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
		if (report)
			emit_change(w, WATCH_CREATE, wd, e->d_name, is_dir, WATCH_MOVED_NONE, 0);
		if (!is_dir || depth > WATCH_MAX_DEPTH)
			continue;
		int child = open_dir_beneath(dirfd(d), e->d_name);
		if (child < 0)
			continue;
		int cwd = watch_dir(w, child, wd, e->d_name);
		if (cwd > 0)
			r = walk(w, child, cwd, depth + 1, report);
		else
			close(child);
		if (cwd == -ENOSPC || cwd == -ENOMEM)
			r = cwd;
	}
	closedir(d);
	return r;
}

/* Too many folders: the stream cannot be complete any more. Frees w. */
static void end_full(struct watch *w, int r)
{
	if (r == -ENOSPC)
		end_with_error(w, COVE_ETOOBIG, "watch '%s': more than %d folders, or the host's inotify watch limit",
			       w->path, WATCH_MAX_DIRS);
	else
		end_with_error(w, COVE_EINTERNAL, "watch '%s': out of memory", w->path);
}

/* A folder appeared as name in the folder watched as parent_wd: watch it
 * and what it holds. Returns 0, or -1 when the stream ended (w freed). */
static int add_new_dir(struct watch *w, int parent_wd, const char *name)
{
	static char buf[WATCH_PATH_MAX];
	int depth = dir_depth(w, parent_wd) + 1;
	const char *rel = rel_path(w, parent_wd, name, buf, sizeof(buf));
	if (!rel || depth > WATCH_MAX_DEPTH)
		return 0;
	int fd = open_dir_beneath(w->root_fd, rel);
	if (fd < 0)
		return 0; /* gone again, or replaced by something else */
	int wd = watch_dir(w, fd, parent_wd, name);
	int r = wd > 0 ? walk(w, fd, wd, depth + 1, true) : (close(fd), wd);
	if (r == -ENOSPC || r == -ENOMEM) {
		end_full(w, r);
		return -1;
	}
	return 0;
}

/* ---- events ---- */

/* The event's type, or WATCH_START for none reported. */
static enum watch_event_type type_of(uint32_t mask)
{
	if (mask & IN_CREATE)
		return WATCH_CREATE;
	if (mask & IN_MODIFY)
		return WATCH_WRITE;
	if (mask & IN_DELETE)
		return WATCH_REMOVE;
	if (mask & (IN_MOVED_FROM | IN_MOVED_TO))
		return WATCH_RENAME;
	if (mask & IN_ATTRIB)
		return WATCH_CHMOD;
	return WATCH_START;
}

/* A folder of the watch moved away last time; unless this event is its
 * arrival, it left the watched folder. */
static void settle_move(struct watch *w, const struct inotify_event *ev)
{
	if (!w->moved_wd || ((ev->mask & IN_MOVED_TO) && ev->cookie == w->moved_cookie))
		return;
	dir_drop_tree(w, w->moved_wd);
	w->moved_wd = 0;
}

/* Keep the watches of folders in step: made, moved in, moved away. Returns
 * 0, or -1 when the stream ended (w freed). */
static int follow_dirs(struct watch *w, const struct inotify_event *ev)
{
	if (ev->mask & IN_MOVED_FROM) {
		for (size_t i = 0; i < w->n_dirs; i++)
			if (w->dirs[i].parent_wd == ev->wd && strcmp(w->dirs[i].name, ev->name) == 0) {
				w->moved_cookie = ev->cookie;
				w->moved_wd = w->dirs[i].wd;
				break;
			}
		return 0;
	}
	if ((ev->mask & IN_MOVED_TO) && w->moved_wd && ev->cookie == w->moved_cookie) {
		struct watched_dir *d = dir_find(w, w->moved_wd);
		char *name = strdup(ev->name);
		w->moved_wd = 0;
		if (d && name) {
			free(d->name);
			d->name = name;
			d->parent_wd = ev->wd;
			return 0;
		}
		free(name);
		if (d)
			dir_drop_tree(w, d->wd);
	}
	if (ev->mask & (IN_CREATE | IN_MOVED_TO))
		return add_new_dir(w, ev->wd, ev->name);
	return 0;
}

/* A Files API write's own names (WIRE_PASSING_PREFIX in cove-init's
 * replace.c; "#<inode>", the kernel's for an unnamed O_TMPFILE file that
 * is written): not the sandbox's files. */
static bool is_replacement(const char *name)
{
	if (strncmp(name, WIRE_PASSING_PREFIX, strlen(WIRE_PASSING_PREFIX)) == 0)
		return true;
	return name[0] == '#' && name[1] && strspn(name + 1, "0123456789") == strlen(name + 1);
}

/* A write's replacement is made unnamed and renamed over the file once
 * whole: its own events are left out, and its arrival under the file's
 * name is reported as the write it is. true: ev is left out. */
static bool replacement_event(struct watch *w, const struct inotify_event *ev, enum watch_event_type *type)
{
	if (is_replacement(ev->name)) {
		if (ev->mask & IN_MOVED_FROM)
			w->replace_cookie = ev->cookie;
		return true;
	}
	if ((ev->mask & IN_MOVED_TO) && w->replace_cookie && ev->cookie == w->replace_cookie) {
		w->replace_cookie = 0;
		*type = WATCH_WRITE;
	}
	return false;
}

/* One inotify event. Returns 0, or -1 when the stream ended (w freed). */
static int handle_event(struct watch *w, const struct inotify_event *ev)
{
	if (ev->mask & IN_Q_OVERFLOW) {
		emit_type(w, WATCH_OVERFLOW);
		return 0;
	}
	settle_move(w, ev);
	if (ev->mask & IN_IGNORED) {
		if (ev->wd != w->root_wd) {
			dir_remove(w, ev->wd);
			return 0;
		}
		end_with_error(w, COVE_ENOTFOUND, "watch '%s': the folder was removed", w->path);
		return -1;
	}
	enum watch_event_type type = type_of(ev->mask);
	/* Events on a folder itself (no name) are reported by its parent. */
	if (type == WATCH_START || ev->len == 0 || !ev->name[0] || !dir_find(w, ev->wd) ||
	    replacement_event(w, ev, &type))
		return 0;
	bool is_dir = ev->mask & IN_ISDIR;
	enum watch_moved moved = type == WATCH_WRITE	     ? WATCH_MOVED_NONE
				 : (ev->mask & IN_MOVED_FROM) ? WATCH_MOVED_FROM
				 : (ev->mask & IN_MOVED_TO)   ? WATCH_MOVED_TO
							      : WATCH_MOVED_NONE;
	emit_change(w, type, ev->wd, ev->name, is_dir, moved, moved ? ev->cookie : 0);
	if (w->recursive && is_dir)
		return follow_dirs(w, ev);
	return 0;
}

/* Handle the events queued, unless the client is behind. Returns 0, or -1
 * when the stream ended (w freed). */
static int read_events(struct watch *w)
{
	char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	while (!w->paused) {
		ssize_t n = read(w->ino_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (ssize_t off = 0; off + (ssize_t)sizeof(struct inotify_event) <= n;) {
			const struct inotify_event *ev = (const struct inotify_event *)(buf + off);
			if (handle_event(w, ev) < 0)
				return -1;
			off += (ssize_t)sizeof(*ev) + ev->len;
		}
	}
	return 0;
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	(void)read_events(arg);
}

/* Before init's answer: a backstop (init answers, or its child dies and
 * init answers for it). Then: a keepalive after a silence, and the check
 * that the folder still exists. Its removal has no event while coved holds
 * its fd (the kernel reports IN_DELETE_SELF when the last reference goes),
 * and the fd is needed to open folders made later beneath it. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct watch *w = arg;
	struct stat st;
	w->seconds++;
	if (!w->started) {
		if (w->seconds < WATCH_OPEN_TIMEOUT)
			return;
		log_warn("sandbox %s: watch '%s': cove-init did not answer", w->sb->id, w->path);
		end_with_error(w, COVE_EINTERNAL, "watch '%s': no answer from the sandbox", w->path);
	} else if (fstat(w->root_fd, &st) == 0 && st.st_nlink == 0) {
		if (read_events(w) == 0) /* what came before, first */
			end_with_error(w, COVE_ENOTFOUND, "watch '%s': the folder was removed", w->path);
	} else if (w->seconds >= w->keepalive) {
		struct out_event ev = { .type = OUT_KEEPALIVE };
		output_write(w->out, &ev);
		w->seconds = 0;
	}
}

/* ---- starting ---- */

static void open_failed(struct watch *w, int errnum)
{
	int code = COVE_EINVAL; /* ENOTDIR, ELOOP, ENAMETOOLONG, EINVAL (a FIFO, a device) */
	if (errnum == ENOENT)
		code = COVE_ENOTFOUND;
	else if (errnum == EACCES || errnum == EPERM)
		code = COVE_EPERM;
	else if (errnum == EIO || errnum == ENOMEM || errnum == EAGAIN)
		code = COVE_EINTERNAL;
	if (errnum == EINVAL || errnum == ENOTDIR)
		end_with_error(w, code, "watch '%s': not a folder", w->path);
	else
		end_with_error(w, code, "watch '%s': %s", w->path, strerror(errnum));
}

/* init opened the folder: watch it (and, when recursive, all below it
 * before the start event, so that a client that saw start misses nothing),
 * then start the stream. Takes fd. */
static void begin(struct watch *w, int fd)
{
	struct stat st;
	w->root_fd = fd;
	if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
		open_failed(w, EINVAL);
		return;
	}
	w->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->ino_fd < 0) {
		end_with_error(w, errno == EMFILE ? COVE_EFULL : COVE_EINTERNAL, "watch '%s': inotify: %s", w->path,
			       strerror(errno));
		return;
	}
	int r = w->root_wd = watch_dir(w, fd, 0, "");
	int walk_fd = r > 0 && w->recursive ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
	if (r > 0 && w->recursive)
		r = walk_fd < 0 ? -ENOMEM : walk(w, walk_fd, w->root_wd, 1, false);
	if (r < 0) {
		if (r == -ENOSPC || r == -ENOMEM)
			end_full(w, r);
		else
			end_with_error(w, COVE_EINTERNAL, "watch '%s': inotify: %s", w->path, strerror(-r));
		return;
	}
	w->ino_ev = event_new(engine_ctx->base, w->ino_fd, EV_READ | EV_PERSIST, on_readable, w);
	if (!w->ino_ev) {
		end_with_error(w, COVE_EINTERNAL, "out of memory");
		return;
	}
	event_add(w->ino_ev, NULL);
	w->started = true;
	emit_type(w, WATCH_START);
}

bool watch_on_init_reply(struct sandbox *sb, uint32_t seq, bool opened, int errnum, int fd)
{
	struct watch *w = watches;
	while (w && !(w->sb == sb && w->seq == seq && seq))
		w = w->next;
	if (!w)
		return false;
	w->seq = 0;
	w->seconds = 0;
	if (opened && fd >= 0) {
		begin(w, fd);
		return true;
	}
	if (fd >= 0)
		close(fd);
	open_failed(w, opened || !errnum ? EIO : errnum);
	return true;
}

bool watch_active(const struct sandbox *sb)
{
	for (const struct watch *w = watches; w; w = w->next)
		if (w->sb == sb)
			return true;
	return false;
}

void watch_abort_all(struct sandbox *sb, const char *why)
{
	for (struct watch *w = watches, *next; w; w = next) {
		next = w->next;
		if (w->sb == sb)
			end_with_error(w, COVE_ESTATE, "%s", why);
	}
}

/* Ask init for the folder, opened inside the sandbox as user. */
static int send_open(struct watch *w, const char *user, struct cove_err *err)
{
	static char pkt[WIRE_MAX_PACKET];
	struct wire_hdr h = { .type = WIRE_OPEN, .seq = w->seq, .value = WIRE_OPEN_PLAIN };
	struct wire_path p = { .path = w->path, .path2 = "", .user = user };
	long len = wire_encode_path(pkt, sizeof(pkt), &h, &p);
	if (len < 0)
		return err_set(err, COVE_EINVAL, "bad path");
	int r = sandbox_send(w->sb, pkt, (size_t)len, NULL, 0);
	if (r < 0)
		return err_sys(err, -r, "send to cove-init of sandbox %s", w->sb->id);
	return 0;
}

int watch_start(struct sandbox *sb, const struct watch_request *rq, struct output *o, struct cove_err *err)
{
	const char *user = rq->user ? rq->user : sb->spec.user;
	if (sandbox_ready(sb, err) < 0)
		return -1;
	if (!rq->path || rq->path[0] != '/' || strlen(rq->path) >= PATH_MAX)
		return err_set(err, COVE_EINVAL, "'path' must be an absolute path");
	if (strlen(user) > WATCH_MAX_USER)
		return err_set(err, COVE_EINVAL, "'user' is too long");
	if (rq->keepalive < 0 || rq->keepalive > WATCH_MAX_KEEPALIVE)
		return err_set(err, COVE_EINVAL, "'keepalive' must be seconds from 1 to %d", WATCH_MAX_KEEPALIVE);
	if (n_watches >= WATCH_MAX_STREAMS)
		return err_set(err, COVE_EFULL, "too many watches (at most %d at once)", WATCH_MAX_STREAMS);
	_cleanup_free_ struct watch *w = calloc(1, sizeof(*w));
	if (!w)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	w->sb = sb;
	w->out = o;
	w->root_fd = w->ino_fd = -1;
	snprintf(w->path, sizeof(w->path), "%s", rq->path);
	w->recursive = rq->recursive;
	w->keepalive = rq->keepalive ? rq->keepalive : WATCH_KEEPALIVE;
	w->seq = sb->next_seq++ ?: sb->next_seq++;
	w->next = watches;
	watches = w;
	n_watches++;
	w->tick = event_new(engine_ctx->base, -1, EV_PERSIST, on_tick, w);
	int r = !w->tick ? err_set(err, COVE_EINTERNAL, "out of memory") : 0;
	if (r < 0 || send_open(w, user, err) < 0) {
		watch_free(TAKE_PTR(w));
		return -1;
	}
	output_attach(o, &watch_producer, w);
	struct timeval second = { 1, 0 };
	event_add(w->tick, &second);
	TAKE_PTR(w);
	return 0;
}

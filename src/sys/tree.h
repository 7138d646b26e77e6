/* Directory trees as plain files: a faithful copy (what `cp -a
 * --reflink=auto` keeps, in C) and a recursive remove. The overlay storage
 * driver's snapshot and delete (storage.h).
 *
 * The trees are written by sandboxes: every entry is reached by one name
 * below an open directory fd, never through a symlink, and neither function
 * crosses into a file system mounted inside the tree (-EBUSY). */
#pragma once

/* Most directory levels tree_copy goes down: it holds two fds per level.
 * A deeper tree fails with -ELOOP and leaves nothing of dst. */
#define TREE_COPY_DEPTH_MAX 256

/* Copy directory src to dst, which must not exist (-EEXIST) and whose
 * parent must. Kept: file contents (shared with FICLONE where the file
 * system can, else copied with copy_file_range, holes left holes), type,
 * mode (setuid bits too), owner, atime and mtime, symlink targets, hard
 * links within the tree, device numbers, and every extended attribute
 * (trusted.*, security.capability, ACLs, user.*). So an overlay upper
 * layer keeps its whiteouts (character devices 0/0) and its trusted.overlay
 * opaque and redirect marks. Not kept: ctime, inode numbers, file flags
 * (chattr). The source's atimes stay as they were, but a symlink's (reading
 * its target sets it). On failure dst is removed again. -errno. */
int tree_copy(const char *src, const char *dst);

/* Remove directory path with everything in it, at any depth, with a
 * bounded number of open fds. -ENOENT if missing, -ENOTDIR if not a
 * directory, -errno. */
int tree_remove(const char *path);

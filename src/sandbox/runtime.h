/* Starting a sandbox's pid 1. The order of operations is the security
 * argument, so it is spelled out in runtime.c; in short:
 *
 *   coved ── fork ──► C (host root)
 *                     makes the user namespace (via a short-lived helper),
 *                     a private mount namespace, and in it, as host root,
 *                     the idmapped layers: the sandbox's subvolume, the
 *                     image (read-only), the host's /usr and /opt
 *                     (read-only, under the image's own usr/ and opt/). Joins the cgroups.
 *                     setns(userns), unshare(mnt pid ipc uts net cgroup):
 *                     every mount made so far is now locked. As the
 *                     sandbox's root: the overlays (root, /usr, /opt), /dev.
 *                ── fork ──► init (pid 1 in the new pid namespace)
 *                     proc, sysfs (ro), devpts; masks; pivot_root;
 *                     hostname; loopback; capabilities, no_new_privs,
 *                     seccomp; execveat(cove-init).
 */
#pragma once
#include <linux/filter.h>
#include <stdbool.h>
#include <sys/types.h>

#include "common/error.h"
#include "sys/cgroup.h"

#define RUNTIME_UID_COUNT 65536

struct runtime_config {
	const char *id;          /* sandbox ID, also its hostname */
	const char *subvol;      /* the sandbox's subvolume, laid out by runtime_prepare */
	const char *image;       /* the image's read-only subvolume (it holds rootfs/) */
	bool host_layers;        /* the host image or one built on it: the host's /usr and /opt
				    layered in, under the image's rootfs/usr and rootfs/opt */
	uid_t uid_base;          /* host uid of the sandbox's root */
	const char *init_socket; /* path where cove-init listens */
	int init_exe_fd;         /* sealed memfd holding cove-init (external sandboxes run it) */
	const char *init_file;   /* a root-owned file holding cove-init (isolated ones run it, see
				  * RUNTIME_INIT_PATH) */
	const struct cgroup_layout *cgroups;
	const struct sock_fprog *seccomp; /* compiled once, see seccomp.h */
};

/* Lay out a new, empty sandbox subvolume: upper/ and work/ for the
 * overlays (root, usr, opt), mount points lower/ and root/. -errno. */
int runtime_prepare(const char *subvol);

/* Start the sandbox. On success *ret_pid is cove-init's host pid; it is a
 * child of the caller (coved is a subreaper) and listens on init_socket. */
int runtime_start(const struct runtime_config *c, pid_t *ret_pid, struct cove_err *err);

/* The host backend (isolation "external"): cove-init as a plain host
 * process, root on the host, in the sandbox's cgroups, with the directory
 * c->subvol (the workspace) as its cwd and as the root of the Files API.
 * No namespaces, no pivot_root, no capability drop, no seccomp: for callers
 * that are isolated already. Uses id, subvol, init_socket, init_exe_fd and
 * cgroups. *ret_pid as for runtime_start. */
int runtime_start_external(const struct runtime_config *c, pid_t *ret_pid, struct cove_err *err);

/* runtime_start (or, external, runtime_start_external) in two halves, so
 * that several sandboxes start at once: runtime_begin forks the process
 * that starts init and returns; runtime_finish waits for its report. Every
 * begun start must be finished. */
struct runtime_pending {
	pid_t child;
	int status_fd;
	bool external;
	char init_socket[108]; /* sun_path's size */
};
int runtime_begin(const struct runtime_config *c, bool external, struct runtime_pending *p, struct cove_err *err);
int runtime_finish(struct runtime_pending *p, pid_t *ret_pid, struct cove_err *err);

/* An isolated sandbox's cove-init runs from this path: a read-only bind
 * of init_file on its /dev. A file, not the memfd an external one runs
 * from: CRIU restores a process's executable only from a path. */
#define RUNTIME_INIT_PATH "/dev/.cove-init"

/* An isolated sandbox's cove-init listens on this abstract unix name in
 * the sandbox's network namespace; an external one on init_socket. */
#define RUNTIME_INIT_ABSTRACT "cove-init"

/* A connection to a running cove-init: for an isolated sandbox, a socket
 * made in its network namespace (the calling thread enters it for the
 * moment), connected to RUNTIME_INIT_ABSTRACT; else to path. The fd, or -1
 * with err. */
int runtime_connect(pid_t init_pid, bool external, const char *path, struct cove_err *err);

/* For a restore of the sandbox c by CRIU (memory snapshots), in criu's
 * process before its exec: c->uid_base's user namespace, the idmapped
 * layers and the overlays of a start (runtime.h), in a mount namespace
 * that this process enters, where criu finds the root at <subvol>/root and
 * the host layers at RUNTIME_RESTORE_EXT/<layer>; and the sandbox's cgroups. On
 * failure it writes its reason (as runtime_begin's child does) to
 * report_fd (close-on-exec: it reads EOF on success) and exits. */
void runtime_restore_prepare(const struct runtime_config *c, int report_fd);
/* Where, in that mount namespace, the host layers' overlays are: a tmpfs
 * over the host's /mnt, seen by nothing else. */
#define RUNTIME_RESTORE_EXT "/mnt"
/* The reason runtime_restore_prepare wrote to the read end of its
 * report_fd, into err: 1 if there was one, else 0. */
int runtime_restore_reason(int fd, struct cove_err *err);

/* The host directories the built-in `host` image layers read-only. */
extern const char *const runtime_host_layers[];

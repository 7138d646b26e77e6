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
	int init_exe_fd;         /* sealed memfd holding cove-init */
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

/* The host directories the built-in `host` image layers read-only. */
extern const char *const runtime_host_layers[];

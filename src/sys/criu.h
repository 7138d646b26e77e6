/* CRIU (checkpoint/restore in user space) driven through its RPC: each
 * operation forks `criu swrk <fd>`, sends one protobuf request over a
 * SOCK_SEQPACKET socketpair and reads one answer (see criu_rpc.proto).
 * Nothing here parses criu's text output; a failure's reason is the first
 * error criu reports in its answer, else the first "Error" line of the log
 * it wrote into the images directory.
 *
 * A cove sandbox is a tree under cove-init (pid 1 of its pid namespace) in
 * its own user, mount, pid, net, ipc, uts and cgroup namespaces. criu dumps
 * the namespaces that differ from its own; what it cannot carry (the
 * overlay root, bind mounts from the host) the caller names as external
 * (`mnt[<path in the sandbox>]:<key>` on dump, `mnt[<key>]:<host path>` on
 * restore), and the root of the restored mount namespace is `root`.
 *
 * All calls block until criu is done. Each forks: call them from one thread
 * (coved's forks happen on its event loop). */
#pragma once
#include <stdbool.h>
#include <sys/types.h>

#include "common/error.h"

/* The criu cove builds (scripts/criu.sh) when the host has none >= 4.2. */
#define CRIU_BUNDLED "/usr/local/lib/cove/criu"
#define CRIU_MIN_MAJOR 4
#define CRIU_MIN_MINOR 2
/* criu's own deadline for seizing and freezing a tree (its "timeout"
 * option): past it a dump or restore gives up by itself. */
#define CRIU_TIMEOUT_S 60

struct criu_version {
	int major, minor, sublevel;
};

/* The version of the criu binary at path (a VERSION request). */
int criu_get_version(const char *path, struct criu_version *ret, struct cove_err *err);

/* Find a criu >= 4.2: $COVE_CRIU if set (and only it), else the host's
 * criu in /usr/local/sbin, /usr/sbin, /sbin, /usr/bin, else
 * CRIU_BUNDLED. ret (PATH_MAX bytes) is untouched on failure; the error
 * names what was found and why it does not do. */
int criu_find(char *ret, size_t size, struct cove_err *err);

/* criu's own self-test of the kernel's features (a CHECK request). */
int criu_check(const char *criu, struct cove_err *err);

/* cgroups: criu's --manage-cgroups modes. */
enum criu_cgroups {
	CRIU_CG_IGNORE = 0, /* leave them to the caller (cove places the restored tree itself) */
	CRIU_CG_SOFT = 3,   /* restore the tree's cgroup paths, create what is missing */
	CRIU_CG_FULL = 4,   /* and their properties */
};

struct criu_dump_opts {
	pid_t pid;              /* root of the tree (host pid), e.g. cove-init */
	const char *images_dir; /* exists, empty; the log goes there as dump.log */
	bool leave_running;     /* a snapshot; else the tree is killed after the dump */
	bool tcp_established;   /* dump established TCP connections (else they fail the dump) */
	bool shell_job;         /* the tree's session/terminal is outside it (a pty of the caller) */
	bool ext_unix_sk;       /* unix sockets connected to a peer outside the tree */
	bool file_locks;
	bool orphan_pts_master; /* a pty whose master is outside the tree (restore: inherit it) */
	bool nftables_lock;     /* lock the network with nftables, not iptables (netns only) */
	bool empty_netns;       /* the tree's network namespace: its sockets, not its links, addresses, routes */
	enum criu_cgroups cgroups;
	const char *freeze_cgroup;   /* freeze the tree with this cgroup (its freezer), else ptrace */
	const char *const *external; /* NULL-ended: "mnt[/usr]:usr", "dev[...]:..." */
	int log_level;               /* 0..4; 0 means criu's default (2: errors and warnings) */
};

/* Dump the tree rooted at o->pid into o->images_dir. */
int criu_dump(const char *criu, const struct criu_dump_opts *o, struct cove_err *err);

struct criu_inherit_fd {
	const char *key; /* as the dump named it, e.g. "pipe:[123]" or an external's key */
	int fd;          /* in the caller (> 2), passed to criu at the same number; stays open */
};

struct criu_join_ns {
	const char *ns;   /* "net", "user", "mnt", "uts", "ipc" */
	const char *file; /* "/proc/<pid>/ns/net" or a pid */
};

struct criu_restore_opts {
	const char *images_dir;
	const char *root; /* root of the restored mount namespace; NULL: "/" */
	bool tcp_established, shell_job, ext_unix_sk, file_locks, orphan_pts_master;
	bool nftables_lock;
	bool empty_netns; /* a new network namespace with nothing restored in it (see the dump's) */
	bool tcp_close;   /* established TCP connections come back closed */
	enum criu_cgroups cgroups;
	const char *const *external;           /* NULL-ended, "mnt[usr]:/host/path" */
	const struct criu_inherit_fd *inherit; /* n_inherit of them */
	size_t n_inherit;
	const struct criu_join_ns *join; /* n_join of them: enter these instead of making new ones */
	size_t n_join;
	int log_level;
	/* Run in criu's process after the fork, before it execs criu (may
	 * _exit): where criu runs (its mount namespace, its cgroups) is where
	 * the restored tree starts out. Only async-signal-safe work. Every fd of
 * the caller is closed by then but prepare_fd and the inherited ones. */
	void (*prepare)(void *arg);
	void *prepare_arg;
	int prepare_fd; /* an fd of the caller prepare uses (> 2; else -1 or 0): kept open for it, not for criu */
	/* Called once the tree's namespaces exist, before its files and
	 * sockets are restored (criu's "setup-namespaces"), with the root's
	 * host pid: 0 to go on, else the restore fails. */
	int (*setup_ns)(pid_t pid, void *arg);
	void *setup_ns_arg;
};

/* Restore the tree dumped in o->images_dir. Its root becomes a child of the
 * caller (criu's rst_sibling), so the caller reaps it; *ret_pid is its host
 * pid. The tree's pids must be free in the pid namespace criu restores
 * them into (a new one when the tree had its own). */
int criu_restore(const char *criu, const struct criu_restore_opts *o, pid_t *ret_pid, struct cove_err *err);

/* criu_restore in two halves, so that several restores run at once: the
 * start forks criu and sends the request (o and what it points to may go
 * after it); the wait answers criu's notifications, those of every other
 * restore started and not waited for yet included, until job's answer,
 * and frees job whatever it returns. Every job started is waited for. */
struct criu_job;
int criu_restore_start(const char *criu, const struct criu_restore_opts *o, struct criu_job **ret,
		       struct cove_err *err);
int criu_restore_wait(struct criu_job *job, pid_t *ret_pid, struct cove_err *err);

/* An images directory for restoring the dump in src into another uid
 * range: dst (made here, owned by uid_base: criu reads images from inside
 * the restored user namespace too, so src's must be readable by all: see
 * criu_images_readable) holds a hard link to each of src's images (a copy,
 * reflinked where it can, across file systems), the user namespace's maps
 * (userns-*.img) moved to host ids from uid_base on (cove's maps are one
 * range: inside id k is host uid_base + k). criu writes its restore log
 * into dst. */
int criu_images_shifted(const char *src, const char *dst, unsigned uid_base, struct cove_err *err);

/* Make the images criu wrote into dir (0600) readable by all: the
 * caller's directories above keep others out. */
int criu_images_readable(const char *dir, struct cove_err *err);

/* The bytes of the images in dir, logs left out. */
long long criu_images_size(const char *dir);

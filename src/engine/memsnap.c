/* Memory snapshots: a sandbox's running processes saved with CRIU next to
 * its files, and brought back running in a new sandbox.
 *
 * The dump. cove-init's connection to coved is closed first (a socket whose
 * peer is outside the tree is nothing CRIU can carry; its listener, in the
 * sandbox's network namespace, is), then, in the instant the sandbox's
 * cgroup is frozen for its files' subvolume snapshot, CRIU dumps the tree
 * rooted at cove-init (leave running; it finds the cgroup frozen and leaves
 * it so) into <pool>/snapshots/<id>/criu/. A freeze that caught a vfork
 * child before its exec is undone a moment first (settle_vfork). What CRIU cannot make on its own
 * is named external: the host layers' overlays (/usr, /opt) and the host's
 * device nodes bound into /dev. The network namespace is dumped empty
 * (sockets, no links, addresses or routes): a restored copy gets its own
 * address, as any new sandbox. coved connects again after the thaw.
 *
 * The restore, in place of a start (sandboxes.c boots a sandbox this way
 * when it is created from a memory snapshot): criu's own process first
 * makes what the sandbox's start makes (runtime_restore_prepare: the new
 * uid range's user namespace, the idmapped layers, the overlays, the
 * cgroups) and then execs criu in there. CRIU makes the user namespace
 * anew from the images' maps; the images directory it reads is a copy of
 * links with the maps moved to the new sandbox's uid range
 * (criu_images_shifted), so each restored copy runs in its own range. Once
 * the namespaces exist (before any socket comes back) the loopback goes up.
 * Established TCP connections come back closed (tcp_close): their peers did
 * not travel with the snapshot; listening sockets listen again. The hostname
 * is the one dumped. Kept processes and sessions come back with cove-init,
 * which holds their output rings (memfds) and pipes: coved takes them back
 * as after its own restart (WIRE_LIST), tags, ids and tails included.
 * A restore is begun and ended in two calls, so that a fork's copies are
 * restored at once (one poll answers all their criu). Each has its own
 * ID, slot (so uid range), address and images folder; what they share is
 * read only (the snapshot's images and files).
 *
 * The self-test at start makes a small sandbox, snapshots it with memory
 * and restores it; only when that worked is nativeSnapshot true. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/kcmp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "engine/engine.h"
#include "engine/memsnap.h"
#include "image/image.h"
#include "sandbox/runtime.h"
#include "sys/criu.h"
#include "sys/netlink.h"
#include "sys/storage.h"
#include "sys/tree.h"

/* The device nodes runtime.c binds into /dev from the host. */
static const char *const dev_nodes[] = { "null", "zero", "full", "random", "urandom", "tty", NULL };
#define MAX_EXT 16
/* settle_vfork: thaws of 1, 2, 4, 8 then 16 ms, 20 times at most (~250 ms). */
#define VFORK_TRIES 20
#define VFORK_WAIT_US 1000

static double mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int why(const struct engine *d, struct cove_err *err)
{
	return err_set(err, COVE_ESTATE, "memory snapshots are not available on this host: %s", d->native_why);
}

int memsnap_check(const struct engine *d, const struct sandbox *sb, struct cove_err *err)
{
	if (!d->native_snapshot)
		return why(d, err);
	if (sb && sb->spec.external)
		return err_set(err, COVE_ESTATE,
			       "sandbox %s is an external one (isolation \"external\"): its processes are the "
			       "host's, no memory snapshot can hold them",
			       sb->id);
	if (sb && sb->state != SB_RUNNING)
		return err_set(err, COVE_ESTATE, "sandbox %s is not running: it has no processes to save", sb->id);
	return 0;
}

static void freezer_path(const struct engine *d, const char *id, char *buf, size_t cap)
{
	if (d->cgroups.mode == CGROUP_V1)
		snprintf(buf, cap, "%s/freezer/cove/%s", d->cgroups.root, id);
	else
		snprintf(buf, cap, "%s/cove/%s", d->cgroups.root, id);
}

/* src's bytes into a new dst (a log, from the pool to the run directory). */
static int copy_log(const char *src, const char *dst)
{
	_cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int out = in < 0 ? -1 : open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	char buf[65536];
	ssize_t n = 0;
	while (out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			return -1;
	return out < 0 || n < 0 ? -1 : 0;
}

/* What stops criu in a frozen tree (scan_tasks). */
struct blocker {
	pid_t traced, tracer; /* a task another traces (ptrace): criu cannot seize it */
	pid_t vforked;        /* a vfork child that has not exec'd yet, its parent waiting on it */
};

/* Whether process tid (its thread group tgid, its parent ppid) is a vfork
 * child that has not exec'd: its parent, another process, shares its
 * memory. */
static bool in_vfork(pid_t tid, pid_t tgid, pid_t ppid)
{
	return ppid > 0 && ppid != tgid && syscall(SYS_kcmp, tid, ppid, KCMP_VM, 0, 0) == 0;
}

/* The tasks of the frozen cgroup at freezer (v1 "tasks", v2
 * "cgroup.threads"): the first blocker found, if any. */
static void scan_tasks(const char *freezer, bool v1, struct blocker *b)
{
	char p[700], line[256];
	snprintf(p, sizeof(p), "%s/%s", freezer, v1 ? "tasks" : "cgroup.threads");
	FILE *f = fopen(p, "re");
	*b = (struct blocker){ 0 };
	while (f && !b->traced && !b->vforked && fgets(line, sizeof(line), f)) {
		pid_t tid = atoi(line), tgid = 0, ppid = 0, tracer = 0;
		snprintf(p, sizeof(p), "/proc/%d/status", tid);
		FILE *st = tid > 0 ? fopen(p, "re") : NULL;
		char l[256];
		while (st && fgets(l, sizeof(l), st)) {
			if (strncmp(l, "Tgid:", 5) == 0)
				tgid = atoi(l + 5);
			else if (strncmp(l, "PPid:", 5) == 0)
				ppid = atoi(l + 5);
			else if (strncmp(l, "TracerPid:", 10) == 0)
				tracer = atoi(l + 10);
		}
		if (st)
			fclose(st);
		if (tracer > 0)
			b->traced = tid, b->tracer = tracer;
		else if (tid == tgid && in_vfork(tid, tgid, ppid))
			b->vforked = tid;
	}
	if (f)
		fclose(f);
}

/* A tree frozen while a vfork child had not exec'd yet cannot be dumped:
 * criu stops every task of the cgroup, that child before its exec too,
 * then waits for the parent to stop, which waits for its child's exec
 * (criu's own deadline, 60 s, ends it: "Timeout reached"). The child
 * execs within moments of a thaw: so thaw, let it, freeze again, a few
 * times. 0 with the tree frozen and nothing in vfork, else a 409. */
static int settle_vfork(struct engine *d, struct sandbox *sb, const char *freezer, struct cove_err *err)
{
	bool v1 = d->cgroups.mode == CGROUP_V1;
	struct blocker b;
	for (int i = 0; i < VFORK_TRIES; i++) {
		scan_tasks(freezer, v1, &b);
		if (b.traced)
			return err_set(err, COVE_ESTATE,
				       "the processes of sandbox %s cannot be saved: host pid %d is traced (ptrace) by "
				       "%d, which criu cannot take over",
				       sb->id, b.traced, b.tracer);
		if (!b.vforked)
			return 0;
		log_info("sandbox %s: host pid %d is a vfork child not exec'd yet: thawed a moment", sb->id, b.vforked);
		if (cgroup_freeze(&d->cgroups, sb->id, false, err) < 0)
			return -1;
		usleep(VFORK_WAIT_US << (i < 4 ? i : 4));
		if (cgroup_freeze(&d->cgroups, sb->id, true, err) < 0)
			return -1;
	}
	return err_set(err, COVE_ESTATE,
		       "the processes of sandbox %s cannot be saved now: host pid %d stays between vfork() and exec "
		       "(its parent waits on it), which criu cannot save; try again",
		       sb->id, b.vforked);
}

int memsnap_dump(struct engine *d, struct sandbox *sb, const char *dir, struct cove_err *err)
{
	char ext[MAX_EXT][64], freezer[600];
	const char *extv[MAX_EXT + 1];
	size_t n = 0;
	/* The host's /usr and /opt are external mounts of a sandbox of the host
	 * image or of one built on it (an OCI image has none). */
	char image[600];
	snprintf(image, sizeof(image), "%s/images/%s", d->pool.dir, sb->spec.image_dir);
	bool host_layers = image_tree_host_layers(image);
	for (int i = 0; host_layers && runtime_host_layers[i]; i++, n++)
		snprintf(ext[n], sizeof(ext[n]), "mnt[/%s]:%s", runtime_host_layers[i], runtime_host_layers[i]);
	for (int i = 0; dev_nodes[i]; i++, n++)
		snprintf(ext[n], sizeof(ext[n]), "mnt[/dev/%s]:dev-%s", dev_nodes[i], dev_nodes[i]);
	snprintf(ext[n++], sizeof(ext[0]), "mnt[" RUNTIME_INIT_PATH "]:cove-init");
	for (size_t i = 0; i < n; i++)
		extv[i] = ext[i];
	extv[n] = NULL;
	freezer_path(d, sb->id, freezer, sizeof(freezer));
	if (settle_vfork(d, sb, freezer, err) < 0)
		return -1;
	if (mkdir(dir, 0700) < 0)
		return err_sys(err, errno, "mkdir '%s'", dir);
	struct criu_dump_opts o = { .pid = sb->init_pid,
				    .images_dir = dir,
				    .leave_running = true,
				    .tcp_established = true,
				    .file_locks = true,
				    .nftables_lock = true,
				    .empty_netns = true,
				    .freeze_cgroup = freezer,
				    .external = extv };
	struct cove_err e = { 0 };
	int r = criu_dump(d->criu, &o, &e);
	if (r == 0)
		return criu_images_readable(dir, err);
	/* The images go with the failed snapshot: the log is kept aside. */
	char log[800], kept[700];
	snprintf(log, sizeof(log), "%s/dump.log", dir);
	snprintf(kept, sizeof(kept), "%s/%s.dump.log", d->run_dir, sb->id);
	char *at = strstr(e.msg, " (log: ");
	if (at && copy_log(log, kept) == 0)
		snprintf(at, sizeof(e.msg) - (size_t)(at - e.msg), " (log: %s)", kept);
	return err_set(err, COVE_ESTATE, "the processes of sandbox %s cannot be saved: %s", sb->id, e.msg);
}

/* One syncfs of the file system dir is on (the pool): every image's data
 * and metadata, and the directories', in one pass (on btrfs one
 * transaction commit), where an fsync of each image costs a log commit
 * each: tens of images, 150-500 ms here even for an idle sandbox's few
 * KiB, against 10-30 ms. It writes out whatever else is dirty in the pool
 * too (other sandboxes' writes), as the overlay driver's snapshots do. */
int memsnap_sync(const char *dir, struct cove_err *err)
{
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || syncfs(fd) < 0)
		return err_sys(err, errno, "sync '%s'", dir);
	return 0;
}

struct restore_ctx {
	struct runtime_config rc;
	int report_fd; /* write end */
};

static void prepare(void *arg)
{
	struct restore_ctx *c = arg;
	runtime_restore_prepare(&c->rc, c->report_fd);
}

/* The loopback up in the new network namespace, before CRIU binds the
 * sockets that listen on it. */
static int setup_ns(pid_t pid, void *arg)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/ns/net", pid);
	_cleanup_close_ int ns = open(p, O_RDONLY | O_CLOEXEC);
	int nl = ns < 0 ? -1 : netlink_open(ns);
	if (nl < 0)
		return -1;
	int lo = netlink_link_index(nl, "lo");
	int r = lo < 0 ? -1 : netlink_link_up(nl, lo);
	close(nl);
	return r < 0 ? -1 : 0;
}

/* A restore under way (memsnap_restore_begin), in sb->restoring. */
struct memsnap_restore {
	struct criu_job *job;
	int report_fd; /* read end: why runtime_restore_prepare failed */
	char work[700];
	double t0;
};

/* The externals of the restore: in ext, pointed to by extv (NULL-ended). */
static void restore_externals(bool host_layers, char (*ext)[700], const char **extv)
{
	size_t n = 0;
	for (int i = 0; host_layers && runtime_host_layers[i]; i++, n++)
		snprintf(ext[n], sizeof(ext[n]), "mnt[%s]:" RUNTIME_RESTORE_EXT "/%s", runtime_host_layers[i],
			 runtime_host_layers[i]);
	for (int i = 0; dev_nodes[i]; i++, n++)
		snprintf(ext[n], sizeof(ext[n]), "mnt[dev-%s]:/dev/%s", dev_nodes[i], dev_nodes[i]);
	snprintf(ext[n++], sizeof(ext[0]), "mnt[cove-init]:" RUNTIME_RESTORE_EXT "/cove-init");
	for (size_t i = 0; i < n; i++)
		extv[i] = ext[i];
	extv[n] = NULL;
}

int memsnap_restore_begin(struct engine *d, struct sandbox *sb, const char *images, struct cove_err *err)
{
	char subvol[600], image[600], root[700];
	char ext[MAX_EXT][700];
	const char *extv[MAX_EXT + 1];
	struct memsnap_restore *m = calloc(1, sizeof(*m));
	if (!m)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	m->t0 = mono_ms();
	snprintf(subvol, sizeof(subvol), "%s/sandboxes/%s", d->pool.dir, sb->id);
	snprintf(image, sizeof(image), "%s/images/%s", d->pool.dir, sb->spec.image_dir);
	snprintf(root, sizeof(root), "%s/root", subvol);
	/* On the pool, where the images are reflinked in; not in the new
	 * root, which criu sees idmapped. */
	snprintf(m->work, sizeof(m->work), "%s/restore", d->pool.dir);
	if (mkdir(m->work, 0700) < 0 && errno != EEXIST) {
		free(m);
		return err_sys(err, errno, "mkdir '%s'", m->work);
	}
	snprintf(m->work, sizeof(m->work), "%s/restore/%s", d->pool.dir, sb->id);
	bool host_layers = image_tree_host_layers(image);
	restore_externals(host_layers, ext, extv);
	/* Each copy in its own uid range: its slot's. */
	unsigned base = UID_BASE + (unsigned)sb->slot * RUNTIME_UID_COUNT;
	(void)tree_remove(m->work);
	int report[2];
	int r = criu_images_shifted(images, m->work, base, err);
	if (r == 0 && pipe2(report, O_CLOEXEC) < 0)
		r = err_sys(err, errno, "pipe");
	if (r < 0) {
		(void)tree_remove(m->work);
		free(m);
		return -1;
	}
	struct restore_ctx c = { .rc = { .id = sb->id,
					 .subvol = subvol,
					 .image = image,
					 .uid_base = base,
					 .host_layers = host_layers,
					 .init_file = d->init_file,
					 .cgroups = &d->cgroups },
				 .report_fd = report[1] };
	struct criu_restore_opts o = { .images_dir = m->work,
				       .root = root,
				       .tcp_established = true,
				       .tcp_close = true,
				       .file_locks = true,
				       .nftables_lock = true,
				       .empty_netns = true,
				       .external = extv,
				       .prepare = prepare,
				       .prepare_arg = &c,
				       .prepare_fd = report[1],
				       .setup_ns = setup_ns };
	r = criu_restore_start(d->criu, &o, &m->job, err);
	/* criu's process has its own: a failed prepare's report ends at EOF. */
	close(report[1]);
	m->report_fd = report[0];
	if (r < 0) {
		close(report[0]);
		(void)tree_remove(m->work);
		free(m);
		return -1;
	}
	sb->restoring = m;
	return 0;
}

int memsnap_restore_end(struct engine *d, struct sandbox *sb, struct cove_err *err)
{
	struct memsnap_restore *m = sb->restoring;
	pid_t pid = -1;
	sb->restoring = NULL;
	int r = criu_restore_wait(m->job, &pid, err);
	log_debug("sandbox %s: restored in %.1f ms", sb->id, mono_ms() - m->t0);
	struct cove_err why_prep = { 0 };
	if (r < 0 && runtime_restore_reason(m->report_fd, &why_prep))
		*err = why_prep;
	close(m->report_fd);
	/* A failure's log stays (its error names it) until coved starts again. */
	if (r == 0) {
		(void)tree_remove(m->work);
		sb->init_pid = pid;
	}
	free(m);
	return r;
}

/* A small sandbox (no network), snapshotted with memory, restored; the
 * copy must be running with its cove-init answering. Everything it made
 * goes again. */
static int selftest_run(struct engine *d, struct cove_err *err)
{
	struct sandbox_spec spec = { .egress = false, .env = json_object() };
	snprintf(spec.image, sizeof(spec.image), "host");
	snprintf(spec.name, sizeof(spec.name), "cove-criu-selftest");
	struct sandbox *a = NULL, *b = NULL;
	struct snapshot *sn = NULL;
	int r = sandbox_create(d, &spec, NULL, &a, err);
	sandbox_spec_free(&spec);
	if (r == 0)
		r = snapshot_create_mem(d, a, "cove-criu-selftest", true, NULL, NULL, &sn, err);
	if (r == 0)
		r = snapshot_restore(d, sn, NULL, &b, err);
	if (r == 0 && (b->state != SB_RUNNING || kill(b->init_pid, 0) < 0))
		r = err_set(err, COVE_EINTERNAL, "the restored sandbox is not running");
	if (b)
		(void)sandbox_delete(d, b, NULL);
	if (sn)
		(void)snapshot_delete(d, sn, NULL);
	if (a)
		(void)sandbox_delete(d, a, NULL);
	return r;
}

/* Whether process pid has a file open under dir. */
static bool holds_under(pid_t pid, const char *dir)
{
	char p[64], link[PATH_MAX];
	snprintf(p, sizeof(p), "/proc/%d/fd", pid);
	DIR *dh = opendir(p);
	struct dirent *e;
	bool found = false;
	size_t n = strlen(dir);
	while (dh && !found && (e = readdir(dh))) {
		ssize_t len = readlinkat(dirfd(dh), e->d_name, link, sizeof(link) - 1);
		if (len > 0) {
			link[len] = '\0';
			found = strncmp(link, dir, n) == 0 && (link[n] == '/' || link[n] == '\0');
		}
	}
	if (dh)
		closedir(dh);
	return found;
}

/* Whether pid is in a sandbox's cgroup: a restore's criu (which dies with
 * coved) and the tasks it was making are; a dump's criu is not. */
static bool in_sandbox_cgroup(pid_t pid)
{
	char p[64], line[512];
	snprintf(p, sizeof(p), "/proc/%d/cgroup", pid);
	FILE *f = fopen(p, "re");
	bool in = false;
	while (f && !in && fgets(line, sizeof(line), f))
		in = strstr(line, "/cove/sb_") != NULL;
	if (f)
		fclose(f);
	return in;
}

void memsnap_wait_leftovers(struct engine *d)
{
	struct cove_err e = { 0 };
	char exe[PATH_MAX], p[64];
	if (!d->criu[0] && criu_find(d->criu, sizeof(d->criu), &e) < 0)
		return;
	char *want = realpath(d->criu, NULL);
	DIR *dh = want ? opendir("/proc") : NULL;
	struct dirent *ent;
	while (dh && (ent = readdir(dh))) {
		pid_t pid = atoi(ent->d_name);
		snprintf(p, sizeof(p), "/proc/%d/exe", pid);
		ssize_t len = pid > 0 ? readlink(p, exe, sizeof(exe) - 1) : -1;
		if (len <= 0 || (exe[len] = '\0', strcmp(exe, want) != 0) || in_sandbox_cgroup(pid) ||
		    !holds_under(pid, d->pool.dir))
			continue;
		/* A dump finishes on its own, leaving the tree as it found it
		 * (frozen: the start thaws it after this). Killing it instead
		 * could leave its parasite code in a task. It gives up by itself
		 * within its deadline, and writing the pages of a loaded
		 * machine's sandbox takes as long again: a shorter wait (30 s
		 * once) let the next dump meet tasks this one still held. */
		log_warn("coved: waiting for criu %d, which a previous coved left working on %s", pid, d->pool.dir);
		for (int i = 0; i < 2 * CRIU_TIMEOUT_S * 20 && kill(pid, 0) == 0; i++)
			usleep(50000);
		if (kill(pid, 0) == 0)
			log_warn("coved: criu %d still runs after %d s; going on", pid, 2 * CRIU_TIMEOUT_S);
	}
	if (dh)
		closedir(dh);
	free(want);
}

/* What the self-test's verdict depends on, as one line: the criu binary,
 * the kernel (release and build), coved and the cove-init it runs (a new
 * build is a new inode and mtime), the storage driver and the cgroup mode.
 * A verdict kept for another key is not used. */
static void selftest_key(const struct engine *d, char *buf, size_t cap)
{
	struct stat c = { 0 }, self = { 0 }, init = { 0 };
	struct utsname u = { 0 };
	(void)stat(d->criu, &c);
	(void)stat("/proc/self/exe", &self);
	(void)stat(d->init_file, &init);
	(void)uname(&u);
	snprintf(buf, cap, "criu %s %lu %lld %lld.%09ld; kernel %s %s; coved %lu %lld %lld.%09ld; cove-init %lu %lld.%09ld; %s; "
		 "cgroup %s",
		 d->criu, (unsigned long)c.st_ino, (long long)c.st_size, (long long)c.st_mtim.tv_sec, c.st_mtim.tv_nsec,
		 u.release, u.version, (unsigned long)self.st_ino, (long long)self.st_size,
		 (long long)self.st_mtim.tv_sec, self.st_mtim.tv_nsec, (unsigned long)init.st_ino,
		 (long long)init.st_mtim.tv_sec, init.st_mtim.tv_nsec, storage_driver_name(d->pool.driver),
		 d->cgroups.mode == CGROUP_V2 ? "v2" : "v1");
}

static void selftest_file(const struct engine *d, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/criu-selftest", d->run_dir);
}

/* Whether a passing verdict is kept for key (<run>/criu-selftest: the
 * key, the time it ran, "ok"). Only passes are kept: a failure may be
 * passing trouble (a loaded host, a full disk), and a feature switched off
 * until someone deletes a file is worse than a self-test run again. */
static bool selftest_kept(struct engine *d, const char *key, time_t *when)
{
	char path[700], line[PATH_MAX + 1024];
	long long t = 0;
	bool ok = false;
	selftest_file(d, path, sizeof(path));
	FILE *f = fopen(path, "re");
	if (f && fgets(line, sizeof(line), f) && strcspn(line, "\n") == strlen(key) &&
	    strncmp(line, key, strlen(key)) == 0 && fscanf(f, "%lld\n", &t) == 1 && fgets(line, sizeof(line), f))
		ok = strcmp(line, "ok\n") == 0;
	if (f)
		fclose(f);
	*when = (time_t)t;
	return ok;
}

/* Keep a passing verdict for key. Written whole and renamed into place;
 * not synced: a file a crash tore matches no key, and the self-test runs
 * again. */
static void selftest_keep(const struct engine *d, const char *key)
{
	char path[700], tmp[720];
	selftest_file(d, path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "we");
	if (!f)
		return;
	fprintf(f, "%s\n%lld\nok\n", key, (long long)time(NULL));
	if (fclose(f) != 0 || rename(tmp, path) < 0) {
		log_warn("coved: memory snapshots: cannot keep the self-test's verdict in %s: %s", path, strerror(errno));
		(void)unlink(tmp);
	}
}

void memsnap_selftest(struct engine *d)
{
	struct cove_err e = { 0 };
	double t0 = mono_ms();
	char work[700], key[PATH_MAX + 1024], at[64];
	time_t when;
	/* What restores cut short by a crash left. */
	snprintf(work, sizeof(work), "%s/restore", d->pool.dir);
	(void)tree_remove(work);
	if (!d->criu[0] && criu_find(d->criu, sizeof(d->criu), &e) < 0) {
		snprintf(d->native_why, sizeof(d->native_why), "%s", e.msg);
		log_warn("coved: memory snapshots: %s", d->native_why);
		return;
	}
	/* The self-test takes seconds: a pass kept for the same criu, kernel
	 * and cove build is used instead (coved restarts answer at once). */
	selftest_key(d, key, sizeof(key));
	if (selftest_kept(d, key, &when)) {
		d->native_snapshot = true;
		strftime(at, sizeof(at), "%Y-%m-%d %H:%M:%S UTC", gmtime(&when));
		log_info("coved: memory snapshots: self-test: kept verdict from %s: %s works", at, d->criu);
		return;
	}
	/* The self-test goes through the engine's own checks. */
	d->native_snapshot = true;
	if (selftest_run(d, &e) < 0) {
		d->native_snapshot = false;
		snprintf(d->native_why, sizeof(d->native_why),
			 "the self-test at start (a sandbox dumped and restored with %s) failed: %s", d->criu, e.msg);
		log_warn("coved: memory snapshots: self-test ran: failed in %.0f ms: %s", mono_ms() - t0, d->native_why);
		selftest_file(d, work, sizeof(work));
		(void)unlink(work);
	} else {
		log_info("coved: memory snapshots: self-test ran: ok in %.0f ms (%s works)", mono_ms() - t0, d->criu);
		selftest_keep(d, key);
	}
}

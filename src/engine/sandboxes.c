/* Sandboxes in coved: creation (subvolume, cgroups, runtime), the
 * connection to each cove-init, deletion, and re-attaching after a restart.
 *
 * Both backends keep a sandbox's files in the subvolume <pool>/sandboxes/<id>:
 * an isolated sandbox's overlay layers, or an external sandbox's workspace
 * itself (the host folder its commands start in). So deletion, the cleanup
 * of unrecorded roots, snapshots, restores and forks are the same for both;
 * of an external sandbox they take its workspace, which is all of it that
 * cove owns. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fdpass.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/wire.h"
#include "engine/disk.h"
#include "engine/engine.h"
#include "engine/memarchive.h"
#include "engine/memsnap.h"
#include "engine/files.h"
#include "engine/network.h"
#include "engine/ports.h"
#include "engine/sandboxes_private.h"
#include "engine/process.h"
#include "engine/template.h"
#include "engine/watch.h"
#include "store/store.h"
#include "engine/images.h"
#include "image/host_image.h"
#include "image/image.h"
#include "sandbox/runtime.h"
#include "sys/storage.h"

/* The sandbox's subvolume; an external sandbox's workspace. */
static void subvol_path(const struct engine *d, const char *id, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/sandboxes/%s", d->pool.dir, id);
}

static void socket_path(const struct engine *d, const char *id, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s/%s.sock", d->run_dir, id);
}

/* Every request names its sandbox: found through a hash of the ID, not by
 * a look at every slot, so that thousands of (paused) sandboxes cost a
 * request nothing. FNV-1a; IDs are random. */
static struct sandbox **id_chain(struct engine *d, const char *id)
{
	uint32_t h = 2166136261u;
	for (const char *c = id; *c; c++)
		h = (h ^ (uint8_t)*c) * 16777619u;
	return &d->by_id[h % MAX_SANDBOXES];
}

/* Into the table (its slot and its chain), and out of it. */
static void table_add(struct engine *d, struct sandbox *sb)
{
	struct sandbox **chain = id_chain(d, sb->id);
	d->sandboxes[sb->slot] = sb;
	sb->id_next = *chain;
	*chain = sb;
}

static void table_remove(struct engine *d, struct sandbox *sb)
{
	struct sandbox **pp = id_chain(d, sb->id);
	while (*pp && *pp != sb)
		pp = &(*pp)->id_next;
	if (*pp)
		*pp = sb->id_next;
	d->sandboxes[sb->slot] = NULL;
}

/* Any sandbox of the table by ID: deleting and pooled ones too. */
static struct sandbox *table_get(struct engine *d, const char *id)
{
	struct sandbox *sb = *id_chain(d, id);
	while (sb && strcmp(sb->id, id) != 0)
		sb = sb->id_next;
	return sb;
}

struct sandbox *sandbox_find(struct engine *d, const char *id)
{
	struct sandbox *sb = sandbox_id_valid(id) ? table_get(d, id) : NULL;
	return sandbox_listed(sb) ? sb : NULL;
}

bool sandbox_listed(const struct sandbox *sb)
{
	return sb && sb->state != SB_DELETING && !sb->spec.pooled;
}

struct sandbox *sandbox_lookup(struct engine *d, const char *id, struct cove_err *err)
{
	struct sandbox *sb = sandbox_find(d, id);
	if (!sb)
		err_set(err, COVE_ENOTFOUND, "no sandbox '%s'", id ? id : "");
	return sb;
}

json_t *sandbox_to_json(const struct sandbox *sb)
{
	json_t *j = sandbox_spec_to_json(&sb->spec);
	json_object_set_new(j, "id", json_string(sb->id));
	json_object_set_new(j, "state", json_string(sandbox_state_name(sb->state)));
	json_object_set_new(j, "state_changed_at", json_integer(sb->state_changed_at));
	json_object_set_new(j, "state_reason", json_string(sandbox_reason_name(sb->state_reason)));
	json_object_set_new(j, "init_pid", json_integer(sb->init_pid));
	/* Archived: whether its processes' memory was kept; and why not, or
	 * why a wake started it afresh (lifecycle.h). */
	if (sb->state == SB_ARCHIVED)
		json_object_set_new(j, "memory_kept", json_boolean(sb->mem_kept));
	if (sb->mem_note[0])
		json_object_set_new(j, "memory_note", json_string(sb->mem_note));
	char workspace[600];
	subvol_path(engine_ctx, sb->id, workspace, sizeof(workspace));
	/* An external sandbox's root is the host's: its uids are the host's. */
	json_object_set_new(j, "uid_base",
			    json_integer(sb->spec.external ? 0 : UID_BASE + (uint64_t)sb->slot * RUNTIME_UID_COUNT));
	json_object_set_new(j, "workspace", sb->spec.external ? json_string(workspace) : json_null());
	/* The spec's mode and lists, with the addresses they were given. */
	json_object_del(j, "allow_out");
	json_object_del(j, "deny_out");
	json_object_del(j, "net_slot");
	json_object_set_new(j, "network", network_to_json(sb));
	json_object_set_new(j, "ports", ports_list_json(sb));
	return j;
}

int sandbox_save(struct engine *d, struct sandbox *sb, struct cove_err *err)
{
	json_t *j = sandbox_spec_to_json(&sb->spec);
	_cleanup_free_ char *spec = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	struct store_sandbox row = { .id = sb->id,
				     .state = sandbox_state_name(sb->state),
				     .state_changed_at = sb->state_changed_at,
				     .state_reason = sandbox_reason_name(sb->state_reason),
				     .slot = sb->slot,
				     .init_pid = sb->init_pid,
				     .init_start = sb->init_start,
				     .spec = spec };
	return store_put_sandbox(d->store, &row, err);
}

/* Field 22 of /proc/<pid>/stat: with the pid, it names one process for good. */
static uint64_t proc_start_time(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	unsigned long long start = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
			 &start) != 1)
		return 0;
	return start;
}

bool sandbox_pid_is(pid_t pid, uint64_t start)
{
	return pid > 0 && start && proc_start_time(pid) == start;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void on_init_exit(evutil_socket_t fd, short what, void *arg);
static void on_init_message(evutil_socket_t fd, short what, void *arg);

void sandbox_detach(struct sandbox *sb)
{
	if (sb->conn_ev)
		event_free(sb->conn_ev);
	if (sb->init_exit_ev)
		event_free(sb->init_exit_ev);
	if (sb->conn_fd >= 0)
		close(sb->conn_fd);
	if (sb->init_pidfd >= 0)
		close(sb->init_pidfd);
	sb->conn_ev = sb->init_exit_ev = NULL;
	sb->conn_fd = sb->init_pidfd = -1;
}

/* Connect to a running cove-init and watch it. */
static int attach(struct engine *d, struct sandbox *sb, struct cove_err *err)
{
	char path[700];
	socket_path(d, sb->id, path, sizeof(path));
	sb->init_pidfd = (int)syscall(SYS_pidfd_open, sb->init_pid, 0);
	if (sb->init_pidfd < 0)
		return err_sys(err, errno, "pidfd_open %d", sb->init_pid);
	sb->conn_fd = runtime_connect(sb->init_pid, sb->spec.external, path, err);
	if (sb->conn_fd < 0) {
		sandbox_detach(sb);
		return -1;
	}
	evutil_make_socket_nonblocking(sb->conn_fd);
	sb->conn_ev = event_new(d->base, sb->conn_fd, EV_READ | EV_PERSIST, on_init_message, sb);
	sb->init_exit_ev = event_new(d->base, sb->init_pidfd, EV_READ, on_init_exit, sb);
	event_add(sb->conn_ev, NULL);
	event_add(sb->init_exit_ev, NULL);
	sb->state = SB_RUNNING;
	return 0;
}

/* Start cove-init on the sandbox's existing subvolume, in two halves (see
 * runtime_begin): several sandboxes may be between them at once. On
 * failure, either half leaves no cgroup behind. */
static int boot_begin(struct engine *d, struct sandbox *sb, struct runtime_pending *p, struct cove_err *err)
{
	if (d->mem_from) { /* restored whole here; boot_finish only attaches */
		struct cgroup_limits lim = { sb->spec.memory, sb->spec.cpu_millis, sb->spec.pids };
		*p = (struct runtime_pending){ .child = -1, .status_fd = -1 };
		if (cgroup_create(&d->cgroups, sb->id, &lim, err) < 0)
			return -1;
		if (memsnap_restore_begin(d, sb, d->mem_from, err) < 0) {
			(void)cgroup_destroy(&d->cgroups, sb->id, 1000, NULL);
			return -1;
		}
		return 0;
	}
	char subvol[600], sock[700], image[600];
	subvol_path(d, sb->id, subvol, sizeof(subvol));
	socket_path(d, sb->id, sock, sizeof(sock));
	snprintf(image, sizeof(image), "%s/images/%s", d->pool.dir, sb->spec.image_dir);
	struct cgroup_limits lim = { sb->spec.memory, sb->spec.cpu_millis, sb->spec.pids };
	if (cgroup_create(&d->cgroups, sb->id, &lim, err) < 0)
		return -1;
	struct runtime_config rc = { .id = sb->id,
				     .subvol = subvol,
				     .image = image,
				     .uid_base = UID_BASE + (uid_t)sb->slot * RUNTIME_UID_COUNT,
				     .init_socket = sock,
				     .init_exe_fd = d->init_exe_fd,
				     .host_layers = image_tree_host_layers(image),
				     .init_file = d->init_file,
				     .cgroups = &d->cgroups,
				     .seccomp = &d->seccomp };
	if (runtime_begin(&rc, sb->spec.external, p, err) < 0) {
		(void)cgroup_destroy(&d->cgroups, sb->id, 1000, NULL);
		return -1;
	}
	return 0;
}

static int boot_finish(struct engine *d, struct sandbox *sb, struct runtime_pending *p, struct cove_err *err)
{
	if ((p->child >= 0 ? runtime_finish(p, &sb->init_pid, err)
			   : sb->restoring ? memsnap_restore_end(d, sb, err) : 0) < 0) {
		(void)cgroup_destroy(&d->cgroups, sb->id, 1000, NULL);
		return -1;
	}
	sb->init_start = proc_start_time(sb->init_pid);
	if (attach(d, sb, err) < 0) {
		kill(sb->init_pid, SIGKILL);
		(void)cgroup_destroy(&d->cgroups, sb->id, 1000, NULL);
		return -1;
	}
	/* Restored: its kept processes and sessions came with it. */
	if (p->child < 0 && sandbox_init_take_kept(sb, err) < 0) {
		kill(sb->init_pid, SIGKILL);
		(void)cgroup_destroy(&d->cgroups, sb->id, 1000, NULL);
		return -1;
	}
	return 0;
}

int sandbox_boot(struct engine *d, struct sandbox *sb, struct cove_err *err)
{
	struct runtime_pending p;
	double t0 = now_ms();
	int r = boot_begin(d, sb, &p, err) < 0 ? -1 : boot_finish(d, sb, &p, err);
	log_debug("sandbox %s: boot %.2f ms", sb->id, now_ms() - t0);
	return r;
}

static int alloc_slot(struct engine *d)
{
	for (int i = 0; i < MAX_SANDBOXES; i++)
		if (!d->sandboxes[i])
			return i;
	return -1;
}

static struct sandbox *sandbox_new(int slot)
{
	struct sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb)
		return NULL;
	sb->slot = slot;
	sb->conn_fd = sb->init_pidfd = -1;
	sb->next_seq = 1;
	return sb;
}

static void sandbox_free(struct sandbox *sb)
{
	if (!sb)
		return;
	sandbox_detach(sb);
	if (sb->expire_ev)
		event_free(sb->expire_ev);
	lifecycle_forget(sb);
	for (struct sandbox_port *p = sb->ports, *next; p; p = next) {
		next = p->next;
		free(p);
	}
	sandbox_spec_free(&sb->spec);
	free(sb);
}

int64_t sandbox_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void expire(struct sandbox *sb, const char *why)
{
	struct cove_err err = { 0 };
	log_info("sandbox %s: deleting: %s", sb->id, why);
	if (sandbox_delete(engine_ctx, sb, &err) < 0)
		log_error("sandbox %s: delete: %s", sb->id, err.msg);
}

static void on_expired(evutil_socket_t fd, short what, void *arg)
{
	lifecycle_on_timeout(engine_ctx, arg);
}

static void on_orphaned(evutil_socket_t fd, short what, void *arg)
{
	expire(arg, "ephemeral, and its connection ended with the previous coved");
}

/* Have fn delete sb at unix ms at (0: never); a time already past fires on the
 * next turn of the loop, not here, so callers may go on using sb. */
static void arm_expiry(struct engine *d, struct sandbox *sb, int64_t at, event_callback_fn fn)
{
	if (sb->expire_ev)
		event_free(sb->expire_ev);
	sb->expire_ev = NULL;
	if (!at)
		return;
	int64_t left = at - sandbox_now_ms();
	struct timeval tv = { 0, 0 };
	if (left > 0) {
		tv.tv_sec = (time_t)(left / 1000);
		tv.tv_usec = (suseconds_t)(left % 1000) * 1000;
	}
	sb->expire_ev = evtimer_new(d->base, fn, sb);
	if (sb->expire_ev)
		evtimer_add(sb->expire_ev, &tv);
	else
		log_error("sandbox %s: cannot arm its timeout: out of memory", sb->id);
}

int sandbox_set_expiry(struct engine *d, struct sandbox *sb, int64_t expires_at, struct cove_err *err)
{
	int64_t was = sb->spec.expires_at;
	sb->spec.expires_at = expires_at;
	if (sandbox_save(d, sb, err) < 0) {
		sb->spec.expires_at = was;
		return -1;
	}
	arm_expiry(d, sb, expires_at, on_expired);
	return 0;
}

/* The "take a root"" step of a create: a new, empty subvolume laid out for
 * the overlays (or left empty: an external sandbox's workspace), or a
 * writable snapshot of a snapshot's files (which hold that layout already). */
static int take_root(enum storage_driver drv, const char *from, const char *subvol, bool external, struct cove_err *err)
{
	int r;
	if (from) {
		r = storage_snapshot(drv, from, subvol, false);
		return r < 0 ? err_sys(err, -r, "snapshot '%s' to '%s'", from, subvol) : 0;
	}
	r = storage_create(drv, subvol);
	if (r == 0 && !external && (r = runtime_prepare(subvol)) < 0)
		(void)storage_delete(drv, subvol);
	return r < 0 ? err_sys(err, -r, "create subvolume '%s'", subvol) : 0;
}

/* A new sandbox's name for itself: /etc/hostname holds its ID (the hostname
 * its init sets), and /etc/hosts resolves it, as tools such as sudo expect.
 * Written into the root overlay's upper layer before it is mounted. A
 * restored root is left byte for byte as it was snapshotted. */
static int write_identity(const char *subvol, const char *image, const char *id, struct cove_err *err)
{
	char path[700], hosts[65536];
	snprintf(path, sizeof(path), "%s/upper/root/etc", subvol);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return err_sys(err, errno, "mkdir '%s'", path);
	snprintf(path, sizeof(path), "%s/rootfs/etc/hosts", image);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n = fd < 0 ? 0 : read(fd, hosts, sizeof(hosts) - 1);
	if (fd >= 0)
		close(fd);
	hosts[n > 0 ? n : 0] = '\0';
	FILE *f;
	snprintf(path, sizeof(path), "%s/upper/root/etc/hostname", subvol);
	if (!(f = fopen(path, "we")) || fprintf(f, "%s\n", id) < 0 || fclose(f) != 0)
		return err_sys(err, errno, "write '%s'", path);
	snprintf(path, sizeof(path), "%s/upper/root/etc/hosts", subvol);
	if (!(f = fopen(path, "we")) ||
	    fprintf(f, "%s%s127.0.1.1\t%s\n", hosts, n > 0 && hosts[n - 1] != '\n' ? "\n" : "", id) < 0 ||
	    fclose(f) != 0)
		return err_sys(err, errno, "write '%s'", path);
	return 0;
}

/* A new root's identity, its image's preparation and E2B's user (none of
 * them for a restore's or an external sandbox's), then its disk limit. */
static int root_fill(struct engine *d, struct sandbox *sb, const char *from, const char *image, const char *subvol,
		     struct cove_err *err)
{
	if (!from && !sb->spec.external &&
	    (write_identity(subvol, image, sb->id, err) < 0 || image_root_prepare(&sb->spec, image, subvol, err) < 0 ||
	     (sb->spec.make_user && sandbox_user_make(&sb->spec, image, subvol, err) < 0)))
		return -1;
	return disk_limit_apply(d, sb, err);
}

/* The first half of a create, up to its runtime's start (see boot_begin):
 * the root (taken: the ID of one already taken, see sandbox_create_taken,
 * or NULL to take one here), its row, its slot (reserved: *ret is in
 * d->sandboxes, not counted nor started yet). On failure nothing is left
 * of it, its taken root included. */
static int create_begin(struct engine *d, struct sandbox_spec *spec, const char *from, const char *taken,
			struct sandbox **ret, struct runtime_pending *p, struct cove_err *err)
{
	char subvol[600];
	int slot = alloc_slot(d);
	struct sandbox *sb = slot < 0 ? NULL : sandbox_new(slot);
	if (taken && sb)
		snprintf(sb->id, sizeof(sb->id), "%s", taken);
	if (slot < 0 || !sb || (!taken && sandbox_id_new(sb->id) < 0)) {
		free(sb);
		if (taken) {
			subvol_path(d, taken, subvol, sizeof(subvol));
			(void)storage_delete(d->pool.driver, subvol);
		}
		return slot < 0 ? err_set(err, COVE_EFULL, "all %d sandbox slots are in use", MAX_SANDBOXES)
				: err_set(err, COVE_EINTERNAL, "out of memory");
	}
	sb->spec = *spec;
	spec->env = spec->allow_out = spec->deny_out = spec->metadata = spec->start = spec->ready = NULL; /* moved */
	spec->image_meta = NULL;
	sb->spec.created_at = sb->state_changed_at = sandbox_now_ms();
	sb->spec.from_pool = false; /* a pool hands out what it made; a copy of one was not */
	lifecycle_spec_defaults(d, &sb->spec);
	/* A restore or a fork copies a spec: what ties its source to a deadline
	 * or to a client's connection is not copied with it. */
	if (from) {
		sb->spec.expires_at = 0;
		sb->spec.ephemeral = false;
	}

	char image[600];
	if (network_check(&sb->spec, err) < 0 || disk_check(d, &sb->spec, false, err) < 0 ||
	    lifecycle_make_room(d, NULL, err) < 0)
		goto fail;
	/* A restored root keeps the image it was made on, whatever "host" is
	 * today: its changes are only meaningful over that one. A new one
	 * takes its image's tree and config (images.c). */
	if (!from && !sb->spec.external && image_spec_apply(d, &sb->spec, err) < 0)
		goto fail;
	snprintf(image, sizeof(image), "%s/images/%s", d->pool.dir, sb->spec.image_dir);
	subvol_path(d, sb->id, subvol, sizeof(subvol));
	/* An external sandbox has no image: its commands see the host. */
	if (!sb->spec.external && (!sb->spec.image_dir[0] || storage_is_tree(d->pool.driver, image) != 1)) {
		err_set(err, COVE_EINVAL, "unknown image '%s'", from ? sb->spec.image_dir : sb->spec.image);
		goto fail;
	}
	/* A new sandbox's subvolume holds only its own changes, over the
	 * shared read-only image: a new subvolume needs no transaction
	 * commit, where a snapshot of the image would (milliseconds, far more
	 * under load). A restore's is a snapshot of those changes. */
	double t0 = now_ms();
	int r = taken ? 0 : take_root(d->pool.driver, from, subvol, sb->spec.external, err);
	double t1 = now_ms();
	if (r < 0)
		goto fail;
	taken = NULL; /* from here on, its failures delete the root */
	if (root_fill(d, sb, from, image, subvol, err) < 0) {
		(void)storage_delete(d->pool.driver, subvol);
		goto fail;
	}
	sandbox_workdir_resolve(&sb->spec, image, subvol);
	/* Recorded before it runs, so that a crash from here on leaves a row
	 * that the next start can boot or clean up, never a leaked subvolume. */
	if (network_prepare(d, sb, false, from ? NULL : subvol, err) < 0 || sandbox_save(d, sb, err) < 0 ||
	    boot_begin(d, sb, p, err) < 0) {
		network_release(d, sb);
		(void)storage_delete(d->pool.driver, subvol);
		(void)store_delete_sandbox(d->store, sb->id, NULL);
		goto fail;
	}
	log_debug("sandbox %s: subvolume %.2f ms, save and runtime fork %.2f ms", sb->id, t1 - t0, now_ms() - t1);
	table_add(d, sb);
	*ret = sb;
	return 0;
fail:
	if (taken)
		(void)storage_delete(d->pool.driver, subvol);
	sandbox_free(sb);
	return -1;
}

/* The second half: the runtime's report, the row saved running. On
 * failure nothing is left of the sandbox, its slot freed. */
static int create_finish(struct engine *d, struct sandbox *sb, struct runtime_pending *p, struct cove_err *err)
{
	double t0 = now_ms();
	/* The network's rules while the runtime's child makes the sandbox (on
	 * the other core, if there is one): the nftables transaction is off
	 * the create's path. The boot is finished (its child reaped) even if
	 * they fail. */
	bool ruled = network_rules(d, sb, err) == 0;
	bool ok = boot_finish(d, sb, p, err) == 0 && ruled && network_attach(d, sb, false, err) == 0 &&
		  sandbox_save(d, sb, err) == 0;
	log_debug("sandbox %s: runtime ready and saved %.2f ms", sb->id, now_ms() - t0);
	if (!ok) {
		char subvol[600];
		subvol_path(d, sb->id, subvol, sizeof(subvol));
		sandbox_detach(sb);
		if (sb->init_pid > 0)
			kill(sb->init_pid, SIGKILL);
		(void)cgroup_destroy(&d->cgroups, sb->id, 1000, NULL);
		network_release(d, sb);
		(void)storage_delete(d->pool.driver, subvol);
		(void)store_delete_sandbox(d->store, sb->id, NULL);
		table_remove(d, sb);
		sandbox_free(sb);
		return -1;
	}
	d->count += !sb->spec.pooled;
	arm_expiry(d, sb, sb->spec.expires_at, on_expired);
	lifecycle_on_created(d, sb);
	return 0;
}

int sandbox_create(struct engine *d, struct sandbox_spec *spec, const char *from, struct sandbox **ret,
		   struct cove_err *err)
{
	struct runtime_pending p;
	struct sandbox *sb;
	double t0 = now_ms();
	if (create_begin(d, spec, from, NULL, &sb, &p, err) < 0 || create_finish(d, sb, &p, err) < 0)
		return -1;
	histogram_observe(from ? &d->metrics.restore : &d->metrics.create, (now_ms() - t0) / 1e3);
	*ret = sb;
	return 0;
}

int sandboxes_create_taken(struct engine *d, const struct sandbox_spec *spec, const char *from, char (*ids)[16],
			   int count, struct sandbox **ret, struct cove_err *err)
{
	struct runtime_pending *p = calloc((size_t)count, sizeof(*p));
	int begun = 0, r = p ? 0 : err_set(err, COVE_EINTERNAL, "out of memory");
	/* All runtimes are started, then all are waited for: their setups
	 * (mostly kernel work) run at once. */
	for (; r == 0 && begun < count; begun++) {
		struct sandbox_spec copy;
		if (sandbox_spec_copy(spec, &copy) < 0)
			r = err_set(err, COVE_EINTERNAL, "out of memory");
		else
			r = create_begin(d, &copy, from, ids ? ids[begun] : NULL, &ret[begun], &p[begun], err);
		sandbox_spec_free(&copy);
		if (r < 0)
			break;
	}
	/* The roots no copy was begun on (a failed one's is gone already). */
	for (int i = begun; ids && i < count; i++) {
		char subvol[600];
		subvol_path(d, ids[i], subvol, sizeof(subvol));
		(void)storage_delete(d->pool.driver, subvol);
	}
	for (int i = 0; i < begun; i++) {
		struct cove_err later = { 0 };
		if (create_finish(d, ret[i], &p[i], r == 0 ? err : &later) < 0) {
			r = -1;
			ret[i] = NULL;
		}
	}
	free(p);
	for (int i = 0; r < 0 && i < begun; i++)
		if (ret[i])
			(void)sandbox_delete(d, ret[i], NULL);
	return r < 0 ? -1 : 0;
}

/* The second step of a deletion, once nothing runs in the sandbox any
 * more: cgroups, socket, subvolume, row, slot. A failure is logged and the
 * row stays "deleting", so that the next start tries again. */
static void finish_delete(struct engine *d, struct sandbox *sb)
{
	struct cove_err err = { 0 };
	char subvol[600], sock[700];
	subvol_path(d, sb->id, subvol, sizeof(subvol));
	socket_path(d, sb->id, sock, sizeof(sock));
	sandbox_detach(sb);
	double t0 = now_ms();
	if (cgroup_destroy(&d->cgroups, sb->id, 5000, &err) < 0) {
		log_error("sandbox %s: delete: %s", sb->id, err.msg);
		return;
	}
	(void)unlink(sock);
	network_release(d, sb);
	double t1 = now_ms();
	memarchive_drop(d, sb->id);
	int r = storage_delete(d->pool.driver, subvol);
	log_debug("sandbox %s: deleted: cgroups %.2f ms, subvolume %.2f ms", sb->id, t1 - t0, now_ms() - t1);
	if (r < 0 && r != -ENOENT) {
		log_error("sandbox %s: delete subvolume '%s': %s", sb->id, subvol, strerror(-r));
		return;
	}
	if (store_delete_sandbox(d->store, sb->id, &err) < 0) {
		log_error("sandbox %s: %s", sb->id, err.msg);
		return;
	}
	table_remove(d, sb);
	sandbox_free(sb);
	images_collect_pending(d);
	sandboxes_stop_if_idle(d);
}

void sandboxes_stop_if_idle(struct engine *d)
{
	if (!d->stopping || worker_busy())
		return;
	for (int i = 0; i < MAX_SANDBOXES; i++)
		if (d->sandboxes[i] && d->sandboxes[i]->state == SB_DELETING)
			return;
	event_base_loopbreak(d->base);
}

static void on_deleted_init_exit(evutil_socket_t fd, short what, void *arg)
{
	finish_delete(engine_ctx, arg);
}

/* Kill pid 1 (the kernel then kills the whole pid namespace); when its
 * pidfd says it is gone, finish. Without a live init, finish now. An
 * external init has no pid namespace: what it started outlives it until
 * finish_delete kills the cgroups' processes. */
static void begin_delete(struct engine *d, struct sandbox *sb)
{
	if (sb->conn_ev)
		event_free(sb->conn_ev);
	if (sb->init_exit_ev)
		event_free(sb->init_exit_ev);
	sb->conn_ev = sb->init_exit_ev = NULL;
	if (sb->init_pidfd < 0 && sb->init_pid > 0 && proc_start_time(sb->init_pid) == sb->init_start)
		sb->init_pidfd = (int)syscall(SYS_pidfd_open, sb->init_pid, 0);
	if (sb->init_pidfd >= 0 && syscall(SYS_pidfd_send_signal, sb->init_pidfd, SIGKILL, NULL, 0) == 0) {
		sb->init_exit_ev = event_new(d->base, sb->init_pidfd, EV_READ, on_deleted_init_exit, sb);
		event_add(sb->init_exit_ev, NULL);
		return;
	}
	finish_delete(d, sb);
}

int sandbox_delete(struct engine *d, struct sandbox *sb, struct cove_err *err)
{
	enum sandbox_state was = sb->state;
	sb->state = SB_DELETING;
	if (sandbox_save(d, sb, err) < 0) {
		sb->state = was;
		return -1;
	}
	if (sb->expire_ev)
		event_free(sb->expire_ev);
	sb->expire_ev = NULL;
	if (d->on_sandbox_deleted)
		d->on_sandbox_deleted(sb->id);
	exec_abort_all(sb, "sandbox deleted");
	files_abort_all(sb, "sandbox deleted");
	procs_abort_all(sb);
	locks_drop_all(sb, "sandbox deleted");
	watch_abort_all(sb, "sandbox deleted");
	ports_drop_all(d, sb);
	launch_abort(sb, "sandbox deleted");
	d->count -= !sb->spec.pooled;
	lifecycle_on_deleted(d, sb, was);
	begin_delete(d, sb);
	return 0;
}

int sandbox_send(struct sandbox *sb, const void *buf, size_t len, const int *fds, int nfds)
{
	if (sb->conn_fd < 0)
		return -ENOTCONN;
	struct iovec iov = { (void *)buf, len };
	char cbuf[CMSG_SPACE(sizeof(int) * WIRE_MAX_FDS)];
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	fdpass_attach(&m, cbuf, fds, nfds);
	/* Blocking for this one packet: init reads promptly, and a full socket
	 * buffer means init is wedged, which poll below bounds. */
	for (;;) {
		if (sendmsg(sb->conn_fd, &m, MSG_NOSIGNAL) >= 0)
			return 0;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
		struct pollfd p = { sb->conn_fd, POLLOUT, 0 };
		if (poll(&p, 1, 5000) <= 0)
			return -ETIMEDOUT;
	}
}

int sandbox_init_reattach(struct engine *d, struct sandbox *sb, struct cove_err *err)
{
	char path[700];
	socket_path(d, sb->id, path, sizeof(path));
	sb->conn_fd = runtime_connect(sb->init_pid, sb->spec.external, path, err);
	if (sb->conn_fd < 0)
		return -1;
	evutil_make_socket_nonblocking(sb->conn_fd);
	sb->conn_ev = event_new(d->base, sb->conn_fd, EV_READ | EV_PERSIST, on_init_message, sb);
	event_add(sb->conn_ev, NULL);
	return 0;
}

static void mark_stopped(struct sandbox *sb, const char *why)
{
	log_warn("sandbox %s: %s", sb->id, why);
	exec_abort_all(sb, why);
	files_abort_all(sb, why);
	procs_abort_all(sb);
	watch_abort_all(sb, why);
	launch_abort(sb, why);
	sandbox_detach(sb);
	int was = sb->state;
	sb->state = SB_STOPPED;
	(void)sandbox_save(engine_ctx, sb, NULL);
	events_emit(engine_ctx, sb, was);
}

static void on_init_exit(evutil_socket_t fd, short what, void *arg)
{
	mark_stopped(arg, "cove-init exited");
}

static void on_init_message(evutil_socket_t fd, short what, void *arg)
{
	struct sandbox *sb = arg;
	for (;;) {
		struct wire_hdr h = { 0 };
		int passed[WIRE_MAX_FDS], npassed;
		ssize_t n = sandbox_recv_packet(fd, &h, passed, &npassed);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			mark_stopped(sb, "lost the connection to cove-init");
			return;
		}
		if (n != sizeof(h) || h.payload_len != 0) {
			for (int i = 0; i < npassed; i++)
				close(passed[i]);
			continue;
		}
		sandbox_dispatch(sb, &h, passed, npassed);
	}
}

struct load_ctx {
	struct engine *d;
	int failed;
};

/* One row of state.db at start: re-attach to its running init, or boot a
 * new init on its files if the old one is gone (host reboot, kill). */
static void load_one(void *arg, const struct store_sandbox *row)
{
	struct load_ctx *ctx = arg;
	struct engine *d = ctx->d;
	struct cove_err err = { 0 };
	struct sandbox *sb = sandbox_new(row->slot);
	if (!sb || row->slot < 0 || row->slot >= MAX_SANDBOXES || d->sandboxes[row->slot] ||
	    !sandbox_id_valid(row->id) || sandbox_spec_from_json(row->spec, &sb->spec) < 0) {
		log_error("state.db: bad sandbox row '%s'", row->id);
		free(sb);
		ctx->failed++;
		return;
	}
	snprintf(sb->id, sizeof(sb->id), "%s", row->id);
	sb->init_pid = row->init_pid;
	sb->init_start = row->init_start;
	sb->state_changed_at = row->state_changed_at;
	sb->state_reason = sandbox_reason_parse(row->state_reason);
	table_add(d, sb);
	/* A warm pool's sandbox served nobody: the pools start afresh. */
	if (strcmp(row->state, "deleting") == 0 || sb->spec.pooled) {
		sb->state = SB_DELETING;
		(void)sandbox_save(d, sb, NULL);
		begin_delete(d, sb);
		return;
	}
	d->count++;
	/* The limit is on disk with the subvolume; set again for a pool that
	 * had no quotas before this start. */
	if (disk_limit_apply(d, sb, &err) < 0) {
		log_error("sandbox %s: %s", sb->id, err.msg);
		memset(&err, 0, sizeof(err));
	}
	bool paused = strcmp(row->state, "paused") == 0;
	bool alive = row->init_pid > 0 && row->init_start && proc_start_time(row->init_pid) == row->init_start;
	if (strcmp(row->state, "archived") == 0 || memarchive_on_loaded(d, sb, alive)) {
		sb->state = SB_ARCHIVED;
		arm_expiry(d, sb, sb->spec.expires_at, on_expired);
		lifecycle_on_loaded(d, sb);
		return;
	}
	if (network_prepare(d, sb, true, NULL, &err) < 0) {
		log_error("sandbox %s: network: %s", sb->id, err.msg);
		memset(&err, 0, sizeof(err));
	}
	/* An ephemeral sandbox's connection died with the previous coved. The
	 * deletion waits for the loop: rows are still being read. */
	if (sb->spec.ephemeral)
		arm_expiry(d, sb, 1, on_orphaned);
	else
		arm_expiry(d, sb, sb->spec.expires_at, on_expired);
	if (alive && attach(d, sb, &err) == 0) {
		log_info("sandbox %s: re-attached to cove-init pid %d", sb->id, sb->init_pid);
		if (network_attach(d, sb, true, &err) < 0)
			log_error("sandbox %s: network: %s", sb->id, err.msg);
		/* A coved killed inside a snapshot's or fork's frozen instant
		 * left it frozen, and nothing but a pause keeps a sandbox frozen. */
		if (!paused && cgroup_freeze(&d->cgroups, sb->id, false, &err) < 0)
			log_error("sandbox %s: thaw: %s", sb->id, err.msg);
		procs_reattach(sb);
		sb->state = paused ? SB_PAUSED : SB_RUNNING;
		lifecycle_on_loaded(d, sb);
		return;
	}
	memset(&err, 0, sizeof(err));
	(void)cgroup_destroy(&d->cgroups, sb->id, 2000, NULL);
	if (sandbox_boot(d, sb, &err) < 0 || network_attach(d, sb, false, &err) < 0 || sandbox_save(d, sb, &err) < 0) {
		log_error("sandbox %s: restart failed: %s", sb->id, err.msg);
		sb->state = SB_STOPPED;
		return;
	}
	log_info("sandbox %s: started again (its previous init was gone)", sb->id);
	sb->state = paused ? SB_PAUSED : SB_RUNNING;
	lifecycle_on_loaded(d, sb);
}

/* A crash between taking a root and recording it, or before a fork's rows
 * were committed, leaves a subvolume that no row names: nothing was
 * acknowledged for it, so it goes, and first what may run on it (a fork's
 * copies were started). */
static void remove_unrecorded_roots(struct engine *d)
{
	char dir[600], path[700];
	snprintf(dir, sizeof(dir), "%s/sandboxes", d->pool.dir);
	DIR *dh = opendir(dir);
	struct dirent *e;
	while (dh && (e = readdir(dh))) {
		if (!sandbox_id_valid(e->d_name))
			continue;
		if (table_get(d, e->d_name))
			continue;
		struct cove_err err = { 0 };
		if (cgroup_destroy(&d->cgroups, e->d_name, 2000, &err) < 0) {
			log_error("sandbox %s, not recorded: %s", e->d_name, err.msg);
			continue;
		}
		socket_path(d, e->d_name, path, sizeof(path));
		(void)unlink(path);
		network_forget(d, e->d_name);
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		int r = storage_delete(d->pool.driver, path);
		if (r < 0)
			log_error("remove '%s', a sandbox root with no record: %s", path, strerror(-r));
		else
			log_info("removed '%s', a sandbox root with no record (an interrupted create or fork)", path);
	}
	if (dh)
		closedir(dh);
}

static bool image_in_use(void *arg, const char *name)
{
	struct engine *d = arg;
	if (strcmp(name, d->host_image) == 0)
		return true;
	for (int i = 0; i < MAX_SANDBOXES; i++)
		if (d->sandboxes[i] && strcmp(d->sandboxes[i]->spec.image_dir, name) == 0)
			return true;
	for (const struct snapshot *sn = d->snapshots; sn; sn = sn->next)
		if (strcmp(sn->image_dir, name) == 0)
			return true;
	return false;
}

/* Snapshots are loaded first: the images they need are kept too. */
int sandboxes_load(struct engine *d, struct cove_err *err)
{
	struct load_ctx ctx = { .d = d };
	memsnap_wait_leftovers(d);
	int bad_snapshots = snapshots_load(d, err);
	if (bad_snapshots < 0)
		return -1;
	if (templates_load(d, err) < 0)
		return -1;
	if (store_each_sandbox(d->store, load_one, &ctx, err) < 0)
		return -1;
	procs_wait_listed(d);
	if (ctx.failed == 0) /* a row it could not read may own a root, or need an image */
		remove_unrecorded_roots(d);
	if (ctx.failed == 0)
		memarchive_sweep(d);
	if (ctx.failed == 0 && bad_snapshots == 0)
		host_image_gc(&d->pool, image_in_use, d);
	network_reconcile(d);
	return ports_load(d, err);
}

/* CRIU over its RPC (criu swrk); see criu.h. */
#include "sys/criu.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/prctl.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <linux/fs.h>
#include <sched.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/close_range.h>

#include "common/cleanup.h"
#include "criu_rpc.pb-c.h"

/* Restore's repeated fields are built on the stack: at most this many of each. */
#define RESTORE_MAX 16
#define DUMP_LOG "dump.log"
#define RESTORE_LOG "restore.log"
/* A request names a few paths and options; answers are smaller still. */
#define MSG_MAX 65536

/* criu learns the kernel's features at each start (tens of ms) unless it
 * finds them in /run/criu.kdat, which it keeps only on a tmpfs. Where /run
 * is none, criu's own mount namespace gets KDAT_DIR (on /dev/shm) at /run,
 * so that what it learns once is kept. Best effort: criu runs either way. */
#define KDAT_DIR "/dev/shm/cove-criu"

static void kdat_cache(void)
{
	struct statfs fs;
	struct stat st;
	if (statfs("/run", &fs) == 0 && fs.f_type == TMPFS_MAGIC)
		return;
	if ((mkdir(KDAT_DIR, 0700) < 0 && errno != EEXIST) || lstat(KDAT_DIR, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != 0 || (st.st_mode & 077) || statfs(KDAT_DIR, &fs) < 0 || fs.f_type != TMPFS_MAGIC)
		return;
	if (unshare(CLONE_NEWNS) < 0)
		return;
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0 || mount(KDAT_DIR, "/run", NULL, MS_BIND, NULL) < 0)
		_exit(127);
}

/* The child side of run_swrk, after fork in a process that may have
 * threads: only async-signal-safe calls. argv names sk's number; sk and
 * the fds criu must inherit stay open, everything else closes on exec. */
/* Close every fd from 3 on but the n in keep (sorted here): nothing of
 * the caller's (its listening sockets above all) may outlive it in this
 * child, which runs a while before its exec when it prepares a restore. */
static void close_all_but(int *keep, size_t n)
{
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int t = keep[j];
			keep[j] = keep[j - 1];
			keep[j - 1] = t;
		}
	unsigned from = 3;
	for (size_t i = 0; i < n; i++) {
		unsigned k = (unsigned)keep[i];
		if (k > from && syscall(SYS_close_range, from, k - 1, 0) < 0)
			_exit(127);
		if (k >= from)
			from = k + 1;
	}
	if (syscall(SYS_close_range, from, ~0U, 0) < 0)
		_exit(127);
}

static void exec_swrk(const char *criu, char *const argv[], int sk, const int *keep, size_t n_keep,
		      void (*prepare)(void *), void *prepare_arg, int prepare_fd, pid_t parent)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* criu logs to its log file; what it prints (check's verdict) is not
	 * for coved's stdio. */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0)
		_exit(127);
	int all[RESTORE_MAX + 2];
	size_t n = 0;
	all[n++] = sk;
	for (size_t i = 0; i < n_keep && i < RESTORE_MAX; i++)
		all[n++] = keep[i];
	if (prepare_fd > 2)
		all[n++] = prepare_fd; /* close-on-exec: criu does not keep it */
	close_all_but(all, n);
	if (fcntl(sk, F_SETFD, 0) < 0)
		_exit(127);
	for (size_t i = 0; i < n_keep; i++)
		if (fcntl(keep[i], F_SETFD, 0) < 0)
			_exit(127);
	kdat_cache();
	/* A restore dies with its caller: nothing of one a crash cut short
	 * may go on into the cgroup the next start cleans up. (A dump does
	 * not: killed mid-way, it would leave its parasite in the tree.) */
	if (prepare && (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent))
		_exit(127);
	if (prepare)
		prepare(prepare_arg);
	execv(criu, argv);
	_exit(127);
}

static int send_req(int sk, const CriuReq *req, struct cove_err *err)
{
	size_t len = criu_req__get_packed_size(req);
	if (len > MSG_MAX)
		return err_set(err, COVE_EINVAL, "criu request too large (%zu bytes)", len);
	_cleanup_free_ uint8_t *buf = malloc(len ? len : 1);
	if (!buf)
		return err_sys(err, ENOMEM, "criu request");
	criu_req__pack(req, buf);
	if (send(sk, buf, len, MSG_NOSIGNAL) != (ssize_t)len)
		return err_sys(err, errno, "send criu request");
	return 0;
}

static CriuResp *recv_resp(int sk, struct cove_err *err)
{
	_cleanup_free_ uint8_t *buf = malloc(MSG_MAX);
	if (!buf) {
		err_sys(err, ENOMEM, "criu answer");
		return NULL;
	}
	ssize_t n;
	do
		n = recv(sk, buf, MSG_MAX, MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno != ECONNRESET) {
		err_sys(err, errno, "read criu answer");
		return NULL;
	}
	if (n <= 0 || n > MSG_MAX) {
		err_set(err, COVE_EINTERNAL, n > 0 ? "criu answer too large" : "criu ended without an answer");
		return NULL;
	}
	CriuResp *r = criu_resp__unpack(NULL, (size_t)n, buf);
	if (!r)
		err_set(err, COVE_EINTERNAL, "criu answer does not decode");
	return r;
}

/* What run_swrk does besides the request: see criu_restore_opts. */
struct swrk_hooks {
	void (*prepare)(void *arg);
	void *prepare_arg;
	int prepare_fd;
	int (*setup_ns)(pid_t pid, void *arg);
	void *setup_ns_arg;
};

/* One message of criu's: its final answer (*ret), or a notification (an
 * action script's point), answered here after setup_ns for
 * "setup-namespaces" (*ret NULL). */
static int swrk_step(int sk, const struct swrk_hooks *hk, CriuResp **ret, struct cove_err *err)
{
	CriuResp *r = recv_resp(sk, err);
	*ret = NULL;
	if (!r)
		return -1;
	if (r->type != CRIU_REQ_TYPE__NOTIFY) {
		*ret = r;
		return 0;
	}
	bool ok = true;
	if (hk && hk->setup_ns && r->notify && r->notify->script && strcmp(r->notify->script, "setup-namespaces") == 0)
		ok = hk->setup_ns(r->notify->has_pid ? r->notify->pid : 0, hk->setup_ns_arg) == 0;
	criu_resp__free_unpacked(r, NULL);
	CriuReq ack = CRIU_REQ__INIT;
	ack.type = CRIU_REQ_TYPE__NOTIFY;
	ack.has_notify_success = true;
	ack.notify_success = ok;
	return send_req(sk, &ack, err);
}

/* A `criu swrk` at work on one request (swrk_start), until its answer. */
struct swrk {
	pid_t pid;
	int sk;
	struct swrk_hooks hk;
	CriuResp *resp; /* the final answer, once there */
	struct cove_err err;
	bool done;
};

/* Fork `criu swrk` and send it req. keep: the caller's fds criu must see
 * (inherit_fd); they stay open in the caller. */
static int swrk_start(const char *criu, const CriuReq *req, const int *keep, size_t n_keep,
		      const struct swrk_hooks *hk, struct swrk *w, struct cove_err *err)
{
	int sk[2];
	*w = (struct swrk){ .pid = -1, .sk = -1 };
	if (hk)
		w->hk = *hk;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sk) < 0)
		return err_sys(err, errno, "socketpair for criu");
	/* Above stdio, which the child points at /dev/null. */
	if (sk[1] < 3) {
		int high = fcntl(sk[1], F_DUPFD_CLOEXEC, 3);
		close(sk[1]);
		sk[1] = high;
	}
	char fdarg[16];
	snprintf(fdarg, sizeof(fdarg), "%d", sk[1]);
	char *const argv[] = { "criu", "swrk", fdarg, NULL };
	pid_t parent = getpid();
	pid_t pid = sk[1] < 0 ? -1 : fork();
	if (pid < 0) {
		int e = errno;
		close(sk[0]);
		if (sk[1] >= 0)
			close(sk[1]);
		return err_sys(err, e, "fork criu");
	}
	if (pid == 0)
		exec_swrk(criu, argv, sk[1], keep, n_keep, hk ? hk->prepare : NULL, hk ? hk->prepare_arg : NULL,
			  hk ? hk->prepare_fd : -1, parent);
	close(sk[1]);
	w->pid = pid;
	w->sk = sk[0];
	if (send_req(w->sk, req, &w->err) < 0)
		w->done = true;
	return 0;
}

/* Reap w's criu (EOF on the socket ends swrk); its answer, or NULL with
 * err set. */
static CriuResp *swrk_end(const char *criu, struct swrk *w, struct cove_err *err)
{
	close(w->sk);
	int status = 0;
	while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!w->resp && WIFEXITED(status) && WEXITSTATUS(status) == 127)
		err_set(err, ENOEXEC, "cannot run '%s swrk'", criu);
	else if (!w->resp)
		err_set(err, w->err.code, "%s", w->err.msg);
	return w->resp;
}

/* One request to a fresh `criu swrk`: the answer (free with
 * criu_resp__free_unpacked), or NULL with err set. */
static CriuResp *run_swrk(const char *criu, const CriuReq *req, const int *keep, size_t n_keep,
			  const struct swrk_hooks *hk, struct cove_err *err)
{
	struct swrk w;
	if (swrk_start(criu, req, keep, n_keep, hk, &w, err) < 0)
		return NULL;
	while (!w.done)
		w.done = swrk_step(w.sk, &w.hk, &w.resp, &w.err) < 0 || w.resp;
	return swrk_end(criu, &w, err);
}

/* The first error line of the log criu wrote, into buf. criu first raises
 * its own RLIMIT_NOFILE and logs an error when it may not (no
 * CAP_SYS_RESOURCE, as in some containers); it goes on without, so that
 * line is no reason. */
static bool log_first_error(const char *dir, const char *log, char *buf, size_t size)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, log);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	char line[512];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f)) {
		char *at = strstr(line, "Error (");
		if (at && !strstr(line, "RLIMIT_NOFILE")) {
			/* from "Error": without the timestamp or pid (log levels 3-4) */
			at[strcspn(at, "\n")] = '\0';
			snprintf(buf, size, "%s", at);
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* err for a failed answer: criu's errno (else EIO) and its reason, from
 * the log (see log_first_error), else from the answer. */
static int fail_resp(const CriuResp *r, const char *what, const char *dir, const char *log, struct cove_err *err)
{
	char reason[400] = "";
	if (!dir || !log || !log_first_error(dir, log, reason, sizeof(reason)))
		snprintf(reason, sizeof(reason), "%s",
			 r->cr_errmsg && r->cr_errmsg[0] ? r->cr_errmsg : "no reason given");
	reason[strcspn(reason, "\n")] = '\0';
	int code = r->has_cr_errno && r->cr_errno > 0 ? r->cr_errno : EIO;
	if (dir && log)
		return err_set(err, code, "criu %s failed: %s (log: %s/%s)", what, reason, dir, log);
	return err_set(err, code, "criu %s failed: %s", what, reason);
}

int criu_get_version(const char *path, struct criu_version *ret, struct cove_err *err)
{
	CriuReq req = CRIU_REQ__INIT;
	req.type = CRIU_REQ_TYPE__VERSION;
	CriuResp *r = run_swrk(path, &req, NULL, 0, NULL, err);
	if (!r)
		return -1;
	int rc = 0;
	if (!r->success || !r->version)
		rc = err_set(err, ENOTSUP, "'%s' does not answer a version request", path);
	else
		*ret = (struct criu_version){ r->version->major_number, r->version->minor_number,
					      r->version->has_sublevel ? r->version->sublevel : 0 };
	criu_resp__free_unpacked(r, NULL);
	return rc;
}

static bool version_ok(const struct criu_version *v)
{
	return v->major > CRIU_MIN_MAJOR || (v->major == CRIU_MIN_MAJOR && v->minor >= CRIU_MIN_MINOR);
}

int criu_find(char *ret, size_t size, struct cove_err *err)
{
	static const char *const host[] = { "/usr/local/sbin/criu", "/usr/sbin/criu", "/sbin/criu",
					    "/usr/bin/criu",        CRIU_BUNDLED,     NULL };
	const char *env = getenv("COVE_CRIU");
	const char *const only[] = { env, NULL };
	const char *const *list = env && env[0] ? only : host;
	char seen[300] = "";
	for (size_t i = 0; list[i]; i++) {
		struct criu_version v;
		struct cove_err e = { 0 };
		if (access(list[i], X_OK) < 0)
			continue;
		if (criu_get_version(list[i], &v, &e) < 0) {
			snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), "; %s: %s", list[i], e.msg);
			continue;
		}
		if (version_ok(&v)) {
			if (strlen(list[i]) >= size)
				return err_set(err, ENAMETOOLONG, "criu path too long");
			snprintf(ret, size, "%s", list[i]);
			return 0;
		}
		snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), "; %s is %d.%d.%d", list[i], v.major,
			 v.minor, v.sublevel);
	}
	return err_set(err, ENOENT, "no criu >= %d.%d found (scripts/deps.sh builds one into %s)%s", CRIU_MIN_MAJOR,
		       CRIU_MIN_MINOR, CRIU_BUNDLED, seen);
}

int criu_check(const char *criu, struct cove_err *err)
{
	CriuReq req = CRIU_REQ__INIT;
	req.type = CRIU_REQ_TYPE__CHECK;
	CriuResp *r = run_swrk(criu, &req, NULL, 0, NULL, err);
	if (!r)
		return -1;
	int rc = r->success ? 0 : fail_resp(r, "check", NULL, NULL, err);
	criu_resp__free_unpacked(r, NULL);
	return rc;
}

/* The options dump and restore share. */
static void opts_common(CriuOpts *co, const char *dir, const char *log, int log_level, enum criu_cgroups cg,
			bool nftables)
{
	co->images_dir_fd = -1;
	co->images_dir = (char *)dir;
	co->log_file = (char *)log;
	if (log_level > 0)
		co->has_log_level = true, co->log_level = log_level;
	co->has_manage_cgroups = true;
	co->manage_cgroups = cg != CRIU_CG_IGNORE;
	co->has_manage_cgroups_mode = true;
	co->manage_cgroups_mode = cg == CRIU_CG_IGNORE ? CRIU_CG_MODE__IGNORE : (CriuCgMode)cg;
	if (nftables)
		co->has_network_lock = true, co->network_lock = CRIU_NETWORK_LOCK_METHOD__NFTABLES;
	/* criu gives up on a dump or restore after 10 s by default: a loaded
	 * machine (2 cores shared by many) can take longer. */
	co->has_timeout = true;
	co->timeout = CRIU_TIMEOUT_S;
	/* A deleted file still open is kept in the images up to this size
	 * (criu's default is 1 MiB): a sandbox's temp files are bigger. */
	co->has_ghost_limit = true;
	co->ghost_limit = 64u << 20;
	co->has_link_remap = true;
	co->link_remap = true;
}

static size_t count_strv(const char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

#define SET_BOOL(co, field, val) ((co)->has_##field = true, (co)->field = (val))

int criu_dump(const char *criu, const struct criu_dump_opts *o, struct cove_err *err)
{
	if (o->pid <= 0 || !o->images_dir)
		return err_set(err, COVE_EINVAL, "criu dump: no pid or images directory");
	CriuOpts co = CRIU_OPTS__INIT;
	opts_common(&co, o->images_dir, DUMP_LOG, o->log_level, o->cgroups, o->nftables_lock);
	co.has_pid = true;
	co.pid = o->pid;
	SET_BOOL(&co, leave_running, o->leave_running);
	SET_BOOL(&co, tcp_established, o->tcp_established);
	SET_BOOL(&co, shell_job, o->shell_job);
	SET_BOOL(&co, ext_unix_sk, o->ext_unix_sk);
	SET_BOOL(&co, file_locks, o->file_locks);
	SET_BOOL(&co, orphan_pts_master, o->orphan_pts_master);
	if (o->empty_netns)
		co.has_empty_ns = true, co.empty_ns = CLONE_NEWNET;
	co.freeze_cgroup = (char *)o->freeze_cgroup;
	co.n_external = count_strv(o->external);
	co.external = (char **)o->external;
	CriuReq req = CRIU_REQ__INIT;
	req.type = CRIU_REQ_TYPE__DUMP;
	req.opts = &co;
	CriuResp *r = run_swrk(criu, &req, NULL, 0, NULL, err);
	if (!r)
		return -1;
	int rc = r->success ? 0 : fail_resp(r, "dump", o->images_dir, DUMP_LOG, err);
	criu_resp__free_unpacked(r, NULL);
	return rc;
}

/* A restore under way: criu_restore_start's, on the list of those not
 * waited for yet (one thread calls these, see criu.h). */
struct criu_job {
	struct criu_job *next;
	struct swrk w;
	char criu[PATH_MAX];
	char images_dir[PATH_MAX];
};
static struct criu_job *jobs;

int criu_restore_start(const char *criu, const struct criu_restore_opts *o, struct criu_job **ret,
		       struct cove_err *err)
{
	if (!o->images_dir || o->n_inherit > RESTORE_MAX || o->n_join > RESTORE_MAX)
		return err_set(err, COVE_EINVAL, "criu restore: no images directory, or too many fds/namespaces");
	CriuOpts co = CRIU_OPTS__INIT;
	opts_common(&co, o->images_dir, RESTORE_LOG, o->log_level, o->cgroups, o->nftables_lock);
	co.root = (char *)o->root;
	SET_BOOL(&co, tcp_established, o->tcp_established);
	SET_BOOL(&co, shell_job, o->shell_job);
	SET_BOOL(&co, ext_unix_sk, o->ext_unix_sk);
	SET_BOOL(&co, file_locks, o->file_locks);
	SET_BOOL(&co, orphan_pts_master, o->orphan_pts_master);
	if (o->empty_netns)
		co.has_empty_ns = true, co.empty_ns = CLONE_NEWNET;
	SET_BOOL(&co, tcp_close, o->tcp_close);
	SET_BOOL(&co, notify_scripts, o->setup_ns != NULL);
	/* The restored root becomes our child, not criu's: coved reaps it. */
	SET_BOOL(&co, rst_sibling, true);
	co.n_external = count_strv(o->external);
	co.external = (char **)o->external;

	InheritFd ifd[RESTORE_MAX], *ifdp[RESTORE_MAX];
	int keep[RESTORE_MAX];
	for (size_t i = 0; i < o->n_inherit; i++) {
		inherit_fd__init(&ifd[i]);
		ifd[i].key = (char *)o->inherit[i].key;
		ifd[i].fd = keep[i] = o->inherit[i].fd;
		ifdp[i] = &ifd[i];
	}
	co.n_inherit_fd = o->n_inherit;
	co.inherit_fd = ifdp;
	JoinNamespace jn[RESTORE_MAX], *jnp[RESTORE_MAX];
	for (size_t i = 0; i < o->n_join; i++) {
		join_namespace__init(&jn[i]);
		jn[i].ns = (char *)o->join[i].ns;
		jn[i].ns_file = (char *)o->join[i].file;
		jnp[i] = &jn[i];
	}
	co.n_join_ns = o->n_join;
	co.join_ns = jnp;

	CriuReq req = CRIU_REQ__INIT;
	req.type = CRIU_REQ_TYPE__RESTORE;
	req.opts = &co;
	struct swrk_hooks hk = { o->prepare, o->prepare_arg, o->prepare_fd, o->setup_ns, o->setup_ns_arg };
	struct criu_job *j = calloc(1, sizeof(*j));
	if (!j)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	snprintf(j->criu, sizeof(j->criu), "%s", criu);
	snprintf(j->images_dir, sizeof(j->images_dir), "%s", o->images_dir);
	if (swrk_start(criu, &req, keep, o->n_inherit, &hk, &j->w, err) < 0) {
		free(j);
		return -1;
	}
	j->next = jobs;
	jobs = j;
	*ret = j;
	return 0;
}

/* One message of each job whose criu has written: poll, then the steps. */
static int jobs_step(void)
{
	nfds_t n = 0, cap = 0;
	for (struct criu_job *j = jobs; j; j = j->next)
		cap++;
	_cleanup_free_ struct pollfd *pf = calloc(cap, sizeof(*pf));
	_cleanup_free_ struct criu_job **of = calloc(cap, sizeof(*of));
	if (!pf || !of)
		return -ENOMEM;
	for (struct criu_job *j = jobs; j; j = j->next)
		if (!j->w.done) {
			pf[n] = (struct pollfd){ .fd = j->w.sk, .events = POLLIN };
			of[n++] = j;
		}
	if (poll(pf, n, -1) < 0)
		return errno == EINTR ? 0 : -errno;
	for (nfds_t i = 0; i < n; i++)
		if (pf[i].revents) {
			struct swrk *w = &of[i]->w;
			w->done = swrk_step(w->sk, &w->hk, &w->resp, &w->err) < 0 || w->resp;
		}
	return 0;
}

int criu_restore_wait(struct criu_job *job, pid_t *ret_pid, struct cove_err *err)
{
	/* The others' messages are answered meanwhile: each criu waits on its
	 * own notifications, so all of them go on at once. */
	int e = 0;
	while (!job->w.done && (e = jobs_step()) == 0)
		;
	if (e < 0)
		err_sys(&job->w.err, -e, "poll criu"), job->w.done = true;
	for (struct criu_job **p = &jobs; *p; p = &(*p)->next)
		if (*p == job) {
			*p = job->next;
			break;
		}
	CriuResp *r = swrk_end(job->criu, &job->w, err);
	int rc = 0;
	if (!r)
		rc = -1;
	else if (!r->success)
		rc = fail_resp(r, "restore", job->images_dir, RESTORE_LOG, err);
	else if (!r->restore || r->restore->pid <= 0)
		rc = err_set(err, COVE_EINTERNAL, "criu restore answered without a pid");
	else
		*ret_pid = r->restore->pid;
	if (r)
		criu_resp__free_unpacked(r, NULL);
	free(job);
	return rc;
}

int criu_restore(const char *criu, const struct criu_restore_opts *o, pid_t *ret_pid, struct cove_err *err)
{
	struct criu_job *j;
	return criu_restore_start(criu, o, &j, err) < 0 ? -1 : criu_restore_wait(j, ret_pid, err);
}

/* criu's image files: a magic, the image's own magic, then (u32 size,
 * protobuf message) entries. */
#define IMG_COMMON_MAGIC 0x54564319u
#define USERNS_MAGIC 0x55474906u

static void shift_map(UidGidExtent **m, size_t n, unsigned base)
{
	for (size_t i = 0; i < n; i++)
		m[i]->lower_first = base + m[i]->first;
}

/* The user namespace image at src, its maps moved to base, into dst. */
static int shift_userns(const char *src, const char *dst, unsigned base, struct cove_err *err)
{
	_cleanup_free_ uint8_t *in = NULL, *out = NULL;
	size_t n = 0, o = 0, cap = 1 << 16;
	_cleanup_close_ int fd = open(src, O_RDONLY | O_CLOEXEC);
	in = malloc(cap), out = malloc(cap * 2);
	if (fd < 0 || !in || !out)
		return err_sys(err, fd < 0 ? errno : ENOMEM, "read '%s'", src);
	ssize_t r;
	while (n < cap && (r = read(fd, in + n, cap - n)) > 0)
		n += (size_t)r;
	uint32_t magic[2];
	if (n < 8 || n == cap || (memcpy(magic, in, 8), magic[0] != IMG_COMMON_MAGIC || magic[1] != USERNS_MAGIC))
		return err_set(err, COVE_EINTERNAL, "'%s' is not a criu user namespace image", src);
	memcpy(out, in, 8);
	o = 8;
	for (size_t at = 8; at + 4 <= n;) {
		uint32_t len;
		memcpy(&len, in + at, 4);
		UsernsEntry *e = at + 4 + len <= n ? userns_entry__unpack(NULL, len, in + at + 4) : NULL;
		if (!e)
			return err_set(err, COVE_EINTERNAL, "'%s': an entry does not decode", src);
		shift_map(e->uid_map, e->n_uid_map, base);
		shift_map(e->gid_map, e->n_gid_map, base);
		uint32_t nlen = (uint32_t)userns_entry__get_packed_size(e);
		if (o + 4 + nlen > cap * 2) {
			userns_entry__free_unpacked(e, NULL);
			return err_set(err, COVE_EINTERNAL, "'%s' too large", src);
		}
		memcpy(out + o, &nlen, 4);
		userns_entry__pack(e, out + o + 4);
		o += 4 + nlen;
		at += 4 + len;
		userns_entry__free_unpacked(e, NULL);
	}
	_cleanup_close_ int wfd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (wfd < 0 || write(wfd, out, o) != (ssize_t)o)
		return err_sys(err, errno, "write '%s'", dst);
	return 0;
}

static bool is_log(const char *name)
{
	size_t n = strlen(name);
	return n > 4 && strcmp(name + n - 4, ".log") == 0;
}

/* src's data into a new file dst owned by owner: a reflink where the file
 * system shares extents (btrfs), else a copy. */
static int clone_file(const char *src, const char *dst, unsigned owner, struct cove_err *err)
{
	_cleanup_close_ int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	_cleanup_close_ int out = in < 0 ? -1 : open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (in < 0 || out < 0)
		return err_sys(err, errno, "copy '%s' to '%s'", src, dst);
	if (ioctl(out, FICLONE, in) < 0) {
		struct stat st;
		if (fstat(in, &st) < 0)
			return err_sys(err, errno, "stat '%s'", src);
		for (off_t left = st.st_size; left > 0;) {
			ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);
			if (n <= 0)
				return err_sys(err, n < 0 ? errno : EIO, "copy '%s' to '%s'", src, dst);
			left -= n;
		}
	}
	return fchown(out, owner, owner) < 0 || fchmod(out, 0644) < 0 ? err_sys(err, errno, "chown '%s'", dst) : 0;
}

int criu_images_shifted(const char *src, const char *dst, unsigned uid_base, struct cove_err *err)
{
	/* criu reads some images from inside the restored user namespace, as
	 * whatever ids its tasks have at that point: the new root owns them,
	 * and anyone may read them here (the caller's directories above are
	 * closed to others). */
	if (mkdir(dst, 0711) < 0 || chown(dst, uid_base, uid_base) < 0 || chmod(dst, 0711) < 0)
		return err_sys(err, errno, "mkdir '%s'", dst);
	DIR *dh = opendir(src);
	if (!dh)
		return err_sys(err, errno, "open '%s'", src);
	struct dirent *e;
	int rc = 0;
	char from[PATH_MAX], to[PATH_MAX];
	while (rc == 0 && (e = readdir(dh))) {
		if (e->d_name[0] == '.' || is_log(e->d_name))
			continue;
		snprintf(from, sizeof(from), "%s/%s", src, e->d_name);
		snprintf(to, sizeof(to), "%s/%s", dst, e->d_name);
		if (strncmp(e->d_name, "userns-", 7) == 0)
			rc = shift_userns(from, to, uid_base, err) < 0 || chown(to, uid_base, uid_base) < 0 ||
					     chmod(to, 0644) < 0
				     ? -1
				     : 0;
		else if (link(from, to) < 0) /* else, on another file system: a copy */
			rc = clone_file(from, to, uid_base, err);
	}
	closedir(dh);
	return rc;
}

int criu_images_readable(const char *dir, struct cove_err *err)
{
	DIR *dh = opendir(dir);
	if (!dh)
		return err_sys(err, errno, "open '%s'", dir);
	struct dirent *e;
	int rc = 0;
	while (rc == 0 && (e = readdir(dh)))
		if (e->d_name[0] != '.' && fchmodat(dirfd(dh), e->d_name, 0644, 0) < 0)
			rc = err_sys(err, errno, "chmod '%s/%s'", dir, e->d_name);
	closedir(dh);
	return rc;
}

long long criu_images_size(const char *dir)
{
	DIR *dh = opendir(dir);
	if (!dh)
		return 0;
	long long total = 0;
	struct dirent *e;
	struct stat st;
	while ((e = readdir(dh)))
		if (e->d_name[0] != '.' && !is_log(e->d_name) &&
		    fstatat(dirfd(dh), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
			total += (long long)st.st_blocks * 512;
	closedir(dh);
	return total;
}

/* coved: the cove daemon. Sets up storage and cgroups, re-attaches to the
 * sandboxes it finds in state.db, and serves the API on a unix socket from
 * one libevent loop. It can be killed at any moment: sandboxes live on in
 * their own processes, and the next coved picks them up. */
#include <errno.h>
#include <stddef.h>
#include <event2/bufferevent.h>
#include "daemon/http/httpd.h"
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/io.h"
#include "common/log.h"
#include "common/parse.h"
#include "daemon/api/api.h"
#include "daemon/daemon.h"
#include "daemon/e2b/e2b.h"
#include "daemon/http/access.h"
#include "daemon/proxy/proxy.h"
#include "engine/engine.h"
#include "engine/memsnap.h"
#include "engine/template.h"
#include "store/snapshot_store.h"
#include "store/store.h"
#include "image/host_image.h"
#include "sys/seccomp.h"


struct daemon *daemon_ctx;



static int listen_api(const char *path, struct cove_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return err_set(err, COVE_EINVAL, "socket path too long: '%s'", path);
	strcpy(sa.sun_path, path);
	_cleanup_free_ char *dir = strdup(path);
	if (!dir || io_mkdir_p(dirname(dir), 0755) < 0)
		return err_sys(err, errno, "mkdir for '%s'", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return err_sys(err, errno, "socket");
	/* A socket file that nothing answers on is stale: replace it. One that
	 * answers belongs to a running coved: refuse to start twice. (The
	 * processes coved forks close its fds first thing: a killed coved's
	 * socket does not live on in them.) */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		return err_set(err, COVE_ESTATE, "another coved is serving '%s'", path);
	}
	(void)unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0660) < 0 || listen(fd, 512) < 0) {
		err_sys(err, errno, "listen on '%s'", path);
		close(fd);
		return -1;
	}
	return fd;
}

static void on_sigchld(evutil_socket_t sig, short what, void *arg)
{
	/* Inits of deleted or dead sandboxes (coved is their subreaper). Their
	 * exits are observed through pidfds; here they are only reaped. */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

static void on_sigterm(evutil_socket_t sig, short what, void *arg)
{
	log_info("signal %d: stopping (sandboxes keep running)", (int)sig);
	/* Deletions under way get a few seconds to finish; what is left then
	 * is finished by the next start. */
	engine_ctx->stopping = true;
	/* A warm pool's sandboxes served nobody: they go with this coved. */
	warm_stop_all(engine_ctx);
	/* No new requests: the socket goes at once (a new coved may take it). */
	if (daemon_ctx->api_handle) {
		http_listener_free(daemon_ctx->api_handle);
		daemon_ctx->api_handle = NULL;
		(void)unlink(daemon_ctx->socket_path);
	}
	access_stop();
	proxy_stop();
	struct timeval grace = { 5, 0 };
	event_base_loopexit(engine_ctx->base, &grace);
	sandboxes_stop_if_idle(engine_ctx);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: coved [--data DIR] [--socket PATH] [--init PATH] [--debug]\n"
		   "  --data DIR     data root (default /var/lib/cove)\n"
		   "  --socket PATH  API socket (default /run/cove/cove.sock)\n"
		   "  --init PATH    cove-init binary (default: next to coved)\n"
		   "  --storage DRIVER  btrfs, overlay or auto (default): the data root's, or on a new one\n"
		   "                    btrfs when it can be had, else overlay (snapshots copy the changes)\n"
		   "  --subnet CIDR  sandboxes' addresses, a /30 each (default: the first of\n"
		   "                 10.200.0.0/16 ... 10.219.0.0/16 that no host route overlaps)\n"
		   "  --default-disk SIZE  a sandbox's disk limit unless its create says (default 10G;\n"
		   "                 0: none)\n"
		   "  --no-disk-quota  no disk limits (a new pool gets no quota accounting)\n"
		   "  --resolv-conf PATH  the host's resolvers, for sandboxes' DNS and the egress proxy\n"
		   "                      (default /etc/resolv.conf)\n"
		   "  --proxy-listen ADDR:PORT  the port proxy: sandboxes' open ports as URLs\n"
		   "                 (default " PROXY_DEFAULT_LISTEN
		   ", else any free port; port 0: any free one; off: none)\n"
		   "  --proxy-domain D  host names PORT-ID.D of the URLs (default localhost)\n"
		   "  --warm N       keep N sandboxes of the default spec (image host) started and\n"
		   "                 ready, for creates without a template (default 0)\n"
		   "images:\n"
		   "  --registry-auth FILE     registry logins, as Docker's config.json \"auths\"\n"
		   "  --insecure-registry HOST  plain HTTP to HOST[:PORT] (loopback registries always are)\n"
		   "  --image-helper PATH      cove-image binary (default: next to coved)\n");
	fprintf(f, "sandboxes' lifecycle (a create's idle_timeout and archive_after win; 0 = never):\n"
		   "  --default-idle-timeout S   pause a sandbox with nothing active for S seconds (default 900)\n"
		   "  --default-archive-after S  archive a sandbox paused for S seconds (default 86400)\n"
		   "  --max-active N             at most N sandboxes running or paused (default 0: no limit);\n"
		   "                             the least recently used paused one is archived for another\n");
	fprintf(f, "API over TCP (plain HTTP; every request needs 'Authorization: Bearer TOKEN'):\n"
		   "  --listen ADDR:PORT      also serve on TCP, like 127.0.0.1:7070 or [::1]:7070\n"
		   "  --token-file PATH       the token (mode 0600, 32+ bytes; default DIR/token, made if missing)\n"
		   "limits, on the socket and on TCP:\n"
		   "  --max-header-bytes N    request line and headers (default 16K)\n"
		   "  --max-body-bytes N      request body (default 101M)\n"
		   "  --max-connections N     open connections per listener (default 1024)\n"
		   "  --idle-timeout S        close a connection idle between requests (default 60)\n"
		   "  --request-timeout S     close a connection whose request is not whole S seconds\n"
		   "                          after its first byte (default 60)\n");
}

/* --no-disk-quota, and --default-disk: a size of 16M or more, or 0 (no
 * limit). */
static int parse_disk_option(struct engine *d, const char *name, const char *arg)
{
	if (strcmp(name, "no-disk-quota") == 0) {
		d->no_disk_quota = true;
		return 0;
	}
	if (strcmp(arg, "0") == 0) {
		d->default_disk = 0;
		return 0;
	}
	if (parse_size(arg, &d->default_disk) < 0 || d->default_disk < (16u << 20)) {
		fprintf(stderr, "coved: --default-disk: '%s' is not a size of 16M or more (or 0)\n", arg);
		return -1;
	}
	return 0;
}

/* The options that are a whole number from 0: --warm (sandboxes),
 * --max-active (sandboxes), --default-idle-timeout and
 * --default-archive-after (seconds). */
static int parse_lifecycle_option(struct engine *d, const char *name, const char *value)
{
	static const struct {
		const char *name;
		long max;
		size_t at;
	} nums[] = {
		{ "warm", TEMPLATE_MAX_WARM, offsetof(struct engine, warm) },
		{ "max-active", MAX_SANDBOXES, offsetof(struct engine, max_active) },
		{ "default-idle-timeout", LIFECYCLE_MAX_SECONDS, offsetof(struct engine, default_idle_timeout) },
		{ "default-archive-after", LIFECYCLE_MAX_SECONDS, offsetof(struct engine, default_archive_after) },
	};
	size_t i = 0;
	while (i + 1 < ARRAY_SIZE(nums) && strcmp(name, nums[i].name) != 0)
		i++;
	char *end;
	errno = 0;
	long v = strtol(value, &end, 10);
	if (!value[0] || *end || errno || v < 0 || v > nums[i].max) {
		fprintf(stderr, "coved: --%s: want a whole number from 0 to %ld, not '%s'\n", name, nums[i].max, value);
		return -1;
	}
	*(int *)((char *)d + nums[i].at) = (int)v;
	return 0;
}

/* 'G': an engine option that takes a string (the network's, the images'), by its name. */
static void engine_option(struct engine *e, const char *name, const char *arg)
{
	if (strcmp(name, "subnet") == 0) {
		snprintf(e->subnet, sizeof(e->subnet), "%s", arg);
	} else if (strcmp(name, "resolv-conf") == 0) {
		snprintf(e->resolv_conf, sizeof(e->resolv_conf), "%s", arg);
	} else if (strcmp(name, "registry-auth") == 0) {
		snprintf(e->registry_auth, sizeof(e->registry_auth), "%s", arg);
	} else if (strcmp(name, "image-helper") == 0) {
		snprintf(e->image_helper, sizeof(e->image_helper), "%s", arg);
	} else {
		if (!e->insecure_registries)
			e->insecure_registries = json_array();
		json_array_append_new(e->insecure_registries, json_string(arg));
	}
}

/* coved's options. 'A': an option of access.c, which finds it by name;
 * 'K': a disk option (parse_disk_option); 'L': parse_lifecycle_option's;
 * 'G': engine_option's. */
static const struct option coved_options[] = {
	{ "data", required_argument, NULL, 'd' },
	{ "socket", required_argument, NULL, 's' },
	{ "init", required_argument, NULL, 'i' },
	{ "debug", no_argument, NULL, 'D' },
	{ "help", no_argument, NULL, 'h' },
	{ "listen", required_argument, NULL, 'A' },
	{ "token-file", required_argument, NULL, 'A' },
	{ "max-header-bytes", required_argument, NULL, 'A' },
	{ "max-body-bytes", required_argument, NULL, 'A' },
	{ "max-connections", required_argument, NULL, 'A' },
	{ "idle-timeout", required_argument, NULL, 'A' },
	{ "request-timeout", required_argument, NULL, 'A' },
	{ "storage", required_argument, NULL, 'S' },
	{ "default-disk", required_argument, NULL, 'K' },
	{ "no-disk-quota", no_argument, NULL, 'K' },
	{ "subnet", required_argument, NULL, 'G' },
	{ "resolv-conf", required_argument, NULL, 'G' },
	{ "default-idle-timeout", required_argument, NULL, 'L' },
	{ "default-archive-after", required_argument, NULL, 'L' },
	{ "max-active", required_argument, NULL, 'L' },
	{ "warm", required_argument, NULL, 'L' },
	{ "proxy-listen", required_argument, NULL, 'P' },
	{ "proxy-domain", required_argument, NULL, 'P' },
	{ "registry-auth", required_argument, NULL, 'G' },
	{ "insecure-registry", required_argument, NULL, 'G' },
	{ "image-helper", required_argument, NULL, 'G' },
	{ 0 },
};

static int parse_args(int argc, char **argv, struct daemon *fe, char *init_path, size_t cap)
{
	struct cove_err err = { 0 };
	int c, longindex = 0;
	while ((c = getopt_long(argc, argv, "", coved_options, &longindex)) != -1) {
		switch (c) {
		case 'd':
			snprintf(fe->engine->data_dir, sizeof(fe->engine->data_dir), "%s", optarg);
			break;
		case 's':
			snprintf(fe->socket_path, sizeof(fe->socket_path), "%s", optarg);
			break;
		case 'i':
			snprintf(init_path, cap, "%s", optarg);
			break;
		case 'D':
			log_set_level(LOG_DEBUG);
			break;
		case 'A': /* access.c's, and the port proxy's */
		case 'P':
			if ((c == 'A' ? access_parse_option(&fe->access, coved_options[longindex].name, optarg, &err)
				      : proxy_parse_option(&fe->proxy, coved_options[longindex].name, optarg, &err)) < 0) {
				fprintf(stderr, "coved: %s\n", err.msg);
				return -1;
			}
			break;
		case 'S':
			if (storage_driver_parse(optarg, &fe->engine->storage) < 0) {
				fprintf(stderr, "coved: --storage: unknown driver '%s' (btrfs, overlay or auto)\n",
					optarg);
				return -1;
			}
			break;
		case 'K':
			if (parse_disk_option(fe->engine, coved_options[longindex].name, optarg) < 0)
				return -1;
			break;
		case 'L':
			if (parse_lifecycle_option(fe->engine, coved_options[longindex].name, optarg) < 0)
				return -1;
			break;
		case 'G':
			engine_option(fe->engine, coved_options[longindex].name, optarg);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return -1;
	}
	return 0;
}

/* One coved per data root: a second one would steal the sandboxes' init
 * connections. The lock is held until this process dies. */
static int lock_data_root(const char *data_dir, struct cove_err *err)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/coved.lock", data_dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return err_sys(err, errno, "open '%s'", path);
	/* A POSIX record lock, not flock: forked setup processes must not
	 * inherit it, or a coved restarted right after a crash would find the
	 * root still locked by its predecessor's children. */
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	if (fcntl(fd, F_SETLK, &fl) < 0) {
		close(fd);
		return err_set(err, COVE_ESTATE, "another coved is using data root '%s'", data_dir);
	}
	return 0;
}

/* coved --warm N: a pool of sandboxes made as a create without fields
 * makes them. */
static int start_default_pool(struct engine *d, struct cove_err *err)
{
	struct sandbox_spec spec = { 0 };
	json_t *none = json_object();
	int r = d->warm > 0 ? api_parse_spec(none, &spec, err) : 0;
	if (r == 0 && d->warm > 0)
		r = warm_open(d, NULL, d->warm, &spec, &d->default_pool, err);
	sandbox_spec_free(&spec);
	json_decref(none);
	return r;
}

static int setup(struct daemon *fe, const char *init_path, struct cove_err *err)
{
	struct engine *d = fe->engine;
	if (io_mkdir_p(d->data_dir, 0700) < 0)
		return err_sys(err, errno, "create data root '%s'", d->data_dir);
	if (lock_data_root(d->data_dir, err) < 0)
		return -1;
	/* The token and the TCP port, before anything is built: a bad token
	 * file or a port in use stops coved with nothing changed. */
	if (access_setup(&fe->access, d->data_dir, err) < 0 || proxy_setup(&fe->proxy, err) < 0)
		return -1;
	if (engine_open(d, init_path, err) < 0)
		return -1;
	/* Bound before the sandboxes are re-attached: a second coved on the
	 * same socket must fail before it touches anything. Requests wait in
	 * the backlog until the loop runs. */
	if ((fe->api_fd = listen_api(fe->socket_path, err)) < 0)
		return -1;
	if (sandboxes_load(d, err) < 0)
		return -1;
	return start_default_pool(d, err);
}

static int serve(struct daemon *fe, struct cove_err *err)
{
	const struct engine *d = fe->engine;
	int fd = fe->api_fd;
	/* Limits first: they apply from the first connection on. */
	/* E2B's API (its paths, or an E2b-Sandbox-Id header) on TCP; the rest is
	 * cove's API. */
	const struct http_callbacks routes = { .streams = e2b_streams, .handle = e2b_handle };
	if (access_serve(d->base, &routes, err) < 0 || proxy_serve(d->base, err) < 0) {
		close(fd);
		return -1;
	}
	if (!(fe->api_handle = http_listen(fd, false))) {
		close(fd);
		return err_set(err, COVE_EINTERNAL, "listen on the API socket: out of memory");
	}
	log_info("coved: serving %s (data %s, %s pool %s%s, cgroup %s, %d sandboxes)", fe->socket_path, d->data_dir,
		 storage_driver_name(d->pool.driver), d->pool.dir, d->pool.loop_backed ? " on a loop device" : "",
		 d->cgroups.mode == CGROUP_V2 ? "v2" : "v1", d->count);
	return 0;
}

static void on_selftest(evutil_socket_t fd, short what, void *arg)
{
	memsnap_selftest(arg);
}

/* Each sandbox holds a few descriptors in coved (its cove-init connection,
 * pidfd, events): thousands of paused sandboxes need more than the usual
 * soft limit, so coved takes its hard limit, as systemd does for services. */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Tests only: with COVE_TEST_FAULTS=FILE in the environment, a SIGUSR2
 * reads "eio N" from FILE and makes the next N writes of coved's I/O
 * wrappers fail with EIO (io_fault_arm_eio). Without it, SIGUSR2 is not
 * watched and nothing is armed. */
static void on_sigusr2(evutil_socket_t sig, short what, void *arg)
{
	long n = 0;
	FILE *f = fopen(arg, "re");
	if (f && fscanf(f, "eio %ld", &n) == 1 && n >= 0) {
		io_fault_arm_eio(n);
		log_info("test faults: the next %ld writes fail with EIO", n);
	} else {
		log_warn("test faults: '%s' does not say \"eio N\"", (const char *)arg);
	}
	if (f)
		fclose(f);
}

static struct event *watch_test_faults(struct event_base *base)
{
	char *file = getenv("COVE_TEST_FAULTS");
	struct event *ev = file && *file ? evsignal_new(base, SIGUSR2, on_sigusr2, file) : NULL;
	if (ev)
		event_add(ev, NULL);
	return ev;
}

int main(int argc, char **argv)
{
	static struct engine d = { .data_dir = "/var/lib/cove",
				   .default_idle_timeout = 900,
				   .default_archive_after = 86400,
				   .default_disk = 10ull << 30 };
	static struct daemon fe = { .engine = &d, .socket_path = "/run/cove/cove.sock" };
	char init_path[1024], self[1024];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = '\0';
	const char *dir = dirname(self);
	snprintf(init_path, sizeof(init_path), "%s/cove-init", dir);
	snprintf(d.image_helper, sizeof(d.image_helper), "%s/cove-image", dir);
	if (parse_args(argc, argv, &fe, init_path, sizeof(init_path)) < 0)
		return 2;
	engine_ctx = &d;
	daemon_ctx = &fe;
	d.on_sandbox_deleted = ephemeral_forget;
	d.on_port_closed = proxy_port_closed;
	d.port_url = proxy_port_url;
	signal(SIGPIPE, SIG_IGN);
	umask(022);
	raise_fd_limit();
	/* Sandboxes' inits are re-parented to coved when their setup process
	 * exits, so that coved, not the host's pid 1, reaps them. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	d.base = event_base_new();
	struct event *chld = evsignal_new(d.base, SIGCHLD, on_sigchld, NULL);
	struct event *term = evsignal_new(d.base, SIGTERM, on_sigterm, NULL);
	struct event *intr = evsignal_new(d.base, SIGINT, on_sigterm, NULL);
	event_add(chld, NULL);
	event_add(term, NULL);
	event_add(intr, NULL);
	struct event *faults = watch_test_faults(d.base);
	struct cove_err err = { 0 };
	if (setup(&fe, init_path, &err) < 0 || serve(&fe, &err) < 0) {
		log_error("coved: %s", err.msg);
		return 1;
	}
	/* Memory snapshots' self-test, once the API is up: the loop's first
	 * turn (requests that came meanwhile are served after it). */
	struct timeval now = { 0, 0 };
	event_base_once(d.base, -1, EV_TIMEOUT, on_selftest, &d, &now);
	event_base_dispatch(d.base);
	if (fe.api_handle)
		(void)unlink(fe.socket_path);
	http_shutdown();
	proxy_cleanup();
	access_cleanup();
	event_free(chld);
	event_free(term);
	event_free(intr);
	if (faults)
		event_free(faults);
	engine_close(&d);
	event_base_free(d.base);
	return 0;
}

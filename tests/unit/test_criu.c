/* sys/criu: a counter and a listening HTTP server (busybox) in a tree laid
 * out as a cove sandbox (criu_tree.h) are dumped and restored through
 * criu's RPC; the counter goes on from its value, the server answers again;
 * an undumpable tree fails with criu's reason and keeps running; a server on
 * a unix socket (as cove-init) gets new sockets handed over on restore and
 * serves on them. Needs root
 * and a criu >= 4.2 (scripts/deps.sh builds one); skipped, saying so,
 * without. */
#include "sys/criu.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <time.h>

#include "criu_tree.h"
#include "tap.h"

#define PORT 8080
#define BUSYBOX "/bin/busybox"

static const char script[] = "busybox ip link set lo up; busybox httpd -f -p 127.0.0.1:8080 -h /www & "
			     "i=0; while :; do i=$((i+1)); echo $i > /tmp/counter; busybox sleep 0.05; done";

static long counter(pid_t pid)
{
	char p[64], buf[32] = "";
	snprintf(p, sizeof(p), "/proc/%d/root/tmp/counter", pid);
	FILE *f = fopen(p, "re");
	if (!f)
		return -1;
	long v = fgets(buf, sizeof(buf), f) ? atol(buf) : -1;
	fclose(f);
	return v;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

/* The counter once it reaches at least min (within 5 s), else -1. */
static long counter_at_least(pid_t pid, long min)
{
	for (int i = 0; i < 500; i++) {
		long v = counter(pid);
		if (v >= min)
			return v;
		sleep_ms(10);
	}
	return -1;
}

/* GET / from the tree's own loopback (a child enters its net namespace):
 * 1 when an HTTP answer carrying the page came back. */
static int http_get(pid_t pid)
{
	pid_t c = fork();
	if (c == 0) {
		char p[64], buf[512];
		snprintf(p, sizeof(p), "/proc/%d/ns/net", pid);
		int ns = open(p, O_RDONLY | O_CLOEXEC);
		if (ns < 0 || setns(ns, CLONE_NEWNET) < 0)
			_exit(2);
		for (int tries = 0; tries < 100; tries++) {
			int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(PORT) };
			a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			if (connect(s, (struct sockaddr *)&a, sizeof(a)) == 0) {
				static const char req[] = "GET /index.html HTTP/1.0\r\n\r\n";
				(void)!write(s, req, sizeof(req) - 1);
				ssize_t n, len = 0;
				while (len < (ssize_t)sizeof(buf) - 1 &&
				       (n = read(s, buf + len, sizeof(buf) - 1 - len)) > 0)
					len += n;
				buf[len] = '\0';
				_exit(strstr(buf, "200 OK") && strstr(buf, "cove-criu-page") ? 0 : 3);
			}
			close(s);
			sleep_ms(20);
		}
		_exit(4);
	}
	int st;
	return waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static bool alive(pid_t pid)
{
	return kill(pid, 0) == 0;
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static void test_undumpable(const char *criu, pid_t pid, const char *imgs)
{
	/* The bound /bin/busybox is a mount criu cannot make on its own:
	 * without naming it external the dump must fail, and leave the tree
	 * running as it was. */
	struct criu_dump_opts o = { .pid = pid, .images_dir = imgs, .leave_running = true, .nftables_lock = true };
	struct cove_err e = { 0 };
	long before = counter(pid);
	CHECK(criu_dump(criu, &o, &e) < 0, "dump of a tree with an undeclared external mount fails");
	printf("#   %s\n", e.msg);
	CHECK(e.code != 0 && strstr(e.msg, "criu dump failed: ") && strlen(e.msg) > 30,
	      "the error carries criu's reason");
	CHECK(strstr(e.msg, "mount") || strstr(e.msg, "mnt"), "the reason is about the mount");
	CHECK(alive(pid) && counter_at_least(pid, before + 3) > 0, "the tree keeps running after the failed dump");
}

static const char *dump_ext[] = { "mnt[/bin/busybox]:" CTREE_EXT_KEY, "mnt[/dev/null]:" CTREE_NULL_KEY, NULL };
static const char *restore_ext[] = { "mnt[" CTREE_EXT_KEY "]:" BUSYBOX, "mnt[" CTREE_NULL_KEY "]:/dev/null", NULL };

/* Dump (leave_running as given) into imgs; on kill, restore and return the
 * new root pid (else pid). */
static pid_t dump_restore(const char *criu, pid_t pid, const char *imgs, const char *root, bool leave_running)
{
	struct criu_dump_opts o = { .pid = pid,
				    .images_dir = imgs,
				    .leave_running = leave_running,
				    .nftables_lock = true,
				    .external = dump_ext };
	struct cove_err e = { 0 };
	long at_dump = counter(pid);
	int rc = criu_dump(criu, &o, &e);
	CHECK(rc == 0, "dump (%s) of pid %d: %s", leave_running ? "leave running" : "kill", pid, e.msg);
	if (rc < 0)
		return -1;
	if (leave_running) {
		CHECK(alive(pid) && counter_at_least(pid, at_dump + 3) > 0, "the tree runs on after a snapshot dump");
		return pid;
	}
	/* pid 1 died with its namespace; reap it as coved would. */
	int st;
	CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st), "the dumped tree was killed");
	long stopped = counter(pid); /* gone: -1 */
	CHECK(stopped < 0, "nothing of the tree is left");

	struct criu_restore_opts r = {
		.images_dir = imgs, .root = root, .nftables_lock = true, .external = restore_ext
	};
	pid_t npid = -1;
	e = (struct cove_err){ 0 };
	rc = criu_restore(criu, &r, &npid, &e);
	CHECK(rc == 0 && npid > 0, "restore: pid %d %s", npid, e.msg);
	return rc == 0 ? npid : -1;
}

/* The inode of a socket fd of pid ("socket:[N]"), 0 if fd is no socket. */
static unsigned long sock_ino(pid_t pid, int fd)
{
	char p[64], l[64] = "";
	snprintf(p, sizeof(p), "/proc/%d/fd/%d", pid, fd);
	unsigned long ino = 0;
	if (readlink(p, l, sizeof(l) - 1) > 0 && sscanf(l, "socket:[%lu]", &ino) != 1)
		ino = 0;
	return ino;
}

/* Send s on fd and read it back (the echo server's answer). */
static bool echoes(int fd, const char *s)
{
	char buf[64] = "";
	size_t n = strlen(s);
	struct timeval tv = { 5, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return write(fd, s, n) == (ssize_t)n && read(fd, buf, sizeof(buf) - 1) == (ssize_t)n && memcmp(buf, s, n) == 0;
}

/* A unix stream socket made in the network namespace of pid (0: ours). A
 * connection's accepted end belongs to the connecting socket's namespace,
 * and criu finds sockets only in the namespaces it dumps: so the client's
 * socket must be made in the tree's (as coved's to cove-init must be). */
static int socket_in_netns(pid_t pid)
{
	if (!pid)
		return socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/ns/net", pid);
	int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), ns = open(p, O_RDONLY | O_CLOEXEC), fd = -1;
	if (self >= 0 && ns >= 0 && setns(ns, CLONE_NEWNET) == 0) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (setns(self, CLONE_NEWNET) < 0)
			abort(); /* the test would go on in the wrong namespace */
	}
	if (self >= 0)
		close(self);
	if (ns >= 0)
		close(ns);
	return fd;
}

static int connect_unix(const char *path, pid_t netns_of)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	int fd = socket_in_netns(netns_of);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* What cove-init is to coved: a server on a listening unix socket that
 * coved connects to (from a socket made in the tree's network namespace,
 * see socket_in_netns). Both of its sockets have their peer outside the tree:
 * they are dumped as external (unix[ino]) and, on restore, replaced by new
 * sockets the caller hands over (inherit_fd): a new listener, and one end of
 * a new socketpair in place of the old connection. */
static void test_socket_handover(const char *criu, const char *dir)
{
	char probe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", probe, sizeof(probe) - 32);
	probe[n > 0 ? n : 0] = '\0';
	snprintf(strrchr(probe, '/') ? strrchr(probe, '/') : probe, 32, "/../cove-probe");
	if (access(probe, X_OK) < 0) {
		CHECK(0, "%s missing (make all builds it)", probe);
		return;
	}
	char *const argv[] = { "cove-probe", "echo", NULL };
	const char *ctl = pathf("%s/sock/ctl", dir), *root = pathf("%s/root", dir), *imgs = pathf("%s/img", dir);
	pid_t pid = ctree_start(dir, "cove-probe", probe, argv, ctl);
	int c1 = -1;
	for (int i = 0; i < 200 && c1 < 0; i++, sleep_ms(10))
		c1 = connect_unix(ctl, pid);
	CHECK(pid > 0 && c1 >= 0 && echoes(c1, "one"), "a server tree answers on its socket");
	unsigned long lino = sock_ino(pid, 3), cino = 0;
	for (int fd = 4; fd < 16 && !cino; fd++)
		cino = sock_ino(pid, fd);
	CHECK(lino && cino, "its listener and its connection: sockets %lu, %lu", lino, cino);
	char ext_l[64], ext_c[64], key_l[64], key_c[64];
	snprintf(ext_l, sizeof(ext_l), "unix[%lu]", lino), snprintf(ext_c, sizeof(ext_c), "unix[%lu]", cino);
	snprintf(key_l, sizeof(key_l), "socket:[%lu]", lino), snprintf(key_c, sizeof(key_c), "socket:[%lu]", cino);
	const char *ext[] = { "mnt[/bin/cove-probe]:" CTREE_EXT_KEY, "mnt[/dev/null]:" CTREE_NULL_KEY, ext_l, ext_c,
			      NULL };
	mkdir(imgs, 0711);
	struct criu_dump_opts d = { .pid = pid, .images_dir = imgs, .nftables_lock = true, .external = ext };
	struct cove_err e = { 0 };
	int rc = criu_dump(criu, &d, &e);
	CHECK(rc == 0, "dump with its sockets external: %s", e.msg);
	reap(pid); /* killed by the dump; else now */
	close(c1);
	if (rc < 0)
		return;

	/* the new listener at a new path, and a new connection */
	const char *ctl2 = pathf("%s/sock/ctl2", dir);
	int l2 = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), pair[2] = { -1, -1 };
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", ctl2);
	CHECK1(l2 >= 0 && bind(l2, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l2, 16) == 0 &&
		       socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) == 0,
	       "new sockets");
	const char *rext[] = { pathf("mnt[" CTREE_EXT_KEY "]:%s", probe), "mnt[" CTREE_NULL_KEY "]:/dev/null", NULL };
	struct criu_inherit_fd inh[] = { { key_l, l2 }, { key_c, pair[0] } };
	struct criu_restore_opts r = { .images_dir = imgs,
				       .root = root,
				       .nftables_lock = true,
				       .external = rext,
				       .inherit = inh,
				       .n_inherit = 2 };
	pid_t npid = -1;
	CHECK(criu_restore(criu, &r, &npid, &e) == 0, "restore handing over new sockets: %s", e.msg);
	close(pair[0]);
	close(l2);
	CHECK(npid > 0 && echoes(pair[1], "two"), "the restored server answers on the handed-over connection");
	int c3 = connect_unix(ctl2, 0);
	CHECK(c3 >= 0 && echoes(c3, "three"), "and accepts new connections on the handed-over listener");
	if (c3 >= 0)
		close(c3);
	close(pair[1]);
	if (npid > 0)
		reap(npid);
}

/* A restore into another uid range: the images readable by all, a
 * shifted directory of links whose userns image maps from CTREE_UID_BASE +
 * 100000; the restored tree runs in that range, counting on. */
static void test_shifted(const char *criu, const char *imgs, const char *root, const char *dir)
{
	struct cove_err e = { 0 };
	const char *work = pathf("%s/shifted", dir);
	unsigned base = CTREE_UID_BASE + 100000;
	CHECK(criu_images_readable(imgs, &e) == 0, "images made readable: %s", e.msg);
	CHECK(criu_images_shifted(imgs, work, base, &e) == 0, "shifted images directory: %s", e.msg);
	struct stat st;
	CHECK(stat(pathf("%s/inventory.img", work), &st) == 0 && st.st_nlink == 2, "the images are hard links");
	CHECK(criu_images_shifted(imgs, work, base, &e) < 0, "a second one in the same place is refused");
	struct criu_restore_opts r = {
		.images_dir = work, .root = root, .nftables_lock = true, .external = restore_ext
	};
	pid_t npid = -1;
	e = (struct cove_err){ 0 };
	CHECK(criu_restore(criu, &r, &npid, &e) == 0 && npid > 0, "restore into the new range: %s", e.msg);
	if (npid <= 0)
		return;
	char map[128] = "";
	FILE *f = fopen(pathf("/proc/%d/uid_map", npid), "re");
	if (f) {
		(void)!fgets(map, sizeof(map), f);
		fclose(f);
	}
	unsigned first = 1, lower = 0, count = 0;
	CHECK(sscanf(map, "%u %u %u", &first, &lower, &count) == 3 && first == 0 && lower == base && count == 65536,
	      "its uid map starts at the new base: %s", map);
	long v = counter(npid);
	CHECK(v > 0 && counter_at_least(npid, v + 3) > v, "and its counter goes on (%ld)", v);
	reap(npid);
}

int main(void)
{
	char criu[PATH_MAX];
	struct cove_err e = { 0 };
	if (getuid() != 0 || access(BUSYBOX, X_OK) < 0) {
		SKIP("needs root and %s (busybox-static)", BUSYBOX);
		return tap_done();
	}
	if (criu_find(criu, sizeof(criu), &e) < 0) {
		SKIP("no criu >= 4.2 on this host (run scripts/deps.sh): %s", e.msg);
		return tap_done();
	}
	struct criu_version v;
	CHECK(criu_get_version(criu, &v, &e) == 0 && v.major * 100 + v.minor >= 402, "%s is %d.%d.%d", criu, v.major,
	      v.minor, v.sublevel);
	CHECK(criu_check(criu, &e) == 0, "criu check passes: %s", e.msg);
	struct criu_version bad;
	e = (struct cove_err){ 0 };
	CHECK(criu_get_version("/bin/true", &bad, &e) < 0 && e.msg[0], "a binary that is no criu: %s", e.msg);

	prctl(PR_SET_CHILD_SUBREAPER, 1);
	char dir[] = "/var/tmp/cove-test-criu-XXXXXX";
	CHECK1(mkdtemp(dir) != NULL, "temp dir");
	const char *root = pathf("%s/root", dir);
	char *const argv[] = { "sh", "-c", (char *)script, NULL };
	pid_t pid = ctree_start(dir, "busybox", BUSYBOX, argv, NULL);
	CHECK(pid > 0, "tree started (pid 1 = host pid %d)", pid);
	FILE *page = fopen(pathf("%s/www/index.html", root), "we");
	if (page)
		fputs("cove-criu-page\n", page), fclose(page);
	CHECK(counter_at_least(pid, 10) >= 10, "the counter runs");
	CHECK(http_get(pid), "the HTTP server answers before the dump");

	const char *imgs0 = pathf("%s/img0", dir), *imgs1 = pathf("%s/img1", dir), *imgs2 = pathf("%s/img2", dir);
	/* criu opens images also from inside the restored user namespace: the
	 * directory must be searchable for its root (the parent need not). */
	mkdir(imgs0, 0711), mkdir(imgs1, 0711), mkdir(imgs2, 0711);
	test_undumpable(criu, pid, imgs0);

	CHECK(dump_restore(criu, pid, imgs1, root, true) == pid, "snapshot dump");
	long at_dump = counter(pid);
	pid_t npid = dump_restore(criu, pid, imgs2, root, false);
	if (npid > 0) {
		long after = counter(npid);
		CHECK(after >= at_dump && at_dump >= 10,
		      "the restored counter goes on from its value (%ld at dump, %ld now)", at_dump, after);
		CHECK(counter_at_least(npid, after + 5) > after, "and keeps counting");
		CHECK(http_get(npid), "the listening socket was restored: the server answers");
		CHECK(waitpid(npid, NULL, WNOHANG) == 0, "the restored root is the caller's child");
		reap(npid);
	}
	if (alive(pid))
		reap(pid);
	test_shifted(criu, imgs1, root, dir);
	struct criu_restore_opts r = { .images_dir = imgs0, .root = root };
	pid_t none = -1;
	e = (struct cove_err){ 0 };
	CHECK(criu_restore(criu, &r, &none, &e) < 0 && none == -1 && strstr(e.msg, "criu restore failed: "),
	      "restore from images of a failed dump fails: %s", e.msg);
	const char *dir2 = pathf("%s/sockets", dir);
	mkdir(dir2, 0755);
	test_socket_handover(criu, dir2);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (!getenv("COVE_TEST_KEEP"))
		(void)!system(cmd);
	return tap_done();
}

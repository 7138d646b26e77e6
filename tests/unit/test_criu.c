/* sys/criu: a counter and a listening HTTP server (busybox) in a tree laid
 * out as a cove sandbox (criu_tree.h) are dumped and restored through
 * criu's RPC; the counter goes on from its value, the server answers again;
 * an undumpable tree fails with criu's reason and keeps running. Needs root
 * and a criu >= 4.2 (scripts/deps.sh builds one); skipped, saying so,
 * without. */
#include "sys/criu.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
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
	pid_t pid = ctree_start(dir, "busybox", BUSYBOX, argv);
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
	struct criu_restore_opts r = { .images_dir = imgs0, .root = root };
	pid_t none = -1;
	e = (struct cove_err){ 0 };
	CHECK(criu_restore(criu, &r, &none, &e) < 0 && none == -1 && strstr(e.msg, "criu restore failed: "),
	      "restore from images of a failed dump fails: %s", e.msg);
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (!getenv("COVE_TEST_KEEP"))
		(void)!system(cmd);
	return tap_done();
}

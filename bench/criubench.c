/* Memory snapshots: dump and restore of a process tree with --mib MiB of
 * touched memory, laid out as a cove sandbox (tests/unit/criu_tree.h: its
 * own user, mount, pid, net, ipc and uts namespaces), through sys/criu.c
 * (criu swrk over RPC) next to the plain criu CLI (`criu dump` / `criu
 * restore -d`) of the same tree, alternating, in the same run. Then what
 * zstd would add: compressing the dump's page images, and decompressing
 * them again before a restore.
 *
 *   criubench --dir /var/tmp/cove-bench/criu --runs 10 --mib 100 --out results.txt
 *
 * Built statically (bench/run.sh): the binary itself is the tree's pid 1
 * (`--child MIB`), bound into the tree's root as /bin/criubench. */
#include "sys/criu.h"

#include <dirent.h>
#include <getopt.h>
#include <zstd.h>

#include "../tests/unit/criu_tree.h"
#include "bench.h"

#define EXE_NAME "criubench"

/* pid 1 of the tree: touch mib MiB (each page half pseudo-random, half
 * zero, so it compresses about as program memory does), say so, sleep. */
static int child(long mib)
{
	size_t len = (size_t)mib << 20;
	uint64_t *m = malloc(len), x = 88172645463325252ull;
	if (!m)
		return 1;
	for (size_t i = 0; i < len / 8; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		m[i] = (i % 512) < 256 ? x : 0;
	}
	int fd = open("/tmp/ready", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		return 1;
	close(fd);
	for (;;)
		pause();
}

static const char *dir;
static char criu[PATH_MAX], exe[PATH_MAX], root[PATH_MAX];
static char mibarg[16];

static pid_t start_tree(void)
{
	char *const argv[] = { EXE_NAME, "--child", mibarg, NULL };
	pid_t pid = ctree_start(dir, EXE_NAME, exe, argv, NULL);
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/root/tmp/ready", pid);
	for (int i = 0; pid > 0 && i < 3000 && access(p, F_OK) < 0; i++)
		usleep(10000);
	if (pid <= 0 || access(p, F_OK) < 0) {
		fprintf(stderr, "criubench: the tree did not start\n");
		exit(1);
	}
	return pid;
}

static void fresh_dir(const char *d)
{
	char cmd[PATH_MAX + 32];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	(void)!system(cmd);
	if (mkdir(d, 0711) < 0) {
		perror(d);
		exit(1);
	}
}

static void reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Run criu's CLI with args; its wall time in ms, or exit on failure. */
static double run_cli(char *const args[])
{
	double t0 = now_ms();
	pid_t c = fork();
	if (c == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0), dup2(null, 1), dup2(null, 2);
		execv(criu, args);
		_exit(127);
	}
	int st;
	waitpid(c, &st, 0);
	double ms = now_ms() - t0;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "criubench: %s %s failed (log in its images dir)\n", args[0], args[1]);
		exit(1);
	}
	return ms;
}

static const char *dump_ext[] = { "mnt[/bin/" EXE_NAME "]:" CTREE_EXT_KEY, "mnt[/dev/null]:" CTREE_NULL_KEY, NULL };
static char restore_bin[PATH_MAX + 32];
static const char *restore_ext[] = { restore_bin, "mnt[" CTREE_NULL_KEY "]:/dev/null", NULL };

/* fsync of every image file and the directory: what a durable snapshot
 * adds to a dump. */
static double images_mib;

static double fsync_images(const char *imgs)
{
	double t0 = now_ms();
	images_mib = 0;
	int dfd = open(imgs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fdopendir(dup(dfd));
	struct dirent *de;
	while (d && (de = readdir(d))) {
		int fd = de->d_name[0] == '.' ? -1 : openat(dfd, de->d_name, O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd >= 0 && fstat(fd, &st) == 0)
			images_mib += st.st_size / 1048576.0;
		if (fd >= 0)
			fsync(fd), close(fd);
	}
	if (d)
		closedir(d);
	fsync(dfd);
	close(dfd);
	return now_ms() - t0;
}

static void module_once(const char *imgs, double *dump_ms, double *restore_ms, double *fsync_ms)
{
	pid_t pid = start_tree();
	fresh_dir(imgs);
	struct criu_dump_opts d = { .pid = pid, .images_dir = imgs, .nftables_lock = true, .external = dump_ext };
	struct criu_restore_opts r = {
		.images_dir = imgs, .root = root, .nftables_lock = true, .external = restore_ext
	};
	struct cove_err e = { 0 };
	double t0 = now_ms();
	if (criu_dump(criu, &d, &e) < 0)
		fprintf(stderr, "criubench: %s\n", e.msg), exit(1);
	*dump_ms = now_ms() - t0;
	*fsync_ms = fsync_images(imgs);
	waitpid(pid, NULL, 0);
	pid_t npid;
	t0 = now_ms();
	if (criu_restore(criu, &r, &npid, &e) < 0)
		fprintf(stderr, "criubench: %s\n", e.msg), exit(1);
	*restore_ms = now_ms() - t0;
	reap(npid);
}

static void cli_once(const char *imgs, double *dump_ms, double *restore_ms)
{
	pid_t pid = start_tree();
	fresh_dir(imgs);
	char pidarg[16], pidfile[PATH_MAX + 16];
	snprintf(pidarg, sizeof(pidarg), "%d", pid);
	snprintf(pidfile, sizeof(pidfile), "%s/pid", dir);
	char *const dump[] = { "criu",
			       "dump",
			       "-t",
			       pidarg,
			       "-D",
			       (char *)imgs,
			       "-o",
			       "dump.log",
			       "--network-lock",
			       "nftables",
			       "--external",
			       (char *)dump_ext[0],
			       "--external",
			       (char *)dump_ext[1],
			       NULL };
	*dump_ms = run_cli(dump);
	waitpid(pid, NULL, 0);
	unlink(pidfile); /* criu creates it O_EXCL */
	char *const rst[] = { "criu",      "restore",     "-d",        "-D",         (char *)imgs,
			      "-o",        "restore.log", "--root",    root,         "--network-lock",
			      "nftables",  "--external",  restore_bin, "--external", (char *)restore_ext[1],
			      "--pidfile", pidfile,       NULL };
	*restore_ms = run_cli(rst);
	/* -d: criu exits and the tree's root is reparented to us (a subreaper) */
	FILE *f = fopen(pidfile, "re");
	pid_t npid = 0;
	if (!f || fscanf(f, "%d", &npid) != 1)
		fprintf(stderr, "criubench: no pid in %s\n", pidfile), exit(1);
	fclose(f);
	reap(npid);
}

/* zstd of every pages-*.img in imgs at level: sizes and times. */
static void zstd_pages(const char *imgs, int level, double *in_mib, double *out_mib, double *c_ms, double *d_ms)
{
	*in_mib = *out_mib = *c_ms = *d_ms = 0;
	DIR *d = opendir(imgs);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (strncmp(de->d_name, "pages-", 6) != 0)
			continue;
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/%s", imgs, de->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0)
			exit(1);
		size_t n = (size_t)st.st_size, cap = ZSTD_compressBound(n);
		char *src = malloc(n ? n : 1), *dst = malloc(cap), *back = malloc(n ? n : 1);
		/* timed as a restore would: read the file, then compress/decompress */
		double t0 = now_ms();
		if (read(fd, src, n) != (ssize_t)n)
			exit(1);
		size_t z = ZSTD_compress(dst, cap, src, n, level);
		*c_ms += now_ms() - t0;
		t0 = now_ms();
		size_t b = ZSTD_decompress(back, n, dst, z);
		*d_ms += now_ms() - t0;
		if (ZSTD_isError(z) || b != n || memcmp(src, back, n) != 0)
			fprintf(stderr, "criubench: zstd round trip failed\n"), exit(1);
		*in_mib += n / 1048576.0, *out_mib += z / 1048576.0;
		free(src), free(dst), free(back), close(fd);
	}
	if (d)
		closedir(d);
}

static void report(const char *key, const char *label, double *v, int n)
{
	double p50 = pct(v, n, 0.5), p95 = pct(v, n, 0.95);
	printf("%-40s p50 %7.1f ms  p95 %7.1f ms\n", label, p50, p95);
	char k[64];
	snprintf(k, sizeof(k), "%s.p50", key);
	result(k, "%.1f", p50);
	snprintf(k, sizeof(k), "%s.p95", key);
	result(k, "%.1f", p95);
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return child(atol(argv[2]));
	int runs = 10;
	long mib = 100;
	static const struct option lo[] = {
		{ "dir", 1, 0, 'd' }, { "runs", 1, 0, 'r' }, { "mib", 1, 0, 'm' }, { "out", 1, 0, 'o' }, { 0, 0, 0, 0 }
	};
	for (int c; (c = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
		if (c == 'd')
			dir = optarg;
		else if (c == 'r')
			runs = atoi(optarg);
		else if (c == 'm')
			mib = atol(optarg);
		else if (c == 'o' && !(out = fopen(optarg, "we")))
			return perror(optarg), 1;
		else if (c == '?')
			return 2;
	}
	struct cove_err e = { 0 };
	if (!dir || runs < 1 || runs > 1000 || mib < 1 || criu_find(criu, sizeof(criu), &e) < 0) {
		fprintf(stderr, "usage: criubench --dir DIR [--runs N] [--mib M] [--out FILE]%s%s\n",
			e.msg[0] ? "\n" : "", e.msg);
		return 2;
	}
	if (readlink("/proc/self/exe", exe, sizeof(exe) - 1) < 0)
		return 1;
	snprintf(root, sizeof(root), "%s/root", dir);
	snprintf(restore_bin, sizeof(restore_bin), "mnt[" CTREE_EXT_KEY "]:%s", exe);
	snprintf(mibarg, sizeof(mibarg), "%ld", mib);
	mkdir(dir, 0755);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	double *md = calloc(runs, 8), *mr = calloc(runs, 8), *cd = calloc(runs, 8), *cr = calloc(runs, 8),
	       *fs = calloc(runs, 8);
	char imgs[PATH_MAX];
	snprintf(imgs, sizeof(imgs), "%s/img", dir);
	printf("criu %s, %d runs, a tree with %ld MiB touched, images in %s\n", criu, runs, mib, imgs);
	for (int i = 0; i < runs; i++) {
		/* alternate which goes first, so neither always follows the other's writeback */
		if (i % 2)
			cli_once(imgs, &cd[i], &cr[i]), module_once(imgs, &md[i], &mr[i], &fs[i]);
		else
			module_once(imgs, &md[i], &mr[i], &fs[i]), cli_once(imgs, &cd[i], &cr[i]);
	}
	double m50d = pct(md, runs, .5), m50r = pct(mr, runs, .5), c50d = pct(cd, runs, .5), c50r = pct(cr, runs, .5);
	report("criu.dump.module", "dump, sys/criu.c (swrk RPC)", md, runs);
	report("criu.dump.cli", "dump, criu CLI", cd, runs);
	report("criu.restore.module", "restore, sys/criu.c (swrk RPC)", mr, runs);
	report("criu.restore.cli", "restore, criu CLI (-d)", cr, runs);
	report("criu.fsync", "fsync of the images (after a dump)", fs, runs);
	printf("ratio module/CLI: dump %.2f, restore %.2f\n", m50d / c50d, m50r / c50r);
	result("criu.mib", "%ld", mib);
	printf("images of the last dump: %.1f MiB\n", images_mib);
	result("criu.images_mib", "%.1f", images_mib);
	/* the last images are the CLI's or the module's: the same tree */
	static const int levels[] = { 1, 3 };
	for (size_t l = 0; l < 2; l++) {
		double in, outm, c, d;
		zstd_pages(imgs, levels[l], &in, &outm, &c, &d);
		printf("zstd -%d of the page images: %.1f -> %.1f MiB, compress +%.1f ms, decompress +%.1f ms\n",
		       levels[l], in, outm, c, d);
		char k[64];
		snprintf(k, sizeof(k), "criu.zstd%d.mib", levels[l]);
		result(k, "%.1f", outm);
		snprintf(k, sizeof(k), "criu.zstd%d.compress_ms", levels[l]);
		result(k, "%.1f", c);
		snprintf(k, sizeof(k), "criu.zstd%d.decompress_ms", levels[l]);
		result(k, "%.1f", d);
		result("criu.pages_mib", "%.1f", in);
	}
	fresh_dir(imgs);
	return 0;
}

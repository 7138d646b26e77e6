/* The engine alone, with no server: this test is its only front end. It
 * opens an engine on a data root of its own, creates a sandbox, runs `true`
 * and a command that writes a file through a struct output that records
 * what it is told, reads the file back with files_read, and deletes the
 * sandbox. What issue 9 asks of the engine's shape: it can be driven
 * without HTTP. Needs root, as coved does (loop-backed pool, namespaces,
 * cgroups); everything lives in a mkdtemp data root, whose pool is
 * unmounted at the end. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/files.h"
#include "engine/output.h"
#include "engine/process.h"
#include "engine/template.h"
#include "enginetest.h"
#include "tap.h"

static char root[] = "/var/tmp/cove-test-engine-XXXXXX";
static struct engine eng;

/* ---- a struct output that records ---- */

struct recorder {
	struct output out;
	int starts, exits, closes;
	pid_t pid;
	int status;
	char collected[256];
	bool failed;
	char why[256];
};

static void rec_write(struct output *o, const struct out_event *ev)
{
	struct recorder *r = (struct recorder *)o;
	if (ev->type == OUT_START) {
		r->starts++;
		r->pid = ev->pid;
	} else if (ev->type == OUT_EXIT) {
		r->exits++;
		r->status = ev->exit->status;
		r->pid = ev->exit->pid;
		struct evbuffer *b = ev->exit->collected[0];
		size_t n = b ? evbuffer_get_length(b) : 0;
		if (n >= sizeof(r->collected))
			n = sizeof(r->collected) - 1;
		if (b)
			evbuffer_copyout(b, r->collected, n);
		r->collected[n] = '\0';
	}
}

static void rec_close(struct output *o, const struct cove_err *err)
{
	struct recorder *r = (struct recorder *)o;
	r->closes++;
	if (err) {
		r->failed = true;
		snprintf(r->why, sizeof(r->why), "%s", err->msg);
	}
	event_base_loopbreak(eng.base);
}

static const struct output_ops recorder_ops = { .write = rec_write, .close = rec_close };

static void wait_closed(struct recorder *r);

/* Run argv (collected) in sb and wait for its end on the engine's loop: an
 * exit timer another wait left pending (its loop was broken by a close)
 * must not end this wait early. */
static int run(struct sandbox *sb, const char *cmd, struct recorder *r)
{
	memset(r, 0, sizeof(*r));
	r->out.ops = &recorder_ops;
	struct exec_request er = { .argv = json_pack("[s, s, s]", "/bin/sh", "-c", cmd), .max_output = 1 << 20 };
	er.cmd = er.argv;
	struct cove_err err = { 0 };
	int rc = exec_start(sb, &er, &r->out, &err);
	json_decref(er.argv);
	if (rc < 0) {
		printf("# exec_start: %s\n", err.msg);
		return -1;
	}
	wait_closed(r);
	return r->closes == 1 ? 0 : -1;
}

/* ---- a file read, answered by a callback ---- */

struct read_result {
	bool done;
	int fd;
	uint64_t size;
	char err[256];
};

static void on_read(void *arg, const struct files_result *res, const struct cove_err *err)
{
	struct read_result *rr = arg;
	rr->done = true;
	rr->fd = res ? res->fd : -1;
	rr->size = res ? res->size : 0;
	if (err)
		snprintf(rr->err, sizeof(rr->err), "%s", err->msg);
	event_base_loopbreak(eng.base);
}

/* Run the loop until r's output is closed (or 60 s). */
static void wait_closed(struct recorder *r)
{
	for (int i = 0; i < 600 && !r->closes; i++) {
		struct timeval tick = { 0, 100000 };
		event_base_loopexit(eng.base, &tick);
		event_base_dispatch(eng.base);
	}
}

/* A start command and a readiness check (launch.c), then a warm pool
 * (warm.c) handing out a ready sandbox with another spec's limits and env:
 * template.h's engine half, with no front end. */
static void test_launch_and_pool(void)
{
	struct cove_err err = { 0 };
	struct sandbox_spec spec = {
		.image = "host",
		.memory = 256u << 20,
		.cpu_millis = 1000,
		.pids = 256,
		.env = json_object(),
		.start = json_pack("[s, s, s]", "/bin/sh", "-c", "sleep 0.3; touch /tmp/up; exec sleep 1000"),
		.ready = json_pack("{s:[s, s, s], s:f}", "cmd", "test", "-e", "/tmp/up", "timeout", 60.0),
	};
	struct sandbox *sb = NULL;
	struct recorder r = { .out.ops = &recorder_ops }, probe;
	int rc = sandbox_create(&eng, &spec, NULL, &sb, &err);
	sandbox_spec_free(&spec);
	if (rc == 0 && (rc = launch_start(&eng, sb, &r.out, &err)) == 0)
		wait_closed(&r);
	CHECK(rc == 0 && r.closes == 1 && !r.failed, "ready once the start command made /tmp/up: %s%s", err.msg, r.why);
	CHECK(sb && run(sb, "test -e /tmp/up", &probe) == 0 && WEXITSTATUS(probe.status) == 0,
	      "the check had passed when the launch said so");
	if (sb)
		(void)sandbox_delete(&eng, sb, NULL);

	struct sandbox_spec never = { .image = "host",
				      .memory = 256u << 20,
				      .cpu_millis = 1000,
				      .pids = 256,
				      .env = json_object(),
				      .ready = json_pack("{s:i, s:f}", "port", 9, "timeout", 0.3) };
	memset(&r, 0, sizeof(r));
	r.out.ops = &recorder_ops;
	rc = sandbox_create(&eng, &never, NULL, &sb, &err);
	sandbox_spec_free(&never);
	if (rc == 0 && (rc = launch_start(&eng, sb, &r.out, &err)) == 0)
		wait_closed(&r);
	CHECK(rc == 0 && r.failed && strstr(r.why, "nothing listens on port 9"), "a check that never passes: '%s'",
	      r.why);
	if (rc == 0)
		(void)sandbox_delete(&eng, sb, NULL);

	struct sandbox_spec base = {
		.image = "host", .memory = 256u << 20, .cpu_millis = 1000, .pids = 256, .env = json_object()
	};
	struct warm *w = NULL;
	rc = warm_open(&eng, NULL, 1, &base, &w, &err);
	sandbox_spec_free(&base);
	json_t *pool = NULL;
	for (int i = 0; rc == 0 && i < 600; i++) {
		json_decref(pool);
		pool = warm_to_json(w);
		if (json_integer_value(json_object_get(pool, "ready")) == 1)
			break;
		struct timeval tick = { 0, 100000 };
		event_base_loopexit(eng.base, &tick);
		event_base_dispatch(eng.base);
	}
	CHECK(rc == 0 && json_integer_value(json_object_get(pool, "ready")) == 1, "the pool filled: %s", err.msg);
	json_decref(pool);
	struct sandbox_spec want = { .image = "host",
				     .memory = 128u << 20,
				     .cpu_millis = 500,
				     .pids = 64,
				     .env = json_pack("{s:s}", "K", "handed"),
				     .allow_out = json_array(),
				     .deny_out = json_array() };
	sb = NULL;
	rc = w ? warm_take(&eng, w, &want, &sb, &err) : -1;
	sandbox_spec_free(&want);
	CHECK(rc == 1 && sb && sb->spec.from_pool && !sb->spec.pooled && sb->spec.memory == 128u << 20,
	      "handed out with the create's spec (%d: %s)", rc, err.msg);
	CHECK(sb && run(sb, "echo $K", &probe) == 0 && strcmp(probe.collected, "handed\n") == 0,
	      "its env is the create's: '%s'", probe.collected);
	CHECK(sb && sandbox_find(&eng, sb->id) == sb, "a handed-out sandbox is found by ID");
	if (sb)
		(void)sandbox_delete(&eng, sb, NULL);
	warm_close(&eng, w);
}

int main(int argc, char **argv)
{
	if (getuid() != 0) {
		SKIP("needs root, as coved does");
		return tap_done();
	}
	struct cove_err err = { 0 };
	int rc = enginetest_open(&eng, root, &err);
	CHECK(rc == 0, "engine_open on a fresh data root: %s", err.msg);
	if (rc == 0)
		rc = sandboxes_load(&eng, &err);
	CHECK(rc == 0 && eng.count == 0, "nothing to load on a fresh data root: %s", err.msg);

	struct sandbox_spec spec = {
		.image = "host", .memory = 256u << 20, .cpu_millis = 1000, .pids = 256, .env = json_object(),
	};
	struct sandbox *sb = NULL;
	rc = rc == 0 ? sandbox_create(&eng, &spec, NULL, &sb, &err) : -1;
	sandbox_spec_free(&spec);
	CHECK(rc == 0 && sb && sandbox_find(&eng, sb->id) == sb, "a sandbox created through the engine: %s", err.msg);

	struct recorder r;
	if (sb && run(sb, "true", &r) == 0) {
		CHECK(!r.failed && r.exits == 1 && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 && r.pid > 0,
		      "exec true: one exit, status 0, a pid (%s)", r.why);
	} else {
		CHECK(false, "exec true ran to its end");
	}
	if (sb && run(sb, "echo engine > /tmp/made && cat /tmp/made; exit 3", &r) == 0) {
		CHECK(r.exits == 1 && WEXITSTATUS(r.status) == 3, "exit status 3 reported");
		CHECK_STR(r.collected, "engine\n", "stdout collected: '%s'", r.collected);
	} else {
		CHECK(false, "the writing command ran to its end");
	}

	struct read_result rr = { .fd = -1 };
	struct files_read_req rq = { .path = "/tmp/made", .depth = 1 };
	struct file_op *op = NULL;
	rc = sb ? files_read(sb, &rq, on_read, &rr, &op, &err) : -1;
	if (rc == 0 && !rr.done) {
		struct timeval limit = { 30, 0 };
		event_base_loopexit(eng.base, &limit);
		event_base_dispatch(eng.base);
	}
	char got[64] = "";
	if (rr.fd >= 0) {
		ssize_t k = pread(rr.fd, got, sizeof(got) - 1, 0);
		got[k > 0 ? k : 0] = '\0';
		close(rr.fd);
	}
	CHECK(rc == 0 && rr.done && rr.size == 7, "files_read of the file: %zu bytes (%s%s)", (size_t)rr.size,
	      err.msg, rr.err);
	CHECK(strcmp(got, "engine\n") == 0, "its bytes, through the fd the engine gave: '%s'", got);

	struct read_result missing = { .fd = -1 };
	rq.path = "/tmp/no-such-file";
	rc = sb ? files_read(sb, &rq, on_read, &missing, &op, &err) : -1;
	if (rc == 0 && !missing.done) {
		struct timeval limit = { 30, 0 };
		event_base_loopexit(eng.base, &limit);
		event_base_dispatch(eng.base);
	}
	CHECK(missing.done && missing.fd < 0 && strstr(missing.err, "No such file"),
	      "a missing file is an error, not a file: '%s'", missing.err);

	rc = sb ? sandbox_delete(&eng, sb, &err) : -1;
	CHECK(rc == 0 && eng.count == 0, "delete through the engine: %s", err.msg);
	test_launch_and_pool();
	/* The deletion finishes when the sandbox's init has died. */
	bool gone = false;
	for (int t = 0; t < 200 && !gone; t++) {
		struct timeval tick = { 0, 50000 };
		event_base_loopexit(eng.base, &tick);
		event_base_dispatch(eng.base);
		gone = true;
		for (int i = 0; i < MAX_SANDBOXES; i++)
			gone = gone && !eng.sandboxes[i];
	}
	CHECK(gone, "the sandbox's slot is released once its init is gone");

	enginetest_close(&eng, root);
	return tap_done();
}

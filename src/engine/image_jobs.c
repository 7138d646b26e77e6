/* Imports and pulls, run by the cove-image helper (src/image/helper/) so
 * that coved's loop never waits on an archive or a registry and libcurl is
 * never mapped into coved. The helper's NDJSON lines come back through a
 * pipe read on the loop; its "done" line is recorded in the index here
 * (images_add). coved reaps every child itself (main.c's SIGCHLD), so the
 * helper's answer is its last line, not its exit status: a helper that
 * ends without one failed. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "engine/images.h"
#include "engine/images_private.h"
#include "image/ref.h"

#define LINE_MAX_BYTES (64u << 10)
#define HELPER_ARGS_MAX (12 + 2 * 32)

extern char **environ;

struct image_job {
	struct engine *d;
	struct output *out;
	const char *source; /* "import" or "pull" */
	char select[320];   /* import: --ref */
	char name[320];     /* import: a name to add */
	pid_t pid;
	int fd;       /* the helper's stdout */
	int spool_fd; /* import: the body, spooled */
	struct event *ev;
	struct evbuffer *in;
	json_t *done;
	struct cove_err err;
	bool paused;
};

static void job_free(struct image_job *j)
{
	if (j->ev)
		event_free(j->ev);
	if (j->fd >= 0)
		close(j->fd);
	if (j->spool_fd >= 0)
		close(j->spool_fd);
	if (j->in)
		evbuffer_free(j->in);
	json_decref(j->done);
	struct engine *d = j->d;
	d->images->jobs--;
	free(j);
	images_collect_pending(d);
}

/* The helper's end: its image recorded and told, or its error. */
static void job_end(struct image_job *j)
{
	json_t *image = NULL;
	struct cove_err err = j->err;
	if (j->out && !err.code && !j->done)
		err_set(&err, COVE_EINTERNAL, "cove-image ended without an answer");
	if (j->out && !err.code) {
		json_t *names = json_incref(json_object_get(j->done, "names"));
		if (j->name[0])
			json_array_append_new(names, json_string(j->name));
		const char *id = json_string_value(json_object_get(j->done, "id"));
		int r = images_add(j->d, id ? id : "", names, j->source, &image, &err);
		json_decref(names);
		if (r == 0) {
			struct image_event e = { json_pack("{s:s, s:o}", "type", "image", "image", image) };
			output_write(j->out, &(struct out_event){ .type = OUT_EVENT, .event = &e });
			json_decref(e.json);
		}
	}
	if (j->out)
		output_close(j->out, err.code ? &err : NULL);
	job_free(j);
}

static void on_line(struct image_job *j, const char *line, size_t len)
{
	json_t *ev = json_loadb(line, len, 0, NULL);
	const char *type = json_string_value(json_object_get(ev, "type"));
	if (type && strcmp(type, "layer") == 0 && j->out) {
		struct image_event e = { ev };
		output_write(j->out, &(struct out_event){ .type = OUT_EVENT, .event = &e });
	} else if (type && strcmp(type, "done") == 0) {
		json_decref(j->done);
		j->done = json_incref(ev);
	} else if (type && strcmp(type, "error") == 0) {
		const char *code = json_string_value(json_object_get(ev, "code"));
		const char *msg = json_string_value(json_object_get(ev, "message"));
		int c = !code                                    ? COVE_EINTERNAL
			: strcmp(code, "invalid_argument") == 0  ? COVE_EINVAL
			: strcmp(code, "not_found") == 0         ? COVE_ENOTFOUND
			: strcmp(code, "too_large") == 0         ? COVE_ETOOBIG
			: strcmp(code, "permission_denied") == 0 ? COVE_EPERM
								 : COVE_EINTERNAL;
		err_set(&j->err, c, "%s", msg ? msg : "cove-image failed");
	}
	json_decref(ev);
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct image_job *j = arg;
	int n = evbuffer_read(j->in, fd, 65536);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	char *line;
	size_t len;
	while ((line = evbuffer_readln(j->in, &len, EVBUFFER_EOL_LF))) {
		on_line(j, line, len);
		free(line);
	}
	if (n <= 0 || evbuffer_get_length(j->in) > LINE_MAX_BYTES)
		job_end(j);
}

static void job_pause(void *arg)
{
	struct image_job *j = arg;
	j->paused = true;
	event_del(j->ev);
}

static void job_resume(void *arg)
{
	struct image_job *j = arg;
	if (j->paused && j->ev)
		event_add(j->ev, NULL);
	j->paused = false;
}

/* The client is gone: the helper is stopped (what it leaves, the next
 * import and collection remove); the job ends when its pipe does. */
static void job_cancel(void *arg)
{
	struct image_job *j = arg;
	j->out = NULL;
	if (j->pid > 0)
		kill(j->pid, SIGKILL);
	if (!j->ev) {
		job_free(j);
		return;
	}
	job_resume(j);
}

static const struct output_producer job_producer = { .pause = job_pause, .resume = job_resume, .cancel = job_cancel };

static struct image_job *job_new(struct engine *d, struct output *out, const char *source)
{
	struct image_job *j = calloc(1, sizeof(*j));
	if (!j)
		return NULL;
	j->d = d;
	j->out = out;
	j->source = source;
	j->fd = j->spool_fd = -1;
	d->images->jobs++;
	return j;
}

/* The helper with args (after its command), stdin from in_fd (or
 * /dev/null), its stdout read on the loop. */
static int job_spawn(struct image_job *j, const char *const *args, int in_fd, struct cove_err *err)
{
	struct engine *d = j->d;
	const char *argv[HELPER_ARGS_MAX + 8];
	int n = 0, p[2];
	argv[n++] = "cove-image";
	for (; args[n - 1] && n < HELPER_ARGS_MAX; n++)
		argv[n] = args[n - 1];
	argv[n++] = "--pool";
	argv[n++] = d->pool.dir;
	argv[n++] = "--driver";
	argv[n++] = storage_driver_name(d->pool.driver);
	argv[n] = NULL;
	if (pipe2(p, O_CLOEXEC) < 0)
		return err_sys(err, errno, "pipe");
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	if (in_fd >= 0)
		posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
	else
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	int r = posix_spawn(&j->pid, d->image_helper, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (r != 0) {
		close(p[0]);
		return err_sys(err, r, "start '%s'", d->image_helper);
	}
	j->fd = p[0];
	evutil_make_socket_nonblocking(j->fd);
	j->in = evbuffer_new();
	j->ev = event_new(d->base, j->fd, EV_READ | EV_PERSIST, on_readable, j);
	if (!j->in || !j->ev)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	event_add(j->ev, NULL);
	return 0;
}

int image_pull_start(struct engine *d, const char *ref, struct output *out, struct cove_err *err)
{
	const char *args[HELPER_ARGS_MAX] = { "pull" };
	int n = 1;
	size_t i;
	json_t *h;
	if (d->registry_auth[0]) {
		args[n++] = "--auth";
		args[n++] = d->registry_auth;
	}
	json_array_foreach(d->insecure_registries, i, h)
	{
		if (n + 3 >= HELPER_ARGS_MAX)
			break;
		args[n++] = "--insecure";
		args[n++] = json_string_value(h);
	}
	args[n++] = ref;
	args[n] = NULL;
	struct image_ref parsed;
	if (image_ref_parse(ref, &parsed, err) < 0)
		return -1;
	struct image_job *j = job_new(d, out, "pull");
	if (!j)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	if (job_spawn(j, args, -1, err) < 0) {
		if (j->pid > 0)
			kill(j->pid, SIGKILL);
		job_free(j);
		return -1;
	}
	output_attach(out, &job_producer, j);
	return 0;
}

int image_import_start(struct engine *d, const struct image_import_request *rq, struct output *out,
		       struct image_job **ret, struct cove_err *err)
{
	struct image_ref parsed;
	if (rq->name && image_ref_parse(rq->name, &parsed, err) < 0)
		return -1;
	struct image_job *j = job_new(d, out, "import");
	if (!j)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	snprintf(j->select, sizeof(j->select), "%s", rq->select ? rq->select : "");
	snprintf(j->name, sizeof(j->name), "%s", rq->name ? rq->name : "");
	j->spool_fd = open(d->images->store.images, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (j->spool_fd < 0) {
		err_sys(err, errno, "spool in '%s'", d->images->store.images);
		job_free(j);
		return -1;
	}
	output_attach(out, &job_producer, j);
	*ret = j;
	return 0;
}

int image_import_data(struct image_job *j, struct evbuffer *buf)
{
	while (evbuffer_get_length(buf) > 0) {
		int n = evbuffer_write(buf, j->spool_fd);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err_sys(&j->err, errno, "spool the archive");
			job_end(j);
			return -1;
		}
	}
	return 0;
}

void image_import_end(struct image_job *j)
{
	const char *args[6] = { "import" };
	int n = 1;
	if (j->select[0]) {
		args[n++] = "--ref";
		args[n++] = j->select;
	}
	args[n] = NULL;
	if (lseek(j->spool_fd, 0, SEEK_SET) < 0)
		err_sys(&j->err, errno, "rewind the archive");
	else if (job_spawn(j, args, j->spool_fd, &j->err) == 0) {
		close(j->spool_fd); /* the helper has its own */
		j->spool_fd = -1;
		return;
	}
	job_end(j);
}

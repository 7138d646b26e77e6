/* cove lock: run a command in a sandbox while holding one of its named
 * locks, as flock(1) does for a file: acquire, exec, release.
 *
 * The lease is renewed while the command runs, by a thread on a second
 * connection (a struct cove serves one thread), every third of the lease:
 * a long command keeps the lock, and a CLI that dies (kill -9, a lost
 * machine) stops renewing, so that the lock frees itself within a lease. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"

#define LOCK_DEFAULT_LEASE 30.0
#define LOCK_DEFAULT_WAIT 3600.0 /* coved's most: wait as flock does, -w 0 to try once */

struct renewer {
	pthread_mutex_t mu;
	pthread_cond_t wake;
	bool stop;
	struct cove *client; /* the renewer's own connection */
	const char *id;
	struct cove_lock *lock;
	double lease;
	bool lost;
	struct cove_error err;
};

static void *renew_loop(void *arg)
{
	struct renewer *r = arg;
	pthread_mutex_lock(&r->mu);
	while (!r->stop && !r->lost) {
		struct timespec at;
		clock_gettime(CLOCK_MONOTONIC, &at);
		double next = (double)at.tv_sec + (double)at.tv_nsec / 1e9 + r->lease / 3;
		at.tv_sec = (time_t)next;
		at.tv_nsec = (long)((next - (double)at.tv_sec) * 1e9);
		while (!r->stop && pthread_cond_timedwait(&r->wake, &r->mu, &at) != ETIMEDOUT)
			;
		if (r->stop)
			break;
		pthread_mutex_unlock(&r->mu);
		int failed = cove_lock_renew(r->client, r->id, r->lock, r->lease, &r->err) < 0;
		pthread_mutex_lock(&r->mu);
		r->lost = failed;
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

static int renewer_start(struct renewer *r, pthread_t *thread, const char *socket_path)
{
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&r->wake, &attr);
	pthread_condattr_destroy(&attr);
	pthread_mutex_init(&r->mu, NULL);
	if (cove_open(socket_path, &r->client, &r->err) < 0)
		return -1;
	if (pthread_create(thread, NULL, renew_loop, r) != 0) {
		cove_close(r->client);
		snprintf(r->err.message, sizeof(r->err.message), "cannot start the lease renewer");
		return -1;
	}
	return 0;
}

/* Stop and join; whether the lock was lost meanwhile. */
static bool renewer_stop(struct renewer *r, pthread_t thread)
{
	pthread_mutex_lock(&r->mu);
	r->stop = true;
	pthread_cond_signal(&r->wake);
	pthread_mutex_unlock(&r->mu);
	pthread_join(thread, NULL);
	cove_close(r->client);
	return r->lost;
}

/* --lease and --wait; 0, or -1 after a usage error. */
static int parse_lock(struct cli *cli, double *lease, double *wait)
{
	const char *v;
	int c;
	while ((c = cli_next_opt(cli, &v)) != -1) {
		char *end;
		errno = 0;
		double x = strtod(v, &end);
		bool number = end != v && !*end && !errno;
		if (c == 'l' && number && x > 0)
			*lease = x;
		else if (c == 'w' && number && x >= 0)
			*wait = x;
		else
			return cli_usage_error("lock", "bad --%s '%s' (seconds)", c == 'l' ? "lease" : "wait", v), -1;
	}
	return 0;
}

/* The command's exit status, as cove exec; 125 when the lock was lost
 * while it ran (its section was not protected). */
static int run_locked(struct cli *cli, const char *id, struct cove_lock *lock, double lease, const char *body)
{
	struct renewer r = { .id = id, .lock = lock, .lease = lease };
	pthread_t thread;
	if (renewer_start(&r, &thread, cli->socket_path) < 0) {
		struct cove_error ignored;
		(void)cove_lock_release(cli->client, id, lock, &ignored);
		return cli_fail(&r.err);
	}
	int status = cli_exec_stream(cli, id, body);
	bool lost = renewer_stop(&r, thread);
	struct cove_error err = { 0 };
	if (!lost && cove_lock_release(cli->client, id, lock, &err) < 0)
		r.err = err, lost = true;
	if (lost) {
		fprintf(stderr, "cove: lock '%s' was lost while the command ran: %s\n", lock->name, r.err.message);
		return 125;
	}
	return status;
}

int cmd_lock(struct cli *cli, int argc, char **argv)
{
	double lease = LOCK_DEFAULT_LEASE, wait = LOCK_DEFAULT_WAIT;
	int i = 1;
	if (parse_lock(cli, &lease, &wait) < 0)
		return 2;
	if (argc - i < 3)
		return cli_usage_error("lock", "want a sandbox ID, a lock name and a command");
	const char *id = argv[i], *name = argv[i + 1];
	json_t *cmd = json_array();
	for (i += 2; i < argc; i++)
		json_array_append_new(cmd, json_string(argv[i]));
	json_t *req = json_pack("{s:o}", "cmd", cmd);
	char *body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	struct cove_lock lock;
	struct cove_error err = { 0 };
	int r;
	if (cli_connect(cli) < 0)
		r = 1;
	else if (cove_lock_acquire(cli->client, id, name, lease, wait, &lock, &err) < 0)
		r = cli_fail(&err);
	else
		r = run_locked(cli, id, &lock, lease, body);
	free(body);
	return r;
}

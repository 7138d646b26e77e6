/* Slow work off the loop, as DESIGN.md wants it: a job's work runs on a
 * thread of its own, then its done runs on the loop.
 *
 * The thread touches nothing the loop owns: work gets, through arg, copies
 * of what it needs and a place for its result, which done reads only once
 * work has returned (the eventfd write and read order the two). Jobs are
 * few and short (a sync, a small file), so a thread each is cheap enough
 * and no pool is needed. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "engine/engine.h"

struct worker_job {
	worker_fn work;
	worker_fn done;
	void *arg;
	pthread_t thread;
	int efd; /* written once work has returned */
	struct event *ev;
};

static int running;

static void *run(void *p)
{
	struct worker_job *j = p;
	j->work(j->arg);
	uint64_t one = 1;
	(void)!write(j->efd, &one, sizeof(one));
	return NULL;
}

static void on_finished(evutil_socket_t fd, short what, void *p)
{
	struct worker_job *j = p;
	(void)pthread_join(j->thread, NULL); /* it is past its write: at once */
	event_free(j->ev);
	close(j->efd);
	running--;
	j->done(j->arg);
	free(j);
}

int worker_start(struct event_base *base, worker_fn work, worker_fn done, void *arg, struct cove_err *err)
{
	struct worker_job *j = calloc(1, sizeof(*j));
	if (!j)
		return err_set(err, COVE_EINTERNAL, "out of memory");
	*j = (struct worker_job){ .work = work, .done = done, .arg = arg };
	j->efd = eventfd(0, EFD_CLOEXEC);
	if (j->efd < 0) {
		free(j);
		return err_sys(err, errno, "eventfd");
	}
	j->ev = event_new(base, j->efd, EV_READ, on_finished, j);
	/* Signals stay with the loop's thread: the new one blocks them all
	 * (libevent's handlers then always run there, and no syscall of the
	 * work is interrupted). */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int r = j->ev ? pthread_create(&j->thread, NULL, run, j) : ENOMEM;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0) {
		if (j->ev)
			event_free(j->ev);
		close(j->efd);
		free(j);
		return err_sys(err, r, "start a worker thread");
	}
	event_add(j->ev, NULL);
	running++;
	return 0;
}

bool worker_busy(void)
{
	return running > 0;
}

#include "daemon/spares.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "sys/btrfs.h"

static struct {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t thread;
	bool running, stopping;
	char image[64];
	char image_path[600];
	char dir[600];
	char ready[SPARES_TARGET][640]; /* paths of ready spares */
	int count;
	unsigned next;
} sp = { .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER };

static void *worker(void *arg)
{
	pthread_mutex_lock(&sp.lock);
	while (!sp.stopping) {
		if (sp.count >= SPARES_TARGET) {
			pthread_cond_wait(&sp.wake, &sp.lock);
			continue;
		}
		char path[640];
		snprintf(path, sizeof(path), "%s/.spare-%s-%u", sp.dir, sp.image, sp.next++);
		pthread_mutex_unlock(&sp.lock);
		int r = btrfs_subvol_snapshot(sp.image_path, path, false);
		pthread_mutex_lock(&sp.lock);
		if (r < 0 && r != -EEXIST) {
			log_warn("spare root '%s': %s", path, strerror(-r));
			break; /* creates fall back to snapshotting themselves */
		}
		if (r == 0)
			snprintf(sp.ready[sp.count++], sizeof(sp.ready[0]), "%s", path);
	}
	pthread_mutex_unlock(&sp.lock);
	return NULL;
}

/* Spares left from an earlier run are ready as they are. */
static void adopt_existing(bool discard)
{
	char prefix[96];
	snprintf(prefix, sizeof(prefix), ".spare-%s-", sp.image);
	DIR *dir = opendir(sp.dir);
	struct dirent *e;
	while (dir && (e = readdir(dir))) {
		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		char path[640];
		snprintf(path, sizeof(path), "%s/%s", sp.dir, e->d_name);
		unsigned n = 0;
		sscanf(e->d_name + strlen(prefix), "%u", &n);
		if (n >= sp.next)
			sp.next = n + 1;
		if (!discard && sp.count < SPARES_TARGET && btrfs_is_subvol(path) == 1)
			snprintf(sp.ready[sp.count++], sizeof(sp.ready[0]), "%s", path);
		else
			(void)btrfs_subvol_delete(path);
	}
	if (dir)
		closedir(dir);
}

int spares_start(const char *pool_dir, const char *image, bool image_changed)
{
	snprintf(sp.image, sizeof(sp.image), "%s", image);
	snprintf(sp.image_path, sizeof(sp.image_path), "%s/images/%s", pool_dir, image);
	snprintf(sp.dir, sizeof(sp.dir), "%s/sandboxes", pool_dir);
	adopt_existing(image_changed);
	int r = pthread_create(&sp.thread, NULL, worker, NULL);
	if (r)
		return -r;
	sp.running = true;
	return 0;
}

bool spares_take(const char *image, const char *dst)
{
	bool done = false;
	pthread_mutex_lock(&sp.lock);
	if (sp.running && sp.count > 0 && strcmp(image, sp.image) == 0) {
		const char *src = sp.ready[sp.count - 1];
		done = rename(src, dst) == 0;
		if (!done)
			log_warn("spare root '%s': rename: %s", src, strerror(errno));
		sp.count--;
		pthread_cond_signal(&sp.wake);
	}
	pthread_mutex_unlock(&sp.lock);
	return done;
}

void spares_stop(void)
{
	if (!sp.running)
		return;
	pthread_mutex_lock(&sp.lock);
	sp.stopping = true;
	pthread_cond_signal(&sp.wake);
	pthread_mutex_unlock(&sp.lock);
	pthread_join(sp.thread, NULL);
	sp.running = false;
}

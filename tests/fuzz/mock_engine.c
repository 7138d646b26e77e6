/* A mock engine for fuzz_api.c: every engine function the API's handlers
 * (src/daemon/api/) call, with the engine's own prototypes (a signature
 * that changes breaks this build, as it should). A sandbox ID always
 * finds the one mock sandbox, running; everything that would change
 * something records that it was asked (mock_mutated) and refuses with a
 * 409; a read refuses too; validation helpers of the engine accept.
 * Written from the list of the handlers' undefined symbols (nm); a new
 * engine call in a handler is a link error here until it is added. */
#include <string.h>
#include <time.h>

#include "daemon/proxy/proxy.h"
#include "engine/build.h"
#include "engine/disk.h"
#include "engine/engine.h"
#include "engine/files.h"
#include "engine/images.h"
#include "engine/lifecycle.h"
#include "engine/locks.h"
#include "engine/network.h"
#include "engine/ports.h"
#include "engine/process.h"
#include "engine/template.h"
#include "engine/usage.h"
#include "engine/watch.h"
#include "sys/storage.h"
#include "mock_engine.h"

#define MUTATES()                                                              \
	do {                                                                   \
		mock_mutated = true;                                           \
		return err_set(err, COVE_ESTATE, "mock engine: %s", __func__); \
	} while (0)
#define REFUSES() return err_set(err, COVE_ESTATE, "mock engine: %s", __func__)
#define FINDS_NOTHING()                                                    \
	do {                                                               \
		err_set(err, COVE_ENOTFOUND, "mock engine: %s", __func__); \
		return NULL;                                               \
	} while (0)

bool mock_mutated;
static struct engine mock_engine;
struct engine *engine_ctx = &mock_engine;
static struct sandbox mock_sandbox = { .id = "sb_abcdefghijkl", .state = SB_RUNNING, .conn_fd = -1 };

struct sandbox *sandbox_lookup(struct engine *d, const char *id, struct cove_err *err)
{
	return &mock_sandbox;
}

bool sandbox_listed(const struct sandbox *sb)
{
	return sb != NULL;
}

/* What a parsed spec holds (the handlers free every spec they parse). */
void sandbox_spec_free(struct sandbox_spec *spec)
{
	json_t **held[] = {
		&spec->env, &spec->allow_out, &spec->deny_out, &spec->metadata, &spec->start, &spec->ready
	};
	for (size_t i = 0; i < sizeof(held) / sizeof(held[0]); i++) {
		json_decref(*held[i]);
		*held[i] = NULL;
	}
}

int exec_start(struct sandbox *sb, const struct exec_request *er, struct output *out, struct cove_err *err)
{
	MUTATES();
}

void files_cancel(struct file_op *op)
{
}

int files_chmod(struct sandbox *sb, const struct files_chmod_req *rq, files_done_fn done, void *arg,
		struct file_op **ret, struct cove_err *err)
{
	MUTATES();
}

int files_mkdir(struct sandbox *sb, const struct files_mkdir_req *rq, files_done_fn done, void *arg,
		struct file_op **ret, struct cove_err *err)
{
	MUTATES();
}

int files_move(struct sandbox *sb, const struct files_move_req *rq, files_done_fn done, void *arg, struct file_op **ret,
	       struct cove_err *err)
{
	MUTATES();
}

int files_portable_in(struct sandbox *sb, const struct files_tree_req *rq, files_done_fn done, void *arg,
		      struct file_op **ret, struct cove_err *err)
{
	MUTATES();
}

int files_read(struct sandbox *sb, const struct files_read_req *rq, files_done_fn done, void *arg, struct file_op **ret,
	       struct cove_err *err)
{
	REFUSES();
}

int files_remove(struct sandbox *sb, const struct files_remove_req *rq, files_done_fn done, void *arg,
		 struct file_op **ret, struct cove_err *err)
{
	MUTATES();
}

int files_sandbox_ready(struct sandbox *sb, struct cove_err *err)
{
	return 0;
}

int files_tar_in(struct sandbox *sb, const struct files_tree_req *rq, files_done_fn done, void *arg,
		 struct file_op **ret, struct cove_err *err)
{
	MUTATES();
}

int files_tree_out(struct sandbox *sb, const struct files_tree_req *rq, struct output *o, struct cove_err *err)
{
	REFUSES();
}

int files_write(struct sandbox *sb, const struct files_write_req *rq, files_ready_fn ready, files_done_fn done,
		void *arg, struct file_op **ret, struct cove_err *err)
{
	MUTATES();
}

int files_write_data(struct file_op *op, struct evbuffer *buf)
{
	return -1;
}

void files_write_end(struct file_op *op)
{
}

int history_checkpoint(struct engine *d, struct sandbox *sb, const char *label, bool memory, json_t **ret,
		       struct cove_err *err)
{
	MUTATES();
}

int history_delete(struct engine *d, const char *id, json_t **ret, struct cove_err *err)
{
	MUTATES();
}

int history_get(struct engine *d, const char *id, json_t **ret, struct cove_err *err)
{
	REFUSES();
}

int history_restore(struct engine *d, const char *id, int seq, const char *kind, int count, struct sandbox **ret,
		    struct cove_err *err)
{
	MUTATES();
}

int launch_check_url(const char *url, struct cove_err *err)
{
	return 0;
}

bool launch_needed(const struct sandbox *sb)
{
	return false;
}

int launch_start(struct engine *d, struct sandbox *sb, struct output *out, struct cove_err *err)
{
	MUTATES();
}

int lock_acquire(struct sandbox *sb, const struct lock_request *lr, struct output *out, struct cove_err *err)
{
	MUTATES();
}

int lock_release(struct sandbox *sb, const char *name, const char *token, struct cove_err *err)
{
	MUTATES();
}

int lock_renew(struct sandbox *sb, const char *name, const char *token, double lease, int64_t *ret_expires_at,
	       struct cove_err *err)
{
	MUTATES();
}

json_t *locks_to_json(const struct sandbox *sb)
{
	return json_array();
}

int network_check(const struct sandbox_spec *s, struct cove_err *err)
{
	return 0;
}

json_t *network_modes_json(void)
{
	return json_array();
}

int network_set_policy(struct engine *d, struct sandbox *sb, const struct network_policy_req *req, struct cove_err *err)
{
	MUTATES();
}

void ports_activity(struct engine *d, const char *id, int delta)
{
}

int ports_close(struct engine *d, struct sandbox *sb, int port, struct cove_err *err)
{
	MUTATES();
}

int ports_connect(struct engine *d, struct sandbox *sb, int port, bool v6, int *ret_fd, struct cove_err *err)
{
	REFUSES();
}

const struct sandbox_port *ports_find(const struct sandbox *sb, int port)
{
	return NULL;
}

int ports_open(struct engine *d, struct sandbox *sb, int port, bool public, const struct sandbox_port **ret,
	       struct cove_err *err)
{
	MUTATES();
}

json_t *ports_to_json(const struct sandbox *sb, const struct sandbox_port *p)
{
	return json_object();
}

void proc_attach_input(struct proc_attach *a, struct evbuffer *in)
{
}

void proc_attach_input_end(struct proc_attach *a, struct evbuffer *in)
{
}

bool proc_ended(const struct proc *p, int *status)
{
	return false;
}

bool proc_is_tty(const struct proc *p)
{
	return false;
}

pid_t proc_pid(const struct proc *p)
{
	return 0;
}

int proc_resize(struct proc *p, int rows, int cols, struct cove_err *err)
{
	MUTATES();
}

int proc_send_signal(struct proc *p, const struct signal_request *r, struct cove_err *err)
{
	MUTATES();
}

int proc_stdin_check(const struct proc *p, struct cove_err *err)
{
	return 0;
}

json_t *proc_to_json(const struct proc *p)
{
	return json_object();
}

int proc_write_stdin(struct proc *p, const struct stdin_request *r, struct output *out, struct cove_err *err)
{
	MUTATES();
}

int procs_attach(struct proc *p, const struct attach_request *r, struct output *out, struct proc_attach **ret,
		 struct cove_err *err)
{
	REFUSES();
}

struct proc *procs_find(struct sandbox *sb, const char *selector, struct cove_err *err)
{
	FINDS_NOTHING();
}

int procs_start(struct sandbox *sb, const struct exec_request *er, struct output *out, struct cove_err *err)
{
	MUTATES();
}

json_t *procs_to_json(struct sandbox *sb)
{
	return json_array();
}

int procs_wait(struct proc *p, double wait, struct output *out, struct cove_err *err)
{
	REFUSES();
}

bool proxy_serving(void)
{
	return false;
}

json_t *proxy_to_json(void)
{
	return json_object();
}

int sandbox_delete(struct engine *d, struct sandbox *sb, struct cove_err *err)
{
	MUTATES();
}

struct sandbox *sandbox_find(struct engine *d, const char *id)
{
	return NULL;
}

int sandbox_fork(struct engine *d, struct sandbox *sb, int count, bool memory, struct sandbox **ret,
		 struct cove_err *err)
{
	MUTATES();
}

int64_t sandbox_now_ms(void)
{
	return (int64_t)time(NULL) * 1000;
}

int sandbox_set_expiry(struct engine *d, struct sandbox *sb, int64_t expires_at, struct cove_err *err)
{
	MUTATES();
}

json_t *sandbox_to_json(const struct sandbox *sb)
{
	return json_object();
}

json_t *session_to_json(const struct session *s)
{
	return json_object();
}

int sessions_create(struct sandbox *sb, const struct session_request *r, struct output *out, struct cove_err *err)
{
	MUTATES();
}

int sessions_delete(struct sandbox *sb, const char *id, struct cove_err *err)
{
	MUTATES();
}

int sessions_exec(struct sandbox *sb, const struct exec_request *er, const char *session, struct output *out,
		  struct cove_err *err)
{
	MUTATES();
}

json_t *sessions_to_json(struct sandbox *sb)
{
	return json_array();
}

int snapshot_create(struct engine *d, struct sandbox *sb, const char *name, struct snapshot **ret, struct cove_err *err)
{
	MUTATES();
}

int snapshot_create_nowait(struct engine *d, struct sandbox *sb, const char *name, bool memory, struct snapshot **ret,
			   struct cove_err *err)
{
	MUTATES();
}

int snapshot_delete(struct engine *d, struct snapshot *sn, struct cove_err *err)
{
	MUTATES();
}

struct snapshot *snapshot_find(struct engine *d, const char *id)
{
	return NULL;
}

int snapshot_restore(struct engine *d, const struct snapshot *sn, const struct sandbox_spec *overrides,
		     struct sandbox **ret, struct cove_err *err)
{
	MUTATES();
}

json_t *snapshot_to_json(const struct snapshot *sn)
{
	return json_object();
}

const char *storage_driver_name(enum storage_driver drv)
{
	return "btrfs";
}

int template_add(struct engine *d, const char *name, json_t *body, const char *snapshot, int warm,
		 const struct sandbox_spec *spec, struct template **ret, struct cove_err *err)
{
	MUTATES();
}

int template_create_sandbox(struct engine *d, struct template *t, struct sandbox_spec *spec, struct sandbox **ret,
			    bool *ret_pooled, struct cove_err *err)
{
	MUTATES();
}

int template_delete(struct engine *d, struct template *t, struct cove_err *err)
{
	MUTATES();
}

struct template *template_lookup(struct engine *d, const char *name, struct cove_err *err)
{
	FINDS_NOTHING();
}

json_t *template_to_json(const struct template *t)
{
	return json_object();
}

void warm_note_request(void)
{
}

json_t *warm_to_json(const struct warm *w)
{
	return json_object();
}

int watch_start(struct sandbox *sb, const struct watch_request *rq, struct output *o, struct cove_err *err)
{
	REFUSES();
}

json_t *images_to_json(struct engine *d)
{
	return json_array();
}

int image_get(struct engine *d, const char *ref, json_t **ret, struct cove_err *err)
{
	REFUSES();
}

int image_delete(struct engine *d, const char *ref, json_t **ret, struct cove_err *err)
{
	MUTATES();
}

int images_prune(struct engine *d, bool all, json_t **ret, struct cove_err *err)
{
	MUTATES();
}

int image_import_start(struct engine *d, const struct image_import_request *rq, struct output *out,
		       struct image_job **ret, struct cove_err *err)
{
	MUTATES();
}

int image_import_data(struct image_job *j, struct evbuffer *buf)
{
	return -1;
}

void image_import_end(struct image_job *j)
{
}

int image_pull_start(struct engine *d, const char *ref, struct output *out, struct cove_err *err)
{
	MUTATES();
}

/* ---- builds, disk limits, the lifecycle, usage, memory snapshots ---- */

int build_start(struct engine *d, const struct build_request *rq, struct output *out, struct build **ret,
		struct cove_err *err)
{
	MUTATES();
}

int build_data(struct build *b, struct evbuffer *buf)
{
	return -1;
}

void build_end(struct build *b)
{
}

json_t *disk_capabilities_json(const struct engine *d)
{
	return json_object();
}

int disk_check(const struct engine *d, struct sandbox_spec *spec, bool asked, struct cove_err *err)
{
	return 0;
}

void engine_metrics_write(const struct engine *d, FILE *f)
{
}

int engine_sandbox_pause(struct engine *d, struct sandbox *sb, enum sandbox_reason why, struct cove_err *err)
{
	MUTATES();
}

int engine_sandbox_resume(struct engine *d, struct sandbox *sb, enum sandbox_reason why, struct cove_err *err)
{
	MUTATES();
}

int engine_sandbox_archive(struct engine *d, struct sandbox *sb, enum sandbox_reason why, struct cove_err *err)
{
	MUTATES();
}

int engine_sandbox_archive_mem(struct engine *d, struct sandbox *sb, enum sandbox_reason why, enum archive_memory mem,
			       struct cove_err *err)
{
	MUTATES();
}

int engine_sandbox_reboot(struct engine *d, struct sandbox *sb, enum sandbox_reason why, struct cove_err *err)
{
	MUTATES();
}

int events_subscribe(struct engine *d, const char *id, int keepalive, struct output *o, struct cove_err *err)
{
	REFUSES();
}

/* The lifecycle's names, as lifecycle.c has them: a validation helper. */
int sandbox_on_timeout_parse(const char *name)
{
	static const char *const names[] = { "delete", "pause", "archive" };
	for (int i = 0; name && i < 3; i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

void sandbox_usage_get(const struct engine *d, const struct sandbox *sb, struct sandbox_usage *ret)
{
	memset(ret, 0, sizeof(*ret));
}

json_t *sandbox_usage_json(const struct sandbox *sb, const struct sandbox_usage *u)
{
	return json_object();
}

int snapshot_create_mem(struct engine *d, struct sandbox *sb, const char *name, bool memory, snapshot_rows_fn rows,
			void *arg, struct snapshot **ret, struct cove_err *err)
{
	MUTATES();
}

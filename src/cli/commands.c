/* The CLI's commands: one table that main dispatches from, opts.c parses
 * by, `cove COMMAND --help` prints, and `cove help --man` turns into the
 * manual page cove(1) at build time, so that the three never drift.
 *
 * Every example is run by tests/integration/test_cli_help.py with $ID a
 * running sandbox of its own: an example that stops working fails the
 * suite. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

/* Sandbox options, of run and create. */
static const struct cli_opt spec_opts[] = {
	{ 'I', 0, "image", "IMAGE", "host (the default: the host's /usr and /opt), or an image's name or ID (cove image ls)" },
	{ 'm', 0, "memory", "SIZE", "memory limit, like 512M or 2G" },
	{ 'c', 0, "cpus", "N", "CPU limit, like 1 or 0.5" },
	{ 'p', 0, "pids", "N", "most processes at once" },
	{ 'e', 'e', "env", "K=V", "an environment variable (again for more)" },
	{ 'w', 'w', "workdir", "DIR", "where commands start" },
	{ 'u', 'u', "user", "USER", "who commands run as" },
	{ 'n', 0, "name", "NAME", "a name to list it by" },
	{ 't', 0, "timeout", "SECONDS", "delete the sandbox that long from now (see --on-timeout)" },
	{ 'i', 0, "idle-timeout", "SECONDS",
	  "pause it after that long with nothing active (0: never; default coved's)" },
	{ 'a', 0, "archive-after", "SECONDS", "archive it after that long paused (0: never; default coved's)" },
	{ 'Z', 0, "on-timeout", "WHAT", "what its timeout does: delete (the default), pause or archive" },
	{ 'X', 0, "isolation", "external", "the host backend: a workspace folder, no OS boundary" },
	{ 'E', 0, "inherit-env", NULL, "(external) start from coved's environment" },
	{ 'N', 0, "network", "MODE", "egress (the default: out through NAT, DNS) or none (loopback only)" },
	{ 'O', 0, "allow-out", "CIDR|DOMAIN", "let out to it, before the deny list (again for more)" },
	{ 'D', 0, "deny-out", "CIDR|DOMAIN", "keep from it (again for more); 0.0.0.0/0 makes allow-out a list" },
	{ 'K', 0, "disk", "SIZE", "disk limit, like 10G (default: coved's --default-disk)" },
	{ 'T', 0, "template", "NAME", "start from a template: its fields, but for those given here" },
	{ 'S', 0, "start", "CMD", "a start command (a shell line), kept running in the background" },
	{ 'R', 0, "ready-port", "PORT", "ready once PORT listens inside (create waits for it)" },
	{ 'U', 0, "ready-url", "URL", "ready once http://127.0.0.1:PORT/PATH inside answers 2xx or 3xx" },
	{ 'C', 0, "ready-cmd", "CMD", "ready once CMD (a shell line) exits 0 inside" },
	{ 'Y', 0, "ready-timeout", "SECONDS", "how long create waits for ready (default 30)" },
	{ 0 },
};

/* Options of template create: a create's, and the template's own. */
static const struct cli_opt template_opts[] = {
	{ 'I', 0, "image", "IMAGE", "the image (default: host)" },
	{ 'F', 0, "from-snapshot", "SNAPSHOT", "a snapshot's files and spec instead of an image" },
	{ 'm', 0, "memory", "SIZE", "memory limit, like 512M or 2G" },
	{ 'c', 0, "cpus", "N", "CPU limit, like 1 or 0.5" },
	{ 'p', 0, "pids", "N", "most processes at once" },
	{ 'K', 0, "disk", "SIZE", "disk limit, like 10G" },
	{ 'e', 'e', "env", "K=V", "an environment variable (again for more)" },
	{ 'w', 'w', "workdir", "DIR", "where commands start" },
	{ 'u', 'u', "user", "USER", "who commands run as" },
	{ 'N', 0, "network", "MODE", "egress (the default) or none" },
	{ 'O', 0, "allow-out", "CIDR|DOMAIN", "let out to it (again for more)" },
	{ 'D', 0, "deny-out", "CIDR|DOMAIN", "keep from it (again for more)" },
	{ 'S', 0, "start", "CMD", "a start command (a shell line), kept running in the background" },
	{ 'R', 0, "ready-port", "PORT", "ready once PORT listens inside" },
	{ 'U', 0, "ready-url", "URL", "ready once http://127.0.0.1:PORT/PATH inside answers 2xx or 3xx" },
	{ 'C', 0, "ready-cmd", "CMD", "ready once CMD (a shell line) exits 0 inside" },
	{ 'Y', 0, "ready-timeout", "SECONDS", "how long a create waits for ready (default 30)" },
	{ 'L', 0, "idle-timeout", "SECONDS", "idle time before a sandbox of it sleeps" },
	{ 'W', 0, "warm", "N", "keep N sandboxes of it started and ready (0 to 64)" },
	{ 0 },
};

static const struct cli_opt archive_opts[] = {
	{ 'N', 0, "no-memory", NULL, "end their processes instead of keeping their memory" },
	{ 0 },
};

static const struct cli_opt stats_opts[] = {
	{ 's', 0, "no-stream", NULL, "one reading, then exit (so too when stdout is not a terminal)" },
	{ 0 },
};

static const struct cli_opt network_opts[] = {
	{ 'a', 0, "allow-out", "CIDR|DOMAIN", "the new allow list (again for more)" },
	{ 'd', 0, "deny-out", "CIDR|DOMAIN", "the new deny list (again for more)" },
	{ 'c', 0, "clear", NULL, "no lists at all" },
	{ 0 },
};

static const struct cli_opt port_opts[] = {
	{ 'P', 0, "public", NULL, "no token needed: anyone who can reach the proxy may use it" },
	{ 0 },
};

static const struct cli_opt exec_opts[] = {
	{ 'e', 'e', "env", "K=V", "an environment variable (again for more)" },
	{ 'w', 'w', "workdir", "DIR", "where CMD starts" },
	{ 'u', 'u', "user", "USER", "who CMD runs as (a name or a uid)" },
	{ 't', 't', "timeout", "SECONDS", "kill CMD after that long (exit status 124)" },
	{ 'i', 'i', "interactive", NULL, "pass our stdin to CMD" },
	{ 'd', 'd', "detach", NULL, "run in the background, print its pid (see cove ps)" },
	{ 'T', 0, "tag", "TAG", "name a background process (for attach, kill, wait)" },
	{ 0 },
};

static const struct cli_opt shell_opts[] = {
	{ 'e', 'e', "env", "K=V", "an environment variable (again for more)" },
	{ 'w', 'w', "workdir", "DIR", "where the shell starts" },
	{ 'u', 'u', "user", "USER", "who it runs as" },
	{ 'a', 0, "attach", "PROC", "a running terminal (pid or tag) instead of a new one; leaving keeps it" },
	{ 0 },
};

static const struct cli_opt snapshot_opts[] = {
	{ 'n', 0, "name", "NAME", "a name to list it by" },
	{ 'P', 0, "portable", NULL, "print the portable JSON snapshot of the changed files (no deletions) instead" },
	{ 'p', 0, "path", "DIR", "(--portable) a folder instead (default: everything the sandbox changed)" },
	{ 'M', 0, "memory", NULL, "its running processes too (restores and forks resume them)" },
	{ 0 },
};

static const struct cli_opt restore_opts[] = {
	{ 'n', 0, "name", "NAME", "the new sandbox's name" },
	{ 'm', 0, "memory", "SIZE", "its memory limit (default: the snapshot's)" },
	{ 'c', 0, "cpus", "N", "its CPU limit" },
	{ 'p', 0, "pids", "N", "its process limit" },
	{ 'K', 0, "disk", "SIZE", "its disk limit" },
	{ 'P', 0, "portable", NULL, "SNAPSHOT is a portable JSON file (- for stdin): a new sandbox with its files" },
	{ 'D', 0, "path", "DIR", "(--portable) the folder to make them in (default: the workspace)" },
	{ 0 },
};

static const struct cli_opt count_opts[] = {
	{ 'n', 'n', "count", "N", "how many (1 to 100; default 1)" },
	{ 0 },
};

static const struct cli_opt fork_opts[] = {
	{ 'n', 'n', "count", "N", "how many (1 to 100; default 1)" },
	{ 'M', 0, "memory", NULL, "its running processes go on in each copy" },
	{ 0 },
};

static const struct cli_opt lock_opts[] = {
	{ 'l', 'l', "lease", "SECONDS", "the lease, renewed while CMD runs (default 30)" },
	{ 'w', 'w', "wait", "SECONDS", "how long to wait for the lock (default 3600; 0: try once)" },
	{ 0 },
};

static const struct cli_opt attach_opts[] = {
	{ 'R', 0, "no-replay", NULL, "only live output, not the kept tail" },
	{ 0 },
};

static const struct cli_opt kill_opts[] = {
	{ 's', 's', "signal", "SIG", "the signal, a name or a number (default KILL)" },
	{ 'T', 0, "tree", NULL, "to its descendants too" },
	{ 0 },
};

static const struct cli_opt checkpoint_opts[] = {
	{ 'l', 0, "label", "LABEL", "a label for it" },
	{ 'M', 0, "memory", NULL, "its running processes too (rollback and branch resume them)" },
	{ 0 },
};

static const struct cli_opt export_opts[] = {
	{ 'o', 'o', "output", "FILE", "write there (default stdout); the format follows .zip, .tar" },
	{ 'f', 0, "format", "tar|zip", "the format, whatever FILE is called" },
	{ 'p', 0, "path", "DIR", "a folder instead (default: everything the sandbox changed)" },
	{ 0 },
};

static const struct cli_opt files_ls_opts[] = {
	{ 'l', 'l', "long", NULL, "type, mode, owner, size and time too" },
	{ 'd', 'd', "depth", "N", "levels down (default 1)" },
	{ 0 },
};
static const struct cli_opt recursive_opts[] = {
	{ 'r', 'r', "recursive", NULL, "a folder and all it holds" },
	{ 0 },
};
static const struct cli_opt force_opts[] = {
	{ 'f', 'f', "force", NULL, "replace TO if it exists" },
	{ 0 },
};
static const struct cli_opt image_import_opts[] = {
	{ 'n', 0, "name", "REF", "name the image (like app:1; a name another image had moves here)" },
	{ 0 },
};

static const struct cli_opt build_opts[] = {
	{ 'f', 'f', "file", "FILE", "the Dockerfile, inside DIR (default DIR/Dockerfile)" },
	{ 't', 't', "tag", "NAME", "name the image (like app:1; a name another image had moves here)" },
	{ 'b', 0, "build-arg", "K=V", "a value for an ARG of the Dockerfile (again for more)" },
	{ 0 },
};

static const struct cli_opt image_prune_opts[] = {
	{ 'a', 0, "all", NULL, "every image nothing uses, named or not (default: only those without a name)" },
	{ 0 },
};

/* A docker archive made by hand, for the image examples. */
#define DEMO_IMAGE                                                                                              \
	"mkdir -p root/bin && cp /bin/busybox root/bin/sh && tar -C root -cf layer.tar bin\n"                   \
	"D=$(sha256sum layer.tar | cut -d' ' -f1)\n"                                                             \
	"printf '{\"os\":\"linux\",\"architecture\":\"amd64\",\"config\":{\"Cmd\":[\"sh\"]},'"              \
	"'\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:%s\"]}}' $D > config.json\n"                  \
	"echo '[{\"Config\":\"config.json\",\"RepoTags\":[\"demo:1\"],\"Layers\":[\"layer.tar\"]}]' > manifest.json\n" \
	"tar -cf demo.tar manifest.json config.json layer.tar\n"

static const struct cli_opt help_opts[] = {
	{ 'M', 0, "man", NULL, "the whole manual, cove(1), as roff" },
	{ 0 },
};

const struct cli_cmd cli_commands[] = {
	{ "run", cmd_run, "[OPTIONS] [--] CMD...",
	  "Create a sandbox, run CMD in it, delete it (however cove ends); exits with CMD's status.", spec_opts, 0,
	  "cove run --memory 256M -- sh -c 'echo hello from $(hostname)'" },
	{ "create", cmd_create, "[OPTIONS]", "Create a sandbox that stays until removed; print its ID.", spec_opts, -1,
	  "cove create --memory 1G --name build" },
	{ "timeout", cmd_timeout, "ID SECONDS", "Delete a sandbox SECONDS from now (a new deadline).", NULL, -1,
	  "cove timeout $ID 3600" },
	{ "exec", cmd_exec, "[OPTIONS] ID [--] CMD...",
	  "Run CMD in a sandbox, streaming its output; exits with its status (124 timed out, 125 a cove error, "
	  "126/127 could not run). CMD and its arguments are never parsed by cove.",
	  exec_opts, 1, "cove exec $ID --user nobody -- id -u\necho 'print(6*7)' | cove exec -i $ID -- python3" },
	{ "ls", cmd_ls, "", "List the sandboxes.", NULL, -1, "cove ls" },
	{ "info", cmd_info, "ID", "A sandbox, as the API's JSON, with what it uses now (\"usage\").", NULL, -1,
	  "cove info $ID" },
	{ "stats", cmd_stats, "[--no-stream] [ID...]",
	  "What sandboxes use (all of them, or those named): CPU %, memory now, of its limit and at its peak, "
	  "network bytes in and out, disk used of its limit, processes; refreshed every second on a terminal "
	  "until interrupted. --json prints the API's figures (an array; a line per second when streaming).",
	  stats_opts, -1, "cove stats --no-stream $ID\ncove stats --json $ID" },
	{ "rm", cmd_rm, "ID...", "Delete sandboxes.", NULL, -1, "cove rm $ID" },
	{ "pause", cmd_pause, "ID...",
	  "Pause sandboxes: their processes frozen, their memory kept. Any request that needs one (exec, files, "
	  "attach...) wakes it; so does cove resume.",
	  NULL, -1, "cove pause $ID && cove info $ID | grep '\"state\": \"paused\"' && cove exec $ID -- true" },
	{ "resume", cmd_resume, "ID...", "Resume paused sandboxes.", NULL, -1, "cove pause $ID && cove resume $ID" },
	{ "archive", cmd_archive, "[--no-memory] ID...",
	  "Archive sandboxes: their active slot is released; their files stay, and the memory of the processes "
	  "that run in them is saved beside them (when this host has memory snapshots and CRIU can save them; "
	  "else, or with --no-memory, the processes end). The next request brings one back, running, its "
	  "processes where they were. Prints each ID, its state, and whether the memory was kept (else why not).",
	  archive_opts, -1, "cove archive $ID && cove exec $ID -- true\ncove archive --no-memory $ID" },
	{ "reboot", cmd_reboot, "ID...",
	  "Reboot sandboxes: every process ended, cove-init started again; files, ID, limits and policy kept.", NULL,
	  -1, "cove reboot $ID" },
	{ "events", cmd_events, "[ID]",
	  "The sandboxes' state changes (or one's) as they happen: created, paused, running, archived, deleted, "
	  "and why (user, request, idle, timeout, slots); until interrupted.",
	  NULL, -1, "(timeout 5 cove events $ID || true) & sleep 1; cove pause $ID; cove resume $ID; wait" },
	{ "network", cmd_network, "[--allow-out X]... [--deny-out Y]... [--clear] ID",
	  "Replace a sandbox's egress policy (both lists; one not given is emptied); with no option, show its "
	  "network.",
	  network_opts, -1, "cove network $ID\ncove network --deny-out 0.0.0.0/0 --allow-out 127.0.0.1 $ID" },
	{ "port", cmd_port, "[--public] ID PORT",
	  "Open a sandbox's port as a URL on coved's port proxy (http://PORT-ID.localhost:PROXYPORT/ by default); "
	  "print it, with a private port's token in the query, ready for a browser (which then keeps it as a "
	  "cookie). Again: the same URL and token, public as now asked. --json gives url and token apart.",
	  port_opts, -1,
	  "cove exec -d $ID -- python3 -m http.server 8000\ncove port $ID 8000\ncove --json port $ID 8000" },
	{ "port ls", cmd_port_ls, "ID", "A sandbox's open ports and their URLs.", NULL, -1,
	  "cove port $ID 8000\ncove port ls $ID" },
	{ "port rm", cmd_port_rm, "ID PORT...", "Close ports: their URLs answer 404, their open connections end.", NULL,
	  -1, "cove port $ID 8000\ncove port rm $ID 8000" },
	{ "port-forward", cmd_port_forward, "ID [LOCAL:]REMOTE",
	  "Forward 127.0.0.1:LOCAL (default REMOTE; 0: any free port) to the sandbox's port REMOTE, raw TCP over "
	  "coved's API (a database, SSH: anything, open or not), until interrupted.",
	  NULL, -1, "timeout 2 cove port-forward $ID 0:5432 || test $? = 124" },
	{ "cp", cmd_cp, "SRC ID:DST | ID:SRC DST",
	  "Copy a file or folder into or out of a sandbox, as docker cp: onto an existing folder it goes inside, "
	  "under its own name; SRC/. copies what a folder holds; - is stdin or stdout (a folder as a tar). Files "
	  "of any size stream; a progress bar shows on a terminal for a copy that takes more than a second.",
	  NULL, -1, "echo hello > in.txt\ncove cp in.txt $ID:/tmp/\ncove cp $ID:/tmp/in.txt -" },
	{ "snapshot", cmd_snapshot, "[OPTIONS] ID",
	  "Snapshot a sandbox, running or not (consistent while it runs, durable when printed); print its ID.",
	  snapshot_opts, -1, "cove snapshot --name before $ID\ncove snapshot --portable $ID > s.json" },
	{ "snapshot rm", cmd_snapshot_rm, "SNAPSHOT...", "Delete snapshots.", NULL, -1,
	  "cove snapshot rm $(cove snapshot $ID)" },
	{ "snapshots", cmd_snapshots, "", "List the snapshots.", NULL, -1, "cove snapshots" },
	{ "restore", cmd_restore, "[OPTIONS] SNAPSHOT",
	  "A new sandbox from a snapshot (or a portable JSON file); print its ID.", restore_opts, -1,
	  "cove restore $(cove snapshot $ID) --name again\ncove snapshot --portable $ID | cove restore --portable -" },
	{ "fork", cmd_fork, "[-n N] [--memory] ID", "N running copies of a sandbox; print their IDs, one a line.",
	  fork_opts, -1, "cove fork $ID -n 3" },
	{ "lock", cmd_lock, "[OPTIONS] ID NAME [--] CMD...",
	  "Run CMD in a sandbox holding its lock NAME (waiting for it), as flock does; other clients of the "
	  "sandbox that take NAME wait meanwhile.",
	  lock_opts, 2, "cove lock $ID build/cache -- sh -c 'echo one at a time'" },
	{ "ps", cmd_ps, "ID", "A sandbox's kept processes (exec -d, shell), running and ended.", NULL, -1,
	  "cove exec -d --tag sleeper $ID -- sleep 1\ncove ps $ID" },
	{ "attach", cmd_attach, "[--no-replay] ID PROC",
	  "A kept process's output: its kept tail (1 MiB a stream), then live, until it ends; exits with its "
	  "status. PROC is its pid or tag.",
	  attach_opts, -1, "cove exec -d --tag hi $ID -- echo hello\ncove attach $ID hi" },
	{ "kill", cmd_kill, "[-s SIG] [--tree] ID PROC", "Signal a kept process (default KILL).", kill_opts, -1,
	  "P=$(cove exec -d $ID -- sleep 600)\ncove kill -s TERM $ID $P" },
	{ "wait", cmd_wait, "ID PROC", "Wait for a kept process to end; exit with its status.", NULL, -1,
	  "P=$(cove exec -d $ID -- sleep 1)\ncove wait $ID $P" },
	{ "shell", cmd_shell, "[OPTIONS] ID [[--] CMD...]",
	  "An interactive terminal in a sandbox: the user's login shell, or CMD (the local terminal in raw mode, "
	  "its size followed); exits with the shell's status.",
	  shell_opts, 1, "cove shell $ID\ncove shell $ID -- uname -a" },
	{ "files ls", cmd_files, "[-l] [-d N] ID PATH", "A sandbox's folder, names relative to it.", files_ls_opts, -1,
	  "cove files ls -l $ID /etc" },
	{ "files cat", cmd_files, "ID PATH...", "Print a sandbox's files.", NULL, -1,
	  "cove files cat $ID /etc/hostname" },
	{ "files rm", cmd_files, "[-r] ID PATH...", "Remove a sandbox's files (a missing one is no error).",
	  recursive_opts, -1, "cove files rm -r $ID /tmp/old" },
	{ "files mkdir", cmd_files, "ID PATH...", "Make folders, with their parents.", NULL, -1,
	  "cove files mkdir $ID /tmp/a/b" },
	{ "files mv", cmd_files, "[-f] ID FROM TO", "Rename a sandbox's file or folder.", force_opts, -1,
	  "cove files mkdir $ID /tmp/x\ncove files mv $ID /tmp/x /tmp/y" },
	{ "files chmod", cmd_files, "ID MODE PATH...", "Change modes (octal, like 0755).", NULL, -1,
	  "cove files chmod $ID 0700 /tmp" },
	{ "files watch", cmd_files_watch, "[-r] ID PATH",
	  "Print the changes under a sandbox's folder as they happen, one line each, until interrupted.",
	  recursive_opts, -1, "timeout 1 cove files watch -r $ID /tmp || test $? = 124" },
	{ "checkpoint", cmd_checkpoint, "[--label L] [--memory] ID",
	  "Add a checkpoint to a sandbox's history (a durable snapshot); print its number: 1, 2, 3...", checkpoint_opts,
	  -1, "cove checkpoint --label 'tests pass' $ID" },
	{ "history", cmd_history, "ID", "A sandbox's checkpoints (kept after the sandbox is deleted).", NULL, -1,
	  "cove checkpoint $ID\ncove history $ID" },
	{ "history rm", cmd_history, "ID", "Forget a history, and the snapshots only it needed.", NULL, -1,
	  "cove checkpoint $ID\ncove history rm $ID" },
	{ "rollback", cmd_rollback, "ID K", "A new sandbox from checkpoint K; print its ID. ID is left as it is.", NULL,
	  -1, "cove checkpoint $ID\ncove rollback $ID 1" },
	{ "branch", cmd_branch, "[-n N] ID K", "N new sandboxes from checkpoint K, each its own line of history.",
	  count_opts, -1, "cove checkpoint $ID\ncove branch $ID 1 -n 2" },
	{ "export", cmd_export, "[OPTIONS] ID",
	  "What a sandbox changed over its image (with .cove-manifest.json of the deletions), or a folder, as a tar or "
	  "zip archive.",
	  export_opts, -1, "cove export $ID -o work.zip\ncove export --path /etc $ID > etc.tar" },
	{ "template create", cmd_template_create, "[OPTIONS] NAME",
	  "Make a template: an image (or a snapshot) with limits, env, user, network, a start command and a "
	  "readiness check, and a warm pool of N sandboxes ready ahead of time. create --template NAME starts "
	  "from it, overriding any field.",
	  template_opts, -1,
	  "cove template create --memory 256M -e MODE=test --ready-cmd true tpl\n"
	  "cove rm $(cove create --template tpl -e MODE=prod)\ncove template rm tpl" },
	{ "template ls", cmd_template_ls, "", "List the templates, and their warm pools.", NULL, -1,
	  "cove template create --warm 1 small\ncove template ls\ncove template rm small" },
	{ "template info", cmd_template_info, "NAME", "A template, as the API's JSON.", NULL, -1,
	  "cove template create --cpus 0.5 half\ncove template info half\ncove template rm half" },
	{ "template rm", cmd_template_rm, "NAME...",
	  "Delete templates and their warm pools (the sandboxes made from them stay).", NULL, -1,
	  "cove template create gone\ncove template rm gone" },
	{ "image import", cmd_image_import, "[--name REF] PATH",
	  "Import an OCI image layout or a docker archive (docker save, podman save): a folder, or a tar of one "
	  "(plain or compressed; - for stdin); print the image's ID.",
	  image_import_opts, -1, DEMO_IMAGE "cove image import --name demo:1 demo.tar" },
	{ "image pull", cmd_image_pull, "REF",
	  "Pull an image from its registry (an index resolved to linux/amd64; coved's --registry-auth logs in); a "
	  "bar per layer on a terminal; print the image's ID.",
	  NULL, -1, "cove image pull 127.0.0.1:5999/demo:1 || echo 'no registry listens on 127.0.0.1:5999'" },
	{ "build", cmd_build, "[-f FILE] [-t NAME] [--build-arg K=V]... DIR",
	  "Build an image from a Dockerfile, DIR the build context (sent as a tar; .dockerignore honoured): FROM "
	  "an image, host, a template (or scratch), RUN, COPY, ADD, ENV, ARG, WORKDIR, USER, LABEL, EXPOSE, CMD, ENTRYPOINT. Each step "
	  "is printed as it runs, with RUN's output; steps whose inputs did not change come from the cache. Print "
	  "the image's ID.",
	  build_opts, -1,
	  DEMO_IMAGE "cove image import --name demo:1 demo.tar\n"
		     "mkdir -p ctx && echo hello > ctx/hello.txt\n"
		     "printf 'FROM demo:1\\nCOPY hello.txt /srv/\\nRUN echo built > /srv/built\\nCMD [\"sh\"]\\n' > "
		     "ctx/Dockerfile\n"
		     "cove build -t demo:2 ctx\n"
		     "cove run --image demo:2 -- sh -c 'read l < /srv/hello.txt; echo $l'" },
	{ "image ls", cmd_image_ls, "", "List the images, with who uses them.", NULL, -1, "cove image ls" },
	{ "image inspect", cmd_image_inspect, "REF...", "Images, as the API's JSON (config, layers, users).", NULL, -1,
	  DEMO_IMAGE "cove image import --name demo:1 demo.tar\ncove image inspect demo:1" },
	{ "image rm", cmd_image_rm, "REF...",
	  "Delete images; one that a sandbox, snapshot or template uses is kept (an error).", NULL, -1,
	  DEMO_IMAGE "cove image import --name demo:2 demo.tar\ncove image rm demo:2" },
	{ "image prune", cmd_image_prune, "[--all]", "Delete the images nothing uses; print their IDs.",
	  image_prune_opts, -1, "cove image prune" },
	{ "help", cmd_help, "[--man] [COMMAND]", "A command's usage, or all of them.", help_opts, -1,
	  "cove help exec" },
};
const size_t cli_n_commands = sizeof(cli_commands) / sizeof(cli_commands[0]);

const struct cli_cmd *cli_find_command(const char *name)
{
	for (size_t i = 0; i < cli_n_commands; i++)
		if (strcmp(cli_commands[i].name, name) == 0)
			return &cli_commands[i];
	return NULL;
}

/* "-e, --env K=V" into buf. */
static void option_name(const struct cli_opt *o, char *buf, size_t cap)
{
	char letter[8] = "";
	if (o->letter)
		snprintf(letter, sizeof(letter), "-%c, ", o->letter);
	snprintf(buf, cap, "%s--%s%s%s", letter, o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}

static void print_options(const struct cli_opt *o, FILE *f)
{
	char name[64];
	for (; o && o->key; o++) {
		option_name(o, name, sizeof(name));
		fprintf(f, "  %-24s %s\n", name, o->help);
	}
}

static void print_indented(const char *text, FILE *f)
{
	for (const char *p = text; *p;) {
		size_t n = strcspn(p, "\n");
		fprintf(f, "  %.*s\n", (int)n, p);
		p += n + (p[n] == '\n');
	}
}

/* text in lines of at most 78 columns, broken at spaces. */
static void print_wrapped(const char *text, FILE *f)
{
	const char *p = text;
	while (*p) {
		size_t n = strlen(p);
		if (n > 78) {
			n = 78;
			while (n > 0 && p[n] != ' ')
				n--;
			if (n == 0)
				n = strcspn(p, " ");
		}
		fprintf(f, "%.*s\n", (int)n, p);
		p += n;
		p += *p == ' ';
	}
}

void cli_print_help(const struct cli_cmd *cmd, FILE *f)
{
	fprintf(f, "usage: cove %s %s\n\n", cmd->name, cmd->synopsis);
	print_wrapped(cmd->summary, f);
	if (cmd->opts) {
		fprintf(f, "\noptions:\n");
		print_options(cmd->opts, f);
	}
	fprintf(f, "\nexample:\n");
	print_indented(cmd->example, f);
	fprintf(f, "\nglobal options (anywhere before the command): --socket PATH, --data DIR, --json,\n"
		   "  --host ADDR:PORT, --token-file PATH (cove --help)\n");
}

void cli_print_usage(FILE *f)
{
	fprintf(f, "usage: cove [GLOBAL OPTIONS] COMMAND [OPTIONS] [ARGS]\n\n"
		   "Sandboxes on this machine's coved (started on demand). Options go anywhere before \"--\";\n"
		   "a command run in a sandbox (run, exec, shell, lock) is never parsed.\n\ncommands:\n");
	for (size_t i = 0; i < cli_n_commands; i++) {
		char line[128];
		const char *s = cli_commands[i].summary;
		int n = (int)strcspn(s, ".;(:");
		while (n > 0 && s[n - 1] == ' ')
			n--;
		snprintf(line, sizeof(line), "%s %s", cli_commands[i].name, cli_commands[i].synopsis);
		fprintf(f, "  %-34s %.*s\n", line, n, s);
	}
	fprintf(f, "\nglobal options:\n");
	print_options(cli_global_opts, f);
	fprintf(f, "\n\"cove help COMMAND\" or \"cove COMMAND --help\": a command's options and an example.\n");
}

/* text with roff's special characters escaped: a backslash, and a line
 * that would start with '.' or '\''. */
static void roff(const char *text, FILE *f)
{
	bool line_start = true;
	for (const char *p = text; *p; p++) {
		if (line_start && (*p == '.' || *p == '\''))
			fputs("\\&", f);
		if (*p == '\\')
			fputs("\\e", f);
		else if (*p == '-')
			fputs("\\-", f);
		else
			fputc(*p, f);
		line_start = *p == '\n';
	}
}

static void man_options(const struct cli_opt *o, FILE *f)
{
	char name[64];
	for (; o && o->key; o++) {
		option_name(o, name, sizeof(name));
		fputs(".TP\n.B ", f);
		roff(name, f);
		fputc('\n', f);
		roff(o->help, f);
		fputc('\n', f);
	}
}

void cli_print_man(FILE *f)
{
	fputs(".TH COVE 1 \"\" \"cove\" \"User Commands\"\n.SH NAME\ncove \\- sandboxes for AI agents and code "
	      "execution\n.SH SYNOPSIS\n.B cove\n[GLOBAL OPTIONS] COMMAND [OPTIONS] [ARGS]\n.SH DESCRIPTION\n"
	      "cove is the command line of coved(8), which it starts on demand. Options go anywhere before\n"
	      ".BR \\-\\- ;\na command run in a sandbox (run, exec, shell, lock) is never parsed.\n"
	      ".SH GLOBAL OPTIONS\n",
	      f);
	man_options(cli_global_opts, f);
	fputs(".SH COMMANDS\n", f);
	for (size_t i = 0; i < cli_n_commands; i++) {
		const struct cli_cmd *c = &cli_commands[i];
		fputs(".SS ", f);
		roff(c->name, f);
		fputs("\n.B cove ", f);
		roff(c->name, f);
		fputc(' ', f);
		roff(c->synopsis, f);
		fputs("\n.PP\n", f);
		roff(c->summary, f);
		fputc('\n', f);
		man_options(c->opts, f);
		fputs(".PP\nExample:\n.PP\n.nf\n.RS\n", f);
		roff(c->example, f);
		fputs("\n.RE\n.fi\n", f);
	}
	fputs(".SH ENVIRONMENT\nCOVE_SOCKET, COVE_DATA, COVE_HOST, COVE_TOKEN: as the global options.\n"
	      ".SH SEE ALSO\ncoved(8)\n",
	      f);
}

void cli_print_files_usage(FILE *f)
{
	for (size_t i = 0; i < cli_n_commands; i++)
		if (strncmp(cli_commands[i].name, "files ", 6) == 0)
			fprintf(f, "usage: cove %s %s\n", cli_commands[i].name, cli_commands[i].synopsis);
	fprintf(f, "(cove help files COMMAND: a command's options and an example)\n");
}

int cmd_help(struct cli *cli, int argc, char **argv)
{
	const char *v;
	int c;
	while ((c = cli_next_opt(cli, &v)) != -1)
		if (c == 'M') {
			cli_print_man(stdout);
			return 0;
		}
	if (argc == 1) {
		cli_print_usage(stdout);
		return 0;
	}
	char name[64];
	snprintf(name, sizeof(name), "%s%s%s", argv[1], argc > 2 ? " " : "", argc > 2 ? argv[2] : "");
	const struct cli_cmd *cmd = argc <= 3 ? cli_find_command(name) : NULL;
	if (!cmd && argc == 2 && strcmp(argv[1], "files") == 0) {
		cli_print_files_usage(stdout);
		return 0;
	}
	if (!cmd) {
		fprintf(stderr, "cove help: unknown command '%s' (see cove --help)\n", name);
		return 2;
	}
	cli_print_help(cmd, stdout);
	return 0;
}

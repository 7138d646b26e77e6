#!/usr/bin/env bash
# cove's benchmark (`make bench`): coved's API through libcove, snapshots
# (cove's API next to a raw btrfs snapshot and cp -a), and the CLI side by
# side with crun and bubblewrap, on this machine, in one run.
#
#   make bench                        # builds, then runs this
#   RUNS=50 EXEC_RUNS=100 bench/run.sh  # fewer hyperfine runs
#   SNAP_N=5 CP_RUNS=1 bench/run.sh     # a quicker snapshot part
#
# Everything it creates lives under $COVE_BENCH_DIR (default
# /var/tmp/cove-bench): a private coved (data root, socket, log), a busybox
# rootfs and OCI bundles for crun, the compiled apibench and the results of
# the last run (criubench's images under criu/). On exit, whatever happens, it deletes its sandboxes,
# snapshots, raw subvolumes, cp -a trees and crun containers, stops its
# coved, unmounts the pool and gives the hugetlb cgroup controller back to
# cgroup2. Needs root, hyperfine, crun, bwrap, busybox-static, btrfs-progs, wrk
# and python3 (scripts/deps.sh); node and npm for the TypeScript SDK's and
# E2B's SDK's parts (tests/e2b: npm ci).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${COVE_BENCH_DIR:-/var/tmp/cove-bench}
COLD_N=${COLD_N:-200}       # (a) API cold create -> exec -> delete, back to back
COLD_NET_N=${COLD_NET_N:-100} # (a-net) the same with network egress and none, alternated
PACED_N=${PACED_N:-50}      # (a') the same, each after a 100 ms pause
EXEC_N=${EXEC_N:-1000}      # (b) API exec true
IDLE_N=${IDLE_N:-200}       # (c) idle sandboxes for memory
FILE_MIB=${FILE_MIB:-1024}  # (d) a file read through the API
PUT_MIB=${PUT_MIB:-1024}    # (e) a file written through the API (streamed to the file, memory bounded)
SESSION_N=${SESSION_N:-1000} # (f) `true` in a session
LOAD_CLIENTS=${LOAD_CLIENTS:-50} LOAD_REQUESTS=${LOAD_REQUESTS:-200} LOAD_SANDBOXES=${LOAD_SANDBOXES:-20} # (g)
E2B_N=${E2B_N:-50}          # E2B's SDK: create + run true + kill rounds (each of three flows)
SNAP_N=${SNAP_N:-20}        # snapshot / restore / fork runs per sandbox size
IMAGE_N=${IMAGE_N:-30}      # creates from host and from images, each
IMAGE_RUNS=${IMAGE_RUNS:-5} # pulls (and skopeo copy + tar -x), each
CP_RUNS=${CP_RUNS:-2}       # cp -a of the large tree (slow)
CRIU_N=${CRIU_N:-10}        # memory dump + restore runs, each through sys/criu.c and the criu CLI
CRIU_MIB=${CRIU_MIB:-100}   # touched memory of the dumped tree
RUNS=${RUNS:-100}           # hyperfine runs, run group
EXEC_RUNS=${EXEC_RUNS:-200} # hyperfine runs, exec group
WARMUP=5
BOUND=${BOUND:-150}         # wall-clock cap per hyperfine call (s)

SOCK=$B/cove.sock
DATA=$B/data
ROOTFS=$B/rootfs
RES=$B/results
SNAPTREE=$B/snaptree        # the plain-directory copies of the large tree (cp -a)
RAWSV=$DATA/pool/cove-bench-raw # the raw btrfs subvolume and its snapshots
COVE=$ROOT/build/cove
COVED=$ROOT/build/coved
CTR_TRUE=cove-bench-true
CTR_EXEC=cove-bench-exec
# Any cove CLI call that finds no daemon starts one itself: make it ours.
export COVE_SOCKET=$SOCK COVE_DATA=$DATA

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FATAL: $*"; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }

[ "$(id -u)" = 0 ] || die "run as root (coved and crun need it)"
for t in hyperfine crun bwrap python3 cc btrfs; do have "$t" || die "'$t' missing (sh scripts/deps.sh)"; done
BUSYBOX=/bin/busybox # from busybox-static: the rootfs has no libc
[ -x "$BUSYBOX" ] || die "busybox-static missing (sh scripts/deps.sh)"
for f in "$COVE" "$COVED" "$ROOT/build/cove-init" "$ROOT/build/libcove.a"; do
	[ -e "$f" ] || die "$f missing: run make first (make bench does)"
done
mkdir -p "$B" "$RES"
rm -f "$RES"/*
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

# --- crun vs. this machine's hybrid cgroups ---------------------------------
# The host mounts cgroup v1 controllers plus a cgroup2 hierarchy at
# /sys/fs/cgroup/unified that still owns hugetlb (no v1 hierarchy mounts it).
# crun refuses that layout ("cgroups in hybrid mode not supported"). For the
# duration of the crun measurements we mount each controller left on cgroup2
# as its own v1 hierarchy, which empties unified/cgroup.controllers, and
# undo it right after, and again in the exit trap (recorded in $CG_STATE).
CG_STATE=$B/cgroup-v1-mounted
cgroup_hybrid_fix() {
	local u=/sys/fs/cgroup/unified c
	[ -r $u/cgroup.controllers ] || return 0
	# shellcheck disable=SC2013 # a space-separated list
	for c in $(cat $u/cgroup.controllers); do
		mkdir -p "/sys/fs/cgroup/$c" &&
			echo "$c" >>"$CG_STATE" &&
			mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c" &&
			log "mounted a v1 cgroup hierarchy for '$c' (for crun, undone at the end)"
	done
	[ -z "$(cat $u/cgroup.controllers)" ] || log "WARN: cgroup2 still has controllers: $(cat $u/cgroup.controllers)"
}
cgroup_hybrid_undo() {
	local c
	[ -f "$CG_STATE" ] || return 0
	# shellcheck disable=SC2013 # one controller name per line
	for c in $(sort -u "$CG_STATE"); do
		# The kernel frees a v1 hierarchy (and gives its controller back to
		# cgroup2) only if it has no child cgroups, even dying ones, when
		# it is unmounted; otherwise it lingers unmounted. So: remove the
		# children crun left, unmount, and if the controller did not come
		# back, mount the lingering hierarchy again and repeat.
		for _ in 1 2 3 4 5; do
			if ! mountpoint -q "/sys/fs/cgroup/$c"; then
				grep -qw "$c" /sys/fs/cgroup/unified/cgroup.controllers && break
				mkdir -p "/sys/fs/cgroup/$c"
				mount -t cgroup -o "$c" cgroup "/sys/fs/cgroup/$c" || break
			fi
			find "/sys/fs/cgroup/$c" -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null
			sleep 0.5 # let removed cgroups finish dying
			umount "/sys/fs/cgroup/$c" || continue
			rmdir "/sys/fs/cgroup/$c" 2>/dev/null
			sleep 0.2
			grep -qw "$c" /sys/fs/cgroup/unified/cgroup.controllers && break
		done
		if grep -qw "$c" /sys/fs/cgroup/unified/cgroup.controllers; then
			log "gave '$c' back to cgroup2 (its controllers now: [$(cat /sys/fs/cgroup/unified/cgroup.controllers)])"
		else
			log "WARN: '$c' did not return to cgroup2; see its line in /proc/cgroups and retry: mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c && umount /sys/fs/cgroup/$c"
		fi
	done
	rm -f "$CG_STATE"
}

# --- cleanup, always -----------------------------------------------------------
COVED_PID=
EXEC_ID=
CRUN_EXEC_STARTED=
# pids of every coved serving our socket (ours, or one a CLI call started)
our_coveds() {
	local p
	for p in /proc/[0-9]*; do
		tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -q -- "--socket $SOCK\( \|$\)" && echo "${p#/proc/}"
	done
	return 0
}
cleanup() {
	local rc=$? id p
	trap - EXIT INT TERM
	set +e
	if [ -n "$CRUN_EXEC_STARTED" ]; then
		crun kill "$CTR_EXEC" KILL >/dev/null 2>&1
		crun delete -f "$CTR_EXEC" >/dev/null 2>&1
	fi
	crun delete -f "$CTR_TRUE" >/dev/null 2>&1
	if [ -n "$COVED_PID" ] && kill -0 "$COVED_PID" 2>/dev/null; then
		# every sandbox of this private coved goes: apibench's, if it was
		# interrupted, the exec one, any a hyperfine run left
		for id in $(timeout 20 "$COVE" --socket "$SOCK" ls 2>/dev/null | awk 'NR > 1 { print $1 }'); do
			timeout 20 "$COVE" --socket "$SOCK" rm "$id" >/dev/null 2>&1
		done
		# the histories of checkpoints (their snapshots are kept while a
		# history needs them), by the sandboxes the snapshots were taken of
		for id in $(timeout 20 "$COVE" --socket "$SOCK" snapshots 2>/dev/null | awk 'NR > 1 { print $2 }' | sort -u); do
			timeout 20 "$COVE" --socket "$SOCK" history rm "$id" >/dev/null 2>&1
		done
		# and every snapshot (snapbench's, if it was interrupted)
		for id in $(timeout 20 "$COVE" --socket "$SOCK" snapshots 2>/dev/null | awk 'NR > 1 { print $1 }'); do
			timeout 20 "$COVE" --socket "$SOCK" snapshot rm "$id" >/dev/null 2>&1
		done
	fi
	# snapbench's raw subvolumes on the pool and its cp -a trees
	mountpoint -q "$DATA/pool" && python3 "$ROOT/bench/snapbench.py" --cleanup-raw "$RAWSV"
	rm -rf "$SNAPTREE"
	for p in $COVED_PID $(our_coveds); do
		kill -TERM "$p" 2>/dev/null || continue
		for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$p" 2>/dev/null
	done
	mountpoint -q "$DATA/pool" && umount -l "$DATA/pool"
	# diskbench's two coveds, if it was interrupted (it tears them down itself)
	for d in "$B/disk/on" "$B/disk/off"; do
		for p in /proc/[0-9]*; do
			tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -q -- "--socket $d/cove.sock\( \|$\)" &&
				kill -KILL "${p#/proc/}" 2>/dev/null
		done
		mountpoint -q "$d/data/pool" && umount -l "$d/data/pool"
	done
	rm -rf "$B/disk"
	cgroup_hybrid_undo
	[ $rc = 0 ] || log "failed (exit $rc); cleaned up"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# --- 0. busybox rootfs and OCI bundles for crun and bwrap -------------------------
if [ ! -x "$ROOTFS/bin/busybox" ] || ! cmp -s "$BUSYBOX" "$ROOTFS/bin/busybox"; then
	log "building a busybox rootfs in $ROOTFS"
	rm -rf "$ROOTFS"
	mkdir -p "$ROOTFS"/{bin,proc,sys,dev,tmp,etc,root}
	cp "$BUSYBOX" "$ROOTFS/bin/busybox"
	for a in $("$ROOTFS/bin/busybox" --list); do
		[ -e "$ROOTFS/bin/$a" ] || ln -s busybox "$ROOTFS/bin/$a"
	done
	echo 'root:x:0:0:root:/root:/bin/sh' >"$ROOTFS/etc/passwd"
	echo 'root:x:0:' >"$ROOTFS/etc/group"
fi
mkbundle() { # name json-args
	local b=$B/bundle-$1
	mkdir -p "$b"
	(cd "$b" && rm -f config.json && crun spec)
	python3 - "$b/config.json" "$ROOTFS" "$2" <<-'EOF'
		import json, sys
		path, root, args = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
		with open(path) as f:
		    c = json.load(f)
		c["process"]["terminal"] = False
		c["process"]["args"] = args
		c["root"] = {"path": root, "readonly": True}
		with open(path, "w") as f:
		    json.dump(c, f, indent=1)
	EOF
}
mkbundle true '["/bin/true"]'
mkbundle sleep '["/bin/sleep", "1000000"]'

# --- 1. a private coved ---------------------------------------------------------
for p in $(our_coveds); do
	log "stopping a coved left on $SOCK by an earlier run (pid $p)"
	kill -TERM "$p" 2>/dev/null || true
	sleep 1
done
# A fresh data root each run: a reused pool carries the earlier runs'
# deleted subvolumes, which btrfs's cleaner is still freeing (and their
# writeback) while this run measures.
if mountpoint -q "$DATA/pool"; then umount "$DATA/pool" || die "cannot unmount $DATA/pool"; fi
rm -rf "$DATA"
log "starting coved (data $DATA, socket $SOCK)"
: >"$B/coved.log"
# a loopback TCP listener too, for E2B's SDK (bench/e2bbench.mjs)
E2B_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
setsid "$COVED" --data "$DATA" --socket "$SOCK" --listen "127.0.0.1:$E2B_PORT" </dev/null >>"$B/coved.log" 2>&1 &
COVED_PID=$!
for _ in $(seq 600); do # the first start formats the pool and builds the host image
	grep -q 'coved: serving' "$B/coved.log" && break
	kill -0 "$COVED_PID" 2>/dev/null || die "coved exited: $(tail -5 "$B/coved.log")"
	sleep 0.1
done
grep -q 'coved: serving' "$B/coved.log" || die "coved did not start: $(tail -5 "$B/coved.log")"
for id in $("$COVE" ls | awk 'NR > 1 { print $1 }'); do
	log "deleting sandbox $id left by an earlier run"
	"$COVE" rm "$id" >/dev/null
done

# --- 2. the API, through libcove ------------------------------------------------
log "building apibench"
cc -O2 -std=gnu17 -D_GNU_SOURCE -Wall -Wextra -I"$ROOT/include" -I"$ROOT/src" "$ROOT/bench/apibench.c" \
	"$ROOT/build/libcove.a" -ljansson -o "$B/apibench"
log "apibench: cold $COLD_N, paced $PACED_N, exec $EXEC_N, idle $IDLE_N"
"$B/apibench" --socket "$SOCK" --coved-pid "$COVED_PID" --cold "$COLD_N" --cold-net "$COLD_NET_N" --paced "$PACED_N" --exec "$EXEC_N" \
	--idle "$IDLE_N" --out "$RES/api.txt" | tee "$RES/api-report.txt" >&2

# --- 2a. the SDKs next to what they wrap: Python's next to libcove, TypeScript's next to node's http
if have node && have npm; then
	[ -d "$ROOT/sdk/js/node_modules" ] || (cd "$ROOT/sdk/js" && npm ci --no-audit --no-fund >/dev/null)
	(cd "$ROOT/sdk/js" && npm run --silent build)
	log "sdkbench: exec true through the SDKs next to libcove and node's http, call by call"
	python3 "$ROOT/bench/sdkbench.py" --socket "$SOCK" --build-dir "$B" --out "$RES/sdk.txt" |
		tee "$RES/sdk-report.txt" >&2
	[ -d "$ROOT/tests/e2b/node_modules/e2b" ] || (cd "$ROOT/tests/e2b" && npm ci --no-audit --no-fund >/dev/null)
	log "e2bbench: create + run true + kill through E2B's SDK next to cove's API, $E2B_N rounds"
	node "$ROOT/bench/e2bbench.mjs" "$E2B_N" --url "http://127.0.0.1:$E2B_PORT" --token-file "$DATA/token" \
		--out "$RES/e2b.txt" | tee "$RES/e2b-report.txt" >&2
else
	log "sdkbench and e2bbench skipped: no node/npm"
fi

log "building iobench"
cc -O2 -std=gnu17 -D_GNU_SOURCE -Wall -Wextra -I"$ROOT/include" -I"$ROOT/src" "$ROOT/bench/iobench.c" \
	"$ROOT/build/libcove.a" -ljansson -lpthread -o "$B/iobench"
log "iobench: read $FILE_MIB MiB, write $PUT_MIB MiB, session $SESSION_N, load $LOAD_CLIENTS x $LOAD_REQUESTS"
"$B/iobench" --socket "$SOCK" --pool "$DATA/pool" --file-mib "$FILE_MIB" --put-mib "$PUT_MIB" \
	--session "$SESSION_N" --clients "$LOAD_CLIENTS" --requests "$LOAD_REQUESTS" --sandboxes "$LOAD_SANDBOXES" \
	--out "$RES/io.txt" | tee "$RES/io-report.txt" >&2

# --- 2a. cove cp next to curl over the same socket, in and out -------------------------
log "cpbench: $PUT_MIB MiB, 3 runs each"
python3 "$ROOT/bench/cpbench.py" --socket "$SOCK" --cove "$ROOT/build/cove" --mib "$PUT_MIB" --runs 3 \
	--scratch "$B" --out "$RES/cp.txt" >&2

# --- 2b. snapshots: cove's API next to a raw btrfs snapshot and cp -a ---------------
log "snapbench: $SNAP_N runs each, cp -a $CP_RUNS times"
python3 "$ROOT/bench/snapbench.py" --socket "$SOCK" --pool "$DATA/pool" --scratch "$SNAPTREE" \
	--runs "$SNAP_N" --cp-runs "$CP_RUNS" --out "$RES/snap.txt"

# --- 2b'. disk limits: snapshot, restore, fork with quotas on and off ---------------
log "diskbench: $SNAP_N runs each, limits on and off alternating"
COVE_BUILD="$ROOT/build" python3 "$ROOT/bench/diskbench.py" --dir "$B/disk" --runs "$SNAP_N" --out "$RES/disk.txt"

# --- 2b''. ports: through coved's port proxy next to the same server direct, wrk ---------
if have wrk; then
	log "building tinyhttpd and tcprelay; portbench: wrk and a WebSocket echo, direct, through the proxy, nginx and the relay"
	cc -O2 -std=gnu17 -D_GNU_SOURCE -Wall -Wextra "$ROOT/bench/tinyhttpd.c" -o "$B/tinyhttpd"
	cc -O2 -std=gnu17 -D_GNU_SOURCE -Wall -Wextra "$ROOT/bench/tcprelay.c" -o "$B/tcprelay"
	for pin in none split same; do
		python3 "$ROOT/bench/portbench.py" --socket "$SOCK" --tinyhttpd "$B/tinyhttpd" --relay "$B/tcprelay" \
			--pin "$pin" --workdir "$B/portbench" --out "$RES/ports-$pin.txt" | tee "$RES/ports-$pin-report.txt" >&2
	done
else
	log "portbench skipped: no wrk (sh scripts/deps.sh)"
fi

# --- 2b'. images: create from an image next to host, 1 vs 20 layers; a pull next to
# skopeo copy + tar -x of the same layers, from docker-registry on loopback ------------
if have skopeo && have docker-registry; then
	log "imagebench: $IMAGE_N creates each, $IMAGE_RUNS pulls each"
	python3 "$ROOT/bench/imagebench.py" --socket "$SOCK" --n "$IMAGE_N" --runs "$IMAGE_RUNS" \
		--scratch "$B/imagebench" --out "$RES/image.txt" >&2
else
	log "imagebench skipped: skopeo or docker-registry missing (sh scripts/deps.sh)"
fi

# --- 2b''. the lifecycle: wake, pause, archive, density (a private coved of its own, and
# for density an empty peer beside it). 1,000 paused by default: past the 1,024 fds that
# libnftables' select() once died on, in 2-4 minutes; the issue's 5,000 take ~15 minutes
# (LIFE_DENSITY=5000) ----
LIFE_RUNS=${LIFE_RUNS:-100} LIFE_DENSITY=${LIFE_DENSITY:-1000}
log "lifebench: $LIFE_RUNS runs, $LIFE_DENSITY paused sandboxes"
COVE_BUILD="$ROOT/build" python3 "$ROOT/bench/lifebench.py" --runs "$LIFE_RUNS" --density "$LIFE_DENSITY" \
	--out "$RES/life.txt" | tee "$RES/life-report.txt" >&2

# --- 2c. memory snapshots: sys/criu.c next to the plain criu CLI ----------------------
# Static: the binary is also the dumped tree's pid 1, bound into its root.
log "building criubench"
cc -static -O2 -std=gnu17 -D_GNU_SOURCE -Wall -Wextra -Wno-format-truncation -I"$ROOT/include" -I"$ROOT/src" \
	-I"$ROOT/build/gen" "$ROOT/bench/criubench.c" "$ROOT/src/sys/criu.c" "$ROOT/src/common/error.c" \
	"$ROOT/build/gen/criu_rpc.pb-c.c" -lprotobuf-c -lzstd -o "$B/criubench"
log "criubench: $CRIU_N runs, $CRIU_MIB MiB"
"$B/criubench" --dir "$B/criu" --runs "$CRIU_N" --mib "$CRIU_MIB" --out "$RES/criu.txt" |
	tee "$RES/criu-report.txt" >&2

# --- 2d. memory snapshots through coved's API, next to criu dump of the same tree -------
CRIU_BIN=${COVE_CRIU:-/usr/local/lib/cove/criu}
log "memsnapbench: $CRIU_N runs, $CRIU_MIB MiB"
python3 "$ROOT/bench/memsnapbench.py" --socket "$SOCK" --pool "$DATA/pool" --criu "$CRIU_BIN" \
	--runs "$CRIU_N" --mib "$CRIU_MIB" --out "$RES/memsnap.txt"

# --- 2e. archive and wake with memory, next to criu dump of the same tree ------------------
log "memarchivebench: 5 runs, $CRIU_MIB MiB"
python3 "$ROOT/bench/memarchivebench.py" --socket "$SOCK" --pool "$DATA/pool" --criu "$CRIU_BIN" \
	--runs 5 --mib "$CRIU_MIB" --out "$RES/memarchive.txt"

# --- 3. CLI against crun and bwrap, with hyperfine -----------------------------------
# what the runs above deleted, cleaned by btrfs and written out first
btrfs subvolume sync "$DATA/pool" >/dev/null
sync
cd /tmp
# smoke SHELL-FREE-COMMAND: run once outside hyperfine so a failure is shown, not timed
smoke() {
	local out
	out=$(timeout --foreground 30 "$@" </dev/null 2>&1) || die "'$*' fails: $out"
}
hf() { # NAME-OF-GROUP RUNS then pairs: LABEL COMMAND ...
	local group=$1 runs=$2 args=()
	shift 2
	while [ $# -gt 0 ]; do args+=(-n "$1" "$2"); shift 2; done
	log "hyperfine $group: $runs runs each"
	# -i: a run that fails is recorded (exit_codes in the JSON) and counted
	# in the summary, which then fails make bench, rather than ending it
	timeout --foreground "$BOUND" hyperfine -N -i --style basic --warmup "$WARMUP" --runs "$runs" \
		--export-json "$RES/$group.json" "${args[@]}" >"$RES/$group.txt" 2>&1 ||
		die "hyperfine $group failed or timed out: $(tail -5 "$RES/$group.txt")"
}

CRUN_TRUE_CMD="crun run --bundle $B/bundle-true $CTR_TRUE"
BWRAP_CMD="bwrap --unshare-all --ro-bind $ROOTFS / --proc /proc --dev /dev /bin/true"
# the kernel's share of any sandbox: the seven namespaces a sandbox gets, made and torn down
# around one /bin/true, with nothing mounted, no cgroup and no storage
UNSHARE_CMD="unshare --user --map-root-user --mount --pid --fork --ipc --uts --net --cgroup /bin/true"
COVE_RUN_CMD="$COVE --socket $SOCK run -- true"

EXEC_ID=$("$COVE" --socket "$SOCK" create)
COVE_EXEC_CMD="$COVE --socket $SOCK exec $EXEC_ID -- true"
CRUN_EXEC_CMD="crun exec $CTR_EXEC /bin/true"

crun delete -f "$CTR_TRUE" >/dev/null 2>&1 || true
crun delete -f "$CTR_EXEC" >/dev/null 2>&1 || true
cgroup_hybrid_fix
# the commands are split on spaces, as hyperfine -N splits them
# shellcheck disable=SC2086
{
	smoke $COVE_RUN_CMD
	smoke $BWRAP_CMD
	smoke $UNSHARE_CMD
	smoke $CRUN_TRUE_CMD
	crun run -d --bundle "$B/bundle-sleep" "$CTR_EXEC" </dev/null >/dev/null 2>&1 || die "crun run -d $CTR_EXEC failed"
	CRUN_EXEC_STARTED=1
	smoke $COVE_EXEC_CMD
	smoke $CRUN_EXEC_CMD
}

hf run "$RUNS" "cove run -- true" "$COVE_RUN_CMD" "crun run (busybox)" "$CRUN_TRUE_CMD" \
	"bwrap --unshare-all (busybox)" "$BWRAP_CMD" "unshare 7 namespaces + /bin/true" "$UNSHARE_CMD" \
	"fork+exec /bin/true" "/bin/true"
hf exec "$EXEC_RUNS" "cove exec ID -- true" "$COVE_EXEC_CMD" "crun exec CTR /bin/true" "$CRUN_EXEC_CMD"

crun kill "$CTR_EXEC" KILL >/dev/null 2>&1 || true
crun delete -f "$CTR_EXEC" >/dev/null 2>&1 || true
CRUN_EXEC_STARTED=
cgroup_hybrid_undo || true
"$COVE" --socket "$SOCK" rm "$EXEC_ID" >/dev/null
EXEC_ID=

# --- 3b. warm pools: a create from one over the API, and cove run from one next to bwrap,
# on a coved of their own (--warm N) ----------------------------------------------------
RES="$RES" COVE_BENCH_DIR="$B" "$ROOT/bench/warm.sh"

# --- 4. summary -----------------------------------------------------------------------
{
	echo "kernel $(uname -r), $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)," \
		"$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM"
	echo "load average at the start $LOAD_START, at the end $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "$(hyperfine --version), $(crun --version | head -1), $(bwrap --version)"
} >"$RES/machine.txt"
python3 "$ROOT/bench/summary.py" "$RES" | tee "$RES/summary.md" ||
	die "some runs failed (see 'Failed runs' above); results in $RES"

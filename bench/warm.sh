#!/usr/bin/env bash
# Warm pools (issue 11), in one run on a private coved started with
# --warm N: a create from the pool over the API next to a cold create of
# the same spec (bench/warmbench.py), and `cove run -- true` from the pool
# next to `bwrap --unshare-all` of /bin/true (hyperfine -N). Before each
# timed run the pool is let fill again (warmbench.py --wait, a hyperfine
# --prepare, untimed): what is measured is a hand-out, not a refill.
#
#   bench/warm.sh                       # alone, or from bench/run.sh
#   WARM=4 WARM_RUNS=50 WARM_HF_RUNS=50 bench/warm.sh
#
# Its coved lives in $COVE_BENCH_DIR/warm (default /var/tmp/cove-bench/warm)
# and is stopped, its pool unmounted, on exit whatever happens. Results go
# to $RES (default $COVE_BENCH_DIR/results): warm.txt, warm.json, warm-report.txt.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${COVE_BENCH_DIR:-/var/tmp/cove-bench}
RES=${RES:-$B/results}
WARM=${WARM:-4}
WARM_RUNS=${WARM_RUNS:-50}
WARM_HF_RUNS=${WARM_HF_RUNS:-50}
W=$B/warm
SOCK=$W/cove.sock
DATA=$W/data
ROOTFS=$B/rootfs
COVE=$ROOT/build/cove
COVED=$ROOT/build/coved

log() { printf '[bench-warm %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FATAL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root"
for t in hyperfine bwrap python3; do command -v "$t" >/dev/null || die "'$t' missing (sh scripts/deps.sh)"; done
mkdir -p "$W" "$RES"

if [ ! -x "$ROOTFS/bin/busybox" ]; then # bench/run.sh's rootfs, when run alone
	mkdir -p "$ROOTFS"/{bin,proc,sys,dev,tmp,etc,root}
	cp /bin/busybox "$ROOTFS/bin/busybox"
	for a in $("$ROOTFS/bin/busybox" --list); do [ -e "$ROOTFS/bin/$a" ] || ln -s busybox "$ROOTFS/bin/$a"; done
fi

COVED_PID=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	set +e
	if [ -n "$COVED_PID" ]; then
		kill -TERM "$COVED_PID" 2>/dev/null # its pool's sandboxes go with it
		for _ in $(seq 100); do kill -0 "$COVED_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$COVED_PID" 2>/dev/null
	fi
	mountpoint -q "$DATA/pool" && umount -l "$DATA/pool"
	rm -rf "$DATA"
	[ $rc = 0 ] || log "failed (exit $rc); cleaned up"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if mountpoint -q "$DATA/pool"; then umount "$DATA/pool" || die "cannot unmount $DATA/pool"; fi
rm -rf "$DATA"
log "starting coved --warm $WARM (data $DATA)"
: >"$W/coved.log"
setsid "$COVED" --data "$DATA" --socket "$SOCK" --warm "$WARM" </dev/null >>"$W/coved.log" 2>&1 &
COVED_PID=$!
for _ in $(seq 600); do
	grep -q 'coved: serving' "$W/coved.log" && break
	kill -0 "$COVED_PID" 2>/dev/null || die "coved exited: $(tail -5 "$W/coved.log")"
	sleep 0.1
done
grep -q 'coved: serving' "$W/coved.log" || die "coved did not start: $(tail -5 "$W/coved.log")"

log "warmbench: $WARM_RUNS creates from the pool, as many cold"
python3 "$ROOT/bench/warmbench.py" --socket "$SOCK" --data "$DATA" --runs "$WARM_RUNS" --out "$RES/warm.txt" |
	tee "$RES/warm-report.txt" >&2

WAIT_CMD="python3 $ROOT/bench/warmbench.py --socket $SOCK --data $DATA --wait"
RUN_CMD="$COVE --socket $SOCK run -- true"
BWRAP_CMD="bwrap --unshare-all --ro-bind $ROOTFS / --proc /proc --dev /dev /bin/true"
# shellcheck disable=SC2086 # split on spaces, as hyperfine -N does
{
	$WAIT_CMD && $RUN_CMD >/dev/null || die "'$RUN_CMD' fails"
	$BWRAP_CMD || die "'$BWRAP_CMD' fails"
}
log "hyperfine warm: $WARM_HF_RUNS runs each"
timeout --foreground 300 hyperfine -N -i --style basic --warmup 3 --runs "$WARM_HF_RUNS" --prepare "$WAIT_CMD" \
	--export-json "$RES/warm.json" -n "cove run -- true (warm pool)" "$RUN_CMD" \
	-n "bwrap --unshare-all (busybox)" "$BWRAP_CMD" >"$RES/warm-hf.txt" 2>&1 ||
	die "hyperfine warm failed: $(tail -5 "$RES/warm-hf.txt")"
cat "$RES/warm-hf.txt" >&2

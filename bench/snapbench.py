#!/usr/bin/env python3
"""cove's snapshot benchmark (part of `make bench`, run by bench/run.sh).

Against a running coved (HTTP over its unix socket, one kept-alive
connection), for a sandbox holding 10 files and one holding 10,000 files plus
a 1 GiB file of its own changes: p50/p95 of snapshot, restore, fork into 1,
fork into 10 (the whole request), and a checkpoint (POST .../checkpoints: a
snapshot added to the sandbox's history) right after a one-file change; the
large tree's export (GET .../export) as tar and as zip, in MB/s. Next to them, on the same btrfs pool: a raw btrfs
subvolume snapshot (the ioctl, and the `btrfs` CLI) of a subvolume holding the
same large tree, and `cp -a` of the same tree as a plain directory on the
disk under the pool (ext4).

Only the request itself is timed: deleting the snapshots and sandboxes each
run makes happens after it, untimed. Everything it makes is deleted when it
ends (and bench/run.sh's trap deletes what an interrupted run left).

Usage: snapbench.py --socket S --pool DIR --scratch DIR --out FILE [--runs N]
Writes "key value" lines (milliseconds) to FILE and a report to stderr."""
import argparse
import ctypes
import fcntl
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time

# The tree: 100 directories of 100 small files, plus (large) one 1 GiB file
# of random bytes. The same script makes it in a sandbox and on the host.
TREE_SH = r"""set -e
D=$1; BIG=$2
mkdir -p "$D"
i=0
while [ $i -lt 100 ]; do
	mkdir "$D/d$i"
	j=0
	while [ $j -lt 100 ]; do
		printf 'file %s/%s of the snapshot bench\n' $i $j >"$D/d$i/f$j"
		j=$((j + 1))
	done
	i=$((i + 1))
done
[ "$BIG" = 0 ] || head -c "$BIG" /dev/urandom >"$D/big"
"""
SMALL_SH = r"""set -e
mkdir -p "$1"
for i in 0 1 2 3 4 5 6 7 8 9; do printf 'file %s\n' $i >"$1/f$i"; done
"""
BIG = 1 << 30

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from covetest import UnixHTTPConnection  # noqa: E402  (the tests' HTTP-over-unix-socket connection)


class Api:
    def __init__(self, path):
        self.c = UnixHTTPConnection(path, timeout=600)

    def call(self, method, route, body=None, ok=(200, 201, 204)):
        data = json.dumps(body).encode() if body is not None else None
        hdr = {"Content-Type": "application/json"} if data is not None else {}
        self.c.request(method, route, body=data, headers=hdr)
        r = self.c.getresponse()
        text = r.read()
        if r.status not in ok:
            raise RuntimeError(f"{method} {route}: {r.status} {text[:300]!r}")
        return json.loads(text) if text else None

    def timed(self, method, route, body=None):
        t = time.perf_counter()
        j = self.call(method, route, body)
        return (time.perf_counter() - t) * 1000, j

    def exec(self, sid, cmd, timeout=300):
        j = self.call("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": cmd, "timeout": timeout})
        if j.get("exit_code", j.get("exit")) not in (0, None) or j.get("signal"):
            raise RuntimeError(f"exec {cmd[:3]} in {sid}: {json.dumps(j)[:400]}")
        return j


def export_throughput(sock, sid, fmt):
    """GET .../export of the large tree, read as fast as it comes: MB/s of
    the archive (1 MB = 10^6 bytes), on a connection of its own."""
    c = UnixHTTPConnection(sock, timeout=600)
    t = time.perf_counter()
    c.request("GET", f"/v1/sandboxes/{sid}/export?format={fmt}&path=/srv/bench")
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"export {fmt}: {r.status} {r.read()[:300]!r}")
    n = 0
    while True:
        b = r.read(1 << 20)
        if not b:
            break
        n += len(b)
    s = time.perf_counter() - t
    c.close()
    out_lines.append(f"export.{fmt}.bytes {n}")
    out_lines.append(f"export.{fmt}.mb_s {n / s / 1e6:.1f}")
    log(f"  export as {fmt:4s} {n / 1e6:10.1f} MB in {s:6.2f} s: {n / s / 1e6:8.1f} MB/s")


def pct(xs, p):
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


out_lines = []


def record(key, xs):
    out_lines.append(f"{key}.runs {len(xs)}")
    out_lines.append(f"{key}.p50 {pct(xs, 50):.3f}")
    out_lines.append(f"{key}.p95 {pct(xs, 95):.3f}")
    out_lines.append(f"{key}.min {min(xs):.3f}")
    out_lines.append(f"{key}.max {max(xs):.3f}")
    log(f"  {key:28s} p50 {pct(xs, 50):8.2f} ms  p95 {pct(xs, 95):8.2f} ms  "
        f"min {min(xs):8.2f}  max {max(xs):8.2f}  ({len(xs)} runs)")


_libc = ctypes.CDLL(None, use_errno=True)


def syncfs(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.syncfs(fd) < 0:
            raise OSError(ctypes.get_errno(), "syncfs " + path)
    finally:
        os.close(fd)


def log(msg):
    print(f"[snapbench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


IOC_SYNC = 0x9408  # BTRFS_IOC_SYNC, _IO(0x94, 8)

# --- raw btrfs: BTRFS_IOC_SNAP_CREATE_V2, _IOW(0x94, 23, struct btrfs_ioctl_vol_args_v2) (4096 bytes)
IOC_SNAP_CREATE_V2 = (1 << 30) | (4096 << 16) | (0x94 << 8) | 23


def raw_snapshot(src, dstdir, name, readonly=True):
    sfd = os.open(src, os.O_RDONLY | os.O_DIRECTORY)
    dfd = os.open(dstdir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        flags = 1 << 1 if readonly else 0  # BTRFS_SUBVOL_RDONLY
        args = bytearray(struct.pack("=qQQ32s4040s", sfd, 0, flags, b"", name.encode()))
        fcntl.ioctl(dfd, IOC_SNAP_CREATE_V2, args, True)  # a buffer: a bytes argument is capped at 1 kB
    finally:
        os.close(sfd)
        os.close(dfd)


def subvol_delete(path):
    subprocess.run(["btrfs", "-q", "subvolume", "delete", path], check=True, stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--pool", required=True, help="coved's btrfs pool (its mount point)")
    ap.add_argument("--scratch", required=True, help="a plain directory for the cp -a trees")
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--cp-runs", type=int, default=2)
    ap.add_argument("--memory", default="2G")
    a = ap.parse_args()
    N = a.runs
    api = Api(a.socket)
    made_sb, made_sn, made_hist = set(), set(), set()
    raw = os.path.join(a.pool, "cove-bench-raw")
    t_all = time.monotonic()

    def rm_sb(sid):
        api.call("DELETE", f"/v1/sandboxes/{sid}", ok=(200, 204, 404))
        made_sb.discard(sid)

    def rm_sn(snid):
        api.call("DELETE", f"/v1/snapshots/{snid}", ok=(200, 204, 404))
        made_sn.discard(snid)

    def settle():
        """Before each timed request: what the run before deleted (coved
        removes a sandbox's subvolume just after its init dies) cleaned by
        btrfs, and written out, so that no request pays for the cleanup of
        the one before it (which is not timed either). BTRFS_IOC_SYNC
        commits and pokes btrfs's cleaner (`btrfs subvolume sync` alone
        waits for the 30 s periodic commit to do that); then the deleted
        subvolumes are polled until gone, for at most 5 s."""
        time.sleep(0.02)
        deadline = time.monotonic() + 5
        fd = os.open(a.pool, os.O_RDONLY | os.O_DIRECTORY)
        try:
            while True:
                fcntl.ioctl(fd, IOC_SYNC)
                left = subprocess.run(["btrfs", "subvolume", "list", "-d", a.pool], check=True,
                                      capture_output=True, text=True).stdout.strip()
                if not left or time.monotonic() > deadline:
                    return
                time.sleep(0.02)
        finally:
            os.close(fd)

    def rm_history(sid):  # its checkpoints' snapshots go with it
        api.call("DELETE", f"/v1/sandboxes/{sid}/checkpoints", ok=(200, 404))
        made_hist.discard(sid)

    try:
        # --- setup: the two sandboxes --------------------------------------
        t = time.monotonic()
        sizes = {}
        for size in ("small", "large"):
            sb = api.call("POST", "/v1/sandboxes", {"name": f"snapbench-{size}", "memory": a.memory})
            made_sb.add(sb["id"])
            sizes[size] = sb["id"]
        api.exec(sizes["small"], ["sh", "-c", SMALL_SH, "sh", "/srv/bench"])
        api.exec(sizes["large"], ["sh", "-c", TREE_SH, "sh", "/srv/bench", str(BIG)])
        # The setup's 1 GiB is written out before anything is timed: a
        # snapshot flushes only its own sandbox's data, so the small
        # sandbox's figures would otherwise pay for the large one's
        # writeback, which is the setup's, not theirs.
        os.sync()
        log(f"setup: sandboxes with 10 files and 10,000 files + 1 GiB: {time.monotonic() - t:.1f} s")

        for size in ("small", "large"):
            sid = sizes[size]
            log(f"{size} sandbox {sid}, {N} runs each")
            # one untimed snapshot first (its first commit of this tree)
            _, sn = api.timed("POST", f"/v1/sandboxes/{sid}/snapshots", {})
            made_sn.add(sn["id"])
            rm_sn(sn["id"])

            xs = []
            for _ in range(N):
                settle()
                ms, sn = api.timed("POST", f"/v1/sandboxes/{sid}/snapshots", {})
                made_sn.add(sn["id"])
                xs.append(ms)
                rm_sn(sn["id"])
            record(f"{size}.snapshot", xs)

            _, base = api.timed("POST", f"/v1/sandboxes/{sid}/snapshots", {"name": f"snapbench-{size}"})
            made_sn.add(base["id"])
            xs = []
            for _ in range(N):
                settle()
                ms, nsb = api.timed("POST", f"/v1/snapshots/{base['id']}/restore", {})
                made_sb.add(nsb["id"])
                xs.append(ms)
                rm_sb(nsb["id"])
            record(f"{size}.restore", xs)
            rm_sn(base["id"])

            for count in (1, 10):
                xs = []
                for _ in range(N):
                    settle()
                    ms, j = api.timed("POST", f"/v1/sandboxes/{sid}/fork", {"count": count})
                    ids = [s["id"] for s in j["sandboxes"]]
                    made_sb.update(ids)
                    if len(ids) != count:
                        raise RuntimeError(f"fork {count} made {len(ids)} sandboxes")
                    xs.append(ms)
                    for i in ids:
                        rm_sb(i)
                record(f"{size}.fork{count}", xs)

            if size == "large":
                xs = []
                made_hist.add(sid)
                for i in range(N):
                    settle()
                    api.exec(sid, ["sh", "-c", f"echo step {i} >/srv/bench/d7/f7"])
                    ms, cp = api.timed("POST", f"/v1/sandboxes/{sid}/checkpoints", {"label": f"step {i}"})
                    if cp["seq"] != i + 1:
                        raise RuntimeError(f"checkpoint {i + 1} came back as {cp['seq']}")
                    xs.append(ms)
                rm_history(sid)
                record("large.checkpoint", xs)
                for fmt in ("tar", "zip"):
                    export_throughput(a.socket, sid, fmt)
        for sid in list(made_sb):
            rm_sb(sid)

        # --- the same tree, raw: a btrfs subvolume on the pool, and cp -a --
        t = time.monotonic()
        if os.path.exists(raw):
            cleanup_raw(raw)
        os.makedirs(raw)
        src_sv = os.path.join(raw, "tree")
        subprocess.run(["btrfs", "-q", "subvolume", "create", src_sv], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["sh", "-c", TREE_SH, "sh", os.path.join(src_sv, "bench"), str(BIG)], check=True)
        os.makedirs(a.scratch, exist_ok=True)
        plain = os.path.join(a.scratch, "tree")
        shutil.rmtree(plain, ignore_errors=True)
        subprocess.run(["cp", "-a", os.path.join(src_sv, "bench"), plain], check=True)
        for p in (src_sv, a.scratch):
            syncfs(p)
        log(f"setup: the tree in a pool subvolume and in {plain}: {time.monotonic() - t:.1f} s")

        snaps = os.path.join(raw, "snaps")
        os.makedirs(snaps)
        raw_snapshot(src_sv, snaps, "warm")
        subvol_delete(os.path.join(snaps, "warm"))
        for label, change in (("raw.ioctl", False), ("raw.ioctl_checkpoint", True)):
            xs = []
            for i in range(N):
                if change:
                    with open(os.path.join(src_sv, "bench/d7/f7"), "w") as f:
                        f.write(f"step {i}\n")
                t = time.perf_counter()
                raw_snapshot(src_sv, snaps, f"s{i}")
                xs.append((time.perf_counter() - t) * 1000)
                subvol_delete(os.path.join(snaps, f"s{i}"))
            record(label, xs)
        xs = []
        for i in range(N):
            dst = os.path.join(snaps, f"c{i}")
            t = time.perf_counter()
            subprocess.run(["btrfs", "-q", "subvolume", "snapshot", "-r", src_sv, dst], check=True,
                           stdout=subprocess.DEVNULL)
            xs.append((time.perf_counter() - t) * 1000)
            subvol_delete(dst)
        record("raw.cli", xs)

        xs, xs_sync = [], []
        for i in range(a.cp_runs):
            dst = os.path.join(a.scratch, f"copy{i}")
            shutil.rmtree(dst, ignore_errors=True)
            t = time.perf_counter()
            subprocess.run(["cp", "-a", plain, dst], check=True)
            t1 = time.perf_counter()
            syncfs(dst)
            t2 = time.perf_counter()
            xs.append((t1 - t) * 1000)
            xs_sync.append((t2 - t) * 1000)
            shutil.rmtree(dst)
        record("cp", xs)
        record("cp_sync", xs_sync)
        out_lines.append(f"total_s {time.monotonic() - t_all:.1f}")
    finally:
        for sid in list(made_sb):
            try:
                rm_sb(sid)
            except Exception as e:  # noqa: BLE001 (best effort: run.sh's trap tries again)
                log(f"WARN: deleting sandbox {sid}: {e}")
        for snid in list(made_sn):
            try:
                rm_sn(snid)
            except Exception as e:  # noqa: BLE001
                log(f"WARN: deleting snapshot {snid}: {e}")
        for sid in list(made_hist):
            try:
                rm_history(sid)
            except Exception as e:  # noqa: BLE001
                log(f"WARN: deleting the history of {sid}: {e}")
        cleanup_raw(raw)
        shutil.rmtree(a.scratch, ignore_errors=True)
    with open(a.out, "w") as f:
        f.write("\n".join(out_lines) + "\n")
    log(f"done in {time.monotonic() - t_all:.1f} s")


def cleanup_raw(raw):
    """Delete the raw subvolumes (snapshots first, then the tree) and the dir."""
    if not os.path.isdir(raw):
        return
    for sub in ("snaps",):
        d = os.path.join(raw, sub)
        if os.path.isdir(d):
            for n in os.listdir(d):
                subprocess.run(["btrfs", "-q", "subvolume", "delete", os.path.join(d, n)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t = os.path.join(raw, "tree")
    if os.path.isdir(t):
        subprocess.run(["btrfs", "-q", "subvolume", "delete", t], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.rmtree(raw, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--cleanup-raw":
        cleanup_raw(sys.argv[2])
        sys.exit(0)
    main()

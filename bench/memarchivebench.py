#!/usr/bin/env python3
"""Archive and wake with memory (the lifecycle's archive keeping the
processes: src/engine/memarchive.c) through coved's API, next to the plain
criu CLI dump of the same tree and to an archive of a sandbox with nothing
running (no memory to keep).

Against a running coved (HTTP over its unix socket), each --runs times:
  - empty: a sandbox with nothing running but cove-init: POST .../archive,
    then an exec `true` that wakes it;
  - small: a sandbox running a shell counter loop: POST .../archive (detach,
    freeze, criu dump, images synced and committed, processes ended), then
    the exec that wakes it (criu restore of the tree, its network, the
    kept processes taken back);
  - big: the same with a python process that touched --mib MiB;
  next to `criu dump --leave-running` of the small and the big tree with the
  options coved passes (memsnapbench.criu_cli_dump), timed as a command.
Each archive with memory starts from a tree started afresh (a reboot and
the process again, untimed). Writes "key value" lines (ms) to --out.
Usage: memarchivebench.py --socket S --pool DIR --criu PATH --out FILE [--runs N] [--mib N]"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import write_results  # noqa: E402
from memsnapbench import TOUCH, api, criu_cli_dump, must, stats, timed  # noqa: E402

COUNTER = "i=0; while :; do i=$((i+1)); echo $i > /dev/shm/count; sleep 0.05; done"


def start(S, sid, cmd, mib):
    """Reboot sid (a tree started afresh), run cmd in it; wait for it."""
    must(*api(S, "POST", "/v1/sandboxes/%s/reboot" % sid))
    must(*api(S, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": cmd, "background": True}))
    probe = ("grep VmRSS /proc/$(pgrep -f bytearray | head -1)/status" if mib else "cat /dev/shm/count")
    for _ in range(600):
        st, j = api(S, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["sh", "-c", probe]})
        if st == 200 and j["exit_code"] == 0 and (not mib or int(j["stdout"].split()[1]) >= mib * 1024):
            return
        time.sleep(0.1)
    sys.exit("memarchivebench: %s never started" % cmd)


def cycle(S, sid, want_memory):
    """One archive and the wake after it: (archive ms, wake ms)."""
    ms_a, (st, j) = timed(lambda: api(S, "POST", "/v1/sandboxes/%s/archive" % sid, {}))
    must(st, j)
    if j["memory_kept"] is not want_memory:
        sys.exit("memarchivebench: memory_kept %s: %s" % (j["memory_kept"], j.get("memory_note")))
    ms_w, (st, j) = timed(lambda: api(S, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["true"]}))
    must(st, j)
    return ms_a, ms_w


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--socket", required=True)
    a.add_argument("--pool", required=True)
    a.add_argument("--criu", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--runs", type=int, default=5)
    a.add_argument("--mib", type=int, default=100)
    o = a.parse_args()
    S = o.socket
    caps = must(*api(S, "GET", "/v1/capabilities"))
    if not caps["capabilities"]["nativeSnapshot"]:
        sys.exit("memarchivebench: no memory snapshots here: %s" % caps.get("nativeSnapshotReason"))
    res, made = {}, []
    try:
        for name, cmd, mib in (("empty", None, 0), ("small", ["sh", "-c", COUNTER], 0),
                               ("big", ["python3", "-c", TOUCH % o.mib], o.mib)):
            sid = must(*api(S, "POST", "/v1/sandboxes", {"network": "none"}))["id"]
            made.append(sid)
            arch, wake, cli = [], [], []
            for i in range(o.runs):
                if cmd:
                    start(S, sid, cmd, mib)
                    pid = must(*api(S, "GET", "/v1/sandboxes/" + sid))["init_pid"]
                    cli.append(criu_cli_dump(o.criu, pid, sid, os.path.join(o.pool, "memarchivebench-%d" % i)))
                x, y = cycle(S, sid, cmd is not None)
                arch.append(x)
                wake.append(y)
            res[name + ".archive.p50"], res[name + ".archive.p95"] = stats(arch)
            res[name + ".wake.p50"], res[name + ".wake.p95"] = stats(wake)
            if cli:
                res[name + ".cli_dump.p50"], res[name + ".cli_dump.p95"] = stats(cli)
        res["mib"] = o.mib
    finally:
        for sid in made:
            api(S, "DELETE", "/v1/sandboxes/" + sid)
    write_results(o.out, res, "memarchivebench")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Memory snapshots through coved's API (part of `make bench`, run by
bench/run.sh), next to the plain criu CLI on the same process tree.

Against a running coved (HTTP over its unix socket):
  - idle: a small sandbox (network none, nothing running but cove-init):
    POST .../snapshots {"memory": true}, its restore, and, for scale, the
    same snapshot without memory and the floor: `criu dump --leave-running`
    of that tree (as below); p50/p95 over --runs;
  - big: a sandbox whose kept python process touched --mib MiB: a memory
    snapshot (the whole request: detach, freeze, criu dump, subvolume
    snapshot, images synced, row committed) and its restore (the whole
    request: a new sandbox, its processes restored by criu, its network),
    p50/p95, and the snapshot with wait_durable false (its images synced
    off the request's path); next to them `criu dump --leave-running` of the same tree with
    the options coved passes (the same externals, the same freezer cgroup),
    timed as a whole command, into a scratch directory on the same pool;
  - fork: POST .../fork {"count": 3, "memory": true} of the idle and of the
    big sandbox.

Only the requests are timed; what they make is deleted after each, untimed.
Usage: memsnapbench.py --socket S --pool DIR --criu PATH --out FILE [--runs N] [--mib N]
Writes "key value" lines (milliseconds) to FILE and a report to stderr."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import UnixHTTP, write_results  # noqa: E402

TOUCH = ("import time\nb = bytearray(%d << 20)\nfor i in range(0, len(b), 4096):\n    b[i] = 1\n"
         "print('touched', flush=True)\nwhile True:\n    time.sleep(1)\n")
LAYERS = ("usr", "opt")
DEV = ("null", "zero", "full", "random", "urandom", "tty")


def api(sock, method, path, body=None):
    c = UnixHTTP(sock, timeout=300)
    try:
        c.request(method, path, body=json.dumps(body).encode() if body is not None else None)
        r = c.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        c.close()


def must(st, j, want=(200, 201)):
    if st not in want:
        sys.exit("memsnapbench: %s %s" % (st, j))
    return j


def timed(fn):
    t0 = time.perf_counter()
    r = fn()
    return (time.perf_counter() - t0) * 1000, r


def stats(xs):
    xs = sorted(xs)
    return statistics.median(xs), xs[min(len(xs) - 1, int(len(xs) * 0.95))]


def criu_cli_dump(criu, pid, sid, dest):
    """criu dump of the sandbox's tree with coved's options, as a command."""
    ext = ["mnt[/%s]:%s" % (x, x) for x in LAYERS] + ["mnt[/dev/%s]:dev-%s" % (x, x) for x in DEV]
    ext.append("mnt[/dev/.cove-init]:cove-init")
    for fd in os.listdir("/proc/%d/fd" % pid):  # coved's connection: outside the tree
        link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        if link.startswith("socket:[") and fd != "3":
            ext.append("unix[%s]" % link[8:-1])
    cmd = [criu, "dump", "-t", str(pid), "-D", dest, "-o", "dump.log", "--leave-running", "--tcp-established",
           "--file-locks", "--link-remap", "--ghost-limit", str(64 << 20), "--network-lock", "nftables",
           "--empty-ns", "net", "--freeze-cgroup", "/sys/fs/cgroup/freezer/cove/" + sid]
    for e in ext:
        cmd += ["--external", e]
    os.makedirs(dest)
    ms, r = timed(lambda: subprocess.run(cmd, capture_output=True))
    if r.returncode != 0:
        sys.exit("memsnapbench: criu dump failed: %s" % open(os.path.join(dest, "dump.log")).read()[-2000:])
    shutil.rmtree(dest)
    return ms


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--socket", required=True)
    a.add_argument("--pool", required=True)
    a.add_argument("--criu", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--runs", type=int, default=10)
    a.add_argument("--mib", type=int, default=100)
    o = a.parse_args()
    S = o.socket
    res, made = {}, []
    caps = must(*api(S, "GET", "/v1/capabilities"))
    if not caps["capabilities"]["nativeSnapshot"]:
        sys.exit("memsnapbench: no memory snapshots here: %s" % caps.get("nativeSnapshotReason"))
    try:
        idle = must(*api(S, "POST", "/v1/sandboxes", {"network": "none"}))["id"]
        made.append(idle)
        idle_pid = must(*api(S, "GET", "/v1/sandboxes/" + idle))["init_pid"]
        for key, body in (("idle.memory", {"memory": True}), ("idle.files", {})):
            xs, rs, cli = [], [], []
            for i in range(o.runs):
                ms, (st, j) = timed(lambda: api(S, "POST", "/v1/sandboxes/%s/snapshots" % idle, body))
                must(st, j)
                xs.append(ms)
                if body:  # its restore alone (next to the fork's three), and the floor: criu's own dump
                    ms, (st, sb) = timed(lambda: api(S, "POST", "/v1/snapshots/%s/restore" % j["id"], {}))
                    must(st, sb)
                    rs.append(ms)
                    api(S, "DELETE", "/v1/sandboxes/" + sb["id"])
                    cli.append(criu_cli_dump(o.criu, idle_pid, idle, os.path.join(o.pool, "memsnapbench-i%d" % i)))
                api(S, "DELETE", "/v1/snapshots/" + j["id"])
            res[key + ".p50"], res[key + ".p95"] = stats(xs)
            if body:
                res["idle.restore.p50"], res["idle.restore.p95"] = stats(rs)
                res["idle.cli_dump.p50"], res["idle.cli_dump.p95"] = stats(cli)
        xs = []
        for _ in range(max(3, o.runs // 2)):
            ms, (st, j) = timed(lambda: api(S, "POST", "/v1/sandboxes/%s/fork" % idle, {"count": 3, "memory": True}))
            must(st, j)
            xs.append(ms)
            for c in j["sandboxes"]:
                api(S, "DELETE", "/v1/sandboxes/" + c["id"])
        res["idle.fork3.p50"], res["idle.fork3.p95"] = stats(xs)
        big = must(*api(S, "POST", "/v1/sandboxes", {"network": "none"}))["id"]
        made.append(big)
        must(*api(S, "POST", "/v1/sandboxes/%s/exec" % big,
                  {"cmd": ["python3", "-c", TOUCH % o.mib], "background": True, "tag": "touch"}))
        for _ in range(600):
            st, j = api(S, "POST", "/v1/sandboxes/%s/exec" % big,
                        {"cmd": ["sh", "-c", "grep VmRSS /proc/$(pgrep -f bytearray | head -1)/status"]})
            if st == 200 and j["exit_code"] == 0 and int(j["stdout"].split()[1]) >= o.mib * 1024:
                break
            time.sleep(0.1)
        else:
            sys.exit("memsnapbench: the big sandbox never touched its memory")
        init_pid = must(*api(S, "GET", "/v1/sandboxes/" + big))["init_pid"]
        dumps, restores, cli, forks, nowait = [], [], [], [], []
        for i in range(o.runs):
            ms, (st, sn) = timed(lambda: api(S, "POST", "/v1/sandboxes/%s/snapshots" % big, {"memory": True}))
            must(st, sn)
            dumps.append(ms)
            res["big.memory_mib"] = sn["memory_bytes"] / (1 << 20)
            ms, (st, sb) = timed(lambda: api(S, "POST", "/v1/snapshots/%s/restore" % sn["id"], {}))
            must(st, sb)
            restores.append(ms)
            api(S, "DELETE", "/v1/sandboxes/" + sb["id"])
            api(S, "DELETE", "/v1/snapshots/" + sn["id"])
            cli.append(criu_cli_dump(o.criu, init_pid, big, os.path.join(o.pool, "memsnapbench-%d" % i)))
            ms, (st, sn) = timed(lambda: api(S, "POST", "/v1/sandboxes/%s/snapshots" % big,
                                             {"memory": True, "wait_durable": False}))
            must(st, sn)
            nowait.append(ms)
            for _ in range(600):  # made durable off the request's path
                if must(*api(S, "GET", "/v1/snapshots/" + sn["id"]))["durable"]:
                    break
                time.sleep(0.05)
            api(S, "DELETE", "/v1/snapshots/" + sn["id"])
        for _ in range(max(3, o.runs // 2)):
            ms, (st, j) = timed(lambda: api(S, "POST", "/v1/sandboxes/%s/fork" % big, {"count": 3, "memory": True}))
            must(st, j)
            forks.append(ms)
            for c in j["sandboxes"]:
                api(S, "DELETE", "/v1/sandboxes/" + c["id"])
        for key, xs in (("big.dump", dumps), ("big.restore", restores), ("big.cli_dump", cli), ("fork3", forks),
                        ("big.dump_nowait", nowait)):
            res[key + ".p50"], res[key + ".p95"] = stats(xs)
        res["mib"] = o.mib
    finally:
        for sid in made:
            api(S, "DELETE", "/v1/sandboxes/" + sid)
    write_results(o.out, res, "memsnapbench")


if __name__ == "__main__":
    main()

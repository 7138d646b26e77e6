"""The lifecycle's costs (issue 17), side by side in one run on a private
coved:

  exec  `true` on a running sandbox and on a paused one (the exec wakes it):
        p50 of each and the delta (target: +2 ms)
  pause p50 of POST .../pause (target: 2 ms), and resume
  archive, wake  a sandbox holding 10,000 files (snapbench's tree, no big
        file): p50 of POST .../archive, and of an exec `true` that wakes it
        from archived (target: 50 ms each), next to a reboot (the same
        processes' end and start, no state change) and a create (the same
        boot, on a new root: the peer)
  density  N paused sandboxes: coved's RSS growth plus their inits' RSS,
        per sandbox (as apibench's idle figure), and exec latency on a
        running sandbox next to them against the same on an empty coved.

Usage: lifebench.py [--runs N] [--density N] [--out FILE]"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(0, HERE)
import covetest  # noqa: E402
from snapbench import Api, TREE_SH, pct  # noqa: E402

out = []


def report(name, xs, key):
    line = f"{name:34s} p50 {pct(xs, 50):8.2f} ms  p90 {pct(xs, 90):8.2f}  min {min(xs):8.2f}  ({len(xs)} runs)"
    print(line, flush=True)
    out.append(f"life.{key}.p50 {pct(xs, 50):.3f}")


def kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def exec_true(api, sid):
    return api.timed("POST", f"/v1/sandboxes/{sid}/exec", {"cmd": ["true"]})[0]


def bench_exec_pause(api, runs):
    sid = api.call("POST", "/v1/sandboxes", {"idle_timeout": 0})["id"]
    running, paused, pause, resume = [], [], [], []
    for _ in range(5):
        exec_true(api, sid)
    for _ in range(runs):
        running.append(exec_true(api, sid))
        pause.append(api.timed("POST", f"/v1/sandboxes/{sid}/pause", {})[0])
        paused.append(exec_true(api, sid))  # woken by the exec
        api.call("POST", f"/v1/sandboxes/{sid}/pause", {})
        resume.append(api.timed("POST", f"/v1/sandboxes/{sid}/resume", {})[0])
    report("exec true running", running, "exec_running")
    report("exec true paused (wakes it)", paused, "exec_paused")
    delta = pct(paused, 50) - pct(running, 50)
    print(f"{'  wake delta':34s} {delta:+.2f} ms p50 (target +2 ms)", flush=True)
    out.append(f"life.wake_delta.p50 {delta:.3f}")
    report("pause", pause, "pause")
    report("resume", resume, "resume")
    api.call("DELETE", f"/v1/sandboxes/{sid}")


def bench_archive(api, runs):
    sid = api.call("POST", "/v1/sandboxes", {"idle_timeout": 0})["id"]
    api.exec(sid, ["sh", "-c", TREE_SH, "sh", "/srv/bench", "0"])
    n = api.exec(sid, ["sh", "-c", "find /srv/bench -type f | wc -l"])["stdout"].strip()
    print(f"archive/wake: a sandbox with {n} files", flush=True)
    archive, wake, reboot, create = [], [], [], []
    for _ in range(runs):
        archive.append(api.timed("POST", f"/v1/sandboxes/{sid}/archive", {})[0])
        wake.append(exec_true(api, sid))
        reboot.append(api.timed("POST", f"/v1/sandboxes/{sid}/reboot", {})[0])
        # the peer: a new sandbox's create, which boots the same way
        t, j = api.timed("POST", "/v1/sandboxes", {"idle_timeout": 0})
        create.append(t)
        api.call("DELETE", f"/v1/sandboxes/{j['id']}")
    report("archive (10,000 files)", archive, "archive")
    report("wake: exec true on archived", wake, "wake")
    report("reboot", reboot, "reboot")
    report("peer: create", create, "create")
    api.call("DELETE", f"/v1/sandboxes/{sid}")


def bench_density(cv, api, n, runs):
    probe = api.call("POST", "/v1/sandboxes", {"idle_timeout": 0})["id"]
    empty = [exec_true(api, probe) for _ in range(runs)]
    rss0 = kb(cv.pid(), "VmRSS")
    ids, pids = [], []
    t0 = time.time()
    for _ in range(n):
        j = api.call("POST", "/v1/sandboxes", {"idle_timeout": 0, "network": "none"})
        ids.append(j["id"])
        pids.append(j["init_pid"])
        api.call("POST", f"/v1/sandboxes/{j['id']}/pause", {})
    made = time.time() - t0
    time.sleep(0.5)
    rss1 = kb(cv.pid(), "VmRSS")
    inits = sum(kb(p, "VmRSS") for p in pids)
    per = ((rss1 - rss0) + inits) / 1024.0 / n
    health = api.call("GET", "/v1/health")
    full = [exec_true(api, probe) for _ in range(runs)]
    print(f"density: {n} paused sandboxes made in {made:.1f} s; coved RSS {rss0} -> {rss1} kB, "
          f"inits' RSS {inits} kB: {per:.3f} MB per paused sandbox (health: {health})", flush=True)
    out.append(f"life.density.n {n}")
    out.append(f"life.density.mb_per_sandbox {per:.3f}")
    report("exec true, empty coved", empty, "exec_empty")
    report(f"exec true, next to {n} paused", full, "exec_dense")
    ratio = pct(full, 50) / pct(empty, 50)
    print(f"{'  ratio':34s} {ratio:.2f}x (target 1.5x)", flush=True)
    out.append(f"life.density.exec_ratio {ratio:.3f}")
    for sid in ids + [probe]:
        api.call("DELETE", f"/v1/sandboxes/{sid}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--density", type=int, default=200)
    ap.add_argument("--out")
    a = ap.parse_args()
    cv = covetest.Coved().start()
    try:
        api = Api(cv.socket)
        bench_exec_pause(api, a.runs)
        bench_archive(api, max(10, a.runs // 5))
        if a.density:
            bench_density(cv, api, a.density, a.runs)
    finally:
        cv.teardown()
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()

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
        per sandbox (as apibench's idle figure), coved's fds and its CPU use
        with no request, and exec `true` and create (+ delete) latency next
        to them against the same on an empty coved, a second one running
        meanwhile: rounds alternate between the two, before the N are made
        (the two should match) and after.

Usage: lifebench.py [--runs N] [--density N] [--density-only] [--create-network NET] [--out FILE]"""
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


def cpu_ms(pid):
    """CPU time of all of pid's threads so far (schedstat: ns)."""
    t = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                t += int(f.read().split()[0])
        except OSError:
            pass
    return t / 1e6


def idle_cpu(pids, secs=5.0):
    """Each coved's CPU use with no request, ms per second, over the same secs."""
    c0 = [cpu_ms(p) for p in pids]
    time.sleep(secs)
    return [(cpu_ms(p) - c) / secs for p, c in zip(pids, c0)]


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


CREATE = {"idle_timeout": 0}  # the probes' and the measured creates' spec (--create-network)


def rounds(coveds, n_rounds, execs, creates):
    """exec `true` on each coved's running probe and create (default
    network) + delete, in rounds that alternate between the coveds (which
    one goes first too), so that the machine's load falls on all alike."""
    ex = [[] for _ in coveds]
    cr = [[] for _ in coveds]
    for r in range(n_rounds):
        order = list(range(len(coveds)))
        if r % 2:
            order.reverse()
        for i in order:
            api, probe = Api(coveds[i][0]), coveds[i][1]
            ex[i] += [exec_true(api, probe) for _ in range(execs)]
            for _ in range(creates):
                t, j = api.timed("POST", "/v1/sandboxes", CREATE)
                cr[i].append(t)
                api.call("DELETE", f"/v1/sandboxes/{j['id']}")
    return ex, cr


def compare(label, key, ex, cr):
    """The dense coved's figures (index 0) next to the empty one's (1)."""
    for what, xs in (("exec true", ex), ("create", cr)):
        k = "exec" if what == "exec true" else "create"
        ratio = pct(xs[0], 50) / pct(xs[1], 50)
        print(f"{what + ', ' + label:44s} p50 {pct(xs[0], 50):8.2f} ms  vs empty coved {pct(xs[1], 50):8.2f} ms"
              f"  ratio {ratio:.2f}x  (p90 {pct(xs[0], 90):.2f} / {pct(xs[1], 90):.2f}; {len(xs[0])} each)",
              flush=True)
        out.append(f"life.density.{k}_{key}.p50 {pct(xs[0], 50):.3f}")
        out.append(f"life.density.{k}_{key}_peer.p50 {pct(xs[1], 50):.3f}")
        out.append(f"life.density.{k}_ratio{'' if key == 'dense' else '_' + key} {ratio:.3f}")


def bench_density(cv, api, n, runs):
    """Two coveds side by side: cv, which gets n paused sandboxes, and an
    empty peer; each has a running probe sandbox. Exec and create are
    measured on both, interleaved, before (the two should match) and with
    the n paused next to the probe."""
    peer = covetest.Coved().start()
    try:
        papi = Api(peer.socket)
        probe = api.call("POST", "/v1/sandboxes", CREATE)["id"]
        pprobe = papi.call("POST", "/v1/sandboxes", CREATE)["id"]
        coveds = [(cv.socket, probe), (peer.socket, pprobe)]
        n_rounds, execs, creates = max(4, runs // 10), 10, 3
        for c in coveds:  # warm both
            rounds([c], 1, 5, 1)
        print(f"density: load average {loadavg()} before", flush=True)
        ex, cr = rounds(coveds, n_rounds, execs, creates)
        compare("both empty", "empty", ex, cr)
        rss0, fds0 = kb(cv.pid(), "VmRSS"), len(os.listdir(f"/proc/{cv.pid()}/fd"))
        ids, pids = [], []
        t0 = time.time()
        api = Api(cv.socket)
        for _ in range(n):
            j = api.call("POST", "/v1/sandboxes", {"idle_timeout": 0, "network": "none"})
            ids.append(j["id"])
            pids.append(j["init_pid"])
            api.call("POST", f"/v1/sandboxes/{j['id']}/pause", {})
        made = time.time() - t0
        time.sleep(0.5)
        rss1, fds1 = kb(cv.pid(), "VmRSS"), len(os.listdir(f"/proc/{cv.pid()}/fd"))
        inits = sum(kb(p, "VmRSS") for p in pids)
        per = ((rss1 - rss0) + inits) / 1024.0 / n
        health = Api(cv.socket).call("GET", "/v1/health")
        idle = idle_cpu([cv.pid(), peer.pid()])
        print(f"density: {n} paused sandboxes made in {made:.1f} s (load average {loadavg()}); coved RSS {rss0} -> "
              f"{rss1} kB, fds {fds0} -> {fds1}, inits' RSS {inits} kB: {per:.3f} MB per paused sandbox; coved's CPU "
              f"with no request {idle[0]:.2f} ms/s (the empty one's {idle[1]:.2f}); health: {health}", flush=True)
        out.append(f"life.density.n {n}")
        out.append(f"life.density.mb_per_sandbox {per:.3f}")
        out.append(f"life.density.coved_rss_kb {rss1}")
        out.append(f"life.density.coved_fds {fds1}")
        out.append(f"life.density.idle_cpu_ms_per_s {idle[0]:.3f}")
        out.append(f"life.density.idle_cpu_peer_ms_per_s {idle[1]:.3f}")
        ex, cr = rounds(coveds, n_rounds, execs, creates)
        compare(f"next to {n} paused", "dense", ex, cr)
        print(f"density: load average {loadavg()} after", flush=True)
        t0 = time.time()
        api = Api(cv.socket)
        for sid in ids + [probe]:
            api.call("DELETE", f"/v1/sandboxes/{sid}")
        print(f"density: {n + 1} sandboxes deleted in {time.time() - t0:.1f} s", flush=True)
    finally:
        peer.teardown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--density", type=int, default=200)
    ap.add_argument("--density-only", action="store_true", help="the density part alone")
    ap.add_argument("--create-network", help="the network of the density part's probes and measured creates (default: coved's default)")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.create_network:
        CREATE["network"] = a.create_network
    cv = covetest.Coved().start()
    try:
        api = Api(cv.socket)
        if not a.density_only:
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

#!/usr/bin/env python3
"""coved's start to healthy: two coved builds side by side (e.g. a copy of
an earlier build, and this one), each restarted --runs times on a data
root of its own, the two interleaved start by start so both see the same
moments of the machine. Timed: from the process's spawn to the first 200
of GET /v1/health (polled every 5 ms). Each build's first start (its data
root made, the pool set up) is not counted; a SIGTERM and its exit
between starts are not timed.

Usage: startbench.py --coved A --coved B [--runs N] [--dir D]
Prints each build's median, min and max (ms) and the ratio of medians."""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import UnixHTTP  # noqa: E402


def healthy(sock):
    try:
        c = UnixHTTP(sock, timeout=5)
        c.request("GET", "/v1/health")
        ok = c.getresponse().status == 200
        c.close()
        return ok
    except OSError:
        return False


def start(coved, root):
    """Start coved on root, wait for its health; the ms it took and the process."""
    sock = os.path.join(root, "cove.sock")
    with open(os.path.join(root, "coved.log"), "ab") as log:
        t0 = time.monotonic()
        p = subprocess.Popen([coved, "--data", os.path.join(root, "data"), "--socket", sock],
                             stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    while not healthy(sock):
        if p.poll() is not None or time.monotonic() - t0 > 120:
            sys.exit("coved %s did not start; see %s/coved.log" % (coved, root))
        time.sleep(0.005)
    return (time.monotonic() - t0) * 1e3, p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--coved", action="append", required=True)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--dir", default="/var/tmp/cove-bench")
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    roots = [tempfile.mkdtemp(prefix="start-", dir=a.dir) for _ in a.coved]
    times = [[] for _ in a.coved]
    try:
        for run in range(a.runs + 1):
            for i, coved in enumerate(a.coved):
                ms, p = start(coved, roots[i])
                p.terminate()
                p.wait(timeout=60)
                if run:
                    times[i].append(ms)
    finally:
        for r in roots:
            subprocess.run(["umount", "-l", os.path.join(r, "data", "pool")], stderr=subprocess.DEVNULL)
            shutil.rmtree(r, ignore_errors=True)
    med = [statistics.median(t) for t in times]
    for coved, t, m in zip(a.coved, times, med):
        print("%s: start to healthy p50 %.1f ms (min %.1f, max %.1f, %d starts)" % (coved, m, min(t), max(t), len(t)))
    if len(med) == 2:
        print("ratio of p50s: %.2f" % (med[0] / med[1]))


if __name__ == "__main__":
    main()

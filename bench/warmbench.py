#!/usr/bin/env python3
"""Create from a warm pool over the API, next to a cold create of the same
spec on the same coved (one started with --warm N): each warm create waits
until the pool is full again (its refill is not the create's), so it times
a hand-out; each cold one names a template with no pool and the default
spec. Only the POST is timed, on a kept-alive connection; the sandbox is
deleted after, untimed.

  warmbench.py --socket SOCK [--data DIR] [--runs N] [--out FILE]
  warmbench.py --socket SOCK [--data DIR] --wait   # until the pool is full: a hyperfine --prepare

Prints a report; FILE gets "key value" lines (ms): warm.p50, warm.p90,
warm.misses (creates not served from the pool), cold.p50, cold.p90."""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import UnixHTTP  # noqa: E402


def call(c, method, path, body=None):
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"} if body is not None else {})
    r = c.getresponse()
    return r.status, json.loads(r.read() or b"null")


def roots(data):
    """Sandbox roots on disk: a deleted one's goes once its deletion is done."""
    d = os.path.join(data, "pool", "sandboxes")
    return len([n for n in os.listdir(d) if n.startswith("sb_")]) if data else 0


def wait_full(c, data=None, deadline_s=120):
    """The pool full and, given the data root, no deletion under way: a
    quiet coved, as a create that finds a full pool would."""
    end = time.time() + deadline_s
    while time.time() < end:
        pool = call(c, "GET", "/v1/capabilities")[1]["warm_pool"]
        busy = data and roots(data) != pool["size"] + len(call(c, "GET", "/v1/sandboxes")[1]["sandboxes"])
        if pool["size"] and pool["ready"] == pool["size"] and not busy:
            return
        time.sleep(0.02)
    raise SystemExit("the warm pool did not fill within %d s" % deadline_s)


def timed_create(c, body):
    t0 = time.perf_counter()
    st, j = call(c, "POST", "/v1/sandboxes", body)
    dt = (time.perf_counter() - t0) * 1000
    if st != 201:
        raise SystemExit("create %s: %s %s" % (body, st, j))
    call(c, "DELETE", "/v1/sandboxes/" + j["id"])
    return dt, j["from_pool"]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--out")
    ap.add_argument("--data", help="coved's data root: wait for deletions too")
    ap.add_argument("--wait", action="store_true", help="only wait until the pool is full (hyperfine --prepare)")
    a = ap.parse_args()
    c = UnixHTTP(a.socket, timeout=120)
    if a.wait:
        wait_full(c, a.data)
        return 0
    if call(c, "GET", "/v1/capabilities")[1]["warm_pool"]["size"] == 0:
        raise SystemExit("this coved has no warm pool (coved --warm N)")
    st, j = call(c, "POST", "/v1/templates", {"name": "warmbench-cold"})
    if st not in (201, 409):
        raise SystemExit("template: %s %s" % (st, j))
    warm, cold, misses = [], [], 0
    try:
        for _ in range(a.runs):
            wait_full(c, a.data)
            dt, pooled = timed_create(c, {})
            warm.append(dt)
            misses += not pooled
            dt, pooled = timed_create(c, {"template": "warmbench-cold"})
            assert not pooled
            cold.append(dt)
            wait_full(c, a.data)
    finally:
        call(c, "DELETE", "/v1/templates/warmbench-cold")
    res = {"warm.p50": pct(warm, 0.5), "warm.p90": pct(warm, 0.9), "warm.misses": misses,
           "cold.p50": pct(cold, 0.5), "cold.p90": pct(cold, 0.9), "runs": a.runs}
    print("create over the API, %d runs each (ms):" % a.runs)
    print("  from the warm pool: p50 %.3f  p90 %.3f  mean %.3f  (%d not from the pool)" %
          (res["warm.p50"], res["warm.p90"], statistics.mean(warm), misses))
    print("  cold, same spec:    p50 %.3f  p90 %.3f  mean %.3f" %
          (res["cold.p50"], res["cold.p90"], statistics.mean(cold)))
    if a.out:
        with open(a.out, "w") as f:
            for k, v in res.items():
                f.write("%s %s\n" % (k, v))
    return 0


if __name__ == "__main__":
    sys.exit(main())

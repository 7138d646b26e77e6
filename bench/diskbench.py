#!/usr/bin/env python3
"""Disk limits' cost (part of `make bench`, run by bench/run.sh; runs alone
too): snapshot, restore and fork into 1 of a sandbox holding 10,000 files and
100 MiB, with disk limits on (a coved whose pool has btrfs simple quotas, the
sandbox limited to 10G) and off (a coved started with --no-disk-quota: no
quota accounting in its pool), side by side in one run.

Each coved has a data root of its own (a loop-backed pool each, same size);
the runs alternate between the two, so that the machine's load falls on both
alike. Only the request is timed; what it made is deleted after it,
untimed, and btrfs's cleaner is let finish before the next request.

Usage: diskbench.py --dir DIR --out FILE [--runs N]
Writes "key value" lines (milliseconds) to FILE and a report to stderr."""
import argparse
import fcntl
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import covetest  # noqa: E402
from snapbench import Api, TREE_SH, pct  # noqa: E402

IOC_SYNC = 0x9408  # BTRFS_IOC_SYNC
BIG = 100 << 20


def log(msg):
    print(f"[diskbench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def settle(pool):
    """The cleanup of the request before, done and committed, untimed."""
    deadline = time.monotonic() + 5
    fd = os.open(pool, os.O_RDONLY | os.O_DIRECTORY)
    try:
        while True:
            fcntl.ioctl(fd, IOC_SYNC)
            left = subprocess.run(["btrfs", "subvolume", "list", "-d", pool], check=True, capture_output=True,
                                  text=True).stdout.strip()
            if not left or time.monotonic() > deadline:
                return
            time.sleep(0.02)
    finally:
        os.close(fd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True, help="where the two coveds' data roots go")
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=20)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    sides = {}
    out = []
    t_all = time.monotonic()
    try:
        for name, args in (("on", []), ("off", ["--no-disk-quota"])):
            d = os.path.join(a.dir, name)
            shutil.rmtree(d, ignore_errors=True)
            os.makedirs(d)
            cv = covetest.Coved(data=d, args=args).start()
            api = Api(cv.socket)
            caps = api.call("GET", "/v1/capabilities")
            if caps["disk"]["limits"] != (name == "on"):
                raise RuntimeError(f"coved {name}: disk limits {caps['disk']}")
            sid = api.call("POST", "/v1/sandboxes", {"name": "diskbench", "network": "none",
                                                     **({"disk": "10G"} if name == "on" else {})})["id"]
            api.exec(sid, ["sh", "-c", TREE_SH, "sh", "/srv/bench", str(BIG)])
            os.sync()
            sides[name] = {"cv": cv, "api": api, "sid": sid, "pool": os.path.join(cv.data, "pool"),
                           "x": {"snapshot": [], "restore": [], "fork1": []}}
            log(f"limits {name}: coved {cv.socket}, sandbox {sid} (10,000 files + 100 MiB)")
        for s in sides.values():  # one untimed snapshot each: the tree's first commit
            sn = s["api"].call("POST", f"/v1/sandboxes/{s['sid']}/snapshots", {})
            s["base"] = sn["id"]
        for i in range(a.runs):
            for name in (("on", "off") if i % 2 == 0 else ("off", "on")):
                s = sides[name]
                api, sid, x = s["api"], s["sid"], s["x"]
                settle(s["pool"])
                ms, sn = api.timed("POST", f"/v1/sandboxes/{sid}/snapshots", {})
                x["snapshot"].append(ms)
                api.call("DELETE", f"/v1/snapshots/{sn['id']}")
                settle(s["pool"])
                ms, r = api.timed("POST", f"/v1/snapshots/{s['base']}/restore", {})
                x["restore"].append(ms)
                if (r.get("disk") is not None) != (name == "on"):
                    raise RuntimeError(f"restore {name}: disk {r.get('disk')}")
                api.call("DELETE", f"/v1/sandboxes/{r['id']}")
                settle(s["pool"])
                ms, f = api.timed("POST", f"/v1/sandboxes/{sid}/fork", {"count": 1})
                x["fork1"].append(ms)
                for c in f["sandboxes"]:
                    api.call("DELETE", f"/v1/sandboxes/{c['id']}")
        log(f"{a.runs} runs each, alternating; ms:")
        log(f"  {'':10s} {'limits on p50':>14s} {'off p50':>9s} {'on p95':>9s} {'off p95':>9s}")
        for op in ("snapshot", "restore", "fork1"):
            on, off = sides["on"]["x"][op], sides["off"]["x"][op]
            for name, xs in (("on", on), ("off", off)):
                out.append(f"disk_{name}.{op}.runs {len(xs)}")
                out.append(f"disk_{name}.{op}.p50 {pct(xs, 50):.3f}")
                out.append(f"disk_{name}.{op}.p95 {pct(xs, 95):.3f}")
            log(f"  {op:10s} {pct(on, 50):14.2f} {pct(off, 50):9.2f} {pct(on, 95):9.2f} {pct(off, 95):9.2f}")
        out.append(f"total_s {time.monotonic() - t_all:.1f}")
    finally:
        for s in sides.values():
            s["cv"].teardown()
    with open(a.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()

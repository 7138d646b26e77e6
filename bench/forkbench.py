"""Fork timing, A/B: p50 of POST .../fork {count: 1 and 10} on a sandbox
holding 10 files and one holding 10,000 files + 1 GiB (as snapbench.py
makes them), each on a private coved. Given a second build directory, a
coved of each build runs at once and their requests alternate, so that a
busy machine slows both alike.

Usage: forkbench.py RUNS [BASE_BUILD_DIR] [--small-only]"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(0, HERE)
import covetest  # noqa: E402
from snapbench import Api, SMALL_SH, TREE_SH, BIG, pct  # noqa: E402


def start(build):
    covetest.COVED = os.path.join(build, "coved")
    cv = covetest.Coved().start()
    api = Api(cv.socket)
    return cv, api


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    runs = int(args[0]) if args else 10
    builds = {"new": covetest.BUILD}
    if len(args) > 1:
        builds["base"] = args[1]
    sizes = ["small"] if "--small-only" in sys.argv else ["small", "large"]
    daemons = {}
    try:
        for name, build in builds.items():
            daemons[name] = start(build)
        for size in sizes:
            sids = {}
            for name, (cv, api) in daemons.items():
                sid = api.call("POST", "/v1/sandboxes", {"name": "fb-" + size, "memory": "2G"})["id"]
                sh = SMALL_SH if size == "small" else TREE_SH
                api.exec(sid, ["sh", "-c", sh, "sh", "/srv/bench"] + ([] if size == "small" else [str(BIG)]))
                sn = api.call("POST", f"/v1/sandboxes/{sid}/snapshots", {})  # writes the tree out
                api.call("DELETE", f"/v1/snapshots/{sn['id']}", ok=(200, 204))
                sids[name] = sid
            for count in (1, 10):
                xs = {name: [] for name in daemons}
                for _ in range(runs):
                    for name, (cv, api) in daemons.items():
                        t = time.perf_counter()
                        j = api.call("POST", f"/v1/sandboxes/{sids[name]}/fork", {"count": count})
                        xs[name].append((time.perf_counter() - t) * 1000)
                        assert len(j["sandboxes"]) == count
                        for s in j["sandboxes"]:
                            api.call("DELETE", "/v1/sandboxes/" + s["id"], ok=(200, 204))
                        time.sleep(0.3)  # deletions finish after the reply
                for name in daemons:
                    v = xs[name]
                    print(f"{name:4s} {size:5s} fork{count:<2d} p50 {pct(v, 50):7.1f} ms  min {min(v):7.1f}  "
                          f"max {max(v):7.1f}  ({runs} runs)", flush=True)
            for name, (cv, api) in daemons.items():
                api.call("DELETE", "/v1/sandboxes/" + sids[name], ok=(200, 204))
    finally:
        for cv, _ in daemons.values():
            cv.teardown()


if __name__ == "__main__":
    main()

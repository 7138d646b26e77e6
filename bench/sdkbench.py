#!/usr/bin/env python3
"""sdkbench: the SDKs' cost over what they wrap, in one run on one coved.

`true` in one running sandbox (the same request, {"cmd": ["true"]}, on one
kept-alive unix-socket connection):
  - through the Python SDK, sb.run(["true"]), next to libcove (apibench
    --exec, the same loop in C);
  - through the TypeScript SDK, sandbox.exec(["true"]), next to node's raw
    http.request (bench/sdkbench.mjs; needs sdk/js built).
Each round runs all four, one after another; the report gives each one's
p50 per round and the median over rounds, and the SDKs' overheads.

  sdkbench.py --socket S --apibench PATH [--n 200] [--rounds 10] [--out FILE]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))
from cove import Sandbox, Transport  # noqa: E402


def libcove_p50(apibench, sock, n):
    with tempfile.NamedTemporaryFile("r", suffix=".txt") as out:
        subprocess.run([apibench, "--socket", sock, "--cold", "0", "--paced", "0", "--exec", str(n), "--idle", "0",
                        "--out", out.name], check=True, stdout=subprocess.DEVNULL)
        kv = dict(line.split(None, 1) for line in out.read().splitlines() if line.strip())
        return float(kv["exec.p50"])


def python_p50(sock, n):
    t = Transport(socket_path=sock)
    sb = Sandbox.create(transport=t)
    try:
        for _ in range(10):
            sb.run(["true"])
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            r = sb.run(["true"])
            times.append((time.perf_counter() - t0) * 1000)
            assert r.exit_code == 0
        return statistics.median(times)
    finally:
        sb.destroy()
        t.close()


def node_p50s(sock, n):
    out = subprocess.run(["node", os.path.join(ROOT, "bench", "sdkbench.mjs"), sock, str(n)], check=True,
                         capture_output=True, text=True).stdout
    j = json.loads(out.strip().splitlines()[-1])
    return j["sdk_p50"], j["raw_p50"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--apibench", required=True)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--out")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(ROOT, "sdk", "js", "dist", "index.js")):
        sys.exit("sdkbench: sdk/js is not built: (cd sdk/js && npm ci && npm run build)")
    rows = {"libcove": [], "python": [], "node_raw": [], "node_sdk": []}
    for r in range(a.rounds):
        rows["libcove"].append(libcove_p50(a.apibench, a.socket, a.n))
        rows["python"].append(python_p50(a.socket, a.n))
        sdk, raw = node_p50s(a.socket, a.n)
        rows["node_sdk"].append(sdk)
        rows["node_raw"].append(raw)
        print("round %d: libcove %.3f  python-sdk %.3f  node-raw %.3f  ts-sdk %.3f ms (p50s)" % (
            r + 1, rows["libcove"][-1], rows["python"][-1], raw, sdk), flush=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    py_over, ts_over = med["python"] - med["libcove"], med["node_sdk"] - med["node_raw"]
    print("exec true, %d runs a series, %d rounds; median of the p50s:" % (a.n, a.rounds))
    print("  libcove %.3f ms   Python SDK %.3f ms   (+%.3f ms)" % (med["libcove"], med["python"], py_over))
    print("  node http %.3f ms   TypeScript SDK %.3f ms   (+%.3f ms)" % (med["node_raw"], med["node_sdk"], ts_over))
    if a.out:
        with open(a.out, "w") as f:
            for k, v in med.items():
                f.write("sdk.%s.p50 %.3f\n" % (k, v))
            f.write("sdk.python.over %.3f\nsdk.ts.over %.3f\n" % (py_over, ts_over))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""sdkbench: what the SDKs add to a call, in one run on one coved.

`true` in one running sandbox, the same request ({"cmd": ["true"]}) on a
kept-alive unix-socket connection each:
  - the Python SDK, sb.run(["true"]), next to libcove's cove_exec called
    in the same process (ctypes, libcove built as a shared library from
    src/client and src/common for this), alternating call by call;
  - the TypeScript SDK, sandbox.exec(["true"]), next to node's raw
    http.request, alternating call by call (bench/sdkbench.mjs; needs
    sdk/js built).
Alternating pairs see the same moment of a shared machine, so the median
of the pairs' differences is the SDK's cost even when the wall times move
with the neighbours' load. CPU time per call (this thread's, or node's
process.cpuUsage) is given beside: the client's own work, which hardly
depends on the load.

  sdkbench.py --socket S --build-dir DIR [--n 2000] [--out FILE]"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "sdk", "python"))
from cove import Sandbox, Transport  # noqa: E402

REQ = b'{"cmd":["true"]}'


class CoveError(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("code", ctypes.c_char * 32), ("message", ctypes.c_char * 512)]


class ExecResult(ctypes.Structure):
    _fields_ = [("exit_code", ctypes.c_int), ("signal", ctypes.c_int), ("timed_out", ctypes.c_bool)]


def build_libcove(build_dir):
    so = os.path.join(build_dir, "libcove-bench.so")
    srcs = [os.path.join(d, f) for d in (os.path.join(ROOT, "src", "client"), os.path.join(ROOT, "src", "common"))
            for f in sorted(os.listdir(d)) if f.endswith(".c")]
    subprocess.run(["cc", "-O2", "-std=gnu17", "-D_GNU_SOURCE", "-fPIC", "-shared", "-I" + os.path.join(ROOT, "include"),
                    "-I" + os.path.join(ROOT, "src")] + srcs + ["-ljansson", "-larchive", "-lacl", "-o", so], check=True)
    lib = ctypes.CDLL(so)
    lib.cove_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(CoveError)]
    lib.cove_exec.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p,
                              ctypes.POINTER(ExecResult), ctypes.POINTER(CoveError)]
    lib.cove_close.argtypes = [ctypes.c_void_p]
    return lib


def timed(fn):
    c0, t0 = time.thread_time(), time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000, (time.thread_time() - c0) * 1000


def python_vs_libcove(lib, sock, n):
    t = Transport(socket_path=sock)
    sb = Sandbox.create(transport=t)
    c, err, res = ctypes.c_void_p(), CoveError(), ExecResult()
    if lib.cove_open(sock.encode(), ctypes.byref(c), ctypes.byref(err)) < 0:
        sys.exit("sdkbench: cove_open: %s" % err.message.decode())
    sid = sb.id.encode()

    def via_libcove():
        if lib.cove_exec(c, sid, REQ, None, ctypes.byref(res), ctypes.byref(err)) < 0 or res.exit_code != 0:
            raise RuntimeError("libcove exec: %s" % err.message.decode())

    def via_sdk():
        if sb.run(["true"]).exit_code != 0:
            raise RuntimeError("sdk exec failed")

    try:
        rows = {"libcove": [], "python": []}
        for i in range(n + 20):
            pair = (("libcove", via_libcove), ("python", via_sdk)) if i % 2 else (("python", via_sdk), ("libcove", via_libcove))
            for name, fn in pair:
                w = timed(fn)
                if i >= 20:  # warm-up
                    rows[name].append(w)
        return rows
    finally:
        lib.cove_close(c)
        sb.destroy()
        t.close()


def summary(rows, base, sdk):
    wall = {k: statistics.median(w for w, _ in v) for k, v in rows.items()}
    cpu = {k: statistics.mean(c for _, c in v) for k, v in rows.items()}
    diff = statistics.median(s[0] - b[0] for s, b in zip(rows[sdk], rows[base]))
    return wall, cpu, diff


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--out")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(ROOT, "sdk", "js", "dist", "index.js")):
        sys.exit("sdkbench: sdk/js is not built: (cd sdk/js && npm ci && npm run build)")
    lib = build_libcove(a.build_dir)
    py = python_vs_libcove(lib, a.socket, a.n)
    js_out = subprocess.run(["node", os.path.join(ROOT, "bench", "sdkbench.mjs"), a.socket, str(a.n)], check=True,
                            capture_output=True, text=True).stdout
    js = {k: [tuple(x) for x in v] for k, v in json.loads(js_out.strip().splitlines()[-1]).items()}
    pw, pc, pd = summary(py, "libcove", "python")
    jw, jc, jd = summary(js, "node_raw", "node_sdk")
    print("exec true in a running sandbox, %d alternating pairs each (after 20 warm-up pairs):" % a.n)
    print("  libcove        p50 %.3f ms   CPU %.3f ms/call" % (pw["libcove"], pc["libcove"]))
    print("  Python SDK     p50 %.3f ms   CPU %.3f ms/call   pairs' difference, median: %+.3f ms" % (
        pw["python"], pc["python"], pd))
    print("  node http      p50 %.3f ms   CPU %.3f ms/call" % (jw["node_raw"], jc["node_raw"]))
    print("  TS SDK         p50 %.3f ms   CPU %.3f ms/call   pairs' difference, median: %+.3f ms" % (
        jw["node_sdk"], jc["node_sdk"], jd))
    if a.out:
        with open(a.out, "w") as f:
            for k, v in list(pw.items()) + list(jw.items()):
                f.write("sdk.%s.p50 %.3f\n" % (k, v))
            for k, v in list(pc.items()) + list(jc.items()):
                f.write("sdk.%s.cpu %.3f\n" % (k, v))
            f.write("sdk.python.over %.3f\nsdk.ts.over %.3f\nsdk.n %d\n" % (pd, jd, a.n))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""portbench: a sandbox's port through coved's port proxy next to the same
server reached directly (the sandbox's address on its veth), in one run.

  requests/s with wrk (keep-alive, 2 threads x 16 connections) and p50
  latency (1 connection), medians of rounds of both back to back, for two
  servers in the sandbox: tinyhttpd (C,
  epoll: the proxy's own cost shows) and Python's http.server (HTTP/1.1,
  a dev server as users run them);
  a WebSocket echo's round trip (32 bytes), median of many, from a Python
  client.

Usage: portbench.py --socket SOCK --tinyhttpd BIN --out FILE"""
import argparse
import base64
import hashlib
import http.client
import json
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from test_ports import WS_SERVER  # noqa: E402  (the suite's hand-written echo server)

PY_SERVER = r"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # its head and body are two writes
    def log_message(self, *a): pass
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
class S(http.server.ThreadingHTTPServer):
    request_queue_size = 512
    daemon_threads = True
S(("0.0.0.0", int(sys.argv[1])), H).serve_forever()
"""


class Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("cove", timeout=120)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self.path)


def api(sock, method, path, body=None, raw=None):
    c = Unix(sock)
    c.request(method, path, body=raw if raw is not None else (json.dumps(body) if body is not None else None))
    r = c.getresponse()
    data = r.read()
    c.close()
    assert r.status < 300, (method, path, r.status, data)
    return json.loads(data) if data else None


def wrk(url, host, threads, conns, secs, latency=False):
    cmd = ["wrk", "-t%d" % threads, "-c%d" % conns, "-d%ds" % secs, "-H", "Host: " + host]
    out = subprocess.run(cmd + (["--latency"] if latency else []) + [url], capture_output=True, text=True,
                         timeout=secs + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", out)
    assert not errors, out
    p50 = None
    m = re.search(r"\s50%\s+([\d.]+)(us|ms|s)\b", out)
    if m:
        p50 = float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]
    return rps, p50


def ws_rtts(addr, port, host, n):
    s = socket.create_connection((addr, port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    key = base64.b64encode(os.urandom(16))
    s.sendall(b"GET / HTTP/1.1\r\nHost: " + host.encode() + b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    mask, payload = b"\x01\x02\x03\x04", os.urandom(32)
    frame = b"\x82" + bytes([0x80 | 32]) + mask + bytes(x ^ mask[i % 4] for i, x in enumerate(payload))
    rtts = []
    for _ in range(n):
        t = time.perf_counter()
        s.sendall(frame)
        got = b""
        while len(got) < 34:
            got += s.recv(64)
        rtts.append(time.perf_counter() - t)
        assert got[2:] == payload
    s.close()
    return rtts


def wait_direct(addr, port):
    for _ in range(300):
        try:
            socket.create_connection((addr, port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the server on %s:%d did not start" % (addr, port))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--tinyhttpd", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--secs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ws", type=int, default=2000)
    a = ap.parse_args()
    caps = api(a.socket, "GET", "/v1/capabilities")
    assert caps["capabilities"]["ports"], "coved serves no port proxy"
    pport = caps["proxy"]["port"]
    sb = api(a.socket, "POST", "/v1/sandboxes", {})
    sid, addr = sb["id"], sb["network"]["address"]
    res = {}
    try:
        with open(a.tinyhttpd, "rb") as f:
            api(a.socket, "PUT", "/v1/sandboxes/%s/files?path=/tmp/tinyhttpd&mode=0755" % sid, raw=f.read())
        for cmd in (["/tmp/tinyhttpd", "8000"], ["python3", "-c", PY_SERVER, "8001"],
                    ["python3", "-c", WS_SERVER, "9000"]):
            api(a.socket, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": cmd, "background": True})
        hosts = {}
        for port in (8000, 8001, 9000):
            p = api(a.socket, "POST", "/v1/sandboxes/%s/ports" % sid, {"port": port, "public": True})
            hosts[port] = p["url"].split("//")[1].split("/")[0]
            wait_direct(addr, port)
        proxy_url = "http://127.0.0.1:%d/" % pport
        for name, port in (("tiny", 8000), ("py", 8001)):
            direct_url = "http://%s:%d/" % (addr, port)
            for url in (direct_url, proxy_url):
                wrk(url, hosts[port], 1, 4, 2)  # warm-up
            # rounds of direct then proxied, back to back: this machine's
            # load moves between rounds more than within one; medians
            runs = {"direct": ([], []), "proxy": ([], [])}
            for _ in range(a.rounds):
                for kind, url in (("direct", direct_url), ("proxy", proxy_url)):
                    runs[kind][0].append(wrk(url, hosts[port], 2, 16, a.secs)[0])
                    runs[kind][1].append(wrk(url, hosts[port], 1, 1, a.secs, latency=True)[1])
            for kind in ("direct", "proxy"):
                res["%s_%s_rps" % (name, kind)] = statistics.median(runs[kind][0])
                res["%s_%s_p50_s" % (name, kind)] = statistics.median(runs[kind][1])
            res["%s_ratio" % name] = res["%s_proxy_rps" % name] / res["%s_direct_rps" % name]
            res["%s_added_p50_us" % name] = (res["%s_proxy_p50_s" % name] - res["%s_direct_p50_s" % name]) * 1e6
        direct, proxied = [], []
        for _ in range(4):  # interleaved batches
            direct += ws_rtts(addr, 9000, hosts[9000], a.ws // 4)
            proxied += ws_rtts("127.0.0.1", pport, hosts[9000], a.ws // 4)
        res["ws_direct_p50_us"] = statistics.median(direct) * 1e6
        res["ws_proxy_p50_us"] = statistics.median(proxied) * 1e6
        res["ws_ratio"] = res["ws_proxy_p50_us"] / res["ws_direct_p50_us"]
    finally:
        api(a.socket, "DELETE", "/v1/sandboxes/" + sid)
    with open(a.out, "w") as f:
        for k, v in res.items():
            f.write("%s %.6g\n" % (k, v))
    for name, label in (("tiny", "tinyhttpd (C)"), ("py", "http.server (Python)")):
        print("%-22s direct %9.0f req/s  proxy %9.0f req/s  = %3.0f%% (target >= 80%%);  p50 %6.0f us -> %6.0f us "
              "(+%.0f us, target <= 100)" % (label, res[name + "_direct_rps"], res[name + "_proxy_rps"],
                                             100 * res[name + "_ratio"], res[name + "_direct_p50_s"] * 1e6,
                                             res[name + "_proxy_p50_s"] * 1e6, res[name + "_added_p50_us"]))
    print("WebSocket echo rtt p50: direct %.0f us, proxy %.0f us = %.2fx (target <= 1.2x)" %
          (res["ws_direct_p50_us"], res["ws_proxy_p50_us"], res["ws_ratio"]))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""portbench: a sandbox's port through coved's port proxy next to the same
server reached directly (the sandbox's address on its veth), in one run,
and next to two other ways in to the same server: Debian's nginx as a
reverse proxy (the peer: one worker, keep-alive upstream, no buffering) and
bench/tcprelay.c, a relay that moves bytes without reading them (the
floor: what any proxy in coved's place costs at least), both with
read/write and with splice.

  requests/s with wrk (keep-alive, --threads x --conns, default 2 x 16) and p50
  latency (1 connection), medians of rounds of every way in back to back,
  with --pin split: wrk on CPU 0, everything it talks to on CPU 1 (same:
  all on CPU 1); for two
  servers in the sandbox: tinyhttpd (C,
  epoll: the proxy's own cost shows) and Python's http.server (HTTP/1.1,
  a dev server as users run them);
  a WebSocket echo's round trip (32 bytes), median of many, from a Python
  client.

Usage: portbench.py --socket SOCK --tinyhttpd BIN [--relay BIN] [--pin none|split] --out FILE"""
import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from test_ports import WS_SERVER  # noqa: E402  (the suite's hand-written echo server)
sys.path.insert(0, HERE)
from benchlib import UnixHTTP  # noqa: E402

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


def api(sock, method, path, body=None, raw=None):
    c = UnixHTTP(sock, timeout=120)
    c.request(method, path, body=raw if raw is not None else (json.dumps(body) if body is not None else None))
    r = c.getresponse()
    data = r.read()
    c.close()
    assert r.status < 300, (method, path, r.status, data)
    return json.loads(data) if data else None


# --pin split: the client on one core, everything it talks to on the
# other; --pin same: everything on one core; --pin none: the scheduler's
CPUS = {"split": (0, 1), "same": (1, 1)}


def wrk(url, host, threads, conns, secs, pin, latency=False):
    cmd = ["wrk", "-t%d" % threads, "-c%d" % conns, "-d%ds" % secs, "-H", "Host: " + host]
    if pin in CPUS:
        cmd = ["taskset", "-c", str(CPUS[pin][0])] + cmd
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


NGINX_CONF = """
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    map $http_upgrade $connection_upgrade {{ default upgrade; '' ''; }}
{servers}
}}
"""
NGINX_SERVER = """
    upstream u{port} {{ server {addr}:{port}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{listen};
        location / {{
            proxy_pass http://u{port};
            proxy_http_version 1.1;
            proxy_buffering off;
            proxy_set_header Host $host;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header X-Forwarded-For $remote_addr;
        }}
    }}
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def pinned(cmd, pin):
    return ["taskset", "-c", str(CPUS[pin][1])] + cmd if pin in CPUS else cmd


def start_nginx(workdir, addr, ports, pin):
    """Debian's nginx as the peer: one worker, keep-alive upstreams, no
    buffering; on loopback with a config and prefix of its own. Its
    listening ports by upstream port, and the master's process."""
    listen = {port: free_port() for port in ports}
    os.makedirs(workdir, exist_ok=True)
    conf = os.path.join(workdir, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(dir=workdir, servers="".join(
            NGINX_SERVER.format(addr=addr, port=p, listen=listen[p]) for p in ports)))
    proc = subprocess.Popen(pinned(["nginx", "-p", workdir, "-e", os.path.join(workdir, "error.log"), "-c", conf,
                                    "-g", "daemon off;"], pin), stdin=subprocess.DEVNULL)
    return listen, proc


def start_relay(binary, addr, ports, pin, splice):
    listen = {port: free_port() for port in ports}
    maps = ["%d:%s:%d" % (listen[p], addr, p) for p in ports]
    proc = subprocess.Popen(pinned([binary] + (["--splice"] if splice else []) + maps, pin),
                            stdin=subprocess.DEVNULL)
    return listen, proc


def coved_pid(sock):
    """The coved serving sock: its command line names it."""
    for pid in os.listdir("/proc"):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"coved") and sock.encode() in args:
            return int(pid)
    raise RuntimeError("no coved with --socket " + sock)


def set_affinity(pid, cpus):
    """Every thread of pid on cpus; the mask it had."""
    old = os.sched_getaffinity(pid)
    for tid in os.listdir("/proc/%d/task" % pid):
        os.sched_setaffinity(int(tid), cpus)
    return old


def in_sandbox(cmd, pin):
    if pin not in CPUS:
        return cmd
    return ["python3", "-c", "import os, sys; os.sched_setaffinity(0, {%d}); os.execvp(sys.argv[1], sys.argv[1:])"
            % CPUS[pin][1]] + cmd


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", required=True)
    ap.add_argument("--tinyhttpd", required=True)
    ap.add_argument("--relay", help="bench/tcprelay.c built: the relay floor's rows")
    ap.add_argument("--out", required=True)
    ap.add_argument("--secs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ws", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=2, help="wrk's threads (requests/s)")
    ap.add_argument("--conns", type=int, default=16, help="wrk's connections (requests/s)")
    ap.add_argument("--pin", choices=("none", "split", "same"), default="none",
                    help="split: wrk and the WebSocket client on CPU 0; coved, the peers and the servers on CPU 1; "
                    "same: all on CPU 1")
    ap.add_argument("--workdir", default="/var/tmp/cove-portbench")
    a = ap.parse_args()
    caps = api(a.socket, "GET", "/v1/capabilities")
    assert caps["capabilities"]["ports"], "coved serves no port proxy"
    pport = caps["proxy"]["port"]
    pid = coved_pid(a.socket)
    old_mask = set_affinity(pid, {CPUS[a.pin][1]}) if a.pin in CPUS else None
    sb = api(a.socket, "POST", "/v1/sandboxes", {})
    sid, addr = sb["id"], sb["network"]["address"]
    res, procs = {}, []
    try:
        with open(a.tinyhttpd, "rb") as f:
            api(a.socket, "PUT", "/v1/sandboxes/%s/files?path=/tmp/tinyhttpd&mode=0755" % sid, raw=f.read())
        for cmd in (["/tmp/tinyhttpd", "8000"], ["python3", "-c", PY_SERVER, "8001"],
                    ["python3", "-c", WS_SERVER, "9000"]):
            api(a.socket, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": in_sandbox(cmd, a.pin), "background": True})
        hosts = {}
        for port in (8000, 8001, 9000):
            p = api(a.socket, "POST", "/v1/sandboxes/%s/ports" % sid, {"port": port, "public": True})
            hosts[port] = p["url"].split("//")[1].split("/")[0]
            wait_direct(addr, port)
        # each way in: (address, port) by the server's port
        ways = {"direct": {p: (addr, p) for p in hosts}, "cove": {p: ("127.0.0.1", pport) for p in hosts}}
        if shutil.which("nginx"):
            listen, proc = start_nginx(os.path.join(a.workdir, "nginx"), addr, sorted(hosts), a.pin)
            procs.append(proc)
            ways["nginx"] = {p: ("127.0.0.1", listen[p]) for p in hosts}
        else:
            print("portbench: no nginx (sh scripts/deps.sh): its rows are left out", file=sys.stderr)
        if a.relay:
            for name, splice in (("relay", False), ("splice", True)):
                listen, proc = start_relay(a.relay, addr, sorted(hosts), a.pin, splice)
                procs.append(proc)
                ways[name] = {p: ("127.0.0.1", listen[p]) for p in hosts}
        for way in ways.values():
            for where in way.values():
                wait_direct(*where)
        if a.pin in CPUS:
            os.sched_setaffinity(0, {CPUS[a.pin][0]})  # the WebSocket client
        res.update(measure(a, ways, hosts))
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(timeout=30)
        if old_mask:
            set_affinity(pid, old_mask)
        api(a.socket, "DELETE", "/v1/sandboxes/" + sid)
    with open(a.out, "w") as f:
        for k, v in res.items():
            f.write("%s %.6g\n" % (k, v))
    report(a, ways, res)


def measure(a, ways, hosts):
    res = {}
    for name, port in (("tiny", 8000), ("py", 8001)):
        urls = {w: "http://%s:%d/" % ways[w][port] for w in ways}
        for url in urls.values():
            wrk(url, hosts[port], 1, 4, 1, a.pin)  # warm-up
        # rounds of every way, back to back: this machine's load moves
        # between rounds more than within one; medians
        runs = {w: ([], []) for w in ways}
        for _ in range(a.rounds):
            for w, url in urls.items():
                runs[w][0].append(wrk(url, hosts[port], a.threads, a.conns, a.secs, a.pin)[0])
                runs[w][1].append(wrk(url, hosts[port], 1, 1, a.secs, a.pin, latency=True)[1])
        for w in ways:
            res["%s_%s_rps" % (name, w)] = statistics.median(runs[w][0])
            res["%s_%s_p50_us" % (name, w)] = statistics.median(runs[w][1]) * 1e6
            res["%s_%s_ratio" % (name, w)] = res["%s_%s_rps" % (name, w)] / res["%s_direct_rps" % name]
            res["%s_%s_added_p50_us" % (name, w)] = res["%s_%s_p50_us" % (name, w)] - res["%s_direct_p50_us" % name]
    rtts = {w: [] for w in ways}
    for _ in range(4):  # interleaved batches
        for w in ways:
            rtts[w] += ws_rtts(*ways[w][9000], hosts[9000], a.ws // 4)
    for w in ways:
        res["ws_%s_p50_us" % w] = statistics.median(rtts[w]) * 1e6
        res["ws_%s_ratio" % w] = res["ws_%s_p50_us" % w] / res["ws_direct_p50_us"]
    return res


def report(a, ways, res):
    print("wrk -t%d -c%d -d%ds (requests/s), -t1 -c1 (p50); pin %s; medians of %d rounds; WebSocket: %d round trips"
          % (a.threads, a.conns, a.secs, a.pin, a.rounds, a.ws))
    for name, label in (("tiny", "tinyhttpd (C)"), ("py", "http.server (Python)")):
        for w in ways:
            k = "%s_%s_" % (name, w)
            print("%-21s %-6s %8.0f req/s %4.0f%%   p50 %6.0f us (%+5.0f)" % (
                label, w, res[k + "rps"], 100 * res[k + "ratio"], res[k + "p50_us"], res[k + "added_p50_us"]))
    for w in ways:
        print("WebSocket echo rtt p50  %-6s %6.1f us  %.2fx" % (w, res["ws_%s_p50_us" % w], res["ws_%s_ratio" % w]))
    print("targets: cove >= 80% of direct req/s, <= +100 us p50, WebSocket <= 1.2x")


if __name__ == "__main__":
    main()

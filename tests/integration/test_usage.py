"""Usage: per sandbox CPU time, memory now and at its peak, tasks, disk and
network bytes (GET /v1/sandboxes/{id}/stats, "usage" in GET of a sandbox,
cove stats, cove info), and coved's metrics in Prometheus text (GET
/metrics). Each figure is shown to move when the sandbox does the work it
counts; traffic goes only to a test host in a network namespace of the
test's own (test_network's)."""
import json
import re
import subprocess

import covetest
import test_network as net_test
from covetest import wait_until

# The Prometheus text format, 0.0.4: comments, and samples with labels.
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"'
_VALUE = r"(?:[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?Inf|NaN)"
SAMPLE = re.compile(r"^(%s)(?:\{(%s(?:,%s)*)?\})? (%s)$" % (_NAME, _LABEL, _LABEL, _VALUE))
HELP = re.compile(r"^# HELP %s .*$" % _NAME)
TYPE = re.compile(r"^# TYPE %s (counter|gauge|histogram|summary|untyped)$" % _NAME)

# A server for the test host that sends 2 MB to each connection.
BIG_SERVER = r"""
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(8)
print("ready", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"x" * (2 << 20)); c.close()
"""
BIG_CLIENT = r"""
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=20)
n = 0
while True:
    b = c.recv(65536)
    if not b:
        break
    n += len(b)
print(n)
"""


def _stats(cv, sid):
    st, j = cv.api("GET", "/v1/sandboxes/%s/stats" % sid)
    assert st == 200, (st, j)
    return j


def _metrics(cv):
    c = cv.conn()
    try:
        c.request("GET", "/metrics")
        r = c.getresponse()
        text = r.read().decode()
        assert r.status == 200 and r.getheader("Content-Type").startswith("text/plain; version=0.0.4"), r.status
        return text
    finally:
        c.close()


def _parse(text):
    """{(name, labels): value}, asserting that every line is valid."""
    out = {}
    typed = set()
    for line in text.splitlines():
        if line.startswith("# HELP"):
            assert HELP.match(line), line
            continue
        if line.startswith("# TYPE"):
            assert TYPE.match(line), line
            typed.add(line.split()[2])
            continue
        m = SAMPLE.match(line)
        assert m, "not a Prometheus sample line: %r" % line
        name = m.group(1)
        assert any(name == t or name.startswith(t + "_") for t in typed), "no TYPE before " + name
        out[(name, m.group(2) or "")] = float(m.group(3))
    return out


def test_stats_fields_and_errors(cv):
    sid = cv.create(memory="256M", disk="128M", network="none")
    try:
        s = _stats(cv, sid)
        for k in ("cpu_ns", "memory_bytes", "memory_peak_bytes", "pids", "disk_bytes"):
            assert isinstance(s[k], int) and s[k] >= 0, (k, s)
        assert s["id"] == sid and s["memory_limit_bytes"] == 256 << 20 and s["disk_limit_bytes"] == 128 << 20, s
        assert s["pids"] >= 1 and s["memory_peak_bytes"] >= s["memory_bytes"], s
        assert s["net_rx_bytes"] is None and s["net_tx_bytes"] is None, s  # network none: no veth
        st, j = cv.api("GET", "/v1/sandboxes/%s" % sid)
        assert st == 200 and j["usage"]["id"] == sid and "cpu_ns" in j["usage"], j
        st, j = cv.api("GET", "/v1/sandboxes")
        assert "usage" not in j["sandboxes"][0], j
        st, j = cv.api("GET", "/v1/sandboxes/sb_aaaaaaaaaaaa/stats")
        assert st == 404, (st, j)
        st, j = cv.api("GET", "/v1/sandboxes/%s/stats?x=1" % sid)
        assert st == 400 and "x" in j["error"]["message"], (st, j)
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_cpu_memory_disk_grow_with_work(cv):
    sid = cv.create(memory="512M", network="none")
    try:
        a = _stats(cv, sid)
        r = cv.sh(sid, ["python3", "-c", "import time\nx = bytearray(200 << 20)\nfor i in range(0, len(x), 4096): x[i] = 1\n"
                                         "t = time.process_time()\nwhile time.process_time() - t < 0.5: pass"])
        assert r["exit_code"] == 0, r
        cv.sh(sid, ["sh", "-c", "dd if=/dev/zero of=/root/f bs=1M count=30 2>/dev/null"])
        b = _stats(cv, sid)
        assert b["cpu_ns"] >= a["cpu_ns"] + 400_000_000, (a, b)
        assert b["memory_peak_bytes"] >= a["memory_peak_bytes"] + (150 << 20), (a, b)
        assert b["disk_bytes"] >= a["disk_bytes"] + (29 << 20), (a, b)
        assert b["at"] >= a["at"]
        # Memory now follows what is held: a process that holds 100 MB.
        cv.exec(sid, ["python3", "-c", "import time\nx = bytearray(100 << 20)\n"
                                       "for i in range(0, len(x), 4096): x[i] = 1\ntime.sleep(600)"], background=True)
        assert wait_until(lambda: _stats(cv, sid)["memory_bytes"] >= b["memory_bytes"] + (90 << 20), 30), \
            (b, _stats(cv, sid))
        assert _stats(cv, sid)["pids"] >= 2
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_network_bytes_grow_with_a_transfer(cv):
    with net_test._internet() as ns:
        port = net_test.PORT + 1
        srv = subprocess.Popen(["ip", "netns", "exec", ns, "python3", "-c", BIG_SERVER, net_test.HOST1,
                                str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        sid = None
        try:
            assert srv.stdout.readline().strip() == b"ready"
            sid = cv.create()
            a = _stats(cv, sid)
            assert isinstance(a["net_rx_bytes"], int) and isinstance(a["net_tx_bytes"], int), a
            r = cv.exec(sid, ["python3", "-c", BIG_CLIENT, net_test.HOST1, str(port)], timeout=60)
            assert r["exit_code"] == 0 and r["stdout"].strip() == str(2 << 20), r
            b = _stats(cv, sid)
            assert b["net_rx_bytes"] >= a["net_rx_bytes"] + (2 << 20), (a, b)
            assert b["net_tx_bytes"] > a["net_tx_bytes"], (a, b)
        finally:
            srv.kill()
            srv.wait()
            if sid:
                cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_metrics_parse_and_count_up(cv):
    sid = cv.create(network="none")
    try:
        m0 = _parse(_metrics(cv))
        assert m0[("cove_sandboxes", 'state="running"')] >= 1, m0
        states = sorted(l for (n, l) in m0 if n == "cove_sandboxes")
        assert 'state="stopped"' in states and not any("deleting" in l for l in states), states
        assert len(states) == len(set(states)), states
        assert cv.exec(sid, ["true"])["exit_code"] == 0
        assert cv.api("GET", "/v1/sandboxes/sb_aaaaaaaaaaaa")[0] == 404
        other = cv.create(network="none")
        cv.api("DELETE", "/v1/sandboxes/" + other)
        text = _metrics(cv)
        m1 = _parse(text)
        assert m1[("cove_http_requests_total", "")] >= m0[("cove_http_requests_total", "")] + 4, (m0, m1)
        k2, k4 = ("cove_http_responses_total", 'code="2xx"'), ("cove_http_responses_total", 'code="4xx"')
        assert m1[k2] >= m0[k2] + 3 and m1[k4] >= m0[k4] + 1, (m0[k2], m1[k2], m0[k4], m1[k4])
        assert m1[("cove_http_errors_total", 'code="4xx"')] == m1[k4]
        ex = ("cove_exec_seconds_count", "")
        assert m1[ex] >= m0[ex] + 1, (m0[ex], m1[ex])
        cr = ("cove_sandbox_create_seconds_count", 'kind="new"')
        assert m1[cr] >= m0[cr] + 1, (m0[cr], m1[cr])
        # Buckets are cumulative and end at the count.
        buckets = [v for (n, l), v in sorted(m1.items()) if n == "cove_exec_seconds_bucket"]
        assert m1[("cove_exec_seconds_bucket", 'le="+Inf"')] == m1[ex], m1
        assert all(v <= m1[ex] for v in buckets)
        # Per sandbox, labelled by its ID.
        lab = 'id="%s"' % sid
        for n in ("cove_sandbox_cpu_seconds_total", "cove_sandbox_memory_bytes", "cove_sandbox_pids",
                  "cove_sandbox_disk_bytes"):
            assert (n, lab) in m1, (n, text)
        assert ("cove_sandbox_network_receive_bytes_total", lab) not in m1  # network none
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_cli_stats_and_info(cv):
    sid = cv.create(disk="64M", network="none")
    try:
        r = cv.cli("stats", "--no-stream", sid)
        assert r.returncode == 0, r
        lines = r.stdout.decode().splitlines()
        assert lines[0].split()[:3] == ["ID", "CPU", "%"] and lines[1].startswith(sid) and "/ 64M" in lines[1], lines
        # Not a terminal: one reading even without --no-stream; all sandboxes without IDs.
        r = cv.cli("stats")
        assert r.returncode == 0 and sid in r.stdout.decode(), r
        r = cv.cli("--json", "stats", sid)
        assert r.returncode == 0, r
        j = json.loads(r.stdout)
        assert j[0]["id"] == sid and j[0]["disk_limit_bytes"] == 64 << 20 and "cpu_percent" in j[0], j
        r = cv.cli("stats", "sb_aaaaaaaaaaaa")
        assert r.returncode == 1 and b"sb_aaaaaaaaaaaa" in r.stderr, r
        r = cv.cli("info", sid)
        assert r.returncode == 0 and json.loads(r.stdout)["usage"]["disk_limit_bytes"] == 64 << 20, r
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_cli_stats_refreshes_on_a_terminal(cv):
    """On a terminal, cove stats redraws its table (home, clear) each
    second until interrupted; --no-stream there prints one."""
    import os
    import pty
    import signal
    import time
    sid = cv.create(network="none")
    try:
        def run(*args, seconds):
            master, slave = pty.openpty()
            env = dict(os.environ, COVE_SOCKET=cv.socket, COVE_DATA=cv.data)
            p = subprocess.Popen([covetest.COVE, "stats", *args, sid], stdout=slave, stderr=slave,
                                 stdin=subprocess.DEVNULL, env=env)
            os.close(slave)
            out = b""
            deadline = time.time() + seconds
            while time.time() < deadline and p.poll() is None:
                time.sleep(0.1)
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
            rc = p.wait(timeout=30)
            while True:
                try:
                    b = os.read(master, 65536)
                except OSError:
                    break
                if not b:
                    break
                out += b
            os.close(master)
            return rc, out.decode()
        rc, out = run(seconds=4)
        assert rc == 0, (rc, out)
        assert out.count("\x1b[H\x1b[J") >= 2 and out.count(sid) >= 2, out
        rc, out = run("--no-stream", seconds=30)
        assert rc == 0 and "\x1b[H" not in out and out.count(sid) == 1, out
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)

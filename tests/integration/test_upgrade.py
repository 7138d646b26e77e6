"""A terminal over an HTTP upgrade, at the socket level: GET .../attach with
"Connection: Upgrade" and "Upgrade: tcp" is answered 101, then the
connection carries the terminal's raw bytes both ways (a half-close of the
client is its EOF, ^D), coved closes it after the last output of a process
that has ended; bad upgrades are 400, unknown processes 404, a process
without a terminal 409, and without the headers the route is the NDJSON
stream it was. Nothing stays behind in coved (fds, memory), and coved's
connection limits do not cut a terminal that stays open."""
import json
import os
import socket
import subprocess
import time

from covetest import COVE, wait_until
from test_access import _coved


def _start(cv, sid, cmd, tty=True):
    st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": cmd, "tty": tty, "background": True})
    assert st == 200, (st, j)
    return j["pid"]


def _request(sid, pid, query="", headers=(("Connection", "Upgrade"), ("Upgrade", "tcp")), token=None):
    head = "GET /v1/sandboxes/%s/processes/%s/attach%s HTTP/1.1\r\nHost: cove\r\n" % (sid, pid, query)
    for k, v in headers:
        head += "%s: %s\r\n" % (k, v)
    if token:
        head += "Authorization: Bearer %s\r\n" % token
    return (head + "\r\n").encode()


def _head(s):
    """The answer's head, read a byte at a time (what follows is raw):
    (status, {lower-case name: value})."""
    buf = b""
    while not buf.endswith(b"\r\n\r\n"):
        b = s.recv(1)
        assert b, ("closed in the head", buf)
        buf += b
    lines = buf.decode().split("\r\n")
    headers = {}
    for line in lines[1:]:
        if line:
            k, v = line.split(":", 1)
            headers[k.strip().lower()] = v.strip()
    return int(lines[0].split()[1]), headers


def _attach(cv, sid, pid, query="", extra=b""):
    """An upgraded connection (its 101 checked), extra sent right behind
    the request."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(cv.socket)
    s.sendall(_request(sid, pid, query) + extra)
    st, h = _head(s)
    assert st == 101 and h["upgrade"] == "tcp" and h["connection"].lower() == "upgrade", (st, h)
    return s


def _read_until(s, want, timeout=15):
    out, deadline = b"", time.time() + timeout
    while want not in out and time.time() < deadline:
        d = s.recv(65536)
        if not d:
            break
        out += d
    assert want in out, (want, out)
    return out


def _read_to_end(s):
    out = b""
    while True:
        d = s.recv(65536)
        if not d:
            return out
        out += d


def _proc(cv, sid, pid, wait=10):
    st, j = cv.api("GET", "/v1/sandboxes/%s/processes/%s?wait=%s" % (sid, pid, wait))
    assert st == 200, (st, j)
    return j


def _refused(cv, sid, pid, headers, query=""):
    """The status and error of an answer that is not an upgrade; the
    connection goes on as HTTP (a health check on it answers)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(cv.socket)
    try:
        s.sendall(_request(sid, pid, query, headers))
        f = s.makefile("rb")
        st, h = _head_file(f)
        body = json.loads(f.read(int(h["content-length"])))
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: cove\r\n\r\n")
        st2, _ = _head_file(f)
        assert st2 == 200, st2
        return st, body["error"]
    finally:
        s.close()


def _head_file(f):
    line = f.readline()
    headers = {}
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        k, v = h.decode().split(":", 1)
        headers[k.strip().lower()] = v.strip()
    return int(line.split()[1]), headers


def _fds(cv):
    return len(os.listdir("/proc/%d/fd" % cv.pid()))


def _rss_kb(cv):
    with open("/proc/%d/status" % cv.pid()) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_upgrade_carries_the_terminal_both_ways(cv):
    sid = cv.create()
    try:
        pid = _start(cv, sid, "echo ready; stty -echo; read line; echo got=$line; cat; echo done; exit 7")
        # Typed right behind the request, before the 101 came: not lost.
        s = _attach(cv, sid, pid, extra=b"first\n")
        out = _read_until(s, b"got=first\r\n")
        assert b"ready\r\n" in out, out  # replayed: it may have come before the attach
        s.sendall(b"hello\n")
        _read_until(s, b"hello\r\n")
        # The half-close is the terminal's EOF: cat ends, the shell goes on
        # and ends; coved closes the connection after its last output.
        s.shutdown(socket.SHUT_WR)
        assert _read_to_end(s).endswith(b"done\r\n")
        s.close()
        p = _proc(cv, sid, pid)
        assert p["state"] == "exited" and p["exit_code"] == 7, p
        # An ended terminal: its tail, then the close at once.
        s = _attach(cv, sid, pid)
        assert _read_to_end(s).endswith(b"done\r\n")
        s.close()
        # replay=0: only what comes after the attach.
        pid = _start(cv, sid, "echo before; read x; echo after=$x")
        assert wait_until(lambda: b"before" in _tail(cv, sid, pid), 10)
        s = _attach(cv, sid, pid, "?replay=0")
        s.sendall(b"1\n")
        out = _read_to_end(s)
        assert b"after=1" in out and b"before" not in out, out
        s.close()
        # Ctrl-C is a byte, which the terminal turns into SIGINT.
        pid = _start(cv, sid, "echo go; sleep 100")
        s = _attach(cv, sid, pid)
        _read_until(s, b"go\r\n")
        time.sleep(0.3)
        s.sendall(b"\x03")
        _read_to_end(s)
        s.close()
        assert _proc(cv, sid, pid)["signal"] == "INT"
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def _tail(cv, sid, pid):
    c = cv.conn(10)
    c.request("GET", "/v1/sandboxes/%s/processes/%s/attach" % (sid, pid))
    r = c.getresponse()
    data = b""
    for line in r:
        e = json.loads(line)
        if e["type"] == "stdout":
            data += e["data"].encode()
        if len(data) > 0:
            break
    c.close()
    return data


def test_upgrade_refusals(cv):
    sid = cv.create()
    try:
        tty = _start(cv, sid, "sleep 100")
        pipe = _start(cv, sid, "sleep 100", tty=False)
        for headers, want in (
                ((("Connection", "Upgrade"), ("Upgrade", "websocket")), "only to 'tcp'"),
                ((("Connection", "keep-alive"), ("Upgrade", "tcp")), "needs both"),
                ((("Connection", "Upgrade"),), "needs both"),
                ((("Connection", "Upgrade"), ("Upgrade", "")), "needs both")):
            st, e = _refused(cv, sid, tty, headers)
            assert st == 400 and e["code"] == "invalid_argument" and want in e["message"], (headers, st, e)
        up = (("Connection", "keep-alive, Upgrade"), ("Upgrade", "TCP"))
        st, e = _refused(cv, sid, tty, up, "?foreground=maybe")
        assert st == 400 and "foreground" in e["message"], (st, e)
        st, e = _refused(cv, sid, 99999, up)
        assert st == 404 and e["code"] == "not_found", (st, e)
        st, e = _refused(cv, "sb_nosuchsandbox", tty, up)
        assert st == 404 and e["code"] == "not_found", (st, e)
        st, e = _refused(cv, sid, pipe, up)
        assert st == 409 and "not a terminal" in e["message"], (st, e)
        # Without the headers: the NDJSON stream, as before.
        c = cv.conn(10)
        c.request("GET", "/v1/sandboxes/%s/processes/%s/attach" % (sid, tty))
        r = c.getresponse()
        assert r.status == 200 and r.getheader("Content-Type") == "application/x-ndjson"
        assert json.loads(r.readline())["type"] == "start"
        c.close()
        # Nothing refused was changed: both still run.
        for pid in (tty, pipe):
            assert _proc(cv, sid, pid, wait=0)["state"] == "running"
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_upgrade_client_leaving(cv):
    """A client gone: an ordinary attach leaves the terminal running; a
    foreground one takes it along (SIGKILL), but its half-close is only the
    terminal's EOF."""
    sid = cv.create()
    try:
        pid = _start(cv, sid, "echo up; sleep 100")
        s = _attach(cv, sid, pid)
        _read_until(s, b"up\r\n")
        s.close()
        time.sleep(0.5)
        assert _proc(cv, sid, pid, wait=0)["state"] == "running"
        s = _attach(cv, sid, pid, "?foreground=1")
        _read_until(s, b"up\r\n")
        s.close()
        p = _proc(cv, sid, pid)
        assert p["state"] == "exited" and p["signal"] == "KILL", p
        pid = _start(cv, sid, "cat; echo eof")
        s = _attach(cv, sid, pid, "?foreground=1")
        s.sendall(b"x\n")
        _read_until(s, b"x\r\n")
        s.shutdown(socket.SHUT_WR)
        assert _read_to_end(s).endswith(b"eof\r\n")
        s.close()
        assert _proc(cv, sid, pid)["exit_code"] == 0
        # A sandbox deleted under an attached terminal: its connection closes.
        pid = _start(cv, sid, "echo up; sleep 100")
        s = _attach(cv, sid, pid)
        _read_until(s, b"up\r\n")
        assert cv.api("DELETE", "/v1/sandboxes/" + sid)[0] == 200
        assert _read_to_end(s) == b""
        s.close()
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_upgrade_leaves_nothing_behind(cv):
    """Many upgraded connections, ended every way (the client's close, its
    half-close and then the process's end, a foreground client's close):
    coved's fds come back to where they were, and its memory does not grow
    with their number."""
    sid = cv.create()
    echo = "while read l; do echo \"<$l>\"; done"
    try:
        state = {"pid": _start(cv, sid, echo)}

        def run(n):
            for i in range(n):
                how = i % 3
                s = _attach(cv, sid, state["pid"], "?replay=0" + ("&foreground=1" if how == 2 else ""))
                s.sendall(b"%d\n" % i)
                _read_until(s, b"<%d>" % i)
                if how == 1:  # ^D: the loop's read gets nothing, it ends
                    s.shutdown(socket.SHUT_WR)
                    _read_to_end(s)
                s.close()
                if how:
                    assert _proc(cv, sid, state["pid"])["state"] == "exited"
                    state["pid"] = _start(cv, sid, echo)

        # Warm up: libevent's and the allocator's first growth, and the 32
        # ended processes a sandbox keeps listed (each with its output).
        run(60)
        fds0, rss0 = _fds(cv), _rss_kb(cv)
        run(150)
        assert wait_until(lambda: _fds(cv) <= fds0, 10), (fds0, _fds(cv))
        assert _rss_kb(cv) - rss0 < 4096, (rss0, _rss_kb(cv))
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_upgrade_outlives_connection_limits(cv):
    """Over TCP with the token, on a coved whose idle and request timeouts
    are a second: an upgraded connection quiet for three seconds still
    works. And `cove shell` over TCP."""
    with _coved("--idle-timeout", "1", "--request-timeout", "1") as own:
        sid = own.create()
        pid = _start(own, sid, "stty -echo; while read l; do echo \"<$l>\"; done")
        s = socket.create_connection(("127.0.0.1", own.port), timeout=30)
        s.sendall(_request(sid, pid, token=own.token))
        st, _ = _head(s)
        assert st == 101, st
        time.sleep(3)
        s.sendall(b"still\n")
        _read_until(s, b"<still>")
        s.close()
        # The CLI on TCP: the start, the upgrade and the wait all carry
        # the token.
        env = dict(os.environ, COVE_HOST=own.addr, COVE_TOKEN=own.token)
        env.pop("COVE_SOCKET", None)
        r = subprocess.run([COVE, "shell", sid, "--", "sh", "-c", "read x; echo x=$x; exit 4"], input=b"42\n",
                           capture_output=True, env=env, timeout=60)
        assert r.returncode == 4 and b"x=42" in r.stdout, r


def test_terminal_eof_is_a_character(cv):
    """A terminal's EOF (stdin's "eof", or an upgraded client's half-close)
    is its ^D, typed: it ends a read, and the terminal takes input after
    it (a second stdin request after an "eof" used to crash coved)."""
    sid = cv.create()
    try:
        pid = _start(cv, sid, "stty -echo; cat; echo mid; cat; echo end")
        path = "/v1/sandboxes/%s/processes/%s/stdin" % (sid, pid)
        for data in ("a\n", "b\n"):
            st, j = cv.api("POST", path, {"data": data, "eof": True})
            assert st == 200, (st, j)
        p = _proc(cv, sid, pid)
        assert p["state"] == "exited" and p["exit_code"] == 0, p
        st, j = cv.api("POST", path, {"data": "c"})
        assert st == 409 and "ended" in j["error"]["message"], (st, j)
        s = _attach(cv, sid, pid)
        out = _read_to_end(s)
        s.close()
        # (the terminal echoes what was typed before the stty ran)
        assert out.endswith(b"a\r\nmid\r\nb\r\nend\r\n"), out
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)

"""Access to coved's API: the TCP listener (only with --listen) and its bearer
token, checked on every request; the token file's checks; the limits on both
listeners (header and body size, connections, idle connections, the time a
request may take to come) against oversized and slow clients; streams that
outlive those limits; a TCP client leaving mid-stream; the CLI over TCP.
Every test runs its own coved with short limits, on loopback."""
import contextlib
import http.client
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time

import covetest
from covetest import wait_until


# ---------------------------------------------------------------- helpers

def _free_port(family=socket.AF_INET, host="127.0.0.1"):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.bind((host, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _token(cv):
    with open(os.path.join(cv.data, "token")) as f:
        return f.read().strip()


@contextlib.contextmanager
def _coved(*flags, listen=True, host="127.0.0.1"):
    """A private coved on TCP (host, a free port), with flags: yields it,
    with .port and .token (the one it made in <data>/token)."""
    port = _free_port(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    addr = ("[%s]:%d" if ":" in host else "%s:%d") % (host, port)
    cv = covetest.Coved(args=(["--listen", addr] if listen else []) + list(flags))
    try:
        cv.start()
        cv.host, cv.port, cv.addr = host, port, addr
        cv.token = _token(cv) if listen and "--token-file" not in flags else None
        yield cv
    finally:
        cv.teardown()


def _tcp(cv, method, path, body=None, token=None, headers=None, timeout=60):
    """One request over TCP: (status, parsed JSON or None, headers)."""
    c = http.client.HTTPConnection(cv.host, cv.port, timeout=timeout)
    try:
        h = dict(headers or {})
        if token is not None:
            h["Authorization"] = "Bearer " + token
        c.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=h)
        r = c.getresponse()
        text = r.read()
        try:
            j = json.loads(text)
        except ValueError:
            j = None
        return r.status, j, dict(r.getheaders())
    finally:
        c.close()


def _unauthorized(st, j, what):
    assert st == 401, (what, st, j)
    assert j["error"]["code"] == "unauthorized" and j["error"]["message"], (what, j)


def _ids(cv):
    st, j = cv.api("GET", "/v1/sandboxes")
    assert st == 200, (st, j)
    return sorted(s["id"] for s in j["sandboxes"])


def _tcp_listen_ports(pid):
    """The TCP ports process pid listens on (its sockets in LISTEN state)."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            m = re.match(r"socket:\[(\d+)\]", os.readlink("/proc/%d/fd/%s" % (pid, fd)))
        except OSError:
            continue
        if m:
            inodes.add(m.group(1))
    ports = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:
                    ports.append(int(cols[1].rsplit(":", 1)[1], 16))
    return sorted(ports)


def _api_tcp_ports(cv):
    """The TCP ports coved listens on but its port proxy's (which listens on
    loopback by default: --proxy-listen)."""
    caps = cv.api("GET", "/v1/capabilities")[1]
    proxy = (caps.get("proxy") or {}).get("port")
    return [p for p in _tcp_listen_ports(cv.pid()) if p != proxy]


def _nfds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def _connect(cv):
    return socket.create_connection((cv.host, cv.port), timeout=30)


def _closed_at(s, t0, limit):
    """Wait (up to limit seconds) for the server to close s; returns the
    seconds from t0 at which it did, with what it said before."""
    s.settimeout(limit)
    data = b""
    try:
        while True:
            d = s.recv(4096)
            if not d:
                break
            data += d
    except ConnectionResetError:
        pass
    return time.time() - t0, data


class _Prober(threading.Thread):
    """A well-behaved client: a request over TCP every 0.2 s until stopped;
    records how long each one took and any failure."""

    def __init__(self, cv):
        super().__init__(daemon=True)
        self.cv, self.stop, self.times, self.errors = cv, threading.Event(), [], []

    def run(self):
        while not self.stop.is_set():
            t0 = time.time()
            try:
                st, j, _ = _tcp(self.cv, "GET", "/v1/health", token=self.cv.token, timeout=10)
                if st != 200:
                    self.errors.append((st, j))
            except OSError as e:
                self.errors.append(repr(e))
            self.times.append(time.time() - t0)
            self.stop.wait(0.2)

    def finish(self):
        self.stop.set()
        self.join(15)
        assert not self.errors, self.errors
        assert len(self.times) >= 5, self.times
        assert max(self.times) < 2.0, self.times


# ---------------------------------------------------------------- the token

def test_tcp_needs_the_token(cv):
    with _coved() as own:
        tok = own.token
        assert re.match(r"^[0-9a-f]{64}$", tok), tok
        info = os.stat(os.path.join(own.data, "token"))
        assert stat.S_IMODE(info.st_mode) == 0o600, oct(info.st_mode)
        # One TCP port, the one asked for; the socket keeps its mode and
        # needs no token.
        assert _api_tcp_ports(own) == [own.port], (_tcp_listen_ports(own.pid()), own.port)
        assert stat.S_IMODE(os.stat(own.socket).st_mode) == 0o660
        assert own.api("GET", "/v1/health")[0] == 200

        sid = own.create(name="keep")
        before = _ids(own)
        bad = {"none": {}, "wrong": {"Authorization": "Bearer " + "x" * 64},
               "empty": {"Authorization": "Bearer "}, "no scheme": {"Authorization": tok},
               "basic": {"Authorization": "Basic " + tok},
               "one byte off": {"Authorization": "Bearer " + tok[:-1] + ("0" if tok[-1] != "0" else "1")},
               "prefix": {"Authorization": "Bearer " + tok[:-1]},
               "longer": {"Authorization": "Bearer " + tok + "0"},
               "twice": {"Authorization": "Bearer " + tok + tok}}
        for what, h in bad.items():
            for method, path, body in (("GET", "/v1/health", None), ("GET", "/v1/sandboxes", None),
                                       ("POST", "/v1/sandboxes", {"name": "intruder"}),
                                       ("DELETE", "/v1/sandboxes/" + sid, None),
                                       ("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "touch /tmp/pwned"}),
                                       ("GET", "/v1/nope", None)):
                st, j, hdrs = _tcp(own, method, path, body, headers=h)
                _unauthorized(st, j, (what, method, path))
                assert hdrs.get("WWW-Authenticate") == "Bearer" and hdrs.get("Connection") == "close", hdrs
        # Nothing happened: no sandbox made or deleted, no command run.
        assert _ids(own) == before
        assert own.exec(sid, "test -e /tmp/pwned; echo $?")["stdout"] == "1\n"

        # The right token: the whole API, over one kept-alive connection too.
        st, j, _ = _tcp(own, "GET", "/v1/health", token=tok)
        assert st == 200 and j["status"] == "ok", (st, j)
        st, j, _ = _tcp(own, "GET", "/v1/health", headers={"Authorization": "bearer  " + tok})
        assert st == 200, (st, j)  # the scheme is case-insensitive
        st, sb, _ = _tcp(own, "POST", "/v1/sandboxes", {"name": "over-tcp"}, token=tok)
        assert st == 201, (st, sb)
        c = http.client.HTTPConnection("127.0.0.1", own.port, timeout=60)
        auth = {"Authorization": "Bearer " + tok}
        for i in range(3):
            c.request("POST", "/v1/sandboxes/%s/exec" % sb["id"], body=json.dumps({"cmd": "echo hi %d" % i}),
                      headers=auth)
            r = c.getresponse()
            j = json.loads(r.read())
            assert r.status == 200 and j["stdout"] == "hi %d\n" % i, (r.status, j)
        c.close()
        st, j, _ = _tcp(own, "DELETE", "/v1/sandboxes/" + sb["id"], token=tok)
        assert st == 200, (st, j)
        assert _ids(own) == before


def test_tcp_over_ipv6(cv):
    with _coved(host="::1") as own:
        assert _api_tcp_ports(own) == [own.port]
        _unauthorized(*_tcp(own, "GET", "/v1/health")[:2], "no token")
        st, j, _ = _tcp(own, "GET", "/v1/health", token=own.token)
        assert st == 200, (st, j)


def test_no_tcp_port_without_listen(cv):
    # The shared coved was started without --listen; the tests above show
    # that the same check does find the port of one started with it.
    assert _api_tcp_ports(cv) == []
    assert not os.path.exists(os.path.join(cv.data, "token"))


def _start_fails(*flags):
    """Run coved with flags on a scratch data root: it must refuse to start.
    Returns its output."""
    d = tempfile.mkdtemp(prefix="cove-it-", dir="/var/tmp")
    try:
        r = subprocess.run([covetest.COVED, "--data", os.path.join(d, "data"), "--socket",
                            os.path.join(d, "cove.sock")] + list(flags),
                           capture_output=True, text=True, timeout=60)
        assert r.returncode != 0, (flags, r)
        # Refused before anything was built: no pool, no socket.
        assert not os.path.exists(os.path.join(d, "cove.sock")), flags
        assert not os.path.exists(os.path.join(d, "data", "pool.img")), flags
        return r.stderr + r.stdout
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_token_file_is_checked(cv):
    d = tempfile.mkdtemp(prefix="cove-it-", dir="/var/tmp")
    try:
        port = _free_port()
        listen = ["--listen", "127.0.0.1:%d" % port]

        def token_file(name, content, mode):
            p = os.path.join(d, name)
            with open(p, "w") as f:
                f.write(content)
            os.chmod(p, mode)
            return p

        good = "k" * 40
        cases = [(token_file("t644", good, 0o644), "mode 0644"),
                 (token_file("t640", good, 0o640), "mode 0640"),
                 (token_file("t604", good, 0o604), "mode 0604"),
                 (token_file("t620", good, 0o620), "mode 0620"),
                 (token_file("short", "k" * 31 + "\n", 0o600), "32 to 4096 bytes long, not 31"),
                 (token_file("empty", "", 0o600), "not 0"),
                 (token_file("space", "k" * 20 + " " + "k" * 20, 0o600), "visible ASCII"),
                 (token_file("ctrl", "k" * 20 + "\x01" + "k" * 20, 0o600), "visible ASCII"),
                 (os.path.join(d, "missing"), "No such file"),
                 (d, "not a regular file")]
        for path, why in cases:
            out = _start_fails(*listen, "--token-file", path)
            assert why in out and "token" in out, (path, why, out)
        other = token_file("other", good, 0o600)
        os.chown(other, 1000, 1000)
        out = _start_fails(*listen, "--token-file", other)
        assert "belongs to uid 1000" in out, out

        # Flags that make no sense, or a port that is taken.
        assert "--listen" in _start_fails("--token-file", token_file("ok", good, 0o600))
        for bad in ("localhost", "127.0.0.1", "example.com:80", "127.0.0.1:70000", "::1:80", "[::1]"):
            out = _start_fails("--listen", bad)
            assert "--listen" in out and bad in out, (bad, out)
        for flag, value in (("--max-connections", "0"), ("--max-connections", "x"), ("--idle-timeout", "0"),
                            ("--request-timeout", "-1"), ("--max-body-bytes", "lots"),
                            ("--max-header-bytes", "0")):
            out = _start_fails(*listen, flag, value)
            assert flag in out, (flag, value, out)
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        try:
            out = _start_fails("--listen", "127.0.0.1:%d" % taken.getsockname()[1])
            assert "Address already in use" in out, out
        finally:
            taken.close()

        # A good file: with a newline at its end, 0600, coved's own.
        path = token_file("good", good + "\n", 0o600)
        with _coved("--token-file", path) as own:
            _unauthorized(*_tcp(own, "GET", "/v1/health", token=good[:-1])[:2], "a prefix")
            st, j, _ = _tcp(own, "GET", "/v1/health", token=good)
            assert st == 200, (st, j)
            assert not os.path.exists(os.path.join(own.data, "token"))
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_default_token_is_kept_across_restarts(cv):
    with _coved() as own:
        first = own.token
        own.kill()
        own.start()
        assert _token(own) == first
        assert _tcp(own, "GET", "/v1/health", token=first)[0] == 200


# ---------------------------------------------------------------- sizes

def _raw(cv, data, use_tcp=True, timeout=10):
    """Send raw bytes, return the status code of the answer (None when the
    connection was only closed)."""
    if use_tcp:
        s = socket.create_connection((cv.host, cv.port), timeout=timeout)
    else:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        s.connect(cv.socket)
    try:
        try:
            s.sendall(data)
        except OSError:
            pass
        _, got = _closed_at(s, time.time(), timeout)
        m = re.match(rb"HTTP/1\.[01] (\d{3})", got)
        return int(m.group(1)) if m else None
    finally:
        s.close()


def test_oversized_headers(cv):
    with _coved("--max-header-bytes", "4K") as own:
        auth = b"Authorization: Bearer " + own.token.encode() + b"\r\n"
        small = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n" + auth + b"X-Pad: " + b"a" * 2000 + b"\r\n" + \
            b"Connection: close\r\n\r\n"
        big = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n" + auth + b"X-Pad: " + b"a" * 8000 + b"\r\n\r\n"
        many = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n" + auth + b"".join(
            b"X-H%d: %s\r\n" % (i, b"b" * 60) for i in range(100)) + b"\r\n"
        long_line = b"GET /v1/health?" + b"q" * 8000 + b" HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n"
        assert _raw(own, small) == 200
        for data in (big, many, long_line):
            assert _raw(own, data) in (400, 431, None), data[:40]
        # The same limit on the socket.
        assert _raw(own, small.replace(auth, b""), use_tcp=False) == 200
        assert _raw(own, big.replace(auth, b""), use_tcp=False) in (400, 431, None)
        assert own.api("GET", "/v1/health")[0] == 200


def test_oversized_body(cv):
    with _coved("--max-body-bytes", "64K") as own:
        path = "/v1/sandboxes/sb_aaaaaaaaaaaa/exec"
        under = json.dumps({"cmd": ["true"], "stdin": "x" * 40000})
        # Under the limit, the request reaches the API (no such sandbox).
        st, j, _ = _tcp(own, "POST", path, json.loads(under), token=own.token)
        assert st == 404, (st, j)
        assert own.api("POST", path, json.loads(under))[0] == 404
        over = b"x" * (128 << 10)
        for use_tcp in (True, False):
            head = b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n" % (path.encode(), len(over))
            if use_tcp:
                head += b"Authorization: Bearer " + own.token.encode() + b"\r\n"
            assert _raw(own, head + b"\r\n" + over, use_tcp) in (413, None)
            chunked = b"POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n" % path.encode()
            if use_tcp:
                chunked += b"Authorization: Bearer " + own.token.encode() + b"\r\n"
            body = b"".join(b"%x\r\n%s\r\n" % (8192, b"y" * 8192) for _ in range(16)) + b"0\r\n\r\n"
            assert _raw(own, chunked + b"\r\n" + body, use_tcp) in (413, None)
        # Without the token, the size limit still comes first.
        assert _raw(own, b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(over)
                    + over) in (413, None)
        assert own.api("GET", "/v1/health")[0] == 200


# ---------------------------------------------------------------- connections

def _refused(s):
    """The server answered s with 503 and closed it, or only closed it."""
    t, data = _closed_at(s, time.time(), 5)
    assert t < 2, t
    assert data == b"" or data.startswith(b"HTTP/1.1 503"), data
    if data:
        assert b'"code":"unavailable"' in data, data


def test_too_many_connections(cv):
    with _coved("--max-connections", "3") as own:
        held = [_connect(own) for _ in range(3)]
        try:
            # Each is served (so attached and counted).
            for s in held:
                s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
                          % own.token.encode())
                assert s.recv(4096).startswith(b"HTTP/1.1 200"), s
            # A fourth TCP connection is refused at once, whether it asks for
            # something or not.
            _refused(_connect(own))
            s = _connect(own)
            s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n"
                      % own.token.encode())
            _refused(s)
            # The socket counts its own connections.
            assert own.api("GET", "/v1/health")[0] == 200
            # One goes: there is room again.
            held.pop().close()
            assert wait_until(lambda: _try_health(own), 5), "no room after a connection closed"
        finally:
            for s in held:
                s.close()

        # The same on the socket, with TCP unaffected.
        unix = []
        try:
            for _ in range(3):
                u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                u.settimeout(10)
                u.connect(own.socket)
                u.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
                assert u.recv(4096).startswith(b"HTTP/1.1 200")
                unix.append(u)
            u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            u.connect(own.socket)
            _refused(u)
            assert _tcp(own, "GET", "/v1/health", token=own.token)[0] == 200
        finally:
            for u in unix:
                u.close()
        assert wait_until(lambda: own.api("GET", "/v1/health")[0] == 200, 5)


def _try_health(cv):
    try:
        return _tcp(cv, "GET", "/v1/health", token=cv.token, timeout=5)[0] == 200
    except OSError:
        return False


def test_idle_connections_are_closed(cv):
    with _coved("--idle-timeout", "1.5", "--request-timeout", "30") as own:
        # A new connection that says nothing.
        t0 = time.time()
        t, _ = _closed_at(_connect(own), t0, 10)
        assert 1.3 < t < 3.5, t
        # A kept-alive one, after its request.
        s = _connect(own)
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % own.token.encode())
        s.settimeout(10)
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        t, _ = _closed_at(s, time.time(), 10)
        assert 1.3 < t < 3.5, t
        # One in use is not idle: requests every 0.5 s for 4 s on the same
        # connection all succeed.
        c = http.client.HTTPConnection("127.0.0.1", own.port, timeout=10)
        for _ in range(8):
            c.request("GET", "/v1/health", headers={"Authorization": "Bearer " + own.token})
            r = c.getresponse()
            r.read()
            assert r.status == 200
            time.sleep(0.5)
        c.close()
        # A connection that owns an ephemeral sandbox stays: closing it
        # would delete the sandbox.
        u = own.conn()
        u.request("POST", "/v1/sandboxes", body=json.dumps({"ephemeral": True}))
        r = u.getresponse()
        eph = json.loads(r.read())["id"]
        time.sleep(3.5)
        u.request("GET", "/v1/sandboxes/" + eph)
        r = u.getresponse()
        assert r.status == 200 and json.loads(r.read())["id"] == eph
        u.close()
        assert wait_until(lambda: own.api("GET", "/v1/sandboxes/" + eph)[0] == 404, 10)


# ---------------------------------------------------------------- slow clients

def _slowloris(cv, head, trickle, every=1.0, limit=15):
    """Send head, then one byte of trickle every `every` seconds; returns
    the seconds until the server cut the connection, and what it said."""
    s = _connect(cv)
    t0 = time.time()
    s.sendall(head)
    s.settimeout(every)
    data = b""
    for b in trickle:
        try:
            d = s.recv(4096)
            if not d:
                return time.time() - t0, data
            data += d
        except socket.timeout:
            pass
        except ConnectionResetError:
            return time.time() - t0, data
        try:
            s.send(bytes([b]))
        except OSError:
            return time.time() - t0, data
        if time.time() - t0 > limit:
            break
    s.close()
    raise AssertionError("a slow client was never cut: %r" % data)


def test_slowloris_headers_are_cut(cv):
    with _coved("--request-timeout", "3", "--idle-timeout", "30") as own:
        probe = _Prober(own)
        probe.start()
        t, said = _slowloris(own, b"GET /v1/health HTTP/1.1\r\n", b"X-Slow: " + b"a" * 100)
        assert 2.8 < t < 6, t
        assert said == b"" or said.startswith(b"HTTP/1.1 408"), said
        # With the token too: it is not yet known when the headers are slow.
        t, _ = _slowloris(own, b"GET /v1/health HTTP/1.1\r\nAuthorization: Bearer " + own.token.encode()
                          + b"\r\n", b"X-Slow: " + b"a" * 100)
        assert 2.8 < t < 6, t
        probe.finish()


def test_slowloris_body_is_cut(cv):
    with _coved("--request-timeout", "3", "--idle-timeout", "30") as own:
        probe = _Prober(own)
        probe.start()
        head = (b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + own.token.encode()
                + b"\r\nContent-Length: 1000\r\n\r\n")
        t, said = _slowloris(own, head, b"{" + b" " * 999)
        assert 2.8 < t < 6, t
        assert said == b"" or said.startswith(b"HTTP/1.1 408"), said
        # A slow second request on a kept-alive connection is cut the same.
        s = _connect(own)
        s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % own.token.encode())
        s.settimeout(10)
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        t0 = time.time()
        s.sendall(head)
        for _ in range(20):
            try:
                s.send(b" ")
            except OSError:
                break
            s.settimeout(1)
            try:
                if s.recv(4096) == b"":
                    break
            except socket.timeout:
                pass
            except ConnectionResetError:
                break
        t = time.time() - t0
        assert 2.8 < t < 6, t
        probe.finish()
        assert own.api("GET", "/v1/sandboxes")[1]["sandboxes"] == []


def test_streams_outlive_the_limits(cv):
    # A stream longer than both limits, over TCP and over the socket; and a
    # collected exec that takes longer than them.
    with _coved("--request-timeout", "1", "--idle-timeout", "1") as own:
        sid = own.create()
        script = "for i in 1 2 3 4; do echo $i; sleep 0.7; done"
        for use_tcp in (True, False):
            c = http.client.HTTPConnection("127.0.0.1", own.port, timeout=30) if use_tcp else own.conn(30)
            c.request("POST", "/v1/sandboxes/%s/exec?stream=1" % sid, body=json.dumps({"cmd": script}),
                      headers={"Authorization": "Bearer " + own.token} if use_tcp else {})
            r = c.getresponse()
            assert r.status == 200
            t0 = time.time()
            events = [json.loads(line) for line in r]
            assert time.time() - t0 > 2.5
            assert "".join(e["data"] for e in events if e["type"] == "stdout") == "1\n2\n3\n4\n", events
            assert events[-1]["type"] == "exit" and events[-1]["exit_code"] == 0, events
            c.close()
        st, j, _ = _tcp(own, "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "sleep 2.5; echo done"},
                        token=own.token)
        assert st == 200 and j["stdout"] == "done\n", (st, j)


def test_tcp_client_leaving_mid_stream_frees_everything(cv):
    with _coved() as own:
        sid = own.create()
        own.exec(sid, ["true"])
        fds0 = _nfds(own.pid())
        for cmd in ("echo started; exec sleep 1001", "echo started; yes endless"):
            s = _connect(own)
            body = json.dumps({"cmd": cmd}).encode()
            s.sendall(b"POST /v1/sandboxes/%s/exec?stream=1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                      b"Content-Length: %d\r\n\r\n%s" % (sid.encode(), own.token.encode(), len(body), body))
            got = b""
            s.settimeout(10)
            while b"started" not in got:
                got += s.recv(65536)
            s.shutdown(socket.SHUT_RDWR)
            s.close()
            ps = lambda: own.exec(sid, ["ps", "-eo", "args"])["stdout"]  # noqa: E731
            assert wait_until(lambda: not re.search(r"sleep 1001|endless", ps()), 10), ps()
        assert wait_until(lambda: _nfds(own.pid()) <= fds0, 5), (fds0, _nfds(own.pid()))


# ---------------------------------------------------------------- the CLI

def test_cli_over_tcp(cv):
    with _coved() as own:
        d = tempfile.mkdtemp(prefix="cove-it-", dir="/var/tmp")
        try:
            # Socket and data that lead nowhere: only the TCP address works.
            nowhere = {"COVE_SOCKET": os.path.join(d, "none.sock"), "COVE_DATA": os.path.join(d, "data")}
            env = dict(nowhere, COVE_HOST="127.0.0.1:%d" % own.port, COVE_TOKEN=own.token)
            r = own.cli("create", "--name", "cli-tcp", env=env)
            assert r.returncode == 0, r
            sid = r.stdout.decode().strip()
            r = own.cli("exec", sid, "--", "sh", "-c", "echo out; echo err >&2; exit 3", env=env)
            assert (r.returncode, r.stdout, r.stderr) == (3, b"out\n", b"err\n"), r
            r = own.cli("run", "--", "echo", "ran", env=env)
            assert (r.returncode, r.stdout) == (0, b"ran\n"), r
            # --host and --token-file instead of the environment.
            tf = os.path.join(d, "token")
            with open(tf, "w") as f:
                f.write(own.token + "\n")
            r = own.cli("--host", "127.0.0.1:%d" % own.port, "--token-file", tf, "ls", env=nowhere)
            assert r.returncode == 0 and sid in r.stdout.decode(), r
            # A wrong token, none, a bad host.
            r = own.cli("ls", env=dict(env, COVE_TOKEN="x" * 64))
            assert r.returncode == 1 and b"Authorization" in r.stderr, r
            r = own.cli("--host", "127.0.0.1:%d" % own.port, "ls", env=nowhere)
            assert r.returncode != 0 and b"token" in r.stderr, r
            r = own.cli("--host", "nowhere:1", "ls", env=dict(env))
            assert r.returncode != 0 and b"ADDR:PORT" in r.stderr, r
            # Nothing answers there: an error, and no coved started for it.
            r = own.cli("ls", env=dict(env, COVE_HOST="127.0.0.1:%d" % _free_port()))
            assert r.returncode == 1 and b"Connection refused" in r.stderr, r
            assert not os.path.exists(nowhere["COVE_DATA"]) and not os.path.exists(nowhere["COVE_SOCKET"])
            r = own.cli("rm", sid, env=env)
            assert r.returncode == 0, r
            assert _ids(own) == []
        finally:
            shutil.rmtree(d, ignore_errors=True)

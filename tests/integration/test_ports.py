"""A sandbox's ports as URLs through coved's port proxy (issue 10, items 4
and 5): host-name and E2B header routing, the token rules (header, query
then cookie, public), what reaches the server (token taken out,
X-Forwarded-For), keep-alive with chunked bodies, WebSocket, a 1 GiB
download byte for byte with coved's memory bounded, 200 connections at
once, ports kept over a restart, port-forward of raw TCP, bad input, and
that a sandbox cannot reach the proxy's listener.

Every packet goes to loopback (the proxy, curl's *.localhost) or, from
the proxy, to the sandbox's own loopback inside its namespace."""
import base64
import contextlib
import hashlib
import http.client
import os
import random
import signal
import socket
import struct
import subprocess
import threading
import time

import covetest
from covetest import Coved, wait_until

# An HTTP/1.1 server (keep-alive): GET /big/N sends N MiB (each MiB the
# same random block, its first 8 bytes its number); GET elsewhere echoes
# the request head; POST answers the sha256 of its body (chunked or not).
HTTP_SERVER = r"""
import hashlib, http.server, random, sys
BLOCK = random.Random(7).randbytes(1 << 20)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def answer(self, body, ctype="text/plain"):
        self.send_response(200); self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_GET(self):
        if self.path.startswith("/big/"):
            n = int(self.path.split("/")[2])
            self.send_response(200); self.send_header("Content-Length", str(n << 20)); self.end_headers()
            for k in range(n): self.wfile.write(k.to_bytes(8, "big") + BLOCK[8:])
            return
        self.answer((self.requestline + "\n" + str(self.headers)).encode())
    def do_POST(self):
        h = hashlib.sha256()
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                n = int(self.rfile.readline().split(b";")[0], 16)
                if n == 0:
                    while self.rfile.readline() not in (b"\r\n", b""): pass
                    break
                h.update(self.rfile.read(n)); self.rfile.readline()
        else:
            h.update(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.answer(h.hexdigest().encode())
class S(http.server.ThreadingHTTPServer):
    request_queue_size = 512
    daemon_threads = True
S((sys.argv[2] if len(sys.argv) > 2 else "0.0.0.0", int(sys.argv[1])), H).serve_forever()
"""

# A WebSocket echo server, the handshake and frames written by hand.
WS_SERVER = r"""
import base64, hashlib, socket, struct, sys, threading
def recvn(c, n):
    b = b""
    while len(b) < n:
        x = c.recv(n - len(b))
        if not x: raise EOFError
        b += x
    return b
def serve(c):
    try:
        head = b""
        while b"\r\n\r\n" not in head:
            x = c.recv(4096)
            if not x: return
            head += x
        key = [l.split(b":", 1)[1].strip() for l in head.split(b"\r\n") if l.lower().startswith(b"sec-websocket-key:")][0]
        acc = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  b"Sec-WebSocket-Accept: " + acc + b"\r\n\r\n")
        while True:
            b0, b1 = recvn(c, 2)
            n = b1 & 127
            if n == 126: n = struct.unpack(">H", recvn(c, 2))[0]
            elif n == 127: n = struct.unpack(">Q", recvn(c, 8))[0]
            mask = recvn(c, 4) if b1 & 128 else bytes(4)
            data = bytes(x ^ mask[i % 4] for i, x in enumerate(recvn(c, n)))
            if b0 & 15 == 8:
                c.sendall(b"\x88\x00"); return
            ln = bytes([n]) if n < 126 else b"\x7e" + struct.pack(">H", n)
            c.sendall(bytes([0x80 | (b0 & 15)]) + ln + data)
    except (EOFError, OSError):
        pass
    finally:
        c.close()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(64)
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
"""

# A raw TCP echo server.
ECHO_SERVER = r"""
import socket, sys, threading
def serve(c):
    while True:
        b = c.recv(65536)
        if not b: break
        c.sendall(b)
    c.close()
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(64)
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
"""


def start_server(cv, sid, script, *args):
    r = cv.api("POST", "/v1/sandboxes/%s/exec" % sid,
               {"cmd": ["python3", "-c", script] + [str(a) for a in args], "background": True})
    assert r[0] == 200, r


def proxy_port(cv):
    st, caps = cv.api("GET", "/v1/capabilities")
    assert st == 200 and caps["capabilities"]["ports"] is True, caps
    return caps["proxy"]["port"]


def open_port(cv, sid, port, public=False):
    st, j = cv.api("POST", "/v1/sandboxes/%s/ports" % sid, {"port": port, "public": public})
    assert st in (200, 201), (st, j)
    return j


def host_of(url):
    return url.split("//", 1)[1].split("/", 1)[0]


def request(cv, host, path="/", headers=None, method="GET", body=None):
    """One request through the proxy (connected to 127.0.0.1, Host given):
    (status, headers, body)."""
    c = http.client.HTTPConnection("127.0.0.1", proxy_port(cv), timeout=60)
    try:
        h = {"Host": host}
        h.update(headers or {})
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        return r.status, r.headers, r.read()
    finally:
        c.close()


def wait_served(cv, host, token):
    """Poll until the server behind the port answers (not 502)."""
    assert wait_until(lambda: request(cv, host, headers={"X-Cove-Token": token})[0] == 200, 30)


@contextlib.contextmanager
def served(cv, public=False):
    """A sandbox running HTTP_SERVER on its port 8000, opened and answering:
    yields (sandbox ID, the port's JSON); deleted after."""
    sid = cv.create()
    try:
        start_server(cv, sid, HTTP_SERVER, 8000)
        p = open_port(cv, sid, 8000, public)
        wait_served(cv, host_of(p["url"]), p["token"])
        yield sid, p
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_url_token_rules_and_what_reaches_the_server(cv):
    sid = cv.create()
    try:
        start_server(cv, sid, HTTP_SERVER, 8000)
        p = open_port(cv, sid, 8000)
        host, tok = host_of(p["url"]), p["token"]
        assert p["url"] == "http://8000-%s.localhost:%d/" % (sid.replace("_", "-"), proxy_port(cv))
        assert len(tok) == 32
        wait_served(cv, host, tok)
        # no token, a wrong one: 401, nothing passed on
        assert request(cv, host)[0] == 401
        assert request(cv, host, headers={"X-Cove-Token": "0" * 32})[0] == 401
        assert request(cv, host, "/?cove_token=" + "1" * 32)[0] == 401
        # the header: 200; the server sees neither the token nor a forged X-Forwarded-For
        st, _, body = request(cv, host, "/x?a=1", headers={"X-Cove-Token": tok, "X-Forwarded-For": "6.6.6.6"})
        assert st == 200, body
        seen = body.decode()
        assert seen.startswith("GET /x?a=1 HTTP/1.1"), seen
        assert tok not in seen and "6.6.6.6" not in seen and "X-Forwarded-For: 127.0.0.1" in seen, seen
        # the query once: 200 and a cookie; the token is out of the path the server sees
        st, h, body = request(cv, host, "/y?a=1&cove_token=%s&b=2" % tok)
        assert st == 200 and body.decode().startswith("GET /y?a=1&b=2 HTTP/1.1"), body
        cookie = h["Set-Cookie"]
        assert cookie.startswith("cove_token=%s;" % tok) and "HttpOnly" in cookie, cookie
        # then the cookie alone: 200, and the server gets the other cookies only
        st, _, body = request(cv, host, "/z", headers={"Cookie": "theme=dark; cove_token=%s" % tok})
        assert st == 200 and "Cookie: theme=dark\n" in body.decode() and tok not in body.decode(), body
        # curl with the URL as printed (*.localhost is loopback to curl)
        r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", p["url"] + "?cove_token=" + tok],
                           capture_output=True, text=True, timeout=60)
        assert r.stdout == "200", r
        r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", p["url"]],
                           capture_output=True, text=True, timeout=60)
        assert r.stdout == "401", r
        # E2B's header routing, on the same listener, whatever the host name
        e2b = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "8000"}
        assert request(cv, "anything", headers=e2b)[0] == 401
        assert request(cv, "anything", headers=dict(e2b, **{"X-Cove-Token": tok}))[0] == 200
        # public: no token needed; the same token stays
        p2 = open_port(cv, sid, 8000, public=True)
        assert p2["token"] == tok and p2["public"] is True
        assert request(cv, host)[0] == 200
        assert request(cv, "anything", headers=e2b)[0] == 200
        # a port not open, a host that names no sandbox: 404
        assert request(cv, "8001-" + sid.replace("_", "-") + ".localhost")[0] == 404
        assert request(cv, "example.org")[0] == 404
        # info shows the open port; capabilities say ports and the modes
        st, info = cv.api("GET", "/v1/sandboxes/" + sid)
        assert [x["port"] for x in info["ports"]] == [8000] and "token" not in info["ports"][0]
        assert info["ports"][0]["url"] == p["url"] and info["ports"][0]["public"] is True
        shown = cv.cli("info", sid)
        assert shown.returncode == 0 and p["url"].encode() in shown.stdout and b'"address"' in shown.stdout
        assert "address" in info["network"]
        caps = cv.api("GET", "/v1/capabilities")[1]
        assert set(caps["network"]) == {"egress", "none"} and caps["proxy"]["domain"] == "localhost"
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_keep_alive_with_chunked_and_sized_bodies(cv):
    with served(cv) as (sid, p):
        host, tok = host_of(p["url"]), p["token"]
        c = http.client.HTTPConnection("127.0.0.1", proxy_port(cv), timeout=60)
        data = os.urandom(3 << 20)
        h = {"Host": host, "X-Cove-Token": tok}
        try:
            for i in range(3):
                # a chunked body, a sized one, then a GET: one connection
                c.request("POST", "/", body=(data[k:k + 100000] for k in range(0, len(data), 100000)),
                          headers=h, encode_chunked=True)
                r = c.getresponse()
                assert r.status == 200 and r.read().decode() == hashlib.sha256(data).hexdigest()
                c.request("POST", "/", body=data[:12345], headers=h)
                r = c.getresponse()
                assert r.read().decode() == hashlib.sha256(data[:12345]).hexdigest()
                c.request("GET", "/again%d" % i, headers=h)
                r = c.getresponse()
                assert r.status == 200 and r.read().startswith(b"GET /again%d" % i)
        finally:
            c.close()


def ws_connect(port, host, headers=""):
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    key = base64.b64encode(os.urandom(16))
    s.sendall(b"GET /ws HTTP/1.1\r\nHost: " + host.encode() + b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n" + headers.encode() + b"\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        assert b, head
        head += b
    assert head.startswith(b"HTTP/1.1 101"), head
    want = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    assert b"Sec-WebSocket-Accept: " + want in head, head
    return s


def ws_echo(s, payload):
    mask = os.urandom(4)
    n = len(payload)
    ln = bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n)
    s.sendall(b"\x82" + ln + mask + bytes(x ^ mask[i % 4] for i, x in enumerate(payload)))
    hdr = recvn(s, 2)
    m = hdr[1] & 127
    if m == 126:
        m = struct.unpack(">H", recvn(s, 2))[0]
    return recvn(s, m)


def recvn(s, n):
    b = b""
    while len(b) < n:
        x = s.recv(n - len(b))
        assert x, "closed after %d of %d bytes" % (len(b), n)
        b += x
    return b


def test_websocket_echo_through_url_and_headers_and_closed_port_ends_it(cv):
    sid = cv.create()
    try:
        start_server(cv, sid, WS_SERVER, 9000)
        p = open_port(cv, sid, 9000)
        host, tok = host_of(p["url"]), p["token"]
        port = proxy_port(cv)
        s = wait_until(lambda: _try(lambda: ws_connect(port, host, "X-Cove-Token: %s\r\n" % tok)), 30)
        assert s
        for size in (1, 125, 4000, 60000):
            payload = os.urandom(size)
            assert ws_echo(s, payload) == payload
        e = ws_connect(port, "x", "E2b-Sandbox-Id: %s\r\nE2b-Sandbox-Port: 9000\r\nX-Cove-Token: %s\r\n" % (sid, tok))
        assert ws_echo(e, b"hello") == b"hello"
        e.close()
        # closing the port ends its open connections
        assert cv.api("DELETE", "/v1/sandboxes/%s/ports/9000" % sid)[0] == 200
        s.settimeout(30)
        assert s.recv(100) == b""
        s.close()
        assert cv.api("GET", "/v1/sandboxes/%s/ports" % sid)[1]["ports"] == []
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def _try(fn):
    try:
        return fn()
    except (OSError, AssertionError):
        return None


def test_network_none_and_localhost_only_servers(cv):
    sid = cv.create(network="none")
    try:
        start_server(cv, sid, HTTP_SERVER, 8000, "127.0.0.1")
        p = open_port(cv, sid, 8000)
        wait_served(cv, host_of(p["url"]), p["token"])
        st, _, body = request(cv, host_of(p["url"]), "/n", headers={"X-Cove-Token": p["token"]})
        assert st == 200 and body.startswith(b"GET /n "), body
        # nothing listening: 502, said in words
        p2 = open_port(cv, sid, 8001, public=True)
        st, _, body = request(cv, host_of(p2["url"]))
        assert st == 502 and b"nothing listens" in body, (st, body)
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def _rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int([line for line in f if line.startswith("VmRSS:")][0].split()[1])


def test_1gib_download_is_byte_identical_and_coved_memory_bounded(cv):
    with served(cv, public=True) as (sid, p):
        host = host_of(p["url"])
        block = bytearray(random.Random(7).randbytes(1 << 20))
        want = hashlib.sha256()
        for k in range(1024):
            block[:8] = k.to_bytes(8, "big")
            want.update(block)
        before = _rss_kb(cv.pid())
        peak = before
        c = http.client.HTTPConnection("127.0.0.1", proxy_port(cv), timeout=120)
        c.request("GET", "/big/1024", headers={"Host": host})
        r = c.getresponse()
        assert r.status == 200 and int(r.headers["Content-Length"]) == 1 << 30
        got, n = hashlib.sha256(), 0
        while True:
            b = r.read(1 << 20)
            if not b:
                break
            got.update(b)
            n += len(b)
            if n == 100 << 20:
                # a client that stops reading: the server must be held back, not buffered in coved
                for _ in range(20):
                    time.sleep(0.1)
                    peak = max(peak, _rss_kb(cv.pid()))
            if n % (64 << 20) == 0:
                peak = max(peak, _rss_kb(cv.pid()))
        c.close()
        assert n == 1 << 30
        assert got.hexdigest() == want.hexdigest()
        assert peak - before < 64 * 1024, (before, peak)


def test_200_concurrent_proxied_connections(cv):
    with served(cv) as (sid, p):
        host, tok = host_of(p["url"]), p["token"]
        port = proxy_port(cv)
        socks = []
        try:
            for i in range(200):
                s = socket.create_connection(("127.0.0.1", port), timeout=120)
                socks.append(s)
            # all open at once, then each asks
            for i, s in enumerate(socks):
                s.sendall(("GET /c%d HTTP/1.1\r\nHost: %s\r\nX-Cove-Token: %s\r\n\r\n" % (i, host, tok)).encode())
            errors = []
            for i, s in enumerate(socks):
                data = b""
                while b"\r\n\r\n" not in data or not data.split(b"\r\n\r\n", 1)[1].startswith(b"GET /c%d " % i):
                    b = s.recv(65536)
                    if not b:
                        break
                    data += b
                if not data.startswith(b"HTTP/1.1 200"):
                    errors.append((i, data[:100]))
            assert errors == [], errors[:5]
        finally:
            for s in socks:
                s.close()


@contextlib.contextmanager
def port_forward(cv, sid, remote):
    """`cove port-forward SID 0:REMOTE` running: yields its local port."""
    p = subprocess.Popen([covetest.COVE, "port-forward", sid, "0:%d" % remote], stdout=subprocess.PIPE,
                         env=dict(os.environ, COVE_SOCKET=cv.socket))
    try:
        yield int(p.stdout.readline().decode().split()[0].split(":")[1])
    finally:
        p.kill()
        p.wait()


def test_port_forward_of_a_raw_tcp_echo(cv):
    sid = cv.create(network="none")
    try:
        start_server(cv, sid, ECHO_SERVER, 7000)
        with port_forward(cv, sid, 7000) as local:
            def echo():
                s = socket.create_connection(("127.0.0.1", local), timeout=30)
                data = os.urandom(1 << 20)
                threading.Thread(target=s.sendall, args=(data,)).start()
                got = recvn(s, len(data))
                s.shutdown(socket.SHUT_WR)
                end = s.recv(10)
                s.close()
                return got == data and end == b""
            assert wait_until(lambda: _try(echo), 30)
            assert echo() and echo()
        # the port was never opened as a URL: forwarding does not need it
        assert cv.api("GET", "/v1/sandboxes/%s/ports" % sid)[1]["ports"] == []
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_bad_input_is_a_4xx_that_changes_nothing(cv):
    sid = cv.create()
    try:
        open_port(cv, sid, 8000)
        before = cv.api("GET", "/v1/sandboxes/%s/ports" % sid)[1]
        for body in ({"port": 0}, {"port": 70000}, {"port": "80"}, {"port": 80.5}, {}, {"port": 80, "x": 1},
                     {"port": 80, "public": "yes"}):
            st, j = cv.api("POST", "/v1/sandboxes/%s/ports" % sid, body)
            assert st == 400, (body, st, j)
        assert cv.api("POST", "/v1/sandboxes/sb_aaaaaaaaaaaa/ports", {"port": 80})[0] == 404
        assert cv.api("DELETE", "/v1/sandboxes/%s/ports/0" % sid)[0] == 400
        assert cv.api("DELETE", "/v1/sandboxes/%s/ports/8001" % sid)[0] == 404
        assert cv.api("GET", "/v1/sandboxes/sb_aaaaaaaaaaaa/ports")[0] == 404
        assert cv.api("GET", "/v1/sandboxes/%s/ports" % sid)[1] == before
        r = cv.cli("port", sid, "70000")
        assert r.returncode == 2 and b"1 to 65535" in r.stderr
        # the proxy: malformed heads are refused
        for raw in (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", b"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
                    b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                    b"CONNECT a:1 HTTP/1.1\r\nHost: a\r\n\r\n"):
            s = socket.create_connection(("127.0.0.1", proxy_port(cv)), timeout=30)
            s.sendall(raw)
            assert s.recv(100)[:12] in (b"HTTP/1.1 400", b"HTTP/1.1 405"), raw
            s.close()
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_restart_keeps_ports(_shared):
    cv = Coved(args=["--proxy-listen", "127.0.0.1:0"]).start()
    try:
        sid = cv.create()
        p = open_port(cv, sid, 8000)
        open_port(cv, sid, 8080, public=True)
        cv.kill(signal.SIGKILL)
        cv.start()
        ports = cv.api("GET", "/v1/sandboxes/%s/ports" % sid)[1]["ports"]
        assert [(x["port"], x["public"], x["token"]) for x in ports] == \
            [(8000, False, p["token"]), (8080, True, ports[1]["token"])]
        start_server(cv, sid, HTTP_SERVER, 8000)
        wait_served(cv, host_of(ports[0]["url"]), p["token"])
        assert request(cv, host_of(ports[0]["url"]))[0] == 401
        # deleted with its sandbox
        cv.api("DELETE", "/v1/sandboxes/" + sid)
        assert request(cv, host_of(ports[0]["url"]))[0] == 404
    finally:
        cv.teardown()


def test_sandbox_cannot_reach_the_proxy_listener(_shared):
    # the proxy on every host address: the sandbox's gateway is one of them
    cv = Coved(args=["--proxy-listen", "0.0.0.0:0"]).start()
    try:
        sid = cv.create()
        port = proxy_port(cv)
        gw = cv.api("GET", "/v1/sandboxes/" + sid)[1]["network"]["gateway"]
        probe = ("import socket, sys\ntry:\n    socket.create_connection((sys.argv[1], %d), timeout=3)\n"
                 "    print('reached')\nexcept OSError:\n    print('no')\n" % port)
        for addr in (gw, "127.0.0.1"):
            r = cv.exec(sid, ["python3", "-c", probe, addr], timeout=30)
            assert r["stdout"].strip() == "no", (addr, r)
        # while the host reaches it
        assert _try(lambda: socket.create_connection(("127.0.0.1", port), timeout=5))
    finally:
        cv.teardown()


def test_proxy_off_says_so_and_refuses_ports(_shared):
    cv = Coved(args=["--proxy-listen", "off"]).start()
    try:
        caps = cv.api("GET", "/v1/capabilities")[1]
        assert caps["capabilities"]["ports"] is False and caps["proxy"] is None
        assert caps["backends"]["isolated"]["capabilities"]["ports"] is False
        sid = cv.create(network="none")
        st, j = cv.api("POST", "/v1/sandboxes/%s/ports" % sid, {"port": 8000})
        assert st == 409 and "proxy" in j["error"]["message"], (st, j)
        assert cv.api("GET", "/v1/sandboxes/%s/ports" % sid)[1]["ports"] == []
        # port-forward needs no proxy
        start_server(cv, sid, ECHO_SERVER, 7000)
        with port_forward(cv, sid, 7000) as local:
            def echo():
                s = socket.create_connection(("127.0.0.1", local), timeout=30)
                s.sendall(b"ping")
                got = recvn(s, 4)
                s.close()
                return got == b"ping"
            assert wait_until(lambda: _try(echo), 30)
        r = cv.cli("port-forward", "sb_aaaaaaaaaaaa", "7000")
        assert r.returncode == 1 and b"no sandbox" in r.stderr, r
    finally:
        cv.teardown()

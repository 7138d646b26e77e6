"""coved's own HTTP server (src/daemon/httpd.c): uploads streamed to the
file with coved's memory bounded, chunked bodies, a client that leaves
mid-upload, pipelined requests, HTTP/1.0, and an early answer to a large
body (the rest of the body is dropped, the connection goes on)."""
import hashlib
import json
import os
import socket
import urllib.parse

import covetest


def _url(sid, **params):
    return "/v1/sandboxes/%s/files?%s" % (sid, urllib.parse.urlencode(params))


def _sock(cv, timeout=120):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(cv.socket)
    return s


def _read_response(f):
    """(status, headers dict with lower-case names, body) from a file of a
    socket; a body by Content-Length or chunked."""
    line = f.readline()
    if not line:
        return None, {}, b""
    status = int(line.split()[1])
    headers = {}
    while True:
        h = f.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, v = h.decode().split(":", 1)
        headers[k.strip().lower()] = v.strip()
    body = b""
    if "content-length" in headers:
        body = f.read(int(headers["content-length"]))
    elif headers.get("transfer-encoding") == "chunked":
        while True:
            n = int(f.readline().split(b";")[0], 16)
            if n == 0:
                f.readline()
                break
            body += f.read(n)
            f.readline()
    return status, headers, body


def _sh(cv, sid, script):
    r = cv.exec(sid, ["sh", "-c", script], timeout=300)
    assert r["exit_code"] == 0, r
    return r["stdout"]


def _status_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(field)


def test_1gib_upload_streams_with_bounded_memory(cv):
    """A 1 GiB PUT /files goes to the file as it comes, and GET sends it
    back from the file: coved's peak RSS grows by less than 64 MiB, and the
    file inside (and the one read back) is the one sent."""
    own = covetest.Coved()
    try:
        own.start()
        sid = own.create()
        block = os.urandom(1 << 20)
        total = 1 << 30
        base = _status_kb(own.pid(), "VmHWM")
        s = _sock(own, 600)
        s.sendall(b"PUT %s HTTP/1.1\r\nHost: cove\r\nContent-Length: %d\r\n\r\n"
                  % (_url(sid, path="/root/big").encode(), total))
        h = hashlib.sha256()
        for i in range(total >> 20):
            piece = i.to_bytes(8, "little") + block[8:]  # no two MiB alike
            h.update(piece)
            s.sendall(piece)
        f = s.makefile("rb")
        st, _, body = _read_response(f)
        s.close()
        assert st == 201, (st, body)
        assert json.loads(body)["size"] == total, body
        grew = _status_kb(own.pid(), "VmHWM") - base
        print("# coved's peak RSS grew by %d KiB" % grew)
        assert grew < 64 * 1024, "coved grew by %d KiB during a 1 GiB upload" % grew
        inside = _sh(own, sid, "sha256sum /root/big").split()[0]
        assert inside == h.hexdigest()
        # And back: sent from the file (sendfile), not through coved's memory.
        c = own.conn(600)
        c.request("GET", _url(sid, path="/root/big"))
        r = c.getresponse()
        back = hashlib.sha256()
        got = 0
        while True:
            piece = r.read(1 << 20)
            if not piece:
                break
            back.update(piece)
            got += len(piece)
        c.close()
        assert r.status == 200 and got == total and back.hexdigest() == h.hexdigest()
        grew = _status_kb(own.pid(), "VmHWM") - base
        assert grew < 64 * 1024, "coved grew by %d KiB during a 1 GiB upload and download" % grew
    finally:
        own.teardown()


def test_chunked_upload(cv):
    """A chunked body (E2B's SDK sends them), in pieces of odd sizes and
    with a chunk extension, lands whole."""
    sid = cv.create(name="httpd-chunked")
    try:
        data = os.urandom(3 << 20) + b"end"
        s = _sock(cv)
        s.sendall(b"PUT %s HTTP/1.1\r\nHost: cove\r\nTransfer-Encoding: chunked\r\n\r\n"
                  % _url(sid, path="/root/chunked").encode())
        pos, size = 0, 1
        while pos < len(data):
            piece = data[pos:pos + size]
            s.sendall(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece))
            pos += len(piece)
            size = size * 7 + 13
        s.sendall(b"0\r\n\r\n")
        st, _, body = _read_response(s.makefile("rb"))
        s.close()
        assert st == 201 and json.loads(body)["size"] == len(data), (st, body)
        st, got = cv.api("GET", _url(sid, path="/root/chunked", stat=1))
        assert st == 200 and got["size"] == len(data), got
        c = cv.conn()
        c.request("GET", _url(sid, path="/root/chunked"))
        r = c.getresponse()
        assert r.status == 200 and r.read() == data
        c.close()
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_client_leaving_mid_upload(cv):
    """A client gone in the middle of an upload: coved closes the file and
    the connection (no fd left open), and stays healthy; a file whose body
    never came whole is not made (a PUT writes a replacement it renames
    into place only once the body is whole)."""
    sid = cv.create(name="httpd-leave")
    try:
        fds0 = len(os.listdir("/proc/%d/fd" % cv.pid()))
        for _ in range(3):
            s = _sock(cv)
            s.sendall(b"PUT %s HTTP/1.1\r\nHost: cove\r\nContent-Length: %d\r\n\r\n"
                      % (_url(sid, path="/root/partial").encode(), 100 << 20))
            s.sendall(b"y" * (5 << 20))
            s.close()
        assert covetest.wait_until(lambda: len(os.listdir("/proc/%d/fd" % cv.pid())) <= fds0, 10), \
            (fds0, os.listdir("/proc/%d/fd" % cv.pid()))
        st, j = cv.api("GET", _url(sid, path="/root/partial", stat=1))
        assert st == 404, (st, j)
        st, j = cv.api("GET", "/v1/health")
        assert st == 200 and j["status"] == "ok"
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_pipelined_requests(cv):
    """Requests sent back to back on one connection are answered in order."""
    sid = cv.create(name="httpd-pipeline")
    try:
        put_path = _url(sid, path="/root/p").encode()
        body = b'{"cmd":["echo","hi"]}'
        reqs = (b"GET /v1/health HTTP/1.1\r\nHost: cove\r\n\r\n"
                b"PUT %s HTTP/1.1\r\nHost: cove\r\nContent-Length: 5\r\n\r\nhello"
                b"GET %s HTTP/1.1\r\nHost: cove\r\n\r\n"
                b"POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: cove\r\nContent-Length: %d\r\n\r\n%s"
                b"GET /v1/nowhere HTTP/1.1\r\nHost: cove\r\nConnection: close\r\n\r\n"
                % (put_path, put_path, sid.encode(), len(body), body))
        s = _sock(cv)
        s.sendall(reqs)
        f = s.makefile("rb")
        st, _, b = _read_response(f)
        assert st == 200 and json.loads(b)["status"] == "ok"
        st, _, b = _read_response(f)
        assert st == 201 and json.loads(b)["size"] == 5, b
        st, _, b = _read_response(f)
        assert st == 200 and b == b"hello"
        st, _, b = _read_response(f)
        assert st == 200 and json.loads(b)["stdout"] == "hi\n", b
        st, h, b = _read_response(f)
        assert st == 404 and h.get("connection") == "close"
        assert f.read() == b""  # closed after the last answer
        s.close()
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_http10(cv):
    """HTTP/1.0: closed after the answer, unless it asks for keep-alive; a
    stream to it ends at the close, unchunked."""
    s = _sock(cv)
    s.sendall(b"GET /v1/health HTTP/1.0\r\n\r\n")
    f = s.makefile("rb")
    st, h, b = _read_response(f)
    assert st == 200 and json.loads(b)["status"] == "ok" and h.get("connection") == "close"
    assert f.read() == b""
    s.close()
    s = _sock(cv)
    s.sendall(b"GET /v1/health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" * 2)
    f = s.makefile("rb")
    for _ in range(2):
        st, h, b = _read_response(f)
        assert st == 200 and h.get("connection") == "keep-alive"
    s.close()
    sid = cv.create(name="httpd-10")
    try:
        body = b'{"cmd":["echo","streamed"]}'
        s = _sock(cv)
        s.sendall(b"POST /v1/sandboxes/%s/exec?stream=1 HTTP/1.0\r\nContent-Length: %d\r\n\r\n%s"
                  % (sid.encode(), len(body), body))
        f = s.makefile("rb")
        st, h, _ = _read_response(f)
        assert st == 200 and "transfer-encoding" not in h
        events = [json.loads(line) for line in f.read().splitlines()]
        assert any(e.get("type") == "stdout" and "streamed" in e.get("data", "") for e in events), events
        assert events[-1]["type"] == "exit"
        s.close()
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_early_answer_drops_the_rest_of_the_body(cv):
    """An upload refused at its headers (no such sandbox) is answered at
    once; the rest of its body is read and dropped, and the connection
    serves the next request."""
    s = _sock(cv)
    size = 20 << 20
    s.sendall(b"PUT %s HTTP/1.1\r\nHost: cove\r\nContent-Length: %d\r\n\r\n"
              % (_url("nosuchsandbox", path="/x").encode(), size))
    f = s.makefile("rb")
    s.sendall(b"z" * size)
    st, _, b = _read_response(f)
    assert st == 404 and json.loads(b)["error"]["code"] == "not_found", b
    s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: cove\r\n\r\n")
    st, _, b = _read_response(f)
    assert st == 200 and json.loads(b)["status"] == "ok"
    s.close()

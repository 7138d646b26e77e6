"""Reaching coved: the unix socket from COVE_SOCKET, TCP with the token
from COVE_HOST/COVE_TOKEN or a token file, and the errors for each."""
import os
import socket

import pytest

import covetest
from cove import Sandbox, Transport, Unauthorized, Unavailable


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tcp_coved(coved):
    port = _free_port()
    d = covetest.Coved(args=["--listen", "127.0.0.1:%d" % port]).start()
    d.addr = "127.0.0.1:%d" % port
    yield d
    d.teardown()


def test_tcp_with_token(tcp_coved, monkeypatch):
    token_file = os.path.join(tcp_coved.data, "token")
    t = Transport(host=tcp_coved.addr, token_file=token_file)
    with Sandbox.create(transport=t) as sb:
        assert sb.run("echo tcp").stdout == "tcp\n"
        assert sb.files.read("nope") is None
        assert Sandbox.connect(sb.id, transport=t).id == sb.id
    with open(token_file) as f:
        monkeypatch.setenv("COVE_HOST", tcp_coved.addr)
        monkeypatch.setenv("COVE_TOKEN", f.read().strip())
    env_t = Transport()
    assert env_t.host == tcp_coved.addr and Sandbox.list(transport=env_t) == []
    with pytest.raises(Unauthorized) as e:
        Sandbox.list(transport=Transport(host=tcp_coved.addr, token="0" * 64))
    assert e.value.status == 401 and e.value.code == "unauthorized"
    monkeypatch.delenv("COVE_TOKEN")
    with pytest.raises(ValueError):
        Transport()  # a host without a token


def test_socket_from_env_and_unreachable(coved, monkeypatch, tmp_path):
    monkeypatch.setenv("COVE_SOCKET", coved.socket)
    assert Transport().socket_path == coved.socket
    monkeypatch.delenv("COVE_SOCKET")
    assert Transport().socket_path == "/run/cove/cove.sock"
    with pytest.raises(Unavailable):
        Sandbox.list(transport=Transport(socket_path=str(tmp_path / "none.sock")))


def test_reconnects_after_coved_closed_the_connection(coved):
    """coved closes idle connections; the next call opens a new one."""
    t = Transport(socket_path=coved.socket)
    assert isinstance(Sandbox.list(transport=t), list)
    t._local.conn.sock.shutdown(socket.SHUT_RDWR)  # as if coved had closed it
    assert isinstance(Sandbox.list(transport=t), list)


def _one_shot_server(path, answers):
    """A unix-socket peer that answers each request it reads with the next
    raw answer, then closes: for the framings coved does not use."""
    import threading
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)

    def serve():
        for raw in answers:
            c, _ = srv.accept()
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += c.recv(4096)
            c.sendall(raw)
            c.close()
        srv.close()
    th = threading.Thread(target=serve, daemon=True)
    th.start()
    return th


def test_wire_framings(tmp_path):
    from cove._wire import Connection, ProtocolError
    path = str(tmp_path / "peer.sock")
    th = _one_shot_server(path, [
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=1\r\nab\n\r\n4\r\ncd\nE\r\n0\r\nT: 1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"not http\r\n\r\n",
    ])
    c = Connection(unix_path=path)
    r = c.request("GET", "/", {})
    assert (r.readline(), r.readline(), r.readline(), r.done) == (b"ab\n", b"cd\n", b"E", True)
    c = Connection(unix_path=path)
    r = c.request("GET", "/", {})
    assert r.read() == b"until the end" and c.closed
    c = Connection(unix_path=path)
    with pytest.raises(ProtocolError):
        c.request("GET", "/", {}).read()
    c = Connection(unix_path=path)
    with pytest.raises(ProtocolError):
        c.request("GET", "/", {})
    th.join(10)

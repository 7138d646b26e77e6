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

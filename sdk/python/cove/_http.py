"""The transport: HTTP/1.1 to coved over its unix socket (default) or over
TCP with the API token, as the cove CLI does (COVE_SOCKET, COVE_HOST,
COVE_TOKEN). One kept-alive connection per thread, so concurrent callers
in different threads never share a connection."""
import contextlib
import json
import os
import threading
import urllib.parse

from ._wire import Connection
from .errors import Unavailable, error_from_response

DEFAULT_SOCKET = "/run/cove/cove.sock"


def _split_host(addr):
    """'127.0.0.1:7070' or '[::1]:7070' -> (host, port)."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError("COVE_HOST/host must be ADDR:PORT, not %r" % addr)
    return host.strip("[]"), int(port)


class Transport:
    """Where coved is and how to reach it. socket, host and token default to
    COVE_SOCKET, COVE_HOST and COVE_TOKEN; with a host (TCP) a token is
    required; token_file reads it from a file (its first line)."""

    def __init__(self, socket_path=None, host=None, token=None, token_file=None, timeout=None):
        env = os.environ
        self.host = host if host is not None else env.get("COVE_HOST") or None
        if token is None and token_file is not None:
            with open(token_file) as f:
                token = f.readline().rstrip()
        self.token = token if token is not None else env.get("COVE_TOKEN")
        self.socket_path = socket_path or env.get("COVE_SOCKET") or DEFAULT_SOCKET
        self.timeout = timeout
        if self.host:
            self._tcp = _split_host(self.host)
            if not self.token:
                raise ValueError("a TCP host needs the API token: set COVE_TOKEN or pass token=")
        self._local = threading.local()

    def _conn(self):
        c = getattr(self._local, "conn", None)
        if c is not None and not c.reusable():
            c.close()
            c = None
        if c is None:
            if self.host:
                c = Connection(tcp=self._tcp, timeout=self.timeout)
            else:
                c = Connection(unix_path=self.socket_path, timeout=self.timeout)
            self._local.conn = c
        return c

    @contextlib.contextmanager
    def abandon_on_error(self):
        """For reading a response body: if the reading fails (or the code
        handling it raises), the rest of the body is still in the
        connection, which is closed so no later request reads it."""
        try:
            yield
        except BaseException:
            self.close()
            raise

    def close(self):
        """Closes this thread's connection (the next request opens one)."""
        c = getattr(self._local, "conn", None)
        if c is not None:
            c.close()
            self._local.conn = None

    def open(self, method, path, query=None, body=None, json_body=None, headers=None):
        """Sends a request and returns the response, its body not yet read
        (the caller reads it all; a request made before that opens a new
        connection). body: bytes, or a binary file whose size is given as
        headers["Content-Length"]. A response with an error status raises
        the typed error."""
        if query:
            path += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        h = {}
        if json_body is not None:
            body = json.dumps(json_body).encode()
            h["Content-Type"] = "application/json"
        if self.host:
            h["Authorization"] = "Bearer " + self.token
        if headers:
            h.update(headers)
        length = None
        if body is not None and not isinstance(body, (bytes, bytearray, memoryview)):
            length = int(h.pop("Content-Length"))
        try:
            conn = self._conn()
            resp = conn.request(method, path, h, body, length)
        except OSError as e:  # refused, no socket, reset, closed, timed out, not HTTP
            self.close()
            where = self.host or self.socket_path
            raise Unavailable("unavailable", "coved at %s: %s" % (where, e), 0) from e
        if resp.status >= 400:
            data = resp.read()
            raise error_from_response(resp.status, data)
        return resp

    def call(self, method, path, query=None, json_body=None, body=None, headers=None):
        """A request whose answer is JSON: returns it parsed."""
        resp = self.open(method, path, query=query, json_body=json_body, body=body, headers=headers)
        data = resp.read()
        return json.loads(data) if data else None


_default = None
_default_lock = threading.Lock()


def default_transport():
    """The process-wide transport from the environment, made on first use."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Transport()
        return _default

"""A small HTTP/1.1 client connection for coved: one request at a time on
a kept-alive socket, the request's head and body in one write, bodies by
Content-Length, chunked or until close. (http.client works too, but costs
a call about 0.5 ms more CPU here: its header parsing goes through the
email package, and it writes a request's head and body apart, which costs
coved a second wakeup.)"""
import select
import socket

BLOCK = 1 << 20


class ProtocolError(OSError):
    pass


class Connection:
    def __init__(self, unix_path=None, tcp=None, timeout=None):
        if unix_path is not None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            addr = unix_path
        else:
            family = socket.AF_INET6 if ":" in tcp[0] else socket.AF_INET
            s = socket.socket(family, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            addr = tcp
        try:
            s.settimeout(timeout)
            s.connect(addr)
        except OSError:
            s.close()
            raise
        self.sock = s
        self.rfile = s.makefile("rb", buffering=65536)
        self.host = "cove" if unix_path is not None else "%s:%d" % tcp
        self.response = None  # the one whose body is being read
        self.closed = False

    def close(self):
        if not self.closed:
            self.closed = True
            self.rfile.close()
            self.sock.close()

    def reusable(self):
        """Idle, and not closed by coved meanwhile: an idle socket that is
        readable has reached EOF (coved's idle timeout) or holds bytes that
        answer nothing."""
        if self.closed or (self.response is not None and not self.response.done):
            return False
        try:
            return not select.select([self.sock], [], [], 0)[0]
        except (OSError, ValueError):
            return False

    def request(self, method, target, headers, body=None, length=None):
        """Sends a request; body is bytes or a binary file of `length`
        bytes. Returns the Response, its head read."""
        head = ["%s %s HTTP/1.1\r\nHost: %s\r\n" % (method, target, self.host)]
        for k, v in headers.items():
            head.append("%s: %s\r\n" % (k, v))
        if body is None:
            if method in ("POST", "PUT"):
                head.append("Content-Length: 0\r\n")
        elif isinstance(body, (bytes, bytearray, memoryview)):
            head.append("Content-Length: %d\r\n" % len(body))
        else:
            head.append("Content-Length: %d\r\n" % length)
        head.append("\r\n")
        data = "".join(head).encode("latin-1")
        if body is None:
            self.sock.sendall(data)
        elif isinstance(body, (bytes, bytearray, memoryview)):
            self.sock.sendall(data + body if len(body) < 65536 else data)
            if len(body) >= 65536:
                self.sock.sendall(body)
        else:
            # Exactly `length` bytes: a file that changed size meanwhile
            # must not leave the connection out of step.
            self.sock.sendall(data)
            left = length
            while left > 0:
                chunk = body.read(min(left, BLOCK))
                if not chunk:
                    self.close()
                    raise ProtocolError("the body ended %d bytes short of its Content-Length" % left)
                self.sock.sendall(chunk)
                left -= len(chunk)
        self.response = Response(self, method)
        return self.response


class Response:
    def __init__(self, conn, method):
        self._conn = conn
        f = conn.rfile
        line = f.readline(65537)
        parts = line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise ProtocolError("coved sent no HTTP status line (%r)" % line[:80])
        self.status = int(parts[1])
        self.headers = {}
        while True:
            h = f.readline(65537)
            if h in (b"\r\n", b"\n"):
                break
            if not h:
                raise ProtocolError("the connection closed in a response's headers")
            k, _, v = h.decode("latin-1").partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self._close = self.headers.get("connection", "").lower() == "close" or parts[0] == b"HTTP/1.0"
        self._chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        cl = self.headers.get("content-length")
        self._left = int(cl) if cl is not None and not self._chunked else None  # None: chunked or until close
        if method == "HEAD" or self.status in (204, 304) or 100 <= self.status < 200:
            self._left = 0
            self._chunked = False
        self._buf = b""
        self.done = False
        if self._left == 0:
            self._finish()

    def getheader(self, name, default=None):
        return self.headers.get(name.lower(), default)

    def _finish(self):
        self.done = True
        if self._close:
            self._conn.close()

    def _piece(self):
        """The next bytes of the body (b"" at its end)."""
        if self.done:
            return b""
        f = self._conn.rfile
        if self._chunked:
            if self._left is None or self._left == 0:
                size_line = f.readline(1024)
                if not size_line:
                    raise ProtocolError("the connection closed in a chunked body")
                self._left = int(size_line.split(b";", 1)[0].strip(), 16)
                if self._left == 0:
                    while f.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    self._finish()
                    return b""
            data = f.read1(min(self._left, BLOCK))
            if not data:
                raise ProtocolError("the connection closed in a chunk")
            self._left -= len(data)
            if self._left == 0:
                f.readline(3)  # the chunk's CRLF
            return data
        if self._left is None:  # until close
            data = f.read1(BLOCK)
            if not data:
                self._finish()
            return data
        data = f.read1(min(self._left, BLOCK))
        if not data:
            raise ProtocolError("the connection closed %d bytes before the body's end" % self._left)
        self._left -= len(data)
        if self._left == 0:
            self._finish()
        return data

    def read(self, amt=None):
        """amt bytes at most (fewer only at the end), or all that is left."""
        if amt is None:
            parts = [self._buf]
            self._buf = b""
            while piece := self._piece():
                parts.append(piece)
            return b"".join(parts)
        while len(self._buf) < amt and not self.done:
            piece = self._piece()
            if not piece:
                break
            self._buf += piece
        data, self._buf = self._buf[:amt], self._buf[amt:]
        return data

    def readline(self):
        """The next line of the body, with its \\n (b"" at the end)."""
        while b"\n" not in self._buf and not self.done:
            piece = self._piece()
            if not piece:
                break
            self._buf += piece
        i = self._buf.find(b"\n")
        if i < 0:
            data, self._buf = self._buf, b""
        else:
            data, self._buf = self._buf[:i + 1], self._buf[i + 1:]
        return data

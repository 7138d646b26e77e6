"""Sessions (a shell whose cwd and variables carry over), kept processes
(sb.spawn) and named locks."""
import base64
import threading
import time

from ._exec import read_events, result_from_json
from .errors import Conflict, NotFound


class Session:
    """A shell that stays: `cd`, variables and functions carry over from
    one run to the next. Close it (or use it as a context manager)."""

    def __init__(self, sandbox, info):
        self._sb = sandbox
        self.id = info["id"]
        self.info = info

    def run(self, cmd, timeout=None, stdin=None, on_stdout=None, on_stderr=None):
        return self._sb._exec({"cmd": cmd, "session": self.id}, timeout, stdin, on_stdout, on_stderr)

    def close(self):
        self._sb._transport.call("DELETE", "/v1/sandboxes/%s/sessions/%s" % (self._sb.id, self.id))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.close()
        except NotFound:
            pass  # its shell ended (an `exit` in a command ends the session)


class Process:
    """A kept process: it outlives this client; named by pid (and tag)."""

    def __init__(self, sandbox, info):
        self._sb = sandbox
        self.pid = info["pid"]
        self.tag = info.get("tag")
        self._path = "/v1/sandboxes/%s/processes/%d" % (sandbox.id, self.pid)

    def info(self):
        return self._sb._transport.call("GET", self._path)

    def send_stdin(self, data, eof=False):
        """Writes str or bytes to its stdin (spawned with stdin=True)."""
        if isinstance(data, str):
            data = data.encode()
        body = {"data_b64": base64.b64encode(data).decode(), "eof": eof}
        self._sb._transport.call("POST", self._path + "/stdin", json_body=body)

    def close_stdin(self):
        self.send_stdin(b"", eof=True)

    def kill(self, signal="KILL", tree=False):
        self._sb._transport.call("POST", self._path + "/signal", json_body={"signal": signal, "tree": tree})

    def wait(self, timeout=None):
        """Its exit code (None when a signal ended it) once it has ended;
        TimeoutError when it runs on past `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = 3600 if deadline is None else max(0.0, deadline - time.monotonic())
            p = self._sb._transport.call("GET", self._path, query={"wait": "%.3f" % min(left, 3600)})
            if p.get("state") == "exited":
                return p.get("exit_code")
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError("process %d still runs" % self.pid)

    def output(self, on_stdout=None, on_stderr=None):
        """Its output from the start (its kept tail, 1 MiB a stream), then
        live, until it ends: an ExecResult."""
        resp = self._sb._transport.open("GET", self._path + "/attach")
        return read_events(self._sb._transport, resp, on_stdout, on_stderr)


class Lock:
    """A sandbox's named lock (coved's, shared by every client): exclusive
    while held; renewed in the background so a long block keeps it; given
    back when the block ends, however it ends."""

    def __init__(self, sandbox, name, lease=30.0, timeout=None):
        self._sb, self.name, self.lease, self.timeout = sandbox, name, lease, timeout
        self._path = "/v1/sandboxes/%s/locks" % sandbox.id
        self.token = None
        self._stop = threading.Event()
        self._renewer = None

    def acquire(self):
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        while True:
            left = 3600 if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                j = self._sb._transport.call("POST", self._path,
                                             json_body={"name": self.name, "lease": self.lease, "wait": min(left, 3600)})
                break
            except Conflict:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
        self.token = j["token"]
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew, daemon=True)
        self._renewer.start()
        return self

    def _renew(self):
        while not self._stop.wait(self.lease / 3):
            try:
                self._sb._transport.call("POST", self._path + "/renew",
                                         json_body={"name": self.name, "token": self.token, "lease": self.lease})
            except Exception:
                return  # lost: release() will say so

    def release(self):
        self._stop.set()
        self._renewer.join()
        self._sb._transport.call("POST", self._path + "/release", json_body={"name": self.name, "token": self.token})
        self.token = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


__all__ = ["Session", "Process", "Lock", "result_from_json"]

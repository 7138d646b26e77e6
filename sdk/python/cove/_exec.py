"""Exec results and the NDJSON event streams of exec and attach."""
import base64
import json
from dataclasses import dataclass


@dataclass
class ExecResult:
    exit_code: int | None  # None when a signal ended it
    stdout: str
    stderr: str
    signal: str | None = None  # "KILL", "TERM"... without "SIG"
    timed_out: bool = False
    duration_ms: float | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def ok(self):
        return self.exit_code == 0


def _text(obj, key):
    """A collected result's or event's text: `key`, or `key`_b64 (output
    that is not UTF-8) decoded with replacement characters."""
    v = obj.get(key)
    if v is None and obj.get(key + "_b64") is not None:
        v = base64.b64decode(obj[key + "_b64"]).decode("utf-8", "replace")
    return v or ""


def result_from_json(j):
    return ExecResult(exit_code=j.get("exit_code"), stdout=_text(j, "stdout"), stderr=_text(j, "stderr"),
                      signal=j.get("signal"), timed_out=bool(j.get("timed_out")), duration_ms=j.get("duration_ms"),
                      stdout_truncated=bool(j.get("stdout_truncated")), stderr_truncated=bool(j.get("stderr_truncated")))


def read_events(transport, resp, on_stdout=None, on_stderr=None):
    """Reads an exec or attach event stream to its `exit` event, calling the
    callbacks with each chunk of text as it arrives; returns the result
    with all of the output. When a callback raises, the connection is
    dropped (not drained: that would wait for the command's end)."""
    out, err = [], []
    with transport.abandon_on_error():
        while True:
            line = resp.readline()
            if not line:
                raise ConnectionError("the event stream ended before the process's exit event")
            ev = json.loads(line)
            t = ev.get("type")
            if t in ("stdout", "stderr"):
                chunk = _text(ev, "data")
                (out if t == "stdout" else err).append(chunk)
                cb = on_stdout if t == "stdout" else on_stderr
                if cb is not None:
                    cb(chunk)
            elif t == "exit":
                resp.read()  # the end of the body: the kept-alive connection can be reused
                ev["stdout"], ev["stderr"] = "".join(out), "".join(err)
                return result_from_json(ev)
            elif t == "error":
                from .errors import CoveError
                e = ev.get("error") or {}
                raise CoveError(e.get("code", "exec_failed"), e.get("message", ev.get("message", "")), 0)

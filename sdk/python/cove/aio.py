"""cove.aio: the asyncio twin of cove. Every call runs the synchronous
client in the event loop's default thread executor (asyncio.to_thread): a
blocking call, such as a long run() or a lock that waits, holds one
executor thread, never the loop. Each executor thread has its own
connection to coved. Streaming callbacks (on_stdout, on_stderr) are called
in the event loop's thread, in order, each as its chunk arrives, all before
the awaited run() returns.

    from cove.aio import Sandbox
    async with await Sandbox.create() as sb:
        r = await sb.run("echo hi")"""
import asyncio

from . import sandbox as _sync
from ._exec import ExecResult
from .errors import BadRequest, Conflict, CoveError, NotFound, Unauthorized, Unavailable

__all__ = ["Sandbox", "Snapshot", "Template", "Session", "Process", "ExecResult", "CoveError", "BadRequest", "Unauthorized",
           "NotFound", "Conflict", "Unavailable"]


def _in_loop(cb):
    """A callback for the worker thread that calls cb in the loop's thread."""
    if cb is None:
        return None
    loop = asyncio.get_running_loop()
    return lambda chunk: loop.call_soon_threadsafe(cb, chunk)


async def _call(fn, *args, **kw):
    return await asyncio.to_thread(fn, *args, **kw)


async def _streamed(fn, *args, on_stdout=None, on_stderr=None, **kw):
    r = await asyncio.to_thread(fn, *args, on_stdout=_in_loop(on_stdout), on_stderr=_in_loop(on_stderr), **kw)
    await asyncio.sleep(0)  # callbacks scheduled last run before we return
    return r


class Files:
    def __init__(self, files):
        self._f = files

    async def write(self, path, data, mode=None):
        return await _call(self._f.write, path, data, mode)

    async def read(self, path):
        return await _call(self._f.read, path)

    async def read_text(self, path, encoding="utf-8"):
        return await _call(self._f.read_text, path, encoding)

    async def stat(self, path):
        return await _call(self._f.stat, path)

    async def exists(self, path):
        return await _call(self._f.exists, path)

    async def list(self, path=".", depth=1):
        return await _call(self._f.list, path, depth)

    async def mkdir(self, path):
        return await _call(self._f.mkdir, path)

    async def remove(self, path):
        return await _call(self._f.remove, path)

    async def upload(self, local, remote, mode=None):
        return await _call(self._f.upload, local, remote, mode)

    async def download(self, remote, local):
        return await _call(self._f.download, remote, local)


class Session:
    def __init__(self, s):
        self._s = s
        self.id = s.id

    async def run(self, cmd, timeout=None, stdin=None, on_stdout=None, on_stderr=None):
        return await _streamed(self._s.run, cmd, timeout, stdin, on_stdout=on_stdout, on_stderr=on_stderr)

    async def close(self):
        await _call(self._s.close)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()


class Process:
    def __init__(self, p):
        self._p = p
        self.pid, self.tag = p.pid, p.tag

    async def info(self):
        return await _call(self._p.info)

    async def send_stdin(self, data, eof=False):
        await _call(self._p.send_stdin, data, eof)

    async def close_stdin(self):
        await _call(self._p.close_stdin)

    async def kill(self, signal="KILL", tree=False):
        await _call(self._p.kill, signal, tree)

    async def wait(self, timeout=None):
        return await _call(self._p.wait, timeout)

    async def output(self, on_stdout=None, on_stderr=None):
        return await _streamed(self._p.output, on_stdout=on_stdout, on_stderr=on_stderr)


class Lock:
    def __init__(self, lock):
        self._l = lock

    async def __aenter__(self):
        await _call(self._l.acquire)
        return self

    async def __aexit__(self, *exc):
        await _call(self._l.release)


class Snapshot:
    def __init__(self, s):
        self._s = s
        self.id, self.info = s.id, s.info

    @property
    def durable(self):
        return self._s.durable

    @classmethod
    async def get(cls, snapshot_id):
        return cls(await _call(_sync.Snapshot.get, snapshot_id))

    @classmethod
    async def list(cls):
        return [cls(s) for s in await _call(_sync.Snapshot.list)]

    async def refresh(self):
        self.info = await _call(self._s.refresh)
        return self.info

    async def restore(self, **kw):
        return Sandbox(await _call(self._s.restore, **kw))

    async def delete(self):
        await _call(self._s.delete)


class Template:
    """As cove.Template, with coroutines."""

    def __init__(self, t):
        self._t = t
        self.name, self.info = t.name, t.info

    @classmethod
    async def create(cls, name, **kw):
        return cls(await _call(_sync.Template.create, name, **kw))

    @classmethod
    async def get(cls, name):
        return cls(await _call(_sync.Template.get, name))

    @classmethod
    async def list(cls):
        return [cls(t) for t in await _call(_sync.Template.list)]

    @property
    def pool(self):
        return self._t.pool

    async def refresh(self):
        self.info = await _call(self._t.refresh)
        return self.info

    async def sandbox(self, **kw):
        return Sandbox(await _call(self._t.sandbox, **kw))

    async def delete(self):
        await _call(self._t.delete)


class Sandbox:
    """As cove.Sandbox, with coroutines; `async with await
    Sandbox.create() as sb:` deletes it when the block ends."""

    def __init__(self, sb):
        self._sb = sb
        self.id, self.files = sb.id, Files(sb.files)

    @property
    def info(self):
        return self._sb.info

    @classmethod
    async def create(cls, **kw):
        if isinstance(kw.get("template"), Template):
            kw["template"] = kw["template"].name
        return cls(await _call(_sync.Sandbox.create, **kw))

    @classmethod
    async def connect(cls, sandbox_id, transport=None):
        return cls(await _call(_sync.Sandbox.connect, sandbox_id, transport))

    @classmethod
    async def list(cls, transport=None):
        return [cls(s) for s in await _call(_sync.Sandbox.list, transport)]

    @classmethod
    async def from_portable(cls, doc, **kw):
        return cls(await _call(_sync.Sandbox.from_portable, doc, **kw))

    async def refresh(self):
        return await _call(self._sb.refresh)

    async def set_timeout(self, seconds):
        await _call(self._sb.set_timeout, seconds)

    async def processes(self):
        return await _call(self._sb.processes)

    async def destroy(self):
        await _call(self._sb.destroy)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await _call(self._sb.__exit__, *exc)

    async def capabilities(self):
        return await _call(lambda: self._sb.capabilities)

    async def run(self, cmd, on_stdout=None, on_stderr=None, **kw):
        return await _streamed(self._sb.run, cmd, on_stdout=on_stdout, on_stderr=on_stderr, **kw)

    async def session(self, **kw):
        return Session(await _call(self._sb.session, **kw))

    async def spawn(self, cmd, **kw):
        return Process(await _call(self._sb.spawn, cmd, **kw))

    def lock(self, name, lease=30.0, timeout=None):
        return Lock(self._sb.lock(name, lease, timeout))

    async def expose_port(self, port, public=False):
        return await _call(self._sb.expose_port, port, public)

    async def ports(self):
        return await _call(self._sb.ports)

    async def close_port(self, port):
        await _call(self._sb.close_port, port)

    async def snapshot(self, name=None, wait_durable=True):
        return Snapshot(await _call(self._sb.snapshot, name, wait_durable))

    async def portable_snapshot(self, path=None):
        return await _call(self._sb.portable_snapshot, path)

    async def fork(self, n=1):
        return [Sandbox(s) for s in await _call(self._sb.fork, n)]

    async def checkpoint(self, label=""):
        return await _call(self._sb.checkpoint, label)

    async def history(self):
        return await _call(self._sb.history)

    async def rollback(self, seq):
        return Sandbox(await _call(self._sb.rollback, seq))

    async def branch(self, seq, n=1):
        return [Sandbox(s) for s in await _call(self._sb.branch, seq, n)]

    async def export(self, dest, format="zip", path=None):
        return await _call(self._sb.export, dest, format, path)

    def __repr__(self):
        return "aio.Sandbox(%r)" % self.id

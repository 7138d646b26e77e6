"""Sandbox and Snapshot: cove's sandboxes over its REST API."""
import base64
from dataclasses import dataclass

from ._exec import read_events, result_from_json
from ._http import default_transport
from .errors import NotFound
from .files import Files
from .process import Lock, Process, Session


@dataclass
class Capabilities:
    ports: bool
    native_snapshot: bool
    resume: bool


@dataclass
class Checkpoint:
    seq: int
    parent: int | None
    label: str
    snapshot: str
    created_at: int


@dataclass
class Port:
    """A sandbox's port opened as a URL on coved's port proxy. A private
    port's requests need `token` (header X-Cove-Token, or once the query
    parameter cove_token, which sets a cookie): `browser_url` has it."""
    port: int
    url: str
    token: str
    public: bool

    @property
    def browser_url(self):
        return self.url if self.public else self.url + "?cove_token=" + self.token

    @classmethod
    def _of(cls, j):
        return cls(j["port"], j["url"], j["token"], j["public"])


def _spec(**kw):
    return {k: v for k, v in kw.items() if v is not None}


class Sandbox:
    """A handle on one sandbox, by ID. Sandbox.create() makes one,
    Sandbox.connect(id) reattaches; `with Sandbox.create() as sb:` deletes
    it when the block ends, however it ends."""

    def __init__(self, info, transport=None):
        self._transport = transport or default_transport()
        self.id = info["id"]
        self.info = info
        self._workspace = None
        self.files = Files(self)
        self._path = "/v1/sandboxes/" + self.id

    # -- lifecycle -----------------------------------------------------------
    @classmethod
    def create(cls, image=None, name=None, memory=None, cpus=None, pids=None, env=None, cwd=None, user=None,
               timeout=None, isolation=None, template=None, start=None, ready=None, transport=None, **fields):
        """memory in bytes or as "512M"/"1G"; timeout: seconds until coved
        deletes it. template: a Template (or its name) whose fields this
        inherits, those given here winning (from its warm pool when one
        fits: info["from_pool"]). start: a start command; ready: a
        readiness check ({"port": N} | {"url": U} | {"cmd": C}, "timeout")
        that create waits for. Other API fields (network, allow_out...)
        as keywords."""
        t = transport or default_transport()
        if isinstance(template, Template):
            template = template.name
        spec = _spec(image=image, name=name, memory=memory, cpus=cpus, pids=pids, env=env, cwd=cwd, user=user,
                     timeout=timeout, isolation=isolation, template=template, start=start, ready=ready, **fields)
        return cls(t.call("POST", "/v1/sandboxes", json_body=spec), t)

    @classmethod
    def connect(cls, sandbox_id, transport=None):
        """The sandbox with this ID; NotFound when there is none."""
        t = transport or default_transport()
        return cls(t.call("GET", "/v1/sandboxes/" + sandbox_id), t)

    @classmethod
    def list(cls, transport=None):
        t = transport or default_transport()
        return [cls(j, t) for j in t.call("GET", "/v1/sandboxes")["sandboxes"]]

    @classmethod
    def from_portable(cls, doc, transport=None, **create):
        """A new sandbox holding the files of a portable snapshot (the
        value of portable_snapshot()); deleted again if the import fails."""
        sb = cls.create(transport=transport, **create)
        try:
            sb._transport.call("POST", sb._path + "/snapshot.json", json_body=doc)
        except BaseException:
            sb.destroy()
            raise
        return sb

    def refresh(self):
        self.info = self._transport.call("GET", self._path)
        return self.info

    @property
    def state(self):
        return self.refresh()["state"]

    def set_timeout(self, seconds):
        self.info = self._transport.call("POST", self._path + "/timeout", json_body={"timeout": seconds})

    def destroy(self):
        self._transport.call("DELETE", self._path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.destroy()
        except NotFound:
            pass

    def _check_exists(self):
        self._transport.call("GET", self._path)  # raises NotFound for a deleted sandbox

    @property
    def capabilities(self):
        caps = self._transport.call("GET", "/v1/capabilities")
        backend = caps.get("backends", {}).get(self.info.get("isolation", "isolated"), caps)
        c = backend.get("capabilities", caps.get("capabilities", {}))
        return Capabilities(bool(c.get("ports")), bool(c.get("nativeSnapshot")), bool(c.get("resume")))

    # -- paths ---------------------------------------------------------------
    @property
    def workspace(self):
        """The working folder as the files API names it: the sandbox's cwd,
        else where a command starts (its user's home), asked once. In an
        external sandbox (the host backend) file paths are inside its
        workspace folder, whose top is "/"."""
        if self._workspace is None:
            if self.info.get("isolation") == "external":
                self._workspace = "/"
            else:
                self._workspace = self.info.get("cwd") or self.run("pwd").stdout.strip() or "/"
        return self._workspace

    def resolve(self, path):
        """A file path: an absolute one as it is; a relative one under the
        workspace."""
        path = str(path)
        if path.startswith("/"):
            return path
        base = self.workspace.rstrip("/")
        return base + "/" + path if path not in ("", ".") else (base or "/")

    def _cwd(self, path):
        """A command's cwd: relative to the workspace too; an external
        sandbox's commands see the host, where its workspace is a folder."""
        if path is None or str(path).startswith("/") or self.info.get("isolation") != "external":
            return None if path is None else self.resolve(path)
        return self.info["workspace"].rstrip("/") + "/" + str(path)

    # -- commands ------------------------------------------------------------
    def run(self, cmd, env=None, cwd=None, user=None, timeout=None, stdin=None, on_stdout=None, on_stderr=None,
            max_output=None):
        """Runs cmd (a shell string or an argv list) to its end: an
        ExecResult. With on_stdout/on_stderr, each chunk of output is
        passed to them as it comes."""
        req = _spec(cmd=cmd, env=env, cwd=self._cwd(cwd), user=user,
                    max_output=max_output)
        return self._exec(req, timeout, stdin, on_stdout, on_stderr)

    def _exec(self, req, timeout, stdin, on_stdout, on_stderr):
        if timeout is not None:
            req["timeout"] = timeout
        if isinstance(stdin, str):
            req["stdin"] = stdin
        elif stdin is not None:
            req["stdin_b64"] = base64.b64encode(stdin).decode()
        if on_stdout is None and on_stderr is None:
            return result_from_json(self._transport.call("POST", self._path + "/exec", json_body=req))
        resp = self._transport.open("POST", self._path + "/exec", query={"stream": 1}, json_body=req)
        return read_events(self._transport, resp, on_stdout, on_stderr)

    def session(self, cwd=None, env=None, user=None):
        body = _spec(cwd=self._cwd(cwd), env=env, user=user)
        return Session(self, self._transport.call("POST", self._path + "/sessions", json_body=body))

    def spawn(self, cmd, env=None, cwd=None, user=None, tag=None, stdin=False):
        """Starts cmd as a kept process and returns at once: a Process.
        stdin=True keeps its stdin open for send_stdin()."""
        req = _spec(cmd=cmd, env=env, cwd=self._cwd(cwd), user=user, tag=tag)
        req["background"] = True
        if stdin:
            req["stdin_open"] = True
        return Process(self, self._transport.call("POST", self._path + "/exec", json_body=req))

    def processes(self):
        return self._transport.call("GET", self._path + "/processes")["processes"]

    def lock(self, name, lease=30.0, timeout=None):
        """`with sb.lock("build"):` holds the sandbox's lock `name`, waiting
        for it (at most `timeout` seconds: then Conflict)."""
        return Lock(self, name, lease, timeout)

    # -- ports -----------------------------------------------------------------
    def expose_port(self, port, public=False):
        """Open `port` (a server in the sandbox, on any address or localhost
        only) as a URL; again: the same URL and token, `public` as asked."""
        return Port._of(self._transport.call("POST", self._path + "/ports",
                                             json_body={"port": port, "public": public}))

    def ports(self):
        return [Port._of(j) for j in self._transport.call("GET", self._path + "/ports")["ports"]]

    def close_port(self, port):
        """Its URL answers 404 from now on; open connections to it end."""
        self._transport.call("DELETE", "%s/ports/%d" % (self._path, int(port)))

    # -- snapshots and history -----------------------------------------------
    def snapshot(self, name=None, wait_durable=True):
        j = self._transport.call("POST", self._path + "/snapshots",
                                 json_body=_spec(name=name, wait_durable=wait_durable))
        return Snapshot(j, self._transport)

    def portable_snapshot(self, path=None):
        """The files as a portable JSON value {"version": 1, "files": [...]}."""
        return self._transport.call("GET", self._path + "/snapshot.json",
                                    query=None if path is None else {"path": self.resolve(path)})

    def fork(self, n=1):
        j = self._transport.call("POST", self._path + "/fork", json_body={"count": n})
        return [Sandbox(s, self._transport) for s in j["sandboxes"]]

    def checkpoint(self, label=""):
        j = self._transport.call("POST", self._path + "/checkpoints", json_body={"label": label})
        return Checkpoint(j["seq"], j.get("parent"), j.get("label", ""), j["snapshot"], j["created_at"])

    def history(self):
        return self._transport.call("GET", self._path + "/checkpoints")

    def rollback(self, seq):
        return Sandbox(self._transport.call("POST", self._path + "/rollback", json_body={"seq": seq}),
                       self._transport)

    def branch(self, seq, n=1):
        j = self._transport.call("POST", self._path + "/branch", json_body={"seq": seq, "count": n})
        return [Sandbox(s, self._transport) for s in j["sandboxes"]]

    def export(self, dest, format="zip", path=None):
        """Streams a folder (default: the workspace) as a zip or tar into
        dest, a local file name or a binary file object; returns its size."""
        q = _spec(format=format, path=None if path is None else self.resolve(path))
        resp = self._transport.open("GET", self._path + "/export", query=q)
        f = open(dest, "wb") if isinstance(dest, (str, bytes)) or hasattr(dest, "__fspath__") else dest
        n = 0
        try:
            with self._transport.abandon_on_error():
                while chunk := resp.read(1 << 20):
                    f.write(chunk)
                    n += len(chunk)
        finally:
            if f is not dest:
                f.close()
        return n

    def __repr__(self):
        return "Sandbox(%r)" % self.id


class Snapshot:
    """A saved copy of a sandbox's files; outlives the sandbox."""

    def __init__(self, info, transport=None):
        self._transport = transport or default_transport()
        self.id = info["id"]
        self.info = info

    @property
    def durable(self):
        return bool(self.info.get("durable"))

    @classmethod
    def get(cls, snapshot_id, transport=None):
        t = transport or default_transport()
        return cls(t.call("GET", "/v1/snapshots/" + snapshot_id), t)

    @classmethod
    def list(cls, transport=None):
        t = transport or default_transport()
        return [cls(j, t) for j in t.call("GET", "/v1/snapshots")["snapshots"]]

    def refresh(self):
        self.info = self._transport.call("GET", "/v1/snapshots/" + self.id)
        return self.info

    def restore(self, name=None, memory=None, cpus=None, pids=None):
        """A new sandbox on the snapshot's files."""
        j = self._transport.call("POST", "/v1/snapshots/%s/restore" % self.id,
                                 json_body=_spec(name=name, memory=memory, cpus=cpus, pids=pids))
        return Sandbox(j, self._transport)

    def delete(self):
        self._transport.call("DELETE", "/v1/snapshots/" + self.id)

    def __repr__(self):
        return "Snapshot(%r)" % self.id


class Template:
    """A named starting point for sandboxes (an image or a snapshot with
    limits, env, user, network, a start command and a readiness check),
    and its warm pool of sandboxes started ahead of time."""

    def __init__(self, info, transport=None):
        self._transport = transport or default_transport()
        self.name = info["name"]
        self.info = info

    @classmethod
    def create(cls, name, image=None, from_snapshot=None, memory=None, cpus=None, pids=None, disk=None, env=None,
               cwd=None, user=None, start=None, ready=None, warm=None, idle_timeout=None, transport=None,
               **fields):
        """fields: any other create field (network, allow_out, deny_out,
        timeout...). from_snapshot: a Snapshot or its ID."""
        t = transport or default_transport()
        if isinstance(from_snapshot, Snapshot):
            from_snapshot = from_snapshot.id
        body = _spec(name=name, image=image, from_snapshot=from_snapshot, memory=memory, cpus=cpus, pids=pids,
                     disk=disk, env=env, cwd=cwd, user=user, start=start, ready=ready, warm=warm,
                     idle_timeout=idle_timeout, **fields)
        return cls(t.call("POST", "/v1/templates", json_body=body), t)

    @classmethod
    def get(cls, name, transport=None):
        t = transport or default_transport()
        return cls(t.call("GET", "/v1/templates/" + name), t)

    @classmethod
    def list(cls, transport=None):
        t = transport or default_transport()
        return [cls(j, t) for j in t.call("GET", "/v1/templates")["templates"]]

    def refresh(self):
        self.info = self._transport.call("GET", "/v1/templates/" + self.name)
        return self.info

    @property
    def pool(self):
        """{size, ready, starting} of its warm pool, as last fetched."""
        return self.info["pool"]

    def sandbox(self, **overrides):
        """A new sandbox from this template (Sandbox.create's keywords override)."""
        return Sandbox.create(template=self.name, transport=self._transport, **overrides)

    def delete(self):
        """Its warm pool goes too; sandboxes made from it stay."""
        self._transport.call("DELETE", "/v1/templates/" + self.name)

    def __repr__(self):
        return "Template(%r)" % self.name

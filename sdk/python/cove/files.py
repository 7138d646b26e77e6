"""sb.files: a sandbox's files. Relative paths are relative to the
sandbox's working folder (its cwd, else its user's home)."""
import os

from .errors import NotFound

_BLOCK = 1 << 20


class Files:
    def __init__(self, sandbox):
        self._sb = sandbox
        self._base = "/v1/sandboxes/%s/files" % sandbox.id

    def _t(self):
        return self._sb._transport

    def _q(self, path, **more):
        q = {"path": self._sb.resolve(path)}
        q.update({k: v for k, v in more.items() if v is not None})
        return q

    def write(self, path, data, mode=None):
        """Writes bytes or str (UTF-8) to path, making missing parent
        folders; mode like 0o755 or "0755"."""
        if isinstance(data, str):
            data = data.encode()
        self._t().call("PUT", self._base, query=self._q(path, mode=_mode(mode), parents=1), body=bytes(data))

    def read(self, path):
        """The file's bytes, or None when there is no such file."""
        try:
            resp = self._t().open("GET", self._base, query=self._q(path))
        except NotFound:
            self._sb._check_exists()
            return None
        data = resp.read()
        if resp.getheader("Content-Type", "").startswith("application/json"):
            raise IsADirectoryError(self._sb.resolve(path))
        return data

    def read_text(self, path, encoding="utf-8"):
        data = self.read(path)
        return None if data is None else data.decode(encoding)

    def stat(self, path):
        """The path's entry (name, path, type, size, mode, mtime, uid,
        gid, target), or None when it does not exist."""
        try:
            return self._t().call("GET", self._base, query=self._q(path, stat=1))
        except NotFound:
            self._sb._check_exists()
            return None

    def exists(self, path):
        return self.stat(path) is not None

    def list(self, path=".", depth=1):
        """The folder's entries, `depth` levels down, as dicts."""
        return self._t().call("GET", self._base, query=self._q(path, depth=depth))["entries"]

    def mkdir(self, path):
        self._t().call("POST", self._base + "/mkdir", query=self._q(path))

    def remove(self, path):
        """Removes a file or a folder with all in it; nothing to do when it
        does not exist."""
        self._t().call("DELETE", self._base, query=self._q(path, recursive=1))

    def upload(self, local, remote, mode=None):
        """Streams a local file to the sandbox (memory stays bounded)."""
        with open(local, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            self._t().call("PUT", self._base, query=self._q(remote, mode=_mode(mode), parents=1), body=f,
                           headers={"Content-Length": str(size)})

    def download(self, remote, local):
        """Streams a sandbox file to a local file; returns its size.
        NotFound when the remote file does not exist."""
        resp = self._t().open("GET", self._base, query=self._q(remote))
        n = 0
        with self._t().abandon_on_error(), open(local, "wb") as f:
            while chunk := resp.read(_BLOCK):
                f.write(chunk)
                n += len(chunk)
        return n


def _mode(mode):
    if mode is None or isinstance(mode, str):
        return mode
    return "%04o" % mode

"""Image: cove's OCI images (import, pull, list, delete) over its REST API."""
import json
import os
import urllib.parse

from ._http import default_transport
from .errors import CoveError


def _path(ref):
    return "/v1/images/" + urllib.parse.quote(ref, safe=":@")


class Image:
    """An image of coved's: imported (an OCI image layout or a docker
    archive, as a tar) or pulled from a registry. Sandbox.create(image=...)
    starts from one by name or ID."""

    def __init__(self, info, transport=None):
        self._transport = transport or default_transport()
        self.id = info["id"]
        self.info = info

    @property
    def names(self):
        return list(self.info.get("names", []))

    @property
    def config(self):
        """env, working_dir, user, entrypoint, cmd, exposed_ports, labels."""
        return self.info.get("config", {})

    @classmethod
    def list(cls, transport=None):
        t = transport or default_transport()
        return [cls(j, t) for j in t.call("GET", "/v1/images")["images"]]

    @classmethod
    def get(cls, ref, transport=None):
        """By name, ID or 12+ hex digits of its ID; NotFound when none."""
        t = transport or default_transport()
        return cls(t.call("GET", _path(ref)), t)

    @classmethod
    def import_archive(cls, archive, name=None, transport=None):
        """archive: the tar's bytes, or a path to it (streamed from the
        file)."""
        t = transport or default_transport()
        query = {"name": name} if name else None
        if isinstance(archive, (bytes, bytearray, memoryview)):
            return cls(t.call("POST", "/v1/images", query=query, body=bytes(archive)), t)
        with open(archive, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            return cls(t.call("POST", "/v1/images", query=query, body=f, headers={"Content-Length": str(size)}), t)

    @classmethod
    def pull(cls, ref, on_progress=None, transport=None):
        """Pulls ref from its registry; on_progress(event) hears of each
        layer ({"digest", "done", "total", "status"})."""
        t = transport or default_transport()
        resp = t.open("POST", "/v1/images/pull", json_body={"ref": ref})
        with t.abandon_on_error():
            while True:
                line = resp.readline()
                if not line:
                    raise ConnectionError("the pull's stream ended early")
                ev = json.loads(line)
                if ev.get("type") == "layer" and on_progress is not None:
                    on_progress(ev)
                elif ev.get("type") == "image":
                    resp.read()
                    return cls(ev["image"], t)
                elif ev.get("type") == "error":
                    e = ev.get("error") or {}
                    raise CoveError(e.get("code", "internal"), e.get("message", ""), 0)

    @classmethod
    def prune(cls, all=False, transport=None):
        """Deletes the images nothing uses (all: named ones too); their IDs."""
        t = transport or default_transport()
        return t.call("POST", "/v1/images/prune", json_body={"all": all})["deleted"]

    def refresh(self):
        self.info = self._transport.call("GET", _path(self.id))
        return self.info

    def delete(self):
        """Conflict while a sandbox, snapshot or template uses it."""
        self._transport.call("DELETE", _path(self.id))

    def __repr__(self):
        return "Image(%r)" % self.id

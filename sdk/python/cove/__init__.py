"""cove: Python client for cove's sandboxes (coved's REST API).

    from cove import Sandbox
    with Sandbox.create() as sb:
        print(sb.run("echo hi").stdout)

coved is reached on its unix socket (COVE_SOCKET, default
/run/cove/cove.sock) or over TCP (COVE_HOST=ADDR:PORT with COVE_TOKEN), as
the cove CLI does; pass transport=Transport(...) to choose per call."""
from ._exec import ExecResult
from ._http import Transport
from .image import Image
from .errors import BadRequest, Conflict, CoveError, NotFound, Unauthorized, Unavailable
from .process import Lock, Process, Session
from .sandbox import Capabilities, Checkpoint, Port, Sandbox, Snapshot, Template

__all__ = ["Sandbox", "Snapshot", "Template", "Image", "Session", "Process", "Lock", "ExecResult", "Capabilities",
           "Checkpoint", "Port", "Transport", "CoveError", "BadRequest", "Unauthorized", "NotFound", "Conflict", "Unavailable"]

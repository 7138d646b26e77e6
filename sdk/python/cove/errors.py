"""Typed errors carrying cove's error code and message
({"error": {"code", "message"}} with the HTTP status)."""
import json


class CoveError(Exception):
    def __init__(self, code, message, status=0):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message
        self.status = status


class BadRequest(CoveError):
    """400, 413, 431: the request was refused and changed nothing."""


class Unauthorized(CoveError):
    """401, 403: no or a wrong token, or not allowed."""


class NotFound(CoveError):
    """404: no such sandbox, snapshot, process, session or path."""


class Conflict(CoveError):
    """409: e.g. a lock is held, a tag is taken."""


class Unavailable(CoveError):
    """coved cannot be reached, or is full for now (429, 503), or its disk is (507)."""


_BY_STATUS = {400: BadRequest, 413: BadRequest, 431: BadRequest, 401: Unauthorized, 403: Unauthorized,
              404: NotFound, 409: Conflict, 429: Unavailable, 503: Unavailable, 507: Unavailable}


def error_from_response(status, body):
    code, message = "http_%d" % status, ""
    try:
        e = json.loads(body)["error"]
        code, message = e.get("code", code), e.get("message", "")
    except (ValueError, KeyError, TypeError):
        message = body[:200].decode("utf-8", "replace")
    return _BY_STATUS.get(status, CoveError)(code, message, status)

"""Ownership: a sandbox's timeout (deleted when it runs out, extended
through the API, kept across a coved restart) and ephemeral sandboxes
(deleted when the connection that created them closes)."""
import json
import os
import signal
import time

import covetest
from covetest import wait_until


def _status(cv, sid):
    return cv.api("GET", "/v1/sandboxes/" + sid)[0]


def _ids(cv):
    return {s["id"] for s in cv.api("GET", "/v1/sandboxes")[1]["sandboxes"]}


def _leftovers(cv, sid):
    """What of sid is still on the host: its cgroups and its subvolume."""
    left = [h for h in ("memory", "pids", "cpu", "freezer")
            if os.path.isdir("/sys/fs/cgroup/%s/cove/%s" % (h, sid))]
    if os.path.exists(os.path.join(cv.data, "pool", "sandboxes", sid)):
        left.append("subvolume")
    return left


def _call(c, method, path, body=None):
    """One request on an open connection c (kept open): (status, JSON)."""
    c.request(method, path, body=json.dumps(body) if body is not None else None)
    r = c.getresponse()
    return r.status, json.loads(r.read())


def test_timeout_deletes_the_sandbox(cv):
    st, sb = cv.api("POST", "/v1/sandboxes", {"timeout": 1})
    assert st == 201, (st, sb)
    sid = sb["id"]
    assert abs(sb["expires_at"] - sb["created_at"] - 1000) < 500, sb
    assert wait_until(lambda: _status(cv, sid) == 404, 5), "still there after its timeout"
    assert wait_until(lambda: not _leftovers(cv, sid), 10), _leftovers(cv, sid)
    st, other = cv.api("POST", "/v1/sandboxes", {})
    assert st == 201 and other["expires_at"] is None, other
    cv.api("DELETE", "/v1/sandboxes/" + other["id"])


def test_extending_the_timeout_keeps_it(cv):
    sid = cv.create(timeout=1)
    st, sb = cv.api("POST", "/v1/sandboxes/%s/timeout" % sid, {"timeout": 4})
    assert st == 200 and sb["id"] == sid, (st, sb)
    assert sb["expires_at"] > int(time.time() * 1000) + 3000, sb
    time.sleep(2)
    assert _status(cv, sid) == 200, "deleted at its first deadline"
    assert cv.exec(sid, ["true"])["exit_code"] == 0
    assert wait_until(lambda: _status(cv, sid) == 404, 6)
    # A sandbox without a timeout gets one; the CLI sets and changes it.
    r = cv.cli("create", "--timeout", "60")
    assert r.returncode == 0, r
    sid = r.stdout.decode().strip()
    before = cv.api("GET", "/v1/sandboxes/" + sid)[1]["expires_at"]
    r = cv.cli("timeout", sid, "1.5")
    assert r.returncode == 0 and sid.encode() in r.stdout, r
    after = cv.api("GET", "/v1/sandboxes/" + sid)[1]["expires_at"]
    assert after < before - 50000, (before, after)
    assert wait_until(lambda: _status(cv, sid) == 404, 5)
    assert cv.cli("timeout", sid, "5").returncode == 1
    assert cv.cli("timeout", sid, "soon").returncode == 2
    assert cv.cli("create", "--timeout", "0").returncode == 2


def test_bad_input_creates_nothing(cv):
    before = _ids(cv)
    for body in ({"timeout": 0}, {"timeout": -1}, {"timeout": "x"}, {"timeout": 31 * 86400},
                 {"timeout": True}, {"ephemeral": "yes"}, {"ephemeral": 1}):
        st, j = cv.api("POST", "/v1/sandboxes", body)
        assert st == 400 and j["error"]["code"], (body, st, j)
    assert _ids(cv) == before
    sid = cv.create()
    try:
        for body in ({"timeout": 0}, {"timeout": "x"}, {}, {"timeout": 5, "other": 1}):
            st, j = cv.api("POST", "/v1/sandboxes/%s/timeout" % sid, body)
            assert st == 400, (body, st, j)
        assert cv.api("GET", "/v1/sandboxes/" + sid)[1]["expires_at"] is None
        assert cv.api("POST", "/v1/sandboxes/sbnosuchsandbx/timeout", {"timeout": 5})[0] == 404
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_timeout_survives_a_coved_restart(_cv):
    cv = covetest.Coved().start()
    try:
        st, sb = cv.api("POST", "/v1/sandboxes", {"timeout": 3})
        assert st == 201, (st, sb)
        sid = sb["id"]
        cv.kill(signal.SIGKILL)
        cv.start()
        st, again = cv.api("GET", "/v1/sandboxes/" + sid)
        assert st == 200 and again["expires_at"] == sb["expires_at"], (st, again)
        left = sb["expires_at"] / 1000 - time.time()
        assert left > 0, "the restart took longer than the timeout"
        assert wait_until(lambda: _status(cv, sid) == 404, left + 3), "not deleted after a restart"
        assert wait_until(lambda: not _leftovers(cv, sid), 10), _leftovers(cv, sid)
    finally:
        cv.cleanup()


def test_ephemeral_goes_with_its_connection(cv):
    keep = cv.create()
    c = cv.conn()
    try:
        st, sb = _call(c, "POST", "/v1/sandboxes", {"ephemeral": True})
        assert st == 201 and sb["ephemeral"] is True, (st, sb)
        eph = sb["id"]
        st, r = _call(c, "POST", "/v1/sandboxes/%s/exec" % eph, {"cmd": ["echo", "hi"]})
        assert st == 200 and r["stdout"] == "hi\n", (st, r)
        assert _status(cv, eph) == 200  # other connections come and go
    finally:
        c.close()
    assert wait_until(lambda: _status(cv, eph) == 404, 5), "ephemeral sandbox outlived its connection"
    assert wait_until(lambda: not _leftovers(cv, eph), 10), _leftovers(cv, eph)
    # Later connections (likely at the same address) own nothing of it.
    for _ in range(3):
        c = cv.conn()
        assert _call(c, "POST", "/v1/sandboxes/%s/exec" % keep, {"cmd": ["true"]})[0] == 200
        c.close()
    time.sleep(0.5)
    assert _status(cv, keep) == 200
    cv.api("DELETE", "/v1/sandboxes/" + keep)


def test_ephemeral_and_exec_hooks_share_a_connection(cv):
    other = cv.create()
    c = cv.conn()
    try:
        st, sb = _call(c, "POST", "/v1/sandboxes", {"ephemeral": True})
        assert st == 201, (st, sb)
        eph = sb["id"]
        # An exec in another sandbox on the same connection, left running.
        body = {"cmd": ["sh", "-c", "echo $$ > /tmp/pid; exec sleep 300"]}
        c.request("POST", "/v1/sandboxes/%s/exec" % other, body=json.dumps(body))
        running = lambda: cv.exec(other, "kill -0 $(cat /tmp/pid 2>/dev/null) 2>/dev/null && echo yes")["stdout"]
        assert wait_until(lambda: running() == "yes\n", 10), "the exec did not start"
    finally:
        c.close()
    assert wait_until(lambda: _status(cv, eph) == 404, 5), "ephemeral sandbox outlived its connection"
    assert wait_until(lambda: running() == "", 5), "the exec outlived its client"
    assert _status(cv, other) == 200
    cv.api("DELETE", "/v1/sandboxes/" + other)


def test_ephemeral_deleted_when_coved_restarts(_cv):
    cv = covetest.Coved().start()
    try:
        c = cv.conn()
        st, sb = _call(c, "POST", "/v1/sandboxes", {"ephemeral": True})
        assert st == 201, (st, sb)
        cv.kill(signal.SIGKILL)
        c.close()
        cv.start()
        assert wait_until(lambda: _status(cv, sb["id"]) == 404, 5), "kept across a restart"
        assert wait_until(lambda: not _leftovers(cv, sb["id"]), 10), _leftovers(cv, sb["id"])
    finally:
        cv.cleanup()

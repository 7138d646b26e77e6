"""Named locks of a sandbox: acquire with a lease and a wait, release and
renew with the token, expiry, waiters served first come first served,
waiters that hang up or whose sandbox goes away, bad input, and many
concurrent clients whose protected sections never overlap. Also `cove
lock` (libcove's lock calls), which renews the lease while its command runs."""
import contextlib
import json
import os
import re
import socket
import subprocess
import threading
import time

import covetest
from covetest import wait_until


@contextlib.contextmanager
def _sandbox(cv):
    sid = cv.create()
    try:
        yield sid
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def _p(sid, suffix=""):
    return "/v1/sandboxes/%s/locks%s" % (sid, suffix)


def _acquire(cv, sid, name, **kw):
    kw["name"] = name
    return cv.api("POST", _p(sid), kw, timeout=kw.get("wait", 0) + 30)


def _held(cv, sid):
    """{name: lock} of the listing."""
    st, j = cv.api("GET", _p(sid))
    assert st == 200, (st, j)
    return {lk["name"]: lk for lk in j["locks"]}


def _release(cv, sid, name, token):
    return cv.api("POST", _p(sid, "/release"), {"name": name, "token": token})


def _waiter(cv, sid, name, wait, lease=30):
    """An acquire left waiting on a raw socket (the request only)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(cv.socket)
    body = json.dumps({"name": name, "wait": wait, "lease": lease}).encode()
    s.sendall(b"POST %s HTTP/1.1\r\nHost: cove\r\nContent-Length: %d\r\n\r\n%s" % (_p(sid).encode(), len(body), body))
    return s


def _waiting(cv, sid, name):
    lk = _held(cv, sid).get(name)
    return lk["waiters"] if lk else 0


def _start(fn, *args):
    t = threading.Thread(target=fn, args=args, daemon=True)
    t.start()
    return t


def test_acquire_release_and_list(cv):
    with _sandbox(cv) as sid:
        before = time.time()
        st, g = _acquire(cv, sid, "build/cache")
        assert st == 200 and g["name"] == "build/cache", (st, g)
        assert re.fullmatch(r"[0-9a-f]{32}", g["token"]), g
        assert before + 29 < g["expires_at"] / 1000 < time.time() + 31, g  # the default lease: 30 s
        listed = _held(cv, sid)
        assert listed == {"build/cache": {"name": "build/cache", "expires_at": g["expires_at"], "waiters": 0}}, listed
        assert g["token"] not in json.dumps(cv.api("GET", _p(sid))[1])
        # Held: another try fails at once, and changes nothing.
        st, j = _acquire(cv, sid, "build/cache")
        assert st == 409 and j["error"]["code"] == "lock_held" and "build/cache" in j["error"]["message"], (st, j)
        # Other names are other locks.
        st, other = _acquire(cv, sid, "/build/cache")
        assert st == 200 and other["token"] != g["token"], (st, other)
        # A wrong token releases nothing.
        st, j = _release(cv, sid, "build/cache", "0" * 32)
        assert st == 409 and j["error"]["code"] == "wrong_state" and "token" in j["error"]["message"], (st, j)
        st, j = _release(cv, sid, "build/cache", other["token"])
        assert st == 409, (st, j)
        assert "build/cache" in _held(cv, sid)
        st, j = _release(cv, sid, "build/cache", g["token"])
        assert st == 200 and j == {"name": "build/cache", "released": True}, (st, j)
        assert set(_held(cv, sid)) == {"/build/cache"}
        # Released twice: the token is spent.
        st, j = _release(cv, sid, "build/cache", g["token"])
        assert st == 409 and "not held" in j["error"]["message"], (st, j)
        st, again = _acquire(cv, sid, "build/cache")
        assert st == 200 and again["token"] != g["token"], (st, again)
        # Locks are per sandbox.
        with _sandbox(cv) as sid2:
            assert _acquire(cv, sid2, "build/cache")[0] == 200


def test_lease_runs_out_and_renew_extends_it(cv):
    with _sandbox(cv) as sid:
        st, g = _acquire(cv, sid, "short", lease=1)
        assert st == 200 and abs(g["expires_at"] / 1000 - time.time() - 1) < 0.5, (st, g)
        assert wait_until(lambda: "short" not in _held(cv, sid), 3), "the lease did not run out"
        st, j = cv.api("POST", _p(sid, "/renew"), {"name": "short", "token": g["token"], "lease": 5})
        assert st == 409 and "not held" in j["error"]["message"], (st, j)
        st, j = _release(cv, sid, "short", g["token"])
        assert st == 409 and "lease ran out" in j["error"]["message"], (st, j)
        # Renewed before it runs out, the lock stays held past its first lease.
        st, g = _acquire(cv, sid, "long", lease=1)
        assert st == 200, (st, g)
        st, j = cv.api("POST", _p(sid, "/renew"), {"name": "long", "token": "f" * 32, "lease": 5})
        assert st == 409, (st, j)
        st, r = cv.api("POST", _p(sid, "/renew"), {"name": "long", "token": g["token"], "lease": 3})
        assert st == 200 and r["name"] == "long" and r["expires_at"] >= g["expires_at"] + 1500, (st, r, g)
        time.sleep(1.5)
        assert _acquire(cv, sid, "long")[0] == 409, "lost its renewed lease"
        assert _held(cv, sid)["long"]["expires_at"] == r["expires_at"]
        # Renewing without a lease gives the default (30 s) from now.
        st, r = cv.api("POST", _p(sid, "/renew"), {"name": "long", "token": g["token"]})
        assert st == 200 and r["expires_at"] / 1000 > time.time() + 25, (st, r)
        assert _release(cv, sid, "long", g["token"])[0] == 200


def test_waiter_gets_the_lock_when_it_comes_free(cv):
    with _sandbox(cv) as sid:
        st, g = _acquire(cv, sid, "q", lease=1)
        assert st == 200
        # The lease runs out: the waiter gets the lock then, not before.
        t0 = time.time()
        st, w = _acquire(cv, sid, "q", wait=10, lease=30)
        took = time.time() - t0
        assert st == 200 and w["token"] != g["token"], (st, w)
        assert 0.5 < took < 3, took
        st, j = _release(cv, sid, "q", g["token"])
        assert st == 409 and "another token" in j["error"]["message"], (st, j)
        # A release hands the lock to the waiter at once.
        got = {}
        t = _start(lambda: got.update(r=_acquire(cv, sid, "q", wait=10)))
        assert wait_until(lambda: _waiting(cv, sid, "q") == 1, 5)
        t0 = time.time()
        assert _release(cv, sid, "q", w["token"])[0] == 200
        t.join(10)
        assert got["r"][0] == 200 and time.time() - t0 < 1, got
        # A wait that runs out is a 409 lock_held, and the queue forgets it.
        t0 = time.time()
        st, j = _acquire(cv, sid, "q", wait=0.5)
        assert st == 409 and j["error"]["code"] == "lock_held", (st, j)
        assert 0.4 < time.time() - t0 < 3
        assert _waiting(cv, sid, "q") == 0


def test_waiters_are_served_first_come_first_served(cv):
    order, lock = [], threading.Lock()

    def wait_turn(sid, i):
        st, g = _acquire(cv, sid, "fifo", wait=30)
        assert st == 200, (st, g)
        with lock:
            order.append(i)
        _release(cv, sid, "fifo", g["token"])

    with _sandbox(cv) as sid:
        st, g = _acquire(cv, sid, "fifo")
        threads = []
        for i in range(6):
            threads.append(_start(wait_turn, sid, i))
            assert wait_until(lambda: _waiting(cv, sid, "fifo") == i + 1, 5), "waiter %d not queued" % i
        assert _release(cv, sid, "fifo", g["token"])[0] == 200
        for t in threads:
            t.join(30)
        assert order == list(range(6)), order
        assert "fifo" not in _held(cv, sid)


def test_a_waiter_that_hangs_up_leaves_the_queue(cv):
    with _sandbox(cv) as sid:
        st, g = _acquire(cv, sid, "h")
        gone = _waiter(cv, sid, "h", 60)
        assert wait_until(lambda: _waiting(cv, sid, "h") == 1, 5)
        gone.close()
        assert wait_until(lambda: _waiting(cv, sid, "h") == 0, 5), "a gone client still waits"
        # One that hangs up just before the release is passed over.
        gone = _waiter(cv, sid, "h", 60)
        assert wait_until(lambda: _waiting(cv, sid, "h") == 1, 5)
        got = {}
        t = _start(lambda: got.update(r=_acquire(cv, sid, "h", wait=20)))
        assert wait_until(lambda: _waiting(cv, sid, "h") == 2, 5)
        gone.close()
        assert _release(cv, sid, "h", g["token"])[0] == 200
        t.join(10)
        assert got["r"][0] == 200, got
        assert _held(cv, sid)["h"]["waiters"] == 0


def test_deleting_the_sandbox_fails_its_waiters(cv):
    sid = cv.create()
    st, g = _acquire(cv, sid, "d")
    got = {}
    t = _start(lambda: got.update(r=_acquire(cv, sid, "d", wait=60)))
    assert wait_until(lambda: _waiting(cv, sid, "d") == 1, 5)
    assert cv.api("DELETE", "/v1/sandboxes/" + sid)[0] == 200
    t.join(10)
    assert got["r"][0] == 409 and "deleted" in got["r"][1]["error"]["message"], got
    assert _release(cv, sid, "d", g["token"])[0] == 404
    assert cv.api("GET", _p(sid))[0] == 404


def test_bad_input_changes_nothing(cv):
    with _sandbox(cv) as sid:
        st, g = _acquire(cv, sid, "kept")
        bad = [{}, {"name": ""}, {"name": 5}, {"name": None}, {"name": "x" * 256}, {"name": "a\nb"},
               {"name": "a\x7f"}, {"name": "n", "lease": 0}, {"name": "n", "lease": -1}, {"name": "n", "lease": 3601},
               {"name": "n", "lease": "10"}, {"name": "n", "lease": True}, {"name": "n", "wait": -1},
               {"name": "n", "wait": 3601}, {"name": "n", "wait": "1"}, {"name": "n", "token": "x"},
               {"name": "n", "other": 1}]
        for body in bad:
            st, j = cv.api("POST", _p(sid), body)
            assert st == 400 and j["error"]["code"] == "invalid_argument", (body, st, j)
        for raw in (b"{", b"[]", b'{"name": "n", "name": "m"}'):
            assert cv.api("POST", _p(sid), raw=raw)[0] == 400, raw
        for suffix, body in (("/release", {"name": "kept"}), ("/release", {"token": g["token"]}),
                             ("/release", {"name": "kept", "token": ""}),
                             ("/release", {"name": "kept", "token": g["token"], "lease": 5}),
                             ("/renew", {"name": "kept", "token": g["token"], "lease": 0}),
                             ("/renew", {"name": "kept", "token": g["token"], "wait": 1}),
                             ("/renew", {"name": "kept", "token": 7})):
            st, j = cv.api("POST", _p(sid, suffix), body)
            assert st == 400, (suffix, body, st, j)
        assert cv.api("DELETE", _p(sid))[0] == 400  # method not allowed
        assert _held(cv, sid) == {"kept": {"name": "kept", "expires_at": g["expires_at"], "waiters": 0}}
        # The longest name and the longest lease and wait are accepted.
        st, j = _acquire(cv, sid, "é/" + "x" * 252, lease=3600, wait=3600)
        assert st == 200, (st, j)
        assert _release(cv, sid, "kept", g["token"])[0] == 200


def test_unknown_sandbox_is_a_404(cv):
    for sid in ("sb_aaaaaaaaaaaa", "nonsense"):
        for method, suffix, body in (("POST", "", {"name": "n"}), ("GET", "", None),
                                     ("POST", "/release", {"name": "n", "token": "0" * 32}),
                                     ("POST", "/renew", {"name": "n", "token": "0" * 32})):
            st, j = cv.api(method, _p(sid, suffix), body)
            assert st == 404 and j["error"]["code"] == "not_found", (sid, suffix, st, j)


def test_concurrent_clients_never_overlap(cv):
    """20 clients × 3 rounds take one lock, each time appending a start and
    an end line to a file in the sandbox with a pause between: with mutual
    exclusion the lines pair up; an in-test counter checks the same."""
    inside, most, errors, guard = [0], [0], [], threading.Lock()

    def client(sid, i):
        try:
            for rnd in range(3):
                st, g = _acquire(cv, sid, "shared/file", wait=300, lease=60)
                assert st == 200, (st, g)
                with guard:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                tag = "%d.%d" % (i, rnd)
                cv.sh(sid, "echo start %s >> /tmp/log; sleep 0.02; echo end %s >> /tmp/log" % (tag, tag))
                with guard:
                    inside[0] -= 1
                st, j = _release(cv, sid, "shared/file", g["token"])
                assert st == 200, (st, j)
        except Exception as e:  # reported below, with the thread's index
            errors.append((i, repr(e)))

    with _sandbox(cv) as sid:
        threads = [_start(client, sid, i) for i in range(20)]
        for t in threads:
            t.join(300)
        assert most[0] == 1, ("sections overlapped", most, errors)
        assert not errors, errors
        lines = cv.exec(sid, ["cat", "/tmp/log"])["stdout"].split("\n")[:-1]
        assert len(lines) == 120, len(lines)
        for k in range(0, 120, 2):
            start, end = lines[k].split(), lines[k + 1].split()
            assert start[0] == "start" and end == ["end", start[1]], ("overlap at line %d" % k, lines[k:k + 4])
        assert len({ln.split()[1] for ln in lines}) == 60
        assert _held(cv, sid) == {}


def test_cove_lock_runs_the_command_under_the_lock(cv):
    with _sandbox(cv) as sid:
        r = cv.cli("lock", sid, "ci/step", "--", "sh", "-c", "echo in; exit 3")
        assert r.returncode == 3 and r.stdout == b"in\n", r
        assert _held(cv, sid) == {}, "cove lock did not release"
        # A lease shorter than the command is renewed while it runs.
        p = subprocess.Popen([covetest.COVE, "lock", "--lease", "1", sid, "ci/step", "--", "sleep", "3"],
                             env=dict(os.environ, COVE_SOCKET=cv.socket), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        try:
            assert wait_until(lambda: "ci/step" in _held(cv, sid), 5)
            time.sleep(2)
            st, j = _acquire(cv, sid, "ci/step")
            assert st == 409 and j["error"]["code"] == "lock_held", (st, j)
            out, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert p.returncode == 0, (p.returncode, err)
        assert _held(cv, sid) == {}
        # Held by another: --wait 0 gives up at once, with the reason.
        st, g = _acquire(cv, sid, "ci/step")
        r = cv.cli("lock", "--wait", "0", sid, "ci/step", "--", "touch", "/tmp/ran")
        assert r.returncode == 1 and b"held" in r.stderr, r
        assert cv.exec(sid, ["test", "-e", "/tmp/ran"])["exit_code"] == 1, "the command ran without the lock"
        # Or waits for it.
        t = _start(lambda: (time.sleep(1), _release(cv, sid, "ci/step", g["token"])))
        r = cv.cli("lock", sid, "ci/step", "--wait", "20", "--", "touch", "/tmp/ran")
        t.join()
        assert r.returncode == 0, r
        assert cv.exec(sid, ["test", "-e", "/tmp/ran"])["exit_code"] == 0
        for args in ([sid, "n"], ["--lease", "0", sid, "n", "true"], ["--wait", "x", sid, "n", "true"]):
            assert cv.cli("lock", *args).returncode == 2, args
        r = cv.cli("lock", "sb_aaaaaaaaaaaa", "n", "--", "true")
        assert r.returncode == 1 and b"no sandbox" in r.stderr, r


def test_a_coved_restart_forgets_the_locks(_cv):
    cv = covetest.Coved().start()
    try:
        sid = cv.create()
        st, g = _acquire(cv, sid, "r")
        assert st == 200
        cv.kill()
        cv.start()
        assert _held(cv, sid) == {}
        st, j = _release(cv, sid, "r", g["token"])
        assert st == 409, (st, j)
        assert _acquire(cv, sid, "r")[0] == 200
    finally:
        cv.teardown()

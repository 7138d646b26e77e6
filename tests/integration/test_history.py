"""Checkpoints, history, rollback and branch: each checkpoint is a snapshot
in the sandbox's ordered history; a rollback or a branch to checkpoint k is a
new sandbox with exactly the files of step k, whose history goes on from k,
while the original stays as it was. Histories live in state.db: they survive
a coved SIGKILL and the deletion of their sandbox, and the snapshots they
need cannot be deleted from under them."""
import json
import os
import re
import signal
import sqlite3
import subprocess

import covetest

SN_RE = re.compile(r"^sn_[a-z2-7]{12}$")
SB_RE = re.compile(r"^sb_[a-z2-7]{12}$")
# What a step changed, whole: every path under /root with its type, mode,
# size and link target, then every regular file's content hash; and a file
# in the image's /etc that a step rewrites.
STATE = (r"cd /root && find . -xdev -printf '%p %y %m %s %l\n' | sort && "
         r"find . -xdev -type f -print0 | sort -z | xargs -0 -r sha256sum && cat /etc/cove-step")
STEPS = [
    "echo one > /root/f; echo 1 > /etc/cove-step; mkdir /root/d; echo kept > /root/d/k",
    "echo two > /root/f; echo 2 > /etc/cove-step; rm /root/d/k; ln -s f /root/link; head -c 100000 /dev/urandom > /root/r",
    "echo three >> /root/f; echo 3 > /etc/cove-step; chmod 700 /root/d; rm /root/link; head -c 5000 /dev/urandom > /root/r",
]


def _out(cv, sid, script):
    r = cv.sh(sid, script)
    assert r["exit_code"] == 0, r
    return r["stdout"]


def _checkpoint(cv, sid, **body):
    st, j = cv.api("POST", "/v1/sandboxes/%s/checkpoints" % sid, body)
    assert st == 201, (st, j)
    return j


def _history(cv, sid):
    st, j = cv.api("GET", "/v1/sandboxes/%s/checkpoints" % sid)
    assert st == 200, (st, j)
    return j


def _rollback(cv, sid, seq):
    st, j = cv.api("POST", "/v1/sandboxes/%s/rollback" % sid, {"seq": seq})
    assert st == 201 and SB_RE.match(j["id"]) and j["state"] == "running", (st, j)
    return j["id"]


def _branch(cv, sid, seq, count):
    st, j = cv.api("POST", "/v1/sandboxes/%s/branch" % sid, {"seq": seq, "count": count})
    assert st == 201 and len(j["sandboxes"]) == count, (st, j)
    return [s["id"] for s in j["sandboxes"]]


def _snapshots(cv):
    st, j = cv.api("GET", "/v1/snapshots")
    assert st == 200, (st, j)
    return {s["id"]: s for s in j["snapshots"]}


def _forget(cv, *ids):
    """Delete sandboxes and their histories (with the snapshots only they need)."""
    for i in ids:
        cv.api("DELETE", "/v1/sandboxes/" + i)
    for i in ids:
        cv.api("DELETE", "/v1/sandboxes/%s/checkpoints" % i)


def _three_steps(cv, sid):
    """Checkpoints 1, 2, 3 after STEPS, then a fourth change; the states."""
    states = []
    for i, step in enumerate(STEPS, 1):
        _out(cv, sid, step)
        states.append(_out(cv, sid, STATE))
        cp = _checkpoint(cv, sid, label="step %d" % i)
        assert cp["seq"] == i and cp["parent"] == (i - 1 if i > 1 else None), cp
        assert cp["label"] == "step %d" % i and cp["sandbox"] == sid and SN_RE.match(cp["snapshot"]), cp
    _out(cv, sid, "echo four > /root/f; echo 4 > /etc/cove-step; touch /root/after")
    states.append(_out(cv, sid, STATE))
    assert len(set(states)) == 4, "the steps must leave different states"
    return states


def test_rollback_gives_each_checkpoints_files_and_leaves_the_original(cv):
    sid = cv.create(name="conversation")
    made = [sid]
    try:
        states = _three_steps(cv, sid)
        h = _history(cv, sid)
        assert h["sandbox"] == sid and h["live"] is True and h["origin"] is None and h["derived"] == [], h
        assert [(c["seq"], c["parent"], c["label"]) for c in h["checkpoints"]] == [
            (1, None, "step 1"), (2, 1, "step 2"), (3, 2, "step 3")], h
        snaps = [c["snapshot"] for c in h["checkpoints"]]
        listed = _snapshots(cv)
        assert all(listed[s]["sandbox"] == sid and listed[s]["durable"] for s in snaps), listed
        assert [listed[s]["name"] for s in snaps] == ["checkpoint 1", "checkpoint 2", "checkpoint 3"]

        one = _rollback(cv, sid, 1)
        made.append(one)
        two = _rollback(cv, sid, 2)
        made.append(two)
        assert _out(cv, one, STATE) == states[0]
        assert _out(cv, two, STATE) == states[1]
        assert _out(cv, one, "cat /root/f /root/d/k") == "one\nkept\n"
        assert _out(cv, two, "cat /root/f; readlink /root/link") == "two\nf\n"
        # The original: its files and its history as they were.
        assert _out(cv, sid, STATE) == states[3]
        assert _history(cv, sid)["checkpoints"] == h["checkpoints"]

        # The rolled-back sandbox's history is the original's up to k, and
        # goes on from k.
        h1 = _history(cv, one)
        assert h1["origin"] == {"sandbox": sid, "seq": 1, "kind": "rollback"}, h1
        assert h1["checkpoints"] == h["checkpoints"][:1], h1
        _out(cv, one, "echo one-b > /root/f")
        cp = _checkpoint(cv, one, label="one, then b")
        assert (cp["seq"], cp["parent"], cp["sandbox"]) == (2, 1, one), cp
        assert cp["snapshot"] not in snaps
        h2 = _history(cv, two)
        assert h2["checkpoints"] == h["checkpoints"][:2], h2
        cp = _checkpoint(cv, two)
        assert (cp["seq"], cp["parent"], cp["label"]) == (3, 2, ""), cp
        assert [c["seq"] for c in _history(cv, two)["checkpoints"]] == [1, 2, 3]
        assert _history(cv, sid)["derived"] == [{"sandbox": one, "seq": 1, "kind": "rollback"},
                                                {"sandbox": two, "seq": 2, "kind": "rollback"}]

        # A rollback of the rolled-back line, to its own checkpoint.
        again = _rollback(cv, one, 2)
        made.append(again)
        assert _out(cv, again, "cat /root/f") == "one-b\n"
        assert [c["label"] for c in _history(cv, again)["checkpoints"]] == ["step 1", "one, then b"]

        # Branches: independent copies of step 2, each a line of its own.
        b1, b2 = _branch(cv, sid, 2, 2)
        made += [b1, b2]
        for b in (b1, b2):
            assert _out(cv, b, STATE) == states[1], b
            hb = _history(cv, b)
            assert hb["origin"] == {"sandbox": sid, "seq": 2, "kind": "branch"}, hb
            assert hb["checkpoints"] == h["checkpoints"][:2], hb
        _out(cv, b1, "echo b1 > /root/f")
        assert _out(cv, b2, "cat /root/f") == "two\n" and _out(cv, two, "cat /root/f") == "two\n"
        assert _checkpoint(cv, b1)["seq"] == 3 and _checkpoint(cv, b2)["seq"] == 3
        assert _checkpoint(cv, sid, label="step 4")["seq"] == 4
    finally:
        _forget(cv, *made)


def test_history_snapshots_are_kept_while_needed(cv):
    sid = cv.create()
    made = [sid]
    try:
        _out(cv, sid, "echo a > /root/f")
        c1 = _checkpoint(cv, sid)["snapshot"]
        _out(cv, sid, "echo b > /root/f")
        c2 = _checkpoint(cv, sid)["snapshot"]
        st, j = cv.api("DELETE", "/v1/snapshots/" + c1)
        assert st == 409 and j["error"]["code"] == "wrong_state", (st, j)
        msg = j["error"]["message"]
        assert "checkpoint 1 of %s's history" % sid in msg and "/v1/sandboxes/%s/checkpoints" % sid in msg, msg
        assert c1 in _snapshots(cv)
        r = cv.cli("snapshot", "rm", c2)
        assert r.returncode == 1 and b"stays while a history needs it" in r.stderr, r
        # A rollback's history names checkpoint 1's snapshot too: forgetting
        # the original's history deletes only checkpoint 2's.
        one = _rollback(cv, sid, 1)
        made.append(one)
        st, j = cv.api("DELETE", "/v1/sandboxes/%s/checkpoints" % sid)
        assert st == 200 and j == {"sandbox": sid, "deleted": True, "checkpoints": 2,
                                   "snapshots_deleted": [c2]}, (st, j)
        listed = _snapshots(cv)
        assert c1 in listed and c2 not in listed
        st, j = cv.api("DELETE", "/v1/snapshots/" + c1)
        assert st == 409 and "checkpoint 1 of %s's history" % one in j["error"]["message"], (st, j)
        # The live sandbox's history starts again from 1.
        h = _history(cv, sid)
        assert h["checkpoints"] == [] and h["derived"] == [] and h["live"] is True, h
        fresh = _checkpoint(cv, sid)
        assert (fresh["seq"], fresh["parent"]) == (1, None), fresh
        r = cv.cli("history", "rm", one)
        assert r.returncode == 0 and r.stdout.decode() == "%s: 1 checkpoints forgotten, 1 snapshots deleted\n" % one, r
        assert c1 not in _snapshots(cv)
        st, j = cv.api("DELETE", "/v1/sandboxes/%s/checkpoints" % one)
        assert st == 404 and j["error"]["code"] == "not_found", (st, j)
        # Without a history, a live sandbox still has an empty one to read.
        assert _history(cv, one)["checkpoints"] == []
    finally:
        _forget(cv, *made)


def test_bad_input_changes_nothing(cv):
    sid = cv.create()
    bare = cv.create()
    try:
        _out(cv, sid, "echo a > /root/f")
        _checkpoint(cv, sid, label="a")
        before = (_history(cv, sid), sorted(_snapshots(cv)),
                  sorted(s["id"] for s in cv.api("GET", "/v1/sandboxes")[1]["sandboxes"]))
        cp = "/v1/sandboxes/%s/checkpoints" % sid
        for body in ({"lable": "x"}, {"label": 3}, {"label": "x" * 256}, {"label": None, "seq": 1}, [1]):
            st, j = cv.api("POST", cp, body)
            assert st == 400 and j["error"]["code"] == "invalid_argument", (body, st, j)
        st, j = cv.api("POST", cp, raw=b"{bad")
        assert st == 400, (st, j)
        for route in ("rollback", "branch"):
            path = "/v1/sandboxes/%s/%s" % (sid, route)
            for body in ({}, {"seq": 0}, {"seq": -1}, {"seq": "1"}, {"seq": 1.5}, {"seq": True}, {"sequence": 1},
                         {"seq": 1 << 40}):
                st, j = cv.api("POST", path, body)
                assert st == 400 and j["error"]["code"] == "invalid_argument", (route, body, st, j)
            st, j = cv.api("POST", path, raw=b"[1]")
            assert st == 400, (route, st, j)
            st, j = cv.api("POST", path, {"seq": 2})
            assert st == 404 and j["error"]["message"] == "%s has no checkpoint 2: its last is 1" % sid, (st, j)
            st, j = cv.api("POST", "/v1/sandboxes/%s/%s" % (bare, route), {"seq": 1})
            assert st == 404 and "its history is empty" in j["error"]["message"], (st, j)
        st, j = cv.api("POST", "/v1/sandboxes/%s/rollback" % sid, {"seq": 1, "count": 2})
        assert st == 400 and j["error"]["message"] == "unknown field 'count'", (st, j)
        for count in (0, 101, "2", 1.5):
            st, j = cv.api("POST", "/v1/sandboxes/%s/branch" % sid, {"seq": 1, "count": count})
            assert st == 400 and "'count'" in j["error"]["message"], (count, st, j)
        unknown = "sb_aaaaaaaaaaaa"
        for method, path, body in (("POST", "/v1/sandboxes/%s/checkpoints" % unknown, {}),
                                   ("GET", "/v1/sandboxes/%s/checkpoints" % unknown, None),
                                   ("DELETE", "/v1/sandboxes/%s/checkpoints" % unknown, None),
                                   ("POST", "/v1/sandboxes/%s/rollback" % unknown, {"seq": 1}),
                                   ("POST", "/v1/sandboxes/%s/branch" % unknown, {"seq": 1}),
                                   ("GET", "/v1/sandboxes/not-an-id/checkpoints", None),
                                   ("POST", "/v1/sandboxes/../rollback", {"seq": 1}),
                                   ("DELETE", "/v1/sandboxes/%s/checkpoints" % bare, None)):
            st, j = cv.api(method, path, body)
            assert st == 404 and j["error"]["code"] == "not_found", (method, path, st, j)
        st, j = cv.api("PUT", cp, {})
        assert st == 400, (st, j)
        after = (_history(cv, sid), sorted(_snapshots(cv)),
                 sorted(s["id"] for s in cv.api("GET", "/v1/sandboxes")[1]["sandboxes"]))
        assert after == before
        h = _history(cv, bare)
        assert h == {"sandbox": bare, "live": True, "origin": None, "checkpoints": [], "derived": []}, h
    finally:
        _forget(cv, sid, bare)


def test_history_survives_a_coved_kill_and_the_sandbox(shared):
    cv = covetest.Coved().start()
    try:
        sid = cv.create()
        states = _three_steps(cv, sid)
        before = _history(cv, sid)
        cv.kill(signal.SIGKILL)
        cv.start()
        assert _history(cv, sid) == before
        # Numbering goes on after the restart, and after the deletion.
        _out(cv, sid, "echo five > /root/f")
        cp = _checkpoint(cv, sid, label="after restart")
        assert (cp["seq"], cp["parent"]) == (4, 3), cp
        st, j = cv.api("DELETE", "/v1/sandboxes/" + sid)
        assert st == 200, (st, j)
        assert covetest.wait_until(lambda: sid not in cv.sandbox_dirs(), 15)
        st, j = cv.api("GET", "/v1/sandboxes/" + sid)
        assert st == 404
        h = _history(cv, sid)
        assert h["live"] is False and h["checkpoints"] == before["checkpoints"] + [cp], h
        st, j = cv.api("POST", "/v1/sandboxes/%s/checkpoints" % sid, {})
        assert st == 404 and j["error"]["message"] == "no sandbox '%s'" % sid, (st, j)
        back = _rollback(cv, sid, 2)
        assert _out(cv, back, STATE) == states[1]
        assert _history(cv, back)["origin"] == {"sandbox": sid, "seq": 2, "kind": "rollback"}
        r = cv.cli("history", sid)
        out = r.stdout.decode()
        assert r.returncode == 0 and "after restart" in out and "is deleted" in out, r
        assert "derived: %s rollback at checkpoint 2" % back in out, out
        # Again after a kill: the deleted sandbox's history, and a rollback.
        cv.kill(signal.SIGKILL)
        cv.start()
        assert _history(cv, sid) == h | {"derived": [{"sandbox": back, "seq": 2, "kind": "rollback"}]}
        last = _rollback(cv, sid, 3)
        assert _out(cv, last, STATE) == states[2]
        [b] = _branch(cv, sid, 1, 1)
        assert _out(cv, b, STATE) == states[0]
        assert _checkpoint(cv, back)["seq"] == 3
        # A checkpoint whose snapshot was lost from the pool (by hand: coved
        # never deletes one a history names) stays listed, and says so.
        lost = h["checkpoints"][0]["snapshot"]
        cv.kill(signal.SIGKILL)
        files = os.path.join(cv.data, "pool", "snapshots", lost, "files")
        subprocess.run(["btrfs", "-q", "property", "set", files, "ro", "false"], check=True)
        subprocess.run(["btrfs", "-q", "subvolume", "delete", files], check=True)
        cv.start()
        assert lost not in _snapshots(cv)
        assert _history(cv, sid)["checkpoints"][0]["snapshot"] == lost
        st, j = cv.api("POST", "/v1/sandboxes/%s/rollback" % sid, {"seq": 1})
        assert st == 409 and j["error"]["message"] == (
            "checkpoint 1 of %s: its snapshot %s is gone from the pool" % (sid, lost)), (st, j)
        assert _out(cv, _rollback(cv, sid, 4), "cat /root/f") == "five\n"
    finally:
        cv.teardown()


def test_a_state_db_from_before_histories_is_migrated(shared):
    cv = covetest.Coved().start()
    try:
        sid = cv.create()
        _out(cv, sid, "echo old > /root/f")
        st, sn = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": "old"})
        assert st == 201, (st, sn)
        cv.kill(signal.SIGKILL)
        # The database as the coved before histories left it.
        path = os.path.join(cv.data, "state.db")
        db = sqlite3.connect(path)
        version = db.execute("PRAGMA user_version").fetchone()[0]  # this coved's: 2 or more
        assert version >= 2, version
        db.executescript("DROP TABLE checkpoints; DROP TABLE histories; ALTER TABLE snapshots DROP COLUMN durable;"
                         " DROP TABLE IF EXISTS templates; PRAGMA user_version = 0;")
        db.close()
        cv.start()
        db = sqlite3.connect(path)
        assert db.execute("PRAGMA user_version").fetchone()[0] == version
        db.close()
        assert sid in {s["id"] for s in cv.api("GET", "/v1/sandboxes")[1]["sandboxes"]}
        assert sn["id"] in _snapshots(cv)
        assert _checkpoint(cv, sid)["seq"] == 1
        assert _out(cv, _rollback(cv, sid, 1), "cat /root/f") == "old\n"
        # A database from a newer coved is not touched.
        cv.kill(signal.SIGKILL)
        db = sqlite3.connect(path)
        db.execute("PRAGMA user_version = %d" % (version + 5))
        db.commit()
        db.close()
        try:
            cv.start(timeout=20)
            raise AssertionError("coved started on a newer schema")
        except RuntimeError:
            pass
        cv.proc = None
        assert "schema version %d, newer than this coved's %d" % (version + 5, version) in cv.read_log()
        db = sqlite3.connect(path)
        db.execute("PRAGMA user_version = %d" % version)
        db.commit()
        db.close()
    finally:
        cv.teardown()


def test_cli_verbs(cv):
    sid = cv.create()
    made = [sid]
    try:
        _out(cv, sid, "echo first > /root/f")
        r = cv.cli("checkpoint", "--label", "first step", sid)
        assert r.returncode == 0 and r.stdout == b"1\n", r
        _out(cv, sid, "echo second > /root/f")
        r = cv.cli("checkpoint", sid)
        assert r.returncode == 0 and r.stdout == b"2\n", r
        r = cv.cli("history", sid)
        lines = r.stdout.decode().splitlines()
        assert r.returncode == 0 and lines[0].split() == ["SEQ", "PARENT", "SNAPSHOT", "TAKEN", "OF", "CREATED",
                                                          "LABEL"], r
        assert all(line == line.rstrip() for line in lines), lines
        assert lines[1].split()[:2] == ["1", "-"] and lines[1].endswith("first step"), lines
        assert lines[2].split()[:2] == ["2", "1"] and len(lines) == 3, lines
        r = cv.cli("--json", "history", sid)
        assert r.returncode == 0, r
        assert json.loads(r.stdout) == _history(cv, sid)
        r = cv.cli("rollback", sid, "1")
        new = r.stdout.decode().strip()
        assert r.returncode == 0 and SB_RE.match(new), r
        made.append(new)
        assert _out(cv, new, "cat /root/f") == "first\n"
        r = cv.cli("branch", "-n", "2", sid, "2")
        ids = r.stdout.decode().split()
        assert r.returncode == 0 and len(ids) == 2 and all(SB_RE.match(i) for i in ids), r
        made += ids
        assert all(_out(cv, i, "cat /root/f") == "second\n" for i in ids)
        r = cv.cli("history", new)
        assert r.returncode == 0 and "origin: rollback of %s at checkpoint 1" % sid in r.stdout.decode(), r
        for args in (("rollback", sid), ("rollback", sid, "x"), ("rollback", sid, "0"), ("branch", "-n", "0", sid, "1"),
                     ("branch", "-n", "101", sid, "1"), ("checkpoint",), ("checkpoint", "--nope", sid),
                     ("history",), ("history", "rm")):
            r = cv.cli(*args)
            assert r.returncode == 2, (args, r)
        r = cv.cli("rollback", sid, "9")
        assert r.returncode == 1 and b"has no checkpoint 9" in r.stderr, r
        r = cv.cli("history", "sb_aaaaaaaaaaaa")
        assert r.returncode == 1 and b"no sandbox or history" in r.stderr, r
    finally:
        _forget(cv, *made)

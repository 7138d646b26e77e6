"""Snapshot durability (issue 4): wait_durable true (the default) answers a
durable snapshot; false answers as soon as it is taken, durable false, and a
worker thread makes it durable in the background; a start completes or
drops what a crash left not durable; capabilities say what is supported.
The crash test proper is test_crash.py."""
import json
import os
import signal
import sqlite3
import subprocess

import covetest
from covetest import wait_until


def _snap(cv, sid, **body):
    st, j = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, body)
    assert st == 201, (st, j)
    return j


def _get(cv, snid):
    return cv.api("GET", "/v1/snapshots/" + snid)


def _manifest(cv, snid):
    path = os.path.join(cv.data, "pool", "snapshots", snid, "manifest.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _out(cv, sid, script):
    r = cv.sh(sid, script)
    assert r["exit_code"] == 0, r
    return r["stdout"]


def test_capabilities_say_btrfs_and_memory_snapshots(cv):
    # criu 4.2 is installed by scripts/deps.sh: coved's self-test at start
    # (a tiny sandbox dumped and restored) passes, and says so.
    st, j = cv.api("GET", "/v1/capabilities")
    assert st == 200 and j["storage"] == "btrfs" and j["capabilities"]["nativeSnapshot"] is True, (st, j)


def test_wait_durable(cv):
    sid = cv.create()
    made = [sid]
    try:
        _out(cv, sid, "echo one > /root/f")
        # The default, and true: durable when answered, manifest in place.
        for body in ({}, {"wait_durable": True}):
            sn = _snap(cv, sid, **body)
            made.append(sn["id"])
            assert sn["durable"] is True and _manifest(cv, sn["id"])["id"] == sn["id"], sn
        # false: answered before the syncs, then durable in the background.
        sn = _snap(cv, sid, name="quick", wait_durable=False)
        made.append(sn["id"])
        assert sn["durable"] is False and sn["name"] == "quick", sn
        assert wait_until(lambda: _get(cv, sn["id"])[1]["durable"], 10), _get(cv, sn["id"])
        st, j = _get(cv, sn["id"])
        assert st == 200 and j == dict(sn, durable=True), (sn, j)
        m = _manifest(cv, sn["id"])
        assert m == {k: v for k, v in j.items() if k != "durable"}, m
        # A restore right after the answer works, durable or not yet.
        _out(cv, sid, "echo two > /root/f")
        quick = _snap(cv, sid, wait_durable=False)
        made.append(quick["id"])
        st, new = cv.api("POST", "/v1/snapshots/%s/restore" % quick["id"], {})
        assert st == 201, (st, new)
        made.append(new["id"])
        assert _out(cv, new["id"], "cat /root/f") == "two\n"
        # So does a delete: the directory goes once the worker is done.
        gone = _snap(cv, sid, wait_durable=False)
        st, j = cv.api("DELETE", "/v1/snapshots/" + gone["id"])
        assert st == 200, (st, j)
        assert _get(cv, gone["id"])[0] == 404
        gdir = os.path.join(cv.data, "pool", "snapshots", gone["id"])
        assert wait_until(lambda: not os.path.exists(gdir), 10), os.listdir(gdir)
        # Many at once, each made durable.
        many = [_snap(cv, sid, wait_durable=False)["id"] for _ in range(8)]
        made += many
        assert wait_until(lambda: all(_get(cv, i)[1]["durable"] for i in many), 15)
        for body in ({"wait_durable": "no"}, {"wait_durable": 0}, {"wait_durable": None}):
            st, j = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, body)
            assert st == 400 and j["error"]["code"] == "invalid_argument", (body, st, j)
    finally:
        for i in made:
            cv.api("DELETE", ("/v1/snapshots/" if i.startswith("sn_") else "/v1/sandboxes/") + i)


def _db(cv, sql, args=()):
    db = sqlite3.connect(os.path.join(cv.data, "state.db"))
    try:
        rows = db.execute(sql, args).fetchall()
        db.commit()
        return rows
    finally:
        db.close()


def test_a_start_completes_or_drops_what_was_not_durable(_cv):
    cv = covetest.Coved().start()
    try:
        sid = cv.create()
        _out(cv, sid, "echo kept > /root/f")
        done = _snap(cv, sid, name="completed")
        lost = _snap(cv, sid, name="files gone")
        cv.kill(signal.SIGKILL)
        # As a crash between the row and the syncs leaves them: rows not
        # durable, no manifest (one half written); one without its files.
        _db(cv, "UPDATE snapshots SET durable = 0")
        for s in (done, lost):
            os.unlink(os.path.join(cv.data, "pool", "snapshots", s["id"], "manifest.json"))
        with open(os.path.join(cv.data, "pool", "snapshots", done["id"], "manifest.json.tmp"), "w") as f:
            f.write('{"id": ')
        lfiles = os.path.join(cv.data, "pool", "snapshots", lost["id"], "files")
        subprocess.run(["btrfs", "-q", "property", "set", lfiles, "ro", "false"], check=True)
        subprocess.run(["btrfs", "-q", "subvolume", "delete", lfiles], check=True)
        log_at = os.path.getsize(cv.log)
        cv.start()
        st, j = cv.api("GET", "/v1/snapshots")
        assert st == 200 and j["snapshots"] == [done], (done, j)
        assert _db(cv, "SELECT id, durable FROM snapshots") == [(done["id"], 1)]
        assert _manifest(cv, done["id"]) == {k: v for k, v in done.items() if k != "durable"}
        assert sorted(os.listdir(os.path.join(cv.data, "pool", "snapshots"))) == [done["id"]]
        assert not os.path.exists(os.path.join(cv.data, "pool", "snapshots", done["id"], "manifest.json.tmp"))
        with open(cv.log) as f:
            f.seek(log_at)
            assert "snapshot %s: made durable at start" % done["id"] in f.read()
        st, new = cv.api("POST", "/v1/snapshots/%s/restore" % done["id"], {})
        assert st == 201 and _out(cv, new["id"], "cat /root/f") == "kept\n", (st, new)
        # A state.db from before the durable column: its rows were durable.
        cv.kill(signal.SIGKILL)
        # (schema version 1: the migration to 2 adds the column; 3 the lifecycle's)
        _db(cv, "ALTER TABLE snapshots DROP COLUMN durable")
        _db(cv, "ALTER TABLE sandboxes DROP COLUMN state_changed_at")
        _db(cv, "ALTER TABLE sandboxes DROP COLUMN state_reason")
        _db(cv, "PRAGMA user_version = 1")
        cv.start()
        st, j = cv.api("GET", "/v1/snapshots/" + done["id"])
        assert st == 200 and j == done, (st, j)
        later = _snap(cv, sid, wait_durable=False)
        assert wait_until(lambda: _get(cv, later["id"])[1]["durable"], 10)
    finally:
        cv.teardown()


def test_sigterm_waits_for_background_durability(_cv):
    # A stop with snapshots still being made durable finishes them first.
    cv = covetest.Coved().start()
    try:
        sid = cv.create()
        made = [_snap(cv, sid, wait_durable=False)["id"] for _ in range(5)]
        cv.kill(signal.SIGTERM)
        assert _db(cv, "SELECT count(*) FROM snapshots WHERE durable = 1") == [(5,)]
        assert all(_manifest(cv, i) for i in made)
        cv.start()
        assert all(_get(cv, i)[1]["durable"] for i in made)
    finally:
        cv.teardown()

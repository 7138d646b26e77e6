"""Snapshots, portable snapshots, forks, checkpoints, rollback, branch and
locks through the Python SDK."""
import threading
import time

import pytest

from cove import Conflict, NotFound, Sandbox, Snapshot


def _gone(*sbs):
    for s in sbs:
        s.destroy()


def test_snapshot_restore(sb):
    sb.files.write("state", "before")
    snap = sb.snapshot(name="one")
    assert isinstance(snap, Snapshot) and snap.durable and snap.info["name"] == "one"
    sb.files.write("state", "after")
    assert snap.id in [s.id for s in Snapshot.list()]
    assert Snapshot.get(snap.id).info["sandbox"] == sb.id
    with snap.restore() as back:
        assert back.id != sb.id and back.files.read_text("state") == "before"
        assert back.info["disk"] == sb.info["disk"]
    with snap.restore(disk="32M") as small:
        assert small.info["disk"] == 32 << 20 and small.stats()["disk_limit_bytes"] == 32 << 20
    assert sb.files.read_text("state") == "after"
    quick = sb.snapshot(wait_durable=False)
    deadline = time.time() + 20
    while not quick.durable and time.time() < deadline:
        quick.refresh()
        time.sleep(0.05)
    assert quick.durable
    for s in (snap, quick):
        s.delete()
        with pytest.raises(NotFound):
            Snapshot.get(s.id)


def test_portable_snapshot_round_trip(sb):
    sb.files.write("p/a.txt", "text")
    sb.files.write("p/b.bin", b"\xff\x00")
    doc = sb.portable_snapshot("p")
    assert doc["version"] == 1 and {f["path"] for f in doc["files"]} >= {"a.txt", "b.bin"}
    with Sandbox.from_portable(doc, cwd="/tmp") as other:
        assert other.files.read("/tmp/a.txt") == b"text" and other.files.read("/tmp/b.bin") == b"\xff\x00"
    n = len(Sandbox.list())
    with pytest.raises(Exception):
        Sandbox.from_portable({"version": 1, "files": [{"path": "../x", "type": "file", "mode": "0644"}]})
    assert len(Sandbox.list()) == n  # the failed import's sandbox was deleted


def test_fork_checkpoint_rollback_branch(sb):
    sb.files.write("f", "1")
    copies = sb.fork(2)
    try:
        assert len(copies) == 2 and len({c.id for c in copies} | {sb.id}) == 3
        copies[0].files.write("f", "changed")
        assert copies[1].files.read_text("f") == "1" and sb.files.read_text("f") == "1"
    finally:
        _gone(*copies)
    c1 = sb.checkpoint("first")
    assert (c1.seq, c1.parent, c1.label) == (1, None, "first")
    sb.files.write("f", "2")
    c2 = sb.checkpoint()
    assert c2.seq == 2 and c2.parent == 1
    assert [c["seq"] for c in sb.history()["checkpoints"]] == [1, 2]
    old = sb.rollback(1)
    branches = sb.branch(2, 2)
    try:
        assert old.files.read_text("f") == "1" and sb.files.read_text("f") == "2"
        assert [b.files.read_text("f") for b in branches] == ["2", "2"]
    finally:
        _gone(old, *branches)


def test_lock_excludes_second_caller_until_release(sb):
    events = []
    held = threading.Event()
    release = threading.Event()

    def first():
        with sb.lock("build/cache"):
            events.append("first in")
            held.set()
            release.wait(20)
            events.append("first out")

    def second():
        held.wait(20)
        with Sandbox.connect(sb.id).lock("build/cache"):  # another caller, another connection
            events.append("second in")

    a, b = threading.Thread(target=first), threading.Thread(target=second)
    a.start()
    b.start()
    held.wait(20)
    time.sleep(0.5)
    assert events == ["first in"]  # the second waits
    release.set()
    a.join(20)
    b.join(20)
    assert events == ["first in", "first out", "second in"]
    assert sb._transport.call("GET", "/v1/sandboxes/%s/locks" % sb.id)["locks"] == []


def test_lock_is_renewed_and_released_on_error(sb):
    with sb.lock("k", lease=0.6):
        time.sleep(1.5)  # over two leases: held only because it is renewed
        with pytest.raises(Conflict):
            with sb.lock("k", timeout=0.3):
                pass
    with pytest.raises(RuntimeError):
        with sb.lock("k"):
            raise RuntimeError("inside")
    with sb.lock("k", timeout=1):  # free again
        pass


def _counter(s):
    return int(s.run("cat /dev/shm/n 2>/dev/null || echo 0").stdout.strip() or 0)


def _wait(fn, timeout=30):
    deadline = time.time() + timeout
    while not fn() and time.time() < deadline:
        time.sleep(0.05)
    return fn()


def test_memory_snapshot_fork_and_checkpoint(sb):
    """memory=True: processes come back running (needs nativeSnapshot)."""
    assert sb.capabilities.native_snapshot is True
    sb.spawn("i=0; while :; do i=$((i+1)); echo $i > /dev/shm/n; sleep 0.05; done", tag="n")
    assert _wait(lambda: _counter(sb) >= 3)
    at = _counter(sb)
    snap = sb.snapshot(memory=True, wait_durable=True)
    assert snap.memory and snap.durable and snap.info["memory_bytes"] > 0
    assert not sb.snapshot().memory
    with snap.restore() as back:
        first = _counter(back)
        assert first >= at and _wait(lambda: _counter(back) > first)
        assert "n" in [p.get("tag") for p in back.processes()]
    copies = sb.fork(2, memory=True)
    try:
        assert all(_wait(lambda c=c: _counter(c) >= at) for c in copies)
    finally:
        _gone(*copies)
    cp = sb.checkpoint("m", memory=True)
    with sb.rollback(cp.seq) as back:
        assert _wait(lambda: _counter(back) >= at)
    snap.delete()

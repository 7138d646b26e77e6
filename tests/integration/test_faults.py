"""Fault injection in storage and state (issue 16, item 5): a tiny
loop-backed pool the test makes (ENOSPC on file writes, tar uploads,
snapshots and creates), a full disk under state.db, and EIO from coved's
own writes (coved --test-faults, a test-only switch): each fails with a
clear error (507 `no_space` for a full disk), nothing acknowledged is lost,
and coved goes on working once space is back or the faults stop."""
import hashlib
import os
import shutil
import subprocess
import tempfile

import covetest
import test_files as tf

MIB = 1 << 20


def _tiny_pool_coved(size_mib):
    """A coved whose pool is a btrfs file of size_mib made here (coved
    attaches an existing pool.img as it is), allocated whole on a tmpfs
    with 16 MiB to spare: less than the 64 MiB coved keeps free on a host,
    so the pool cannot grow and fills. Returns (coved, the data folder to
    unmount)."""
    d = tempfile.mkdtemp(prefix="cove-faults-", dir="/var/tmp")
    data = os.path.join(d, "data")
    os.makedirs(data, 0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dM,mode=0700" % (size_mib + 16), "cove-faults", data],
                   check=True)
    img = os.path.join(data, "pool.img")
    subprocess.run(["fallocate", "-l", "%dM" % size_mib, img], check=True)
    subprocess.run(["mkfs.btrfs", "-q", img], check=True, capture_output=True)
    return covetest.Coved(data=d, args=["--no-disk-quota"]).start(), d, data


def _no_space(st, j, what):
    assert st == 507, (what, st, j)
    assert j["error"]["code"] == "no_space" and "No space left on device" in j["error"]["message"], (what, j)


def _sha(data):
    return hashlib.sha256(data).hexdigest()


def _snapshots(cv):
    return sorted(s["id"] for s in cv.api("GET", "/v1/snapshots")[1]["snapshots"])


def _fill(cv, sid):
    """8 MiB files into sid until the pool is full: {path: sha256} of those
    acknowledged, and the refusal."""
    acked = {}
    for i in range(200):
        blob = os.urandom(8 * MIB)
        st, j = tf.put(cv, sid, "/tmp/fill-%d" % i, blob)
        if st != 201:
            return acked, (st, j)
        acked["/tmp/fill-%d" % i] = _sha(blob)
    raise AssertionError("1.6 GB went into a pool of 320 MiB")


def _assert_kept(cv, sid, acked):
    for path, digest in acked.items():
        st, body = tf.get(cv, sid, path)
        assert st == 200 and _sha(body) == digest, (path, st, len(body))


def test_enospc_from_a_tiny_pool(cv):
    own, top, data = _tiny_pool_coved(320)
    try:
        sid = own.create()
        assert tf.put(own, sid, "/root/keep", b"acknowledged\n")[0] == 201
        st, snap = own.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
        assert st == 201, (st, snap)
        sandboxes, snapshots = own.sandbox_dirs(), _snapshots(own)
        acked, refusal = _fill(own, sid)
        assert len(acked) >= 5, acked
        _no_space(*refusal, "PUT /files")
        # A refused PUT leaves nothing (its unnamed replacement goes with
        # it), so the pool has its room again: a process's write, which
        # stays as far as it got, takes the rest.
        own.exec(sid, "cat /dev/urandom > /root/hog; sync; true")
        # Full: each write path refuses clearly and makes nothing.
        blob = os.urandom(8 * MIB)
        _no_space(*tf.put_tar(own, sid, "/tmp/untarred", tf._tar([("big", "file", blob, 0o644)])), "PUT /files/tar")
        st, j = own.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
        _no_space(st, j, "POST /snapshots")
        st, j = own.api("POST", "/v1/sandboxes", {})
        _no_space(st, j, "POST /sandboxes")
        assert own.sandbox_dirs() == sandboxes and _snapshots(own) == snapshots
        covetest.wait_until(lambda: own.sandbox_dirs() == sandboxes, 30)
        _assert_kept(own, sid, acked)
        assert tf.get(own, sid, "/root/keep") == (200, b"acknowledged\n")
        # Space freed: the sandbox and coved work again.
        for path in list(acked)[: len(acked) // 2]:
            assert own.api("DELETE", tf._url(sid, path=path))[0] == 200
            del acked[path]
        tf.sh(own, sid, "sync")
        # 201 made (a try refused while the space was still being freed
        # leaves nothing), or 200 replaced when cove-init wrote in place.
        last = []
        ok = covetest.wait_until(
            lambda: last.append(tf.put(own, sid, "/tmp/after", b"after\n")) or last[-1][0] in (200, 201), 60, 1)
        assert ok, ("writes did not come back after space was freed", last[-1])
        st, j = own.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
        assert st == 201, (st, j)
        restored = own.api("POST", "/v1/snapshots/%s/restore" % snap["id"], {})
        assert restored[0] == 201, restored
        assert tf.get(own, restored[1]["id"], "/root/keep") == (200, b"acknowledged\n")
        # And after a crash, everything acknowledged is there.
        own.kill()
        own.start()
        _assert_kept(own, sid, acked)
        assert tf.get(own, sid, "/tmp/after") == (200, b"after\n")
    finally:
        own.teardown()
        subprocess.run(["umount", "-l", data])
        shutil.rmtree(top, ignore_errors=True)


def test_full_disk_under_state_db(cv):
    """The data root on a tmpfs of the test's own, the pool file allocated
    in full on it, and a ballast file filling the rest: state.db cannot
    grow. Creates and snapshots refuse with 507 and leave nothing; the
    sandbox that was acknowledged keeps working and listed; with the
    ballast gone, creates work, and a restart finds everything."""
    d = tempfile.mkdtemp(prefix="cove-faults-", dir="/var/tmp")
    data = os.path.join(d, "data")
    os.makedirs(data, 0o700)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400M,mode=0700", "cove-faults", data], check=True)
    own = None
    try:
        img = os.path.join(data, "pool.img")
        subprocess.run(["fallocate", "-l", "330M", img], check=True)
        subprocess.run(["mkfs.btrfs", "-q", img], check=True, capture_output=True)
        own = covetest.Coved(data=d).start()
        sid = own.create()
        ballast = os.path.join(data, "ballast")
        with open(ballast, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * MIB)
                    f.flush()
            except OSError as e:
                assert e.errno == 28, e
        sandboxes, snapshots = own.sandbox_dirs(), _snapshots(own)
        for _ in range(3):
            st, j = own.api("POST", "/v1/sandboxes", {})
            assert st == 507 and j["error"]["code"] == "no_space" and "disk is full" in j["error"]["message"], j
        st, j = own.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
        assert st == 507 and j["error"]["code"] == "no_space", (st, j)
        covetest.wait_until(lambda: own.sandbox_dirs() == sandboxes, 30)
        assert own.sandbox_dirs() == sandboxes and _snapshots(own) == snapshots
        assert [s["id"] for s in own.api("GET", "/v1/sandboxes")[1]["sandboxes"]] == [sid]
        # The pool is not full: the sandbox's own files and processes work.
        assert tf.put(own, sid, "/tmp/during", b"during\n")[0] == 201
        assert own.exec(sid, ["cat", "/tmp/during"])["stdout"] == "during\n"
        os.unlink(ballast)
        other = own.create()
        st, snap = own.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
        assert st == 201, (st, snap)
        own.kill()
        own.start()
        assert sorted(s["id"] for s in own.api("GET", "/v1/sandboxes")[1]["sandboxes"]) == sorted([sid, other])
        assert snap["id"] in _snapshots(own)
        assert tf.get(own, sid, "/tmp/during") == (200, b"during\n")
    finally:
        if own:
            own.teardown()
        subprocess.run(["umount", "-l", data])
        shutil.rmtree(d, ignore_errors=True)


def _arm_eio(cv, control, n):
    """Make coved's next n writes fail with EIO (its SIGUSR2 switch), and
    wait until its log says so."""
    with open(control, "w") as f:
        f.write("eio %d\n" % n)
    mark = "test faults: the next %d writes fail with EIO" % n
    seen = cv.read_log().count(mark)
    os.kill(cv.pid(), 10 + 2)  # SIGUSR2
    assert covetest.wait_until(lambda: cv.read_log().count(mark) > seen, 30), cv.read_log()


def _eio(st, j, what):
    assert st == 500 and "Input/output error" in j["error"]["message"], (what, st, j)


def test_eio_from_coved_writes(cv):
    """COVE_TEST_FAULTS: coved's own writes (a snapshot's manifest, a PUT's
    body, a tar upload's spool) fail with EIO on command. Each request
    fails whole with a clear 500, leaves nothing half made, loses nothing
    acknowledged, and coved goes on serving; a restart finds it all."""
    own = covetest.Coved()
    control = os.path.join(own.dir, "faults")
    os.environ["COVE_TEST_FAULTS"] = control
    try:
        own.start()
    finally:
        del os.environ["COVE_TEST_FAULTS"]
    try:
        sid = own.create()
        assert tf.put(own, sid, "/root/keep", b"acknowledged\n")[0] == 201
        tf.sh(own, sid, "mkdir -p /tmp/untar && echo old > /tmp/untar/f")
        snapshots = _snapshots(own)
        _arm_eio(own, control, 1)
        _eio(*own.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {}), "POST /snapshots")
        assert _snapshots(own) == snapshots
        _arm_eio(own, control, 1)
        _eio(*tf.put(own, sid, "/tmp/new", b"x" * MIB), "PUT /files")
        # Over an existing file, the write truncates in place (as a shell's
        # "cat > f" does): a failed one leaves it cut, and a retry makes it whole.
        assert tf.put(own, sid, "/tmp/over", b"old\n")[0] == 201
        _arm_eio(own, control, 1)
        _eio(*tf.put(own, sid, "/tmp/over", b"x" * MIB), "PUT /files over a file")
        assert tf.put(own, sid, "/tmp/over", b"z" * MIB)[0] == 200
        assert tf.get(own, sid, "/tmp/over") == (200, b"z" * MIB)
        _arm_eio(own, control, 1)
        _eio(*tf.put_tar(own, sid, "/tmp/untar", tf._tar([("f", "file", b"new\n", 0o644)])), "PUT /files/tar")
        assert tf.sh(own, sid, "cat /tmp/untar/f; ls /tmp/untar") == "old\nf\n"
        # Used up: everything works again, nothing acknowledged was lost.
        assert tf.get(own, sid, "/root/keep") == (200, b"acknowledged\n")
        assert tf.put(own, sid, "/tmp/new", b"y" * MIB)[0] in (200, 201)
        st, snap = own.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
        assert st == 201, (st, snap)
        # Several armed at once, across requests: coved stays up.
        _arm_eio(own, control, 3)
        for i in range(5):
            own.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
        assert own.api("GET", "/v1/health")[0] == 200 and own.proc.poll() is None
        own.kill()
        own.start()
        assert snap["id"] in _snapshots(own)
        assert tf.get(own, sid, "/root/keep") == (200, b"acknowledged\n")
        assert tf.get(own, sid, "/tmp/new") == (200, b"y" * MIB)
        restored = own.api("POST", "/v1/snapshots/%s/restore" % snap["id"], {})
        assert restored[0] == 201, restored
        assert tf.get(own, restored[1]["id"], "/root/keep") == (200, b"acknowledged\n")
    finally:
        own.teardown()

"""The overlay storage driver (coved --storage overlay): the same API where
btrfs cannot be had. The pool is a plain directory on the data root's file
system, a snapshot is a copy of the sandbox's diff layer (its overlays' upper
dirs, whiteouts included), restore and fork copy it back; capabilities say
"overlay"; and a data root keeps the driver it was made with."""
import atexit
import os
import signal
import stat

import covetest
import test_snapshots as snaps
from covetest import wait_until

_private = {}


def _ov():
    """This file's coved on the overlay driver, started on first use and
    torn down when the run ends."""
    cv = _private.get("cv")
    if cv is None:
        cv = _private["cv"] = covetest.Coved(args=["--storage", "overlay"])
        atexit.register(cv.teardown)
    if cv.proc is None or cv.proc.poll() is not None:
        cv.proc = None
        cv.start()
    return cv


def _out(cv, sid, script):
    r = cv.sh(sid, script)
    assert r["exit_code"] == 0, r
    return r["stdout"]


def _sb_dir(cv, sid):
    return os.path.join(cv.data, "pool", "sandboxes", sid)


def test_overlay_pool_and_capabilities(cv):
    ov = _ov()
    st, j = ov.api("GET", "/v1/capabilities")
    assert st == 200 and j["storage"] == "overlay" and j["pool_loop_backed"] is False, (st, j)
    # The memory snapshot's self-test passes on the overlay driver too.
    assert j["capabilities"]["nativeSnapshot"] is True, j
    with open(os.path.join(ov.data, "pool.driver")) as f:
        assert f.read() == "overlay\n"
    pool = os.path.join(ov.data, "pool")
    assert not os.path.exists(os.path.join(ov.data, "pool.img")), "a pool file on the overlay driver"
    assert os.stat(pool).st_dev == os.stat(ov.data).st_dev, "the pool is a mount, not a plain directory"
    assert stat.S_IMODE(os.stat(pool).st_mode) == 0o700
    # The shared coved is on btrfs, and says so.
    st, j = cv.api("GET", "/v1/capabilities")
    assert st == 200 and j["storage"] == "btrfs", j


def test_overlay_create_exec_files_and_installs(cv):
    ov = _ov()
    sid = ov.create()
    try:
        assert _out(ov, sid, "id -u; cat /etc/hostname") == "0\n%s\n" % sid
        data = os.urandom(100000)
        st, j = ov.api("PUT", "/v1/sandboxes/%s/files?path=/root/blob" % sid, raw=data)
        assert st == 201 and j["size"] == len(data), (st, j)
        c = ov.conn()
        c.request("GET", "/v1/sandboxes/%s/files?path=/root/blob" % sid)
        r = c.getresponse()
        assert r.status == 200 and r.read() == data
        c.close()
        # What a package install does: new programs and libraries in /usr,
        # configuration in /etc, all in the sandbox's own layers.
        _out(ov, sid, "set -e; mkdir -p /usr/lib/cove-pkg /etc/cove-pkg; cp /bin/true /usr/bin/cove-true; "
                      "printf '#!/bin/sh\\necho installed\\n' > /usr/local/bin/cove-tool; "
                      "chmod 755 /usr/local/bin/cove-tool; echo lib > /usr/lib/cove-pkg/lib.so; "
                      "echo conf > /etc/cove-pkg/conf")
        assert _out(ov, sid, "cove-tool && cove-true && cat /usr/lib/cove-pkg/lib.so /etc/cove-pkg/conf") == \
            "installed\nlib\nconf\n"
        assert not os.path.exists("/usr/bin/cove-true"), "a sandbox's write reached the host's /usr"
        upper = os.path.join(_sb_dir(ov, sid), "upper")
        assert os.path.isfile(os.path.join(upper, "usr", "bin", "cove-true"))
        assert os.path.isfile(os.path.join(upper, "root", "etc", "cove-pkg", "conf"))
    finally:
        ov.api("DELETE", "/v1/sandboxes/" + sid)


def test_overlay_whiteouts_survive_snapshot_and_restore(cv):
    ov = _ov()
    sid = ov.create()
    ids = [sid]
    try:
        assert _out(ov, sid, "test -f /etc/issue && test -d /etc/apt && echo yes") == "yes\n"
        # A file and a directory of the image deleted (whiteouts), a
        # directory of the image replaced by a new one (opaque), and the
        # host layer's files deleted and changed.
        _out(ov, sid, "set -e; rm /etc/issue; rm -rf /etc/apt; mkdir /etc/apt; echo only > /etc/apt/only; "
                      "rm -rf /etc/skel; cp /bin/true /usr/bin/cove-true; echo x > /opt/cove-x; " + snaps.SETUP)
        before = _out(ov, sid, snaps.LISTING)
        st, sn = ov.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
        assert st == 201 and sn["durable"] is True, (st, sn)
        ids.append(sn["id"])
        files = os.path.join(ov.data, "pool", "snapshots", sn["id"], "files")
        wo = os.lstat(os.path.join(files, "upper", "root", "etc", "issue"))
        assert stat.S_ISCHR(wo.st_mode) and wo.st_rdev == 0, "the snapshot lost the whiteout"
        opaque = os.path.join(files, "upper", "root", "etc", "apt")
        assert os.getxattr(opaque, "user.overlay.opaque", follow_symlinks=False) == b"y", os.listxattr(opaque)
        st, new = ov.api("POST", "/v1/snapshots/%s/restore" % sn["id"], {})
        assert st == 201, (st, new)
        ids.append(new["id"])
        nid = new["id"]
        assert _out(ov, nid, "ls /etc/issue /etc/skel 2>&1; ls /etc/apt; cat /opt/cove-x; "
                             "test -x /usr/bin/cove-true && echo x") == \
            "ls: cannot access '/etc/issue': No such file or directory\n" \
            "ls: cannot access '/etc/skel': No such file or directory\nonly\nx\nx\n"
        after = _out(ov, nid, snaps.LISTING)
        assert after == before, "\n".join(sorted(set(before.splitlines()) ^ set(after.splitlines())))[:3000]
        # The source is as it was, and the two are separate.
        _out(ov, nid, "echo restored > /etc/issue")
        assert _out(ov, sid, "ls /etc/issue 2>/dev/null; echo .") == ".\n"
    finally:
        snaps._rm(ov, *ids)


def test_image_directories_can_be_removed(cv):
    """On either driver: a directory of the image is removed and made anew
    (overlay marks it opaque, in user.overlay.* as it runs in the sandbox's
    user namespace), and a restore keeps that."""
    for c in (cv, _ov()):
        sid = c.create()
        ids = [sid]
        try:
            _out(c, sid, "set -e; rm -rf /etc/apt /usr/share/doc/bash; mkdir /etc/apt; echo new > /etc/apt/new")
            st, sn = c.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
            assert st == 201, (st, sn)
            ids.append(sn["id"])
            st, new = c.api("POST", "/v1/snapshots/%s/restore" % sn["id"], {})
            assert st == 201, (st, new)
            ids.append(new["id"])
            for who in (sid, new["id"]):
                assert _out(c, who, "ls /etc/apt; ls /usr/share/doc/bash 2>/dev/null; echo .") == "new\n.\n", who
        finally:
            snaps._rm(c, *ids)


def test_overlay_fork_three_copies_are_independent(cv):
    ov = _ov()
    sid = ov.create()
    ids = [sid]
    try:
        _out(ov, sid, "echo base > /root/f; rm /etc/motd")
        st, j = ov.api("POST", "/v1/sandboxes/%s/fork" % sid, {"count": 3})
        assert st == 201 and len(j["sandboxes"]) == 3, (st, j)
        copies = [c["id"] for c in j["sandboxes"]]
        ids += copies
        for c in copies:
            assert _out(ov, c, "cat /root/f; ls /etc/motd 2>/dev/null; echo .") == "base\n.\n"
        _out(ov, copies[0], "echo one > /root/f; echo one > /usr/local/one; echo back > /etc/motd")
        for who in [sid] + copies[1:]:
            assert _out(ov, who, "cat /root/f; ls /usr/local/one /etc/motd 2>/dev/null; echo .") == "base\n.\n", who
        assert _out(ov, copies[0], "cat /root/f /usr/local/one /etc/motd") == "one\none\nback\n"
    finally:
        snaps._rm(ov, *ids)


def test_overlay_delete_removes_the_directories(cv):
    ov = _ov()
    sid = ov.create()
    _out(ov, sid, "mkdir -p /root/a/b/c; echo x > /root/a/b/c/f; rm /etc/motd; mkfifo /root/p")
    st, sn = ov.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
    assert st == 201, (st, sn)
    st, new = ov.api("POST", "/v1/snapshots/%s/restore" % sn["id"], {})
    assert st == 201, (st, new)
    dirs = [_sb_dir(ov, sid), _sb_dir(ov, new["id"]), os.path.join(ov.data, "pool", "snapshots", sn["id"])]
    assert all(os.path.isdir(d) for d in dirs), dirs
    snaps._rm(ov, sid, new["id"], sn["id"])
    assert wait_until(lambda: not any(os.path.exists(d) for d in dirs), 15), [d for d in dirs if os.path.exists(d)]


def test_overlay_snapshot_core_flow(cv):
    """test_snapshots' flow, on the overlay driver."""
    ov = _ov()
    snaps.test_snapshot_of_a_running_writer_is_consistent(ov)
    snaps.test_restore_gives_byte_identical_files(ov)
    snaps.test_copies_are_independent(ov)
    snaps.test_fork_three_running_copies(ov)
    snaps.test_snapshot_outlives_its_sandbox(ov)
    snaps.test_delete_and_bad_input(ov)
    snaps.test_cli_verbs(ov)


def test_overlay_data_root_keeps_its_driver(cv):
    ov = _ov()
    sid = ov.create()
    try:
        _out(ov, sid, "echo kept > /root/f")
        ov.kill(signal.SIGKILL)
        # What a crash can leave on this driver: a snapshot copy without
        # manifest or row, a sandbox root without row.
        half = os.path.join(ov.data, "pool", "snapshots", "sn_aaaaaaaaaaaa")
        os.makedirs(os.path.join(half, "files", "upper", "root"))
        orphan = os.path.join(ov.data, "pool", "sandboxes", "sb_aaaaaaaaaaaa")
        os.makedirs(os.path.join(orphan, "upper", "root", "etc"))
        # Asked for btrfs, it refuses, clearly, and changes nothing.
        other = covetest.Coved(data=ov.dir, args=["--storage", "btrfs"])
        try:
            other.start(timeout=30)
            raise AssertionError("coved --storage btrfs started on an overlay data root")
        except RuntimeError as e:
            assert "overlay storage driver" in str(e) and "--storage overlay" in str(e), str(e)
        finally:
            other.kill()
        assert not os.path.exists(os.path.join(ov.data, "pool.img"))
        assert os.stat(os.path.join(ov.data, "pool")).st_dev == os.stat(ov.data).st_dev
        # Without the flag it takes the recorded driver: the sandbox is
        # still there, the leftovers are gone.
        ov.args = []
        ov.start()
        st, j = ov.api("GET", "/v1/capabilities")
        assert j["storage"] == "overlay", j
        assert _out(ov, sid, "cat /root/f") == "kept\n"
        assert not os.path.exists(half) and not os.path.exists(orphan)
    finally:
        ov.args = ["--storage", "overlay"]
        ov.api("DELETE", "/v1/sandboxes/" + sid)


def test_storage_flag_is_checked(cv):
    r = covetest.subprocess.run([covetest.COVED, "--storage", "zfs"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "unknown driver 'zfs'" in r.stderr, r

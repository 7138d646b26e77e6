"""Disk limits (btrfs simple quotas on each sandbox's subvolume) and the
pool held to what the host's disk has.

A sandbox created with disk "64M" fails a 200 MB write with EDQUOT or
ENOSPC and goes on working; the host and other sandboxes are untouched;
snapshots, restores, forks and a restart of coved keep the limit; bad input
is a 400 that changes nothing; the overlay driver says it cannot limit."""
import os
import re
import shutil
import signal
import subprocess
import tempfile

import covetest
from covetest import Coved, wait_until

FILL = "dd if=/dev/zero of=/root/big bs=1M count=200 2>&1; echo rc=$?"
FULL = ("Disk quota exceeded", "No space left on device")


def _fill(cv, sid):
    """Write 200 MB; the output (dd's error and exit code)."""
    r = cv.sh(sid, ["sh", "-c", FILL], timeout=120)
    assert r["exit_code"] == 0, r
    return r["stdout"]


def _refused(cv, sid):
    out = _fill(cv, sid)
    return "rc=0" not in out and any(m in out for m in FULL), out


def _after_rm_small_write_works(cv, sid):
    r = cv.sh(sid, ["sh", "-c", "rm -f /root/big /root/more && echo small > /root/small && cat /root/small"])
    return r["exit_code"] == 0 and r["stdout"] == "small\n", r


def _get(cv, sid):
    st, j = cv.api("GET", "/v1/sandboxes/" + sid)
    assert st == 200, (st, j)
    return j


def _pool_allocated(cv):
    st = os.stat(os.path.join(cv.data, "pool.img"))
    return st.st_blocks * 512


def test_capabilities_say_disk_limits(cv):
    st, j = cv.api("GET", "/v1/capabilities")
    assert st == 200 and j["disk"]["limits"] is True and j["disk"]["reason"] is None, j
    assert j["disk"]["default"] == 10 << 30, j
    assert j["disk"]["pool_bytes"] >= 1 << 30 and 0 < j["disk"]["pool_free_bytes"] < j["disk"]["pool_bytes"], j
    assert j["disk"]["pool_cannot_grow"] is False, j


def test_write_past_the_limit_fails_and_the_sandbox_goes_on(cv):
    other = cv.create()
    sid = cv.create(disk="64M")
    try:
        assert _get(cv, sid)["disk"] == 64 << 20
        before = _pool_allocated(cv)
        ok, out = _refused(cv, sid)
        assert ok, out
        ok, r = _after_rm_small_write_works(cv, sid)
        assert ok, r
        # The host's disk: the pool file took no more of it.
        assert _pool_allocated(cv) == before
        # Another sandbox (the default limit, 10G) writes its 200 MB.
        out = _fill(cv, other)
        assert "rc=0" in out, out
        assert cv.exec(other, ["rm", "/root/big"])["exit_code"] == 0
    finally:
        for s in (sid, other):
            cv.api("DELETE", "/v1/sandboxes/" + s)


def test_usage_counts_what_the_sandbox_wrote(cv):
    sid = cv.create(disk="64M")
    try:
        def disk():
            return cv.api("GET", "/v1/sandboxes/%s/stats" % sid)[1]["disk_bytes"]
        base = disk()
        cv.sh(sid, ["sh", "-c", "dd if=/dev/zero of=/root/f bs=1M count=20 2>/dev/null"])
        assert wait_until(lambda: disk() >= base + (19 << 20), 30), (base, disk())
        st, j = cv.api("GET", "/v1/sandboxes/%s/stats" % sid)
        assert j["disk_limit_bytes"] == 64 << 20, j
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_bad_disk_is_a_400_that_changes_nothing(cv):
    before = sorted(s["id"] for s in cv.api("GET", "/v1/sandboxes")[1]["sandboxes"])
    for bad in ("abc", -1, 0, "-5M", "1K", True, [1]):
        st, j = cv.api("POST", "/v1/sandboxes", {"disk": bad})
        assert st == 400 and "disk" in j["error"]["message"], (bad, st, j)
    after = sorted(s["id"] for s in cv.api("GET", "/v1/sandboxes")[1]["sandboxes"])
    assert before == after
    r = cv.cli("create", "--disk", "abc")
    assert r.returncode != 0 and b"disk" in r.stderr, r


def test_limit_survives_snapshot_restore_fork(cv):
    sid = cv.create(disk="64M")
    made = [sid]
    try:
        st, sn = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
        assert st == 201, (st, sn)
        st, r = cv.api("POST", "/v1/snapshots/%s/restore" % sn["id"], {})
        assert st == 201 and r["disk"] == 64 << 20, (st, r)
        made.append(r["id"])
        st, f = cv.api("POST", "/v1/sandboxes/%s/fork" % sid, {"count": 1})
        assert st == 201, (st, f)
        fork = f["sandboxes"][0]
        assert fork["disk"] == 64 << 20, fork
        made.append(fork["id"])
        for s in (r["id"], fork["id"]):
            ok, out = _refused(cv, s)
            assert ok, (s, out)
            ok, res = _after_rm_small_write_works(cv, s)
            assert ok, res
        # A restore may ask for another limit; a bad one is a 400.
        st, r2 = cv.api("POST", "/v1/snapshots/%s/restore" % sn["id"], {"disk": "32M"})
        assert st == 201 and r2["disk"] == 32 << 20, (st, r2)
        made.append(r2["id"])
        st, j = cv.api("POST", "/v1/snapshots/%s/restore" % sn["id"], {"disk": "abc"})
        assert st == 400, (st, j)
        r = cv.cli("restore", "--disk", "48M", sn["id"])
        assert r.returncode == 0, r
        made.append(r.stdout.decode().strip())
        assert _get(cv, made[-1])["disk"] == 48 << 20
        cv.api("DELETE", "/v1/snapshots/" + sn["id"])
    finally:
        for s in made:
            cv.api("DELETE", "/v1/sandboxes/" + s)


def test_limit_survives_a_restart_and_default_disk(_shared):
    cv = Coved(args=["--default-disk", "48M"]).start()
    try:
        sid = cv.create()
        assert _get(cv, sid)["disk"] == 48 << 20
        cv.kill()
        cv.start()
        assert _get(cv, sid)["disk"] == 48 << 20
        ok, out = _refused(cv, sid)
        assert ok, out
        st, j = cv.api("GET", "/v1/capabilities")
        assert j["disk"]["default"] == 48 << 20, j
    finally:
        cv.teardown()


def test_no_disk_quota_and_bad_flags(_shared):
    cv = Coved(args=["--no-disk-quota"]).start()
    try:
        st, j = cv.api("GET", "/v1/capabilities")
        assert j["disk"]["limits"] is False and "--no-disk-quota" in j["disk"]["reason"], j
        st, j = cv.api("POST", "/v1/sandboxes", {"disk": "64M"})
        assert st == 400 and "cannot be limited" in j["error"]["message"], (st, j)
        sid = cv.create()
        assert _get(cv, sid)["disk"] is None
    finally:
        cv.teardown()
    r = subprocess.run([covetest.COVED, "--default-disk", "abc"], capture_output=True)
    assert r.returncode == 2 and b"--default-disk" in r.stderr, r


def test_overlay_driver_says_it_cannot_limit(_shared):
    cv = Coved(args=["--storage", "overlay"]).start()
    try:
        st, j = cv.api("GET", "/v1/capabilities")
        assert j["storage"] == "overlay" and j["disk"]["limits"] is False, j
        assert "overlay" in j["disk"]["reason"], j
        st, j = cv.api("POST", "/v1/sandboxes", {"disk": "64M"})
        assert st == 400, (st, j)
        assert cv.api("GET", "/v1/sandboxes")[1]["sandboxes"] == []
        sid = cv.create()
        st, s = cv.api("GET", "/v1/sandboxes/%s/stats" % sid)
        assert st == 200 and s["disk_bytes"] is None and s["memory_bytes"] > 0, s
    finally:
        cv.teardown()


def test_pool_is_allocated_and_held_to_the_host(_shared):
    """On a small host disk (an ext4 of 1 GiB of the test's own), the pool
    is made no larger than the disk has room for, allocated whole; a
    sandbox without limit that fills it gets ENOSPC, coved says the pool
    cannot grow, and the host's disk keeps its reserve."""
    top = tempfile.mkdtemp(prefix="cove-it-disk-", dir="/var/tmp")
    img, mnt = os.path.join(top, "host.img"), os.path.join(top, "host")
    os.mkdir(mnt)
    cv = None
    try:
        subprocess.run(["truncate", "-s", "1G", img], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", img], check=True)
        subprocess.run(["mount", "-o", "loop", img, mnt], check=True)
        cv = Coved(data=mnt, args=["--default-disk", "0"]).start()
        st = os.stat(os.path.join(cv.data, "pool.img"))
        assert st.st_size < 1 << 30 and st.st_blocks * 512 >= st.st_size, st
        sid = cv.create()
        assert _get(cv, sid)["disk"] is None
        r = cv.sh(sid, ["sh", "-c", "dd if=/dev/zero of=/root/more bs=1M count=1200 2>&1; echo rc=$?"],
                  timeout=300)
        assert "No space left on device" in r["stdout"] and "rc=0" not in r["stdout"], r
        vfs = os.statvfs(mnt)
        assert vfs.f_bavail * vfs.f_frsize >= 48 << 20, vfs  # the host kept its reserve (64M)
        assert wait_until(lambda: "cannot grow" in cv.read_log(), 30), cv.read_log()
        caps = cv.api("GET", "/v1/capabilities")[1]["disk"]
        assert caps["pool_cannot_grow"] is True and caps["pool_bytes"] == st.st_size, caps
        ok, res = _after_rm_small_write_works(cv, sid)
        assert ok, res
    finally:
        if cv:
            cv.teardown()
        subprocess.run(["umount", "-l", mnt], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)


def test_pool_grows_while_the_host_has_room(_shared):
    """A new pool is 1 GiB, allocated; a sandbox that writes 1.5 GB into
    it finds room, the pool having grown meanwhile (and said so)."""
    cv = Coved(args=["--default-disk", "0"]).start()
    try:
        img = os.path.join(cv.data, "pool.img")
        assert os.stat(img).st_size == 1 << 30 and _pool_allocated(cv) >= 1 << 30
        sid = cv.create()
        r = cv.sh(sid, ["sh", "-c", "dd if=/dev/zero of=/root/big bs=1M count=1500 2>&1; echo rc=$?"], timeout=300)
        assert "rc=0" in r["stdout"], r
        st = os.stat(img)
        assert st.st_size > 1 << 30 and st.st_blocks * 512 >= st.st_size, st
        assert "pool grown by" in cv.read_log(), cv.read_log()
    finally:
        cv.teardown()


def test_a_sparse_pool_of_an_older_coved_is_allocated_at_start(_shared):
    """An older coved made the pool file sparse: a start allocates its
    holes when the host has the room (none would be left for a sandbox to
    fill the host's disk with). A file larger than its btrfs (a coved that
    died inside a growth) is taken whole."""
    cv = Coved().start()
    try:
        img = os.path.join(cv.data, "pool.img")
        cv.kill(signal.SIGTERM)
        subprocess.run(["umount", os.path.join(cv.data, "pool")], check=True)
        os.truncate(img, 3 << 30)  # a 2 GiB hole at its end
        st = os.stat(img)
        assert st.st_blocks * 512 < st.st_size
        cv.start()
        st = os.stat(img)
        assert st.st_size == 3 << 30 and st.st_blocks * 512 >= st.st_size, st
        vfs = os.statvfs(os.path.join(cv.data, "pool"))
        assert vfs.f_blocks * vfs.f_frsize > (5 << 30) // 2, vfs  # btrfs took the whole file
        sid = cv.create(disk="64M")
        ok, out = _refused(cv, sid)
        assert ok, out
    finally:
        cv.teardown()


def test_a_warm_pool_sandbox_gets_the_create_s_limit(_shared):
    """A sandbox handed out from a warm pool (coved --warm) takes the
    create's disk limit, or the default."""
    cv = Coved(args=["--warm", "2", "--default-disk", "96M"]).start()
    try:
        assert wait_until(lambda: cv.api("GET", "/v1/capabilities")[1]["warm_pool"]["ready"] >= 2, 60)
        st, a = cv.api("POST", "/v1/sandboxes", {"disk": "64M"})
        assert st == 201 and a["from_pool"] is True and a["disk"] == 64 << 20, (st, a)
        ok, out = _refused(cv, a["id"])
        assert ok, out
        assert wait_until(lambda: cv.api("GET", "/v1/capabilities")[1]["warm_pool"]["ready"] >= 1, 60)
        st, b = cv.api("POST", "/v1/sandboxes", {})
        assert st == 201 and b["from_pool"] is True and b["disk"] == 96 << 20, (st, b)
        assert cv.api("GET", "/v1/sandboxes/%s/stats" % b["id"])[1]["disk_limit_bytes"] == 96 << 20
        r = cv.sh(b["id"], ["sh", "-c", "dd if=/dev/zero of=/root/big bs=1M count=120 2>&1; echo rc=$?"])
        assert "rc=0" not in r["stdout"] and any(m in r["stdout"] for m in FULL), r
        # The hand-outs are observed as creates of kind "warm"; the pool's
        # waiting sandboxes are counted apart, not as running ones.
        c = cv.conn()
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
        assert 'cove_sandbox_create_seconds_count{kind="warm"} 2' in text, text
        assert re.search(r"^cove_warm_sandboxes [0-9]+$", text, re.M), text
        assert 'cove_sandboxes{state="running"} 2' in text, text
    finally:
        cv.teardown()

"""Snapshots, restores and forks: a snapshot of a running sandbox is
consistent (its cgroup is frozen for the instant of the subvolume
snapshot), a restore gives back the same files byte for byte, copies are
independent of each other and of the original, snapshots outlive their
sandbox and a coved SIGKILL, and what a crash leaves half made is cleaned up
at the next start, never listed."""
import json
import os
import re
import signal
import sqlite3
import subprocess
import time

import covetest
from covetest import wait_until

SN_RE = re.compile(r"^sn_[a-z2-7]{12}$")
SB_RE = re.compile(r"^sb_[a-z2-7]{12}$")
PAD = "x" * 64
WRITER = ("setsid sh -c 'i=0; while :; do i=$((i+1)); echo \"line-$i-%s-end\" >> /root/log; done' "
          ">/dev/null 2>&1 </dev/null &" % PAD)
# Everything of a sandbox's tree but the kernel's file systems, with mode,
# owner, size, symlink target and mtime; then the contents of the places
# written to (/etc and /root whole). /usr and /opt are overlays of their own
# (-xdev stops at them): their written parts are walked too.
LISTING = (r"for d in / /usr/local /opt; do find $d -xdev \( -path /proc -o -path /sys -o -path /dev \) -prune "
           r"-o -printf '%p %m %u %g %s %l %T@\n' 2>/dev/null; done | sort; "
           r"find /root /etc /home /usr/local/share/cove /opt/cove /var/tmp -xdev -type f -print0 2>/dev/null "
           r"| sort -z | xargs -0 sha256sum")
SETUP = """set -e
mkdir -p /root/d/e /home/u /usr/local/share/cove /opt/cove /var/tmp/v
printf 'hello\\n' > /root/a; chmod 600 /root/a
head -c 300000 /dev/urandom > /root/d/e/big
ln -s ../a /root/d/rel; ln -s /etc/hostname /root/d/abs; ln -s /nowhere /root/d/dangling
ln /root/a /root/hard
echo suid > /usr/local/share/cove/s; chmod 4755 /usr/local/share/cove/s
echo opt > /opt/cove/o; chown nobody:nogroup /opt/cove/o
echo v > /var/tmp/v/f; chown 1234:4321 /var/tmp/v/f; chmod 640 /var/tmp/v/f
echo 'extra line' >> /etc/motd; rm -f /etc/issue.net; mkfifo /root/fifo
touch -d '2001-02-03 04:05:06' /root/a
"""


def _snap(cv, sid, **body):
    st, j = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, body)
    assert st == 201, (st, j)
    return j


def _restore(cv, snid, **body):
    st, j = cv.api("POST", "/v1/snapshots/%s/restore" % snid, body)
    assert st == 201, (st, j)
    return j


def _out(cv, sid, script):
    r = cv.sh(sid, script)
    assert r["exit_code"] == 0, r
    return r["stdout"]


def _rm(cv, *ids):
    for i in ids:
        path = ("/v1/snapshots/" if i.startswith("sn_") else "/v1/sandboxes/") + i
        cv.api("DELETE", path)


def _subvols(cv):
    out = subprocess.run(["btrfs", "subvolume", "list", os.path.join(cv.data, "pool")], capture_output=True,
                         text=True)
    assert out.returncode == 0, out
    return sorted(line.split()[-1] for line in out.stdout.splitlines())


def _snap_dirs(cv):
    d = os.path.join(cv.data, "pool", "snapshots")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def _listed(cv):
    st, j = cv.api("GET", "/v1/snapshots")
    assert st == 200, (st, j)
    return [s["id"] for s in j["snapshots"]]


def test_snapshot_of_a_running_writer_is_consistent(cv):
    sid = cv.create()
    ids = [sid]
    try:
        _out(cv, sid, WRITER)
        assert wait_until(lambda: int(_out(cv, sid, "cat /root/log 2>/dev/null | wc -l")) > 200, 10)
        sn = _snap(cv, sid, name="while-writing")
        ids.append(sn["id"])
        assert SN_RE.match(sn["id"]) and sn["sandbox"] == sid and sn["name"] == "while-writing", sn
        assert sn["durable"] is True and sn["image_dir"] and sn["spec"]["image_dir"] == sn["image_dir"], sn
        new = _restore(cv, sn["id"])
        ids.append(new["id"])
        assert new["state"] == "running" and new["id"] != sid, new
        lines = _out(cv, new["id"], "cat /root/log").split("\n")
        assert lines[-1] == "", "the snapshot holds a torn last line: %r" % lines[-1][-100:]
        lines = lines[:-1]
        want = ["line-%d-%s-end" % (i, PAD) for i in range(1, len(lines) + 1)]
        assert lines == want, "not a consistent prefix of the writer's output"
        # The restored copy runs no writer (processes are not restored) ...
        time.sleep(0.3)
        assert len(_out(cv, new["id"], "cat /root/log").split("\n")) - 1 == len(lines)
        # ... while the original's keeps writing, thawed.
        n1 = int(_out(cv, sid, "wc -l < /root/log"))
        assert wait_until(lambda: int(_out(cv, sid, "wc -l < /root/log")) > n1 + 100, 10), "original frozen?"
        assert n1 >= len(lines)
    finally:
        _rm(cv, *ids)


def test_restore_gives_byte_identical_files(cv):
    sid = cv.create()
    ids = [sid]
    try:
        _out(cv, sid, SETUP)
        before = _out(cv, sid, LISTING)
        sn = _snap(cv, sid)
        ids.append(sn["id"])
        again = _out(cv, sid, LISTING)
        assert again == before, ("taking a snapshot changed the source",
                                 set(before.splitlines()) ^ set(again.splitlines()))
        new = _restore(cv, sn["id"])
        ids.append(new["id"])
        after = _out(cv, new["id"], LISTING)
        assert "/root/d/e/big" in after and "/root/d/rel 777 root root 4 ../a" in after, after[:2000]
        assert "/opt/cove/o 644 nobody nogroup" in after and "/var/tmp/v/f 640 1234 4321" in after
        assert "/usr/local/share/cove/s 4755 root root" in after
        assert after == before, "\n".join(
            l for l in set(before.splitlines()) ^ set(after.splitlines()))[:3000]
        assert _out(cv, new["id"], "stat -c '%h %F' /root/a /root/fifo") == "2 regular file\n1 fifo\n"
    finally:
        _rm(cv, *ids)


def test_copies_are_independent(cv):
    sid = cv.create()
    ids = [sid]
    try:
        _out(cv, sid, "echo base > /root/f; echo base > /etc/cove-f")
        sn = _snap(cv, sid)
        ids.append(sn["id"])
        a, b = _restore(cv, sn["id"])["id"], _restore(cv, sn["id"])["id"]
        st, j = cv.api("POST", "/v1/sandboxes/%s/fork" % sid, {"count": 1})
        assert st == 201 and len(j["sandboxes"]) == 1, (st, j)
        c = j["sandboxes"][0]["id"]
        ids += [a, b, c]
        for who in (sid, a, b, c):
            _out(cv, who, "echo %s > /root/f; echo %s > /etc/cove-f; echo %s > /root/only-%s" % (who, who, who, who))
        for who in (sid, a, b, c):
            assert _out(cv, who, "cat /root/f /etc/cove-f; ls /root | grep only-") == "%s\n%s\nonly-%s\n" % (
                who, who, who), who
        # A fresh restore still has the snapshot's state.
        d = _restore(cv, sn["id"])["id"]
        ids.append(d)
        assert _out(cv, d, "cat /root/f /etc/cove-f; ls /root") == "base\nbase\nf\n"
    finally:
        _rm(cv, *ids)


def _limits(sid):
    with open("/sys/fs/cgroup/memory/cove/%s/memory.limit_in_bytes" % sid) as f:
        mem = int(f.read())
    with open("/sys/fs/cgroup/pids/cove/%s/pids.max" % sid) as f:
        pids = f.read().strip()
    return mem, pids


def test_fork_three_running_copies(cv):
    sid = cv.create(memory="300M", cpus=0.5, pids=200, env={"K": "v"}, name="orig")
    ids = [sid]
    try:
        _out(cv, sid, "echo original > /root/f; " + WRITER)
        assert wait_until(lambda: int(_out(cv, sid, "cat /root/log 2>/dev/null | wc -l")) > 10, 10)
        dirs = _snap_dirs(cv)
        st, j = cv.api("POST", "/v1/sandboxes/%s/fork" % sid, {"count": 3})
        assert st == 201, (st, j)
        copies = j["sandboxes"]
        ids += [c["id"] for c in copies]
        assert len(copies) == 3 and len({c["id"] for c in copies} | {sid}) == 4, copies
        st, orig = cv.api("GET", "/v1/sandboxes/" + sid)
        uid_bases = {orig["uid_base"]}
        for c in copies:
            assert c["state"] == "running", c
            for k in ("memory", "cpus", "pids", "env", "name", "image_dir"):
                assert c[k] == orig[k], (k, c, orig)
            uid_bases.add(c["uid_base"])
            assert _limits(c["id"]) == _limits(sid) == (300 << 20, "200"), c["id"]
            assert _out(cv, c["id"], "cat /root/f; echo $K") == "original\nv\n"
            lines = _out(cv, c["id"], "cat /root/log").split("\n")
            assert lines[-1] == "" and lines[:-1] == ["line-%d-%s-end" % (i, PAD) for i in range(1, len(lines))]
        assert len(uid_bases) == 4, "copies share a uid range"
        # The frozen instant was a temporary snapshot: not listed, not left.
        assert _snap_dirs(cv) == dirs and not set(_listed(cv)) - set(dirs)
        # count must be 1..100, and nothing else is accepted.
        for body in ({"count": 0}, {"count": 101}, {"count": "3"}, {"count": 1.5}, {"n": 3}):
            st, j = cv.api("POST", "/v1/sandboxes/%s/fork" % sid, body)
            assert st == 400, (body, st, j)
        st, j = cv.api("POST", "/v1/sandboxes/sb_aaaaaaaaaaaa/fork", {})
        assert st == 404, (st, j)
    finally:
        _rm(cv, *ids)


def test_snapshot_outlives_its_sandbox(cv):
    sid = cv.create()
    _out(cv, sid, "echo kept > /root/f")
    sn = _snap(cv, sid)
    _rm(cv, sid)
    try:
        st, j = cv.api("GET", "/v1/sandboxes/" + sid)
        assert st == 404
        st, j = cv.api("GET", "/v1/snapshots/" + sn["id"])
        assert st == 200 and j == sn, (st, j)
        new = _restore(cv, sn["id"], name="again", memory="200M", cpus=0.25, pids=100)
        assert (new["name"], new["memory"], new["cpus"], new["pids"]) == ("again", 200 << 20, 0.25, 100), new
        assert _out(cv, new["id"], "cat /root/f") == "kept\n"
        _rm(cv, new["id"])
    finally:
        _rm(cv, sn["id"])


def test_delete_and_bad_input(cv):
    sid = cv.create()
    try:
        sn = _snap(cv, sid)
        assert sn["id"] in _listed(cv)
        st, j = cv.api("DELETE", "/v1/snapshots/" + sn["id"])
        assert st == 200 and j == {"id": sn["id"], "deleted": True}, (st, j)
        assert sn["id"] not in _listed(cv) and sn["id"] not in _snap_dirs(cv)
        for method, path in (("GET", "/v1/snapshots/" + sn["id"]), ("DELETE", "/v1/snapshots/" + sn["id"]),
                             ("POST", "/v1/snapshots/%s/restore" % sn["id"]), ("GET", "/v1/snapshots/sb_x"),
                             ("GET", "/v1/snapshots/" + sid), ("POST", "/v1/sandboxes/sb_aaaaaaaaaaaa/snapshots")):
            st, j = cv.api(method, path, {} if method == "POST" else None)
            assert st == 404 and j["error"]["code"] == "not_found", (method, path, st, j)
        # memory snapshots: test_memsnap.py
        for body in ({"nme": "x"}, {"name": 3}, {"name": "x" * 64}, {"memory": "yes"}):
            st, j = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, body)
            assert st == 400, (body, st, j)
        st, j = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, raw=b"{bad")
        assert st == 400, (st, j)
        sn = _snap(cv, sid, memory=False)
        for body in ({"image": "host"}, {"memory": "1M"}, {"cpus": 0}, {"pids": 1}, {"env": {}}):
            st, j = cv.api("POST", "/v1/snapshots/%s/restore" % sn["id"], body)
            assert st == 400, (body, st, j)
        _rm(cv, sn["id"])
        assert _listed(cv) == [] or sn["id"] not in _listed(cv)
    finally:
        _rm(cv, sid)


def _settled(cv):
    """No deletion under way: the sandbox roots on disk are the listed ones."""
    d = os.path.join(cv.data, "pool", "sandboxes")
    listed = {s["id"] for s in cv.api("GET", "/v1/sandboxes")[1]["sandboxes"]}
    return {n for n in os.listdir(d) if SB_RE.match(n)} == listed


def test_everything_deleted_leaves_no_subvolume(cv):
    assert wait_until(lambda: _settled(cv), 15)
    before = _subvols(cv)
    sid = cv.create()
    sn = _snap(cv, sid)
    a = _restore(cv, sn["id"])["id"]
    st, j = cv.api("POST", "/v1/sandboxes/%s/fork" % a, {"count": 2})
    assert st == 201, (st, j)
    assert len(_subvols(cv)) == len(before) + 5, (before, _subvols(cv))
    _rm(cv, sid, a, sn["id"], *[c["id"] for c in j["sandboxes"]])
    assert wait_until(lambda: _subvols(cv) == before, 15), (before, _subvols(cv))
    assert not [d for d in _snap_dirs(cv) if d not in _listed(cv)]


def _make_half(cv, name, files, manifest):
    d = os.path.join(cv.data, "pool", "snapshots", name)
    os.mkdir(d)
    if files:
        subprocess.run(["btrfs", "-q", "subvolume", "create", os.path.join(d, "files")], check=True)
    if manifest:
        with open(os.path.join(d, "manifest.json"), "w") as f:
            f.write("{}")
    return d


def test_snapshots_survive_a_coved_kill_and_crash_leftovers_go(shared):
    cv = covetest.Coved().start()
    ids = []
    try:
        sid = cv.create()
        ids.append(sid)
        _out(cv, sid, "echo durable > /root/f")
        keep = _snap(cv, sid, name="keep")
        gone = _snap(cv, sid, name="gone")
        cv.kill(signal.SIGKILL)
        # What a crash can leave: a snapshot directory without manifest,
        # one with a manifest but no row, an empty one, a temporary file;
        # and a row whose files are gone.
        half = [_make_half(cv, "sn_aaaaaaaaaaaa", True, False), _make_half(cv, "sn_bbbbbbbbbbbb", True, True),
                _make_half(cv, "sn_cccccccccccc", False, False)]
        with open(os.path.join(cv.data, "pool", "snapshots", "sn_cccccccccccc", "manifest.json.tmp"), "w") as f:
            f.write("{")
        gdir = os.path.join(cv.data, "pool", "snapshots", gone["id"])
        subprocess.run(["btrfs", "-q", "property", "set", os.path.join(gdir, "files"), "ro", "false"], check=True)
        subprocess.run(["btrfs", "-q", "subvolume", "delete", os.path.join(gdir, "files")], check=True)
        cv.start()
        assert _listed(cv) == [keep["id"]], _listed(cv)
        assert _snap_dirs(cv) == [keep["id"]], _snap_dirs(cv)
        assert not any(os.path.exists(h) for h in half)
        st, j = cv.api("GET", "/v1/snapshots/" + keep["id"])
        assert st == 200 and j == keep, (st, j)
        new = _restore(cv, keep["id"])
        ids.append(new["id"])
        assert _out(cv, new["id"], "cat /root/f") == "durable\n"
        # An image that is no longer the host's is kept while a snapshot
        # needs it, with no sandbox left on it: the snapshot is pointed at
        # a copy of the image, as if the host had changed since.
        _rm(cv, *ids)
        ids = []
        assert wait_until(lambda: _settled(cv), 15)
        cv.kill(signal.SIGKILL)
        images = os.path.join(cv.data, "pool", "images")
        old = "host-0000000000000000"
        subprocess.run(["btrfs", "-q", "subvolume", "snapshot", "-r", os.path.join(images, keep["image_dir"]),
                        os.path.join(images, old)], check=True)
        db = sqlite3.connect(os.path.join(cv.data, "state.db"))
        spec = json.loads(db.execute("SELECT spec FROM snapshots WHERE id = ?", (keep["id"],)).fetchone()[0])
        spec["image_dir"] = old
        db.execute("UPDATE snapshots SET image_dir = ?, spec = ? WHERE id = ?", (old, json.dumps(spec), keep["id"]))
        db.commit()
        db.close()
        cv.start()
        assert os.path.isdir(os.path.join(images, old)), "the image GC deleted an image a snapshot needs"
        new = _restore(cv, keep["id"])
        ids.append(new["id"])
        assert new["image_dir"] == old, new
        assert _out(cv, new["id"], "cat /root/f") == "durable\n"
        # Without the snapshot, the next start collects it.
        _rm(cv, keep["id"], *ids)
        ids = []
        assert wait_until(lambda: _settled(cv), 15)
        cv.kill(signal.SIGKILL)
        cv.start()
        assert not os.path.exists(os.path.join(images, old))
    finally:
        _rm(cv, *ids)
        for s in _listed(cv) if cv.proc else []:
            _rm(cv, s)
        cv.cleanup()


def test_cli_verbs(cv):
    sid = cv.create()
    made = [sid]
    try:
        _out(cv, sid, "echo cli > /root/f")
        r = cv.cli("snapshot", "--name", "from-cli", sid)
        assert r.returncode == 0, r
        snid = r.stdout.decode().strip()
        made.append(snid)
        assert SN_RE.match(snid), r.stdout
        r = cv.cli("snapshots")
        assert r.returncode == 0 and snid in r.stdout.decode() and "from-cli" in r.stdout.decode(), r
        r = cv.cli("restore", "--name", "restored", snid)
        assert r.returncode == 0, r
        new = r.stdout.decode().strip()
        made.append(new)
        assert SB_RE.match(new) and _out(cv, new, "cat /root/f") == "cli\n"
        r = cv.cli("fork", "-n", "2", sid)
        assert r.returncode == 0, r
        forks = r.stdout.decode().split()
        made += forks
        assert len(forks) == 2 and all(SB_RE.match(f) for f in forks), r.stdout
        assert all(_out(cv, f, "cat /root/f") == "cli\n" for f in forks)
        r = cv.cli("snapshot", "--memorie", sid)
        assert r.returncode == 2, r
        r = cv.cli("fork", "-n", "0", sid)
        assert r.returncode == 1 and b"count" in r.stderr, r
        r = cv.cli("snapshot", "rm", snid)
        assert r.returncode == 0 and r.stdout.decode().strip() == snid, r
        assert snid not in _listed(cv)
        r = cv.cli("snapshot", "rm", snid)
        assert r.returncode == 1 and b"no snapshot" in r.stderr, r
        r = cv.cli("--json", "snapshots")
        assert r.returncode == 0 and r.stdout.decode().strip().startswith("["), r
    finally:
        _rm(cv, *made)

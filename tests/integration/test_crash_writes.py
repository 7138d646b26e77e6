"""Crash test of coved's write paths (issue 16, item 5): each is started,
coved is SIGKILLed at a random moment of it (within 1.2 times its duration
measured undisturbed, so also just after), started again, and then

  - the operation happened whole or not at all, and whole if it was
    acknowledged before the kill: a file is its old content or its new one,
    byte for byte, never a mix; a move is at one path; a delete is done or
    not begun; a tar upload's files are each old or new; an image is listed
    and runs, or is not listed;
  - everything acknowledged before is intact (the files acknowledged so far
    are read back and compared, and every listed sandbox execs);
  - nothing half made is listed or left: no subvolume but those of what is
    listed, no snapshot folder not listed, no cgroup of a sandbox not
    listed, no mount of one, one loop device for the pool, no replacement
    file left in a folder written to; in the image store, no blob that is
    not whole, no scratch tree or build folder after the start, and once a
    prune collected, no blob or layer tree no listed image needs.

The write paths here (PATHS): a file's PUT (over one, a new one, one cut
short by the client), recursive DELETE, mkdir, move, chmod and tar
upload; a portable snapshot's import; a snapshot's delete; checkpoints'
delete, rollback and branch; templates' create and delete; ports, the
network policy, sessions; an image's import, delete and prune; an
image's pull from a loopback docker-registry (new and again; the CLI's
message when cut short); a Dockerfile build (COPY and RUN, by the CLI,
then built again); a sandbox's delete. The other write paths have crash
tests of their own: creates and deletes (test_restart), snapshots,
restores, forks and checkpoints with and without memory (test_crash),
lifecycle transitions (test_lifecycle). Runs on a private coved without
memory snapshots (COVE_CRIU names no criu: its self-test would add seconds
to every start). Kills per write path: COVE_CRASH_WRITES_TRIALS (10; about
50 s on a quiet machine, `make crash` takes more when asked); the random
moments replay with COVE_CRASH_SEED, which a run prints."""
import fcntl
import hashlib
import json
import os
import random
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import covetest
import imagekit
import test_build as tb
import test_files as tf
import test_images as ti
from covetest import wait_until
from test_crash import _expected_subvols, _listed, _restart, _subvols

TRIALS = int(os.environ.get("COVE_CRASH_WRITES_TRIALS", "10"))
HTTP_TIMEOUT = 20
NO_CRIU = {"COVE_CRIU": "/nonexistent/criu"}
KIB = 1024


def _sha(b):
    return hashlib.sha256(b).hexdigest()


def _fire(cv, req, out):
    """req: (method, path, JSON body or None, raw bytes or None), or a
    function (a CLI command, say) whose result is the answer."""
    def run():
        try:
            out.append(req() if callable(req) else cv.api(req[0], req[1], req[2], raw=req[3], timeout=HTTP_TIMEOUT))
        except Exception as e:  # the kill cuts it short
            out.append(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _sh(cv, sid, script):
    st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": script, "timeout": 10}, timeout=HTTP_TIMEOUT)
    assert st == 200 and j["exit_code"] == 0, (script, st, j)
    return j["stdout"]


def _file(cv, sid, path):
    """sha256 of a file in the sandbox, or None when it is missing."""
    st, body = tf.get(cv, sid, path)
    return _sha(body) if st == 200 else None


def _acked(answer, *codes):
    return isinstance(answer, tuple) and answer[0] in codes


class Run:
    """One private coved, its main sandbox, and what was acknowledged."""

    def __init__(self, cv, rng):
        self.cv, self.rng = cv, rng
        self.problems, self.refusals, self.seen = [], [], set()
        self.files = {}  # path in main -> sha256 acknowledged
        self.main = cv.create(name="main")
        self.seen.add(self.main)

    def put(self, path, data, sid=None):
        st, j = tf.put(self.cv, sid or self.main, path, data, parents="1")
        assert st in (200, 201), (st, j)
        if not sid or sid == self.main:
            self.files[path] = _sha(data)

    def trial(self, what, req, span_ms, check):
        """Fire req, kill coved within 1.2 spans, start it again, then
        check(answer, what) and the common checks."""
        delay = self.rng.uniform(0, 1.2 * span_ms) / 1000
        what = "%s (killed after %.1f ms)" % (what, delay * 1000)
        out = []
        t = _fire(self.cv, req, out)
        time.sleep(delay)
        self.cv.kill()
        self.seen |= set(self.cv.sandbox_dirs())  # a build's RUN sandbox, say: its cgroups must go too
        _restart(self.cv, self.refusals)
        t.join(HTTP_TIMEOUT)
        answer = out[0] if out else None
        check(answer, what)
        self.settled(what)
        return answer

    def span(self, req, undo=None):
        """How long req takes undisturbed (ms); undo(answer) takes back what it made."""
        t0 = time.time()
        if callable(req):
            r = req()
            st, j = (200 if r.returncode == 0 else 500), r
        else:
            st, j = self.cv.api(*req[:3], raw=req[3], timeout=HTTP_TIMEOUT)
        ms = (time.time() - t0) * 1000
        assert 200 <= st < 300, (req if callable(req) else req[:2], st, j)
        if undo:
            undo(j)
        return ms

    def settled(self, what):
        cv, p = self.cv, self.problems
        sbs, snaps = _listed(cv, "sandboxes"), _listed(cv, "snapshots")
        self.seen |= set(sbs) | set(cv.sandbox_dirs())
        if self.files:  # one exec reads them all
            out = _sh(cv, self.main, "sha256sum %s 2>/dev/null; true" % " ".join(sorted(self.files)))
            got = {line.split()[1]: line.split()[0] for line in out.splitlines()}
            for path, digest in sorted(self.files.items()):
                if got.get(path) != digest:
                    p.append("%s: acknowledged %s is %s" % (what, path, "changed" if path in got else "gone"))
        for sid in sorted(sbs):
            if sbs[sid]["state"] not in ("running", "paused", "archived"):
                continue
            st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["true"]}, timeout=HTTP_TIMEOUT)
            if st != 200 or j.get("exit_code") != 0:
                p.append("%s: listed sandbox %s does not exec: %s %s" % (what, sid, st, j))
        # A cove-image helper of the killed coved (an import's, a pull's)
        # may still be making its layer trees: the pool is looked at once
        # it is done.
        if not _helpers_done(cv):
            p.append("%s: the import lock is still held after %d s" % (what, HTTP_TIMEOUT))
        want = _expected_subvols(cv, sbs, snaps)
        if not wait_until(lambda: _subvols(cv) == want, 10):
            p.append("%s: subvolumes leaked %s, missing %s" % (what, sorted(_subvols(cv) - want),
                                                               sorted(want - _subvols(cv))))
        stray = [n for n in os.listdir(os.path.join(cv.data, "pool", "snapshots")) if n not in snaps]
        if stray:
            p.append("%s: snapshot folders not listed: %s" % (what, stray))
        for sid in sorted(self.seen - set(sbs)):
            if not wait_until(lambda: not covetest.cgroup_dirs(sid), 10):
                p.append("%s: unlisted %s keeps cgroups %s" % (what, sid, covetest.cgroup_dirs(sid)))
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split()[4] for line in f]
        root = os.path.join(cv.data, "pool", "sandboxes") + "/"
        leaked = [m for m in mounts if m.startswith(root) and m[len(root):].split("/")[0] not in sbs]
        if leaked:
            p.append("%s: mounts of unlisted sandboxes: %s" % (what, leaked[:5]))
        loops = subprocess.run(["losetup", "-j", os.path.join(cv.data, "pool.img")], capture_output=True,
                               text=True).stdout.splitlines()
        if len(loops) > 1:
            p.append("%s: %d loop devices for the pool: %s" % (what, len(loops), loops))


def _no_replacements(run, sid, folder, what):
    out = _sh(run.cv, sid, "ls -A %s" % folder)
    if ".cove-replace-" in out:
        run.problems.append("%s: a replacement file is left in %s: %s" % (what, folder, out.split()))


# ---- the write paths: each makes TRIALS kills ----

def files_put(run):
    """PUT over an existing file (512 KiB, mode 640, owner 1234): old or
    new, whole, with its mode and owner; a kill while the body is half sent
    leaves the old one."""
    cv, sid, path = run.cv, run.main, "/srv/w/put"
    run.put(path, os.urandom(512 * KIB))
    _sh(cv, sid, "chown 1234:1234 %s && chmod 640 %s" % (path, path))
    new = os.urandom(512 * KIB)
    span = run.span(("PUT", tf._url(sid, path=path), None, new))
    run.files[path] = _sha(new)
    for i in range(TRIALS):
        old, new = run.files[path], os.urandom(512 * KIB)

        def check(answer, what):
            got = _file(cv, sid, path)
            if got not in (old, _sha(new)) or (_acked(answer, 200) and got != _sha(new)):
                run.problems.append("%s: %s is neither the old nor the new content (answer %s)" % (
                    what, path, answer))
            mode = _sh(cv, sid, "stat -c '%%a %%u %%g' %s" % path)
            if mode != "640 1234 1234\n":
                run.problems.append("%s: mode and owner now %s" % (what, mode.strip()))
            _no_replacements(run, sid, "/srv/w", what)
            run.files[path] = got or old
        run.trial("files PUT #%d" % i, ("PUT", tf._url(sid, path=path), None, new), span, check)
    # The body cut short: the client sends half and stays; coved is killed.
    for i in range(TRIALS):
        old, new = run.files[path], os.urandom(512 * KIB)
        s = socket.socket(socket.AF_UNIX)
        s.connect(cv.socket)
        s.sendall(b"PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (
            tf._url(sid, path=path).encode(), len(new)) + new[:run.rng.randrange(len(new))])
        time.sleep(run.rng.uniform(0, 0.05))
        cv.kill()
        s.close()
        _restart(cv, run.refusals)
        what = "files PUT cut at half, then killed #%d" % i
        if _file(cv, sid, path) != old:
            run.problems.append("%s: the old content is not whole" % what)
        _no_replacements(run, sid, "/srv/w", what)
        run.settled(what)


def files_put_new(run):
    """PUT of a new file: there whole, or not there."""
    cv, sid = run.cv, run.main
    data = os.urandom(256 * KIB)
    span = run.span(("PUT", tf._url(sid, path="/srv/w/new-span"), None, data))
    for i in range(TRIALS):
        path = "/srv/w/new-%d" % i

        def check(answer, what):
            got = _file(cv, sid, path)
            if got not in (None, _sha(data)) or (_acked(answer, 201) and got is None):
                run.problems.append("%s: new file %s is %s (answer %s)" % (what, path, got, answer))
            if got:
                run.files[path] = got
        run.trial("files PUT new #%d" % i, ("PUT", tf._url(sid, path=path), None, data), span, check)


def files_delete(run):
    """A recursive DELETE of a folder of 300 files: whole, or gone (init's
    child goes on without coved: it may end after the start)."""
    cv, sid = run.cv, run.main
    make = "mkdir -p %s && cd %s && for i in $(seq 300); do echo $i > f$i; done"
    _sh(cv, sid, make % ("/srv/w/del-span", "/srv/w/del-span"))
    span = run.span(("DELETE", tf._url(sid, path="/srv/w/del-span", recursive="1"), None, None))
    for i in range(TRIALS):
        d = "/srv/w/del-%d" % i
        _sh(cv, sid, make % (d, d))

        def check(answer, what):
            def state():
                n = _sh(cv, sid, "ls %s 2>/dev/null | wc -l" % d).strip()
                return "gone" if _sh(cv, sid, "test -e %s || echo gone" % d) else n
            if not wait_until(lambda: state() in ("gone", "300"), 5):
                run.problems.append("%s: the folder is half deleted: %s entries" % (what, state()))
            elif _acked(answer, 200) and state() != "gone":
                run.problems.append("%s: acknowledged, but the folder is there" % what)
        run.trial("files DELETE #%d" % i, ("DELETE", tf._url(sid, path=d, recursive="1"), None, None), span, check)


def files_mkdir_move_chmod(run):
    cv, sid = run.cv, run.main
    span = run.span(("POST", tf._url(sid, "files/mkdir", path="/srv/w/mk-span/a/b"), None, None))
    for i in range(TRIALS):
        d = "/srv/w/mk-%d/a/b/c" % i

        def check(answer, what):
            there = _sh(cv, sid, "test -d %s && echo yes || true" % d) == "yes\n"
            if _acked(answer, 200, 201) and not there:
                run.problems.append("%s: acknowledged mkdir of %s, not there" % (what, d))
        run.trial("files mkdir #%d" % i, ("POST", tf._url(sid, "files/mkdir", path=d), None, None),
                  span, check)
    run.put("/srv/w/mv-span", b"x")
    span = run.span(("POST", tf._url(sid, "files/move", **{"from": "/srv/w/mv-span", "to": "/srv/w/mv-x"}), None, None))
    run.files.pop("/srv/w/mv-span")
    for i in range(TRIALS):
        src, dst, data = "/srv/w/mv-%d" % i, "/srv/w/moved-%d" % i, os.urandom(4 * KIB)
        run.put(src, data)

        def check(answer, what):
            a, b = _file(cv, sid, src), _file(cv, sid, dst)
            if sorted([a, b], key=str) != sorted([None, _sha(data)], key=str) or (_acked(answer, 200) and b is None):
                run.problems.append("%s: after a move, %s is %s and %s is %s" % (what, src, a, dst, b))
            run.files.pop(src)
            run.files[dst if b else src] = _sha(data)
        run.trial("files move #%d" % i, ("POST", tf._url(sid, "files/move", **{"from": src, "to": dst}), None, None),
                  span, check)
    run.put("/srv/w/ch", b"chmod me")
    span = run.span(("POST", "/v1/sandboxes/%s/files/chmod" % sid, {"path": "/srv/w/ch", "mode": "0600"}, None))
    for i in range(TRIALS):
        old, new = _sh(cv, sid, "stat -c %a /srv/w/ch").strip(), "%o" % (0o600 + 0o11 * (i % 7))

        def check(answer, what):
            got = _sh(cv, sid, "stat -c %a /srv/w/ch").strip()
            if got not in (old, new) or (_acked(answer, 200) and got != new):
                run.problems.append("%s: mode %s, was %s, asked %s" % (what, got, old, new))
        run.trial("files chmod #%d" % i, ("POST", "/v1/sandboxes/%s/files/chmod" % sid, {"path": "/srv/w/ch", "mode": "0" + new}, None), span, check)


def files_tar(run):
    """A tar upload over 6 existing files of 128 KiB: each file old or new,
    whole; all new when acknowledged."""
    cv, sid, names = run.cv, run.main, ["f%d" % k for k in range(6)]
    for n in names:
        run.put("/srv/w/tar/" + n, os.urandom(128 * KIB))

    def tar():
        blobs = {n: os.urandom(128 * KIB) for n in names}
        return blobs, tf._tar([(n, "file", b, 0o644) for n, b in blobs.items()])
    blobs, data = tar()
    span = run.span(("PUT", tf._url(sid, "files/tar", path="/srv/w/tar"), None, data))
    for n in names:
        run.files["/srv/w/tar/" + n] = _sha(blobs[n])
    for i in range(TRIALS):
        old = {n: run.files["/srv/w/tar/" + n] for n in names}
        blobs, data = tar()

        def check(answer, what):
            for n in names:
                got = _file(cv, sid, "/srv/w/tar/" + n)
                if got not in (old[n], _sha(blobs[n])) or (_acked(answer, 200) and got != _sha(blobs[n])):
                    run.problems.append("%s: %s is neither old nor new (answer %s)" % (what, n, answer))
                run.files["/srv/w/tar/" + n] = got or old[n]
            _no_replacements(run, sid, "/srv/w/tar", what)
        run.trial("files tar upload #%d" % i, ("PUT", tf._url(sid, "files/tar", path="/srv/w/tar"), None, data),
                  span, check)


def portable_import(run):
    """POST snapshot.json of another sandbox's changes (3 files of 64 KiB
    in /srv/p) into main, where they were: each file old or new, whole."""
    cv, sid = run.cv, run.main
    other = cv.create(name="port-src")
    run.seen.add(other)
    _sh(cv, other, "mkdir -p /srv/p && for i in 1 2 3; do head -c 65536 /dev/urandom > /srv/p/f$i; done")
    st, doc = cv.api("GET", "/v1/sandboxes/%s/snapshot.json" % other, timeout=HTTP_TIMEOUT)
    assert st == 200, (st, doc)
    want = {n: _file(cv, other, "/srv/p/" + n) for n in ("f1", "f2", "f3")}
    span = run.span(("POST", "/v1/sandboxes/%s/snapshot.json" % sid, doc, None))
    for n in want:
        run.files["/srv/p/" + n] = want[n]
    for i in range(TRIALS):
        _sh(cv, sid, "for i in 1 2 3; do echo old > /srv/p/f$i; done")
        old = _sha(b"old\n")
        for n in want:
            run.files.pop("/srv/p/" + n)

        def check(answer, what):
            for n in want:
                got = _file(cv, sid, "/srv/p/" + n)
                if got not in (old, want[n]) or (_acked(answer, 200, 201) and got != want[n]):
                    run.problems.append("%s: %s is neither old nor new (answer %s)" % (what, n, str(answer)[:200]))
                run.files["/srv/p/" + n] = got
            _no_replacements(run, sid, "/srv/p", what)
        run.trial("portable import #%d" % i, ("POST", "/v1/sandboxes/%s/snapshot.json" % sid,
                                              doc, None), span, check)
    cv.api("DELETE", "/v1/sandboxes/" + other)


def snapshot_delete(run):
    cv, sid = run.cv, run.main

    def snap():
        st, j = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {}, timeout=HTTP_TIMEOUT)
        assert st == 201, (st, j)
        return j["id"]
    span = run.span(("DELETE", "/v1/snapshots/" + snap(), None, None))
    for i in range(TRIALS):
        snid = snap()

        def check(answer, what):
            listed = snid in _listed(cv, "snapshots")
            if listed and _acked(answer, 200):
                run.problems.append("%s: acknowledged delete of %s, still listed" % (what, snid))
            if listed:
                st, j = cv.api("POST", "/v1/snapshots/%s/restore" % snid, {}, timeout=HTTP_TIMEOUT)
                if st != 201:
                    run.problems.append("%s: %s is listed but does not restore: %s %s" % (what, snid, st, j))
                else:
                    cv.api("DELETE", "/v1/sandboxes/" + j["id"])
                cv.api("DELETE", "/v1/snapshots/" + snid)
        run.trial("snapshot delete #%d" % i, ("DELETE", "/v1/snapshots/" + snid, None, None), span, check)


def history(run):
    """Checkpoints' deletion, rollback and branch."""
    cv, sid = run.cv, run.main

    def checkpoint():
        st, j = cv.api("POST", "/v1/sandboxes/%s/checkpoints" % sid, {"label": "c"}, timeout=HTTP_TIMEOUT)
        assert st == 201, (st, j)
        return j

    def history_of():
        st, j = cv.api("GET", "/v1/sandboxes/%s/checkpoints" % sid, timeout=HTTP_TIMEOUT)
        assert st == 200, (st, j)
        return j["checkpoints"]
    checkpoint()
    span = run.span(("DELETE", "/v1/sandboxes/%s/checkpoints" % sid, None, None))
    for i in range(TRIALS):
        c = checkpoint()

        def check(answer, what):
            h, snaps = history_of(), _listed(cv, "snapshots")
            if h and (_acked(answer, 200) or c["snapshot"] not in snaps):
                run.problems.append("%s: history %s after its delete (answer %s), snapshot listed: %s" % (
                    what, h, answer, c["snapshot"] in snaps))
            cv.api("DELETE", "/v1/sandboxes/%s/checkpoints" % sid)
            for snid in snaps:
                cv.api("DELETE", "/v1/snapshots/" + snid)
        run.trial("checkpoints delete #%d" % i, ("DELETE", "/v1/sandboxes/%s/checkpoints" % sid, None, None),
                  span, check)
    c = checkpoint()
    for verb, body, count in (("rollback", {"seq": c["seq"]}, 1), ("branch", {"seq": c["seq"], "count": 2}, 2)):
        span = run.span(("POST", "/v1/sandboxes/%s/%s" % (sid, verb), body, None),
                        lambda j: [cv.api("DELETE", "/v1/sandboxes/" + s["id"]) for s in j.get("sandboxes", [j])])
        for i in range(TRIALS):
            before = set(_listed(cv, "sandboxes"))

            def check(answer, what):
                new = set(_listed(cv, "sandboxes")) - before
                if len(new) not in (0, count) or (_acked(answer, 201) and len(new) != count):
                    run.problems.append("%s: %d new sandboxes of %d (answer %s)" % (what, len(new), count,
                                                                                   str(answer)[:200]))
                for s in new:
                    cv.api("DELETE", "/v1/sandboxes/" + s)
            run.trial("%s #%d" % (verb, i), ("POST", "/v1/sandboxes/%s/%s" % (sid, verb), body, None), span, check)
    cv.api("DELETE", "/v1/sandboxes/%s/checkpoints" % sid)
    for snid in _listed(cv, "snapshots"):
        cv.api("DELETE", "/v1/snapshots/" + snid)


def templates(run):
    cv = run.cv

    def names():
        st, j = cv.api("GET", "/v1/templates", timeout=HTTP_TIMEOUT)
        assert st == 200, (st, j)
        return {t["name"] for t in j["templates"]}
    span = run.span(("POST", "/v1/templates", {"name": "t-span", "image": "host"}, None),
                    lambda j: cv.api("DELETE", "/v1/templates/t-span"))
    for i in range(TRIALS):
        name = "t%d" % i

        def check(answer, what):
            if _acked(answer, 201) and name not in names():
                run.problems.append("%s: acknowledged template %s is not listed" % (what, name))
            if name in names():
                st, j = cv.api("POST", "/v1/sandboxes", {"template": name}, timeout=HTTP_TIMEOUT)
                if st != 201:
                    run.problems.append("%s: listed template %s does not create: %s %s" % (what, name, st, j))
                else:
                    cv.api("DELETE", "/v1/sandboxes/" + j["id"])
        run.trial("template create #%d" % i, ("POST", "/v1/templates", {"name": name, "image": "host"}, None),
                  span, check)
    for i in range(TRIALS):
        name = "t%d" % i
        if name not in names():
            assert cv.api("POST", "/v1/templates", {"name": name, "image": "host"})[0] == 201

        def check(answer, what):
            if _acked(answer, 200) and name in names():
                run.problems.append("%s: deleted template %s is listed" % (what, name))
        run.trial("template delete #%d" % i, ("DELETE", "/v1/templates/" + name, None, None), span, check)


def ports_network_sessions(run):
    cv, sid = run.cv, run.main

    def ports():
        st, j = cv.api("GET", "/v1/sandboxes/%s/ports" % sid, timeout=HTTP_TIMEOUT)
        assert st == 200, (st, j)
        return {p["port"] for p in j["ports"]}
    span = run.span(("POST", "/v1/sandboxes/%s/ports" % sid, {"port": 7999}, None))
    for i in range(TRIALS):
        port = 8000 + i

        def check(answer, what):
            if _acked(answer, 200, 201) and port not in ports():
                run.problems.append("%s: acknowledged port %d is not listed" % (what, port))
        run.trial("port add #%d" % i, ("POST", "/v1/sandboxes/%s/ports" % sid, {"port": port}, None), span, check)
    for i in range(TRIALS):
        port = 8000 + i
        if port not in ports():
            cv.api("POST", "/v1/sandboxes/%s/ports" % sid, {"port": port})

        def check(answer, what):
            if _acked(answer, 200, 204) and port in ports():
                run.problems.append("%s: closed port %d is listed" % (what, port))
        run.trial("port remove #%d" % i, ("DELETE", "/v1/sandboxes/%s/ports/%d" % (sid, port), None, None),
                  span, check)

    def policy():
        st, j = cv.api("GET", "/v1/sandboxes/" + sid, timeout=HTTP_TIMEOUT)
        assert st == 200, (st, j)
        return j.get("network")
    span = run.span(("PUT", "/v1/sandboxes/%s/network" % sid, {"deny_out": ["10.9.0.0/16"]}, None))
    for i in range(TRIALS):
        before, body = policy(), {"deny_out": ["10.%d.0.0/16" % (10 + i)]}

        def check(answer, what):
            got = policy()
            if _acked(answer, 200) and "10.%d.0.0/16" % (10 + i) not in json.dumps(got):
                run.problems.append("%s: acknowledged policy is not in force: %s" % (what, got))
            elif got != before and "10.%d.0.0/16" % (10 + i) not in json.dumps(got):
                run.problems.append("%s: policy is neither the old nor the new: %s" % (what, got))
        run.trial("network policy #%d" % i, ("PUT", "/v1/sandboxes/%s/network" % sid, body, None), span, check)

    def sessions():
        st, j = cv.api("GET", "/v1/sandboxes/%s/sessions" % sid, timeout=HTTP_TIMEOUT)
        assert st == 200, (st, j)
        return {s["id"]: s for s in j["sessions"]}
    span = run.span(("POST", "/v1/sandboxes/%s/sessions" % sid, {}, None))
    for i in range(TRIALS):
        def check(answer, what):
            listed = sessions()
            if _acked(answer, 201) and answer[1]["id"] not in listed:
                run.problems.append("%s: acknowledged session %s is not listed" % (what, answer[1]["id"]))
        run.trial("session create #%d" % i, ("POST", "/v1/sandboxes/%s/sessions" % sid, {}, None), span, check)


def _image_runs(run, name, path, want, what):
    """A sandbox of the listed image name reads want at the start of path."""
    cv = run.cv
    st, j = cv.api("POST", "/v1/sandboxes", {"image": name}, timeout=HTTP_TIMEOUT)
    if st != 201:
        run.problems.append("%s: listed image %s does not create: %s %s" % (what, name, st, j))
        return
    r = cv.api("POST", "/v1/sandboxes/%s/exec" % j["id"], {"cmd": ["cat", path]}, timeout=HTTP_TIMEOUT)
    if r[0] != 200 or not r[1].get("stdout", "").startswith(want):
        run.problems.append("%s: a sandbox of %s reads %s" % (what, name, r))
    cv.api("DELETE", "/v1/sandboxes/" + j["id"])


def images(run):
    """Image import, delete and prune: a listed image creates a sandbox;
    when all are gone and pruned, no blob or layer tree is left."""
    cv = run.cv
    data = ti.layout_tar(ti.app_image())
    span = run.span(("POST", "/v1/images?name=crash:0", None, data))

    def listed():
        st, j = cv.api("GET", "/v1/images", timeout=HTTP_TIMEOUT)
        assert st == 200, (st, j)
        return {n for i in j["images"] for n in i["names"]}

    def runs(name, what):
        _image_runs(run, name, "/work/hello", "hi\n", what)
    for i in range(TRIALS):
        name = "docker.io/library/crash:%d" % (i + 1)
        if i % 2:  # half of them a new image: its blobs and layers are new too
            data = ti.layout_tar(ti.app_image(extra=b"hi\n" + b"x" * i))

        def check(answer, what):
            if _acked(answer, 201) and name not in listed():
                run.problems.append("%s: acknowledged image %s is not listed" % (what, name))
            if name in listed():
                runs(name, what)
        run.trial("image import #%d" % i, ("POST", "/v1/images?name=crash:%d" % (i + 1), None, data), span, check)
    for i, name in enumerate(sorted(listed())):
        def check(answer, what):
            if _acked(answer, 200) and name in listed():
                run.problems.append("%s: deleted image %s is listed" % (what, name))
            if name in listed():
                runs(name, what)
        run.trial("image delete #%d" % i, ("DELETE", "/v1/images/" + name, None, None), 20, check)
    for i in range(TRIALS):
        if i % 2 == 0:  # something to prune
            assert cv.api("POST", "/v1/images?name=prune:1", raw=data, timeout=HTTP_TIMEOUT)[0] == 201
            assert cv.api("DELETE", "/v1/images/prune:1")[0] == 200

        def check(answer, what):
            if listed():
                runs(run.rng.choice(sorted(listed())), what)
        run.trial("image prune #%d" % i, ("POST", "/v1/images/prune", {"all": True}, None), 50, check)
    for name in listed():
        cv.api("DELETE", "/v1/images/" + name)
    st, j = cv.api("POST", "/v1/images/prune", {"all": True}, timeout=HTTP_TIMEOUT)
    assert st == 200, (st, j)
    blobs, layers, ids = ti.pool_state(cv)
    if blobs or layers or ids:
        run.problems.append("after every image is deleted and pruned: blobs %s, layers %s, images %s" % (
            blobs[:3], layers[:3], ids))


# ---- pulls and builds: what a kill leaves in the image store ----

def _images_listed(cv):
    """{id: names} of the images listed."""
    st, j = cv.api("GET", "/v1/images", timeout=HTTP_TIMEOUT)
    assert st == 200, (st, j)
    return {i["id"]: i["names"] for i in j["images"]}


def _helpers_done(cv):
    """Wait until the import lock is free. A cove-image helper (a pull's,
    an import's) is not coved: it goes on to its end after coved's kill,
    holding the lock, and stores what it fetched (no image names it: the
    index is coved's)."""
    fd = os.open(os.path.join(cv.data, "pool", "images", "import.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                 0o600)

    def free():
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    try:
        return wait_until(free, HTTP_TIMEOUT)
    finally:
        os.close(fd)


def _chain_ids(diff_ids):
    """The layer trees' names (chain ids, as oci_chain_id makes them)."""
    out = []
    for d in diff_ids:
        out.append(d if not out else "sha256:" + hashlib.sha256(("%s %s" % (out[-1], d)).encode()).hexdigest())
    return out


def _image_needs(cv):
    """The blobs and layer trees (hex names) the listed images need,
    read from their manifests and configs in the pool."""
    blobdir = os.path.join(cv.data, "pool", "images", "blobs", "sha256")

    def doc(digest):
        with open(os.path.join(blobdir, digest[7:]), "rb") as f:
            return json.load(f)
    blobs, trees = set(), set()
    for iid in _images_listed(cv):
        blobs.add(iid[7:])  # missing, if it is not there: not read further
        m = doc(iid) if os.path.exists(os.path.join(blobdir, iid[7:])) else None
        if m:
            blobs |= {m["config"]["digest"][7:]} | {layer["digest"][7:] for layer in m["layers"]}
        if m and os.path.exists(os.path.join(blobdir, m["config"]["digest"][7:])):
            trees |= {c[7:] for c in _chain_ids(doc(m["config"]["digest"])["rootfs"]["diff_ids"])}
    return blobs, trees


def _pool_garbage(run, what, spare=None):
    """Once the helpers are done: every blob whole (its bytes are its
    name), and no blob or layer tree (a scratch one included) but those
    the listed images need, after a prune collected; with spare (blobs,
    trees: what an interrupted pull may have stored whole, for the next
    pull of its image to find), nothing else, with no prune."""
    cv = run.cv
    if not _helpers_done(cv):
        run.problems.append("%s: the import lock is still held after %d s" % (what, HTTP_TIMEOUT))
    blobdir = os.path.join(cv.data, "pool", "images", "blobs", "sha256")
    state = {}

    def clean():  # a sandbox being deleted keeps its tree a moment
        if spare is None:
            st, j = cv.api("POST", "/v1/images/prune", {"all": False}, timeout=HTTP_TIMEOUT)
            if st != 200 or j["deleted"]:
                run.problems.append("%s: a prune of unnamed images answered %s %s" % (what, st, j))
        need_blobs, need_trees = _image_needs(cv)
        blobs, trees, _ = ti.pool_state(cv)
        extra_blobs, extra_trees = spare or (set(), set())
        state["extra"] = sorted(set(blobs) - need_blobs - extra_blobs) + sorted(set(trees) - need_trees - extra_trees)
        state["missing"] = sorted(need_blobs - set(blobs)) + sorted(need_trees - set(trees))
        return not state["extra"] and not state["missing"]
    if not wait_until(clean, 10):
        run.problems.append("%s: in the image store, not needed: %s; missing: %s" % (
            what, state["extra"][:4], state["missing"][:4]))
    for name in os.listdir(blobdir):
        with open(os.path.join(blobdir, name), "rb") as f:
            if hashlib.sha256(f.read()).hexdigest() != name:
                run.problems.append("%s: blob %s is not whole" % (what, name[:12]))


# The CLI, as root, starts a coved of its own when it finds none: not while
# the test starts its own again after a kill.
CLI_ENV = {"COVE_NO_START": "1"}


def _failed_clearly(answer):
    """A CLI command that did not finish: an exit status and a message
    that says what happened (the stream cut short, coved not there)."""
    if not isinstance(answer, subprocess.CompletedProcess):
        return False
    err = answer.stderr.decode(errors="replace")
    return answer.returncode != 0 and re.search(r"stream ended early|coved at '[^']+': .", err) is not None


def pulls(run):
    """Pulls by the CLI from a loopback docker-registry, alternately of a
    new image and again of the one before (listed already, or what its
    interrupted pull stored). Acknowledged: the CLI printed the image's ID,
    which coved sends once the image is in its index. A pull not
    acknowledged failed with a clear message; its helper goes on (see
    _helpers_done), and what it stored only the next pull of the image
    uses, or a prune collects; a listed image runs."""
    cv = run.cv
    reg = imagekit.Registry()
    try:
        imgs = [ti.app_image("gzip", extra=b"pull %d\n" % k) for k in range((TRIALS + 1) // 2 + 1)]
        for k, img in enumerate(imgs):
            reg.push("crash/pull", str(k), img)

        def pull(k):
            return lambda: cv.cli("image", "pull", "%s/crash/pull:%d" % (reg.host, k), timeout=HTTP_TIMEOUT,
                                  env=CLI_ENV)
        new, again = run.span(pull(len(imgs) - 1)), run.span(pull(len(imgs) - 1))
        assert cv.api("DELETE", "/v1/images/" + imgs[-1].id)[0] == 200
        for i in range(TRIALS):
            k, img = i // 2, imgs[i // 2]
            ref = "%s/crash/pull:%d" % (reg.host, k)

            def check(answer, what):
                acked = isinstance(answer, subprocess.CompletedProcess) and answer.returncode == 0
                if acked and answer.stdout.decode().strip() != img.id:
                    run.problems.append("%s: the pull printed %s, not %s" % (what, answer.stdout, img.id))
                if not acked and not _failed_clearly(answer):
                    run.problems.append("%s: the pull failed with no clear message: %s" % (what, answer))
                listed = _images_listed(cv)
                if acked and img.id not in listed:
                    run.problems.append("%s: acknowledged image %s is not listed" % (what, ref))
                if img.id not in listed and i % 2:  # twice cut short: a third pull, undisturbed, makes it
                    r = pull(k)()
                    if r.returncode != 0:
                        run.problems.append("%s: the pull fails after the restart: %s" % (what, r))
                    listed = _images_listed(cv)
                if img.id in listed:
                    if ref not in listed[img.id]:
                        run.problems.append("%s: %s is listed as %s" % (what, img.id, listed[img.id]))
                    _image_runs(run, ref, "/work/hello", "pull %d\n" % k, what)
                stored = ({d[7:] for d in img.blobs}, {c[7:] for c in _chain_ids([imagekit.sha(t) for t in img.tars])})
                _pool_garbage(run, what, None if i % 2 else stored)
            run.trial("image pull #%d (%s)" % (i, "again" if i % 2 else "new"), pull(k), again if i % 2 else new,
                      check)
    finally:
        reg.stop()
    for iid in _images_listed(cv):
        cv.api("DELETE", "/v1/images/" + iid)
    _pool_garbage(run, "after the pulled images' delete")


BUILD_DOCKERFILE = "FROM bb:1\nCOPY a.txt /x/\nRUN cat /x/a.txt > /x/run && echo ran >> /x/run\n"


def builds(run):
    """Builds by the CLI of a COPY and a RUN, each of a new a.txt (no step
    cached). Acknowledged: the CLI printed the image's ID. After the
    restart the image is listed whole (a sandbox of it reads what the RUN
    wrote) or not at all; no scratch folder, no RUN sandbox (Run.settled:
    subvolume, cgroups, mounts), no layer tree or blob but the listed
    images'; and the same build, run again, makes it."""
    cv = run.cv
    tb.base_image(cv)
    ctx = tempfile.mkdtemp(prefix="cove-crash-build-", dir="/var/tmp")
    images = os.path.join(cv.data, "pool", "images")
    try:
        with open(os.path.join(ctx, "Dockerfile"), "w") as f:
            f.write(BUILD_DOCKERFILE)

        def build(i):
            with open(os.path.join(ctx, "a.txt"), "w") as f:
                f.write("build %d\n" % i)
            return lambda: cv.cli("build", "-t", "crash-build:%d" % i, ctx, timeout=HTTP_TIMEOUT, env=CLI_ENV)
        span = run.span(build(TRIALS))
        assert cv.api("DELETE", "/v1/images/crash-build:%d" % TRIALS)[0] == 200
        for i in range(TRIALS):
            name, want = "docker.io/library/crash-build:%d" % i, "build %d\nran\n" % i

            def check(answer, what):
                acked = isinstance(answer, subprocess.CompletedProcess) and answer.returncode == 0
                if not acked and not _failed_clearly(answer):
                    run.problems.append("%s: the build failed with no clear message: %s" % (what, answer))
                listed = {n for names in _images_listed(cv).values() for n in names}
                if acked and name not in listed:
                    run.problems.append("%s: acknowledged image %s is not listed" % (what, name))
                if name in listed:
                    _image_runs(run, name, "/x/run", want, what)
                left = [os.path.join(d, n) for d in ("builds", "layers", "build-cache")
                        if os.path.isdir(os.path.join(images, d)) for n in os.listdir(os.path.join(images, d))
                        if d == "builds" or ".tmp" in n]
                if left:  # no prune needed for these: the start removes them
                    run.problems.append("%s: scratch left after the start: %s" % (what, left))
                _pool_garbage(run, what)
                if name not in listed:
                    r = build(i)()
                    if r.returncode != 0:
                        run.problems.append("%s: the same build again fails: %s" % (what, r))
                    else:
                        _image_runs(run, name, "/x/run", want, what)
            run.trial("build #%d" % i, build(i), span, check)
    finally:
        shutil.rmtree(ctx)
    for iid in _images_listed(cv):
        cv.api("DELETE", "/v1/images/" + iid)
    _pool_garbage(run, "after the built images' delete")


def sandbox_delete(run):
    cv = run.cv
    span = run.span(("DELETE", "/v1/sandboxes/" + cv.create(name="span"), None, None))
    for i in range(TRIALS):
        sid = cv.create(name="del%d" % i)
        run.seen.add(sid)

        def check(answer, what):
            if _acked(answer, 200) and sid in _listed(cv, "sandboxes"):
                run.problems.append("%s: deleted %s is listed" % (what, sid))
            cv.api("DELETE", "/v1/sandboxes/" + sid)
        run.trial("sandbox delete #%d" % i, ("DELETE", "/v1/sandboxes/" + sid, None, None), span, check)


PATHS = [files_put, files_put_new, files_delete, files_mkdir_move_chmod, files_tar, portable_import,
         snapshot_delete, history, templates, ports_network_sessions, images, pulls, builds,
         sandbox_delete]


def test_sigkill_during_each_write_path(_cv):
    seed = int(os.environ.get("COVE_CRASH_SEED", time.time()))
    only = os.environ.get("COVE_CRASH_WRITES_ONLY", "")  # a path's name, to run it alone
    cv = covetest.Coved(env=NO_CRIU).start()
    t0, times = time.time(), []
    try:
        run = Run(cv, random.Random(seed))
        for path in PATHS:
            if only and only != path.__name__:
                continue
            t = time.time()
            path(run)
            times.append("%s %.0fs" % (path.__name__, time.time() - t))
            print("# " + times[-1], flush=True)
            if len(run.problems) > 10:
                break
        print("# %d kills per write path in %.0f s (%s), COVE_CRASH_SEED=%d, %d starts refused at first" % (
            TRIALS, time.time() - t0, ", ".join(times), seed, len(run.refusals)))
        assert not run.problems, "%d problems (COVE_CRASH_SEED=%d):\n  %s" % (
            len(run.problems), seed, "\n  ".join(run.problems))
    finally:
        cv.teardown()


def test_put_cut_short_by_the_client_keeps_the_old_file(cv):
    """The client closes the connection after half the body: the old file
    is byte-identical, with its mode and owner, and nothing is left beside
    it; a whole PUT then replaces it, keeping mode and owner."""
    sid = cv.create()
    try:
        old = os.urandom(1 << 20)
        assert tf.put(cv, sid, "/srv/cut/f", old, parents="1")[0] == 201
        _sh(cv, sid, "chown 1234:4321 /srv/cut/f && chmod 4750 /srv/cut/f")
        for frac in (0, 0.5, 0.99):
            s = socket.socket(socket.AF_UNIX)
            s.connect(cv.socket)
            new = os.urandom(1 << 20)
            s.sendall(b"PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (
                tf._url(sid, path="/srv/cut/f").encode(), len(new)) + new[:int(len(new) * frac)])
            time.sleep(0.2)
            s.close()
            # coved sees the close and drops the body; the file never changes.
            wait_until(lambda: _sh(cv, sid, "ls -A /srv/cut") == "f\n", 5)
            assert _file(cv, sid, "/srv/cut/f") == _sha(old), frac
            assert _sh(cv, sid, "ls -A /srv/cut; stat -c '%a %u %g' /srv/cut/f") == "f\n4750 1234 4321\n"
        new = os.urandom(1 << 20)
        assert tf.put(cv, sid, "/srv/cut/f", new)[0] == 200
        assert _file(cv, sid, "/srv/cut/f") == _sha(new)
        # chown clears setuid: the mode is applied after the owner
        got = _sh(cv, sid, "ls -A /srv/cut; stat -c '%a %u %g' /srv/cut/f")
        assert got == "f\n4750 1234 4321\n", got
        # an explicit mode still applies; a file with hard links is written in place, so all see it
        assert tf.put(cv, sid, "/srv/cut/f", b"m", mode="0600")[0] == 200
        assert _sh(cv, sid, "stat -c '%a %u %g' /srv/cut/f") == "600 1234 4321\n"
        _sh(cv, sid, "ln /srv/cut/f /srv/cut/hard")
        assert tf.put(cv, sid, "/srv/cut/f", b"both")[0] == 200
        assert _sh(cv, sid, "cat /srv/cut/hard") == "both"
        # a user who may write the file but not its folder writes it in place
        _sh(cv, sid, "mkdir /srv/ro && echo old > /srv/ro/f && chown nobody /srv/ro/f")
        assert tf.put(cv, sid, "/srv/ro/f", b"new", user="nobody")[0] == 200
        assert _sh(cv, sid, "cat /srv/ro/f; stat -c %U /srv/ro/f") == "newnobody\n"
        # a watch sees a new file made and a replaced one written, never
        # the replacement's own names
        import test_watch
        w = test_watch.Watch(cv, sid, "/srv/ro")
        try:
            assert tf.put(cv, sid, "/srv/ro/g", b"one")[0] == 201
            assert tf.put(cv, sid, "/srv/ro/g", b"two")[0] == 200
            assert tf.put(cv, sid, "/srv/ro/end", b"")[0] == 201
            got = [(e["type"], e["name"]) for e in w.until("end")]
            assert got[0] == ("create", "g") and ("write", "g") in got[1:], got
            assert all(n in ("g", "end") for _, n in got), got
        finally:
            w.close()
        # a symlink is followed to its target, which is replaced; the link stays
        _sh(cv, sid, "ln -s cut/f /srv/link")
        assert tf.put(cv, sid, "/srv/link", b"via link")[0] == 200
        assert _sh(cv, sid, "readlink /srv/link; cat /srv/cut/f") == "cut/f\nvia link"
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)

"""The escape suite (issue 16, item 4): build/cove-probe runs "escape" inside
a sandbox, one attempt per known container-escape class (tests/probe/escape.c),
each of which must fail; the host side checks it is unchanged: the runtime's
binaries, the kernel's loaded modules, coved healthy and
its pid out of the sandbox's reach. And the Files API and cove cp racing a
folder swapped for a symlink to / never reach the host."""
import hashlib
import json
import os
import shutil
import tempfile
import threading

import test_files as tf
from test_isolation import _assert_probe_ok, _healthy, _probe, _sandbox

BUILD = os.environ.get("COVE_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))


def _digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _modules():
    try:
        with open("/proc/modules") as f:
            return sorted(line.split()[0] for line in f)
    except OSError:
        return None


def _host_state():
    return {
        "binaries": {b: _digest(os.path.join(BUILD, b)) for b in ("coved", "cove-init", "cove-probe")},
        "modules": _modules(),
    }


MUST = ["not-writable-/proc/self/exe", "not-writable-/proc/1/exe", "userfaultfd", "io_uring_setup", "move_mount",
        "fsmount", "mount_setattr", "mount-cgroup-v1", "keyctl-join-session-keyring", "request_key",
        "cgroup-release_agent", "mknod-char-1:3", "mknod-block-8:0", "socket-families-tried",
        "socket-AF_VSOCK-refused", "TIOCSTI-fd-0", "TIOCLINUX-fd-0", "no-open-/dev/console", "no-open-/dev/tty0"]


def _outside(pid):
    return ["proc-root-of-%d-absent" % pid, "proc-cwd-of-%d-absent" % pid, "proc-exe-of-%d-absent" % pid,
            "process_vm_readv-%d" % pid, "pidfd_open-%d" % pid]


def test_escape_attempts_fail(cv):
    before = _host_state()
    with _sandbox(cv) as sid:
        r = _probe(cv, sid, "escape", cv.pid(), os.getpid(), timeout=60)
        _assert_probe_ok(r, MUST + _outside(cv.pid()) + _outside(os.getpid()))
        # As an unprivileged user of the sandbox too.
        r = _probe(cv, sid, "escape", cv.pid(), user="nobody", timeout=60)
        _assert_probe_ok(r, MUST + _outside(cv.pid()))
        _healthy(cv)
    assert _host_state() == before


# ---- symlink and rename races against the Files API and cove cp ----

RACE_SECONDS = 20
HOST_CANARY = b"host canary\n"


def _race_ops(cv, sid, inner, host, outcomes, stop):
    """Every host-side path into the swapped folder, in turn, until stop:
    inner is the sandbox path of host's twin under the folder."""
    cp_src = os.path.join(host, "..", os.path.basename(host) + "-cp-src")
    with open(cp_src, "wb") as f:
        f.write(b"from cove cp\n")
    cp_out = host + "-cp-out"
    upload = tf._tar([("canary", "file", b"from a tar\n", 0o644), ("tar-written", "file", b"t\n", 0o644)])
    n = 0
    while not stop.is_set():
        n += 1
        st, body = tf.get(cv, sid, inner + "/canary")
        outcomes.append(("get", st, body))
        outcomes.append(("put", tf.put(cv, sid, inner + "/canary", b"from a put\n")[0], b""))
        outcomes.append(("put-new", tf.put(cv, sid, inner + "/written-%d" % n, b"w\n")[0], b""))
        st, j = cv.api("GET", tf._url(sid, path=inner, depth=2))
        outcomes.append(("list", st, json.dumps(j).encode()))
        st, body = tf.get_tar(cv, sid, inner)
        outcomes.append(("tar-get", st, body))
        outcomes.append(("tar-put", tf.put_tar(cv, sid, inner, upload)[0], b""))
        if n % 4 == 0:  # the CLI: a process each, both ways
            r = cv.cli("cp", cp_src, "%s:%s/canary" % (sid, inner))
            outcomes.append(("cp-in", r.returncode, r.stderr))
            r = cv.cli("cp", "%s:%s/canary" % (sid, inner), cp_out)
            body = open(cp_out, "rb").read() if r.returncode == 0 else r.stderr
            outcomes.append(("cp-out", r.returncode, body))
    os.unlink(cp_src)
    if os.path.exists(cp_out):
        os.unlink(cp_out)


def _host_listing(host):
    return sorted(os.listdir(host))


def test_files_race_with_a_folder_swapped_for_root(cv):
    """In the sandbox, the probe swaps /tmp/rx/d with a symlink to / (rename
    exchange, in a tight loop) for 20 s while this side reads, writes, lists
    and tars into /tmp/rx/d<HOST>, and cove cp copies both ways: <HOST> is a
    folder of this host with a canary. Resolved on the host, the symlink's
    side would be the canary itself. Nothing read is ever the host's, and
    the host folder is unchanged."""
    host = tempfile.mkdtemp(prefix="cove-race-", dir="/var/tmp")
    try:
        with open(os.path.join(host, "canary"), "wb") as f:
            f.write(HOST_CANARY)
        with open(os.path.join(host, "host-only-marker"), "wb") as f:
            f.write(b"x")
        before = _host_listing(host), os.stat(os.path.join(host, "canary")).st_mtime_ns
        with _sandbox(cv) as sid:
            # Both sides of the swap hold a twin of host, with its own canary.
            cv.exec(sid, ["sh", "-c", "mkdir -p /tmp/rx/d%s %s && echo folder side > /tmp/rx/d%s/canary && "
                          "echo root side > %s/canary" % (host, host, host, host)])
            outcomes, stop, result = [], threading.Event(), {}
            ops = threading.Thread(target=_race_ops, args=(cv, sid, "/tmp/rx/d" + host, host, outcomes, stop))
            ops.start()
            try:
                result["r"] = _probe(cv, sid, "swap", "/tmp/rx/d", RACE_SECONDS, timeout=RACE_SECONDS + 60)
            finally:
                stop.set()
                ops.join()
            r = result["r"]
            _assert_probe_ok(r, ["swap"])
            swaps = [int(line.split()[1]) for line in r["stdout"].splitlines() if line.startswith("swaps ")]
            assert swaps and swaps[0] > 1000, r
            _healthy(cv)
        for kind, st, body in outcomes:
            assert HOST_CANARY not in body and b"host-only-marker" not in body, (kind, st, body[:300])
            assert not (isinstance(st, int) and st >= 500), (kind, st, body[:300])
        kinds = {kind for kind, _, _ in outcomes}
        assert kinds == {"get", "put", "put-new", "list", "tar-get", "tar-put", "cp-in", "cp-out"}, kinds
        # The requests went through while it swapped: each kind succeeded.
        ok = {kind for kind, st, _ in outcomes if st in (0, 200, 201)}
        assert ok == kinds, (ok, len(outcomes))
        print("# %d host operations against %d swaps" % (len(outcomes), swaps[0]))
        with open(os.path.join(host, "canary"), "rb") as f:
            assert f.read() == HOST_CANARY
        assert (_host_listing(host), os.stat(os.path.join(host, "canary")).st_mtime_ns) == before
    finally:
        shutil.rmtree(host, ignore_errors=True)


# ---- writing host files through an idmapped mount's ids ----

HOST_FILE = "/usr/bin/env"  # the host's /usr is an idmapped, read-only lower layer


def _fingerprint(path):
    st = os.stat(path)
    return _digest(path), st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ino


def _stat_as_nobody(path):
    """errno of a stat by host uid 65534 (0 when it can reach path)."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            os.stat(path)
        except OSError as e:
            code = e.errno
        os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_idmapped_ids_write_no_host_file(cv):
    """The sandbox's root owns the host's /usr through the idmapped mount
    (on disk uid 0 is its uid 0): writing, truncating, chmod (setuid),
    chown, xattrs, renaming and removing it change the sandbox's copy-up
    only, the host's file is byte for byte and inode for inode the same.
    A setuid-root file the sandbox makes is root's on disk: no host user
    but root can reach it (the pool is 0700)."""
    before = _fingerprint(HOST_FILE)
    with _sandbox(cv) as sid:
        inside = cv.exec(sid, ["sha256sum", HOST_FILE])["stdout"].split()[0]
        assert inside == before[0], "the sandbox does not see the host's " + HOST_FILE
        script = ("f=%s; id -u; stat -c '%%u %%g' $f; echo pwned >> $f; chmod 6777 $f; chown 1234:1234 $f; "
                  "setfattr -n user.cove -v x $f 2>/dev/null; truncate -s 1 $f; cp $f /tmp/keep; "
                  "mv $f $f.moved; rm -f $f.moved; chown 70000 /tmp/keep 2>&1 || echo chown-70000-refused; "
                  "cp /tmp/keep /tmp/suid && chown 0:0 /tmp/suid && chmod 4755 /tmp/suid && stat -c '%%a %%u' /tmp/suid"
                  % HOST_FILE)
        r = cv.exec(sid, ["sh", "-c", script])
        lines = r["stdout"].splitlines()
        assert lines[:2] == ["0", "0 0"], r  # root inside, and the host file is its root's
        assert "chown-70000-refused" in lines and lines[-1] == "4755 0", r
        assert cv.exec(sid, ["sh", "-c", "test -e %s || echo gone" % HOST_FILE])["stdout"] == "gone\n"
        upper = os.path.join(cv.data, "pool", "sandboxes", sid, "upper", "root")
        suid = os.path.join(upper, "tmp", "suid")
        st = os.stat(suid)
        assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o4755), st  # setuid root, on disk
        pool = os.stat(os.path.join(cv.data, "pool"))
        assert pool.st_uid == 0 and pool.st_mode & 0o077 == 0, oct(pool.st_mode)
        assert _stat_as_nobody(suid) == 13, suid  # EACCES
        _healthy(cv)
    assert _fingerprint(HOST_FILE) == before

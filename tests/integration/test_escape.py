"""The escape suite (issue 16, item 4): build/cove-probe runs "escape" inside
a sandbox, one attempt per known container-escape class (tests/probe/escape.c),
each of which must fail; the host side checks it is unchanged: the runtime's
binaries, the kernel's loaded modules, coved healthy and
its pid out of the sandbox's reach."""
import hashlib
import os

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

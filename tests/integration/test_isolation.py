"""Escape and limit tests, run from inside sandboxes: each copies the static
build/cove-probe (tests/probe/probe.c) into a sandbox and runs it there, and
checks what the host sees. Every probe line is "ok <name>[: detail]" or
"FAIL <name>: detail"; the tests also check that the probe's checks ran,
so a probe that printed nothing cannot pass."""
import base64
import contextlib
import glob
import os
import socket
import uuid

from covetest import PROBE, Coved, wait_until

UID_BASE_MIN = 0x10000000
IDENTITY_MAP = (0, 0, 4294967295)


def _probe_b64(cache={}):
    if "b64" not in cache:
        with open(PROBE, "rb") as f:
            cache["b64"] = base64.b64encode(f.read()).decode()
    return cache["b64"]


@contextlib.contextmanager
def _sandbox(cv, **spec):
    """A sandbox holding /tmp/probe, deleted afterwards."""
    sid = cv.create(**spec)
    try:
        r = cv.exec(sid, ["sh", "-c", "cat > /tmp/probe && chmod +x /tmp/probe"], stdin_b64=_probe_b64())
        assert r["exit_code"] == 0, r
        yield sid
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def _probe(cv, sid, *args, **kw):
    return cv.exec(sid, ["/tmp/probe"] + [str(a) for a in args], **kw)


def _checks(r):
    """{name: (ok, line)} from the probe's output."""
    out = {}
    for line in (r["stdout"] or "").splitlines():
        word, _, rest = line.partition(" ")
        if word in ("ok", "FAIL"):
            out[rest.split(": ", 1)[0]] = (word == "ok", line)
    return out


def _assert_probe_ok(r, must_run=()):
    """Every check passed, and each of must_run was among them."""
    checks = _checks(r)
    failed = [line for ok, line in checks.values() if not ok]
    assert not failed, "\n".join(failed) + "\n" + repr(r)
    assert r["exit_code"] == 0 and r["signal"] is None, r
    missing = [n for n in must_run if n not in checks]
    assert not missing, (missing, r["stdout"])
    return checks


def _sh(cv, sid, script, **kw):
    r = cv.exec(sid, ["sh", "-c", script], **kw)
    assert r["exit_code"] == 0, r
    return r["stdout"]


def _info(cv, sid):
    st, j = cv.api("GET", "/v1/sandboxes/" + sid)
    assert st == 200, (st, j)
    return j


def _status_ids(pid, key):
    """The four ids of the "Uid:" or "Gid:" line of /proc/<pid>/status."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return [int(x) for x in line.split()[1:]]
    raise AssertionError("no %s in /proc/%d/status" % (key, pid))


def _id_map(text):
    return [tuple(int(x) for x in line.split()) for line in text.splitlines() if line.strip()]


def _host_pid_of(init_pid, inner_pid):
    """The host pid of the sandbox process that is inner_pid in the sandbox
    of init_pid (same pid namespace, last NSpid field)."""
    ns = os.readlink("/proc/%d/ns/pid" % init_pid)
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.readlink("/proc/%s/ns/pid" % d) != ns:
                continue
            with open("/proc/%s/status" % d) as f:
                nspid = [line.split()[1:] for line in f if line.startswith("NSpid:")][0]
        except (OSError, IndexError):
            continue
        if int(nspid[-1]) == inner_pid:
            return int(d)
    return None


def _healthy(cv):
    st, j = cv.api("GET", "/v1/health")
    assert st == 200 and j["status"] == "ok", (st, j)
    assert cv.proc.poll() is None, "coved exited"


def test_host_processes_invisible(cv):
    with _sandbox(cv) as sid:
        init_pid = _info(cv, sid)["init_pid"]
        # /proc holds the sandbox's own processes: cove-init, sh and ls.
        pids = sorted(int(p) for p in _sh(cv, sid, "ls /proc").split() if p.isdigit())
        assert pids[0] == 1 and len(pids) <= 3, pids
        assert _sh(cv, sid, "cat /proc/1/cmdline") == "cove-init\0"
        ps = [line.split(None, 1) for line in _sh(cv, sid, "ps -e -o pid=,comm=").splitlines()]
        comms = {c.strip() for _, c in ps}
        assert len(ps) <= 3 and comms <= {"memfd:cove-init", "cove-init", ".cove-init", "sh", "ps"}, ps
        # Neither coved nor this test runner exists inside, nor the
        # sandbox's own init under its host pid.
        for pid in (cv.pid(), os.getpid(), init_pid):
            out = _sh(cv, sid, "[ -e /proc/%d ] && echo present || echo absent" % pid)
            assert out == "absent\n" and pid not in pids, (pid, out, pids)
        # And from the host: the sandbox's pid 1 is init_pid, in a pid
        # namespace of its own.
        with open("/proc/%d/status" % init_pid) as f:
            nspid = [line.split()[1:] for line in f if line.startswith("NSpid:")][0]
        assert nspid == [str(init_pid), "1"], nspid
        assert os.readlink("/proc/%d/ns/pid" % init_pid) != os.readlink("/proc/self/ns/pid")


def test_uid_map_and_host_uid(cv):
    with _sandbox(cv) as sid:
        info = _info(cv, sid)
        base, init_pid = info["uid_base"], info["init_pid"]
        assert base >= UID_BASE_MIN, info
        for f in ("uid_map", "gid_map"):
            m = _id_map(_sh(cv, sid, "cat /proc/self/" + f))
            assert m == [(0, base, 65536)], (f, m)
            assert IDENTITY_MAP not in m and all(outside != 0 for _, outside, _ in m), (f, m)
        _assert_probe_ok(_probe(cv, sid, "status"), ["uid_map-not-identity", "uid_map-excludes-host-0"])
        # On the host, the sandbox's root is the unprivileged uid base: its
        # init, and a command it runs.
        assert _status_ids(init_pid, "Uid") == [base] * 4
        assert _status_ids(init_pid, "Gid") == [base] * 4
        inner = int(_sh(cv, sid, "sleep 60 </dev/null >/dev/null 2>&1 & echo $!"))
        host_pid = wait_until(lambda: _host_pid_of(init_pid, inner), timeout=5)
        assert host_pid, inner
        assert _status_ids(host_pid, "Uid") == [base] * 4
        assert os.readlink("/proc/%d/ns/user" % host_pid) != os.readlink("/proc/self/ns/user")
        # A non-root user inside is base + its uid outside.
        inner = int(_sh(cv, sid, "sleep 60 </dev/null >/dev/null 2>&1 & echo $!", user="nobody"))
        host_pid = wait_until(lambda: _host_pid_of(init_pid, inner), timeout=5)
        assert host_pid and _status_ids(host_pid, "Uid") == [base + 65534] * 4


def test_privileged_syscalls_refused(cv):
    with _sandbox(cv) as sid:
        # coved's and this runner's pids do not exist in the sandbox: no
        # kill(pid, 0), no ptrace.
        r = _probe(cv, sid, "syscalls", cv.pid(), os.getpid())
        names = ["mount", "umount2", "unshare(CLONE_NEWUSER)", "unshare(CLONE_NEWNS)", "clone(CLONE_NEWUSER)",
                 "init_module", "finit_module", "kexec_load", "bpf", "keyctl", "add_key", "perf_event_open",
                 "open_by_handle_at", "setns", "pivot_root", "reboot", "swapon", "fsopen",
                 "pid-%d-absent" % cv.pid(), "ptrace-attach-%d" % cv.pid(), "pid-%d-absent" % os.getpid()]
        _assert_probe_ok(r, names)
        # The same for an unprivileged user inside.
        _assert_probe_ok(_probe(cv, sid, "syscalls", cv.pid(), user="nobody"), names[:4])


def test_no_new_privs_seccomp_capabilities(cv):
    with _sandbox(cv) as sid:
        must = ["NoNewPrivs", "Seccomp", "CapBnd-lacks-CAP_SYS_ADMIN", "CapBnd-lacks-CAP_SYS_MODULE",
                "CapBnd-lacks-CAP_SYS_PTRACE", "CapBnd-lacks-CAP_NET_ADMIN"]
        _assert_probe_ok(_probe(cv, sid, "status"), must)
        _assert_probe_ok(_probe(cv, sid, "status", user="nobody"), must)
        # A set-user-ID root copy of the probe, run by nobody, stays nobody
        # (no_new_privs; the root filesystem itself is not nosuid).
        _sh(cv, sid, "cp /tmp/probe /tmp/probe-suid && chmod 4755 /tmp/probe-suid")
        _assert_probe_ok(cv.exec(sid, ["/tmp/probe-suid", "status"], user="nobody"), ["no-setid-gain"])


def test_kernel_interfaces_read_only(cv):
    with _sandbox(cv) as sid:
        r = _probe(cv, sid, "fs")
        _assert_probe_ok(r, ["not-writable-/proc/sysrq-trigger", "not-writable-/proc/sys/kernel/hostname",
                             "not-writable-/sys/class/net/lo/mtu", "cannot-create-/sys/cove-probe",
                             "masked-/proc/kcore", "masked-/proc/keys", "dev-no-block-devices", "mknod-mem"])
        mounts = [line.split() for line in _sh(cv, sid, "cat /proc/self/mounts").splitlines()]
        sys_opts = [m[3].split(",") for m in mounts if m[1] == "/sys"]
        assert sys_opts and all("ro" in o for o in sys_opts), sys_opts
        r = cv.exec(sid, ["sh", "-c", "echo 1 > /proc/sysrq-trigger || echo refused; "
                                      "echo x > /sys/kernel/mm/transparent_hugepage/enabled || echo refused"])
        assert r["stdout"] == "refused\nrefused\n", r


def test_memory_hog_is_oom_killed(cv):
    with _sandbox(cv, memory="64M") as sid, _sandbox(cv) as other:
        r = _probe(cv, sid, "hog", 200, timeout=60)
        assert r["signal"] == "KILL" and r["exit_code"] is None and not r["timed_out"], r
        progress = [int(line.split()[1]) for line in r["stdout"].splitlines() if line.startswith("allocated")]
        assert progress and progress[-1] < 200 and "FAIL" not in r["stdout"], r
        _healthy(cv)
        assert cv.exec(other, ["echo", "fine"])["stdout"] == "fine\n"
        # The OOM kill took the hog, not the sandbox: its init still spawns.
        assert cv.exec(sid, ["echo", "alive"])["stdout"] == "alive\n"
        assert _info(cv, sid)["state"] == "running"


def test_fork_bomb_is_capped(cv):
    with _sandbox(cv, pids=64) as sid, _sandbox(cv) as other:
        r = _probe(cv, sid, "forkbomb", 1000, timeout=60)
        _assert_probe_ok(r, ["fork-fails"])
        forks = [int(line.split()[1]) for line in r["stdout"].splitlines() if line.startswith("forks ")]
        assert forks and 10 <= forks[0] < 64, r
        assert "EAGAIN" in _checks(r)["fork-fails"][1], r
        _healthy(cv)
        assert cv.exec(other, ["echo", "fine"])["stdout"] == "fine\n"
        # The pids are given back: the sandbox forks again.
        out = _sh(cv, sid, "for i in 1 2 3 4 5 6 7 8; do sleep 1 & done; wait; ps -e -o pid= | wc -l")
        assert int(out) <= 4, out


def test_environment_of_coved_not_inherited(cv):
    name, value = "COVE_IT_ISOLATION_SECRET", "leak-" + uuid.uuid4().hex
    os.environ[name] = value
    fresh = Coved()
    try:
        fresh.start()
        with open("/proc/%d/environ" % fresh.pid(), "rb") as f:
            assert value.encode() in f.read()  # coved does have it
        sid = fresh.create()
        out = _sh(fresh, sid, "env; echo; cat /proc/[0-9]*/environ | tr '\\0' '\\n'")
        assert value not in out and name not in out, out
        assert name not in _sh(fresh, sid, "env", env={"FOO": "bar"})
    finally:
        del os.environ[name]
        fresh.cleanup()


def test_hostname_stays_inside(cv):
    host = socket.gethostname()
    with _sandbox(cv) as sid, _sandbox(cv) as other:
        assert _sh(cv, sid, "hostname") == sid + "\n"
        r = cv.exec(sid, ["sh", "-c", "hostname cove-it-foo"])
        r2 = cv.exec(sid, ["sh", "-c", "echo cove-it-foo > /proc/sys/kernel/hostname"])
        assert socket.gethostname() == host
        with open("/proc/sys/kernel/hostname") as f:
            assert f.read().strip() == host
        if r["exit_code"] != 0 and r2["exit_code"] != 0:
            assert _sh(cv, sid, "hostname") == sid + "\n"
        assert _sh(cv, other, "hostname") == other + "\n"


def test_host_files_not_visible(cv):
    tag = "cove-it-marker-" + uuid.uuid4().hex[:12]
    markers = []
    for d in ("/root", "/work", "/var/tmp", "/tmp", "/home"):
        if os.path.isdir(d):
            p = os.path.join(d, tag)
            with open(p, "w") as f:
                f.write("host secret\n")
            markers.append(p)
    secrets = ["/etc/shadow", "/etc/gshadow", "/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ecdsa_key",
               "/etc/ssh/ssh_host_ed25519_key"] + glob.glob("/etc/ssh/ssh_host_*_key")
    # Where coved and the tests live.
    others = [cv.data, cv.socket, os.path.dirname(PROBE), os.path.dirname(os.path.abspath(__file__))]
    try:
        assert os.path.exists("/etc/shadow")
        with _sandbox(cv) as sid:
            paths = markers + sorted(set(secrets)) + others
            r = _probe(cv, sid, "fs", *paths)
            _assert_probe_ok(r, ["host-path-" + p for p in paths])
            out = _sh(cv, sid, "ls -A /root /home /var/tmp /tmp; grep -rl '%s' /etc /var 2>/dev/null; true" % tag)
            assert tag not in out, out
    finally:
        for p in markers:
            os.unlink(p)


def test_new_host_etc_secret_not_readable(cv):
    # The host image masks /etc entries that are not world-readable; one
    # that appears after coved built the image is a secret all the same.
    path = "/etc/cove-it-secret-" + uuid.uuid4().hex[:12]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, b"host secret\n")
        os.close(fd)
        with _sandbox(cv) as sid:
            _assert_probe_ok(_probe(cv, sid, "fs", path), ["host-path-" + path])
    finally:
        os.unlink(path)


def test_sandboxes_isolated_from_each_other(cv):
    with _sandbox(cv) as a, _sandbox(cv) as b:
        ia, ib = _info(cv, a), _info(cv, b)
        # Disjoint id ranges.
        assert abs(ia["uid_base"] - ib["uid_base"]) >= 65536, (ia, ib)
        _sh(cv, a, "echo from-a > /tmp/cove-it-a; echo from-a > /dev/shm/cove-it-a; echo from-a > /var/tmp/cove-it-a")
        assert _sh(cv, b, "ls -A /tmp /dev/shm /var/tmp | grep cove-it-a || echo none") == "none\n"
        # A process of a is invisible in b.
        inner = int(_sh(cv, a, "sleep 60 </dev/null >/dev/null 2>&1 & echo $!"))
        assert wait_until(lambda: _host_pid_of(ia["init_pid"], inner), timeout=5)
        assert "sleep" in _sh(cv, a, "ps -e -o comm=")
        assert "sleep" not in _sh(cv, b, "ps -e -o comm=")
        # An abstract unix socket of a (its network namespace) cannot be
        # reached from b.
        addr = "cove-it-abstract-" + uuid.uuid4().hex[:8]
        listen = ("import socket,time\ns=socket.socket(socket.AF_UNIX)\ns.bind('\\0%s')\ns.listen(1)\n"
                  "open('/tmp/listening','w').close()\ntime.sleep(60)\n" % addr)
        cv.exec(a, ["sh", "-c", "python3 -c \"$0\" </dev/null >/dev/null 2>&1 &", listen])
        assert wait_until(lambda: cv.exec(a, ["test", "-e", "/tmp/listening"])["exit_code"] == 0, timeout=10)
        connect = ("import socket\ns=socket.socket(socket.AF_UNIX)\n"
                   "try:\n  s.connect('\\0%s'); print('connected')\nexcept OSError as e: print('refused', e)\n" % addr)
        assert cv.exec(a, ["python3", "-c", connect])["stdout"].startswith("connected")  # it is there
        assert cv.exec(b, ["python3", "-c", connect])["stdout"].startswith("refused")
        # Separate IPC namespaces: a SysV segment of a is not listed in b.
        _sh(cv, a, "ipcmk -M 4096")
        segments = lambda sid: [l for l in _sh(cv, sid, "ipcs -m").splitlines() if l.startswith("0x")]  # noqa: E731
        assert len(segments(a)) == 1 and segments(b) == [], (segments(a), segments(b))


def test_commands_inherit_no_open_files(cv):
    # Whatever a command holds beyond stdio came from cove-init, hence
    # from coved, and is shared with whatever else holds it.
    with _sandbox(cv) as sid:
        _assert_probe_ok(_probe(cv, sid, "fds"), ["no-inherited-fds"])


def test_no_open_file_shared_between_sandboxes(cv):
    # If two sandboxes hold the same open file, one can signal the other
    # through its offset: a sets it, b reads it.
    seek = ("import os\nfor fd in range(3, 64):\n  try: os.lseek(fd, 4242, os.SEEK_SET)\n  except OSError: pass\n")
    tell = ("import os\nfor fd in range(3, 64):\n  try: print(fd, os.lseek(fd, 0, os.SEEK_CUR), os.readlink('/proc/self/fd/%d' % fd))\n"
            "  except OSError: pass\n")
    with _sandbox(cv) as a, _sandbox(cv) as b:
        cv.exec(a, ["python3", "-c", seek])
        out = cv.exec(b, ["python3", "-c", tell])["stdout"]
        assert " 4242 " not in out, out


def test_network_none_only_loopback(cv):
    with _sandbox(cv, network="none") as sid:
        lines = _sh(cv, sid, "cat /proc/net/dev").splitlines()[2:]
        assert [line.split(":")[0].strip() for line in lines] == ["lo"], lines
        assert _sh(cv, sid, "ls /sys/class/net").split() == ["lo"]
        assert len(_sh(cv, sid, "cat /proc/net/route").splitlines()) <= 1  # the header only
        # Neither the host's loopback TCP nor its abstract unix sockets.
        tcp = socket.socket()
        tcp.bind(("127.0.0.1", 0))
        tcp.listen(1)
        abstract = socket.socket(socket.AF_UNIX)
        name = "cove-it-host-" + uuid.uuid4().hex[:8]
        abstract.bind("\0" + name)
        abstract.listen(1)
        try:
            code = ("import socket\nfor fam, addr in ((socket.AF_INET, ('127.0.0.1', %d)), (socket.AF_UNIX, '\\0%s')):\n"
                    "  s = socket.socket(fam)\n  s.settimeout(3)\n"
                    "  try:\n    s.connect(addr); print('connected')\n  except OSError as e: print('refused', e)\n"
                    % (tcp.getsockname()[1], name))
            out = cv.exec(sid, ["python3", "-c", code])["stdout"]
            assert [line.split()[0] for line in out.splitlines()] == ["refused", "refused"], out
        finally:
            tcp.close()
            abstract.close()


def test_overlay_writes_stay_inside(cv):
    tag = "cove-test-marker-" + uuid.uuid4().hex[:8]
    with open("/usr/lib/os-release", "rb") as f:
        os_release = f.read()
    with _sandbox(cv) as sid, _sandbox(cv) as other:
        _sh(cv, sid, "echo x > /usr/local/bin/%s && echo x > /etc/%s && echo x > /opt/%s && "
                     "echo hacked >> /usr/lib/os-release && rm /usr/bin/%s 2>/dev/null; "
                     "cat /usr/local/bin/%s /etc/%s" % (tag, tag, tag, "true", tag, tag))
        assert "hacked" in _sh(cv, sid, "cat /usr/lib/os-release")
        for d in ("/usr/local/bin", "/etc", "/opt"):
            assert not os.path.exists(os.path.join(d, tag)), d
        with open("/usr/lib/os-release", "rb") as f:
            assert f.read() == os_release
        assert os.path.exists("/usr/bin/true")
        assert _sh(cv, other, "ls /usr/local/bin /etc /opt | grep %s || echo none" % tag) == "none\n"
        assert "hacked" not in _sh(cv, other, "cat /usr/lib/os-release")


def test_init_cannot_be_hijacked(cv):
    # cove-init holds the connection to coved: the sandbox's own processes
    # (same uid as init) must not ptrace it or take its fds.
    script = ("import ctypes, os\n"
              "libc = ctypes.CDLL(None, use_errno=True)\n"
              "pidfd = libc.syscall(434, 1, 0)\n"
              "got = libc.syscall(438, pidfd, 3, 0) if pidfd >= 0 else -1\n"
              "print('getfd', got, ctypes.get_errno())\n"
              "print('attach', libc.ptrace(16, 1, 0, 0), ctypes.get_errno())\n"
              "try:\n  os.readlink('/proc/1/fd/3'); print('readlink ok')\n"
              "except OSError as e: print('readlink', e.errno)\n")
    with _sandbox(cv) as sid:
        out = cv.exec(sid, ["python3", "-c", script])["stdout"].split("\n")
        assert out[0] == "getfd -1 1", out  # EPERM
        assert out[1].startswith("attach -1 "), out
        assert out[2].startswith("readlink ") and out[2] != "readlink ok", out

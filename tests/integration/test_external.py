"""The host backend: {"isolation": "external"} gives a sandbox whose
workspace is a real folder on the host (its subvolume under the pool) and
whose cove-init is a plain host process there: no namespaces, no seccomp,
root on the host, only its cgroups around it. Exec, background processes,
sessions and the Files API work through it as in an isolated sandbox; Files
API paths stay inside the workspace; the environment filter still applies
unless inherit_env asks for coved's own; snapshots, forks and restores take
the workspace; coved re-attaches after a SIGKILL. Without "external"
nothing changes."""
import os
import signal
import socket
import time

import covetest
from covetest import cgroup_dirs, cgroup_procs, wait_until


def _external(cv, **spec):
    spec["isolation"] = "external"
    st, j = cv.api("POST", "/v1/sandboxes", spec)
    assert st == 201, (st, j)
    assert j["isolation"] == "external" and j["image"] == "" and j["uid_base"] == 0, j
    assert j["workspace"] == os.path.join(cv.data, "pool", "sandboxes", j["id"]), j
    return j


def _read(path):
    with open(path) as f:
        return f.read()


def _running(pid):
    """pid exists and is not a zombie (one whose parent, the host's init
    here, has not reaped it yet)."""
    try:
        return " Z " not in _read("/proc/%d/stat" % pid).rsplit(")", 1)[1][:3]
    except OSError:
        return False


def _ids(cv):
    return {s["id"] for s in cv.api("GET", "/v1/sandboxes")[1]["sandboxes"]}


def _delete(cv, sid):
    assert cv.api("DELETE", "/v1/sandboxes/" + sid)[0] == 200


def test_without_external_it_stays_isolated(cv):
    host_init = _read("/proc/1/comm")
    for spec in ({}, {"isolation": "isolated"}, {"isolation": None}):
        st, j = cv.api("POST", "/v1/sandboxes", spec)
        assert st == 201, (st, j)
        assert j["isolation"] == "isolated" and j["workspace"] is None and not j["inherit_env"], j
        assert j["image"] == "host" and j["uid_base"] >= 0x10000000, j
        r = cv.exec(j["id"], ["sh", "-c", "cat /proc/1/comm; hostname; pwd"])
        assert r["exit_code"] == 0 and r["stdout"] != host_init, r
        assert r["stdout"].split("\n")[1] == j["id"] and r["stdout"].split("\n")[2] == "/root", r
        _delete(cv, j["id"])


def test_bad_requests_change_nothing(cv):
    before, dirs = _ids(cv), cv.sandbox_dirs()
    for body, words in (({"isolation": "host"}, "'isolation' must be"),
                        ({"isolation": "EXTERNAL"}, "'isolation' must be"),
                        ({"isolation": ""}, "'isolation' must be"),
                        ({"isolation": 1}, "'isolation' must be a string"),
                        ({"isolation": ["external"]}, "'isolation' must be a string"),
                        ({"inherit_env": True}, "'inherit_env' is only for"),
                        ({"isolation": "isolated", "inherit_env": True}, "'inherit_env' is only for"),
                        ({"isolation": "external", "inherit_env": "yes"}, "'inherit_env' must be a boolean"),
                        ({"isolation": "external", "image": "host"}, "no 'image'"),
                        ({"isolation": "external", "cwd": "relative"}, "'cwd' must be an absolute path"),
                        ({"isolation": "external", "memory": "1M"}, "'memory'")):
        st, j = cv.api("POST", "/v1/sandboxes", body)
        assert st == 400 and j["error"]["code"] == "invalid_argument", (body, st, j)
        assert words in j["error"]["message"], (body, j)
    assert _ids(cv) == before and set(cv.sandbox_dirs()) <= set(dirs)


def test_exec_runs_on_the_host_in_the_workspace(cv):
    sb = _external(cv)
    sid, ws = sb["id"], sb["workspace"]
    try:
        assert os.path.isdir(ws) and os.listdir(ws) == [], ws
        r = cv.exec(sid, ["sh", "-c", "cat /proc/1/comm; hostname; pwd; id -u; echo made > here.txt; "
                                      "readlink /proc/self/ns/pid /proc/self/ns/mnt"])
        out = r["stdout"].split("\n")
        assert r["exit_code"] == 0, r
        # The host's pid 1, hostname and namespaces, and the workspace as cwd.
        assert out[0] + "\n" == _read("/proc/1/comm"), r
        assert out[1] == socket.gethostname() and out[2] == ws and out[3] == "0", r
        assert out[4:6] == [os.readlink("/proc/self/ns/pid"), os.readlink("/proc/self/ns/mnt")], r
        assert _read(os.path.join(ws, "here.txt")) == "made\n"
        # A file of the host is the host's, as is its init (a host process,
        # in the sandbox's cgroups).
        assert cv.exec(sid, ["cat", "/etc/hostname"])["stdout"] == _read("/etc/hostname")
        init = sb["init_pid"]
        assert os.readlink("/proc/%d/cwd" % init) == ws
        assert _read("/proc/%d/cmdline" % init).split("\0")[:2] == ["cove-init", ws]
        assert cgroup_procs(sid) == [init]
        # An explicit cwd is a host path; a user who cannot enter the
        # workspace (the data root is 0700) starts in /.
        assert cv.exec(sid, ["pwd"], cwd="/tmp")["stdout"] == "/tmp\n"
        r = cv.exec(sid, ["sh", "-c", "id -un; pwd"], user="nobody")
        assert r["stdout"] == "nobody\n/\n", r
    finally:
        _delete(cv, sid)


def test_files_api_stays_inside_the_workspace(cv):
    sb = _external(cv)
    sid, ws = sb["id"], sb["workspace"]
    base = "/v1/sandboxes/%s/files" % sid
    outside = "/tmp/cove-external-%d-%d" % (os.getpid(), time.time_ns())
    try:
        st, j = cv.api("PUT", base + "?path=/dir/sub/a.txt&parents=1", raw=b"through the API")
        assert st == 201, (st, j)
        assert _read(os.path.join(ws, "dir/sub/a.txt")) == "through the API"
        # "..", absolute and relative symlinks resolve inside the workspace.
        r = cv.exec(sid, ["sh", "-c", "mkdir -p etc && echo inside > etc/hostname && ln -s /etc abs && "
                                      "ln -s ../../../../../../../etc rel && ln -s / root && "
                                      "ln -s %s out && ln -s /etc/shadow shadow" % outside])
        assert r["exit_code"] == 0, r
        for path in ("/etc/hostname", "/../../../../etc/hostname", "/abs/hostname", "/rel/hostname",
                     "/root/etc/hostname", "/dir/../../etc/hostname"):
            c = cv.conn()
            c.request("GET", base + "?path=" + path)
            got = c.getresponse().read()
            c.close()
            assert got == b"inside\n", (path, got)
        assert cv.api("GET", base + "?path=/shadow")[0] == 404
        # Writing through a symlink to a host path creates nothing outside.
        st, j = cv.api("PUT", base + "?path=/out", raw=b"x")
        assert not os.path.exists(outside), (st, j)
        st, j = cv.api("PUT", base + "?path=/root/../..%s&parents=1" % outside, raw=b"y")
        assert st == 201 and not os.path.exists(outside), (st, j)
        assert _read(ws + outside) == "y"
        st, j = cv.api("GET", base + "?path=/")
        assert st == 200 and {e["name"] for e in j["entries"]} == {
            "dir", "etc", "abs", "rel", "root", "out", "shadow", "tmp"}, j
        assert cv.api("POST", "/v1/sandboxes/%s/files/mkdir?path=/abs/made" % sid)[0] in (200, 201)
        assert os.path.isdir(os.path.join(ws, "etc/made")) and not os.path.exists("/etc/made")
        assert cv.api("DELETE", base + "?path=/abs/hostname")[0] == 200
        assert not os.path.exists(os.path.join(ws, "etc/hostname")) and os.path.exists("/etc/hostname")
    finally:
        _delete(cv, sid)
        assert not os.path.exists(outside)


def test_processes_and_sessions_work_through_it(cv):
    sb = _external(cv)
    sid, ws = sb["id"], sb["workspace"]
    try:
        st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid,
                       {"cmd": "echo started; exec sleep 30", "background": True, "tag": "bg"})
        assert st == 200 and j["pid"] > 1, (st, j)
        pid = j["pid"]
        # A host pid: the process is visible on the host as it is.
        # (read until the shell's exec of sleep is through: mid-exec it is empty)
        assert wait_until(lambda: "sleep 30" in _read("/proc/%d/cmdline" % pid).replace("\0", " "), 5)
        st, j = cv.api("POST", "/v1/sandboxes/%s/processes/bg/signal" % sid, {"signal": "SIGTERM"})
        assert st == 200, (st, j)
        st, j = cv.api("GET", "/v1/sandboxes/%s/processes/%d?wait=10" % (sid, pid))
        assert st == 200 and j["signal"] == "TERM", (st, j)
        st, s = cv.api("POST", "/v1/sandboxes/%s/sessions" % sid, {})
        assert st == 201, (st, s)
        run = lambda cmd: cv.exec(sid, cmd, session=s["id"])["stdout"]  # noqa: E731
        assert run("pwd") == ws + "\n"
        run("mkdir -p w && cd w && X=kept")
        assert run("echo $X; pwd") == "kept\n%s/w\n" % ws
        # A timeout kills the whole tree, found by parent on the host's /proc.
        r = cv.exec(sid, "sleep 100 & sleep 100 & sleep 100", timeout=0.5)
        assert r["timed_out"], r
        assert wait_until(lambda: len(cgroup_procs(sid)) == 2, 5), [
            _read("/proc/%d/cmdline" % p) for p in cgroup_procs(sid)]  # init, session shell
        # `yes` ends on SIGPIPE (not ignored, as it is in coved).
        r = cv.exec(sid, "yes | head -1")
        assert r["stdout"] == "y\n" and r["stderr"] == "", r
    finally:
        _delete(cv, sid)


def test_environment_filter_and_inherit_env(_cv):
    os.environ["COVE_TEST_FROM_COVED"] = "coved's own"
    try:
        cv = covetest.Coved().start()
    finally:
        del os.environ["COVE_TEST_FROM_COVED"]
    try:
        def env_of(sid, **kw):
            r = cv.exec(sid, ["/usr/bin/env"], **kw)
            assert r["exit_code"] == 0, r
            return dict(line.split("=", 1) for line in r["stdout"].splitlines())

        filtered = _external(cv, env={"SPEC": "s", "BOTH": "spec"})["id"]
        e = env_of(filtered, env={"REQ": "r", "BOTH": "request"})
        assert set(e) == {"PATH", "LANG", "TERM", "TMPDIR", "HOME", "USER", "LOGNAME", "SHELL",
                          "SPEC", "REQ", "BOTH"}, e
        assert e["BOTH"] == "request" and e["HOME"] == "/root" and e["USER"] == "root", e
        inherit = _external(cv, inherit_env=True, env={"SPEC": "s"})
        assert inherit["inherit_env"] is True, inherit
        e = env_of(inherit["id"], env={"REQ": "r"})
        assert e["COVE_TEST_FROM_COVED"] == "coved's own" and e["SPEC"] == "s" and e["REQ"] == "r", e
        coved_env = dict(kv.split("=", 1) for kv in _read("/proc/%d/environ" % cv.pid()).split("\0") if "=" in kv)
        assert e["PATH"] == coved_env["PATH"], (e, coved_env)
        e = env_of(inherit["id"], env={"COVE_TEST_FROM_COVED": "replaced"})
        assert e["COVE_TEST_FROM_COVED"] == "replaced", e
    finally:
        cv.teardown()


def test_cgroup_limits_apply(cv):
    sid = _external(cv, memory="64M", pids=64)["id"]
    try:
        r = cv.exec(sid, [covetest.PROBE, "hog", "200"], timeout=60)
        assert r["signal"] == "KILL" and not r["timed_out"], r
        progress = [int(line.split()[1]) for line in r["stdout"].splitlines() if line.startswith("allocated")]
        assert progress and progress[-1] < 200, r
        r = cv.exec(sid, ["sh", "-c", "cat /proc/self/cgroup"])
        assert "memory:/cove/%s\n" % sid in r["stdout"], r
        assert cv.exec(sid, ["echo", "alive"])["stdout"] == "alive\n"
    finally:
        _delete(cv, sid)


def test_delete_removes_the_workspace_and_every_process(cv):
    sb = _external(cv)
    sid, ws = sb["id"], sb["workspace"]
    # A process that left init's tree (double fork, own session) is still
    # in the cgroups, and goes with the sandbox.
    r = cv.exec(sid, "setsid sh -c 'sleep 300 & echo $!' > pid </dev/null 2>&1 & sleep 0.3; cat pid")
    stray = int(r["stdout"])
    assert os.path.exists("/proc/%d" % stray) and stray in cgroup_procs(sid)
    _delete(cv, sid)
    assert cv.api("GET", "/v1/sandboxes/" + sid)[0] == 404
    assert wait_until(lambda: not os.path.exists(ws) and not cgroup_dirs(sid), 10), (ws, cgroup_dirs(sid))
    assert wait_until(lambda: not _running(stray), 5)
    assert not os.path.exists("/proc/%d" % sb["init_pid"]) or \
        "cove-init" not in _read("/proc/%d/cmdline" % sb["init_pid"])


def test_snapshot_fork_and_restore_take_the_workspace(cv):
    sb = _external(cv, name="orig")
    sid = sb["id"]
    made = []
    try:
        cv.exec(sid, "echo one > data")
        st, sn = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
        assert st == 201 and sn["spec"]["isolation"] == "external", (st, sn)
        cv.exec(sid, "echo two > data")
        st, new = cv.api("POST", "/v1/snapshots/%s/restore" % sn["id"], {})
        assert st == 201, (st, new)
        made.append(new["id"])
        assert new["isolation"] == "external" and new["workspace"] != sb["workspace"], new
        assert cv.exec(new["id"], ["cat", "data"])["stdout"] == "one\n"
        assert _read(os.path.join(new["workspace"], "data")) == "one\n"
        st, f = cv.api("POST", "/v1/sandboxes/%s/fork" % sid, {"count": 2})
        assert st == 201, (st, f)
        made += [c["id"] for c in f["sandboxes"]]
        for c in f["sandboxes"]:
            assert c["isolation"] == "external", c
            assert cv.exec(c["id"], "cat data; pwd")["stdout"] == "two\n%s\n" % c["workspace"]
        assert cv.api("DELETE", "/v1/snapshots/" + sn["id"])[0] == 200
    finally:
        for x in [sid] + made:
            _delete(cv, x)


def test_coved_restart_keeps_it(_cv):
    cv = covetest.Coved().start()
    try:
        sb = _external(cv, inherit_env=True)
        sid, ws = sb["id"], sb["workspace"]
        assert cv.api("PUT", "/v1/sandboxes/%s/files?path=/kept" % sid, raw=b"before")[0] == 201
        st, bg = cv.api("POST", "/v1/sandboxes/%s/exec" % sid,
                        {"cmd": "while :; do date +%s%N > tick; sleep 0.1; done", "background": True})
        assert st == 200, (st, bg)
        cv.kill(signal.SIGKILL)
        assert os.path.exists("/proc/%d" % sb["init_pid"])
        cv.start()
        st, j = cv.api("GET", "/v1/sandboxes/" + sid)
        assert st == 200 and j["state"] == "running" and j["init_pid"] == sb["init_pid"], j
        assert j["isolation"] == "external" and j["inherit_env"] and j["workspace"] == ws, j
        assert "re-attached" in cv.read_log()
        c = cv.conn()
        c.request("GET", "/v1/sandboxes/%s/files?path=/kept" % sid)
        assert c.getresponse().read() == b"before"
        c.close()
        t0 = _read(os.path.join(ws, "tick"))
        assert wait_until(lambda: _read(os.path.join(ws, "tick")) != t0, 5)
        st, p = cv.api("GET", "/v1/sandboxes/%s/processes/%d" % (sid, bg["pid"]))
        assert st == 200 and p["state"] == "running", (st, p)
        assert cv.exec(sid, "pwd")["stdout"] == ws + "\n"
        # Its init gone too while coved was down: a new one on the same
        # workspace, and what the old one left running is ended first.
        cv.kill(signal.SIGKILL)
        os.kill(sb["init_pid"], signal.SIGKILL)
        assert wait_until(lambda: sb["init_pid"] not in (cgroup_procs(sid) or []), 5)
        assert _running(bg["pid"])
        cv.start()
        st, j = cv.api("GET", "/v1/sandboxes/" + sid)
        assert st == 200 and j["state"] == "running" and j["init_pid"] != sb["init_pid"], j
        assert "started again" in cv.read_log()
        assert cgroup_procs(sid) == [j["init_pid"]] and not _running(bg["pid"]), cgroup_procs(sid)
        r = cv.exec(sid, "cat kept; pwd")
        assert r["stdout"] == "before" + ws + "\n", r
    finally:
        cv.teardown()


def test_capabilities_list_both_backends(cv):
    st, j = cv.api("GET", "/v1/capabilities")
    assert st == 200, (st, j)
    assert j["backend"] == "isolated", j
    b = j["backends"]
    assert set(b) == {"isolated", "host"}, b
    assert b["isolated"]["isolation"] == "isolated" and b["isolated"]["os_boundary"] is True, b
    assert b["host"]["isolation"] == "external" and b["host"]["os_boundary"] is False, b
    for v in b.values():
        assert set(v["capabilities"]) == {"ports", "nativeSnapshot", "resume"}, v


def test_cli_creates_an_external_sandbox(cv):
    r = cv.cli("create", "--isolation", "external", "--inherit-env")
    assert r.returncode == 0, r
    sid = r.stdout.decode().strip()
    try:
        r = cv.cli("info", sid)
        assert b'"isolation": "external"' in r.stdout and b'"inherit_env": true' in r.stdout, r
        r = cv.cli("exec", sid, "--", "cat", "/proc/1/comm")
        assert r.returncode == 0 and r.stdout.decode() == _read("/proc/1/comm"), r
    finally:
        _delete(cv, sid)
    r = cv.cli("create", "--isolation", "bogus")
    assert r.returncode != 0 and b"'isolation' must be" in r.stderr, r

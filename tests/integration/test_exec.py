"""Exec through the API and the CLI: output, exit codes, signals, stdin,
environment, cwd, user, timeouts, streaming."""
import json
import os
import time

import covetest
from covetest import wait_until


def _sb(cv, cache={}):
    # One sandbox for the read-only tests of this module.
    sid = cache.get(cv.socket)
    if not sid:
        sid = cache[cv.socket] = cv.create()
    return sid


def test_output_and_exit_code(cv):
    r = cv.exec(_sb(cv), ["sh", "-c", "echo out; echo err >&2; exit 7"])
    assert r["stdout"] == "out\n" and r["stderr"] == "err\n", r
    assert r["exit_code"] == 7 and r["signal"] is None and r["timed_out"] is False, r


def test_shell_string_and_argv(cv):
    assert cv.exec(_sb(cv), "echo $((6*7))")["stdout"] == "42\n"
    r = cv.exec(_sb(cv), ["printf", "%s|", "a b", "$HOME", "*"])
    assert r["stdout"] == "a b|$HOME|*|", r


def test_signal_reported(cv):
    r = cv.exec(_sb(cv), ["sh", "-c", "kill -TERM $$"])
    assert r["exit_code"] is None and r["signal"] == "TERM", r


def test_stdin_text_and_binary(cv):
    r = cv.exec(_sb(cv), ["cat"], stdin="hello\nworld")
    assert r["stdout"] == "hello\nworld", r
    r = cv.exec(_sb(cv), ["sh", "-c", "od -An -tx1 | tr -d ' \\n'"], stdin_b64="AAH/gA==")
    assert r["stdout"] == "0001ff80", r


def test_binary_output_is_base64(cv):
    r = cv.exec(_sb(cv), ["printf", "\\377\\000A"])
    assert r["stdout"] is None and r["stdout_b64"] == "/wBB", r


def test_environment_is_clean(cv):
    os.environ["COVE_TEST_SECRET"] = "leak"  # coved's env never reaches a sandbox
    r = cv.exec(_sb(cv), ["env"], env={"FOO": "bar"})
    names = sorted(line.split("=", 1)[0] for line in r["stdout"].splitlines())
    allowed = {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG", "FOO", "PWD", "SHLVL", "_"}
    assert set(names) <= allowed, names
    assert "FOO=bar" in r["stdout"] and "HOME=/root" in r["stdout"], r


def test_cwd_and_user(cv):
    sid = _sb(cv)
    assert cv.exec(sid, ["pwd"])["stdout"] == "/root\n"
    assert cv.exec(sid, ["pwd"], cwd="/tmp")["stdout"] == "/tmp\n"
    r = cv.exec(sid, ["sh", "-c", "id -u; id -g; echo $HOME $USER"], user="nobody")
    assert r["stdout"] == "65534\n65534\n/nonexistent nobody\n", r
    assert cv.exec(sid, ["id", "-u"], user="1234")["stdout"] == "1234\n"


def test_spawn_errors_are_4xx(cv):
    sid = _sb(cv)
    st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["/no/such/binary"]})
    assert st == 400 and "No such file" in j["error"]["message"], (st, j)
    st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["true"], "cwd": "/no/such/dir"})
    assert st == 400 and "cwd" in j["error"]["message"], (st, j)
    st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["true"], "user": "nosuchuser"})
    assert st == 400 and "user" in j["error"]["message"], (st, j)


def test_timeout_kills_the_tree(cv):
    sid = _sb(cv)
    t0 = time.time()
    # setsid leaves the process group; the timeout still finds it.
    r = cv.exec(sid, ["sh", "-c", "sleep 300 & setsid sleep 301 & (sh -c 'setsid sleep 302 &') ; echo started; wait"],
                timeout=1)
    assert r["timed_out"] is True and r["signal"] == "KILL", r
    assert r["stdout"] == "started\n" and time.time() - t0 < 10, r
    left = wait_until(lambda: "sleep 30" not in cv.exec(sid, ["ps", "-eo", "args"])["stdout"], 5)
    assert left, cv.exec(sid, ["ps", "-eo", "args"])["stdout"]


def test_output_cap_sets_truncated(cv):
    r = cv.exec(_sb(cv), ["sh", "-c", "head -c 100000 /dev/zero | tr '\\0' a"], max_output=1000)
    assert len(r["stdout"]) == 1000 and r["stdout_truncated"] is True, len(r["stdout"])


def test_stream_ndjson(cv):
    sid = _sb(cv)
    c = cv.conn()
    body = json.dumps({"cmd": ["sh", "-c", "echo one; sleep 0.3; echo two >&2; exit 3"]})
    c.request("POST", "/v1/sandboxes/%s/exec?stream=1" % sid, body=body)
    r = c.getresponse()
    assert r.status == 200 and r.getheader("Content-Type") == "application/x-ndjson"
    events, stamps = [], []
    for line in r:
        events.append(json.loads(line))
        stamps.append(time.time())
    c.close()
    types = [e["type"] for e in events]
    assert types == ["start", "stdout", "stderr", "exit"], events
    assert events[1]["data"] == "one\n" and events[2]["data"] == "two\n"
    assert events[3]["exit_code"] == 3
    assert stamps[2] - stamps[1] > 0.2  # streamed while produced, not at the end
    # a flag that is neither on nor off is refused, and nothing runs
    st, j = cv.api("POST", "/v1/sandboxes/%s/exec?stream=yes" % sid, {"cmd": ["touch", "/tmp/ran"]})
    assert st == 400 and "'stream'" in j["error"]["message"], (st, j)
    assert cv.exec(sid, ["test", "-e", "/tmp/ran"])["exit_code"] == 1
    assert cv.exec(sid, ["true"])["exit_code"] == 0
    st, j = cv.api("POST", "/v1/sandboxes/%s/exec?stream=0" % sid, {"cmd": ["echo", "whole"]})
    assert st == 200 and j["stdout"] == "whole\n", (st, j)


def test_cli_run_exit_status_and_streams(cv):
    r = cv.cli("run", "--", "sh", "-c", "echo hi; echo oops >&2; exit 5")
    assert r.returncode == 5 and r.stdout == b"hi\n" and r.stderr == b"oops\n", r
    r = cv.cli("run", "--memory", "256M", "--cpus", "0.5", "--env", "A=1", "--workdir", "/tmp", "--",
               "sh", "-c", "echo $A; pwd; cat /sys/fs/cgroup/memory.max 2>/dev/null || true")
    assert r.returncode == 0 and r.stdout.startswith(b"1\n/tmp\n"), r
    r = cv.cli("run", "--", "python3", "-c", "print(6*7)")
    assert r.returncode == 0 and r.stdout == b"42\n", r


def test_cli_exec_signal_timeout_notfound_stdin(cv):
    sid = cv.cli("create").stdout.decode().strip()
    try:
        assert cv.cli("exec", sid, "--", "sh", "-c", "kill -9 $$").returncode == 137
        r = cv.cli("exec", "--timeout", "0.5", sid, "--", "sleep", "10")
        assert r.returncode == 124 and b"timed out" in r.stderr, r
        r = cv.cli("exec", sid, "--", "no-such-command")
        assert r.returncode == 127 and r.stderr.startswith(b"cove: "), r
        r = cv.cli("exec", "-i", sid, "--", "tr", "a-z", "A-Z", input=b"hello")
        assert r.returncode == 0 and r.stdout == b"HELLO", r
        r = cv.cli("exec", "--env", "X=y", "--workdir", "/etc", "--user", "nobody", sid, "--",
                   "sh", "-c", "echo $X $(pwd) $(id -un)")
        assert r.stdout == b"y /etc nobody\n", r
    finally:
        assert cv.cli("rm", sid).returncode == 0


def test_cli_ls_info_rm_errors(cv):
    sid = cv.cli("create", "--name", "web").stdout.decode().strip()
    ls = cv.cli("ls")
    assert sid.encode() in ls.stdout and b"web" in ls.stdout, ls
    lsj = json.loads(cv.cli("--json", "ls").stdout)
    assert any(s["id"] == sid for s in lsj)
    # --json after the command too, and a --json after "--" belongs to the sandbox's command
    assert json.loads(cv.cli("ls", "--json").stdout) == lsj
    for cmd in (["--", "echo", "--json"], ["echo", "--json"]):
        r = cv.cli("--json", "exec", sid, *cmd)
        assert r.returncode == 0 and r.stdout == b"--json\n", r
    info = json.loads(cv.cli("info", sid).stdout)
    assert info["id"] == sid and info["state"] == "running" and info["name"] == "web"
    assert cv.cli("rm", sid).returncode == 0
    r = cv.cli("info", sid)
    assert r.returncode == 1 and r.stderr.decode().count("\n") == 1 and "no sandbox" in r.stderr.decode(), r
    r = cv.cli("exec", "--bogus", sid, "--", "true")
    assert r.returncode == 2 and b"--bogus" in r.stderr, r
    r = cv.cli("run", "--memory", "lots", "--", "true")
    assert r.returncode == 2 and b"--memory" in r.stderr, r
    r = cv.cli("ls", env={"COVE_SOCKET": "/proc/cove-none/sock", "COVE_DATA": "/proc/cove-none/data"})
    assert r.returncode == 1 and r.stderr.startswith(b"cove: "), r


def test_cli_run_leaves_no_sandbox_when_killed(cv):
    import signal
    import subprocess
    env = dict(os.environ, COVE_SOCKET=cv.socket, COVE_DATA=cv.data)
    ids = lambda: {s["id"] for s in cv.api("GET", "/v1/sandboxes")[1]["sandboxes"]}
    before = ids()
    for sig in (signal.SIGINT, signal.SIGKILL):
        # SIGINT as a terminal's Ctrl-C sends it: a shell running the suite
        # in the background may have left it ignored for its children.
        p = subprocess.Popen([covetest.COVE, "run", "--", "sleep", "60"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        assert wait_until(lambda: len(ids() - before) == 1, 10), "run did not create a sandbox"
        p.send_signal(sig)
        p.wait(timeout=10)
        assert wait_until(lambda: ids() == before, 10), (sig, ids() - before)


def test_limits_reach_the_cgroups(cv):
    # This host is cgroup v1 (the v2 writer is covered by tests/unit/test_cgroup.c).
    sid = cv.create(memory="96M", cpus=0.5, pids=77)
    try:
        base = "/sys/fs/cgroup/%s/cove/" + sid + "/%s"
        read = lambda ctl, f: open(base % (ctl, f)).read().strip()
        assert read("memory", "memory.limit_in_bytes") == str(96 << 20)
        assert read("cpu", "cpu.cfs_quota_us") == "50000" and read("cpu", "cpu.cfs_period_us") == "100000"
        assert read("pids", "pids.max") == "77"
        init = str(cv.api("GET", "/v1/sandboxes/" + sid)[1]["init_pid"])
        for ctl in ("memory", "cpu", "pids", "freezer"):
            assert init in read(ctl, "cgroup.procs").split(), ctl
        # Inside, the cgroup namespace makes the sandbox's cgroup the root.
        assert cv.exec(sid, ["cat", "/proc/self/cgroup"])["stdout"].count(":/\n") >= 4
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)
    assert wait_until(lambda: not os.path.exists("/sys/fs/cgroup/memory/cove/" + sid), 10)


def test_sandbox_knows_its_own_name(cv):
    sid = _sb(cv)
    assert cv.exec(sid, ["hostname"])["stdout"] == sid + "\n"
    assert cv.exec(sid, ["cat", "/etc/hostname"])["stdout"] == sid + "\n"
    r = cv.exec(sid, ["getent", "hosts", sid])
    assert r["exit_code"] == 0 and r["stdout"].split() == ["127.0.1.1", sid], r
    assert "localhost" in cv.exec(sid, ["cat", "/etc/hosts"])["stdout"]  # the image's lines stay


def test_sigpipe_ends_a_writer_quietly(cv):
    # coved ignores SIGPIPE; its commands must not inherit that, or a
    # writer into a closed pipe complains instead of ending.
    sid = _sb(cv)
    r = cv.exec(sid, ["sh", "-c", "yes | head -1; grep SigIgn /proc/self/status"])
    assert r["stdout"].startswith("y\n") and r["stderr"] == "", r
    assert not int(r["stdout"].split()[-1], 16) & (1 << (13 - 1)), r  # bit of signal 13, SIGPIPE

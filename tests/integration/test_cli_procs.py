"""The CLI's kept processes and terminals: cove exec -d, ps, attach, kill,
wait, and cove shell, the last one also as a person uses it: in tmux, with
send-keys and capture-pane (a private tmux server, killed at the end)."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

from covetest import COVE, wait_until


def _detach(cv, sid, *args):
    r = cv.cli("exec", "-d", *args[:-1], sid, "--", "sh", "-c", args[-1])
    assert r.returncode == 0, r
    return int(r.stdout)


def _one_line_error(r, want):
    err = r.stderr.decode()
    assert r.returncode != 0 and err.count("\n") == 1 and want in err, (r.returncode, err)


def _proc(cv, sid, pid):
    st, j = cv.api("GET", "/v1/sandboxes/%s/processes/%s" % (sid, pid))
    assert st == 200, (st, j)
    return j


def test_cli_detach_ps_wait_attach(cv):
    sid = cv.create()
    pid = _detach(cv, sid, "--tag", "job", "echo out; echo err >&2; sleep 1; echo late; exit 4")
    assert pid > 1 and _proc(cv, sid, "job")["pid"] == pid
    ps = cv.cli("ps", sid)
    assert ps.returncode == 0, ps
    head, *rows = ps.stdout.decode().splitlines()
    assert head.split()[:4] == ["PID", "TAG", "STATE", "EXIT"], head
    [row] = [r.split() for r in rows if r.split()[0] == str(pid)]
    assert row[1:4] == ["job", "running", "-"] and "sleep" in ps.stdout.decode(), row
    # wait: the process's exit status; then ps shows it ended
    w = cv.cli("wait", sid, "job")
    assert w.returncode == 4 and w.stdout == b"", w
    lst = json.loads(cv.cli("ps", "--json", sid).stdout)
    [p] = [p for p in lst if p["pid"] == pid]
    assert p["state"] == "exited" and p["exit_code"] == 4 and p["tag"] == "job", p
    assert json.loads(cv.cli("--json", "ps", sid).stdout) == lst
    # attach after the end: the whole output on our stdout and stderr, its status
    a = cv.cli("attach", sid, str(pid))
    assert (a.returncode, a.stdout, a.stderr) == (4, b"out\nlate\n", b"err\n"), a
    # attach to a running one without the replay: only what comes next
    pid = _detach(cv, sid, "echo early; sleep 1; echo later; kill -9 $$")
    time.sleep(0.5)
    a = cv.cli("attach", "--no-replay", sid, str(pid))
    assert (a.returncode, a.stdout) == (137, b"later\n"), a
    # exec -d with stdin (-i) and --json
    r = cv.cli("--json", "exec", "-d", "-i", "--tag", "cat", sid, "--", "cat", input=b"fed\n")
    assert r.returncode == 0, r
    j = json.loads(r.stdout)
    assert j["tag"] == "cat" and isinstance(j["pid"], int), j
    assert cv.cli("wait", sid, "cat").returncode == 0
    assert cv.cli("attach", sid, "cat").stdout == b"fed\n"
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_cli_kill(cv):
    sid = cv.create()
    # a loop, so that its children dying first (--tree) does not end it
    # before its own TERM, and its trap, come
    pid = _detach(cv, sid, "--tag", "t", "trap 'exit 9' TERM; while :; do sleep 0.1; done")
    assert wait_until(lambda: cv.exec(sid, "pgrep -c sleep")["stdout"].strip() != "0", 5)
    k = cv.cli("kill", "-s", "TERM", "--tree", sid, "t")
    assert k.returncode == 0 and k.stdout == b"", k
    assert cv.cli("wait", sid, str(pid)).returncode == 9
    assert wait_until(lambda: cv.exec(sid, "pgrep -c sleep")["stdout"].strip() == "0", 5)
    # the default signal is KILL; --tree takes the children along
    pid = _detach(cv, sid, "sleep 100 & sleep 100 & wait")
    assert wait_until(lambda: cv.exec(sid, "pgrep -c sleep")["stdout"].strip() == "2", 5)
    assert cv.cli("kill", "--tree", sid, str(pid)).returncode == 0
    assert cv.cli("wait", sid, str(pid)).returncode == 137
    assert wait_until(lambda: cv.exec(sid, "pgrep -c sleep")["stdout"].strip() == "0", 5)
    # a signal by number
    pid = _detach(cv, sid, "exec sleep 100")
    assert cv.cli("kill", "--signal", "2", sid, str(pid)).returncode == 0
    assert cv.cli("wait", sid, str(pid)).returncode == 130
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_cli_proc_failures(cv):
    sid = cv.create()
    for verb in (["attach"], ["wait"], ["kill"], ["kill", "-s", "TERM"]):
        _one_line_error(cv.cli(*verb, sid, "4242"), "no process '4242'")
        _one_line_error(cv.cli(*verb, sid, "nosuchtag"), "no process 'nosuchtag'")
        _one_line_error(cv.cli(*verb, sid, "a/b"), "bad process 'a/b'")
    _one_line_error(cv.cli("ps", "sb_nosuchsandbox"), "no sandbox")
    _one_line_error(cv.cli("attach", "sb_nosuchsandbox", "1"), "no sandbox")
    pid = _detach(cv, sid, "sleep 100")
    _one_line_error(cv.cli("kill", "-s", "NOPE", sid, str(pid)), "signal")
    assert _proc(cv, sid, pid)["state"] == "running"  # nothing changed
    # a command that does not exist: as cove exec says it
    r = cv.cli("exec", "-d", sid, "--", "/nonexistent")
    assert r.returncode == 127 and b"No such file" in r.stderr, r
    # a tag already taken by a running process
    _detach(cv, sid, "--tag", "once", "sleep 100")
    r = cv.cli("exec", "-d", "--tag", "once", sid, "--", "true")
    _one_line_error(r, "already tagged")
    # usage errors: status 2, what is wrong, then the command's usage line
    for args in (["ps"], ["attach", sid], ["kill", sid], ["wait", sid, "1", "2"], ["kill", "-x", sid, "1"],
                 ["shell"], ["shell", "--bogus", sid]):
        r = cv.cli(*args)
        lines = r.stderr.decode().splitlines()
        assert r.returncode == 2 and lines[0].startswith("cove " + args[0] + ": "), (args, r)
        assert lines[-1].startswith("usage: cove " + args[0] + " "), (args, r)
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_cli_shell_without_a_terminal(cv):
    sid = cv.create()
    # piped input: the user's login shell reads it, its exit status comes back
    r = cv.cli("shell", sid, input=b"echo $((6*7))\nexit 3\n", timeout=30)
    assert r.returncode == 3, r
    assert "42" in re.split(r"[\r\n]+", r.stdout.decode()), r
    # a command; the default size of a terminal that has none to copy
    r = cv.cli("shell", sid, "--", "sh", "-c", "stty size; tty; exit 5", input=b"", timeout=30)
    assert r.returncode == 5 and b"24 80" in r.stdout and b"/dev/pts/" in r.stdout, r
    # the end of our stdin is the terminal's EOF (^D)
    r = cv.cli("shell", sid, "--", "sh", "-c", "cat; echo after", input=b"x\n", timeout=30)
    assert r.returncode == 0 and r.stdout.endswith(b"after\r\n"), r
    # a terminal killed by a signal: 128 + its number, as a shell says it
    r = cv.cli("shell", sid, "--", "sh", "-c", "kill -TERM $$", input=b"", timeout=30)
    assert r.returncode == 128 + signal.SIGTERM, r
    r = cv.cli("shell", "--user", "nobody", "--workdir", "/tmp", sid, "--", "sh", "-c", "id -un; pwd",
               input=b"", timeout=30)
    assert r.returncode == 0 and r.stdout.split() == [b"nobody", b"/tmp"], r
    # a reader slower than the terminal's output slows it down, and loses
    # nothing (unlike a background process, whose output is not held for
    # anyone beyond its 1 MiB tail)
    env = dict(os.environ, COVE_SOCKET=cv.socket, COVE_DATA=cv.data)
    p = subprocess.Popen([COVE, "shell", sid, "--", "seq", "1", "1000000"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, env=env)
    try:
        time.sleep(2)
        out = p.stdout.read()
    finally:
        p.stdout.close()
        p.wait(timeout=60)
    assert p.returncode == 0 and out == "".join("%d\r\n" % i for i in range(1, 1000001)).encode(), len(out)
    # failures
    r = cv.cli("shell", sid, "--", "/nonexistent", input=b"")
    assert r.returncode == 127 and b"No such file" in r.stderr, r
    _one_line_error(cv.cli("shell", "sb_nosuchsandbox", input=b""), "no sandbox")
    cv.api("DELETE", "/v1/sandboxes/" + sid)


class Tmux:
    """A private tmux server (its own socket, in the test's own directory),
    for one test."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="cove-tmux-", dir="/var/tmp")
        self.socket = os.path.join(self.dir, "tmux.sock")

    def __call__(self, *args):
        r = subprocess.run(["tmux", "-S", self.socket, "-f", "/dev/null"] + list(args), capture_output=True,
                           timeout=30)
        assert r.returncode == 0, (args, r)
        return r.stdout.decode()

    def start(self, cv, command):
        """A session running command (sh -c) in a 100x30 window, where cove
        reaches cv's coved."""
        env = "COVE_SOCKET=%s COVE_DATA=%s" % (cv.socket, cv.data)
        self("new-session", "-d", "-s", "t", "-x", "100", "-y", "30", "env %s %s" % (env, command))
        self("set-option", "-t", "t", "remain-on-exit", "on")

    def lines(self):
        return [line.rstrip() for line in self("capture-pane", "-p", "-t", "t").splitlines()]

    def wait_line(self, line, timeout=15):
        ok = wait_until(lambda: line in self.lines(), timeout)
        assert ok, (line, self.lines())

    def read(self, name):
        try:
            with open(os.path.join(self.dir, name)) as f:
                return f.read().strip()
        except OSError:
            return None

    def kill(self):
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True, timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)


def _terminal_pids(cv, sid):
    st, j = cv.api("GET", "/v1/sandboxes/%s/processes" % sid)
    assert st == 200
    return [p for p in j["processes"] if p["tty"]]


def _sleeping(cv, sid):
    return cv.exec(sid, ["pgrep", "-x", "sleep"])["exit_code"] == 0


def test_cli_shell_in_tmux(cv):
    sid = cv.create()
    t = Tmux()
    try:
        t.start(cv, "%s shell %s; echo status=$? > %s/status; stty -a > %s/stty" % (COVE, sid, t.dir, t.dir))
        assert wait_until(lambda: any(t.lines()), 15), "no prompt"
        t("send-keys", "-t", "t", "echo $((6*7))", "Enter")
        t.wait_line("42")
        # Ctrl-C reaches the sandbox's terminal: sleep dies, the prompt is back
        t("send-keys", "-t", "t", "sleep 100", "Enter")
        assert wait_until(lambda: _sleeping(cv, sid), 10), t.lines()
        t("send-keys", "-t", "t", "C-c")
        assert wait_until(lambda: not _sleeping(cv, sid), 10), t.lines()
        t("send-keys", "-t", "t", "echo back$((1+1))", "Enter")
        t.wait_line("back2")
        # the window's size, at the start and after a resize
        size = t("display-message", "-p", "-t", "t", "#{pane_height} #{pane_width}").strip()
        t("send-keys", "-t", "t", "stty size", "Enter")
        t.wait_line(size)
        t("resize-window", "-t", "t", "-x", "90", "-y", "25")
        new = t("display-message", "-p", "-t", "t", "#{pane_height} #{pane_width}").strip()
        assert new != size, (size, new)
        time.sleep(0.3)
        t("send-keys", "-t", "t", "clear; stty size", "Enter")
        t.wait_line(new)
        # a resize reaches a program that runs meanwhile, as SIGWINCH
        t("send-keys", "-t", "t", "clear; sh -c 'trap \"stty size; exit\" WINCH; while :; do sleep 0.1; done'",
          "Enter")
        assert wait_until(lambda: _sleeping(cv, sid), 10), t.lines()
        t("resize-window", "-t", "t", "-x", "80", "-y", "20")
        t.wait_line("20 80")
        # Ctrl-C is a byte like any other: a raw terminal there reads it
        t("send-keys", "-t", "t", "clear; stty raw -echo; printf byte=; head -c1 | od -An -tx1 | tr -d ' '; stty sane",
          "Enter")
        t.wait_line("byte=")  # printed once the terminal there is raw
        t("send-keys", "-t", "t", "C-c")
        t.wait_line("byte=03")
        # the exit status comes back, and the terminal is as it was
        t("send-keys", "-t", "t", "exit 3", "Enter")
        assert wait_until(lambda: t.read("stty"), 15), t.lines()
        assert t.read("status") == "status=3"
        modes = t.read("stty").split()
        assert "icanon" in modes and "echo" in modes and "isig" in modes, modes
        assert all(p["state"] == "exited" for p in _terminal_pids(cv, sid))
    finally:
        t.kill()
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_cli_shell_killed_restores_terminal(cv):
    sid = cv.create()
    t = Tmux()
    try:
        t.start(cv, "%s shell %s -- sh; echo status=$? > %s/status; stty -a > %s/stty" % (COVE, sid, t.dir, t.dir))
        assert wait_until(lambda: _terminal_pids(cv, sid), 15)
        tty = t("display-message", "-p", "-t", "t", "#{pane_tty}").strip()
        # raw while cove shell runs
        assert wait_until(lambda: "-icanon" in subprocess.run(["stty", "-a", "-F", tty], capture_output=True,
                                                                text=True).stdout.split(), 10)
        pane = int(t("display-message", "-p", "-t", "t", "#{pane_pid}").strip())
        with open("/proc/%d/task/%d/children" % (pane, pane)) as f:
            [cove] = [int(p) for p in f.read().split()]
        with open("/proc/%d/cmdline" % cove) as f:
            assert f.read().split("\0")[1] == "shell"
        os.kill(cove, signal.SIGTERM)  # our own process, started by this test's tmux
        assert wait_until(lambda: t.read("stty"), 15), t.lines()
        assert t.read("status") == "status=%d" % (128 + signal.SIGTERM)
        modes = t.read("stty").split()
        assert "icanon" in modes and "echo" in modes, modes
        # the sandbox's terminal went with its client
        [p] = _terminal_pids(cv, sid)
        st, p = cv.api("GET", "/v1/sandboxes/%s/processes/%d?wait=10" % (sid, p["pid"]))
        assert p["state"] == "exited" and p["signal"] == "KILL", p
    finally:
        t.kill()
        cv.api("DELETE", "/v1/sandboxes/" + sid)

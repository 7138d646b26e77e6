"""Memory snapshots (CRIU): a snapshot, fork or checkpoint with "memory":
true saves the sandbox's running processes with its files; a restore, each
fork and a rollback bring them back running in a sandbox of their own (own
ID, uid range and address, same hostname). What is checked in each copy: a
counter loop goes on from its value (not from zero), a Python REPL still
holds its variable (a kept process fed on stdin), an HTTP server still
listens (asked from inside the sandbox), kept processes keep their tags, and
a session keeps its shell's state. A sandbox CRIU cannot save (a process
traced by another) is a clear 409 that changes nothing; a coved without a
working CRIU says so in GET /v1/capabilities and answers memory requests
409 with the reason."""
import json
import re
import shutil
import signal
import os

import covetest
from covetest import wait_until

COUNTER = "i=0; while :; do i=$((i+1)); echo $i > /dev/shm/count; sleep 0.05; done"
REPL = ["python3", "-q", "-u", "-i"]
WEB = ["python3", "-m", "http.server", "8000", "--bind", "127.0.0.1", "-d", "/etc"]
ASK = "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:8000/hostname', timeout=10).read().decode())"
TRACER = r"""
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
pid = os.fork()
if pid == 0:
    libc.ptrace(0, 0, None, None)
    os.kill(os.getpid(), signal.SIGSTOP)
    while True:
        time.sleep(1)
os.waitpid(pid, os.WUNTRACED)
print("tracing", flush=True)
while True:
    time.sleep(1)
"""


def _count(cv, sid):
    out = cv.sh(sid, "cat /dev/shm/count 2>/dev/null || echo 0")["stdout"].strip()
    return int(out or 0)


def _bg(cv, sid, cmd, **kw):
    kw.update(cmd=cmd, background=True)
    st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, kw)
    assert st == 200, (st, j)
    return j["pid"]


def _stdin(cv, sid, sel, data):
    st, j = cv.api("POST", "/v1/sandboxes/%s/processes/%s/stdin" % (sid, sel), {"data": data})
    assert st == 200, (st, j)


def _attach_stdout(cv, sid, sel, want, timeout=30):
    """The attach stream's stdout, read until want is in it (or it ends)."""
    c = cv.conn(timeout)
    c.request("GET", "/v1/sandboxes/%s/processes/%s/attach" % (sid, sel))
    r = c.getresponse()
    assert r.status == 200, (r.status, r.read())
    out = ""
    while want not in out:
        line = r.readline()
        if not line:
            break
        ev = json.loads(line)
        out += ev.get("data", "") if ev["type"] == "stdout" else ""
        if ev["type"] == "exit":
            break
    c.close()
    return out


def _info(cv, sid):
    st, j = cv.api("GET", "/v1/sandboxes/" + sid)
    assert st == 200, (st, j)
    return j


def _uid_map(cv, sid):
    return cv.sh(sid, "cat /proc/self/uid_map")["stdout"].split()


def _start_workload(cv):
    """A sandbox running the counter, a REPL holding x = 41 and the HTTP
    server; its counter's value once all run."""
    sid = cv.create()
    _bg(cv, sid, ["sh", "-c", COUNTER], tag="counter")
    _bg(cv, sid, REPL, tag="repl", stdin_open=True)
    _stdin(cv, sid, "repl", "x = 41\n")
    _bg(cv, sid, WEB, tag="web")
    assert wait_until(lambda: _count(cv, sid) >= 5, 30)
    assert wait_until(lambda: cv.sh(sid, ["python3", "-c", ASK])["exit_code"] == 0, 30)
    return sid


def _check_resumed(cv, sid, origin, at_least):
    """sid runs origin's processes: counter on from at_least, the REPL's x,
    the server (which answers with origin's name); same hostname, its own
    uid range and address."""
    _continues(cv, sid, at_least, answer=origin)
    assert cv.sh(sid, "hostname")["stdout"].strip() == origin
    assert _uid_map(cv, sid) != _uid_map(cv, origin)
    assert _info(cv, sid)["uid_base"] != _info(cv, origin)["uid_base"]


def _continues(cv, sid, at_least, answer=None):
    """sid's counter, REPL and server go on: the counter from at_least (not
    from zero), x still 41, the server answering with answer (sid's own
    name unless given)."""
    first = _count(cv, sid)
    assert first >= at_least, (sid, first, at_least)
    assert wait_until(lambda: _count(cv, sid) > first, 30), "the counter stopped"
    st, procs = cv.api("GET", "/v1/sandboxes/%s/processes" % sid)
    tags = {p.get("tag") for p in procs["processes"] if p["state"] == "running"}
    assert {"counter", "repl", "web"} <= tags, procs
    r = cv.sh(sid, ["python3", "-c", ASK])
    assert r["exit_code"] == 0 and r["stdout"].strip() == (answer or sid), r
    _stdin(cv, sid, "repl", "print(x + 1)\n")
    assert "42\n" in _attach_stdout(cv, sid, "repl", "42\n")


def _native(cv):
    st, caps = cv.api("GET", "/v1/capabilities")
    assert st == 200, caps
    return caps


def test_capabilities_say_native_snapshot(cv):
    caps = _native(cv)
    assert caps["capabilities"]["nativeSnapshot"] is True, caps
    assert caps["backends"]["isolated"]["capabilities"]["nativeSnapshot"] is True, caps
    assert caps["backends"]["host"]["capabilities"]["nativeSnapshot"] is False, caps


def test_restore_resumes_processes(cv):
    sid = _start_workload(cv)
    before = _count(cv, sid)
    st, sn = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {"memory": True, "name": "m"})
    assert st == 201 and sn["memory"] is True and sn["durable"] is True, (st, sn)
    assert sn["memory_bytes"] > 0, sn
    snap_dir = os.path.join(cv.data, "pool", "snapshots", sn["id"], "criu")
    assert os.path.isfile(os.path.join(snap_dir, "inventory.img")), os.listdir(os.path.dirname(snap_dir))
    # the original goes on
    assert wait_until(lambda: _count(cv, sid) > before + 3, 30)
    st, j = cv.api("POST", "/v1/snapshots/%s/restore" % sn["id"], {})
    assert st == 201, (st, j)
    _check_resumed(cv, j["id"], sid, before)
    # a plain file snapshot says so
    st, plain = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
    assert st == 201 and plain["memory"] is False and plain["memory_bytes"] == 0, plain
    # deleted with its snapshot
    assert cv.api("DELETE", "/v1/snapshots/" + sn["id"])[0] == 200
    assert not os.path.exists(os.path.dirname(snap_dir))
    for s in (j["id"], sid):
        cv.api("DELETE", "/v1/sandboxes/" + s)
    cv.api("DELETE", "/v1/snapshots/" + plain["id"])


def test_fork_into_three_with_memory(cv):
    sid = _start_workload(cv)
    before = _count(cv, sid)
    st, j = cv.api("POST", "/v1/sandboxes/%s/fork" % sid, {"count": 3, "memory": True})
    assert st == 201 and len(j["sandboxes"]) == 3, (st, j)
    copies = [s["id"] for s in j["sandboxes"]]
    addrs = set()
    for c in copies:
        _check_resumed(cv, c, sid, before)
        addrs.add(cv.sh(c, "ip -4 -o addr show dev eth0")["stdout"].split()[3])
    assert len(set(tuple(_uid_map(cv, c)) for c in copies)) == 3
    assert len(addrs) == 3, addrs
    # no snapshot is left behind by the fork
    st, lst = cv.api("GET", "/v1/snapshots")
    assert not [s for s in lst["snapshots"] if s["sandbox"] == sid], lst
    for s in copies + [sid]:
        cv.api("DELETE", "/v1/sandboxes/" + s)


def test_checkpoint_with_memory_and_rollback(cv):
    sid = _start_workload(cv)
    before = _count(cv, sid)
    r = cv.cli("checkpoint", "--memory", sid)
    assert r.returncode == 0 and r.stdout.decode().strip() == "1", r
    st, h = cv.api("GET", "/v1/sandboxes/%s/checkpoints" % sid)
    snap = h["checkpoints"][0]["snapshot"]
    assert cv.api("GET", "/v1/snapshots/" + snap)[1]["memory"] is True
    r = cv.cli("rollback", sid, "1")
    assert r.returncode == 0, r
    back = r.stdout.decode().strip()
    _check_resumed(cv, back, sid, before)
    for s in (back, sid):
        cv.api("DELETE", "/v1/sandboxes/" + s)
    cv.api("DELETE", "/v1/sandboxes/%s/checkpoints" % sid)
    cv.api("DELETE", "/v1/sandboxes/%s/checkpoints" % back)


def test_session_and_cli_snapshot_memory(cv):
    sid = cv.create()
    st, ss = cv.api("POST", "/v1/sandboxes/%s/sessions" % sid, {})
    assert st == 201, ss
    run = {"cmd": "cd /tmp && export KEPT=yes && V=7", "session": ss["id"]}
    assert cv.api("POST", "/v1/sandboxes/%s/exec" % sid, run)[1]["exit_code"] == 0
    r = cv.cli("snapshot", "--memory", sid)
    assert r.returncode == 0, r
    snap = r.stdout.decode().strip()
    r = cv.cli("restore", snap)
    assert r.returncode == 0, r
    copy = r.stdout.decode().strip()
    st, lst = cv.api("GET", "/v1/sandboxes/%s/sessions" % copy)
    assert st == 200 and ss["id"] in [s["id"] for s in lst["sessions"]], lst
    st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % copy, {"cmd": "echo $PWD $KEPT $V", "session": ss["id"]})
    assert st == 200 and j["stdout"] == "/tmp yes 7\n", (st, j)
    for s in (copy, sid):
        cv.api("DELETE", "/v1/sandboxes/" + s)
    cv.api("DELETE", "/v1/snapshots/" + snap)


def test_snapshots_while_shells_vfork(cv):
    """dash runs each command with vfork: a freeze can catch a child between
    its vfork and its exec, its parent waiting on it, a tree criu cannot
    dump (it stopped at its own 60 s deadline, "Timeout reached"); and on
    cgroup v1 such a freeze may never complete. Three shells vfork without
    pause; every memory snapshot is taken (a few ms of thaw when it caught
    one) and restores with the loops running."""
    sid = cv.create(network="none", cpus=0.5)
    for i in range(3):
        _bg(cv, sid, ["sh", "-c", "while :; do /bin/true; done"], tag="vfork%d" % i)
    _bg(cv, sid, ["sh", "-c", COUNTER], tag="counter")
    assert wait_until(lambda: _count(cv, sid) >= 3, 30)
    at = _count(cv, sid)
    snaps = []
    for _ in range(8):
        st, j = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {"memory": True, "wait_durable": False},
                       timeout=300)
        assert st == 201 and j["memory"], (st, j)
        snaps.append(j["id"])
    st, copy = cv.api("POST", "/v1/snapshots/%s/restore" % snaps[-1], {}, timeout=300)
    assert st == 201, (st, copy)
    first = _count(cv, copy["id"])
    assert first >= at and wait_until(lambda: _count(cv, copy["id"]) > first, 30)
    st, procs = cv.api("GET", "/v1/sandboxes/%s/processes" % copy["id"])
    tags = {p.get("tag") for p in procs["processes"] if p["state"] == "running"}
    assert {"vfork0", "vfork1", "vfork2", "counter"} <= tags, procs
    print("# vfork children met:", cv.read_log().count("vfork child not exec'd yet"))
    for s in (copy["id"], sid):
        cv.api("DELETE", "/v1/sandboxes/" + s)
    for sn in snaps:
        cv.api("DELETE", "/v1/snapshots/" + sn)


def test_uncheckpointable_is_a_clear_409(cv):
    sid = cv.create(network="none")
    _bg(cv, sid, ["sh", "-c", COUNTER], tag="counter")
    _bg(cv, sid, ["python3", "-c", TRACER], tag="tracer")
    assert wait_until(lambda: "tracing" in _attach_stdout(cv, sid, "tracer", "tracing", 10), 30)
    st, before = cv.api("GET", "/v1/snapshots")
    for path, body in (("snapshots", {"memory": True}), ("fork", {"count": 2, "memory": True}),
                       ("checkpoints", {"memory": True})):
        st, j = cv.api("POST", "/v1/sandboxes/%s/%s" % (sid, path), body)
        assert st == 409, (path, st, j)
        assert "cannot be saved" in j["error"]["message"] and "traced" in j["error"]["message"], j
    st, after = cv.api("GET", "/v1/snapshots")
    assert after == before
    assert cv.api("GET", "/v1/sandboxes/%s/checkpoints" % sid)[1]["checkpoints"] == []
    # it runs on as it was, its processes answering
    n = _count(cv, sid)
    assert wait_until(lambda: _count(cv, sid) > n, 30)
    st, procs = cv.api("GET", "/v1/sandboxes/%s/processes" % sid)
    assert {p["tag"] for p in procs["processes"] if p["state"] == "running"} == {"counter", "tracer"}, procs
    # an external sandbox has no memory snapshot
    ext = cv.create(isolation="external")
    st, j = cv.api("POST", "/v1/sandboxes/%s/snapshots" % ext, {"memory": True})
    assert st == 409 and "external" in j["error"]["message"], j
    for s in (sid, ext):
        cv.api("DELETE", "/v1/sandboxes/" + s)


def test_without_criu_memory_requests_are_409(cv):
    old = os.environ.get("COVE_CRIU")
    os.environ["COVE_CRIU"] = "/nonexistent/criu"
    try:
        other = covetest.Coved().start()
    finally:
        if old is None:
            del os.environ["COVE_CRIU"]
        else:
            os.environ["COVE_CRIU"] = old
    try:
        caps = wait_until(lambda: "criu" in _native(other).get("nativeSnapshotReason", "") and _native(other), 30)
        assert caps["capabilities"]["nativeSnapshot"] is False, caps
        assert "criu" in caps["nativeSnapshotReason"], caps
        sid = other.create()
        for path, body in (("snapshots", {"memory": True}), ("fork", {"memory": True}),
                           ("checkpoints", {"memory": True})):
            st, j = other.api("POST", "/v1/sandboxes/%s/%s" % (sid, path), body)
            assert st == 409 and "not available on this host" in j["error"]["message"], (path, st, j)
            assert "criu" in j["error"]["message"], j
        assert other.api("GET", "/v1/snapshots")[1]["snapshots"] == []
        st, j = other.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
        assert st == 201 and j["memory"] is False, j
    finally:
        other.teardown()


def test_terminal_continues_after_restore(cv):
    """A `cove shell` in tmux holds a shell's state; a memory snapshot is
    taken while it runs; in the restored copy `cove shell --attach` (in
    another tmux) reaches the same shell, its variable and cwd included."""
    from test_cli_procs import Tmux
    COVE = covetest.COVE
    sid = cv.create()
    t, t2 = Tmux(), Tmux()
    copy = snap = None
    try:
        t.start(cv, "%s shell %s" % (COVE, sid))
        assert wait_until(lambda: any(t.lines()), 15), "no prompt"
        t("send-keys", "-t", "t", "X=kept; cd /tmp; echo ready$((1+1))", "Enter")
        t.wait_line("ready2")
        st, procs = cv.api("GET", "/v1/sandboxes/%s/processes" % sid)
        term = [p for p in procs["processes"] if p["tty"] and p["state"] == "running"]
        assert len(term) == 1, procs
        st, sn = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {"memory": True})
        assert st == 201, sn
        snap = sn["id"]
        # the original terminal goes on
        t("send-keys", "-t", "t", "echo still$((2+2))", "Enter")
        t.wait_line("still4")
        st, j = cv.api("POST", "/v1/snapshots/%s/restore" % snap, {})
        assert st == 201, j
        copy = j["id"]
        st, procs = cv.api("GET", "/v1/sandboxes/%s/processes" % copy)
        assert [p["pid"] for p in procs["processes"] if p["tty"] and p["state"] == "running"] == [term[0]["pid"]], procs
        t2.start(cv, "%s shell --attach %d %s; echo status=$? > %s/status" % (COVE, term[0]["pid"], copy, t2.dir))
        t2("send-keys", "-t", "t", "echo $X:$PWD:$((3*3))", "Enter")
        t2.wait_line("kept:/tmp:9")
        t2("send-keys", "-t", "t", "exit 4", "Enter")
        assert wait_until(lambda: t2.read("status"), 15), t2.lines()
        assert t2.read("status") == "status=4"
    finally:
        t.kill()
        t2.kill()
        for s in (copy, sid):
            if s:
                cv.api("DELETE", "/v1/sandboxes/" + s)
        if snap:
            cv.api("DELETE", "/v1/snapshots/" + snap)


def test_template_from_a_memory_snapshot(cv):
    """A template made from a memory snapshot creates sandboxes whose
    processes are already running: the counter goes on in each."""
    sid = cv.create(network="none")
    _bg(cv, sid, ["sh", "-c", COUNTER], tag="counter")
    assert wait_until(lambda: _count(cv, sid) >= 5, 30)
    before = _count(cv, sid)
    st, sn = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {"memory": True})
    assert st == 201, sn
    name = "memsnap-%d" % os.getpid()
    made = []
    try:
        st, t = cv.api("POST", "/v1/templates", {"name": name, "from_snapshot": sn["id"]})
        assert st == 201, (st, t)
        for _ in range(2):
            st, sb = cv.api("POST", "/v1/sandboxes", {"template": name})
            assert st == 201, (st, sb)
            made.append(sb["id"])
            first = _count(cv, sb["id"])
            assert first >= before and wait_until(lambda: _count(cv, sb["id"]) > first, 30), (first, before)
            st, procs = cv.api("GET", "/v1/sandboxes/%s/processes" % sb["id"])
            assert "counter" in [p.get("tag") for p in procs["processes"]], procs
    finally:
        for s in made + [sid]:
            cv.api("DELETE", "/v1/sandboxes/" + s)
        cv.api("DELETE", "/v1/templates/" + name)
        cv.api("DELETE", "/v1/snapshots/" + sn["id"])


# ---- archive with memory (the lifecycle's archive keeps the processes) ----

def _archives(cv, sid=""):
    return os.path.join(cv.data, "pool", "archives", sid)


def _archived_with_memory(cv, sid, j):
    assert j["state"] == "archived" and j["memory_kept"] is True and "memory_note" not in j, j
    assert os.path.isfile(os.path.join(_archives(cv, sid), "inventory.img"))
    assert wait_until(lambda: not covetest.cgroup_dirs(sid), 10), covetest.cgroup_dirs(sid)


def test_archive_keeps_processes_until_the_wake(cv):
    from test_lifecycle import _Events
    sid = _start_workload(cv)
    ev = _Events(cv, "?sandbox=" + sid)
    try:
        before = _count(cv, sid)
        st, j = cv.api("POST", "/v1/sandboxes/%s/archive" % sid, {})
        assert st == 200, (st, j)
        _archived_with_memory(cv, sid, j)
        assert _info(cv, sid)["memory_kept"] is True
        # the next request wakes it: its processes go on, its images go
        _continues(cv, sid, before)
        assert not os.path.exists(_archives(cv, sid))
        j = _info(cv, sid)
        assert j["state"] == "running" and "memory_kept" not in j and "memory_note" not in j, j
        assert wait_until(lambda: len(ev.states(sid)) >= 2, 20), ev.lines
        mem = [(e["state"], e.get("memory_kept")) for e in ev.lines if e.get("type") == "state"]
        assert mem[:2] == [("archived", True), ("running", True)], ev.lines
        # memory false: the processes end; so they are gone after the wake
        before = _count(cv, sid)
        st, j = cv.api("POST", "/v1/sandboxes/%s/archive" % sid, {"memory": False})
        assert st == 200 and j["memory_kept"] is False and '"memory": false' in j["memory_note"], j
        assert not os.path.exists(_archives(cv, sid))
        assert _count(cv, sid) == 0  # /dev/shm went with them
        st, procs = cv.api("GET", "/v1/sandboxes/%s/processes" % sid)
        assert not [p for p in procs["processes"] if p["state"] == "running"], procs
        # bad input changes nothing
        for bad in ({"memory": "yes"}, {"memory": None}, {"now": True}):
            st, j = cv.api("POST", "/v1/sandboxes/%s/archive" % sid, bad)
            assert st == 400 and _info(cv, sid)["state"] == "running", (bad, st, j)
        # the CLI: kept by default, --no-memory ends them; cove info says which
        _bg(cv, sid, ["sh", "-c", COUNTER], tag="counter")
        assert wait_until(lambda: _count(cv, sid) >= 3, 30)
        r = cv.cli("archive", sid)
        assert r.returncode == 0 and r.stdout.decode() == "%s archived (memory kept)\n" % sid, r
        assert json.loads(cv.cli("info", sid).stdout)["memory_kept"] is True
        n = _count(cv, sid)
        assert n >= 3 and wait_until(lambda: _count(cv, sid) > n, 30)
        r = cv.cli("archive", "--no-memory", sid)
        assert r.returncode == 0 and "archived (memory not kept: " in r.stdout.decode(), r
        assert json.loads(cv.cli("info", sid).stdout)["memory_kept"] is False
        # a sandbox with nothing running but cove-init has nothing to keep
        st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["true"]})
        st, j = cv.api("POST", "/v1/sandboxes/%s/archive" % sid, {"memory": True})
        assert st == 200 and j["memory_kept"] is False and "nothing ran" in j["memory_note"], j
        assert not os.path.exists(_archives(cv, sid))
        # deleted while archived with memory: its images go too
        _bg(cv, sid, ["sh", "-c", COUNTER], tag="counter")
        assert wait_until(lambda: _count(cv, sid) >= 1, 30)
        st, j = cv.api("POST", "/v1/sandboxes/%s/archive" % sid, {"memory": True})
        assert st == 200 and j["memory_kept"] is True, j
        assert os.path.isdir(_archives(cv, sid))
    finally:
        ev.close()
        cv.api("DELETE", "/v1/sandboxes/" + sid)
    assert wait_until(lambda: not os.path.exists(_archives(cv, sid)), 20), os.listdir(_archives(cv))


def test_a_restored_tree_is_saved_again(cv):
    """A woken sandbox's processes (restored by criu) archive with memory
    again, and a restored copy snapshots with memory (criu as
    scripts/criu.sh patches it)."""
    sid = _start_workload(cv)
    try:
        for _ in range(2):
            before = _count(cv, sid)
            st, j = cv.api("POST", "/v1/sandboxes/%s/archive" % sid, {})
            assert st == 200, (st, j)
            _archived_with_memory(cv, sid, j)
            _continues(cv, sid, before)
        st, sn = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {"memory": True})
        assert st == 201 and sn["memory"] is True, (st, sn)
        cv.api("DELETE", "/v1/snapshots/" + sn["id"])
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_archive_with_memory_keeps_the_start_command_running(cv):
    from test_lifecycle import started_once
    sid, starts = started_once(cv)
    try:
        pid = [p for p in _ps(cv, sid) if p[1] == "sleep 100000"]
        st, j = cv.api("POST", "/v1/sandboxes/%s/archive" % sid, {})
        assert st == 200 and j["memory_kept"] is True, j
        # woken: the same sleep, and the start command not run again
        assert starts() == "1" and [p for p in _ps(cv, sid) if p[1] == "sleep 100000"] == pid
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def _ps(cv, sid):
    out = cv.sh(sid, "ps -eo pid=,args=")["stdout"].splitlines()
    return [tuple(line.strip().split(None, 1)) for line in out if line.strip()]


def test_automatic_archives_keep_processes(_cv):
    """archive_after (a paused sandbox archived by its timer) and --max-active
    (the least recently used paused one archived for a slot) keep them too."""
    cv = covetest.Coved(args=["--max-active", "2"]).start()
    try:
        assert wait_until(lambda: _native(cv)["capabilities"]["nativeSnapshot"], 60), _native(cv)
        a = _start_workload(cv)
        before = _count(cv, a)
        assert cv.api("POST", "/v1/sandboxes/%s/pause" % a)[0] == 200
        b = cv.create()
        third = cv.create()  # a's slot is taken from it
        j = _info(cv, a)
        assert j["state_reason"] == "slots", j
        _archived_with_memory(cv, a, j)
        assert cv.api("DELETE", "/v1/sandboxes/" + b)[0] == 200
        _continues(cv, a, before)
        assert not os.path.exists(_archives(cv, a))
        # archive_after
        for s in (a, third):
            cv.api("DELETE", "/v1/sandboxes/" + s)
        c = cv.create(idle_timeout=0, archive_after=1)
        _bg(cv, c, ["sh", "-c", COUNTER], tag="counter")
        assert wait_until(lambda: _count(cv, c) >= 3, 30)
        before = _count(cv, c)
        assert cv.api("POST", "/v1/sandboxes/%s/pause" % c)[0] == 200
        assert wait_until(lambda: _info(cv, c)["state"] == "archived", 30), _info(cv, c)
        j = _info(cv, c)
        assert j["state_reason"] == "idle" and j["memory_kept"] is True, j
        n = _count(cv, c)
        assert n >= before and wait_until(lambda: _count(cv, c) > n, 30), (n, before)
    finally:
        cv.teardown()


def test_archive_of_what_criu_cannot_save(cv):
    """Explicit memory: a 409 that changes nothing. Automatic: archived all
    the same, its files intact, the reason told; the wake starts it afresh."""
    sid = cv.create(network="none", idle_timeout=0, archive_after=1)
    try:
        assert cv.sh(sid, "head -c 100000 /dev/urandom > /root/blob && sha256sum /root/blob > /root/sum")[
            "exit_code"] == 0
        _bg(cv, sid, ["sh", "-c", COUNTER], tag="counter")
        _bg(cv, sid, ["python3", "-c", TRACER], tag="tracer")
        assert wait_until(lambda: "tracing" in _attach_stdout(cv, sid, "tracer", "tracing", 10), 30)
        st, j = cv.api("POST", "/v1/sandboxes/%s/archive" % sid, {"memory": True})
        assert st == 409 and "cannot be saved" in j["error"]["message"] and "traced" in j["error"]["message"], j
        assert _info(cv, sid)["state"] == "running" and not os.path.exists(_archives(cv, sid))
        n = _count(cv, sid)
        assert wait_until(lambda: _count(cv, sid) > n, 30)
        # automatic: archive_after once paused
        assert cv.api("POST", "/v1/sandboxes/%s/pause" % sid)[0] == 200
        assert wait_until(lambda: _info(cv, sid)["state"] == "archived", 60), _info(cv, sid)
        j = _info(cv, sid)
        assert j["memory_kept"] is False and "traced" in j["memory_note"], j
        assert not os.path.exists(_archives(cv, sid)) and not covetest.cgroup_dirs(sid)
        assert "traced" in cv.read_log()
        r = cv.sh(sid, "sha256sum -c /root/sum")
        assert r["exit_code"] == 0, r
        st, procs = cv.api("GET", "/v1/sandboxes/%s/processes" % sid)
        assert not [p for p in procs["processes"] if p["state"] == "running"], procs
        # an external sandbox: no memory, as for a snapshot
        ext = cv.create(isolation="external")
        st, j = cv.api("POST", "/v1/sandboxes/%s/archive" % ext, {"memory": True})
        assert st == 409 and "external" in j["error"]["message"], j
        st, j = cv.api("POST", "/v1/sandboxes/%s/archive" % ext, {})
        assert st == 200 and j["memory_kept"] is False, j
        cv.api("DELETE", "/v1/sandboxes/" + ext)
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_wake_whose_restore_fails_starts_afresh(cv):
    sid = cv.create(start="echo up >> /root/starts; exec sleep 100000")
    try:
        assert wait_until(lambda: cv.sh(sid, "wc -l < /root/starts")["stdout"].strip() == "1", 30)
        _bg(cv, sid, ["sh", "-c", COUNTER], tag="counter")
        assert wait_until(lambda: _count(cv, sid) >= 1, 30)
        st, j = cv.api("POST", "/v1/sandboxes/%s/archive" % sid, {})
        assert st == 200 and j["memory_kept"] is True, j
        os.unlink(os.path.join(_archives(cv, sid), "inventory.img"))
        # the wake: cove-init and the start command again, the files there
        assert wait_until(lambda: cv.sh(sid, "wc -l < /root/starts")["stdout"].strip() == "2", 30)
        j = _info(cv, sid)
        assert j["state"] == "running" and "could not be restored" in j["memory_note"], j
        assert not os.path.exists(_archives(cv, sid))
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def _post_quietly(cv, sid, verb, body):
    try:
        cv.api("POST", "/v1/sandboxes/%s/%s" % (sid, verb), body)
    except Exception:  # coved was killed under it
        pass


def _after_kill(cv, sid, tree, at_least, what, problems):
    """After a restart: running or archived (with its images, then, and no
    cgroup), no half image anywhere, the files whole, the counter on from
    at_least."""
    from test_lifecycle import _digest
    st, j = cv.api("GET", "/v1/sandboxes/" + sid)
    left = sorted(os.listdir(_archives(cv))) if os.path.isdir(_archives(cv)) else []
    if j["state"] not in ("running", "archived"):
        problems.append("%s: state %s" % (what, j["state"]))
    if j["state"] == "archived" and (j.get("memory_kept") is not True or left != [sid]):
        problems.append("%s: archived, memory_kept %s, images %s" % (what, j.get("memory_kept"), left))
    if j["state"] == "archived" and not wait_until(lambda: not covetest.cgroup_dirs(sid), 10):
        problems.append("%s: archived but has cgroups %s" % (what, covetest.cgroup_dirs(sid)))
    if j["state"] == "running" and left:
        problems.append("%s: running, images left: %s" % (what, left))
    try:
        if _digest(cv, sid) != tree:
            problems.append("%s: the file tree changed" % what)
        n = _count(cv, sid)
        if n < at_least or not wait_until(lambda: _count(cv, sid) > n, 30):
            problems.append("%s: the counter is at %d (was %d) or stopped; log: %s" % (
                what, n, at_least, cv.read_log()[-1500:]))
    except (AssertionError, OSError) as e:  # a failed or hung request
        problems.append("%s (%s): %r; log: %s" % (what, j["state"], e, cv.read_log()[-3000:]))
    if os.path.isdir(_archives(cv)) and os.listdir(_archives(cv)):
        problems.append("%s: images left after the wake: %s" % (what, os.listdir(_archives(cv))))


def test_sigkill_during_archive_and_wake_with_memory(_cv):
    """coved SIGKILLed at 10 random points of an archive with memory and of
    the wake from one each (COVE_CRASH_SEED, printed, replays a run): after
    the restart the sandbox is running or archived with its images, never a
    half image (written aside, renamed into place once synced), its files
    whole, and its processes on: the counter goes on from its value."""
    import random
    import threading
    import time
    from test_lifecycle import _tree
    cv = covetest.Coved().start()
    problems = []
    seed = int(os.environ.get("COVE_CRASH_SEED", time.time()))
    rnd = random.Random(seed)
    try:
        assert wait_until(lambda: _native(cv)["capabilities"]["nativeSnapshot"], 60), _native(cv)
        sid = cv.create()
        tree = _tree(cv, sid)
        _bg(cv, sid, ["sh", "-c", COUNTER], tag="counter")
        assert wait_until(lambda: _count(cv, sid) >= 3, 30)
        # How long each takes here: the kills land within that.
        t0 = time.time()
        assert cv.api("POST", "/v1/sandboxes/%s/archive" % sid, {})[1]["memory_kept"] is True
        took = {"archive": time.time() - t0}
        t0 = time.time()
        assert cv.exec(sid, ["true"])["exit_code"] == 0
        took["wake"] = time.time() - t0
        for name, verb, body in (("archive", "archive", {}), ("wake", "exec", {"cmd": ["true"]})):
            for trial in range(10):
                # A tree started afresh each time (a restored one is not
                # dumped again: see memarchive.c).
                st, j = cv.api("POST", "/v1/sandboxes/%s/reboot" % sid)
                assert st == 200, (st, j)
                _bg(cv, sid, ["sh", "-c", COUNTER], tag="counter")
                assert wait_until(lambda: _count(cv, sid) >= 3, 30)
                at_least = _count(cv, sid)
                if name == "wake":
                    st, j = cv.api("POST", "/v1/sandboxes/%s/archive" % sid, {})
                    assert st == 200 and j["memory_kept"] is True, (st, j)
                t = threading.Thread(target=_post_quietly, args=(cv, sid, verb, body), daemon=True)
                t.start()
                time.sleep(rnd.uniform(0, took[name] * 1.2))
                cv.kill()
                t.join(60)
                cv.start()
                _after_kill(cv, sid, tree, at_least, "%s #%d" % (name, trial), problems)
        print("# archive %.0f ms, wake %.0f ms; COVE_CRASH_SEED=%d" % (
            took["archive"] * 1000, took["wake"] * 1000, seed))
        assert not problems, "COVE_CRASH_SEED=%d: %s" % (seed, problems)
    finally:
        cv.teardown()


def _restart(cv, criu=None):
    """Stop cv and start it again on its data root, with COVE_CRIU=criu
    when given."""
    cv.kill(signal.SIGTERM)
    old = os.environ.get("COVE_CRIU")
    if criu:
        os.environ["COVE_CRIU"] = criu
    try:
        cv.start()
    finally:
        if old is None:
            os.environ.pop("COVE_CRIU", None)
        else:
            os.environ["COVE_CRIU"] = old


def test_selftest_verdict_kept_for_the_same_criu_kernel_and_build(_cv):
    """The self-test's verdict is kept in the data root's run directory,
    keyed by the criu binary, the kernel and cove's build: a restart uses
    it (a pass only: a failure runs it again), another criu runs the
    self-test again."""
    cv = covetest.Coved().start()
    ran = re.compile(r"self-test ran: ok in \d+ ms \((\S+) works\)")
    kept = os.path.join(cv.data, "run", "criu-selftest")
    try:
        assert wait_until(lambda: ran.search(cv.read_log()), 60), cv.read_log()
        criu = ran.search(cv.read_log()).group(1)
        _restart(cv)
        assert wait_until(lambda: "self-test: kept verdict from" in cv.read_log(), 30), cv.read_log()
        assert len(ran.findall(cv.read_log())) == 1, cv.read_log()
        assert _native(cv)["capabilities"]["nativeSnapshot"] is True
        sid = cv.create(network="none")
        st, sn = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {"memory": True})
        assert st == 201 and sn["memory"] is True, (st, sn)
        assert cv.api("DELETE", "/v1/snapshots/" + sn["id"])[0] == 200
        # A failure is not kept (it may be passing trouble): a "failed"
        # verdict for the same key (as a coved of before wrote) is not used,
        # the self-test runs again and passes.
        with open(kept) as f:
            key = f.readline()
        with open(kept, "w") as f:
            f.write(key + "1796000000\nfailed: the verdict this test kept\n")
        _restart(cv)
        assert wait_until(lambda: len(ran.findall(cv.read_log())) == 2, 60), cv.read_log()
        assert _native(cv)["capabilities"]["nativeSnapshot"] is True
        with open(kept) as f:
            assert f.readline() == key and f.read().endswith("\nok\n")
        # Another criu binary (a copy: another inode and mtime) is another
        # key: the self-test runs again, and passes.
        copy = os.path.join(cv.dir, "criu")
        shutil.copy(criu, copy)
        os.utime(copy, (1700000000, 1700000000))
        _restart(cv, copy)
        assert wait_until(lambda: len(ran.findall(cv.read_log())) == 3, 60), cv.read_log()
        assert ran.findall(cv.read_log())[2] == copy
        assert _native(cv)["capabilities"]["nativeSnapshot"] is True
        with open(kept) as f:
            assert f.readline().startswith("criu %s " % copy) and f.read().endswith("\nok\n")
    finally:
        cv.teardown()

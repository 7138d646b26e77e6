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
    the server; same hostname, its own uid range and address."""
    first = _count(cv, sid)
    assert first >= at_least, (sid, first, at_least)
    assert wait_until(lambda: _count(cv, sid) > first, 30), "the counter stopped"
    st, procs = cv.api("GET", "/v1/sandboxes/%s/processes" % sid)
    tags = {p.get("tag") for p in procs["processes"] if p["state"] == "running"}
    assert {"counter", "repl", "web"} <= tags, procs
    r = cv.sh(sid, ["python3", "-c", ASK])
    assert r["exit_code"] == 0 and r["stdout"].strip() == origin, r
    assert cv.sh(sid, "hostname")["stdout"].strip() == origin
    _stdin(cv, sid, "repl", "print(x + 1)\n")
    assert "42\n" in _attach_stdout(cv, sid, "repl", "42\n")
    assert _uid_map(cv, sid) != _uid_map(cv, origin)
    assert _info(cv, sid)["uid_base"] != _info(cv, origin)["uid_base"]


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
    it (a kept failure too, for that key only), another criu runs the
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
        # A failure kept for the same key is used as well: its reason is
        # the one kept, memory requests are a 409 with it.
        with open(kept) as f:
            key = f.readline()
        with open(kept, "w") as f:
            f.write(key + "1796000000\nfailed: the verdict this test kept\n")
        _restart(cv)
        caps = wait_until(lambda: "kept" in _native(cv).get("nativeSnapshotReason", "") and _native(cv), 30)
        assert caps["capabilities"]["nativeSnapshot"] is False, caps
        assert caps["nativeSnapshotReason"] == "the verdict this test kept", caps
        st, j = cv.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {"memory": True})
        assert st == 409 and "the verdict this test kept" in j["error"]["message"], (st, j)
        assert len(ran.findall(cv.read_log())) == 1, cv.read_log()
        # Another criu binary (a copy: another inode and mtime) is another
        # key: the self-test runs again, and passes.
        copy = os.path.join(cv.dir, "criu")
        shutil.copy(criu, copy)
        os.utime(copy, (1700000000, 1700000000))
        _restart(cv, copy)
        assert wait_until(lambda: len(ran.findall(cv.read_log())) == 2, 60), cv.read_log()
        assert ran.findall(cv.read_log())[1] == copy
        assert _native(cv)["capabilities"]["nativeSnapshot"] is True
        with open(kept) as f:
            assert f.readline().startswith("criu %s " % copy) and f.read().endswith("\nok\n")
    finally:
        cv.teardown()

"""A sandbox's lifecycle (issue 17, items 1-6): running, paused (its cgroup
frozen, memory kept), archived (files only); pause, resume, archive, wake
(any request that needs the sandbox), reboot; idle sleep; --max-active
slots; on_timeout; the event stream. Whole file trees (content, modes,
owners, times, symlinks, xattrs) are compared before and after each
transition, and again with coved SIGKILLed in the middle of each one."""
import json
import os
import random
import threading
import time

import covetest
from covetest import wait_until

TREE = ("mkdir -p /data/d/sub /data/empty && cd /data && head -c 300000 /dev/urandom > blob && "
        "echo hello > d/a && chmod 640 d/a && chown 1000:1000 d/a && chown 12:34 d/sub && chmod 1777 d/sub && "
        "ln -s d/a link && ln -s /nowhere dangling && touch -h -d @1000000000 d/a link && "
        "python3 -c \"import os; os.setxattr('/data/blob', 'user.cove', b'kept'); "
        "os.setxattr('/data/d', 'user.empty', b'')\" && "
        "for i in $(seq 1 200); do echo $i > d/sub/f$i; done")

# Everything of /data: type and mode, owner, mtime, size and sha256 or link
# target, xattrs; one JSON object.
DIGEST = r"""python3 -c '
import hashlib, json, os, stat
out = {}
for root, dirs, files in os.walk("/data"):
    for n in [""] + dirs + files:
        p = os.path.join(root, n) if n else root
        st = os.lstat(p)
        e = [st.st_mode, st.st_uid, st.st_gid, int(st.st_mtime)]
        if stat.S_ISLNK(st.st_mode):
            e.append(os.readlink(p))
        elif stat.S_ISREG(st.st_mode):
            e.append(hashlib.sha256(open(p, "rb").read()).hexdigest())
        try:
            e.append(sorted([k, os.getxattr(p, k, follow_symlinks=False).hex()]
                            for k in os.listxattr(p, follow_symlinks=False)))
        except OSError:
            e.append("no-xattrs")
        out[p] = e
print(json.dumps(out, sort_keys=True))
'"""

COUNTER = ("setsid sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/count; sleep 0.05; done' "
           ">/dev/null 2>&1 </dev/null &")


def _info(cv, sid):
    st, j = cv.api("GET", "/v1/sandboxes/" + sid)
    assert st == 200, (st, j)
    return j


def _state(cv, sid):
    return _info(cv, sid)["state"]


def _digest(cv, sid):
    r = cv.exec(sid, DIGEST)
    assert r["exit_code"] == 0, r
    d = json.loads(r["stdout"])
    assert len(d) > 200 and "/data/d/sub/f200" in d, sorted(d)[:5]
    return d


def _tree(cv, sid):
    r = cv.exec(sid, TREE)
    assert r["exit_code"] == 0, r
    d = _digest(cv, sid)
    assert d["/data/blob"][-1] == [["user.cove", b"kept".hex()]], d["/data/blob"]
    assert d["/data/d/a"][1:3] == [1000, 1000] and d["/data/link"][-2] == "d/a", (d["/data/d/a"], d["/data/link"])
    return d


def _upper(cv, sid, path):
    """A file of the sandbox read from the host (its overlay's upper layer):
    no request to the sandbox, which would wake it."""
    try:
        with open(os.path.join(cv.data, "pool", "sandboxes", sid, "upper", "root", path.lstrip("/"))) as f:
            return f.read()
    except OSError:
        return ""


def _count(cv, sid):
    """The counter's value (0 while it is being written)."""
    try:
        return int(_upper(cv, sid, "/tmp/count"))
    except ValueError:
        return 0


def _cpu_ns(sid):
    with open("/sys/fs/cgroup/cpuacct/cove/%s/cpuacct.usage" % sid) as f:
        return int(f.read())


def _freezer(sid):
    try:
        with open("/sys/fs/cgroup/freezer/cove/%s/freezer.state" % sid) as f:
            return f.read().strip()
    except OSError:
        return None


def _post(cv, sid, verb, body=None):
    return cv.api("POST", "/v1/sandboxes/%s/%s" % (sid, verb), body)


def test_pause_freezes_keeps_files_and_wakes(coved):
    sid = coved.create()
    try:
        tree = _tree(coved, sid)
        assert coved.exec(sid, COUNTER)["exit_code"] == 0
        assert wait_until(lambda: _count(coved, sid) > 3, 20)
        st, j = _post(coved, sid, "pause")
        assert st == 200 and j["state"] == "paused" and j["state_reason"] == "user", (st, j)
        assert _freezer(sid) == "FROZEN"
        # Paused: no CPU used, the counter stands still (5 s, however loaded the host).
        cpu, count = _cpu_ns(sid), _upper(coved, sid, "/tmp/count")
        time.sleep(5)
        assert _cpu_ns(sid) == cpu and _upper(coved, sid, "/tmp/count") == count, (cpu, count)
        # Bad input changes nothing: a second pause, an unknown transition.
        st, j = _post(coved, sid, "pause")
        assert st == 409 and j["error"]["code"] == "wrong_state", (st, j)
        st, j = _post(coved, sid, "hibernate")
        assert st == 404, (st, j)
        st, j = _post(coved, sid, "pause", {"now": True})
        assert st == 400, (st, j)
        assert _state(coved, sid) == "paused" and _freezer(sid) == "FROZEN"
        # GET of its metadata does not wake it; an exec does, and the tree is whole.
        assert _info(coved, sid)["state_reason"] == "user"
        assert _digest(coved, sid) == tree
        j = _info(coved, sid)
        assert j["state"] == "running" and j["state_reason"] == "request", j
        assert wait_until(lambda: _upper(coved, sid, "/tmp/count") != count, 20), "the counter did not go on"
        assert int(_upper(coved, sid, "/tmp/count")) > int(count)
        # resume of a running sandbox: 409; pause then resume by hand.
        assert _post(coved, sid, "resume")[0] == 409
        assert _post(coved, sid, "pause")[0] == 200 and _post(coved, sid, "resume")[1]["state"] == "running"
        assert _freezer(sid) == "THAWED" and _digest(coved, sid) == tree
        # A paused sandbox is deleted whole: its frozen processes die too.
        assert _post(coved, sid, "pause")[0] == 200
        assert coved.api("DELETE", "/v1/sandboxes/" + sid)[0] == 200
        assert wait_until(lambda: not covetest.cgroup_dirs(sid), 20), covetest.cgroup_procs(sid)
    finally:
        coved.api("DELETE", "/v1/sandboxes/" + sid)


def test_bad_lifecycle_fields_change_nothing(coved):
    before = coved.api("GET", "/v1/sandboxes")[1]["sandboxes"]
    for bad in ({"idle_timeout": -1}, {"archive_after": -5}, {"idle_timeout": 1.5}, {"on_timeout": "explode"},
                {"idle_timeout": "10"}, {"timeout": -3}):
        st, j = coved.api("POST", "/v1/sandboxes", bad)
        assert st == 400 and j["error"]["code"] == "invalid_argument", (bad, st, j)
    assert coved.api("GET", "/v1/sandboxes")[1]["sandboxes"] == before
    sid = coved.create(idle_timeout=0, archive_after=7, on_timeout="archive")
    try:
        j = _info(coved, sid)
        assert (j["idle_timeout"], j["archive_after"], j["on_timeout"]) == (0, 7, "archive"), j
        assert j["state"] == "running" and j["state_changed_at"] > 0, j
    finally:
        coved.api("DELETE", "/v1/sandboxes/" + sid)


def _attach_open(cv, sid, pid):
    """An attach stream held open (a client at a terminal) until closed."""
    c = cv.conn(120)
    c.request("GET", "/v1/sandboxes/%s/processes/%s/attach" % (sid, pid))
    r = c.getresponse()
    assert r.status == 200, r.status
    return c


def test_idle_rules(coved):
    """idle_timeout 2: a waiting http.server alone is paused; a busy loop, a
    keep_awake process and an attached terminal keep theirs awake."""
    ids = {k: coved.create(idle_timeout=2) for k in ("server", "busy", "keep", "tty")}
    conn = None
    try:
        for k, sid in ids.items():
            assert coved.exec(sid, "echo %s > /root/which" % k)["exit_code"] == 0
        tree = _tree(coved, ids["server"])
        st, j = _post(coved, ids["server"], "exec", {"cmd": "cd /tmp && exec python3 -m http.server 8000",
                                                     "background": True})
        assert st == 200, (st, j)
        for _ in range(2):  # two, for a fair share above 1% of a CPU on a host loaded with others' work
            assert _post(coved, ids["busy"], "exec", {"cmd": "while :; do :; done", "background": True})[0] == 200
        assert _post(coved, ids["keep"], "exec", {"cmd": "sleep 100000", "background": True,
                                                  "keep_awake": True})[0] == 200
        st, j = _post(coved, ids["tty"], "exec", {"cmd": "sh", "tty": True})
        assert st == 200, (st, j)
        conn = _attach_open(coved, ids["tty"], j["pid"])
        assert wait_until(lambda: _state(coved, ids["server"]) == "paused", 60), _info(coved, ids["server"])
        assert _info(coved, ids["server"])["state_reason"] == "idle"
        # Well past two idle timeouts since the server's sandbox slept.
        time.sleep(6)
        for k in ("busy", "keep", "tty"):
            assert _state(coved, ids[k]) == "running", (k, _info(coved, ids[k]))
        # The wait is over for the terminal once its client leaves.
        conn.close()
        conn = None
        assert wait_until(lambda: _state(coved, ids["tty"]) == "paused", 60), _info(coved, ids["tty"])
        # A request wakes the sleeping server, which still serves.
        r = coved.exec(ids["server"], "python3 -c \"import urllib.request as u; "
                                      "print(u.urlopen('http://127.0.0.1:8000/').status)\"")
        assert r["stdout"].strip() == "200", r
        assert _state(coved, ids["server"]) == "running" and _digest(coved, ids["server"]) == tree
        # keep_awake is for kept processes only.
        st, j = _post(coved, ids["keep"], "exec", {"cmd": "true", "keep_awake": True})
        assert st == 400, (st, j)
    finally:
        if conn:
            conn.close()
        for sid in ids.values():
            coved.api("DELETE", "/v1/sandboxes/" + sid)


class _Events:
    """GET /v1/events read on a thread, its lines kept."""

    def __init__(self, cv, query=""):
        self.lines = []
        self.conn = cv.conn(300)
        self.conn.request("GET", "/v1/events" + query)
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.status
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for line in self.resp:
                self.lines.append(json.loads(line))
        except Exception:  # the stream closed under the reader
            pass

    def states(self, sid):
        return [(e["state"], e["reason"]) for e in self.lines if e.get("type") == "state" and e["id"] == sid]

    def close(self):
        self.conn.close()


def test_archive_and_wake_keep_files_and_stream_events(coved):
    sid = coved.create()
    other = coved.create()
    ev = _Events(coved, "?sandbox=%s&keepalive=1" % sid)
    try:
        tree = _tree(coved, sid)
        st, j = _post(coved, sid, "exec", {"cmd": "sleep 100000", "background": True, "tag": "sleeper"})
        assert st == 200, (st, j)
        # Without its processes' memory (test_memsnap archives with it).
        st, j = _post(coved, sid, "archive", {"memory": False})
        assert st == 200 and j["state"] == "archived" and j["state_reason"] == "user", (st, j)
        assert j["memory_kept"] is False and '"memory": false' in j["memory_note"], j
        assert wait_until(lambda: not covetest.cgroup_dirs(sid), 10), covetest.cgroup_dirs(sid)
        assert _post(coved, sid, "archive")[0] == 409
        assert _post(coved, sid, "resume")[0] == 409
        assert _state(coved, sid) == "archived"
        # The next request brings it back: its files, not its processes.
        assert _digest(coved, sid) == tree
        assert _state(coved, sid) == "running" and covetest.cgroup_dirs(sid)
        ps = coved.exec(sid, ["ps", "-eo", "args"])["stdout"]
        assert "sleep 100000" not in ps, ps
        _post(coved, other, "pause")
        assert _post(coved, sid, "pause")[0] == 200
        assert _digest(coved, sid) == tree
        assert wait_until(lambda: len(ev.states(sid)) >= 4 and any(e.get("type") == "keepalive"
                                                                    for e in ev.lines), 20), ev.lines
        assert ev.states(sid)[:4] == [("archived", "user"), ("running", "request"), ("paused", "user"),
                                      ("running", "request")], ev.lines
        assert other not in [e.get("id") for e in ev.lines], "the filter let another sandbox's events through"
        assert coved.api("GET", "/v1/events?sandbox=sb_aaaaaaaaaaaa")[0] == 404
        assert coved.api("GET", "/v1/events?keepalive=0")[0] == 400
    finally:
        ev.close()
        coved.api("DELETE", "/v1/sandboxes/" + sid)
        coved.api("DELETE", "/v1/sandboxes/" + other)


def test_reboot_keeps_files_id_limits_and_policy(coved):
    sid = coved.create(memory="300M", pids=200, deny_out=["192.0.2.0/24"], allow_out=["198.51.100.7"])
    try:
        tree = _tree(coved, sid)
        assert _post(coved, sid, "exec", {"cmd": "sleep 100000", "background": True})[0] == 200
        before = _info(coved, sid)
        st, j = _post(coved, sid, "reboot")
        assert st == 200 and j["state"] == "running" and j["id"] == sid, (st, j)
        assert j["init_pid"] != before["init_pid"]
        for k in ("memory", "pids", "cpus", "created_at", "name", "workdir"):
            assert j[k] == before[k], (k, before[k], j[k])
        for k in ("mode", "allow_out", "deny_out"):
            assert j["network"][k] == before["network"][k], (k, before["network"], j["network"])
        assert coved.api("GET", "/v1/sandboxes/%s/processes" % sid)[1]["processes"] == []
        ps = coved.exec(sid, ["ps", "-eo", "args"])["stdout"]
        assert "sleep 100000" not in ps and "cove-init" in ps, ps
        assert _digest(coved, sid) == tree
        # An archived sandbox's policy can change: its wake puts it in force.
        assert _post(coved, sid, "archive")[0] == 200
        st, j = coved.api("PUT", "/v1/sandboxes/%s/network" % sid, {"deny_out": ["203.0.113.0/24"]})
        assert st == 200 and j["state"] == "archived" and j["network"]["deny_out"] == ["203.0.113.0/24"], (st, j)
        st, j = coved.api("PUT", "/v1/sandboxes/%s/network" % sid, {"deny_out": ["not an address"]})
        assert st == 400 and _info(coved, sid)["network"]["deny_out"] == ["203.0.113.0/24"], (st, j)
        assert _digest(coved, sid) == tree
        j = _info(coved, sid)
        assert j["state"] == "running" and j["network"]["deny_out"] == ["203.0.113.0/24"], j
        assert j["network"]["allow_out"] == [] and j["network"].get("address"), j["network"]
        # A paused or archived sandbox reboots into running too.
        assert _post(coved, sid, "pause")[0] == 200 and _post(coved, sid, "reboot")[1]["state"] == "running"
        assert _post(coved, sid, "archive")[0] == 200 and _post(coved, sid, "reboot")[1]["state"] == "running"
        assert _digest(coved, sid) == tree
    finally:
        coved.api("DELETE", "/v1/sandboxes/" + sid)


def started_once(coved):
    """A sandbox whose start command counts its runs in /root/starts, then
    sleeps; and how to read that count. Returns once it ran once."""
    sid = coved.create(start="echo up >> /root/starts; exec sleep 100000")

    def starts():
        return coved.exec(sid, "cat /root/starts 2>/dev/null | wc -l")["stdout"].strip()
    assert wait_until(lambda: starts() == "1", 30), starts()
    return sid, starts


def test_wake_and_reboot_run_the_start_command_again(coved):
    sid, starts = started_once(coved)
    try:
        assert _post(coved, sid, "archive", {"memory": False})[0] == 200
        assert wait_until(lambda: starts() == "2", 30), starts()  # the exec woke it; the start ran again
        assert _post(coved, sid, "reboot")[0] == 200
        assert wait_until(lambda: starts() == "3", 30), starts()
        assert "sleep 100000" in coved.exec(sid, ["ps", "-eo", "args"])["stdout"]
        # A pause keeps the processes: nothing starts again.
        assert _post(coved, sid, "pause")[0] == 200 and starts() == "3"
    finally:
        coved.api("DELETE", "/v1/sandboxes/" + sid)


def test_archive_after_a_pause(coved):
    sid = coved.create(idle_timeout=0, archive_after=1)
    try:
        tree = _tree(coved, sid)
        assert _post(coved, sid, "pause")[0] == 200
        assert wait_until(lambda: _state(coved, sid) == "archived", 30), _info(coved, sid)
        assert _info(coved, sid)["state_reason"] == "idle"
        assert not covetest.cgroup_dirs(sid)
        assert _digest(coved, sid) == tree
        # Running, it is never archived by the timer: only a paused one is.
        time.sleep(2)
        assert _state(coved, sid) == "running"
    finally:
        coved.api("DELETE", "/v1/sandboxes/" + sid)


def test_proxied_traffic_wakes_a_paused_sandbox(coved):
    from test_ports import host_of, request, served
    with served(coved) as (sid, p):
        host, token = host_of(p["url"]), {"X-Cove-Token": p["token"]}
        assert _post(coved, sid, "pause")[0] == 200
        st, _, body = request(coved, host, headers=token)
        assert st == 200, (st, body)
        j = _info(coved, sid)
        assert j["state"] == "running" and j["state_reason"] == "request", j
        # Archived with its memory (the default), the server comes back
        # with the wake, at the sandbox's new address, and answers.
        st, j = _post(coved, sid, "archive")
        assert st == 200 and j["memory_kept"] is True, (st, j)
        st, _, body = request(coved, host, headers=token)
        assert st == 200 and _state(coved, sid) == "running", (st, body)
        # Archived without its memory, the server is gone with the
        # processes: the wake comes, nobody answers.
        assert _post(coved, sid, "archive", {"memory": False})[0] == 200
        st, _, body = request(coved, host, headers=token)
        assert st == 502 and _state(coved, sid) == "running", (st, body)


def test_on_timeout_pause_and_archive(coved):
    p = coved.create(timeout=1, on_timeout="pause")
    a = coved.create(timeout=1, on_timeout="archive")
    try:
        assert wait_until(lambda: _state(coved, p) == "paused" and _state(coved, a) == "archived", 30), \
            (_info(coved, p), _info(coved, a))
        for sid in (p, a):
            j = _info(coved, sid)
            assert j["state_reason"] == "timeout" and j["expires_at"] is None, j
            assert coved.exec(sid, ["echo", "back"])["stdout"] == "back\n"
            assert _state(coved, sid) == "running"
    finally:
        coved.api("DELETE", "/v1/sandboxes/" + p)
        coved.api("DELETE", "/v1/sandboxes/" + a)


def test_slots_archive_the_least_recently_used(_cv):
    cv = covetest.Coved(args=["--max-active", "3"]).start()
    try:
        a, b, c = cv.create(), cv.create(), cv.create()
        assert cv.exec(a, "echo a > /root/mark")["exit_code"] == 0
        assert _post(cv, b, "pause")[0] == 200
        assert _post(cv, a, "pause")[0] == 200
        # b was used less recently than a (a ran a command): b goes.
        d = cv.create()
        assert _state(cv, b) == "archived" and _info(cv, b)["state_reason"] == "slots", _info(cv, b)
        assert _state(cv, a) == "paused" and _state(cv, d) == "running"
        e = cv.create()
        assert _state(cv, a) == "archived" and _state(cv, e) == "running"
        # Nothing paused: a create is refused, a wake too; nothing changes.
        before = cv.api("GET", "/v1/sandboxes")[1]["sandboxes"]
        c1 = cv.conn()
        c1.request("POST", "/v1/sandboxes", body=b"{}")
        r = c1.getresponse()
        body = json.loads(r.read())
        assert r.status == 429 and int(r.getheader("Retry-After")) > 0, (r.status, body)
        c1.close()
        st, j = _post(cv, a, "exec", {"cmd": ["true"]})
        assert st == 429, (st, j)
        assert cv.api("GET", "/v1/sandboxes")[1]["sandboxes"] == before
        # A slot freed by a delete: a wakes, its files there.
        assert cv.api("DELETE", "/v1/sandboxes/" + c)[0] == 200
        assert cv.exec(a, "cat /root/mark")["stdout"] == "a\n"
        assert _state(cv, a) == "running"
    finally:
        cv.teardown()


def test_restart_keeps_each_state(_cv):
    cv = covetest.Coved().start()
    try:
        r, p, a = cv.create(), cv.create(), cv.create()
        trees = {sid: _tree(cv, sid) for sid in (r, p, a)}
        assert cv.exec(p, COUNTER)["exit_code"] == 0
        assert wait_until(lambda: _count(cv, p) > 3, 20)
        assert _post(cv, p, "pause")[0] == 200 and _post(cv, a, "archive")[0] == 200
        count = _upper(cv, p, "/tmp/count")
        cv.kill()
        cv.start()
        assert [_state(cv, s) for s in (r, p, a)] == ["running", "paused", "archived"]
        assert _freezer(p) == "FROZEN" and not covetest.cgroup_dirs(a)
        time.sleep(1)
        assert _upper(cv, p, "/tmp/count") == count
        for sid in (r, p, a):
            assert _digest(cv, sid) == trees[sid]
            assert _state(cv, sid) == "running"
        assert wait_until(lambda: _upper(cv, p, "/tmp/count") != count, 20)
    finally:
        cv.teardown()


# Each transition: how to bring the sandbox to its start, the request, and
# the states it may be in after a SIGKILL somewhere in it.
# The kill comes up to `within` seconds after the request is sent: about
# how long the transition takes here, so that most kills land inside it.
TRANSITIONS = {
    "pause": ("running", "pause", {"running", "paused"}, 0.004),
    "resume": ("paused", "resume", {"running", "paused"}, 0.004),
    "archive": ("running", "archive", {"running", "archived"}, 0.03),
    "wake": ("archived", "exec", {"running", "archived"}, 0.06),
    "reboot": ("running", "reboot", {"running"}, 0.08),
}


def _bring(cv, sid, state):
    if _state(cv, sid) == state:
        return
    if state == "running":
        assert cv.exec(sid, ["true"])["exit_code"] == 0
    else:
        if _state(cv, sid) != "running":
            assert cv.exec(sid, ["true"])["exit_code"] == 0
        st, j = _post(cv, sid, "pause" if state == "paused" else "archive")
        assert st == 200, (st, j)


def _consistent(cv, sid, allowed, tree, what, problems):
    s = _state(cv, sid)
    if s not in allowed:
        problems.append("%s: state %s, not one of %s" % (what, s, sorted(allowed)))
    freezer = _freezer(sid)
    if s == "paused" and freezer != "FROZEN":
        problems.append("%s: paused but its freezer says %s" % (what, freezer))
    if s == "running" and freezer != "THAWED":
        problems.append("%s: running but its freezer says %s" % (what, freezer))
    if s == "archived" and not wait_until(lambda: not covetest.cgroup_dirs(sid), 10):
        problems.append("%s: archived but has cgroups %s" % (what, covetest.cgroup_dirs(sid)))
    st, j = _post(cv, sid, "exec", {"cmd": DIGEST})
    if st != 200 or j.get("exit_code") != 0:
        problems.append("%s (%s): an exec failed: %s %s; coved's log: %s" % (what, s, st, j, cv.read_log()[-1500:]))
    elif json.loads(j["stdout"]) != tree:
        problems.append("%s: the file tree changed" % what)
    if _state(cv, sid) != "running":
        problems.append("%s: a request did not wake it" % what)


def test_sigkill_in_the_middle_of_each_transition(_cv):
    """At least 10 random points per transition: after the restart the
    sandbox is in the state before or after it, as its row says, and its
    files are all there."""
    cv = covetest.Coved().start()
    problems = []
    rnd = random.Random(17)
    try:
        sid = cv.create()
        tree = _tree(cv, sid)
        for name, (start, verb, allowed, within) in TRANSITIONS.items():
            for trial in range(10):
                _bring(cv, sid, start)
                body = {"cmd": ["true"]} if verb == "exec" else None
                t = threading.Thread(target=lambda: _swallow(cv, sid, verb, body), daemon=True)
                t.start()
                time.sleep(rnd.uniform(0, within))
                cv.kill()
                t.join(30)
                cv.start()
                _consistent(cv, sid, allowed, tree, "%s #%d" % (name, trial), problems)
        assert not problems, problems
    finally:
        cv.teardown()


def _swallow(cv, sid, verb, body):
    try:
        _post(cv, sid, verb, body)
    except Exception:  # coved was killed under it
        pass

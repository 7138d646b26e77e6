"""coved may be SIGKILLed at any moment: sandboxes, their processes and files
live on, and the next coved on the same data root re-attaches to them; a
create or delete cut short by the kill leaves neither a half sandbox nor a
stray subvolume, and loses nothing the daemon acknowledged. Each test runs
its own coved (the shared one is never killed)."""
import os
import threading
import time

import covetest
from covetest import wait_until

TICKER = ("setsid sh -c 'while :; do date +%s%N > /tmp/tick; sleep 0.1; done' "
          ">/dev/null 2>&1 </dev/null &")
TICKER_ARGS = "while :; do date +%s%N > /tmp/tick; sleep 0.1; done"




def _listed(cv):
    st, j = cv.api("GET", "/v1/sandboxes")
    assert st == 200, (st, j)
    return {s["id"]: s for s in j["sandboxes"]}






def _restart(cv, problems, what):
    """Start coved again; a refusal to start is recorded, then retried."""
    for attempt in range(4):
        try:
            cv.start()
            return
        except RuntimeError as e:
            last = [ln for ln in str(e).splitlines() if ln.strip()][-1:]
            problems.append("%s: restart #%d failed: %s" % (what, attempt + 1, last))
            time.sleep(0.5)
    raise AssertionError("coved does not start again: %s" % problems[-4:])


def _tick(cv, sid):
    return cv.exec(sid, "cat /tmp/tick")["stdout"].strip()


def test_sigkill_keeps_sandboxes_processes_and_files(_cv):
    cv = covetest.Coved().start()
    try:
        a = cv.create(name="ticker")
        b = cv.create(name="files")
        r = cv.exec(a, TICKER)
        assert r["exit_code"] == 0 and r["duration_ms"] < 5000, r
        assert wait_until(lambda: _tick(cv, a), 5)
        sums = {}
        for sid in (a, b):
            r = cv.exec(sid, "mkdir -p /srv/data && head -c 200000 /dev/urandom > /srv/data/blob && "
                             "echo note-%s > /root/note && cd /srv/data && sha256sum blob | tee sum" % sid)
            assert r["exit_code"] == 0, r
            sums[sid] = r["stdout"]
        before = _listed(cv)
        assert set(before) == {a, b}
        inits = {sid: s["init_pid"] for sid, s in before.items()}

        cv.kill()  # SIGKILL

        # The sandboxes live on without coved: their inits, and the ticker.
        for sid, pid in inits.items():
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                assert f.read().split(b"\0")[0] == b"cove-init", (sid, pid)
        tick_file = "/proc/%d/root/tmp/tick" % inits[a]
        t1 = open(tick_file).read()
        assert wait_until(lambda: open(tick_file).read() != t1, 3), "the ticker stopped with coved"

        cv.start()
        after = _listed(cv)
        assert set(after) == {a, b}, (before, after)
        for sid in (a, b):
            assert after[sid]["state"] == "running", after[sid]
            # Re-attached to the same init, not a new one.
            assert after[sid]["init_pid"] == inits[sid], (before[sid], after[sid])
            assert after[sid] == before[sid], (before[sid], after[sid])
            r = cv.exec(sid, ["sh", "-c", "echo ok; exit 3"])
            assert r["stdout"] == "ok\n" and r["exit_code"] == 3, r
            assert cv.exec(sid, "cat /root/note")["stdout"] == "note-%s\n" % sid
            r = cv.exec(sid, "cd /srv/data && cat sum && sha256sum -c sum")
            assert r["exit_code"] == 0 and r["stdout"].startswith(sums[sid]), (r, sums[sid])
        ps = cv.exec(a, ["ps", "-eo", "args"])["stdout"]
        assert TICKER_ARGS in ps, ps
        t1 = _tick(cv, a)
        assert wait_until(lambda: _tick(cv, a) != t1, 3), "the ticker does not tick after the restart"
        # The new coved makes new sandboxes as the old one did.
        c = cv.create()
        assert cv.exec(c, ["echo", "new"])["stdout"] == "new\n"
        assert cv.api("DELETE", "/v1/sandboxes/" + c)[0] == 200
        assert set(_listed(cv)) == {a, b}
    finally:
        cv.teardown()


def _check_consistent(cv, problems, acked=(), deleted=()):
    """After a restart: every listed sandbox runs and execs; nothing
    acknowledged is lost; no subvolume, cgroup or init exists that is not a
    listed sandbox's."""
    listed = _listed(cv)
    for sid in acked:
        if sid not in listed:
            problems.append("acknowledged sandbox %s is lost" % sid)
    for sid in deleted:
        if sid in listed:
            problems.append("sandbox %s whose delete was acknowledged is listed" % sid)
    for sid, s in listed.items():
        st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["echo", "ok"]})
        if s["state"] != "running" or st != 200 or j.get("stdout") != "ok\n":
            problems.append("listed sandbox %s (%s) does not exec: %s %s" % (sid, s["state"], st, j))
    # Deletions finish after their reply: give them a moment.
    wait_until(lambda: set(cv.sandbox_dirs()) == set(listed), 5)
    stray = sorted(set(cv.sandbox_dirs()) - set(listed))
    if stray:
        problems.append("subvolumes on disk that no listed sandbox owns: %s" % stray)
    missing = sorted(set(listed) - set(cv.sandbox_dirs()))
    if missing:
        problems.append("listed sandboxes without a subvolume: %s" % missing)
    for sid in sorted(set(cv.sandbox_dirs()) | set(acked) | set(deleted)):
        if sid in listed:
            want = [listed[sid]["init_pid"]]
            procs = wait_until(lambda: covetest.cgroup_procs(sid) == want, 5) and want or covetest.cgroup_procs(sid)
            if procs != want:
                problems.append("sandbox %s: processes %s in its cgroup, expected only init %s" % (sid, procs, want))
        else:
            wait_until(lambda: not covetest.cgroup_dirs(sid), 5)
            if covetest.cgroup_dirs(sid):
                problems.append("unlisted %s keeps cgroups %s with processes %s" %
                                (sid, covetest.cgroup_dirs(sid), covetest.cgroup_procs(sid)))
    return listed


def _fire(cv, method, path, body, out):
    def run():
        try:
            out.append(cv.api(method, path, body, timeout=15))
        except Exception as e:  # the kill cuts it short
            out.append(e)
    t = threading.Thread(target=run)
    t.start()
    return t


def test_sigkill_during_creates(_cv):
    cv = covetest.Coved().start()
    problems, acked = [], []
    try:
        # Bursts of creates, and kills spread over a burst.
        burst, rounds = 8, 14
        t0, out = time.time(), []
        for t in [_fire(cv, "POST", "/v1/sandboxes", {"name": "first%d" % k}, out) for k in range(burst)]:
            t.join(30)
        span = time.time() - t0  # how long a burst takes, undisturbed
        assert [r[0] for r in out] == [201] * burst, out
        acked += [r[1]["id"] for r in out]
        for i in range(rounds):
            out = []
            threads = [_fire(cv, "POST", "/v1/sandboxes", {"name": "k%d-%d" % (i, k)}, out) for k in range(burst)]
            # Mostly late in the burst, where creates are queued up.
            delay = span * (0.3 + 0.7 * (i + 0.5) / rounds)
            time.sleep(delay)
            cv.kill()
            _restart(cv, problems, "kill #%d, %.1f ms into a burst of creates" % (i, 1000 * delay))
            for t in threads:
                t.join(30)
            for r in out:
                if isinstance(r, tuple):
                    if r[0] == 201:
                        acked.append(r[1]["id"])
                    elif r[0] >= 500:
                        problems.append("create in round %d: %s %s" % (i, r[0], r[1]))
        listed = _check_consistent(cv, problems, acked=acked)
        assert not problems, "%d problems (%d creates acknowledged, %d sandboxes listed):\n  %s" % (
            len(problems), len(acked), len(listed), "\n  ".join(problems))
        # After all that, the daemon still creates and deletes normally.
        sid = cv.create()
        assert cv.exec(sid, ["true"])["exit_code"] == 0
        assert cv.api("DELETE", "/v1/sandboxes/" + sid)[0] == 200
    finally:
        cv.teardown()


def test_sigkill_during_deletes(_cv):
    cv = covetest.Coved().start()
    problems, deleted = [], []
    try:
        n = 8
        ids = [cv.create(name="d%d" % i) for i in range(n)]
        kept = [cv.create(name="kept%d" % i) for i in range(2)]  # never deleted
        for i, sid in enumerate(ids):
            out = []
            t = _fire(cv, "DELETE", "/v1/sandboxes/" + sid, None, out)
            time.sleep(0.002 * i)
            cv.kill()
            _restart(cv, problems, "kill #%d, %d ms into a delete" % (i, 2 * i))
            t.join(30)
            r = out[0] if out else None
            if isinstance(r, tuple) and r[0] == 200:
                deleted.append(sid)
        _check_consistent(cv, problems, acked=kept, deleted=deleted)
        assert not problems, "%d problems:\n  %s" % (len(problems), "\n  ".join(problems))
    finally:
        cv.teardown()


def test_stop_right_after_deletes_then_restart_finishes_them(_cv):
    # A delete is answered before its cleanup is done; a coved stopped (or
    # killed) in between leaves rows in state "deleting", and the next start
    # must finish them: no cgroup, subvolume or process of theirs survives.
    cv = covetest.Coved().start()
    try:
        ids = [cv.create(name="s%d" % i) for i in range(4)]
        kept = cv.create(name="kept")
        for sid in ids:
            assert cv.api("DELETE", "/v1/sandboxes/" + sid)[0] == 200
        cv.kill(15)  # SIGTERM at once
        cv.start()
        assert set(_listed(cv)) == {kept}
        problems = []
        _check_consistent(cv, problems, acked=[kept], deleted=ids)
        assert not problems, "\n  ".join(problems)
    finally:
        cv.teardown()

"""Background and terminal processes: started with {"background": true} (or
{"tty": true}), answered with their pid at once; listed, attached to (a
replay of the retained tail, then live output), fed stdin, signalled,
waited for, resized; they outlive the client that started them, and coved
itself (their pipes and output ring are held by cove-init)."""
import json
import time

import covetest
from covetest import wait_until


def _start(cv, sid, cmd, **kw):
    kw.update(cmd=cmd, background=True)
    st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, kw)
    assert st == 200, (st, j)
    assert isinstance(j["pid"], int) and j["pid"] > 1, j
    return j


def _proc(cv, sid, sel, wait=None):
    path = "/v1/sandboxes/%s/processes/%s" % (sid, sel)
    st, j = cv.api("GET", path + ("?wait=%s" % wait if wait is not None else ""))
    assert st == 200, (st, j)
    return j


def _attach(cv, sid, sel, query="", limit=None, timeout=30):
    """The attach stream's events, until it ends (or limit events)."""
    c = cv.conn(timeout)
    c.request("GET", "/v1/sandboxes/%s/processes/%s/attach%s" % (sid, sel, query))
    r = c.getresponse()
    assert r.status == 200, (r.status, r.read())
    events = []
    while limit is None or len(events) < limit:
        line = r.readline()
        if not line:
            break
        events.append(json.loads(line))
        if events[-1]["type"] == "exit":
            break
    c.close()
    return events


def _text(events, stream="stdout"):
    return "".join(e.get("data", "") for e in events if e["type"] == stream)


def test_background_returns_at_once_and_is_listed(cv):
    sid = cv.create()
    t0 = time.time()
    j = _start(cv, sid, "echo started; sleep 30", tag="sleeper")
    assert time.time() - t0 < 5
    assert j["tag"] == "sleeper"
    st, lst = cv.api("GET", "/v1/sandboxes/%s/processes" % sid)
    assert st == 200
    [p] = [p for p in lst["processes"] if p["pid"] == j["pid"]]
    assert p["state"] == "running" and p["tag"] == "sleeper" and p["exit_code"] is None, p
    assert p["cmd"] == "echo started; sleep 30" and p["started_at"] > 0, p
    # by tag and by pid
    assert _proc(cv, sid, "sleeper")["pid"] == j["pid"]
    assert _proc(cv, sid, j["pid"])["tag"] == "sleeper"
    # a second running process may not take the tag
    st, e = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "true", "background": True, "tag": "sleeper"})
    assert st == 409, (st, e)
    st, _ = cv.api("POST", "/v1/sandboxes/%s/processes/sleeper/signal" % sid, {"signal": "SIGTERM"})
    assert st == 200
    p = _proc(cv, sid, "sleeper", wait=10)
    assert p["state"] == "exited" and p["signal"] == "TERM" and p["exit_code"] is None, p
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_exit_code_and_wait(cv):
    sid = cv.create()
    j = _start(cv, sid, "sleep 0.3; exit 7")
    p = _proc(cv, sid, j["pid"], wait=0)
    assert p["state"] == "running", p
    p = _proc(cv, sid, j["pid"], wait=20)
    assert p["state"] == "exited" and p["exit_code"] == 7 and p["ended_at"] >= p["started_at"], p
    # a wait that runs out answers with the running state
    j = _start(cv, sid, "sleep 30")
    t0 = time.time()
    p = _proc(cv, sid, j["pid"], wait=0.3)
    assert p["state"] == "running" and time.time() - t0 >= 0.25, p
    cv.api("POST", "/v1/sandboxes/%s/processes/%d/signal" % (sid, j["pid"]), {})
    assert _proc(cv, sid, j["pid"], wait=10)["signal"] == "KILL"
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_attach_replays_then_follows(cv):
    sid = cv.create()
    j = _start(cv, sid, "echo one; echo err1 >&2; sleep 0.5; echo two; sleep 0.5; echo three; exit 3")
    time.sleep(0.2)
    ev = _attach(cv, sid, j["pid"])
    assert ev[0] == {"type": "start", "pid": j["pid"]}, ev[0]
    assert _text(ev) == "one\ntwo\nthree\n", ev
    assert _text(ev, "stderr") == "err1\n", ev
    assert ev[-1]["type"] == "exit" and ev[-1]["exit_code"] == 3, ev[-1]
    # attaching after the end replays it all and ends at once
    ev = _attach(cv, sid, j["pid"])
    assert _text(ev) == "one\ntwo\nthree\n" and ev[-1]["exit_code"] == 3, ev
    # without replay: only what comes after
    j = _start(cv, sid, "echo early; sleep 1; echo late")
    time.sleep(0.5)
    ev = _attach(cv, sid, j["pid"], "?replay=0")
    assert _text(ev) == "late\n", ev
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_retained_tail_is_at_least_a_mebibyte(cv):
    sid = cv.create()
    # 3 MiB of numbered lines, then a marker; nobody attached meanwhile
    j = _start(cv, sid, "seq 1 400000; echo END")
    assert _proc(cv, sid, j["pid"], wait=30)["exit_code"] == 0
    ev = _attach(cv, sid, j["pid"])
    out = _text(ev)
    gaps = [e for e in ev if e["type"] == "gap"]
    assert len(out) >= 1 << 20 and out.endswith("399999\n400000\nEND\n"), (len(out), out[-40:])
    assert gaps and gaps[0]["stream"] == "stdout" and gaps[0]["lost"] > 0, gaps
    full = "".join("%d\n" % i for i in range(1, 400001)) + "END\n"
    assert full.endswith(out[out.index("\n") + 1:])
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_stdin_send_and_close(cv):
    sid = cv.create()
    j = _start(cv, sid, ["sh", "-c", "while read l; do echo got:$l; done; echo eof"], stdin_open=True)
    path = "/v1/sandboxes/%s/processes/%d/stdin" % (sid, j["pid"])
    assert cv.api("POST", path, {"data": "a\n"})[0] == 200
    assert cv.api("POST", path, {"data_b64": "Ygo="})[0] == 200  # "b\n"
    assert cv.api("POST", path, {"data": "c\n", "eof": True})[0] == 200
    p = _proc(cv, sid, j["pid"], wait=10)
    assert p["exit_code"] == 0, p
    assert _text(_attach(cv, sid, j["pid"])) == "got:a\ngot:b\ngot:c\neof\n"
    # stdin of an ended process, or of one without an open stdin: 409
    st, e = cv.api("POST", path, {"data": "x"})
    assert st == 409, (st, e)
    k = _start(cv, sid, "sleep 30")
    st, e = cv.api("POST", "/v1/sandboxes/%s/processes/%d/stdin" % (sid, k["pid"]), {"data": "x"})
    assert st == 409 and "stdin_open" in e["error"]["message"], (st, e)
    # stdin given at start is fed, then closed
    k2 = _start(cv, sid, "cat", stdin="fed\n")
    assert _proc(cv, sid, k2["pid"], wait=10)["exit_code"] == 0
    assert _text(_attach(cv, sid, k2["pid"])) == "fed\n"
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_signal_tree_and_timeout(cv):
    sid = cv.create()
    j = _start(cv, sid, "sleep 100 & sleep 100 & wait")
    wait_until(lambda: cv.exec(sid, "pgrep -c sleep")["stdout"].strip() == "2", 5)
    st, _ = cv.api("POST", "/v1/sandboxes/%s/processes/%d/signal" % (sid, j["pid"]),
                   {"signal": "KILL", "tree": True})
    assert st == 200
    assert _proc(cv, sid, j["pid"], wait=10)["state"] == "exited"
    assert wait_until(lambda: cv.exec(sid, "pgrep -c sleep")["stdout"].strip() == "0", 5)
    j = _start(cv, sid, "sleep 100", timeout=0.5)
    p = _proc(cv, sid, j["pid"], wait=10)
    assert p["timed_out"] is True and p["signal"] == "KILL", p
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_outlives_its_client_and_stream(cv):
    sid = cv.create()
    # a streamed background start: the client leaves mid-stream
    c = cv.conn()
    c.request("POST", "/v1/sandboxes/%s/exec" % sid,
              body=json.dumps({"cmd": "for i in $(seq 1 30); do echo $i; sleep 0.1; done",
                               "background": True, "stream": True}))
    r = c.getresponse()
    first = json.loads(r.readline())
    assert first["type"] == "start", first
    c.close()
    p = _proc(cv, sid, first["pid"], wait=20)
    assert p["exit_code"] == 0, p
    assert _text(_attach(cv, sid, first["pid"])) == "".join("%d\n" % i for i in range(1, 31))
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_terminal(cv):
    sid = cv.create()
    st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid,
                   {"cmd": ["sh", "-c", "stty size; tty; read x; echo you said $x; stty size"],
                    "tty": True, "background": True, "rows": 33, "cols": 101})
    assert st == 200, (st, j)
    pid = j["pid"]
    time.sleep(0.3)
    assert cv.api("POST", "/v1/sandboxes/%s/processes/%d/resize" % (sid, pid), {"rows": 40, "cols": 120})[0] == 200
    assert cv.api("POST", "/v1/sandboxes/%s/processes/%d/stdin" % (sid, pid), {"data": "hello\r"})[0] == 200
    assert _proc(cv, sid, pid, wait=10)["exit_code"] == 0
    out = _text(_attach(cv, sid, pid))
    assert "33 101" in out and "/dev/pts/" in out and "you said hello" in out and "40 120" in out, repr(out)
    # resize of a pipe process: 409; bad sizes: 400
    k = _start(cv, sid, "sleep 30")
    assert cv.api("POST", "/v1/sandboxes/%s/processes/%d/resize" % (sid, k["pid"]),
                  {"rows": 1, "cols": 1})[0] == 409
    assert cv.api("POST", "/v1/sandboxes/%s/processes/%d/resize" % (sid, k["pid"]),
                  {"rows": 0, "cols": 1})[0] == 400
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_foreground_terminal_stream_dies_with_client(cv):
    sid = cv.create()
    c = cv.conn()
    c.request("POST", "/v1/sandboxes/%s/exec" % sid,
              body=json.dumps({"cmd": ["sleep", "300"], "tty": True, "stream": True}))
    r = c.getresponse()
    first = json.loads(r.readline())
    c.close()
    p = _proc(cv, sid, first["pid"], wait=10)
    assert p["state"] == "exited" and p["signal"] == "KILL", p
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_bad_requests(cv):
    sid = cv.create()
    base = "/v1/sandboxes/%s" % sid
    for body in ({"cmd": "true", "background": "yes"}, {"cmd": "true", "background": True, "tag": "a b"},
                 {"cmd": "true", "background": True, "tag": "123"}, {"cmd": "true", "tag": "x"},
                 {"cmd": "true", "tty": True, "rows": 0}):
        st, e = cv.api("POST", base + "/exec", body)
        assert st == 400, (body, st, e)
    assert cv.api("GET", base + "/processes/4242")[0] == 404
    assert cv.api("GET", base + "/processes/nosuchtag")[0] == 404
    assert cv.api("GET", "/v1/sandboxes/sb_nosuchsandbox/processes")[0] == 404
    j = _start(cv, sid, "sleep 30")
    pp = base + "/processes/%d" % j["pid"]
    assert cv.api("POST", pp + "/signal", {"signal": "SIGNOPE"})[0] == 400
    assert cv.api("POST", pp + "/signal", {"sig": 9})[0] == 400
    assert cv.api("GET", pp + "?wait=abc")[0] == 400
    assert cv.api("GET", pp + "/attach?replay=maybe")[0] == 400
    assert _proc(cv, sid, j["pid"])["state"] == "running"  # nothing changed
    st, e = cv.api("POST", base + "/exec", {"cmd": ["/nonexistent"], "background": True})
    assert st == 400, (st, e)
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_survives_coved_restart(_cv):
    cv = covetest.Coved().start()
    try:
        sid = cv.create()
        j = _start(cv, sid, "echo before; while read l; do echo got:$l; done; echo done", stdin_open=True,
                   tag="keeper")
        t = _start(cv, sid, "for i in $(seq 1 20); do echo tick$i; sleep 0.1; done", tag="ticker")
        time.sleep(0.3)
        cv.kill()
        time.sleep(1.5)  # the ticker ends while coved is away
        cv.start()
        p = _proc(cv, sid, "keeper")
        assert p["pid"] == j["pid"] and p["state"] == "running", p
        path = "/v1/sandboxes/%s/processes/keeper/stdin" % sid
        assert cv.api("POST", path, {"data": "after\n", "eof": True})[0] == 200
        assert _proc(cv, sid, "keeper", wait=10)["exit_code"] == 0
        assert _text(_attach(cv, sid, "keeper")) == "before\ngot:after\ndone\n"
        q = _proc(cv, sid, "ticker", wait=10)
        assert q["state"] == "exited" and q["exit_code"] == 0, q
        assert _text(_attach(cv, sid, "ticker")) == "".join("tick%d\n" % i for i in range(1, 21))
    finally:
        cv.teardown()

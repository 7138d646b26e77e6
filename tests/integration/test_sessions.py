"""Sessions: a persistent shell per session. cwd, exported and unexported
variables, functions and aliases carry over; each command's output and exit
code are delimited exactly (heredocs, stdin readers, subprocesses left
running, no trailing newline); commands queue in order; sessions never see
each other; they survive a coved restart."""
import json
import threading
import time

import covetest


def _session(cv, sid, **kw):
    st, j = cv.api("POST", "/v1/sandboxes/%s/sessions" % sid, kw)
    assert st == 201, (st, j)
    assert j["id"].startswith("ss_") and j["pid"] > 1, j
    return j["id"]


def _run(cv, sid, ss, cmd, status=200, **kw):
    kw.update(cmd=cmd, session=ss)
    st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, kw)
    assert st == status, (st, j)
    return j


def test_state_carries_over(cv):
    sid = cv.create()
    ss = _session(cv, sid)
    assert _run(cv, sid, ss, "cd /tmp && mkdir -p w && cd w")["exit_code"] == 0
    assert _run(cv, sid, ss, "pwd")["stdout"] == "/tmp/w\n"
    _run(cv, sid, ss, "export EXP=e1; UNEXP=u1")
    r = _run(cv, sid, ss, "echo $EXP $UNEXP; sh -c 'echo child:$EXP:$UNEXP'")
    assert r["stdout"] == "e1 u1\nchild:e1:\n", r
    _run(cv, sid, ss, "greet() { echo hello \"$1\"; }")
    _run(cv, sid, ss, "alias ll='echo aliased'")
    assert _run(cv, sid, ss, "greet world; ll")["stdout"] == "hello world\naliased\n"
    # $? of the previous command is visible, like in a terminal
    _run(cv, sid, ss, "false")
    assert _run(cv, sid, ss, "echo $?")["stdout"] == "1\n"
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_exact_delimiting(cv):
    sid = cv.create()
    ss = _session(cv, sid)
    r = _run(cv, sid, ss, "printf 'no newline'")
    assert r["stdout"] == "no newline" and r["exit_code"] == 0, r
    r = _run(cv, sid, ss, "cat <<'EOF'\nline $1\n  two\nEOF\necho after")
    assert r["stdout"] == "line $1\n  two\nafter\n", r
    # a command reading stdin gets EOF (not the shell's input), or the bytes given
    r = _run(cv, sid, ss, "cat; echo done")
    assert r["stdout"] == "done\n", r
    r = _run(cv, sid, ss, "tr a-z A-Z", stdin="some input\nmore")
    assert r["stdout"] == "SOME INPUT\nMORE", r
    # a subprocess left running does not hold the command open
    t0 = time.time()
    r = _run(cv, sid, ss, "sleep 30 & echo started")
    assert r["stdout"] == "started\n" and time.time() - t0 < 10, r
    r = _run(cv, sid, ss, "echo out; echo err >&2; exit_code_test() { return 4; }; exit_code_test")
    assert (r["stdout"], r["stderr"], r["exit_code"]) == ("out\n", "err\n", 4), r
    # quotes, backslashes and control bytes reach the shell unchanged
    r = _run(cv, sid, ss, "printf '%s|' 'a b' \"c'd\" 'e\\\\f' $'g\\th'")
    assert r["stdout"] == "a b|c'd|e\\\\f|g\th|", r
    r = _run(cv, sid, ss, ["printf", "%s|", "x y", "$HOME", "'q'"])
    assert r["stdout"] == "x y|$HOME|'q'|", r
    # a syntax error is that command's failure, not the session's
    r = _run(cv, sid, ss, "if then fi")
    assert r["exit_code"] == 2 and "syntax" in r["stderr"], r
    assert _run(cv, sid, ss, "echo still here")["stdout"] == "still here\n"
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_stream_in_session(cv):
    sid = cv.create()
    ss = _session(cv, sid)
    c = cv.conn()
    c.request("POST", "/v1/sandboxes/%s/exec?stream=1" % sid,
              body=json.dumps({"cmd": "echo a; sleep 0.3; echo b >&2; exit 3", "session": ss}))
    r = c.getresponse()
    events = [json.loads(line) for line in r]
    c.close()
    assert [e["type"] for e in events] == ["start", "stdout", "stderr", "exit"], events
    assert events[-1]["exit_code"] == 3 and events[0]["session"] == ss
    # `exit 3` inside a session command... is a command: the shell ended
    st, lst = cv.api("GET", "/v1/sandboxes/%s/sessions" % sid)
    assert ss not in [s["id"] for s in lst["sessions"]], lst
    _run(cv, sid, ss, "true", status=404)
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_queue_order_and_isolation(cv):
    sid = cv.create()
    a, b = _session(cv, sid), _session(cv, sid)
    _run(cv, sid, a, "X=in-a; cd /tmp")
    r = _run(cv, sid, b, "echo \"[$X]\"; pwd")
    assert r["stdout"] == "[]\n/root\n", r
    results = {}

    def send(i):
        results[i] = _run(cv, sid, a, "sleep 0.%d; echo $((++N))" % (5 - i % 5))["stdout"]

    threads = []
    for i in range(8):
        t = threading.Thread(target=send, args=(i,))
        t.start()
        threads.append(t)
        time.sleep(0.05)  # sent in this order
    for t in threads:
        t.join()
    assert [results[i] for i in range(8)] == ["%d\n" % (i + 1) for i in range(8)], results
    st, lst = cv.api("GET", "/v1/sandboxes/%s/sessions" % sid)
    assert st == 200 and sorted(s["id"] for s in lst["sessions"]) == sorted([a, b]), lst
    assert cv.api("DELETE", "/v1/sandboxes/%s/sessions/%s" % (sid, b))[0] == 200
    assert cv.api("DELETE", "/v1/sandboxes/%s/sessions/%s" % (sid, b))[0] == 404
    _run(cv, sid, b, "true", status=404)
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_timeout_keeps_the_session(cv):
    sid = cv.create()
    ss = _session(cv, sid)
    _run(cv, sid, ss, "V=kept")
    r = _run(cv, sid, ss, "sleep 100", timeout=0.5)
    assert r["timed_out"] is True and r["exit_code"] == 137, r
    assert _run(cv, sid, ss, "echo $V")["stdout"] == "kept\n"
    # a builtin loop cannot be interrupted: the session goes, after a grace period
    r = _run(cv, sid, ss, "while :; do :; done", timeout=0.5)
    assert r["timed_out"] is True and r["signal"] == "KILL", r
    _run(cv, sid, ss, "true", status=404)
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_session_options_and_bad_input(cv):
    sid = cv.create()
    ss = _session(cv, sid, cwd="/etc", env={"GREETING": "hi"})
    assert _run(cv, sid, ss, "pwd; echo $GREETING")["stdout"] == "/etc\nhi\n"
    u = _session(cv, sid, user="nobody")
    assert _run(cv, sid, u, "id -un")["stdout"] == "nobody\n"
    base = "/v1/sandboxes/%s" % sid
    for body in ({"cwd": "relative"}, {"env": {"A": 1}}, {"shell": "zsh"}):
        assert cv.api("POST", base + "/sessions", body)[0] == 400, body
    _run(cv, sid, ss, "true", status=400, cwd="/tmp")
    _run(cv, sid, ss, "true", status=400, env={"A": "b"})
    _run(cv, sid, "ss_nosuch", "true", status=404)
    assert cv.api("POST", "/v1/sandboxes/sb_nosuchsandbox/sessions", {})[0] == 404
    assert cv.api("GET", "/v1/sandboxes/sb_nosuchsandbox/sessions")[0] == 404
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_session_survives_coved_restart(_cv):
    cv = covetest.Coved().start()
    try:
        sid = cv.create()
        ss = _session(cv, sid)
        _run(cv, sid, ss, "cd /tmp; KEEP=yes")
        cv.kill()
        cv.start()
        r = _run(cv, sid, ss, "echo $KEEP; pwd")
        assert r["stdout"] == "yes\n/tmp\n", r
    finally:
        cv.teardown()


def test_slow_streaming_client_loses_nothing(cv):
    sid = cv.create()
    ss = _session(cv, sid)
    c = cv.conn()
    c.request("POST", "/v1/sandboxes/%s/exec?stream=1" % sid,
              body=json.dumps({"cmd": "seq 1 400000", "session": ss}))
    r = c.getresponse()
    time.sleep(2)  # the shell waits for us rather than outrun its 1 MiB ring
    out = []
    for line in r:
        e = json.loads(line)
        if e["type"] == "stdout":
            out.append(e["data"])
        last = e
    c.close()
    text = "".join(out)
    assert last["type"] == "exit" and last["exit_code"] == 0, last
    assert text == "".join("%d\n" % i for i in range(1, 400001)), (len(text), text[-30:])
    assert _run(cv, sid, ss, "echo next")["stdout"] == "next\n"
    cv.api("DELETE", "/v1/sandboxes/" + sid)

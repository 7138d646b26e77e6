"""Robustness of the API: bad input of every kind is refused with a 4xx and
the {"error": {"code", "message"}} shape, changes nothing and leaves coved
healthy; many concurrent execs; 100 MB streamed with bounded memory; clients
that go away in the middle of an exec."""
import base64
import json
import os
import re
import socket
import threading
import time

import covetest
from covetest import wait_until

MB = 1 << 20


# ---------------------------------------------------------------- helpers

def _rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for pid %d" % pid)


def _nfds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))




def _listing(cv):
    st, j = cv.api("GET", "/v1/sandboxes")
    assert st == 200, (st, j)
    return sorted(json.dumps(s, sort_keys=True) for s in j["sandboxes"])


def _state(cv):
    """The listing and the sandbox roots on disk, once they agree: deleting
    a sandbox finishes after its reply, so a root may linger for a moment."""
    def settled():
        listing, dirs = _listing(cv), cv.sandbox_dirs()
        ids = sorted(json.loads(s)["id"] for s in listing)
        return (listing, dirs) if ids == dirs else None
    return wait_until(settled, 10) or (_listing(cv), cv.sandbox_dirs())


def _healthy(cv):
    assert cv.proc is not None and cv.proc.poll() is None, "coved died: " + cv.read_log()
    st, j = cv.api("GET", "/v1/health")
    assert st == 200 and j and j.get("status") == "ok", (st, j)


def _is_error(st, j, what, status=None):
    assert 400 <= st < 500, (what, st, j)
    assert status is None or st == status, (what, st, j)
    assert isinstance(j, dict) and isinstance(j.get("error"), dict), (what, st, j)
    code, msg = j["error"].get("code"), j["error"].get("message")
    assert isinstance(code, str) and code, (what, st, j)
    assert isinstance(msg, str) and msg.strip(), (what, st, j)


def _ps(cv, sid):
    return cv.exec(sid, ["ps", "-eo", "args"])["stdout"]


def _next_pid(cv, sid):
    """The pid the next process in the sandbox gets (pids are handed out in
    order in its pid namespace): lets a test see that nothing was spawned."""
    return cv.exec(sid, ["true"])["pid"]




def _delete_all(cv, ids):
    """Delete, and wait for the deletions to finish (they complete after the
    reply): nothing of these sandboxes may outlive the test."""
    for sid in ids:
        st, j = cv.api("DELETE", "/v1/sandboxes/" + sid)
        assert st == 200, (sid, st, j)
    left = lambda: [(s, covetest.cgroup_dirs(s)) for s in ids if covetest.cgroup_dirs(s)] + [
        s for s in ids if os.path.exists(os.path.join(cv.data, "pool", "sandboxes", s))]
    assert wait_until(lambda: not left(), 10), "deleted sandboxes linger: %r" % left()




# ---------------------------------------------------------------- bad input

BAD_JSON = [b"{", b"}", b"[1, 2]", b"null", b"42", b'"text"', b"{'name': 'x'}", b"\xff\xfe{}",
            b'{"name": "a", "name": "b"}', b'{"name": "x"} trailing', b"{\"name\": \"\x00\"}"]


def test_malformed_json_is_400_and_changes_nothing(cv):
    sid = cv.create(name="robust-json")
    try:
        before = _state(cv)
        pid0 = _next_pid(cv, sid)
        for body in BAD_JSON:
            st, j = cv.api("POST", "/v1/sandboxes", raw=body, headers={"Content-Type": "application/json"})
            _is_error(st, j, ("create", body), 400)
            st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, raw=body)
            _is_error(st, j, ("exec", body), 400)
        assert _state(cv) == before
        # Nothing was spawned in the sandbox either: the pids go on in order.
        assert _next_pid(cv, sid) == pid0 + 1
        _healthy(cv)
    finally:
        _delete_all(cv, [sid])


BAD_SPECS = [
    {"memory": True}, {"memory": "lots"}, {"memory": -1}, {"memory": 0}, {"memory": [512]},
    {"memory": "1K"}, {"cpus": "x"}, {"cpus": 0}, {"cpus": -1}, {"cpus": True}, {"pids": "many"},
    {"pids": 1}, {"name": 5}, {"name": "x" * 200}, {"image": 5}, {"image": "../host"},
    {"image": "no-such-image"}, {"image": ""}, {"cwd": "relative/dir"}, {"cwd": 1}, {"user": 0},
    {"env": {"A": 1}}, {"env": {"A": None}}, {"env": {"A": ["x"]}}, {"env": ["A=1"]}, {"env": "A=1"},
    {"env": {"1A": "x"}}, {"env": {"A=B": "x"}}, {"env": {"": "x"}}, {"env": {"A B": "x"}},
    {"env": {"A-B": "x"}}, {"env": {"A": "x\u0000y"}}, {"foo": 1}, {"Memory": 1 << 30},
    {"name": "ok", "unknown_field": True},
]


def test_bad_create_specs_are_400_and_create_nothing(cv):
    before = _state(cv)
    for spec in BAD_SPECS:
        st, j = cv.api("POST", "/v1/sandboxes", spec)
        _is_error(st, j, spec, 400)
    assert _state(cv) == before, "a refused create left a sandbox or a subvolume behind"
    _healthy(cv)


BAD_EXECS = [
    {"cmd": 5}, {"cmd": True}, {"cmd": None}, {"cmd": {"argv": ["true"]}}, {"cmd": []}, {"cmd": [""]},
    {"cmd": [5]}, {"cmd": ["true", 5]}, {"cmd": ["true", None]}, {"cmd": ["a\u0000b"]}, {},
    {"env": {"A": "1"}}, {"cmd": ["true"], "timeout": "x"}, {"cmd": ["true"], "timeout": -1},
    {"cmd": ["true"], "timeout": [1]}, {"cmd": ["true"], "env": {"A": 1}},
    {"cmd": ["true"], "env": {"1A": "x"}}, {"cmd": ["true"], "env": {"A=B": "x"}},
    {"cmd": ["true"], "env": "A=1"}, {"cmd": ["true"], "cwd": "tmp"}, {"cmd": ["true"], "cwd": 5},
    {"cmd": ["true"], "user": 0}, {"cmd": ["true"], "stream": "yes"}, {"cmd": ["true"], "max_output": "big"},
    {"cmd": ["true"], "max_output": -1}, {"cmd": ["cat"], "stdin": 5}, {"cmd": ["cat"], "stdin_b64": "!!!"},
    {"cmd": ["cat"], "stdin": "a", "stdin_b64": "YQ=="}, {"cmd": ["true"], "bogus": 1},
    {"cmd": ["true"], "Cmd": ["true"]},
]


def test_bad_exec_requests_are_400_and_spawn_nothing(cv):
    sid = cv.create(name="robust-exec")
    try:
        before = _state(cv)
        pid0 = _next_pid(cv, sid)
        for body in BAD_EXECS:
            st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, body)
            _is_error(st, j, body, 400)
            st, j = cv.api("POST", "/v1/sandboxes/%s/exec?stream=1" % sid, body)
            _is_error(st, j, ("stream", body), 400)
        assert _next_pid(cv, sid) == pid0 + 1, "a refused exec spawned a process"
        assert _state(cv) == before
        assert _ps(cv, sid).split("\n")[1:] == ["cove-init", "ps -eo args", ""], _ps(cv, sid)
        _healthy(cv)
    finally:
        _delete_all(cv, [sid])


def test_empty_shell_cmd_is_400(cv):
    # [] and [""] are refused as an empty command; "" is the same empty
    # command as a shell string and must be refused the same way.
    sid = cv.create(name="robust-empty")
    try:
        for cmd in ([], [""], ""):
            st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": cmd})
            _is_error(st, j, {"cmd": cmd}, 400)
    finally:
        _delete_all(cv, [sid])


def _send_huge(cv, head, chunks):
    """Send head then chunks until the server stops reading; return the
    status line it answered with (None if it only closed the connection)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(cv.socket)
    try:
        try:
            s.sendall(head)
            for c in chunks:
                s.sendall(c)
        except OSError:
            pass  # refused part way: fine, it must not have read it all
        data = b""
        try:
            while b"\r\n" not in data:
                d = s.recv(4096)
                if not d:
                    break
                data += d
        except OSError:
            pass
        return data.split(b"\r\n", 1)[0] if data else None
    finally:
        s.close()


def test_huge_body_is_refused(cv):
    # The daemon's limit is ~101 MiB (64 MiB of stdin as base64 plus 16 MiB);
    # 128 MiB is over it. Declared up front it is refused before it is read.
    before = _state(cv)
    rss0 = _rss_kb(cv.pid())
    n = 128 * MB
    chunk = b"x" * MB
    line = _send_huge(cv, b"POST /v1/sandboxes HTTP/1.1\r\nHost: cove\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % n, (chunk for _ in range(n // MB)))
    assert line is None or line.split()[1] == b"413", line
    line = _send_huge(cv, b"POST /v1/sandboxes/sb_aaaaaaaaaaaa/exec HTTP/1.1\r\nHost: cove\r\n"
                      b"Content-Length: %d\r\n\r\n" % n, (chunk for _ in range(n // MB)))
    assert line is None or line.split()[1] in (b"413", b"404"), line
    _healthy(cv)
    assert _state(cv) == before
    assert _rss_kb(cv.pid()) < rss0 + 16 * 1024, (rss0, _rss_kb(cv.pid()))


def test_huge_chunked_body_is_refused(cv):
    # Chunked, the size is only known while reading: coved must stop at its
    # limit, not take the whole body. A private coved, so that the memory the
    # refused body took does not count against the shared one.
    own = covetest.Coved().start()
    try:
        sid = own.create()
        before = _state(own)
        n = 160 * MB
        chunk = b"x" * (256 << 10)
        framed = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
        line = _send_huge(own, b"POST /v1/sandboxes HTTP/1.1\r\nHost: cove\r\nTransfer-Encoding: chunked\r\n\r\n",
                          (framed for _ in range(n // len(chunk))))
        assert line is None or line.split()[1] == b"413", line
        _healthy(own)
        assert _state(own) == before
        assert own.exec(sid, ["echo", "ok"])["stdout"] == "ok\n"
    finally:
        own.teardown()


def test_garbage_http_is_refused(cv):
    before = _state(cv)
    for raw in [b"GARBAGE\r\n\r\n", b"GET /v1/health HTTP/9.9\r\n\r\n", b"\x00\x01\x02\r\n\r\n",
                b"POST /v1/sandboxes HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
                b"POST /v1/sandboxes HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
                b"POST /v1/sandboxes HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
                b"GET /v1/health HTTP/1.1\r\nX-Big: " + b"a" * 65536 + b"\r\n\r\n",
                b"GET /" + b"a" * 65536 + b" HTTP/1.1\r\n\r\n"]:
        line = _send_huge(cv, raw, [])
        assert line is None or (line.startswith(b"HTTP/1.") and 400 <= int(line.split()[1]) < 500), (raw[:60], line)
    _healthy(cv)
    assert _state(cv) == before


# ---------------------------------------------------------------- ids, routes, methods

UNKNOWN_IDS = ["sb_aaaaaaaaaaaa", "sb_222222222222", "sb_AAAAAAAAAAAA", "sb_aaaaaaaaaaa1", "sb_aaaaaaaaaaaaa",
               "sb_", "nope", "x" * 300, "%00", "..", "%2e%2e", "sb_aaaaaaaaaaaa%2f..", "%2fetc%2fpasswd",
               "sb_aaaaaaaaaaaa;rm", "'\"<>"]


def test_unknown_sandbox_ids_are_404(cv):
    gone = cv.create(name="robust-gone")
    _delete_all(cv, [gone])
    before = _state(cv)
    for sid in UNKNOWN_IDS + [gone]:
        path = "/v1/sandboxes/" + sid
        for method, p, body in (("GET", path, None), ("DELETE", path, None),
                                ("POST", path + "/exec", {"cmd": ["true"]}),
                                ("POST", path + "/exec?stream=1", {"cmd": ["true"]})):
            st, j = cv.api(method, p, body)
            _is_error(st, j, (method, p), 404)
            assert j["error"]["code"] == "not_found", (method, p, j)
    assert _state(cv) == before
    _healthy(cv)


def test_unknown_routes_are_404(cv):
    sid = cv.create(name="robust-routes")
    try:
        before = _state(cv)
        paths = ["/", "/v1", "/v1/", "/v2/sandboxes", "/v1/nope", "/v1/health/x", "/v1//sandboxes",
                 "/v1/sandboxes/%s/nope" % sid, "/v1/sandboxes/%s/exec/x" % sid, "/v1/sandboxes/%s/" % sid,
                 "/V1/SANDBOXES", "/v1/sandboxes/%s/../%s" % (sid, sid), "/" + "a" * 2000]
        for p in paths:
            for method in ("GET", "POST", "DELETE", "PUT"):
                st, j = cv.api(method, p, {"cmd": ["true"]} if method == "POST" else None)
                _is_error(st, j, (method, p), 404)
        assert _state(cv) == before
        _healthy(cv)
    finally:
        _delete_all(cv, [sid])


def test_wrong_method_is_4xx(cv):
    sid = cv.create(name="robust-method")
    try:
        before = _state(cv)
        cases = [("POST", "/v1/health"), ("PUT", "/v1/health"), ("DELETE", "/v1/health"),
                 ("POST", "/v1/capabilities"), ("DELETE", "/v1/capabilities"),
                 ("PUT", "/v1/sandboxes"), ("DELETE", "/v1/sandboxes"),
                 ("POST", "/v1/sandboxes/" + sid), ("PUT", "/v1/sandboxes/" + sid),
                 ("GET", "/v1/sandboxes/%s/exec" % sid), ("PUT", "/v1/sandboxes/%s/exec" % sid),
                 ("DELETE", "/v1/sandboxes/%s/exec" % sid)]
        for method, p in cases:
            st, j = cv.api(method, p, {"cmd": ["true"]} if method in ("POST", "PUT") else None)
            _is_error(st, j, (method, p))
            st, _ = cv.api("HEAD", p)  # no body to a HEAD
            assert 400 <= st < 500, ("HEAD", p, st)
        assert _state(cv) == before, "a refused method changed something"
        assert cv.exec(sid, ["echo", "still"])["stdout"] == "still\n"
        _healthy(cv)
    finally:
        _delete_all(cv, [sid])


def test_uncommon_methods_are_4xx_json(cv):
    # PATCH and OPTIONS are methods a client may well send: they deserve the
    # same 4xx and error shape as any other wrong method, not a 5xx.
    before = _state(cv)
    for method in ("PATCH", "OPTIONS"):
        for p in ("/v1/health", "/v1/sandboxes", "/v1/sandboxes/sb_aaaaaaaaaaaa"):
            st, j = cv.api(method, p, {"name": "x"} if method == "PATCH" else None)
            _is_error(st, j, (method, p))
    assert _state(cv) == before
    _healthy(cv)


# ---------------------------------------------------------------- load

def test_100_concurrent_execs_across_10_sandboxes(cv):
    sids = [cv.create(name="robust-c%d" % i) for i in range(10)]
    try:
        n = 100
        results = [None] * n
        go = threading.Barrier(n)

        def worker(i):
            sid = sids[i % len(sids)]
            c = cv.conn(timeout=120)
            try:
                body = {"cmd": ["sh", "-c", 'printf "%s %s\\n" "$1" "$(hostname)"; echo "e$1" >&2; exit $(($1 % 7))',
                                "sh", str(i)]}
                go.wait()
                c.request("POST", "/v1/sandboxes/%s/exec" % sid, body=json.dumps(body))
                r = c.getresponse()
                results[i] = (r.status, json.loads(r.read()))
            except Exception as e:  # reported below
                results[i] = e
            finally:
                c.close()

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        took = time.time() - t0
        bad = []
        for i, r in enumerate(results):
            sid = sids[i % len(sids)]
            if (not isinstance(r, tuple) or r[0] != 200 or r[1].get("stdout") != "%d %s\n" % (i, sid)
                    or r[1].get("stderr") != "e%d\n" % i or r[1].get("exit_code") != i % 7):
                bad.append((i, r))
        assert not bad, "%d of %d execs wrong, e.g. %r" % (len(bad), n, bad[:3])
        assert took < 60, took
        _healthy(cv)
    finally:
        _delete_all(cv, sids)


def test_stream_100mb_with_bounded_memory(cv):
    # A private coved, so that its memory is this test's alone.
    own = covetest.Coved().start()
    try:
        sid = own.create()
        pid = own.pid()
        rss0 = _rss_kb(pid)
        total = 100000000
        c = own.conn(timeout=120)
        c.request("POST", "/v1/sandboxes/%s/exec?stream=1" % sid,
                  body=json.dumps({"cmd": ["sh", "-c", "head -c %d /dev/zero | tr '\\0' x" % total]}))
        r = c.getresponse()
        assert r.status == 200 and r.getheader("Content-Type") == "application/x-ndjson"
        got, events, peak, exit_ev = 0, 0, rss0, None
        t0 = time.time()
        slow_until = t0 + 1.5  # a slow reader first: the output must wait, not pile up in coved
        while True:
            line = r.readline()
            if not line:
                break
            ev = json.loads(line)
            events += 1
            if ev["type"] == "stdout":
                data = ev["data"].encode() if "data" in ev else base64.b64decode(ev["data_b64"])
                assert data.count(b"x") == len(data), data[:40]
                got += len(data)
            elif ev["type"] == "exit":
                exit_ev = ev
            else:
                assert ev["type"] == "start", ev
            if time.time() < slow_until:
                time.sleep(0.05)
                peak = max(peak, _rss_kb(pid))
            elif events % 25 == 0:
                peak = max(peak, _rss_kb(pid))
        c.close()
        took = time.time() - t0
        after = _rss_kb(pid)
        assert exit_ev and exit_ev["exit_code"] == 0, exit_ev
        assert got == total, (got, total)
        assert peak < 64 * 1024 and after < 64 * 1024, (rss0, peak, after)
        assert peak - rss0 < 32 * 1024, (rss0, peak)
        assert took < 60, took
        _healthy(own)
    finally:
        own.teardown()


# ---------------------------------------------------------------- clients that leave

def _leave_mid_exec(cv, sid, cmd, stream, read_some):
    c = cv.conn(timeout=30)
    c.request("POST", "/v1/sandboxes/%s/exec%s" % (sid, "?stream=1" if stream else ""),
              body=json.dumps({"cmd": cmd}))
    if stream:
        r = c.getresponse()
        assert r.status == 200
        assert json.loads(r.readline())["type"] == "start"
        if read_some:
            assert json.loads(r.readline())["type"] == "stdout"
        r.close()
    else:
        # Until the process is seen running, then hang up.
        assert wait_until(lambda: cmd[-1] in _ps(cv, sid), 10), _ps(cv, sid)
    c.sock.shutdown(socket.SHUT_RDWR)
    c.close()


def test_client_leaving_a_stream_ends_the_process(cv):
    sid = cv.create(name="robust-leave")
    try:
        fds0 = _nfds(cv.pid())
        cases = [(["sleep", "100"], False), (["yes", "endless"], True),
                 (["sh", "-c", "sleep 101 & sleep 102 & yes endless2"], True)]
        for cmd, read_some in cases:
            _leave_mid_exec(cv, sid, cmd, True, read_some)
            gone = wait_until(lambda: not re.search(r"sleep 10|endless", _ps(cv, sid)), 10)
            assert gone, (cmd, _ps(cv, sid))
        _healthy(cv)
        assert cv.exec(sid, ["echo", "ok"])["stdout"] == "ok\n"
        # Its pipes and the connection are closed in coved too.
        assert wait_until(lambda: _nfds(cv.pid()) <= fds0, 5), (fds0, _nfds(cv.pid()))
    finally:
        _delete_all(cv, [sid])


def test_client_leaving_a_collected_exec_ends_the_process(cv):
    # The same for an exec whose output is collected into one reply: the
    # process is killed when its client has gone, not left to run forever.
    sid = cv.create(name="robust-leave2")
    try:
        for cmd in (["sleep", "103"], ["yes", "endless3"]):
            _leave_mid_exec(cv, sid, cmd, False, False)
            gone = wait_until(lambda: cmd[-1] not in _ps(cv, sid), 5)
            assert gone, (cmd, _ps(cv, sid))
        _healthy(cv)
    finally:
        _delete_all(cv, [sid])

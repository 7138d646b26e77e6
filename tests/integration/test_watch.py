"""Watch: file-change events under a folder of a sandbox, streamed as NDJSON
(GET /v1/sandboxes/{id}/files/watch). Changes made by processes inside the
sandbox show up with names relative to the folder; recursive watches follow
folders made and moved later but never a symlink; a client that disconnects
frees the inotify fd; a sandbox's deletion ends the stream."""
import json
import os
import queue
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

import covetest


def _url(sid, **params):
    return "/v1/sandboxes/%s/files/watch?%s" % (sid, urllib.parse.urlencode(params))


class Watch:
    """One watch stream, its lines read by a thread into a queue."""

    def __init__(self, cv, sid, path, **params):
        self.conn = cv.conn(timeout=120)
        self.conn.request("GET", _url(sid, path=path, **params))
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.events = queue.Queue()
        if self.status != 200:
            self.body = json.loads(self.resp.read())
            self.conn.close()
            return
        assert self.resp.getheader("Content-Type") == "application/x-ndjson"
        threading.Thread(target=self._read, daemon=True).start()
        first = self.next(30)
        assert first == {"type": "start"}, first

    def _read(self):
        try:
            for line in self.resp:
                self.events.put(json.loads(line))
        except Exception:  # the connection closed under the reader (close())
            pass
        self.events.put(None)  # the end of the stream

    def next(self, timeout=10):
        return self.events.get(timeout=timeout)

    def until(self, name, timeout=15):
        """Events up to and including the first one about name (None: the
        end of the stream), skipping keepalives."""
        got = []
        deadline = time.time() + timeout
        while True:
            e = self.next(max(0.1, deadline - time.time()))
            if e is None or e.get("type") != "keepalive":
                got.append(e)
            if (e is None and name is None) or (e is not None and e.get("name") == name and name is not None):
                return got
            assert e is not None, ("stream ended", got)

    def close(self):
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()


def _sb(cv, cache={}):
    sid = cache.get(cv.socket)
    if not sid:
        sid = cache[cv.socket] = cv.create()
    return sid


def sh(cv, sid, script):
    r = cv.exec(sid, ["sh", "-c", script])
    assert r["exit_code"] == 0, r
    return r["stdout"]


def brief(events):
    return [(e["type"], e["name"]) for e in events if e and e["type"] not in ("keepalive",)]


def test_watch_file_events(cv):
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/w1 && mkdir /tmp/w1")
    w = Watch(cv, sid, "/tmp/w1")
    try:
        sh(cv, sid, "cd /tmp/w1 && echo hi > a && chmod 600 a && mv a b && mkdir d && rm b && touch end")
        got = w.until("end")
        b = brief(got)
        want = [("create", "a"), ("write", "a"), ("chmod", "a"), ("rename", "a"), ("rename", "b"),
                ("create", "d"), ("remove", "b"), ("create", "end")]
        it = iter(b)
        assert all(x in it for x in want), b  # in this order, maybe with more between
        moves = [e for e in got if e["type"] == "rename"]
        assert [m["moved"] for m in moves] == ["from", "to"] and moves[0]["cookie"] == moves[1]["cookie"], moves
        assert [e["is_dir"] for e in got if e["name"] == "d"] == [True], got
        assert not any(e["is_dir"] for e in got if e["name"] != "d"), got
    finally:
        w.close()


def test_watch_recursive(cv):
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/w2 /tmp/away && mkdir -p /tmp/w2/old/older")
    w = Watch(cv, sid, "/tmp/w2", recursive="1")
    try:
        # Folders made after the watch started, and files made in them at
        # once (before their watch can be in place), are reported.
        sh(cv, sid, "cd /tmp/w2 && echo x > old/older/f && mkdir -p new/deeper && echo y > new/deeper/g "
                    "&& touch mark1")
        names = [n for _, n in brief(w.until("mark1"))]
        for n in ("old/older/f", "new", "new/deeper", "new/deeper/g"):
            assert n in names, (n, names)
        # A folder moved inside the watched one keeps being watched, under its new name.
        sh(cv, sid, "cd /tmp/w2 && mv new renamed && echo z > renamed/deeper/h && touch mark2")
        b = brief(w.until("mark2"))
        assert ("rename", "new") in b and ("rename", "renamed") in b and ("create", "renamed/deeper/h") in b, b
        assert not any(n.startswith("new/") for _, n in b), b
        # Moved away, it is not watched any more.
        # (/tmp/away is made anew: overlayfs refuses, EXDEV, to move a folder into one of the image)
        sh(cv, sid, "mkdir /tmp/away && mv /tmp/w2/renamed /tmp/away/ && echo q > /tmp/away/renamed/deeper/i "
                    "&& touch /tmp/w2/mark3")
        b = brief(w.until("mark3"))
        assert ("rename", "renamed") in b and not any("deeper" in n for _, n in b), b
        # A removed subfolder's events stop with it; the stream goes on.
        sh(cv, sid, "rm -rf /tmp/w2/old && touch /tmp/w2/mark4")
        b = brief(w.until("mark4"))
        assert ("remove", "old/older/f") in b and ("remove", "old") in b, b
    finally:
        w.close()


def test_watch_not_recursive(cv):
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/w3 && mkdir -p /tmp/w3/sub")
    w = Watch(cv, sid, "/tmp/w3")
    try:
        sh(cv, sid, "cd /tmp/w3 && echo > sub/f && mkdir s2 && echo > s2/f && chmod 700 sub && touch end")
        b = brief(w.until("end"))
        assert ("create", "s2") in b and ("chmod", "sub") in b, b
        assert not any("/" in n for _, n in b), b
    finally:
        w.close()


def test_watch_bad_requests(cv):
    sid = _sb(cv)
    sh(cv, sid, "mkdir -p /tmp/w4 && echo > /tmp/w4/file && mkfifo /tmp/w4/fifo 2>/dev/null; true")
    cases = [
        (sid, {"path": "/tmp/w4/missing"}, 404, "not_found"),
        (sid, {"path": "/tmp/w4/file"}, 400, "invalid_argument"),
        (sid, {"path": "/tmp/w4/fifo"}, 400, "invalid_argument"),
        (sid, {"path": "/tmp/w4/file/below"}, 400, "invalid_argument"),
        (sid, {"path": "tmp/w4"}, 400, "invalid_argument"),
        (sid, {}, 400, "invalid_argument"),
        (sid, {"path": "/tmp/w4", "recursive": "maybe"}, 400, "invalid_argument"),
        (sid, {"path": "/tmp/w4", "keepalive": "0"}, 400, "invalid_argument"),
        (sid, {"path": "/tmp/w4", "bogus": "1"}, 400, "invalid_argument"),
        ("sb_aaaaaaaaaaaa", {"path": "/tmp"}, 404, "not_found"),
    ]
    for s, params, status, code in cases:
        st, j = cv.api("GET", _url(s, **params))
        assert st == status and j["error"]["code"] == code, (params, st, j)
    # A folder the user may not read.
    sh(cv, sid, "mkdir -p /tmp/w4/private && chmod 700 /tmp/w4/private")
    st, j = cv.api("GET", _url(sid, path="/tmp/w4/private", user="nobody"))
    assert st == 403, (st, j)
    st, j = cv.api("POST", _url(sid, path="/tmp/w4"))
    assert st == 400, (st, j)


def test_watch_symlinks_not_followed(cv):
    sid = _sb(cv)
    host_dir = tempfile.mkdtemp(prefix="cove-watch-host-", dir="/var/tmp")
    try:
        sh(cv, sid, "rm -rf /tmp/w5 /tmp/elsewhere && mkdir -p /tmp/w5 /tmp/elsewhere/sub && cd /tmp/w5 && "
                    "ln -s /tmp/elsewhere inside && ln -s / root && ln -s %s host && ln -s ../elsewhere rel"
                    % host_dir)
        # The watched path itself resolves inside the sandbox: the host's folder is not there.
        st, j = cv.api("GET", _url(sid, path="/tmp/w5/host"))
        assert st == 404, (st, j)
        w = Watch(cv, sid, "/tmp/w5", recursive="1")
        try:
            with open(os.path.join(host_dir, "from-host"), "w") as f:
                f.write("x")
            sh(cv, sid, "echo > /tmp/elsewhere/x && echo > /tmp/elsewhere/sub/y && echo > /etc/watch-x "
                        "&& touch /tmp/w5/end")
            b = brief(w.until("end"))
            assert set(b) <= {("create", "end"), ("chmod", "end")}, b  # touch: create, then times
        finally:
            w.close()
        # Watching through a symlink watches its target, inside the sandbox.
        w = Watch(cv, sid, "/tmp/w5/rel")
        try:
            sh(cv, sid, "touch /tmp/elsewhere/via-link")
            assert brief(w.until("via-link"))[-1] == ("create", "via-link")
        finally:
            w.close()
    finally:
        subprocess.run(["rm", "-rf", host_dir])


def _fds(pid):
    d = "/proc/%d/fd" % pid
    out = []
    for n in os.listdir(d):
        try:
            out.append(os.readlink(os.path.join(d, n)))
        except OSError:
            pass
    return out


def test_watch_disconnect_frees(cv):
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/w6 && mkdir -p /tmp/w6/a/b /tmp/w6/c")
    time.sleep(0.2)
    before = len(_fds(cv.pid()))
    ws = [Watch(cv, sid, "/tmp/w6", recursive="1") for _ in range(3)]
    during = _fds(cv.pid())
    assert sum("inotify" in f for f in during) >= 3, during
    for w in ws:
        w.close()
    assert covetest.wait_until(lambda: len(_fds(cv.pid())) <= before, 10), (before, _fds(cv.pid()))
    assert not any("inotify" in f for f in _fds(cv.pid())), _fds(cv.pid())
    # Still serving, and a new watch works.
    w = Watch(cv, sid, "/tmp/w6")
    w.close()


def test_watch_ends_with_sandbox(cv):
    sid = cv.create()
    sh(cv, sid, "mkdir -p /tmp/w7")
    w = Watch(cv, sid, "/tmp/w7", recursive="1")
    try:
        st, _ = cv.api("DELETE", "/v1/sandboxes/" + sid)
        assert st == 200
        got = w.until(None, 20)
        assert got[-2]["type"] == "error" and got[-2]["error"]["code"] == "wrong_state", got
    finally:
        w.close()
    assert covetest.wait_until(lambda: not any("inotify" in f for f in _fds(cv.pid())), 10)


def test_watch_folder_removed(cv):
    sid = _sb(cv)
    sh(cv, sid, "mkdir -p /tmp/w8/sub")
    w = Watch(cv, sid, "/tmp/w8", recursive="1")
    try:
        sh(cv, sid, "rm -rf /tmp/w8")
        got = w.until(None, 20)
        assert ("remove", "sub") in brief(got[:-2]), got
        assert got[-2]["type"] == "error" and got[-2]["error"]["code"] == "not_found", got
    finally:
        w.close()


def test_watch_keepalive(cv):
    sid = _sb(cv)
    sh(cv, sid, "mkdir -p /tmp/w9")
    w = Watch(cv, sid, "/tmp/w9", keepalive="1")
    try:
        t0 = time.time()
        assert w.next(5) == {"type": "keepalive"}
        assert w.next(5) == {"type": "keepalive"}
        assert 1.5 < time.time() - t0 < 4
    finally:
        w.close()


def test_watch_overflow(cv):
    """A client that does not read: coved stops reading events (its memory
    stays bounded), the kernel's queue overflows, and the client is told so
    when it reads again; the stream goes on."""
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/w10 && mkdir -p /tmp/w10")
    c = cv.conn(timeout=60)
    try:
        c.request("GET", _url(sid, path="/tmp/w10"))
        r = c.getresponse()
        assert r.status == 200 and json.loads(r.readline()) == {"type": "start"}
        # Writes alternating between two files (inotify merges identical
        # events in a row), with long names: ~250 bytes an event, 40000
        # events, more than coved keeps unsent (1 MiB) plus the kernel's
        # queue (16384 events).
        script = ("import os\nfds = [os.open('/tmp/w10/' + c * 200, os.O_CREAT | os.O_WRONLY) for c in 'ab']\n"
                  "for i in range(40000): os.write(fds[i & 1], b'x')\nos.close(os.open('/tmp/w10/end', os.O_CREAT))")
        assert cv.exec(sid, ["python3", "-c", script])["exit_code"] == 0
        types, deadline = [], time.time() + 60
        while not types or types[-1] != "overflow":
            types.append(json.loads(r.readline())["type"])
            assert len(types) < 40000 and time.time() < deadline, types[-3:]
        assert set(types[:-1]) <= {"create", "write"}, set(types)
        assert len(types) < 39000, len(types)  # events were lost
        sh(cv, sid, "touch /tmp/w10/after")
        while json.loads(r.readline()).get("name") != "after":
            assert time.time() < deadline
    finally:
        c.close()


def test_cli_files_watch(cv):
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/w11 && mkdir -p /tmp/w11")
    env = dict(os.environ, COVE_SOCKET=cv.socket, COVE_DATA=cv.data)
    for json_out in (False, True):
        args = [covetest.COVE] + (["--json"] if json_out else []) + ["files", "watch", "-r", sid, "/tmp/w11"]
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        try:
            if json_out:
                assert json.loads(p.stdout.readline()) == {"type": "start"}
            else:
                assert p.stderr.readline() == "cove: watching /tmp/w11\n"
            sh(cv, sid, "cd /tmp/w11 && mkdir d%d && touch d%d/f && mv d%d/f d%d/g"
                        % ((json_out,) * 4))
            lines = []
            while not lines or "d%d/g" % json_out not in lines[-1]:
                lines.append(p.stdout.readline())
                assert lines[-1], lines
            if json_out:
                got = [(e["type"], e["name"]) for e in map(json.loads, lines)]
                want = [("create", "d1"), ("create", "d1/f"), ("rename", "d1/f"), ("rename", "d1/g")]
            else:
                got, want = lines, ["create d0/\n", "create d0/f\n", "rename d0/f (from)\n", "rename d0/g (to)\n"]
            it = iter(got)
            assert all(x in it for x in want), got
        finally:
            p.terminate()
            p.wait(10)
    r = cv.cli("files", "watch", sid, "/tmp/w11/nope")
    assert r.returncode == 1 and b"No such file" in r.stderr, r
    r = cv.cli("files", "watch", sid)
    assert r.returncode == 2, r


def test_watch_folder_limit(cv):
    """At most 8192 folders a watch: 413 before the stream, a too_large
    error event once it runs; a non-recursive watch of the same folder is fine."""
    sid = _sb(cv)
    mk = "import os\nfor i in range(%d, %d): os.mkdir('/tmp/w12/d%%d' %% i)"
    sh(cv, sid, "rm -rf /tmp/w12 && mkdir /tmp/w12 && python3 -c \"%s\"" % (mk % (0, 8192)))
    st, j = cv.api("GET", _url(sid, path="/tmp/w12", recursive="1"))
    assert st == 413 and j["error"]["code"] == "too_large", (st, j)
    sh(cv, sid, "rmdir /tmp/w12/d0 /tmp/w12/d1")
    w = Watch(cv, sid, "/tmp/w12", recursive="1")  # 8191 folders
    try:
        sh(cv, sid, "python3 -c \"%s\"" % (mk % (8192, 8194)))
        got = w.until(None, 20)
        assert got[-2]["type"] == "error" and got[-2]["error"]["code"] == "too_large", got[-3:]
    finally:
        w.close()
    w = Watch(cv, sid, "/tmp/w12")
    w.close()
    sh(cv, sid, "rm -rf /tmp/w12")

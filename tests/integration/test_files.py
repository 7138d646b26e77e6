"""The Files API: read, write, list, stat, remove, mkdir, move; ownership of
what it writes; and paths that try to leave the sandbox (.., symlinks to host
paths, loops, a symlink swapped in while requests run) never reach the host."""
import os
import threading
import urllib.parse

import covetest


def _sb(cv, cache={}):
    sid = cache.get(cv.socket)
    if not sid:
        sid = cache[cv.socket] = cv.create()
    return sid


def _url(sid, route="files", **params):
    return "/v1/sandboxes/%s/%s?%s" % (sid, route, urllib.parse.urlencode(params, quote_via=urllib.parse.quote))


def _raw(cv, method, path, body=None, timeout=120):
    """Returns (status, bytes)."""
    c = cv.conn(timeout)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def put(cv, sid, path, data, **kw):
    return cv.api("PUT", _url(sid, path=path, **kw), raw=data)


def get(cv, sid, path, **kw):
    return _raw(cv, "GET", _url(sid, path=path, **kw))


def sh(cv, sid, script, **kw):
    r = cv.exec(sid, ["sh", "-c", script], **kw)
    assert r["exit_code"] == 0, r
    return r["stdout"]


def test_round_trip(cv):
    sid = _sb(cv)
    data = bytes(range(256)) * 17 + b"\0\r\n\xff"
    st, j = put(cv, sid, "/tmp/bin.dat", data)
    assert st == 201 and j == {"path": "/tmp/bin.dat", "size": len(data)}, (st, j)
    assert get(cv, sid, "/tmp/bin.dat") == (200, data)
    assert sh(cv, sid, "md5sum < /tmp/bin.dat").split()[0] == __import__("hashlib").md5(data).hexdigest()
    st, j = put(cv, sid, "/tmp/bin.dat", b"short")
    assert st == 200 and j["size"] == 5, (st, j)  # replaced, truncated
    assert get(cv, sid, "/tmp/bin.dat") == (200, b"short")
    assert put(cv, sid, "/tmp/empty", b"")[0] == 201
    assert get(cv, sid, "/tmp/empty") == (200, b"")


def test_large_file(cv):
    sid = _sb(cv)
    data = os.urandom(10 << 20)
    assert put(cv, sid, "/tmp/big", data)[0] == 201
    assert sh(cv, sid, "stat -c %s /tmp/big") == "%d\n" % len(data)
    st, body = get(cv, sid, "/tmp/big")
    assert st == 200 and body == data


def test_mode_and_owner(cv):
    sid = _sb(cv)
    assert put(cv, sid, "/tmp/m1", b"x")[0] == 201
    assert sh(cv, sid, "stat -c '%a %u %g' /tmp/m1") == "644 0 0\n"
    assert put(cv, sid, "/tmp/m2", b"x", mode="0600")[0] == 201
    assert sh(cv, sid, "stat -c '%a %u %g' /tmp/m2") == "600 0 0\n"
    assert put(cv, sid, "/tmp/m2", b"y", mode="0755")[0] == 200  # an explicit mode applies to an existing file
    assert sh(cv, sid, "stat -c '%a' /tmp/m2") == "755\n"
    assert put(cv, sid, "/tmp/nob", b"x", user="nobody")[0] == 201
    assert sh(cv, sid, "stat -c '%a %u %g' /tmp/nob") == "644 65534 65534\n"
    assert sh(cv, sid, "ls -ln /tmp/nob").split()[2:4] == ["65534", "65534"]
    # The user's permissions apply: nobody may not write in /root.
    st, j = put(cv, sid, "/root/nope", b"x", user="nobody")
    assert st == 403 and j["error"]["code"] == "permission_denied", (st, j)
    st, j = put(cv, sid, "/tmp/x", b"x", user="nosuchuser")
    assert st == 404 or st == 400, (st, j)


def test_owner_on_disk_is_image_relative(cv):
    sid = _sb(cv)
    assert put(cv, sid, "/root/owned", b"x")[0] == 201
    assert put(cv, sid, "/tmp/owned-nobody", b"x", user="nobody")[0] == 201
    upper = os.path.join(cv.data, "pool", "sandboxes", sid, "upper", "root")
    st = os.stat(os.path.join(upper, "root", "owned"))
    assert (st.st_uid, st.st_gid) == (0, 0), st
    st = os.stat(os.path.join(upper, "tmp", "owned-nobody"))
    assert (st.st_uid, st.st_gid) == (65534, 65534), st


def test_list_and_stat(cv):
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/d && mkdir -p /tmp/d/sub && printf abc > /tmp/d/f && chmod 640 /tmp/d/f && "
           "ln -s ../target /tmp/d/link && mkfifo /tmp/d/fifo")
    st, body = get(cv, sid, "/tmp/d")
    j = __import__("json").loads(body)
    assert st == 200 and j["path"] == "/tmp/d" and j["truncated"] is False, j
    by = {e["name"]: e for e in j["entries"]}
    assert sorted(by) == ["f", "fifo", "link", "sub"], by
    assert by["f"]["type"] == "file" and by["f"]["size"] == 3 and by["f"]["mode"] == "0640", by
    assert isinstance(by["f"]["mtime"], int) and by["f"]["mtime"] > 1600000000
    assert by["sub"]["type"] == "dir" and by["fifo"]["type"] == "other", by
    assert by["link"]["type"] == "symlink" and by["link"]["target"] == "../target", by
    st, j = cv.api("GET", _url(sid, path="/tmp/d/f", stat=1))
    assert st == 200 and j["name"] == "f" and j["type"] == "file" and j["size"] == 3 and j["mode"] == "0640", j
    st, j = cv.api("GET", _url(sid, path="/tmp/d/link", stat=1))
    assert st == 200 and j["type"] == "symlink" and j["target"] == "../target", j
    st, j = cv.api("GET", _url(sid, path="/tmp/d/fifo"))  # never opened: it would block
    assert st == 400 and "not a regular file" in j["error"]["message"], (st, j)
    st, j = cv.api("GET", _url(sid, path="/tmp/d/missing"))
    assert st == 404 and j["error"]["code"] == "not_found", (st, j)
    st, j = cv.api("GET", _url(sid, path="/tmp/d/missing", stat=1))
    assert st == 404, (st, j)


def test_remove(cv):
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/r && mkdir -p /tmp/r/full/a/b /tmp/r/empty && touch /tmp/r/file /tmp/r/full/a/b/c "
           "&& ln -s / /tmp/r/full/rootlink")
    st, j = cv.api("DELETE", _url(sid, path="/tmp/r/file"))
    assert st == 200 and j["deleted"] is True, (st, j)
    st, j = cv.api("DELETE", _url(sid, path="/tmp/r/file"))
    assert st == 200 and j["deleted"] is False, (st, j)
    st, j = cv.api("DELETE", _url(sid, path="/tmp/no/such/dir/file"))
    assert st == 200 and j["deleted"] is False, (st, j)
    assert cv.api("DELETE", _url(sid, path="/tmp/r/empty"))[1]["deleted"] is True
    st, j = cv.api("DELETE", _url(sid, path="/tmp/r/full"))
    assert st == 409 and j["error"]["code"] == "wrong_state", (st, j)
    st, j = cv.api("DELETE", _url(sid, path="/tmp/r/full", recursive=1))
    assert st == 200 and j["deleted"] is True, (st, j)
    assert sh(cv, sid, "ls -A /tmp/r; ls / | wc -l") != "0\n"  # the symlink to / went, / did not
    assert sh(cv, sid, "ls -A /tmp/r") == ""
    for bad in ["/", "/tmp/..", "/tmp/."]:
        st, j = cv.api("DELETE", _url(sid, path=bad, recursive=1))
        assert st == 400, (bad, st, j)


def test_mkdir_and_move(cv):
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/mk /tmp/mk-nob")
    st, j = cv.api("POST", _url(sid, "files/mkdir", path="/tmp/mk/a/b/c"))
    assert st == 201 and j == {"path": "/tmp/mk/a/b/c", "created": True}, (st, j)
    st, j = cv.api("POST", _url(sid, "files/mkdir", path="/tmp/mk/a/b/c"))
    assert st == 200 and j["created"] is False, (st, j)
    assert sh(cv, sid, "stat -c '%F %a %u' /tmp/mk/a/b/c") == "directory 755 0\n"
    assert cv.api("POST", _url(sid, "files/mkdir", path="/tmp/mk-nob/sub", user="nobody"))[0] == 201
    assert sh(cv, sid, "stat -c %u /tmp/mk-nob/sub") == "65534\n"
    assert put(cv, sid, "/tmp/mk/file", b"x")[0] == 201
    st, j = cv.api("POST", _url(sid, "files/mkdir", path="/tmp/mk/file/sub"))
    assert st == 400, (st, j)  # not a directory
    assert put(cv, sid, "/tmp/mk/p/q/r.txt", b"deep", parents=1)[0] == 201
    assert get(cv, sid, "/tmp/mk/p/q/r.txt") == (200, b"deep")
    st, j = cv.api("POST", _url(sid, "files/move", **{"from": "/tmp/mk/p/q/r.txt", "to": "/tmp/mk/moved"}))
    assert st == 200 and j == {"from": "/tmp/mk/p/q/r.txt", "to": "/tmp/mk/moved"}, (st, j)
    assert get(cv, sid, "/tmp/mk/moved") == (200, b"deep")
    assert cv.api("GET", _url(sid, path="/tmp/mk/p/q/r.txt"))[0] == 404
    st, j = cv.api("POST", _url(sid, "files/move", **{"from": "/tmp/mk/file", "to": "/tmp/mk/moved"}))
    assert st == 409, (st, j)  # no overwrite unless asked
    st, j = cv.api("POST", _url(sid, "files/move", **{"from": "/tmp/mk/file", "to": "/tmp/mk/moved", "overwrite": 1}))
    assert st == 200 and get(cv, sid, "/tmp/mk/moved") == (200, b"x"), (st, j)
    st, j = cv.api("POST", _url(sid, "files/move", **{"from": "/tmp/mk/nothing", "to": "/tmp/mk/x"}))
    assert st == 404, (st, j)


def test_bad_requests(cv):
    sid = _sb(cv)
    st, j = cv.api("GET", _url("sb_aaaaaaaaaaaa", path="/tmp"))
    assert st == 404 and j["error"]["code"] == "not_found", (st, j)
    for q in ["", "path=", "path=relative/x", "path=%2Ftmp%00x", "path=%zz", "path=/tmp&bogus=1", "path=/tmp&stat=2"]:
        st, j = cv.api("GET", "/v1/sandboxes/%s/files?%s" % (sid, q))
        assert st == 400 and j["error"]["code"] == "invalid_argument", (q, st, j)
    st, j = cv.api("PUT", _url(sid, path="/tmp/x", mode="999"), raw=b"")
    assert st == 400, (st, j)
    st, j = cv.api("POST", _url(sid, "files/move", **{"from": "/tmp/x"}))
    assert st == 400 and "'to'" in j["error"]["message"], (st, j)
    st, j = cv.api("PUT", _url(sid, path="/tmp"), raw=b"x")
    assert st == 409, (st, j)  # a directory
    st, j = cv.api("GET", _url(sid, path="/dev/null"))
    assert st == 400, (st, j)
    st, j = cv.api("GET", _url(sid, path="/proc/self/environ"))
    assert st == 403, (st, j)  # procfs is not served


HOST_SECRET = "/root/.cove-files-test-secret"


def _host_secret():
    with open(HOST_SECRET, "w") as f:
        f.write("host secret\n")


def test_escapes_stay_inside(cv):
    sid = _sb(cv)
    _host_secret()
    try:
        sh(cv, sid, "rm -rf /tmp/esc && mkdir -p /tmp/esc && cd /tmp/esc && "
               "ln -s /etc/../../../../../../root/.cove-files-test-secret up && "
               "ln -s %s abs && ln -s ../../../../../../../../root rootdir && "
               "ln -s loop1 loop2 && ln -s loop2 loop1 && ln -s /work/nowhere/x dangling && "
               "ln -s /root/.cove-planted planted" % HOST_SECRET)
        for p in ["/tmp/esc/up", "/tmp/esc/abs", "/../../../../root/.cove-files-test-secret",
                  "/tmp/esc/rootdir/.cove-files-test-secret", "/tmp/../../../../" + HOST_SECRET]:
            st, body = get(cv, sid, p)
            assert st == 404 and b"host secret" not in body, (p, st, body)
        # Inside the sandbox, the same paths are the sandbox's own.
        sh(cv, sid, "echo sandbox secret > %s" % HOST_SECRET)
        for p in ["/tmp/esc/up", "/tmp/esc/abs", "/../../.." + HOST_SECRET, "/tmp/esc/rootdir/.cove-files-test-secret"]:
            assert get(cv, sid, p) == (200, b"sandbox secret\n"), p
        st, j = cv.api("GET", _url(sid, path="/tmp/esc/loop1"))
        assert st == 400 and "symbolic links" in j["error"]["message"], (st, j)
        st, j = cv.api("PUT", _url(sid, path="/tmp/esc/loop1"), raw=b"x")
        assert st == 400, (st, j)
        # Writing through symlinks lands inside the sandbox, never on the host.
        assert put(cv, sid, "/tmp/esc/abs", b"overwritten")[0] == 200
        assert put(cv, sid, "/tmp/esc/planted", b"planted")[0] == 201
        assert put(cv, sid, "/../../root/.cove-planted2", b"planted")[0] == 201
        assert cv.api("PUT", _url(sid, path="/tmp/esc/dangling"), raw=b"x")[0] == 404  # /work is not in it
        with open(HOST_SECRET) as f:
            assert f.read() == "host secret\n"
        assert not os.path.exists("/root/.cove-planted") and not os.path.exists("/root/.cove-planted2")
        assert sh(cv, sid, "cat %s /root/.cove-planted /root/.cove-planted2" % HOST_SECRET) == \
            "overwrittenplantedplanted"
        # Removing and moving through them stays inside too.
        assert cv.api("DELETE", _url(sid, path="/tmp/esc/rootdir/.cove-files-test-secret"))[1]["deleted"] is True
        assert os.path.exists(HOST_SECRET)
        st, j = cv.api("POST", _url(sid, "files/move", **{"from": "/tmp/esc/planted", "to": "/tmp/esc/rootdir/mv"}))
        assert st == 200 and not os.path.exists("/root/mv"), (st, j)
    finally:
        os.unlink(HOST_SECRET)


def test_symlink_swapped_while_requests_run(cv):
    sid = _sb(cv)
    _host_secret()
    host_target = "/root/.cove-race-target"
    try:
        sh(cv, sid, "rm -rf /tmp/race && mkdir -p /tmp/race/d /root && echo inside > /tmp/race/d/.cove-files-test-secret")
        # Flip /tmp/race/x between a real directory and a symlink to /root
        # (the host's /root, were it resolved on the host).
        script = ("end=$(($(date +%s)+8)); while [ $(date +%s) -lt $end ]; do "
                  "ln -sfn /root /tmp/race/x; rm -f /tmp/race/x; ln -sfn d /tmp/race/x; rm -f /tmp/race/x; done")
        flipper = threading.Thread(target=lambda: cv.exec(sid, ["sh", "-c", script], timeout=30))
        flipper.start()
        seen = set()
        while flipper.is_alive():
            st, body = get(cv, sid, "/tmp/race/x/.cove-files-test-secret")
            assert b"host secret" not in body, body
            seen.add(st)
            st, _ = put(cv, sid, "/tmp/race/x/.cove-race-target", b"w")
            seen.add(st)
        flipper.join()
        assert seen <= {200, 201, 404} and 404 in seen and (200 in seen or 201 in seen), seen
        with open(HOST_SECRET) as f:
            assert f.read() == "host secret\n"
        assert not os.path.exists(host_target)
    finally:
        os.unlink(HOST_SECRET)
        if os.path.exists(host_target):
            os.unlink(host_target)


def test_cli_cp(cv):
    sid = _sb(cv)
    src = os.path.join(cv.dir, "cp-src")
    with open(src, "wb") as f:
        f.write(b"via the cli\0\xff")
    r = cv.cli("cp", src, sid + ":/tmp/cp-dst")
    assert r.returncode == 0, r
    assert get(cv, sid, "/tmp/cp-dst") == (200, b"via the cli\0\xff")
    dst = os.path.join(cv.dir, "cp-back")
    r = cv.cli("cp", sid + ":/tmp/cp-dst", dst)
    assert r.returncode == 0, r
    with open(dst, "rb") as f:
        assert f.read() == b"via the cli\0\xff"
    r = cv.cli("cp", sid + ":/tmp/none", dst)
    assert r.returncode == 1 and b"No such file" in r.stderr, r

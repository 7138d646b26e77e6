"""The Files API: read, write, list, stat, remove, mkdir, move; ownership of
what it writes; and paths that try to leave the sandbox (.., symlinks to host
paths, loops, a symlink swapped in while requests run) never reach the host."""
import http.client
import io
import json
import os
import re
import tarfile
import threading
import time
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


# one name per test run: two suites may run at once on a machine
SECRET_NAME = ".cove-files-test-secret-%d" % os.getpid()
HOST_SECRET = "/root/" + SECRET_NAME


def _host_secret():
    with open(HOST_SECRET, "w") as f:
        f.write("host secret\n")


def test_escapes_stay_inside(cv):
    sid = _sb(cv)
    _host_secret()
    try:
        sh(cv, sid, "rm -rf /tmp/esc && mkdir -p /tmp/esc && cd /tmp/esc && "
               "ln -s /etc/../../../../../../root/%s up && "
               "ln -s %s abs && ln -s ../../../../../../../../root rootdir && "
               "ln -s loop1 loop2 && ln -s loop2 loop1 && ln -s /work/nowhere/x dangling && "
               "ln -s /root/.cove-planted planted" % (SECRET_NAME, HOST_SECRET))
        for p in ["/tmp/esc/up", "/tmp/esc/abs", "/../../../../root/" + SECRET_NAME,
                  "/tmp/esc/rootdir/" + SECRET_NAME, "/tmp/../../../../" + HOST_SECRET]:
            st, body = get(cv, sid, p)
            assert st == 404 and b"host secret" not in body, (p, st, body)
        # Inside the sandbox, the same paths are the sandbox's own.
        sh(cv, sid, "echo sandbox secret > %s" % HOST_SECRET)
        for p in ["/tmp/esc/up", "/tmp/esc/abs", "/../../.." + HOST_SECRET, "/tmp/esc/rootdir/" + SECRET_NAME]:
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
        assert cv.api("DELETE", _url(sid, path="/tmp/esc/rootdir/" + SECRET_NAME))[1]["deleted"] is True
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
        sh(cv, sid, "rm -rf /tmp/race && mkdir -p /tmp/race/d /root && echo inside > /tmp/race/d/" + SECRET_NAME)
        # Flip /tmp/race/x between a real directory and a symlink to /root
        # (the host's /root, were it resolved on the host).
        script = ("end=$(($(date +%s)+8)); while [ $(date +%s) -lt $end ]; do "
                  "ln -sfn /root /tmp/race/x; rm -f /tmp/race/x; ln -sfn d /tmp/race/x; rm -f /tmp/race/x; done")
        flipper = threading.Thread(target=lambda: cv.exec(sid, ["sh", "-c", script], timeout=30))
        flipper.start()
        seen = set()
        while flipper.is_alive():
            st, body = get(cv, sid, "/tmp/race/x/" + SECRET_NAME)
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


# ---- listing with depth, chmod ----

def test_list_depth(cv):
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/ld && mkdir -p /tmp/ld/a/b/c /tmp/ld/x && echo 1 > /tmp/ld/a/one && "
           "echo 22 > /tmp/ld/a/b/two && echo 333 > /tmp/ld/a/b/c/three && ln -s /etc /tmp/ld/etc && "
           "mkdir -m 700 /tmp/ld/private && touch /tmp/ld/private/secret")

    def listing(**kw):
        st, j = cv.api("GET", _url(sid, path="/tmp/ld/", **kw))
        assert st == 200 and j["path"] == "/tmp/ld/" and j["truncated"] is False, (st, j)
        return {e["path"]: e for e in j["entries"]}

    one = listing()
    assert sorted(one) == ["/tmp/ld/a", "/tmp/ld/etc", "/tmp/ld/private", "/tmp/ld/x"], one
    assert listing(depth=1) == one
    two = listing(depth=2)
    assert sorted(two) == sorted(list(one) + ["/tmp/ld/a/b", "/tmp/ld/a/one", "/tmp/ld/private/secret"]), two
    assert "/tmp/ld/etc/passwd" not in two  # a symlink is listed, never entered
    assert two["/tmp/ld/etc"]["type"] == "symlink" and two["/tmp/ld/etc"]["target"] == "/etc", two
    deep = listing(depth=10)
    f = deep["/tmp/ld/a/b/c/three"]
    assert f["name"] == "three" and f["type"] == "file" and f["size"] == 4 and f["mode"] == "0644", f
    assert f["uid"] == 0 and f["gid"] == 0 and isinstance(f["mtime"], int), f
    assert deep["/tmp/ld/a/b/c"]["type"] == "dir" and len(deep) == 10, deep
    # The user's permissions apply at every level: nobody sees private, not into it.
    st, j = cv.api("GET", _url(sid, path="/tmp/ld", depth=3, user="nobody"))
    paths = {e["path"] for e in j["entries"]}
    assert st == 200 and "/tmp/ld/private" in paths and "/tmp/ld/private/secret" not in paths, (st, j)
    assert "/tmp/ld/a/b/two" in paths
    st, j = cv.api("GET", _url(sid, path="/tmp/ld/private", user="nobody"))
    assert st == 403 and j["error"]["code"] == "permission_denied", (st, j)
    # depth means nothing to a file; bad depths are refused.
    assert get(cv, sid, "/tmp/ld/a/one", depth=5) == (200, b"1\n")
    for bad in ["0", "-1", "257", "x", "", "1.5"]:
        st, j = cv.api("GET", "/v1/sandboxes/%s/files?path=/tmp/ld&depth=%s" % (sid, bad))
        assert st == 400 and "'depth'" in j["error"]["message"], (bad, st, j)
    # The root lists too, with paths that do not double the slash.
    st, j = cv.api("GET", _url(sid, path="/"))
    assert st == 200 and "/tmp" in {e["path"] for e in j["entries"]}, j


def test_list_cut_at_the_entry_limit_and_not_into_procfs(cv):
    sid = _sb(cv)
    # /proc and /sys are listed as entries of /, never walked into.
    st, j = cv.api("GET", _url(sid, path="/", depth=2))
    paths = {e["path"] for e in j["entries"]}
    assert st == 200 and {"/proc", "/sys", "/usr/bin", "/etc/passwd"} <= paths, (st, j)
    assert not any(p.startswith(("/proc/", "/sys/")) for p in paths), sorted(paths)
    st, j = cv.api("GET", _url(sid, path="/proc"))
    assert st == 403, (st, j)
    # A deep listing is what find sees; 100000 entries at most (the child
    # stops when coved stops reading).
    for top in ["/usr/share", "/usr"]:
        found = set(sh(cv, sid, "find %s -mindepth 1" % top, max_output=64 << 20).splitlines())
        st, j = cv.api("GET", _url(sid, path=top, depth=256), timeout=120)
        listed = {e["path"] for e in j["entries"]}
        assert st == 200 and j["truncated"] is (len(found) > 100000), (st, j["truncated"], len(found))
        if j["truncated"]:
            assert len(listed) == 100000 and listed < found, len(listed)
        else:
            assert listed == found, (sorted(found - listed)[:5], sorted(listed - found)[:5])


def _chmod(cv, sid, body, raw=None):
    return cv.api("POST", "/v1/sandboxes/%s/files/chmod" % sid, body, raw=raw)


def test_chmod(cv):
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/cm && mkdir -p /tmp/cm/d && echo x > /tmp/cm/f && ln -s f /tmp/cm/l")
    st, j = _chmod(cv, sid, {"path": "/tmp/cm/f", "mode": "0600"})
    assert st == 200 and j == {"path": "/tmp/cm/f", "mode": "0600"}, (st, j)
    assert sh(cv, sid, "stat -c %a /tmp/cm/f") == "600\n"
    st, j = _chmod(cv, sid, {"path": "/tmp/cm/d", "mode": "1777"})
    assert st == 200 and sh(cv, sid, "stat -c %a /tmp/cm/d") == "1777\n", (st, j)
    st, j = _chmod(cv, sid, {"path": "/tmp/cm/l", "mode": 0o640})  # a number; the symlink is followed
    assert st == 200 and j["mode"] == "0640" and sh(cv, sid, "stat -c %a /tmp/cm/f") == "640\n", (st, j)
    st, j = _chmod(cv, sid, {"path": "/tmp/cm/missing", "mode": "644"})
    assert st == 404 and j["error"]["code"] == "not_found", (st, j)
    st, j = _chmod(cv, sid, {"path": "/tmp/cm/f", "mode": "0777", "user": "nobody"})
    assert st == 403 and j["error"]["code"] == "permission_denied", (st, j)
    assert sh(cv, sid, "stat -c %a /tmp/cm/f") == "640\n"
    assert put(cv, sid, "/tmp/cm-mine", b"x", user="nobody")[0] in (200, 201)
    st, j = _chmod(cv, sid, {"path": "/tmp/cm-mine", "mode": "0700", "user": "nobody"})
    assert st == 200 and sh(cv, sid, "stat -c '%a %U' /tmp/cm-mine") == "700 nobody\n", (st, j)
    st, j = _chmod(cv, "sb_aaaaaaaaaaaa", {"path": "/tmp/cm/f", "mode": "0600"})
    assert st == 404 and j["error"]["code"] == "not_found", (st, j)
    for body in [{"path": "/tmp/cm/f", "mode": "999"}, {"path": "/tmp/cm/f", "mode": "rwx"},
                 {"path": "/tmp/cm/f", "mode": ""}, {"path": "/tmp/cm/f", "mode": 4096},
                 {"path": "/tmp/cm/f", "mode": -1}, {"path": "/tmp/cm/f"}, {"mode": "0644"},
                 {"path": "tmp/cm/f", "mode": "0644"}, {"path": "/tmp/cm/f", "mode": "0644", "bogus": 1},
                 {"path": 5, "mode": "0644"}, [], "x"]:
        st, j = _chmod(cv, sid, body)
        assert st == 400 and j["error"]["code"] == "invalid_argument", (body, st, j)
    for raw in [b"", b"{", b'{"path": "/tmp/cm/f", "path": "/x", "mode": "0644"}']:
        st, j = _chmod(cv, sid, None, raw=raw)
        assert st == 400, (raw, st, j)
    st, j = cv.api("POST", "/v1/sandboxes/%s/files/chmod?path=/tmp/cm/f" % sid, {"path": "/tmp/cm/f", "mode": "0644"})
    assert st == 400 and "unknown parameter" in j["error"]["message"], (st, j)
    assert sh(cv, sid, "stat -c %a /tmp/cm/f") == "640\n"  # none of that changed anything


# ---- folders as tar streams ----

def _tar(members):
    """An uncompressed tar from (name, type, data_or_target, mode) tuples."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for name, kind, value, mode in members:
            ti = tarfile.TarInfo(name)
            ti.mode, ti.uid, ti.gid, ti.mtime = mode, 1234, 1234, 1600000000
            if kind == "file":
                ti.size = len(value)
                t.addfile(ti, io.BytesIO(value))
                continue
            ti.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
                       "fifo": tarfile.FIFOTYPE}[kind]
            ti.linkname = value or ""
            t.addfile(ti)
    return buf.getvalue()


def put_tar(cv, sid, path, data, **kw):
    return cv.api("PUT", _url(sid, "files/tar", path=path, **kw), raw=data, timeout=300)


def get_tar(cv, sid, path, **kw):
    st, body = _raw(cv, "GET", _url(sid, "files/tar", path=path, **kw), timeout=300)
    return st, body


def _members(body):
    with tarfile.open(fileobj=io.BytesIO(body)) as t:
        return {m.name: (m, t.extractfile(m).read() if m.isfile() else None) for m in t.getmembers()}


def test_tar_download(cv):
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/td && mkdir -p /tmp/td/sub/deeper /tmp/td/empty && printf abc > /tmp/td/f && "
           "head -c 300000 /dev/urandom > /tmp/td/sub/big && chmod 600 /tmp/td/sub/big && "
           "ln -s ../f /tmp/td/sub/link && mkfifo /tmp/td/fifo && echo d > /tmp/td/sub/deeper/x && "
           "chown 65534:65534 /tmp/td/sub/deeper/x && touch -d @1500000000 /tmp/td/f")
    st, body = get_tar(cv, sid, "/tmp/td")
    assert st == 200, (st, body[:300])
    m = _members(body)
    assert sorted(m) == ["empty", "f", "sub", "sub/big", "sub/deeper", "sub/deeper/x", "sub/link"], sorted(m)
    assert m["f"][1] == b"abc" and m["f"][0].mtime == 1500000000 and m["f"][0].mode == 0o644, m["f"]
    assert len(m["sub/big"][1]) == 300000
    assert __import__("hashlib").md5(m["sub/big"][1]).hexdigest() == sh(cv, sid, "md5sum < /tmp/td/sub/big").split()[0]
    assert m["sub/big"][0].mode == 0o600 and m["sub"][0].isdir() and m["empty"][0].isdir(), m
    assert m["sub/link"][0].issym() and m["sub/link"][0].linkname == "../f", m["sub/link"]
    assert (m["sub/deeper/x"][0].uid, m["sub/deeper/x"][0].gid) == (65534, 65534), m["sub/deeper/x"]
    # An empty folder is an empty tar; the user's permissions apply.
    st, body = get_tar(cv, sid, "/tmp/td/empty")
    assert st == 200 and _members(body) == {}, (st, body[:100])
    sh(cv, sid, "chmod 700 /tmp/td/sub")
    st, body = get_tar(cv, sid, "/tmp/td", user="nobody")
    assert st == 200 and "sub" in _members(body) and "sub/big" not in _members(body), sorted(_members(body))
    st, body = get_tar(cv, sid, "/tmp/td/sub", user="nobody")
    assert st == 403, (st, body)
    for path, status in [("/tmp/td/missing", 404), ("/tmp/td/f", 400), ("/proc", 403), ("relative", 400)]:
        st, body = get_tar(cv, sid, path)
        assert st == status and json.loads(body)["error"], (path, st, body)
    st, body = get_tar(cv, "sb_aaaaaaaaaaaa", "/tmp")
    assert st == 404 and json.loads(body)["error"]["code"] == "not_found", (st, body)
    st, body = _raw(cv, "GET", "/v1/sandboxes/%s/files/tar?path=/tmp&depth=2" % sid)
    assert st == 400 and b"unknown parameter" in body, (st, body)


def test_tar_upload(cv):
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/tu /tmp/tu-nob")
    data = _tar([("./", "dir", None, 0o755), ("a/b/file.txt", "file", b"hello", 0o640),
                 ("ro", "dir", None, 0o555), ("ro/inside", "file", b"in a read-only dir", 0o444),
                 ("/abs/x", "file", b"absolute", 0o644), ("link", "symlink", "/etc/passwd", 0o777),
                 ("hard", "hardlink", "a/b/file.txt", 0o644), ("pipe", "fifo", None, 0o644),
                 ("exec.sh", "file", b"#!/bin/sh\necho run\n", 0o755)])
    st, j = put_tar(cv, sid, "/tmp/tu/deep", data)
    assert st == 200 and j == {"path": "/tmp/tu/deep", "entries": 7, "skipped": 1, "created": True}, (st, j)
    out = sh(cv, sid, "cd /tmp/tu/deep && find . | sort && stat -c '%n %a %u %g %Y' a a/b/file.txt ro ro/inside "
                      "abs/x exec.sh && readlink link && cat hard && ./exec.sh && stat -c %h a/b/file.txt")
    assert out.split("\n")[:11] == [".", "./a", "./a/b", "./a/b/file.txt", "./abs", "./abs/x", "./exec.sh",
                                    "./hard", "./link", "./ro", "./ro/inside"], out
    assert "a/b/file.txt 640 0 0 1600000000" in out and "ro 555 0 0" in out and "ro/inside 444 0 0" in out, out
    assert "abs/x 644 0 0" in out and "exec.sh 755" in out and "/etc/passwd\nhello" in out, out
    assert out.endswith("run\n2\n"), out
    # Again over the same tree: files and links are replaced, folders kept.
    st, j = put_tar(cv, sid, "/tmp/tu/deep", _tar([("a/b/file.txt", "file", b"new", 0o600),
                                                    ("link", "file", b"not a link now", 0o644),
                                                    ("a", "dir", None, 0o700)]))
    assert st == 200 and j["entries"] == 3 and j["created"] is False, (st, j)
    assert sh(cv, sid, "cat /tmp/tu/deep/a/b/file.txt /tmp/tu/deep/link; stat -c %a /tmp/tu/deep/a") == \
        "newnot a link now755\n"
    assert "root:" in sh(cv, sid, "cat /etc/passwd")  # the old symlink's target was not written through
    # Whatever the archive's owners, what is made is the request's user's.
    st, j = put_tar(cv, sid, "/tmp/tu-nob", data, user="nobody")
    assert st == 200 and j["entries"] == 7, (st, j)
    assert sh(cv, sid, "stat -c '%U %G' /tmp/tu-nob /tmp/tu-nob/a/b/file.txt /tmp/tu-nob/ro/inside") == \
        "nobody nogroup\n" * 3
    st, j = put_tar(cv, sid, "/root/nope", data, user="nobody")
    assert st == 403 and j["error"]["code"] == "permission_denied", (st, j)
    # An empty archive makes the folder and nothing else.
    st, j = put_tar(cv, sid, "/tmp/tu/empty", _tar([]))
    assert st == 200 and j["entries"] == 0 and sh(cv, sid, "ls -A /tmp/tu/empty") == "", (st, j)
    # A file where a folder is wanted, and the reverse.
    st, j = put_tar(cv, sid, "/tmp/tu/deep", _tar([("exec.sh/x", "file", b"x", 0o644)]))
    assert st == 400 and "exec.sh/x" in j["error"]["message"], (st, j)
    st, j = put_tar(cv, sid, "/tmp/tu/deep", _tar([("a", "file", b"x", 0o644)]))
    assert st == 409 and j["error"]["code"] == "wrong_state", (st, j)


def test_tar_upload_bad_requests(cv):
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/tb")
    gz = io.BytesIO()
    with tarfile.open(fileobj=gz, mode="w:gz") as t:
        ti = tarfile.TarInfo("x")
        t.addfile(ti, io.BytesIO(b""))
    good = _tar([("x", "file", b"x", 0o644)])
    for body in [b"not a tar at all" * 100, gz.getvalue(), good[:700], b"\x00" * 100 + b"\x01" * 412,
                 _tar([("a/../../x", "file", b"x", 0o644)]), _tar([("..", "dir", None, 0o755)]),
                 _tar([("h", "hardlink", "../../etc/passwd", 0o644)]), _tar([("s", "symlink", "", 0o777)])]:
        st, j = put_tar(cv, sid, "/tmp/tb", body)
        assert st == 400 and j["error"]["code"] == "invalid_argument", (body[:40], st, j)
        assert cv.api("GET", _url(sid, path="/tmp/tb", stat=1))[0] == 404  # nothing was made, not even the folder
    st, j = put_tar(cv, "sb_aaaaaaaaaaaa", "/tmp/tb", good)
    assert st == 404 and j["error"]["code"] == "not_found", (st, j)
    for q in ["", "path=relative", "path=/tmp/tb&mode=0644", "path=%2Ftmp%00"]:
        st, j = cv.api("PUT", "/v1/sandboxes/%s/files/tar?%s" % (sid, q), raw=good)
        assert st == 400, (q, st, j)
    st, j = put_tar(cv, sid, "/etc/passwd", good)
    assert st == 400, (st, j)  # not a directory
    st, j = put_tar(cv, sid, "/proc/sys", good)
    assert st == 403, (st, j)


def test_tar_hostile(cv):
    """Names with .., absolute names, symlinks to outside followed by members
    through them, hard links out: nothing lands outside the target folder,
    let alone outside the sandbox."""
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/th /root/.cove-tar-* && mkdir -p /tmp/th && ln -s / /tmp/th/pre && "
           "ln -s /root /tmp/th/preroot")
    host_before = set(os.listdir("/root"))
    names = ["../../../../../../root/.cove-tar-dotdot", "x/../../.cove-tar-dotdot2"]
    for name in names:
        st, j = put_tar(cv, sid, "/tmp/th", _tar([(name, "file", b"escaped", 0o644)]))
        assert st == 400 and "'..'" in j["error"]["message"], (name, st, j)
    # A symlink of the archive, then a member through it: refused whole.
    for target in ["/root", "../../../root", "."]:
        st, j = put_tar(cv, sid, "/tmp/th", _tar([("esc", "symlink", target, 0o777),
                                                  ("esc/.cove-tar-through", "file", b"escaped", 0o644)]))
        assert st == 400 and "goes through the symlink 'esc'" in j["error"]["message"], (target, st, j)
        st, j = put_tar(cv, sid, "/tmp/th", _tar([("esc2", "symlink", target, 0o777),
                                                  ("h", "hardlink", "esc2/.bashrc", 0o644)]))
        assert st == 400, (target, st, j)
    assert sh(cv, sid, "ls -A /tmp/th") == "pre\npreroot\n"
    # A symlink that was already in the sandbox is not followed either.
    for via in ["pre/root", "preroot"]:
        st, j = put_tar(cv, sid, "/tmp/th", _tar([(via + "/.cove-tar-pre", "file", b"escaped", 0o644)]))
        assert st == 400 and "symbolic link" in j["error"]["message"], (via, st, j)
    # Absolute names are made relative to the folder.
    st, j = put_tar(cv, sid, "/tmp/th", _tar([("/root/.cove-tar-abs", "file", b"inside", 0o644),
                                              ("//etc//.cove-tar-abs2", "file", b"inside", 0o644)]))
    assert st == 200 and j["entries"] == 2, (st, j)
    assert sh(cv, sid, "cat /tmp/th/root/.cove-tar-abs /tmp/th/etc/.cove-tar-abs2") == "insideinside"
    # A symlink pointing out is kept as a link (it is the sandbox's own
    # business), and a later archive replaces it rather than writing through.
    st, j = put_tar(cv, sid, "/tmp/th", _tar([("out", "symlink", "/etc/hostname", 0o777)]))
    assert st == 200 and sh(cv, sid, "readlink /tmp/th/out") == "/etc/hostname\n", (st, j)
    hostname = sh(cv, sid, "cat /etc/hostname")
    st, j = put_tar(cv, sid, "/tmp/th", _tar([("out", "file", b"replaced", 0o644)]))
    assert st == 200 and sh(cv, sid, "cat /etc/hostname") == hostname, (st, j)
    assert sh(cv, sid, "cat /tmp/th/out; ls -A /root | grep cove-tar || true") == "replaced"
    assert set(os.listdir("/root")) == host_before and not any("cove-tar" in n for n in os.listdir("/root"))
    upper = os.path.join(cv.data, "pool", "sandboxes", sid, "upper", "root", "root")
    assert not os.path.isdir(upper) or not any("cove-tar" in n for n in os.listdir(upper))


def _host_tree(root, nfiles, total):
    """nfiles files in nested folders under root, total bytes in all; returns {relpath: bytes}."""
    rnd = __import__("random").Random(7)
    tree, left = {}, total
    for i in range(nfiles):
        rel = "d%d/e%d/f%04d.bin" % (i % 7, i % 13, i)
        size = left if i == nfiles - 1 else rnd.randint(0, 2 * total // nfiles)
        size = min(size, left)
        left -= size
        tree[rel] = os.urandom(size)
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(tree[rel])
    return tree


def test_tar_large_round_trip(cv):
    sid = _sb(cv)
    src = os.path.join(cv.dir, "big-src")
    tree = _host_tree(src, 600, 20 << 20)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        t.add(src, arcname=".")
    sh(cv, sid, "rm -rf /tmp/big")
    st, j = put_tar(cv, sid, "/tmp/big", buf.getvalue())
    assert st == 200 and j["entries"] == 600 + 7 + 7 * 13, (st, j)
    sums = sh(cv, sid, "cd /tmp/big && find . -type f -exec md5sum {} + | sort -k2", max_output=1 << 20)
    want = "".join("%s  ./%s\n" % (__import__("hashlib").md5(tree[k]).hexdigest(), k) for k in sorted(tree))
    assert sums == want
    st, body = get_tar(cv, sid, "/tmp/big")
    assert st == 200
    got = {k: v for k, (m, v) in _members(body).items() if m.isfile()}
    assert got == tree


def _rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))


def test_tar_download_memory_bounded(cv):
    """coved holds about a megabyte of a download, however slowly the client
    reads; a client that goes away mid-download frees everything."""
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/mem && mkdir /tmp/mem && for i in 1 2 3 4; do "
           "head -c 50000000 /dev/urandom > /tmp/mem/$i; done", timeout=120)
    fds_before = len(os.listdir("/proc/%d/fd" % cv.pid()))
    c = cv.conn(300)
    c.request("GET", _url(sid, "files/tar", path="/tmp/mem"))
    r = c.getresponse()
    assert r.status == 200
    base = _rss_kb(cv.pid())
    got, peak = 0, 0
    while True:
        chunk = r.read(1 << 20)
        if not chunk:
            break
        got += len(chunk)
        time.sleep(0.005)  # slower than the sandbox writes
        peak = max(peak, _rss_kb(cv.pid()) - base)
    c.close()
    assert got >= 200000000 and got < 200000000 + 10 * 1024, got
    print("# peak %d KiB" % peak)
    assert peak < 24 * 1024, "coved grew by %d KiB during the download" % peak
    # Going away in the middle of a download frees its fds and stops its child.
    for _ in range(3):
        c = cv.conn(60)
        c.request("GET", _url(sid, "files/tar", path="/tmp/mem"))
        r = c.getresponse()
        assert r.status == 200 and len(r.read(3 << 20)) == 3 << 20
        c.close()
    assert covetest.wait_until(lambda: len(os.listdir("/proc/%d/fd" % cv.pid())) <= fds_before, 10), \
        (fds_before, os.listdir("/proc/%d/fd" % cv.pid()))
    assert covetest.wait_until(lambda: "cove-init" not in sh(cv, sid, "ps -e -o comm= | sort | uniq -c | "
                                                                      "awk '$1 > 1'"), 10)
    sh(cv, sid, "rm -rf /tmp/mem")


def _same_tree(a, b):
    """Both host trees hold the same names, types, file bytes and link targets."""
    def walk(root):
        out = {}
        for d, dirs, files in os.walk(root):
            for n in dirs + files:
                p = os.path.join(d, n)
                rel = os.path.relpath(p, root)
                if os.path.islink(p):
                    out[rel] = ("link", os.readlink(p))
                elif os.path.isdir(p):
                    out[rel] = ("dir", None)
                else:
                    with open(p, "rb") as f:
                        out[rel] = ("file", f.read())
        return out
    wa, wb = walk(a), walk(b)
    assert wa == wb, (sorted(set(wa) ^ set(wb))[:10])
    return len(wa)


def test_cli_cp_folders(cv):
    sid = _sb(cv)
    src = os.path.join(cv.dir, "cli-src")
    _host_tree(src, 300, 20 << 20)
    os.symlink("d0/e0/f0000.bin", os.path.join(src, "link"))
    os.makedirs(os.path.join(src, "empty"))
    sh(cv, sid, "rm -rf /tmp/cpd && mkdir -p /tmp/cpd/exists")
    # Onto a missing path: it becomes the folder; onto a folder: inside it.
    for dst, inside in [("/tmp/cpd/new", "/tmp/cpd/new"), ("/tmp/cpd/exists", "/tmp/cpd/exists/cli-src")]:
        r = cv.cli("cp", src, sid + ":" + dst)
        assert r.returncode == 0, r
        sums = sh(cv, sid, "cd %s && find . -type f | sort | xargs md5sum | md5sum && readlink link && "
                           "ls -d empty" % inside)
        assert sums.endswith("d0/e0/f0000.bin\nempty\n"), sums
    r = cv.cli("cp", src + "/.", sid + ":/tmp/cpd/exists")  # SRC/. : what the folder holds
    assert r.returncode == 0 and sh(cv, sid, "test -f /tmp/cpd/exists/link && echo yes") == "yes\n", r
    # And back: onto a missing path, and into an existing folder.
    back = os.path.join(cv.dir, "cli-back")
    r = cv.cli("cp", sid + ":/tmp/cpd/new", back)
    assert r.returncode == 0, r
    assert _same_tree(src, back) == 300 + 7 + 7 * 13 + 2
    r = cv.cli("cp", sid + ":/tmp/cpd/new", back)
    assert r.returncode == 0 and _same_tree(src, os.path.join(back, "new")), r
    r = cv.cli("cp", sid + ":/tmp/cpd/new/.", os.path.join(cv.dir, "cli-back2"))
    assert r.returncode == 0 and _same_tree(src, os.path.join(cv.dir, "cli-back2")), r
    # A folder to stdout is a tar.
    r = cv.cli("cp", sid + ":/tmp/cpd/new/d1", "-")
    want = {os.path.relpath(os.path.join(d, n), os.path.join(src, "d1"))
            for d, dirs, files in os.walk(os.path.join(src, "d1")) for n in dirs + files}
    assert r.returncode == 0 and set(_members(r.stdout)) == want, r.stderr
    # A single file into an existing folder keeps its name, both ways.
    r = cv.cli("cp", os.path.join(src, "d0/e0/f0000.bin"), sid + ":/tmp/cpd")
    assert r.returncode == 0 and sh(cv, sid, "ls /tmp/cpd") == "exists\nf0000.bin\nnew\n", r
    r = cv.cli("cp", sid + ":/tmp/cpd/f0000.bin", cv.dir)
    assert r.returncode == 0 and os.path.isfile(os.path.join(cv.dir, "f0000.bin")), r
    # Failures: a folder onto a file, both ways; a missing source; no sandbox.
    r = cv.cli("cp", src, sid + ":/tmp/cpd/f0000.bin")
    assert r.returncode == 1 and b"not a directory" in r.stderr, r
    r = cv.cli("cp", sid + ":/tmp/cpd/new", os.path.join(cv.dir, "f0000.bin"))
    assert r.returncode == 1 and b"not a directory" in r.stderr, r
    r = cv.cli("cp", sid + ":/tmp/cpd/none", os.path.join(cv.dir, "none"))
    assert r.returncode == 1 and b"No such file" in r.stderr and not os.path.exists(os.path.join(cv.dir, "none")), r
    r = cv.cli("cp", src, "sb_aaaaaaaaaaaa:/tmp/x")
    assert r.returncode == 1 and b"no sandbox" in r.stderr, r
    r = cv.cli("cp", src, os.path.join(cv.dir, "elsewhere"))
    assert r.returncode == 2, r


def test_cli_cp_hostile_tree_stays_in_place(cv):
    """What the sandbox put in a folder cannot make cove cp write outside
    the destination on the host: its symlinks stay links, and a symlink
    already in the destination is replaced, not extracted through."""
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/evil && mkdir -p /tmp/evil/sub && ln -s /root /tmp/evil/rootlink && "
           "ln -s ../../../../../../root /tmp/evil/up && echo x > /tmp/evil/sub/.cove-cli-evil")
    dst = os.path.join(cv.dir, "evil-back")
    r = cv.cli("cp", sid + ":/tmp/evil", dst)
    assert r.returncode == 0, r
    assert os.readlink(os.path.join(dst, "rootlink")) == "/root" and os.path.isfile(dst + "/sub/.cove-cli-evil")
    outside = os.path.join(cv.dir, "outside")
    os.makedirs(outside)
    dst2 = os.path.join(cv.dir, "evil-back2")
    os.makedirs(dst2)
    os.symlink(outside, os.path.join(dst2, "sub"))
    r = cv.cli("cp", sid + ":/tmp/evil/.", dst2)
    assert r.returncode == 0 and not os.path.islink(os.path.join(dst2, "sub")), r
    assert os.path.isfile(os.path.join(dst2, "sub", ".cove-cli-evil"))
    assert os.listdir(outside) == [] and not os.path.exists("/root/.cove-cli-evil")


def test_cli_files(cv):
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/cf && mkdir -p /tmp/cf/b/c && printf one > /tmp/cf/a && printf two > /tmp/cf/b/c/d && "
           "ln -s a /tmp/cf/l")
    r = cv.cli("files", "ls", sid, "/tmp/cf")
    assert r.returncode == 0 and r.stdout == b"a\nb\nl\n", r
    r = cv.cli("files", "ls", "-d", "3", sid, "/tmp/cf/")
    assert r.returncode == 0 and r.stdout == b"a\nb\nb/c\nb/c/d\nl\n", r
    r = cv.cli("files", "ls", "-l", sid, "/tmp/cf")
    lines = r.stdout.decode().splitlines()
    assert r.returncode == 0 and lines[0].split()[:5] == ["file", "0644", "0", "0", "3"], lines
    assert lines[2].startswith("symlink") and lines[2].endswith(" l -> a"), lines
    r = cv.cli("--json", "files", "ls", sid, "/tmp/cf")
    assert r.returncode == 0 and len(json.loads(r.stdout)["entries"]) == 3, r
    r = cv.cli("files", "cat", sid, "/tmp/cf/a", "/tmp/cf/b/c/d", "/tmp/cf/l")
    assert r.returncode == 0 and r.stdout == b"onetwoone", r
    assert cv.cli("files", "mkdir", sid, "/tmp/cf/m/n", "/tmp/cf/o").returncode == 0
    assert cv.cli("files", "chmod", sid, "0600", "/tmp/cf/a", "/tmp/cf/o").returncode == 0
    assert sh(cv, sid, "stat -c %a /tmp/cf/a /tmp/cf/o; test -d /tmp/cf/m/n && echo d") == "600\n600\nd\n"
    assert cv.cli("files", "mv", sid, "/tmp/cf/a", "/tmp/cf/z").returncode == 0
    r = cv.cli("files", "mv", sid, "/tmp/cf/z", "/tmp/cf/l")
    assert r.returncode == 1 and b"File exists" in r.stderr, r
    assert cv.cli("files", "mv", "-f", sid, "/tmp/cf/z", "/tmp/cf/l").returncode == 0
    r = cv.cli("files", "rm", sid, "/tmp/cf/b")
    assert r.returncode == 1 and b"not empty" in r.stderr, r
    assert cv.cli("files", "rm", "-r", sid, "/tmp/cf/b", "/tmp/cf/m", "/tmp/cf/nothing").returncode == 0
    r = cv.cli("files", "ls", sid, "/tmp/cf")
    assert r.returncode == 0 and r.stdout == b"l\no\n", r
    # Failures: unknown sandbox, missing path, wrong kind, bad usage.
    for args, code, msg in [(["ls", "sb_aaaaaaaaaaaa", "/tmp"], 1, b"no sandbox"),
                            (["ls", sid, "/tmp/cf/none"], 1, b"No such file"),
                            (["ls", sid, "/tmp/cf/l"], 1, b"not a directory"),
                            (["cat", sid, "/tmp/cf"], 1, b"not a regular file"),
                            (["chmod", sid, "999", "/tmp/cf/l"], 1, b"'mode'"),
                            (["chmod", sid, "0644", "/tmp/cf/none"], 1, b"No such file"),
                            (["ls", sid], 2, b"usage" if False else b"expected"),
                            (["mv", sid, "/tmp/cf/l"], 2, b"expected"),
                            (["ls", "-d", "0", sid, "/tmp"], 2, b"depth"),
                            (["ls", "-x", sid, "/tmp"], 2, b"unknown option"),
                            (["frobnicate", sid, "/tmp"], 2, b"unknown command 'frobnicate'")]:
        r = cv.cli("files", *args)
        assert r.returncode == code and msg in r.stderr, (args, r)


def test_names_that_are_not_utf8(cv):
    """File names are bytes: listings show what is not UTF-8 as U+FFFD,
    errors and answers quoting such a path stay JSON, and a tar keeps the
    bytes."""
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/nu && mkdir /tmp/nu && printf x > \"/tmp/nu/$(printf 'a\\377b')\"")
    st, j = cv.api("GET", _url(sid, path="/tmp/nu"))
    assert st == 200 and [e["name"] for e in j["entries"]] == ["a\ufffdb"], (st, j)
    st, j = cv.api("GET", "/v1/sandboxes/%s/files?path=/tmp/nu/a%%FFb&stat=1" % sid)
    assert st == 200 and j["name"] == "a\ufffdb" and j["size"] == 1, (st, j)
    st, j = cv.api("GET", "/v1/sandboxes/%s/files?path=/tmp/nu/%%FF%%FE" % sid)
    assert st == 404 and "\ufffd" in j["error"]["message"], (st, j)
    st, j = cv.api("PUT", "/v1/sandboxes/%s/files?path=/tmp/nu/c%%FF" % sid, raw=b"y")
    assert st == 201 and j["path"] == "/tmp/nu/c\ufffd", (st, j)
    # A message cut inside a character is still text.
    st, j = cv.api("GET", _url(sid, path="/tmp/x" + "\u00e9" * 1000))
    assert st == 400 and j["error"]["code"] == "invalid_argument", (st, j)
    st, body = get_tar(cv, sid, "/tmp/nu")
    with tarfile.open(fileobj=io.BytesIO(body), encoding="latin-1") as t:
        assert sorted(m.name.encode("latin-1") for m in t.getmembers()) == [b"a\xffb", b"c\xff"]
    assert cv.api("GET", "/v1/health")[0] == 200


def test_tar_with_a_symlink_swapped_in(cv):
    """A folder flipping between a directory and a symlink to / while tars
    go out and come in: a download never follows it, an upload never writes
    through it."""
    sid = _sb(cv)
    sh(cv, sid, "rm -rf /tmp/tr /.cove-tar-race && mkdir -p /tmp/tr/x && echo in > /tmp/tr/x/f")
    # (An upload may make x while it is away: then the old one goes.)
    script = ("cd /tmp/tr; end=$(($(date +%s)+5)); while [ $(date +%s) -lt $end ]; do "
              "mv -T x d; ln -s / x; rm x; mv -T d x 2>/dev/null || rm -rf d; done")
    flipper = threading.Thread(target=lambda: cv.exec(sid, ["sh", "-c", script], timeout=30))
    flipper.start()
    up = _tar([("x/.cove-tar-race", "file", b"raced", 0o644)])
    seen, downloads = set(), 0
    while flipper.is_alive():
        st, body = get_tar(cv, sid, "/tmp/tr")
        assert st == 200, (st, body[:200])
        names = set(_members(body))
        assert not any(n.startswith("x/") and n not in ("x/f", "x/.cove-tar-race") for n in names), sorted(names)
        downloads += 1
        st, j = put_tar(cv, sid, "/tmp/tr", up)
        seen.add(st)
    flipper.join()
    assert downloads > 3 and 200 in seen and seen <= {200, 400, 404, 409}, (downloads, seen)
    assert sh(cv, sid, "ls -A / | grep -c cove-tar-race || true") == "0\n"
    assert not os.path.exists("/.cove-tar-race")


def test_tar_download_cut_when_the_sandbox_goes(cv):
    """A download whose sandbox is deleted ends without the end of its
    chunked body, so the client cannot take it for a whole tar."""
    sid = cv.create()
    sh(cv, sid, "mkdir /tmp/gone && head -c 30000000 /dev/urandom > /tmp/gone/a")
    c = cv.conn(60)
    try:
        c.request("GET", _url(sid, "files/tar", path="/tmp/gone"))
        r = c.getresponse()
        assert r.status == 200 and len(r.read(1 << 20)) == 1 << 20
        assert cv.api("DELETE", "/v1/sandboxes/" + sid)[0] == 200
        try:
            rest = r.read()
            assert False, "a whole body after the sandbox went: %d bytes" % len(rest)
        except http.client.IncompleteRead:
            pass
    finally:
        c.close()
    assert cv.api("GET", "/v1/health")[0] == 200

"""Uploads. PUT /files: coved reads the socket in large pieces (libevent
2.1 reads 4 KiB a call), so a file goes to disk near dd's speed.
PUT /files/tar streams: the body goes, as it comes, into an unlinked
temporary file under the data root (not coved's memory, not bounded by
--max-body-bytes), which libarchive then reads twice: a check, then the
extraction. A bad tar still changes nothing; the temporary file is gone
once the request ends, whatever ends it."""
import hashlib
import io
import json
import os
import socket
import tarfile
import urllib.parse

import covetest
from test_httpd import _read_response

LIMIT = "1M"  # --max-body-bytes: each tar below is far larger


def _url(sid, path):
    return "/v1/sandboxes/%s/files/tar?%s" % (sid, urllib.parse.urlencode({"path": path}))


def _spools(cv):
    """The temporary files coved holds open: O_TMPFILE files of the data
    root show as '<data>/#<inode> (deleted)'."""
    fds = "/proc/%d/fd" % cv.pid()
    found = []
    for fd in os.listdir(fds):
        try:
            link = os.readlink(os.path.join(fds, fd))
        except OSError:
            continue
        if link.startswith(cv.data + "/#") and link.endswith("(deleted)"):
            found.append(os.path.join(fds, fd))
    return found


def _peak_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def _big_tar(cv, name, mib, tail=()):
    """A tar on disk: in d/, a file of mib MiB (no two MiB alike), a small
    file and a symlink, then the tail members (name, bytes). Returns its
    path and the big file's sha256."""
    path = os.path.join(cv.dir, name)
    block = os.urandom(1 << 20)
    h = hashlib.sha256()
    src = os.path.join(cv.dir, name + ".bin")
    with open(src, "wb") as f:
        for i in range(mib):
            piece = i.to_bytes(8, "little") + block[8:]
            h.update(piece)
            f.write(piece)
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        t.add(src, arcname="d/big.bin")
        small = os.path.join(cv.dir, name + ".small")
        with open(small, "wb") as f:
            f.write(b"small\n")
        t.add(small, arcname="d/small.txt")
        ti = tarfile.TarInfo("d/link")
        ti.type, ti.linkname = tarfile.SYMTYPE, "small.txt"
        t.addfile(ti)
        for member, data in tail:
            ti = tarfile.TarInfo(member)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    os.unlink(src)
    return path, h.hexdigest()


def _send_head(cv, sid, dest, size):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(300)
    s.connect(cv.socket)
    s.sendall(b"PUT %s HTTP/1.1\r\nHost: cove\r\nContent-Length: %d\r\n\r\n" % (_url(sid, dest).encode(), size))
    return s


def _response(s):
    status, _, body = _read_response(s.makefile("rb"))
    return status, json.loads(body)


def _upload(cv, sid, dest, tar, watch=None):
    """PUT the tar file; watch() runs once the first 16 MiB are sent."""
    s = _send_head(cv, sid, dest, os.path.getsize(tar))
    try:
        with open(tar, "rb") as f:
            if watch:
                s.sendfile(f, 0, 16 << 20)
                watch()
            s.sendfile(f, f.tell())
        return _response(s)
    finally:
        s.close()


def _reads(pid):
    """(read syscalls, bytes read) of the process so far."""
    with open("/proc/%d/io" % pid) as f:
        d = dict(line.split(": ") for line in f.read().splitlines())
    return int(d["syscr"]), int(d["rchar"])


def test_file_upload_reads_the_socket_in_large_pieces(cv):
    """64 MiB sent in 1 MiB writes: coved takes them in reads of 32 KiB or
    more on average (as much as the socket holds), not 4 KiB at a time."""
    sid = cv.create(name="upload-reads")
    try:
        total = 64 << 20
        block = os.urandom(1 << 20)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(120)
        s.connect(cv.socket)
        calls, nbytes = _reads(cv.pid())
        s.sendall(b"PUT /v1/sandboxes/%s/files?path=/root/reads HTTP/1.1\r\nHost: cove\r\n"
                  b"Content-Length: %d\r\n\r\n" % (sid.encode(), total))
        for _ in range(total >> 20):
            s.sendall(block)
        st, j = _response(s)
        s.close()
        calls, nbytes = (a - b for a, b in zip(_reads(cv.pid()), (calls, nbytes)))
        assert st == 201 and j["size"] == total, (st, j)
        print("# %d reads, %d bytes a read" % (calls, nbytes // calls))
        assert nbytes >= total and nbytes // calls >= 32 << 10, (calls, nbytes)
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def _own():
    return covetest.Coved(args=["--max-body-bytes", LIMIT]).start()


def test_tar_larger_than_the_body_limit_streams_through_a_temporary_file(cv):
    own = _own()
    try:
        sid = own.create()
        tar, digest = _big_tar(own, "ok.tar", 96)
        size = os.path.getsize(tar)
        base = _peak_kb(own.pid())
        during = {}

        def watch():
            # The body so far is on disk, in a file no one else can open.
            covetest.wait_until(lambda: _spools(own) and os.stat(_spools(own)[0]).st_size >= 8 << 20)
            during["spools"] = _spools(own)

        st, j = _upload(own, sid, "/tmp/up", tar, watch)
        assert st == 200 and j["entries"] == 3 and j["created"] is True, (st, j)
        assert len(during["spools"]) == 1, during
        grew = _peak_kb(own.pid()) - base
        print("# a %d MiB tar: coved's peak RSS grew by %d KiB" % (size >> 20, grew))
        assert grew < 16 * 1024, "coved grew by %d KiB during a %d MiB tar upload" % (grew, size >> 20)
        out = own.sh(sid, "sha256sum /tmp/up/d/big.bin && cat /tmp/up/d/link && stat -c %s /tmp/up/d/big.bin")
        assert out["exit_code"] == 0, out
        assert out["stdout"].split("\n")[:3] == [digest + "  /tmp/up/d/big.bin", "small", str(96 << 20)], out
        assert _spools(own) == [], _spools(own)
    finally:
        own.teardown()


def test_bad_large_tar_changes_nothing_and_leaves_no_file(cv):
    own = _own()
    try:
        sid = own.create()
        # Bad only at its end, 48 MiB in: refused whole, nothing made.
        tar, _ = _big_tar(own, "bad.tar", 48, tail=[("x/../../escape", b"out")])
        st, j = _upload(own, sid, "/tmp/bad", tar)
        assert st == 400 and j["error"]["code"] == "invalid_argument" and "'..'" in j["error"]["message"], (st, j)
        assert own.api("GET", "/v1/sandboxes/%s/files?path=/tmp/bad&stat=1" % sid)[0] == 404
        assert _spools(own) == []
        # Cut short: not a tar.
        with open(tar, "r+b") as f:
            f.truncate(30 << 20)
        st, j = _upload(own, sid, "/tmp/bad", tar)
        assert st == 400 and "not an uncompressed tar" in j["error"]["message"], (st, j)
        assert own.api("GET", "/v1/sandboxes/%s/files?path=/tmp/bad&stat=1" % sid)[0] == 404
        assert _spools(own) == []
        # A client that leaves mid-body: the temporary file goes with it.
        s = _send_head(own, sid, "/tmp/bad", 1 << 30)
        s.sendall(b"\0" * (4 << 20))
        covetest.wait_until(lambda: len(_spools(own)) == 1)
        s.close()
        covetest.wait_until(lambda: _spools(own) == [])
        assert own.api("GET", "/v1/sandboxes/%s/files?path=/tmp/bad&stat=1" % sid)[0] == 404
        # An unknown sandbox or a bad query is answered at once, before the body.
        s = _send_head(own, "sb_aaaaaaaaaaaa", "/tmp/bad", 1 << 30)
        st, j = _response(s)
        s.close()
        assert st == 404 and j["error"]["code"] == "not_found", (st, j)
        assert _spools(own) == []
    finally:
        own.teardown()

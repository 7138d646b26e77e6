"""Uploads. PUT /files: coved reads the socket in large pieces (libevent
2.1 reads 4 KiB a call), so a file goes to disk near dd's speed."""
import json
import os
import socket

from test_httpd import _read_response


def _response(s):
    status, _, body = _read_response(s.makefile("rb"))
    return status, json.loads(body)


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

"""A fork takes its copies' roots all at once and starts their runtimes all
at once (issue 4, performance): a fork that fails part way through, here
because coved runs out of file descriptors with some roots taken and others
not, leaves nothing: no copy listed, no root, no unfinished snapshot
directory; and coved goes on working."""
import os
import subprocess

import covetest
from covetest import wait_until


def _open_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def _dirs(cv, sub):
    d = os.path.join(cv.data, "pool", sub)
    return sorted(os.listdir(d))


def test_fork_failing_part_way_leaves_nothing(_cv):
    cv = covetest.Coved(args=["--debug"]).start()
    try:
        sid = cv.create(name="source")
        assert cv.exec(sid, "echo kept > /root/f")["exit_code"] == 0
        roots, snaps = _dirs(cv, "sandboxes"), _dirs(cv, "snapshots")
        pid = cv.pid()
        # Room for a few copies' descriptors, not for 20: the roots are
        # taken at once, each by a thread holding two.
        limit = _open_fds(pid) + 12
        was = subprocess.run(["prlimit", "--pid", str(pid), "--nofile", "-o", "SOFT,HARD", "--noheadings"],
                             check=True, capture_output=True, text=True).stdout.split()
        subprocess.run(["prlimit", "--pid", str(pid), "--nofile=%d:%s" % (limit, was[1])], check=True)
        st, j = cv.api("POST", "/v1/sandboxes/%s/fork" % sid, {"count": 20})
        assert st >= 400 and j["error"]["message"], (st, j)
        st, j = cv.api("GET", "/v1/sandboxes")
        assert [s["id"] for s in j["sandboxes"]] == [sid], j
        # Deleted copies finish their deletion once their inits are gone.
        assert wait_until(lambda: _dirs(cv, "sandboxes") == roots, 10), (_dirs(cv, "sandboxes"), roots, cv.read_log()[-1500:])
        assert _dirs(cv, "snapshots") == snaps, (_dirs(cv, "snapshots"), snaps)
        # With room again, the same fork works and its copies have the files.
        subprocess.run(["prlimit", "--pid", str(pid), "--nofile=%s:%s" % tuple(was)], check=True)
        st, j = cv.api("POST", "/v1/sandboxes/%s/fork" % sid, {"count": 20})
        assert st == 201 and len(j["sandboxes"]) == 20, (st, j)
        for c in j["sandboxes"][::7]:
            assert cv.exec(c["id"], "cat /root/f")["stdout"] == "kept\n"
    finally:
        cv.teardown()

"""No leaks: 1,000 create / exec true / delete cycles through the API leave
coved and the host as they found them: subvolumes, mounts, cgroups, loop
devices, processes, coved's fds, threads and memory.

Other coveds may run on this host at the same time (the shared one, other
checkouts' tests and benchmarks), so what is counted is what this test's own
coved could have made: its pool, its loop device, cgroups named after its
sandboxes, its process tree; mounts are counted host-wide except other
daemons' pool mounts."""
import os
import re
import subprocess
import time

import covetest
from covetest import wait_until

ID_RE = re.compile(r"^sb_[a-z2-7]{12}$")
CYCLES = 1000
WARMUP = 50
HIERARCHIES = covetest.CGROUP_HIERARCHIES


def _status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s for pid %d" % (key, pid))


def _descendants(root):
    """(pid, state, comm) of every process under root, by parent links."""
    procs = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % p) as f:
                st = f.read()
        except OSError:
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        fields = st[st.rindex(")") + 2:].split()
        procs[int(p)] = (int(fields[1]), fields[0], comm)
    out, todo = [], [root]
    while todo:
        parent = todo.pop()
        for pid, (ppid, state, comm) in procs.items():
            if ppid == parent:
                out.append((pid, state, comm))
                todo.append(pid)
    return sorted(out)


def _in_cgroups(ids):
    """Host processes whose cgroup is one of these sandboxes'."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cgroup" % p) as f:
                text = f.read()
        except OSError:
            continue
        for m in re.finditer(r"/cove/(sb_[a-z2-7]{12})", text):
            if m.group(1) in ids:
                found.append((int(p), m.group(1)))
                break
    return found


def _cgroup_dirs(ids):
    return sorted("%s/%s" % (h, sid) for h in HIERARCHIES for sid in ids
                  if os.path.isdir("/sys/fs/cgroup/%s/cove/%s" % (h, sid)))


def _mounts(cv):
    """The host's mount table, less other daemons' btrfs pools on loop devices."""
    pool = os.path.join(cv.data, "pool")
    keep = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            pre, post = line.split(" - ", 1)
            mnt = pre.split()[4]
            fstype, source = post.split()[:2]
            if fstype == "btrfs" and source.startswith("/dev/loop") and mnt != pool:
                continue
            keep.append("%s %s %s" % (mnt, fstype, source))
    return sorted(keep)


def _loops(cv):
    out = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    return sorted(line for line in out.splitlines() if cv.dir in line)


def _subvols(cv):
    pool = os.path.join(cv.data, "pool")
    out = subprocess.run(["btrfs", "subvolume", "list", pool], capture_output=True, text=True)
    assert out.returncode == 0, out
    return len(out.stdout.splitlines())


def _snapshot(cv, ids):
    pid = cv.pid()
    sdir = os.path.join(cv.data, "pool", "sandboxes")
    tree = _descendants(pid)
    return {
        "subvolumes": _subvols(cv),
        "sandbox roots": sorted(n for n in os.listdir(sdir) if ID_RE.match(n)),
        "other entries": len([n for n in os.listdir(sdir) if not ID_RE.match(n)]),
        "mounts": _mounts(cv),
        "loop devices": _loops(cv),
        "cgroup dirs": _cgroup_dirs(ids),
        "processes under coved": len(tree),
        "zombies under coved": [t for t in tree if t[1] == "Z"],
        "processes in its sandboxes' cgroups": _in_cgroups(ids),
        "coved fds": len(os.listdir("/proc/%d/fd" % pid)),
        "coved threads": _status(pid, "Threads"),
    }


def _cycle(cv, ids):
    st, j = cv.api("POST", "/v1/sandboxes", {})
    assert st == 201, (st, j)
    sid = j["id"]
    ids.add(sid)
    st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["true"]})
    assert st == 200 and j["exit_code"] == 0, (st, j)
    st, j = cv.api("DELETE", "/v1/sandboxes/" + sid)
    assert st == 200, (st, j)


def _teardown(cv, ids):
    try:
        if cv.proc is not None and cv.proc.poll() is None:
            for s in cv.api("GET", "/v1/sandboxes")[1]["sandboxes"]:
                ids.add(s["id"])
                cv.api("DELETE", "/v1/sandboxes/" + s["id"])
            wait_until(lambda: not _cgroup_dirs(ids), 10)
    except Exception:
        pass
    finally:
        for pid, _ in _in_cgroups(ids):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        cv.cleanup()
        for d in _cgroup_dirs(ids):
            try:
                os.rmdir("/sys/fs/cgroup/" + d)
            except OSError:
                pass


def test_1000_create_exec_delete_cycles_leak_nothing(_cv):
    cv = covetest.Coved().start()
    ids = set()
    try:
        for _ in range(WARMUP):
            _cycle(cv, ids)
        # Deletions finish after their reply, in the background: start from
        # a quiet daemon.
        wait_until(lambda: _snapshot(cv, ids) == _snapshot(cv, ids) and not _cgroup_dirs(ids), 10, 0.2)
        before = _snapshot(cv, ids)
        rss0 = _status(cv.pid(), "VmRSS")
        assert before["sandbox roots"] == [] and before["cgroup dirs"] == [], before
        assert before["processes under coved"] == 0, _descendants(cv.pid())

        t0 = time.time()
        for _ in range(CYCLES):
            _cycle(cv, ids)
        took = time.time() - t0
        print("# %d create/exec/delete cycles in %.1f s (%.1f ms each)" % (CYCLES, took, 1000 * took / CYCLES))

        wait_until(lambda: _snapshot(cv, ids) == before, 15, 0.2)
        after = _snapshot(cv, ids)
        rss1 = _status(cv.pid(), "VmRSS")
        diff = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
        assert not diff, "leaked after %d cycles: %r" % (CYCLES, diff)
        assert rss1 - rss0 < 4 * 1024, "coved's RSS grew from %d to %d kB" % (rss0, rss1)
        assert len(ids) == WARMUP + CYCLES
        st, j = cv.api("GET", "/v1/health")
        assert st == 200 and j["sandboxes"] == 0, (st, j)
    finally:
        _teardown(cv, ids)

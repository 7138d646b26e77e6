"""Soak (`make soak`): SOAK_SECONDS (default 3600) of mixed load from
SOAK_CLIENTS (default 50) clients on one private coved, over its unix
socket (loopback only: no sandbox sends traffic anywhere).

Each client owns at most SOAK_CAP (default 3) sandboxes and 2 snapshots and
does, at random: create (plain, from a template, or a restore of one of its
snapshots), exec (echo, a short python, a command whose exit 3 is expected),
files (write, read back, list, delete, read gone), snapshot, restore, fork
(count 2), checkpoint, pause/resume (and a pause woken by the next request),
archive (woken by a read and an exec), delete (and the sandbox's history).
Every unexpected status, wrong content, lost connection or timeout
(SOAK_OP_TIMEOUT, default 120 s) is an error; the first ones are printed
with details.

Before the load (after one warm-up round, so that what coved opens once, on
first use, is in the baseline) and after it (everything deleted, coved given
time to finish deletions that complete after their reply) it compares
exactly: coved's open fds and threads, processes under coved, the mounts
that are its own (under its data root or naming one of its sandboxes), its
loop device, the v1 cgroups, host veths and nftables names of its
sandboxes, the btrfs subvolumes of its pool, the entries of the pool's
folders and of run/; and coved's RSS within SOAK_RSS_SLACK_KB (default
16 MiB: freed heap that glibc keeps after 50-way concurrency is not a leak,
a leak over ~10^5 operations would be far past it; start, peak and end are
printed).

Prints ops/s and p50/p99 latency per kind and a summary JSON; exits 1 on any
error or leak. Other coveds may run on this host meanwhile: only what this
coved could have made is compared (the host's whole mount count and load
average are reported)."""
import http.client
import json
import os
import random
import re
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import covetest  # noqa: E402

SECONDS = float(os.environ.get("SOAK_SECONDS", "3600"))
CLIENTS = int(os.environ.get("SOAK_CLIENTS", "50"))
CAP = int(os.environ.get("SOAK_CAP", "3"))
SNAP_CAP = 2
OP_TIMEOUT = float(os.environ.get("SOAK_OP_TIMEOUT", "120"))
RSS_SLACK_KB = int(os.environ.get("SOAK_RSS_SLACK_KB", str(16 * 1024)))
TEMPLATE = "soak-tpl"
HIERARCHIES = covetest.CGROUP_HIERARCHIES
ID_RE = re.compile(r"sb_[a-z2-7]{12}")
MAX_LOGGED = 20


def log(msg):
    print("[soak %s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.lat = {}        # kind -> [seconds]
        self.errors = 0
        self.first_errors = []
        self.ids = set()     # every sandbox ID this coved was seen with

    def op(self, kind, secs):
        with self.lock:
            self.lat.setdefault(kind, []).append(secs)

    def error(self, what):
        with self.lock:
            self.errors += 1
            if len(self.first_errors) < MAX_LOGGED:
                self.first_errors.append(what)
                log("ERROR " + what)

    def seen(self, ids):
        with self.lock:
            self.ids.update(ids)


class Bad(Exception):
    """An answer that is not the one expected."""


class Client:
    """One kept-alive connection; call() times and checks one request."""

    def __init__(self, cv, stats):
        self.cv, self.stats, self.conn = cv, stats, None

    def call(self, kind, method, path, body=None, raw=None, ok=(200,)):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        t0 = time.perf_counter()
        try:
            if self.conn is None:
                self.conn = self.cv.conn(OP_TIMEOUT)
            self.conn.request(method, path, body=data)
            r = self.conn.getresponse()
            text = r.read()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise Bad("%s %s %s: %s after %.1f s" % (kind, method, path, e.__class__.__name__ + " " + str(e),
                                                    time.perf_counter() - t0))
        self.stats.op(kind, time.perf_counter() - t0)
        if r.status not in ok:
            raise Bad("%s %s %s: status %d %s" % (kind, method, path, r.status, text[:300]))
        if r.getheader("Content-Type", "").startswith("application/json"):
            return json.loads(text)
        return text

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def check(cond, what):
    if not cond:
        raise Bad(what)


class Worker:
    """A client's sandboxes: sid -> {"files": {path: bytes}, "paused": bool}."""

    def __init__(self, n, cv, stats, deadline):
        self.n, self.stats, self.deadline = n, stats, deadline
        self.rnd = random.Random(n * 7919 + int(time.time()))
        self.c = Client(cv, stats)
        self.sbs = {}
        self.snaps = []      # (snapshot id, files of the sandbox when taken)
        self.seq = 0

    def uniq(self):
        self.seq += 1
        return "%d-%d" % (self.n, self.seq)

    def adopt(self, j, files):
        sid = j["id"]
        self.stats.seen([sid])
        self.sbs[sid] = {"files": dict(files), "paused": False}
        return sid

    def pick(self):
        return self.rnd.choice(list(self.sbs))

    def touch(self, sid):
        self.sbs[sid]["paused"] = False  # any request that needs it wakes it

    # -- the operations ------------------------------------------------

    def op_create(self):
        r = self.rnd.random()
        if r < 0.2:
            j = self.c.call("create_template", "POST", "/v1/sandboxes", {"template": TEMPLATE}, ok=(201,))
            sid = self.adopt(j, {"/srv/tpl": b"template\n"})
        elif r < 0.35 and self.snaps:
            self.op_restore()
            return
        else:
            j = self.c.call("create", "POST", "/v1/sandboxes", {"memory": "256M"}, ok=(201,))
            sid = self.adopt(j, {})
        self.verify_files(sid)

    def op_restore(self):
        snap, files = self.rnd.choice(self.snaps)
        j = self.c.call("restore", "POST", "/v1/snapshots/%s/restore" % snap, {}, ok=(201,))
        sid = self.adopt(j, files)
        self.verify_files(sid)

    def verify_files(self, sid):
        """One of the files the sandbox should hold, read back."""
        files = self.sbs[sid]["files"]
        if files:
            path = self.rnd.choice(sorted(files))
            got = self.c.call("read", "GET", "/v1/sandboxes/%s/files?path=%s" % (sid, path))
            check(got == files[path], "read %s %s: %r, not %r" % (sid, path, got[:100], files[path]))
            self.touch(sid)

    def op_exec(self, sid):
        k = self.rnd.randrange(3)
        u = self.uniq()
        if k == 0:
            j = self.c.call("exec_echo", "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["echo", u]})
            check(j["exit_code"] == 0 and j["stdout"] == u + "\n", "exec echo %s: %r" % (sid, j))
        elif k == 1:
            n = self.rnd.randrange(1000, 100000)
            j = self.c.call("exec_python", "POST", "/v1/sandboxes/%s/exec" % sid,
                            {"cmd": ["python3", "-c", "import sys; print(sum(range(int(sys.argv[1]))))", str(n)]})
            check(j["exit_code"] == 0 and j["stdout"] == "%d\n" % sum(range(n)), "exec python %s: %r" % (sid, j))
        else:
            j = self.c.call("exec_fail", "POST", "/v1/sandboxes/%s/exec" % sid,
                            {"cmd": "echo no >&2; exit 3"})
            check(j["exit_code"] == 3 and j["stderr"] == "no\n", "exec exit 3 %s: %r" % (sid, j))
        self.touch(sid)

    def op_files(self, sid):
        base = "/v1/sandboxes/%s/files" % sid
        u = self.uniq()
        path = "/srv/soak/f-%s" % u
        data = os.urandom(self.rnd.choice((16, 1024, 65536)))
        self.c.call("file_write", "PUT", base + "?path=%s&parents=1" % path, raw=data, ok=(200, 201))
        self.touch(sid)
        got = self.c.call("file_read", "GET", base + "?path=" + path)
        check(got == data, "read back %s %s: %d bytes, not the %d written" % (sid, path, len(got), len(data)))
        lst = self.c.call("file_list", "GET", base + "?path=/srv/soak")
        names = {e["name"] for e in lst["entries"]}
        check("f-" + u in names, "list %s /srv/soak: no f-%s in %r" % (sid, u, sorted(names)[:20]))
        if self.rnd.random() < 0.5:   # half are kept: snapshots, forks and restores carry them
            self.sbs[sid]["files"][path] = data
            return
        self.c.call("file_delete", "DELETE", base + "?path=" + path)
        self.c.call("file_read_gone", "GET", base + "?path=" + path, ok=(404,))

    def op_snapshot(self, sid):
        j = self.c.call("snapshot", "POST", "/v1/sandboxes/%s/snapshots" % sid, {}, ok=(201,))
        self.touch(sid)
        self.snaps.append((j["id"], dict(self.sbs[sid]["files"])))
        if len(self.snaps) > SNAP_CAP:
            old = self.snaps.pop(0)[0]
            self.c.call("snapshot_delete", "DELETE", "/v1/snapshots/" + old)

    def op_fork(self, sid):
        j = self.c.call("fork", "POST", "/v1/sandboxes/%s/fork" % sid, {"count": 2}, ok=(201,))
        self.touch(sid)
        check(len(j["sandboxes"]) == 2, "fork %s: %r" % (sid, j))
        for s in j["sandboxes"]:
            self.verify_files(self.adopt(s, self.sbs[sid]["files"]))

    def op_checkpoint(self, sid):
        j = self.c.call("checkpoint", "POST", "/v1/sandboxes/%s/checkpoints" % sid,
                        {"label": self.uniq()}, ok=(201,))
        check(j.get("sandbox") == sid and j.get("seq", 0) >= 1, "checkpoint %s: %r" % (sid, j))
        self.touch(sid)

    def op_pause(self, sid):
        sb = self.sbs[sid]
        if sb["paused"]:
            j = self.c.call("resume", "POST", "/v1/sandboxes/%s/resume" % sid)
            check(j["state"] == "running", "resume %s: %r" % (sid, j))
            sb["paused"] = False
            return
        if self.rnd.random() < 0.25:
            # Archived: processes ended, files kept; the next request
            # (a read of one of its files, when it has some) brings it back.
            j = self.c.call("archive", "POST", "/v1/sandboxes/%s/archive" % sid)
            check(j["state"] == "archived", "archive %s: %r" % (sid, j))
            self.verify_files(sid)
            self.op_exec(sid)
            return
        j = self.c.call("pause", "POST", "/v1/sandboxes/%s/pause" % sid)
        check(j["state"] == "paused", "pause %s: %r" % (sid, j))
        sb["paused"] = True   # resumed by the next pause op, or woken by any request

    def op_delete(self, sid):
        self.c.call("delete", "DELETE", "/v1/sandboxes/" + sid)
        del self.sbs[sid]
        self.c.call("history_delete", "DELETE", "/v1/sandboxes/%s/checkpoints" % sid, ok=(200, 404))

    def step(self):
        if not self.sbs:
            return self.op_create()
        full = len(self.sbs) >= CAP
        r = self.rnd.random()
        sid = self.pick()
        if r < 0.10 and not full:
            return self.op_create()
        if r < 0.14 and len(self.sbs) + 2 <= CAP:
            return self.op_fork(sid)
        if r < 0.20 and self.snaps and not full:
            return self.op_restore()
        if r < 0.30 or (full and r < 0.34):
            return self.op_delete(sid)
        if r < 0.55:
            return self.op_exec(sid)
        if r < 0.75:
            return self.op_files(sid)
        if r < 0.82:
            return self.op_snapshot(sid)
        if r < 0.88:
            return self.op_checkpoint(sid)
        return self.op_pause(sid)

    def run(self):
        while time.time() < self.deadline:
            try:
                self.step()
            except Bad as e:
                self.stats.error("client %d: %s" % (self.n, e))
            except Exception as e:  # a malformed answer (KeyError, ValueError): the soak's error too
                self.stats.error("client %d: %s %r" % (self.n, e.__class__.__name__, e))
        self.c.close()


# -- what coved holds on the host ---------------------------------------

def _status(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def _descendants(root):
    kids = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/stat" % p) as f:
                    st = f.read()
            except OSError:
                continue
            kids.setdefault(int(st[st.rindex(")") + 2:].split()[1]), []).append(int(p))
    out, todo = [], [root]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _loops(cv):
    out = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
    return sorted(line for line in out.splitlines() if cv.dir in line)


def _mounts(cv, ids):
    """(its own mounts, the host's whole count)."""
    devs = {line.split(":")[0] for line in _loops(cv)}
    own, total = [], 0
    with open("/proc/self/mountinfo") as f:
        for line in f:
            total += 1
            pre, post = line.split(" - ", 1)
            mnt = pre.split()[4]
            source = post.split()[1]
            if cv.dir in line or source in devs or any(m in ids for m in ID_RE.findall(line)):
                own.append("%s %s" % (mnt, source))
    return sorted(own), total


def _cgroups(ids):
    out = []
    for h in HIERARCHIES:
        d = "/sys/fs/cgroup/%s/cove" % h
        try:
            out += ["%s/%s" % (h, n) for n in os.listdir(d) if n in ids]
        except OSError:
            pass
    return sorted(out)


def _links(ids):
    """Host-side veths (cv-X for sandbox sb_X) of its sandboxes."""
    try:
        names = os.listdir("/sys/class/net")
    except OSError:
        return []
    return sorted(n for n in names if n.startswith("cv-") and "sb_" + n[3:] in ids)


def _nft(ids):
    """Chains (sb_X, sb_X_nat) and set elements of its sandboxes in the
    table inet cove, which every coved on the host shares."""
    rc, out, err = covetest.nft("list table inet cove")
    if rc != 0:
        return [] if "No such file" in err else ["error: " + err.strip()]
    return sorted(set(m for m in ID_RE.findall(out) if m in ids) |
                  set("cv-" + m for m in re.findall(r"cv-([a-z2-7]{12})", out) if "sb_" + m in ids))


def _subvols(cv):
    out = subprocess.run(["btrfs", "subvolume", "list", os.path.join(cv.data, "pool")],
                         capture_output=True, text=True)
    return sorted(out.stdout.splitlines()) if out.returncode == 0 else ["error: " + out.stderr]


def _pool_ids(cv):
    d = os.path.join(cv.data, "pool", "sandboxes")
    return set(n for n in os.listdir(d) if ID_RE.fullmatch(n)) if os.path.isdir(d) else set()


def _pool_entries(cv):
    """What lies in the pool's folders and the data root's run/ (snapshot
    trees, archives, restores in flight, per-sandbox run files)."""
    out = []
    for sub in ("pool/snapshots", "pool/restore", "pool/archives", "pool/images", "run"):
        d = os.path.join(cv.data, sub)
        if os.path.isdir(d):
            out += [sub + "/" + n for n in os.listdir(d)]
    return sorted(out)


def resources(cv, ids):
    pid = cv.pid()
    own, total = _mounts(cv, ids)
    return {
        "coved fds": len(os.listdir("/proc/%d/fd" % pid)),
        "coved threads": _status(pid, "Threads"),
        "processes under coved": len(_descendants(pid)),
        "mounts (its own)": own,
        "loop devices": _loops(cv),
        "cgroup dirs (its sandboxes')": _cgroups(ids),
        "veths (its sandboxes')": _links(ids),
        "nft chains and elements (its sandboxes')": _nft(ids),
        "subvolumes": _subvols(cv),
        "sandbox roots": sorted(_pool_ids(cv)),
        "pool and run entries": _pool_entries(cv),
    }, total


def summarize(r):
    return {k: (len(v) if isinstance(v, list) else v) for k, v in r.items()}


# -- set-up, monitor, clean-up ------------------------------------------

def warm_up(cv, stats):
    """One round of every kind, all deleted again, before the baseline."""
    c = Client(cv, stats)
    sid = c.call("warmup", "POST", "/v1/sandboxes", {"memory": "256M"}, ok=(201,))["id"]
    c.call("warmup", "POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": ["true"]})
    c.call("warmup", "POST", "/v1/sandboxes/%s/pause" % sid)
    c.call("warmup", "POST", "/v1/sandboxes/%s/resume" % sid)
    snap = c.call("warmup", "POST", "/v1/sandboxes/%s/snapshots" % sid, {}, ok=(201,))["id"]
    c.call("warmup", "POST", "/v1/sandboxes/%s/checkpoints" % sid, {}, ok=(201,))
    forks = c.call("warmup", "POST", "/v1/sandboxes/%s/fork" % sid, {"count": 2}, ok=(201,))["sandboxes"]
    new = c.call("warmup", "POST", "/v1/snapshots/%s/restore" % snap, {}, ok=(201,))["id"]
    stats.seen([sid, new] + [s["id"] for s in forks])
    c.close()
    clean_all(cv, stats)


def make_template(cv, stats):
    """The template the clients create from: a snapshot's files, 2 warm."""
    c = Client(cv, stats)
    sid = c.call("setup", "POST", "/v1/sandboxes", {"memory": "256M"}, ok=(201,))["id"]
    stats.seen([sid])
    c.call("setup", "PUT", "/v1/sandboxes/%s/files?path=/srv/tpl" % sid, raw=b"template\n", ok=(200, 201))
    snap = c.call("setup", "POST", "/v1/sandboxes/%s/snapshots" % sid, {}, ok=(201,))["id"]
    c.call("setup", "DELETE", "/v1/sandboxes/" + sid)
    c.call("setup", "POST", "/v1/templates", {"name": TEMPLATE, "from_snapshot": snap, "memory": "256M",
                                              "warm": 2}, ok=(201,))
    c.close()


def clean_all(cv, stats):
    """Deletes every sandbox, history, snapshot and template coved has."""
    c = Client(cv, stats)
    try:
        c.call("cleanup", "DELETE", "/v1/templates/" + TEMPLATE, ok=(200, 404))
        sbs = [s["id"] for s in c.call("cleanup", "GET", "/v1/sandboxes")["sandboxes"]]
        stats.seen(sbs)
        for sid in sbs:
            c.call("cleanup", "DELETE", "/v1/sandboxes/" + sid, ok=(200, 404))
        for sid in sorted(stats.ids):
            c.call("cleanup", "DELETE", "/v1/sandboxes/%s/checkpoints" % sid, ok=(200, 404))
        for sn in c.call("cleanup", "GET", "/v1/snapshots")["snapshots"]:
            c.call("cleanup", "DELETE", "/v1/snapshots/" + sn["id"], ok=(200, 404))
    finally:
        c.close()


def monitor(cv, stats, stop, info):
    """Every 5 s: coved's RSS and fds, the load average, the sandbox IDs on
    its pool (warm ones too); a progress line a minute."""
    c = Client(cv, stats)
    last = 0
    while not stop.wait(5):
        rss = _status(cv.pid(), "VmRSS")
        info["rss_peak_kb"] = max(info["rss_peak_kb"], rss)
        load = os.getloadavg()[0]
        info["load_min"] = min(info["load_min"], load)
        info["load_max"] = max(info["load_max"], load)
        fds = len(os.listdir("/proc/%d/fd" % cv.pid()))
        info["fds_peak"] = max(info["fds_peak"], fds)
        ids = _pool_ids(cv)
        try:
            ids |= {s["id"] for s in c.call("list", "GET", "/v1/sandboxes")["sandboxes"]}
        except Bad as e:
            stats.error("monitor: %s" % e)
        stats.seen(ids)
        if time.time() - last >= 60:
            last = time.time()
            with stats.lock:
                n = sum(len(v) for v in stats.lat.values())
            log("%d ops, %d errors, %d sandboxes, %d veths, %d nft names, coved rss %d kB fds %d, load %.2f" %
                (n, stats.errors, len(ids), len(_links(ids)), len(_nft(ids)), rss, fds, load))
    c.close()


def sanitizer_reports(cv):
    """The first lines of ASan's and UBSan's reports in coved's log."""
    with open(cv.log, errors="replace") as f:
        return [line.rstrip() for line in f
                if "runtime error:" in line or "Sanitizer" in line][:MAX_LOGGED]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


def report(stats, took):
    out = {}
    for kind in sorted(stats.lat):
        v = stats.lat[kind]
        out[kind] = {"n": len(v), "per_s": round(len(v) / took, 2),
                     "p50_ms": round(pct(v, 50) * 1000, 1), "p99_ms": round(pct(v, 99) * 1000, 1),
                     "max_ms": round(max(v) * 1000, 1)}
        print("%-16s %7d ops %7.2f/s  p50 %8.1f ms  p99 %8.1f ms  max %8.1f ms" %
              (kind, len(v), len(v) / took, pct(v, 50) * 1000, pct(v, 99) * 1000, max(v) * 1000))
    return out


def settle(cv, stats, want=None, timeout=120):
    """Waits for coved to finish what completes after its replies (deletions):
    until what it holds is want, or (want None) no sandbox is left and two
    samples a second apart agree. Returns the last resources seen."""
    deadline = time.time() + timeout
    prev = None
    while True:
        now, total = resources(cv, stats.ids)
        quiet = not now["sandbox roots"] and not now["cgroup dirs (its sandboxes')"] \
            and now["processes under coved"] == 0 and not now["veths (its sandboxes')"]
        if (now == want) if want is not None else (quiet and now == prev):
            return now, total
        if time.time() > deadline:
            return now, total
        prev = now
        time.sleep(1)


def main():
    cv = covetest.Coved().start()
    stats = Stats()
    ok = False
    try:
        warm_up(cv, stats)
        before, total0 = settle(cv, stats)
        rss0 = _status(cv.pid(), "VmRSS")
        log("baseline: %s, host mounts %d, coved rss %d kB" % (json.dumps(summarize(before)), total0, rss0))
        make_template(cv, stats)
        stats.lat.clear()
        info = {"rss_peak_kb": rss0, "load_min": 99.0, "load_max": 0.0, "fds_peak": before["coved fds"]}

        stop = threading.Event()
        mon = threading.Thread(target=monitor, args=(cv, stats, stop, info))
        mon.start()
        t0 = time.time()
        workers = [Worker(n, cv, stats, t0 + SECONDS) for n in range(CLIENTS)]
        threads = [threading.Thread(target=w.run) for w in workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.time() - t0
        stop.set()
        mon.join()
        kinds = report(stats, took)
        log("load done after %.0f s; deleting everything" % took)
        try:
            clean_all(cv, stats)
        except Bad as e:
            stats.error("cleanup: %s" % e)
        after, total1 = settle(cv, stats, before)
        time.sleep(5)   # and stays so
        after, total1 = resources(cv, stats.ids)
        rss1 = _status(cv.pid(), "VmRSS")
        leaks = {k: {"before": before[k], "after": after[k]} for k in before if before[k] != after[k]}
        if rss1 - rss0 > RSS_SLACK_KB:
            leaks["rss_kb"] = {"start": rss0, "end": rss1}
        san = sanitizer_reports(cv)
        if san:   # a build with SAN= (ASan, UBSan): their reports go to coved's stderr
            leaks["sanitizer reports in coved's log"] = san
        summary = {
            "seconds": round(took), "clients": CLIENTS, "cap_per_client": CAP,
            "ops": sum(len(v) for v in stats.lat.values()), "errors": stats.errors,
            "first_errors": stats.first_errors, "kinds": kinds,
            "sandboxes_seen": len(stats.ids),
            "rss_kb": {"start": rss0, "peak": info["rss_peak_kb"], "end": rss1, "slack": RSS_SLACK_KB},
            "fds": {"start": before["coved fds"], "peak": info["fds_peak"], "end": after["coved fds"]},
            "before": summarize(before), "after": summarize(after),
            "host_mounts": {"start": total0, "end": total1},
            "load_avg_1m": {"min": info["load_min"], "max": info["load_max"]},
            "leaks": leaks,
        }
        text = json.dumps(summary, indent=1)
        for kind, v in kinds.items():   # a kind a line
            text = text.replace(json.dumps({kind: v}, indent=1)[2:-2].replace("\n", "\n "), json.dumps({kind: v})[1:-1])
        print(text, flush=True)
        ok = stats.errors == 0 and not leaks
        log("PASS" if ok else "FAIL: %d errors, leaks: %s" % (stats.errors, sorted(leaks)))
    finally:
        cv.teardown()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

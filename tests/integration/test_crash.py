"""Crash test of snapshots, checkpoints, restores and forks (issue 4,
durability): coved is
SIGKILLed at a random moment of one of them, started again, and then

  - every snapshot listed restores to a tree byte-identical to the one it
    was taken of (content, mode, owner, link count, mtime, symlink target of
    every file), and is durable;
  - everything listed works: every sandbox execs, and the copies and
    restores hold that same tree;
  - nothing acknowledged is lost, and nothing half made is listed: a fork is
    all or nothing, a restore gives one sandbox or none, a checkpoint is in
    the history with its snapshot listed or neither is there;
  - no subvolume is leaked: the pool's subvolumes are the images plus what
    the API lists.

Runs on a private coved (the shared one is never killed)."""
import os
import random
import re
import subprocess
import time

import covetest
from covetest import wait_until
from test_restart import _fire

TRIALS = 72
HTTP_TIMEOUT = 20  # a sandbox left frozen would hang an exec: fail, not wait
SB_RE = re.compile(r"^sb_[a-z2-7]{12}$")
SN_RE = re.compile(r"^sn_[a-z2-7]{12}$")

# A tree with what a copy can get wrong: contents, modes (setuid, sticky,
# private), owners set from inside (files, directories, a symlink itself),
# symlinks (relative, absolute, dangling, to a directory), a hard link, a
# FIFO, an empty file, a sparse one, nested directories.
SETUP = r"""set -e
mkdir -p /srv/t/a/b/c /srv/t/empty /srv/t/many /srv/t/sticky
printf 'one\n' > /srv/t/a/one
head -c 200000 /dev/urandom > /srv/t/a/b/rand; chmod 600 /srv/t/a/b/rand
printf '#!/bin/sh\necho hi\n' > /srv/t/a/b/c/script; chmod 755 /srv/t/a/b/c/script
printf 'x' > /srv/t/suid; chown 1000:1000 /srv/t/suid; chmod 4750 /srv/t/suid
echo owned > /srv/t/owned; chown 1234:4321 /srv/t/owned; chmod 640 /srv/t/owned
echo nobody > /srv/t/nobody; chown nobody:nogroup /srv/t/nobody
chown 55:66 /srv/t/a/b; chmod 700 /srv/t/a/b/c; chmod 1777 /srv/t/sticky
ln -s a/one /srv/t/rel; ln -s /etc/hostname /srv/t/abs; ln -s /nowhere /srv/t/dangling; ln -s a/b /srv/t/dirlink
chown -h 1234:4321 /srv/t/rel
ln /srv/t/a/one /srv/t/hard
mkfifo /srv/t/fifo; : > /srv/t/emptyfile; truncate -s 5M /srv/t/sparse; echo end >> /srv/t/sparse
for i in $(seq 1 40); do echo "file $i $(head -c 8 /dev/urandom | od -An -tx1)" > /srv/t/many/f$i; chmod 6$((i % 8))$((i % 5)) /srv/t/many/f$i; done
echo marker > /etc/cove-marker; echo 'export CRASH=1' >> /root/.profile
touch -d '2001-02-03 04:05:06' /srv/t/a/one
"""
# Every file of the tree and of the other places written to: path, type,
# mode, uid, gid, link count, size, mtime, symlink target; then the sums of
# the regular files' contents.
MANIFEST = (r"find /srv/t /etc/cove-marker /root/.profile -printf '%p %y %m %U %G %n %s %T@ %l\n' | sort; "
            r"find /srv/t /etc/cove-marker /root/.profile -type f -print0 | sort -z | xargs -0 sha256sum")


def _tree(cv, sid):
    try:
        st, j = cv.api("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": MANIFEST, "timeout": 10},
                       timeout=HTTP_TIMEOUT)
    except OSError as e:
        return "exec failed: %r" % e
    if st != 200 or j.get("exit_code") != 0:
        return "exec failed: %s %s" % (st, j)
    return j["stdout"]


def _listed(cv, what):
    st, j = cv.api("GET", "/v1/" + what, timeout=HTTP_TIMEOUT)
    assert st == 200, (st, j)
    return {x["id"]: x for x in j[what]}


def _subvols(cv):
    out = subprocess.run(["btrfs", "subvolume", "list", os.path.join(cv.data, "pool")], capture_output=True,
                         text=True)
    assert out.returncode == 0, out
    return {line.split()[-1] for line in out.stdout.splitlines()}


def _expected_subvols(cv, sandboxes, snapshots):
    # the host images, and OCI images' layer trees (images/layers/<chain id>)
    root = os.path.join(cv.data, "pool", "images")
    images = {"images/" + n for n in os.listdir(root) if n.startswith("host")}
    if os.path.isdir(os.path.join(root, "layers")):
        images |= {"images/layers/" + n for n in os.listdir(os.path.join(root, "layers"))}
    return images | {"sandboxes/" + s for s in sandboxes} | {"snapshots/%s/files" % s for s in snapshots}


def _restart(cv, refusals):
    """Start coved again. A start refused right after a kill (a sandbox
    start the kill cut short may hold the API socket for a moment: see
    test_restart) is counted, then retried."""
    for attempt in range(4):
        try:
            cv.start()
            return
        except RuntimeError as e:
            if attempt == 3:
                raise AssertionError("coved does not start again: %s" % e)
            refusals.append(str(e).strip().splitlines()[-1:])
            time.sleep(0.5)


def _log_since(cv, offset):
    with open(cv.log, errors="replace") as f:
        f.seek(offset)
        return f.read()


# What the next start's log says a kill left behind, by operation.
PHASES = [
    ("swept a snapshot directory", re.compile(r"deleted '.*/snapshots/sn_\w+', an unfinished snapshot")),
    ("made a listed snapshot durable", re.compile(r"snapshot sn_\w+: made durable at start")),
    ("removed an unrecorded root", re.compile(r"a sandbox root with no record")),
    ("booted a sandbox again", re.compile(r"started again \(its previous init was gone\)")),
]


def _phase(answer, log):
    seen = [name for name, rx in PHASES if rx.search(log)]
    if isinstance(answer, tuple) and answer[0] == 201:
        return "answered" + (" (%s)" % ", ".join(seen) if seen else "")
    return ", ".join(seen) if seen else "no trace (killed before it began, or between steps)"


def _check(cv, reference, source, before_sn, before_sb, op, what, answer, problems):
    """Everything the trial's restart must satisfy (what names the trial in
    problems); returns the new snapshots and sandboxes."""
    snaps, sbs = _listed(cv, "snapshots"), _listed(cv, "sandboxes")
    new_sn, new_sb = set(snaps) - set(before_sn), set(sbs) - set(before_sb)
    lost = (set(before_sn) - set(snaps)) | (set(before_sb) - set(sbs))
    if lost:
        problems.append("%s: lost %s" % (what, sorted(lost)))
    acked = isinstance(answer, tuple) and answer[0] == 201
    if isinstance(answer, tuple) and answer[0] != 201:
        problems.append("%s: answered %s %s" % (what, answer[0], answer[1]))
    if op.startswith("snapshot"):
        if new_sb or len(new_sn) > 1:
            problems.append("%s: made %s %s" % (what, new_sn, new_sb))
        if acked and answer[1]["id"] not in snaps:
            problems.append("%s: acknowledged snapshot %s is not listed" % (what, answer[1]["id"]))
    elif op == "checkpoint":
        st, h = cv.api("GET", "/v1/sandboxes/%s/checkpoints" % source, timeout=HTTP_TIMEOUT)
        named = {c["snapshot"] for c in h.get("checkpoints", [])} if st == 200 else None
        if named is None or new_sb or named != new_sn:
            problems.append("%s: new snapshots %s, checkpoints name %s, new sandboxes %s" % (
                what, sorted(new_sn), named, sorted(new_sb)))
        if acked and answer[1]["snapshot"] not in snaps:
            problems.append("%s: acknowledged checkpoint's snapshot %s is not listed" % (what, answer[1]["snapshot"]))
    elif op == "restore":
        if new_sn or len(new_sb) > 1:
            problems.append("%s: made %s %s" % (what, new_sn, new_sb))
        if acked and answer[1]["id"] not in sbs:
            problems.append("%s: acknowledged sandbox %s is not listed" % (what, answer[1]["id"]))
    else:
        count = int(op.split()[1])
        if new_sn or len(new_sb) not in (0, count):
            problems.append("%s: half a fork is listed: %d of %d copies" % (what, len(new_sb), count))
        if acked and {c["id"] for c in answer[1]["sandboxes"]} - set(sbs):
            problems.append("%s: acknowledged copies are not listed" % what)
    for snid, sn in snaps.items():
        if sn["durable"] is not True:
            problems.append("%s: snapshot %s listed after a start as not durable" % (what, snid))
    # Every sandbox listed works and holds the tree; every snapshot listed
    # restores to it.
    for sid in sorted(sbs):
        got = _tree(cv, sid)
        if got != reference:
            problems.append("%s: sandbox %s%s: %s" % (what, sid, " (the source)" if sid == source else "",
                                                       _diff(reference, got)))
    for snid in sorted(snaps):
        st, j = cv.api("POST", "/v1/snapshots/%s/restore" % snid, {}, timeout=HTTP_TIMEOUT)
        if st != 201:
            problems.append("%s: listed snapshot %s does not restore: %s %s" % (what, snid, st, j))
            continue
        got = _tree(cv, j["id"])
        if got != reference:
            problems.append("%s: snapshot %s restores to another tree: %s" % (what, snid, _diff(reference, got)))
        cv.api("DELETE", "/v1/sandboxes/" + j["id"], timeout=HTTP_TIMEOUT)
    # Deletions finish after their answer: the pool settles on the listed.
    want = _expected_subvols(cv, sbs, snaps)
    if not wait_until(lambda: _subvols(cv) == want, 10):
        problems.append("%s: subvolumes leaked %s, missing %s" % (what, sorted(_subvols(cv) - want),
                                                                  sorted(want - _subvols(cv))))
    snapdir = os.path.join(cv.data, "pool", "snapshots")
    stray = [n for n in os.listdir(snapdir) if n not in snaps]
    if stray:
        problems.append("%s: snapshot directories not listed: %s" % (what, stray))
    return new_sn, new_sb


def _diff(want, got):
    a, b = set(want.splitlines()), set(got.splitlines())
    return ("missing %s; unexpected %s" % (sorted(a - b)[:5], sorted(b - a)[:5]))[:1500]


def _span(cv, method, path, body, undo):
    """How long an operation takes undisturbed (ms, the median of three);
    undo(answer) removes what it made."""
    times = []
    for _ in range(3):
        t0 = time.time()
        st, j = cv.api(method, path, body, timeout=HTTP_TIMEOUT)
        assert st == 201, (st, j)
        times.append((time.time() - t0) * 1000)
        undo(j)
    return sorted(times)[1]


def test_sigkill_during_snapshot_restore_fork(_cv):
    cv = covetest.Coved().start()
    seed = int(os.environ.get("COVE_CRASH_SEED", time.time()))  # to replay a run
    rng = random.Random(seed)
    problems, phases, seen_ids, refusals = [], {}, set(), []
    t_start = time.time()
    try:
        source = cv.create(name="source")
        r = cv.exec(source, SETUP)
        assert r["exit_code"] == 0, r
        reference = _tree(cv, source)
        assert "/srv/t/rel l 777 1234 4321 1 5 " in reference and "/srv/t/suid f 4750 1000 1000" in reference, \
            reference[:3000]
        assert "/srv/t/a/one f 644 0 0 2 4 981173106" in reference and "/srv/t/fifo p" in reference, reference[:3000]
        st, base = cv.api("POST", "/v1/sandboxes/%s/snapshots" % source, {"name": "base"})
        assert st == 201 and base["durable"] is True, (st, base)
        # Undisturbed durations, to aim the kills inside the operations.
        spans = {
            "snapshot": _span(cv, "POST", "/v1/sandboxes/%s/snapshots" % source, {},
                              lambda j: cv.api("DELETE", "/v1/snapshots/" + j["id"])),
            "restore": _span(cv, "POST", "/v1/snapshots/%s/restore" % base["id"], {},
                             lambda j: cv.api("DELETE", "/v1/sandboxes/" + j["id"])),
            "checkpoint": _span(cv, "POST", "/v1/sandboxes/%s/checkpoints" % source, {"label": "span"},
                                lambda j: cv.api("DELETE", "/v1/sandboxes/%s/checkpoints" % source)),
            "fork": _span(cv, "POST", "/v1/sandboxes/%s/fork" % source, {"count": 2},
                          lambda j: [cv.api("DELETE", "/v1/sandboxes/" + c["id"]) for c in j["sandboxes"]]),
        }
        ops = ["snapshot", "snapshot nowait", "restore", "fork 1", "fork 3", "checkpoint"]
        for trial in range(TRIALS):
            op = ops[trial % len(ops)]
            before_sn, before_sb = _listed(cv, "snapshots"), _listed(cv, "sandboxes")
            if op.startswith("snapshot"):
                body = {"name": "t%d" % trial}
                if op == "snapshot nowait":
                    body["wait_durable"] = False
                req = ("POST", "/v1/sandboxes/%s/snapshots" % source, body)
                span = spans["snapshot"]
            elif op == "checkpoint":
                req = ("POST", "/v1/sandboxes/%s/checkpoints" % source, {"label": "t%d" % trial})
                span = spans["checkpoint"]
            elif op == "restore":
                req = ("POST", "/v1/snapshots/%s/restore" % rng.choice(sorted(before_sn)), {})
                span = spans["restore"]
            else:
                req = ("POST", "/v1/sandboxes/%s/fork" % source, {"count": int(op.split()[1])})
                span = spans["fork"] * int(op.split()[1]) / 2
            # Anywhere in the operation, or just after it.
            delay = rng.uniform(0, 1.2 * span) / 1000
            out, log_at = [], os.path.getsize(cv.log)
            t = _fire(cv, *req, out)
            time.sleep(delay)
            cv.kill()
            _restart(cv, refusals)
            t.join(HTTP_TIMEOUT)
            answer = out[0] if out else None
            log = _log_since(cv, log_at)
            phase = _phase(answer, log)
            phases.setdefault(op, {}).setdefault(phase, 0)
            phases[op][phase] += 1
            what = "%s (trial %d, killed after %.1f ms)" % (op, trial, delay * 1000)
            new_sn, new_sb = _check(cv, reference, source, before_sn, before_sb, op, what, answer, problems)
            # A root removed at start takes its processes and cgroups along.
            for sid in re.findall(r"sandboxes/(sb_[a-z2-7]{12})', a sandbox root with no record", log):
                if covetest.cgroup_dirs(sid):
                    problems.append("%s: removed %s keeps cgroups %s, processes %s" % (
                        what, sid, covetest.cgroup_dirs(sid), covetest.cgroup_procs(sid)))
            seen_ids |= set(cv.sandbox_dirs()) | new_sb
            if len(problems) > 10:  # enough to see what goes wrong
                break
            # Keep the pool small: new sandboxes go, and snapshots but the
            # base and the newest two.
            for sid in new_sb:
                cv.api("DELETE", "/v1/sandboxes/" + sid)
            if op == "checkpoint":  # its snapshot goes with the history
                cv.api("DELETE", "/v1/sandboxes/%s/checkpoints" % source)
            snaps = sorted(_listed(cv, "snapshots").values(), key=lambda s: s["created_at"])
            for sn in [s for s in snaps if s["id"] != base["id"]][:-2]:
                cv.api("DELETE", "/v1/snapshots/" + sn["id"])
        # No process is left in the cgroup of a sandbox that is not listed.
        listed = set(_listed(cv, "sandboxes"))
        for sid in sorted(seen_ids - listed):
            wait_until(lambda: not covetest.cgroup_procs(sid), 5)
            if covetest.cgroup_procs(sid):
                problems.append("unlisted sandbox %s keeps processes %s" % (sid, covetest.cgroup_procs(sid)))
        print("# %d trials in %.0f s, COVE_CRASH_SEED=%d, kills within %s ms, %d starts refused at first:" % (
            trial + 1, time.time() - t_start, seed, {k: round(1.2 * v) for k, v in spans.items()}, len(refusals)))
        for op in ops:
            for phase, n in sorted(phases.get(op, {}).items(), key=lambda kv: -kv[1]):
                print("#   %-16s %3d  %s" % (op, n, phase))
        assert not problems, "%d problems (COVE_CRASH_SEED=%d):\n  %s" % (len(problems), seed, "\n  ".join(problems))
    finally:
        cv.teardown()

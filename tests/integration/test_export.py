"""Export: a sandbox's folder as a tar or a zip (GET .../export), the portable
JSON snapshot out and in (GET/POST .../snapshot.json), the CLI verbs, and
hostile portable documents, each refused with nothing made."""
import base64
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import threading
import time
import zipfile

import covetest

TREE = r"""
set -e
mkdir -p /w/src/deep/er /w/empty /w/locked
printf 'hello\n' > /w/src/a.txt
printf '' > /w/src/empty.txt
head -c 70000 /dev/urandom > /w/src/bin.dat
head -c 5000000 /dev/urandom > /w/big.bin
printf 'caf\303\251' > "/w/caf$(printf '\303\251').txt"
printf raw > "/w/raw$(printf '\377\376')"
chmod 0750 /w/src/deep; chmod 0600 /w/src/a.txt; chmod 0755 /w/src/bin.dat; chmod 0700 /w/empty
ln -s src/a.txt /w/link
ln -s /nowhere/at/all /w/dangling
"""

# path relative to /w -> (type, mode, sha256 or target), from inside the sandbox
LIST = r"""cd /w && find . -mindepth 1 | LC_ALL=C sort | while IFS= read -r p; do
  if [ -L "$p" ]; then printf '%s\0l\0%s\0%s\0' "$p" "$(stat -c %a "$p")" "$(readlink "$p")";
  elif [ -d "$p" ]; then printf '%s\0d\0%s\0-\0' "$p" "$(stat -c %a "$p")";
  else printf '%s\0f\0%s\0%s\0' "$p" "$(stat -c %a "$p")" "$(sha256sum < "$p" | cut -d' ' -f1)"; fi; done"""


def tree_of(cv, sid, root="/w"):
    r = cv.exec(sid, ["sh", "-c", LIST.replace("/w", root)])
    assert r["exit_code"] == 0 and not r["stdout_truncated"], r
    raw = (base64.b64decode(r["stdout_b64"]) if r["stdout"] is None else r["stdout"].encode()).split(b"\0")[:-1]
    out = {}
    for i in range(0, len(raw), 4):
        p, t, m, x = raw[i:i + 4]
        out[p[2:]] = (t.decode(), int(m, 8) & 0o7777, x.decode(errors="surrogateescape"))
    return out


def _sandbox(cv, cache={}):
    sid = cache.get(cv.socket)
    if not sid:
        sid = cache[cv.socket] = cv.create()
        r = cv.exec(sid, ["sh", "-c", TREE])
        assert r["exit_code"] == 0, r
    return sid


def get(cv, url, timeout=120):
    c = cv.conn(timeout)
    try:
        c.request("GET", url)
        r = c.getresponse()
        return r.status, r.getheader("Content-Type"), r.read()
    finally:
        c.close()


def tree_of_tar(data):
    out = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        for m in t.getmembers():
            p = m.name.encode("utf-8", "surrogateescape")
            if m.issym():
                out[p] = ("l", m.mode & 0o7777, m.linkname)
            elif m.isdir():
                out[p] = ("d", m.mode & 0o7777, "-")
            else:
                out[p] = ("f", m.mode & 0o7777, hashlib.sha256(t.extractfile(m).read()).hexdigest())
    return out


def tree_of_zip(data):
    z = zipfile.ZipFile(io.BytesIO(data))
    assert z.testzip() is None
    out = {}
    for i in z.infolist():
        name = i.filename.encode("utf-8" if i.flag_bits & 0x800 else "cp437")
        mode = i.external_attr >> 16
        body = z.read(i)
        if (mode & 0o170000) == 0o120000:
            out[name] = ("l", mode & 0o7777, body.decode(errors="surrogateescape"))
        elif name.endswith(b"/"):
            out[name[:-1]] = ("d", mode & 0o7777, "-")
        else:
            out[name] = ("f", mode & 0o7777, hashlib.sha256(body).hexdigest())
    return out


def test_tar_and_zip_match_the_sandbox(cv):
    sid = _sandbox(cv)
    want = tree_of(cv, sid)
    assert b"raw\xff\xfe" in want and "caf\u00e9.txt".encode() in want and want[b"empty"][0] == "d", want
    st, ctype, data = get(cv, "/v1/sandboxes/%s/export?format=tar&path=/w" % sid)
    assert st == 200 and ctype == "application/x-tar", (st, ctype)
    assert tree_of_tar(data) == want
    st, ctype, data = get(cv, "/v1/sandboxes/%s/export?format=zip&path=/w" % sid)
    assert st == 200 and ctype == "application/zip", (st, ctype)
    assert tree_of_zip(data) == want
    # unzip -t agrees, when it is installed
    if os.path.exists("/usr/bin/unzip"):
        with tempfile.NamedTemporaryFile(suffix=".zip") as f:
            f.write(data)
            f.flush()
            assert os.system("unzip -tq %s >/dev/null" % f.name) == 0


CHANGES = r"""
set -e
test -f /etc/motd && test -d /etc/skel && test ! -e /data
mkdir -p /data && printf 'x\n' > /data/x
printf 'conf\n' > /etc/app.conf
rm /etc/motd
rm -rf /etc/skel && mkdir /etc/skel && printf 'n\n' > /etc/skel/new
mkdir -p /usr/local/share/cove-t && printf 'u\n' > /usr/local/share/cove-t/u
"""
# what CHANGES makes: every name is one of these, and nothing else of the image
CHANGED = {"data": "d", "data/x": b"x\n", "etc/app.conf": b"conf\n", "etc/skel": "d", "etc/skel/new": b"n\n",
           "usr/local/share/cove-t": "d", "usr/local/share/cove-t/u": b"u\n"}
MANIFEST = ".cove-manifest.json"


def _get_changes(cv, url):
    c = cv.conn(120)
    try:
        c.request("GET", url)
        r = c.getresponse()
        return r.status, r.getheader("X-Cove-Entries"), r.getheader("X-Cove-Deleted"), r.read()
    finally:
        c.close()


def _check_manifest(text):
    m = json.loads(text)
    assert m == {"deleted": ["/etc/motd"], "opaque": ["/etc/skel"]}, m


def test_default_export_is_the_changes(cv):
    """No path: what the sandbox changed over its image, whatever the folder
    (the upper layers, whiteouts as the manifest's deletions)."""
    sid = cv.create(cwd="/srv")
    cv.sh(sid, CHANGES)
    st, entries, deleted, data = _get_changes(cv, "/v1/sandboxes/%s/export" % sid)
    assert st == 200 and (entries, deleted) == (str(len(CHANGED)), "1"), (st, entries, deleted)
    with tarfile.open(fileobj=io.BytesIO(data)) as t:
        names = t.getnames()
        assert sorted(names) == sorted(list(CHANGED) + [MANIFEST]), names
        assert names[-1] == MANIFEST
        for n, want in CHANGED.items():
            m = t.getmember(n)
            assert (m.isdir() and want == "d") or t.extractfile(m).read() == want, n
        _check_manifest(t.extractfile(MANIFEST).read())
    st, _, _, data = _get_changes(cv, "/v1/sandboxes/%s/export?format=zip" % sid)
    z = zipfile.ZipFile(io.BytesIO(data))
    assert st == 200 and sorted(n.rstrip("/") for n in z.namelist()) == sorted(list(CHANGED) + [MANIFEST])
    assert z.read("data/x") == b"x\n" and z.read("etc/app.conf") == b"conf\n"
    _check_manifest(z.read(MANIFEST))
    # the portable snapshot: the same files; version 1 has no deletions
    st, entries, deleted, data = _get_changes(cv, "/v1/sandboxes/%s/snapshot.json" % sid)
    doc = json.loads(data)
    by = {f["path"]: f for f in doc["files"]}
    assert st == 200 and doc["version"] == 1 and sorted(by) == sorted(CHANGED) and deleted == "1", (st, sorted(by))
    assert by["data/x"]["content"] == "x\n" and by["etc/skel"]["type"] == "dir" and doc["base"] == "/"
    # which an import without a path makes where it was (a folder's goes to the workspace)
    other = cv.create()
    st, r = cv.api("POST", "/v1/sandboxes/%s/snapshot.json" % other, doc, timeout=120)
    assert st == 200 and r["entries"] == len(CHANGED), (st, r)
    r = cv.sh(other, "cat /data/x /etc/app.conf /etc/skel/new /usr/local/share/cove-t/u")
    assert r["stdout"] == "x\nconf\nn\nu\n", r
    st, j = cv.api("POST", "/v1/sandboxes/%s/snapshot.json" % other, dict(doc, base="/etc"))
    assert st == 400 and "'base'" in j["error"]["message"], (st, j)
    # a path still takes that folder, as before
    cv.sh(sid, "echo s > /srv/only-here")
    st, entries, _, data = _get_changes(cv, "/v1/sandboxes/%s/export?path=/srv" % sid)
    assert st == 200 and entries is None and tarfile.open(fileobj=io.BytesIO(data)).getnames() == ["only-here"]


def test_unchanged_sandbox_exports_nothing(cv):
    """A fresh sandbox changed nothing (cove's own /etc/hostname and hosts
    are not its work): the export holds only the manifest, and the CLI says
    it is empty."""
    sid = cv.create()
    st, entries, deleted, data = _get_changes(cv, "/v1/sandboxes/%s/export" % sid)
    assert st == 200 and (entries, deleted) == ("0", "0"), (entries, deleted)
    assert tarfile.open(fileobj=io.BytesIO(data)).getnames() == [MANIFEST]
    d = tempfile.mkdtemp(prefix="cove-empty-")
    try:
        r = cv.cli("export", sid, "-o", d + "/e.zip")
        assert r.returncode == 0 and b"empty" in r.stderr, r
        r = cv.cli("snapshot", "--portable", sid)
        assert r.returncode == 0 and json.loads(r.stdout)["files"] == [] and b"empty" in r.stderr, r
        cv.sh(sid, "rm /etc/motd")
        r = cv.cli("export", sid, "-o", d + "/e.tar")
        assert r.returncode == 0 and b"empty" not in r.stderr, r
        r = cv.cli("snapshot", "--portable", sid)
        assert r.returncode == 0 and b"1 deletion(s) left out" in r.stderr, r
    finally:
        shutil.rmtree(d)


def test_external_sandbox_exports_its_workspace(cv):
    """The host backend has no image under it: no path is its workspace."""
    st, j = cv.api("POST", "/v1/sandboxes", {"isolation": "external"})
    assert st in (200, 201), j
    sid = j["id"]
    try:
        cv.sh(sid, "echo w > ./in-workspace")
        st, entries, _, data = _get_changes(cv, "/v1/sandboxes/%s/export" % sid)
        assert st == 200 and entries is None, (st, entries)
        assert "in-workspace" in tarfile.open(fileobj=io.BytesIO(data)).getnames()
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_root_export_skips_proc_sys_dev(cv):
    sid = cv.create()
    cv.exec(sid, ["sh", "-c", "echo s > /dev/shm/secret"])
    c = cv.conn(300)
    c.request("GET", "/v1/sandboxes/%s/export?format=tar&path=/" % sid)
    r = c.getresponse()
    assert r.status == 200
    # The walk is depth first: what follows a directory's entry is what it
    # holds, if anything. Read until each of the three was followed.
    seen, last = {}, None
    with tarfile.open(fileobj=r, mode="r|") as t:
        for m in t:
            if last in ("proc", "sys", "dev"):
                seen[last] = m.name
            last = m.name
            if len(seen) == 3:
                break
    c.close()
    assert len(seen) == 3 and not any(n.startswith(k + "/") for k, n in seen.items()), seen


def test_errors(cv):
    sid = _sandbox(cv)
    st, j = cv.api("GET", "/v1/sandboxes/sb_aaaaaaaaaaaa/export?format=zip")
    assert st == 404 and j["error"]["code"] == "not_found", (st, j)
    st, j = cv.api("GET", "/v1/sandboxes/sb_aaaaaaaaaaaa/snapshot.json")
    assert st == 404, (st, j)
    st, j = cv.api("GET", "/v1/sandboxes/%s/export?format=rar" % sid)
    assert st == 400 and "format" in j["error"]["message"], (st, j)
    st, j = cv.api("GET", "/v1/sandboxes/%s/export?format=tar&path=relative" % sid)
    assert st == 400, (st, j)
    st, j = cv.api("GET", "/v1/sandboxes/%s/export?format=tar&path=/nonexistent" % sid)
    assert st == 404, (st, j)
    st, j = cv.api("GET", "/v1/sandboxes/%s/export?bogus=1" % sid)
    assert st == 400, (st, j)


def test_portable_round_trip(cv):
    a = _sandbox(cv)
    st, doc = cv.api("GET", "/v1/sandboxes/%s/snapshot.json?path=/w" % a, timeout=120)
    assert st == 200 and doc["version"] == 1, st
    by = {(f.get("path") or base64.b64decode(f["path_base64"]).decode("latin-1")): f for f in doc["files"]}
    assert by["src/a.txt"]["encoding"] == "utf8" and by["src/a.txt"]["content"] == "hello\n"
    assert by["src/bin.dat"]["encoding"] == "base64" and by["link"] == dict(by["link"], type="symlink", target="src/a.txt")
    assert by["empty"]["type"] == "dir" and by["empty"]["mode"] == "0700"
    b = cv.create()
    st, r = cv.api("POST", "/v1/sandboxes/%s/snapshot.json?path=/w" % b, doc, timeout=120)
    assert st == 200 and r["entries"] == len(doc["files"]), (st, r)
    assert tree_of(cv, b) == tree_of(cv, a)
    mt = cv.exec(b, ["stat", "-c", "%Y", "/w/src/a.txt"])["stdout"].strip()
    assert int(mt) == by["src/a.txt"]["mtime"]


def _post(cv, sid, doc, path="/imp"):
    raw = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    return cv.api("POST", "/v1/sandboxes/%s/snapshot.json?path=%s" % (sid, path), raw=raw)


def test_hostile_portable_documents(cv):
    sid = cv.create()
    ok = {"path": "fine.txt", "content": "x"}
    cases = [
        (b"not json", 400),
        (json.dumps([1]).encode(), 400),
        ({"version": 2, "files": []}, 400),
        ({"files": []}, 400),
        ({"version": 1, "files": {}}, 400),
        ({"version": 1, "files": [ok, {"path": "../escape", "content": "x"}]}, 400),
        ({"version": 1, "files": [ok, {"path": "a/../../escape"}]}, 400),
        ({"version": 1, "files": [ok, {"path": "/"}]}, 400),
        ({"version": 1, "files": [ok, {"path": "fine.txt", "content": "y"}]}, 400),
        ({"version": 1, "files": [ok, {"path": "./fine.txt"}]}, 400),
        ({"version": 1, "files": [ok, {"path": "b", "encoding": "base64", "content": "!!!"}]}, 400),
        ({"version": 1, "files": [ok, {"path": "b", "mode": "0o777"}]}, 400),
        ({"version": 1, "files": [ok, {"path": "b", "mode": 0o10000}]}, 400),
        ({"version": 1, "files": [ok, {"path": "b", "mode": -1}]}, 400),
        ({"version": 1, "files": [ok, {"path": "b", "type": "fifo"}]}, 400),
        ({"version": 1, "files": [ok, {"path": "s", "type": "symlink"}]}, 400),
        ({"version": 1, "files": [ok, {"path": "s", "type": "symlink", "target": "/etc"}, {"path": "s/passwd"}]}, 400),
        ({"version": 1, "files": [ok, {"path": "fine.txt/inside"}]}, 400),
        ({"version": 1, "files": [ok, {"path": "nul\u0000byte"}]}, 400),
        ({"version": 1, "files": [ok, {"path": "d", "type": "dir", "content": "x"}]}, 400),
        ({"version": 1, "files": [ok, {"path": "x", "surprise": 1}]}, 400),
        ({"version": 1, "files": [ok, {"path": "big1", "encoding": "base64", "content": base64.b64encode(b"\0" * (40 << 20)).decode()},
                                  {"path": "big2", "encoding": "base64", "content": base64.b64encode(b"\0" * (30 << 20)).decode()}]}, 413),
    ]
    for doc, want in cases:
        st, j = _post(cv, sid, doc)
        assert st == want and j["error"]["message"], (doc if len(str(doc)) < 300 else "big", st, j)
        r = cv.exec(sid, ["sh", "-c", "test ! -e /imp && test ! -e /etc/passwd.new"])
        assert r["exit_code"] == 0, ("something was made", doc if len(str(doc)) < 300 else "big")
    st, j = _post(cv, sid, {"version": 1, "files": [ok]})
    assert st == 200 and j["entries"] == 1, (st, j)
    assert cv.exec(sid, ["cat", "/imp/fine.txt"])["stdout"] == "x"


def test_cli_export_and_portable(cv):
    sid = _sandbox(cv)
    with tempfile.TemporaryDirectory() as d:
        r = cv.cli("export", "-o", d + "/w.zip", "--path", "/w", sid)
        assert r.returncode == 0, r
        assert tree_of_zip(open(d + "/w.zip", "rb").read()) == tree_of(cv, sid)
        r = cv.cli("export", "--path", "/w/src", sid)  # stdout, a tar
        assert r.returncode == 0 and b"a.txt" in tarfile.open(fileobj=io.BytesIO(r.stdout)).getnames()[0].encode() + b"a.txt"
        assert sorted(tarfile.open(fileobj=io.BytesIO(r.stdout)).getnames()) == sorted(
            ["a.txt", "empty.txt", "bin.dat", "deep", "deep/er"])
        r = cv.cli("export", "-o", d + "/bad.zip", "--path", "/nonexistent", sid)
        assert r.returncode != 0 and not os.path.exists(d + "/bad.zip"), r
        r = cv.cli("export", "--format", "rar", sid)
        assert r.returncode != 0
        r = cv.cli("snapshot", "--portable", "--path", "/w", sid)
        assert r.returncode == 0 and json.loads(r.stdout)["version"] == 1, r.stderr
        open(d + "/s.json", "wb").write(r.stdout)
        r = cv.cli("restore", "--portable", "--path", "/w", d + "/s.json")
        assert r.returncode == 0, r
        new = r.stdout.decode().strip()
        assert covetest.ID_RE.match(new) and new != sid
        assert tree_of(cv, new) == tree_of(cv, sid)
        open(d + "/bad.json", "w").write('{"version": 1, "files": [{"path": "../x"}]}')
        before = cv.api("GET", "/v1/sandboxes")[1]
        r = cv.cli("restore", "--portable", d + "/bad.json")
        assert r.returncode != 0 and b".." in r.stderr, r
        assert cv.api("GET", "/v1/sandboxes")[1] == before  # the new sandbox went again


def _rss_kb(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])


def test_large_export_memory_is_bounded(cv):
    sid = cv.create()
    r = cv.exec(sid, ["sh", "-c", "mkdir /big && for i in 1 2 3 4; do head -c 50000000 /dev/urandom > /big/f$i; done"],
                timeout=120)
    assert r["exit_code"] == 0, r
    for fmt in ("tar", "zip"):
        base = _rss_kb(cv.pid())
        c = cv.conn(300)
        c.request("GET", "/v1/sandboxes/%s/export?format=%s&path=/big" % (sid, fmt))
        resp = c.getresponse()
        assert resp.status == 200
        total, peak, h = 0, 0, hashlib.sha256()
        while True:
            chunk = resp.read(1 << 20)
            if not chunk:
                break
            total += len(chunk)
            if total < (40 << 20):
                time.sleep(0.01)  # a slow reader for the first 40 MB
            peak = max(peak, _rss_kb(cv.pid()))
        c.close()
        assert total > 200_000_000, (fmt, total)
        assert peak - base < 32 * 1024, (fmt, "coved grew by %d kB" % (peak - base))


def test_workdir_resolved_at_create(cv):
    """The workspace folder: "workdir" (or "cwd") when given, else the
    user's home in the image's /etc/passwd; stored, shown by GET and cove
    info, and where commands start."""
    sid = cv.create()
    sb = cv.api("GET", "/v1/sandboxes/" + sid)[1]
    assert sb["workdir"] == "/root" and sb["cwd"] == "", sb
    r = cv.cli("info", sid)
    assert r.returncode == 0 and json.loads(r.stdout)["workdir"] == "/root", r
    sid = cv.create(workdir="/srv")
    sb = cv.api("GET", "/v1/sandboxes/" + sid)[1]
    assert sb["workdir"] == "/srv" and sb["cwd"] == "/srv", sb
    assert cv.exec(sid, ["pwd"])["stdout"] == "/srv\n"
    assert cv.api("GET", "/v1/sandboxes/" + cv.create(cwd="/tmp"))[1]["workdir"] == "/tmp"
    for bad in ({"workdir": "rel"}, {"workdir": "/a", "cwd": "/b"}, {"workdir": 3}):
        st, j = cv.api("POST", "/v1/sandboxes", bad)
        assert st == 400 and "workdir" in j["error"]["message"], (bad, st, j)
    st, j = cv.api("POST", "/v1/sandboxes", {"isolation": "external"})
    try:
        assert st == 201 and j["workdir"] == j["workspace"], j
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + j["id"])

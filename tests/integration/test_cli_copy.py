"""cove cp of large files, the tables and --json, and make install (issue
15): a 1 GiB file in and out byte for byte with the CLI's peak RSS under
32 MiB (its rusage, from wait4) and about curl's speed for the same PUT;
a progress bar on a terminal and nothing when piped; tables aligned with
human sizes and ages, --json the API's own objects; make install into a
DESTDIR with man pages, pkg-config and completion that work."""
import hashlib
import json
import os
import pty
import select
import shutil
import subprocess
import tempfile
import time

import covetest

GIB = 1 << 30
RSS_LIMIT_KIB = 32 * 1024


def _env(cv):
    return dict(os.environ, COVE_SOCKET=cv.socket, COVE_DATA=cv.data)


def _hwm_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _run_measured(cv, args, stdin=None):
    """Run cove; its exit status, stderr, peak RSS (KiB) and seconds. The
    peak is VmHWM, polled until it exits (it only grows): wait4's ru_maxrss
    would count the forking Python's RSS, which exec leaves in it."""
    t0 = time.monotonic()
    err = tempfile.TemporaryFile()
    p = subprocess.Popen([covetest.COVE] + args, env=_env(cv), stdin=stdin or subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=err)
    peak = 0
    while True:
        peak = max(peak, _hwm_kib(p.pid))
        pid, status = os.waitpid(p.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.005)
    p.returncode = os.waitstatus_to_exitcode(status)
    err.seek(0)
    return p.returncode, err.read(), peak, time.monotonic() - t0


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _curl_put(cv, sid, src, path):
    t0 = time.monotonic()
    r = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--unix-socket", cv.socket, "-T", src,
                        "http://cove/v1/sandboxes/%s/files?path=%s" % (sid, path)], capture_output=True, timeout=600)
    assert r.returncode == 0 and r.stdout in (b"200", b"201"), r
    return time.monotonic() - t0


def test_cp_a_gib_both_ways_in_bounded_memory(cv):
    sid = cv.create()
    work = tempfile.mkdtemp(prefix="cove-big-", dir="/var/tmp")
    try:
        src, back = os.path.join(work, "big.bin"), os.path.join(work, "back.bin")
        subprocess.run("head -c %d /dev/urandom > %s" % (GIB, src), shell=True, check=True)
        want = _sha256(src)
        # in, as curl -T does the same PUT /files, alternately: the best of each
        cove_t, curl_t = [], []
        for _ in range(2):
            rc, err, rss, secs = _run_measured(cv, ["cp", src, sid + ":/root/big.bin"])
            assert rc == 0 and err == b"", (rc, err)  # piped: no progress bar
            assert rss < RSS_LIMIT_KIB, "cove cp in: peak RSS %d KiB" % rss
            cove_t.append(secs)
            curl_t.append(_curl_put(cv, sid, src, "/root/curl.bin"))
            cv.sh(sid, "rm -f /root/curl.bin")
        print("# cp in 1 GiB: cove %.2fs (peak RSS %d KiB), curl -T %.2fs (best of 2)"
              % (min(cove_t), rss, min(curl_t)))
        # (how the times compare is bench/cpbench.py's: no timing asserts in tests)
        r = cv.sh(sid, "sha256sum /root/big.bin")
        assert r["stdout"].split()[0] == want, r
        # out
        rc, err, rss, secs = _run_measured(cv, ["cp", sid + ":/root/big.bin", back])
        assert rc == 0 and err == b"", (rc, err)
        assert rss < RSS_LIMIT_KIB, "cove cp out: peak RSS %d KiB" % rss
        print("# cp out 1 GiB: cove %.2fs, peak RSS %d KiB" % (secs, rss))
        assert _sha256(back) == want
        # and through pipes, of unknown length: stdin in (chunked), stdout out
        with open(src, "rb") as f:
            rc, err, rss, _ = _run_measured(cv, ["cp", "-", sid + ":/root/piped.bin"], stdin=f)
        assert rc == 0 and rss < RSS_LIMIT_KIB, (rc, err, rss)
        r = cv.sh(sid, "sha256sum /root/piped.bin && rm /root/piped.bin /root/big.bin")
        assert r["stdout"].split()[0] == want, r
    finally:
        shutil.rmtree(work)
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def _on_a_terminal(cv, args, feed):
    """Run cove with stderr a terminal and stdin a pipe fed by feed(w);
    what the terminal got."""
    master, slave = pty.openpty()
    r, w = os.pipe()
    p = subprocess.Popen([covetest.COVE] + args, env=_env(cv), stdin=r, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    os.close(r)
    feed(w)
    os.close(w)
    got = b""
    while True:
        ready, _, _ = select.select([master], [], [], 30)
        try:
            chunk = os.read(master, 65536) if ready else b""
        except OSError:  # EIO: the last writer closed it
            chunk = b""
        if not chunk:
            break
        got += chunk
    assert p.wait(timeout=60) == 0
    os.close(master)
    return got


def test_progress_only_on_a_terminal_and_only_when_slow(cv):
    sid = cv.create()

    def slow(w):  # 2.5 s of 64 KiB pieces
        for _ in range(25):
            os.write(w, b"x" * 65536)
            time.sleep(0.1)

    got = _on_a_terminal(cv, ["cp", "-", sid + ":/root/slow.bin"], slow)
    assert b"\r" in got and b"stdin" in got and b"/s" in got and got.endswith(b"\n"), got
    assert b"1.5M" in got, got  # the last state: all 25 pieces
    # a quick copy draws nothing, even on a terminal
    got = _on_a_terminal(cv, ["cp", "-", sid + ":/root/quick.bin"], lambda w: os.write(w, b"quick"))
    assert got == b"", got
    # piped: nothing, however slow
    p = subprocess.Popen([covetest.COVE, "cp", "-", sid + ":/root/slow2.bin"], env=_env(cv),
                         stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    for _ in range(15):
        p.stdin.write(b"y" * 65536)
        p.stdin.flush()
        time.sleep(0.1)
    p.stdin.close()
    assert p.wait(timeout=60) == 0 and p.stderr.read() == b""
    r = cv.sh(sid, "wc -c < /root/slow.bin; wc -c < /root/slow2.bin")
    assert r["stdout"].split() == [str(25 * 65536), str(15 * 65536)], r
    cv.api("DELETE", "/v1/sandboxes/" + sid)


def _column_starts(header, names):
    return [header.index(n) for n in names]


def test_tables_are_aligned_with_human_sizes_and_json_is_the_apis(cv):
    a = cv.create(memory=512 << 20, name="first")
    b = cv.create(memory=3 << 29, name="a-much-longer-name")
    r = cv.cli("ls")
    lines = r.stdout.decode().splitlines()
    assert r.returncode == 0 and lines[0].split() == ["ID", "NAME", "STATE", "IMAGE", "MEMORY", "CPUS", "CREATED"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert rows[a].split()[1:6] == ["first", "running", "host", "512M", "1"], rows[a]
    assert rows[b].split()[4] == "1.5G" and (rows[b].endswith("ago") or rows[b].endswith("just now")), rows[b]
    # left-aligned columns start where their header does; MEMORY ends where it does
    starts = _column_starts(lines[0], ["NAME", "STATE", "IMAGE"])
    end = lines[0].index("MEMORY") + len("MEMORY")
    for line in lines[1:]:
        assert [line[s - 1] for s in starts] == [" "] * 3 and line[starts[0]] != " ", (lines[0], line)
        assert line[end - 1] != " " and line[end] == " ", (lines[0], line)
    # --json: the API's own objects, as GET gives them
    listed = {s["id"]: s for s in json.loads(cv.cli("ls", "--json").stdout)}
    api = {s["id"]: s for s in cv.api("GET", "/v1/sandboxes")[1]["sandboxes"]}
    assert listed[a] == api[a] and listed[b] == api[b]
    sn = cv.cli("snapshot", "--name", "s", a).stdout.decode().strip()
    r = cv.cli("snapshots")
    assert r.stdout.decode().splitlines()[0].split() == ["ID", "NAME", "SANDBOX", "CREATED", "DURABLE"], r
    assert any(l.split()[:3] == [sn, "s", a] for l in r.stdout.decode().splitlines()), r
    got = {s["id"]: s for s in json.loads(cv.cli("--json", "snapshots").stdout)}
    assert got[sn] == cv.api("GET", "/v1/snapshots/" + sn)[1]
    assert cv.cli("checkpoint", "--label", "one", a).stdout == b"1\n"
    r = cv.cli("history", a)
    head, row = r.stdout.decode().splitlines()[:2]
    assert head.split()[:4] == ["SEQ", "PARENT", "SNAPSHOT", "TAKEN"] and row.split()[0] == "1", r
    assert row.rstrip().endswith("one") and ("ago" in row or "just now" in row), row
    st, hist = cv.api("GET", "/v1/sandboxes/%s/checkpoints" % a)
    assert json.loads(cv.cli("history", a, "--json").stdout) == hist
    pid = cv.cli("exec", "-d", "--tag", "sleeper", a, "--", "sleep", "100").stdout.decode().strip()
    r = cv.cli("ps", a)
    lines = r.stdout.decode().splitlines()
    assert lines[0].split() == ["PID", "TAG", "STATE", "EXIT", "TTY", "STARTED", "CMD"], r
    row = [l for l in lines if "sleeper" in l][0]
    assert row.split()[0] == pid and row.endswith("sleep 100"), row
    assert row.index("sleeper") == lines[0].index("TAG"), (lines[0], row)
    listed = json.loads(cv.cli("ps", "--json", a).stdout)
    assert listed == cv.api("GET", "/v1/sandboxes/%s/processes" % a)[1]["processes"]
    for sid in (a, b):
        cv.api("DELETE", "/v1/sandboxes/" + sid)
    cv.api("DELETE", "/v1/snapshots/" + sn)


def _complete(dest, env, *words):
    """What the installed completion offers for the last of words."""
    script = ('source %s/usr/share/bash-completion/completions/cove; COMP_WORDS=(%s); COMP_CWORD=%d; _cove; '
              'printf "%%s\\n" "${COMPREPLY[@]}"' % (dest, " ".join("'%s'" % w for w in words), len(words) - 1))
    r = subprocess.run(["bash", "-c", script], capture_output=True, env=env, timeout=60)
    assert r.returncode == 0, r
    return r.stdout.decode().split()


def test_make_install_into_a_destdir(cv):
    dest = tempfile.mkdtemp(prefix="cove-install-")
    try:
        r = subprocess.run(["make", "-s", "install", "DESTDIR=" + dest, "PREFIX=/usr", "BUILD=" + covetest.BUILD],
                           cwd=covetest.ROOT, capture_output=True, timeout=600)
        assert r.returncode == 0, r
        usr = os.path.join(dest, "usr")
        for f in ("bin/cove", "bin/coved", "bin/cove-init", "lib/libcove.a", "include/cove.h",
                  "lib/pkgconfig/cove.pc", "share/man/man1/cove.1", "share/man/man8/coved.8",
                  "share/bash-completion/completions/cove"):
            assert os.path.isfile(os.path.join(usr, f)), f
        assert os.access(os.path.join(usr, "bin/cove"), os.X_OK)
        # the manual is the help text: the same table, so they cannot drift
        with open(os.path.join(usr, "share/man/man1/cove.1"), "rb") as f:
            assert f.read() == cv.cli("help", "--man").stdout
        r = subprocess.run(["man", "-l", os.path.join(usr, "share/man/man1/cove.1")], capture_output=True,
                           env=dict(os.environ, MANPAGER="cat", MANWIDTH="100"), timeout=60)
        assert r.returncode == 0 and b"cove exec" in r.stdout and b"--user nobody" in r.stdout, r
        coved_help = subprocess.run([covetest.COVED, "--help"], capture_output=True).stdout.decode()
        flags = {w for w in coved_help.split() if w.startswith("--")}
        r = subprocess.run(["man", "-l", os.path.join(usr, "share/man/man8/coved.8")], capture_output=True,
                           env=dict(os.environ, MANPAGER="cat", MANWIDTH="200"), timeout=60)
        assert r.returncode == 0 and all(f.strip("[],") in r.stdout.decode() for f in flags), (flags, r)
        # pkg-config finds libcove, and a program builds with it
        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(usr, "lib/pkgconfig"), PKG_CONFIG_SYSROOT_DIR=dest)
        pc = subprocess.run(["pkg-config", "--cflags", "--libs", "cove"], capture_output=True, env=env)
        assert pc.returncode == 0 and b"-lcove" in pc.stdout, pc
        prog = os.path.join(dest, "example")
        # A libcove built with the sanitizers (make asan) needs their runtimes.
        san = ["-fsanitize=address,undefined"] if os.environ.get("COVE_SANITIZER_LOG") else []
        r = subprocess.run(["cc", "-o", prog, os.path.join(covetest.ROOT, "docs/example.c")] + san + pc.stdout.split(),
                           capture_output=True, timeout=120)
        assert r.returncode == 0 and os.access(prog, os.X_OK), r
        # the completion: commands, options, and IDs from cove ls / snapshots
        sid = cv.create()
        sn = cv.cli("snapshot", sid).stdout.decode().strip()
        cenv = dict(_env(cv), PATH=os.path.join(usr, "bin") + ":" + os.environ["PATH"])
        assert "exec" in _complete(dest, cenv, "cove", "ex")
        assert _complete(dest, cenv, "cove", "fork", "--c") == ["--count"]
        assert sid in _complete(dest, cenv, "cove", "exec", "--user", "nobody", "")
        assert sn in _complete(dest, cenv, "cove", "restore", "")
        assert sn in _complete(dest, cenv, "cove", "snapshot", "rm", "")
        assert sid + ":" in _complete(dest, cenv, "cove", "cp", "")
        assert "ls" in _complete(dest, cenv, "cove", "files", "")
        assert _complete(dest, cenv, "cove", "exec", sid, "--", "") == []
        cv.api("DELETE", "/v1/sandboxes/" + sid)
        cv.api("DELETE", "/v1/snapshots/" + sn)
    finally:
        shutil.rmtree(dest)


def _get_without_usage(cv, sid):
    """GET of one sandbox, less the live usage it adds (figures that move
    between two reads, and that the other answers leave out)."""
    st, got = cv.api("GET", "/v1/sandboxes/" + sid)
    assert st == 200 and "usage" in got, (st, got)
    del got["usage"]
    return got


def test_json_everywhere_is_the_apis(cv):
    sid = cv.create()
    made = []
    try:
        c = json.loads(cv.cli("--json", "checkpoint", "--label", "x", sid).stdout)
        st, hist = cv.api("GET", "/v1/sandboxes/%s/checkpoints" % sid)
        assert c == hist["checkpoints"][0] and c["seq"] == 1 and c["label"] == "x", (c, hist)
        sb = json.loads(cv.cli("rollback", sid, "1", "--json").stdout)
        made.append(sb["id"])
        assert sb == _get_without_usage(cv, sb["id"]), sb
        copies = json.loads(cv.cli("branch", "--json", sid, "1", "-n", "2").stdout)
        made += [s["id"] for s in copies]
        assert len(copies) == 2 and all(s["state"] == "running" for s in copies), copies
        forks = json.loads(cv.cli("fork", sid, "--json").stdout)
        made += [s["id"] for s in forks]
        assert len(forks) == 1 and cv.api("GET", "/v1/sandboxes/" + forks[0]["id"])[0] == 200, forks
        new = json.loads(cv.cli("create", "--json", "--name", "j").stdout)
        made.append(new["id"])
        assert new["name"] == "j" and new == _get_without_usage(cv, new["id"]), new
        t = json.loads(cv.cli("timeout", new["id"], "600", "--json").stdout)
        assert t["id"] == new["id"] and t["expires_at"] > new["created_at"], t
        sn = json.loads(cv.cli("snapshot", sid, "--json").stdout)
        assert sn == cv.api("GET", "/v1/snapshots/" + sn["id"])[1], sn
        cv.api("DELETE", "/v1/snapshots/" + sn["id"])
        gone = json.loads(cv.cli("history", "rm", made[0], "--json").stdout)
        assert isinstance(gone, dict) and "checkpoints" in gone, gone
        # the text forms stay one ID or number a line
        assert cv.cli("checkpoint", sid).stdout == b"2\n"
        made.append(cv.cli("rollback", sid, "2").stdout.decode().strip())
        assert covetest.ID_RE.match(made[-1]), made
    finally:
        for m in made + [sid]:
            cv.api("DELETE", "/v1/sandboxes/" + m)

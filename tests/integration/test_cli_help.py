"""The CLI's help and examples (issue 15): every command's own usage from
`cove COMMAND --help` and `cove help COMMAND`, unknown options named with
the usage, options anywhere before "--" while the sandbox's command keeps
its own flags, and every example, those of the --help texts and those of
README.md, extracted and run: an example that stops working fails here.

The README's blocks run as written with these substitutions only, for
what a test may not touch: the test daemon's socket and data root for
/run/cove/cove.sock and /var/lib/cove, a free port for 7070 (and the
block's `coved` line is started by the test with that line's own flags),
the build directory for build/ and make's BUILD, a temporary staging root
for /tmp/cove-root, and `make -n check` for `make check` (the suite that
runs this test)."""
import os
import re
import shutil
import socket
import subprocess
import tempfile
import zipfile

import covetest

ROOT = covetest.ROOT
# What a user types into `cove shell` in an example. (Its EOF alone, before
# the login shell reads its terminal, can be lost in the terminal's switch
# to raw mode: the shell would wait.)
TYPED = b"exit\n"


def _env(cv, **kw):
    env = dict(os.environ, COVE_SOCKET=cv.socket, COVE_DATA=cv.data,
               PATH=covetest.BUILD + ":" + os.environ.get("PATH", "/usr/bin:/bin"))
    env.update(kw)
    return env


def _commands(cv):
    """Every command's name, from the manual that the table makes."""
    man = cv.cli("help", "--man").stdout.decode()
    return [line[4:].replace("\\-", "-") for line in man.splitlines() if line.startswith(".SS ")]


def _examples(cv, name):
    text = cv.cli("help", *name.split()).stdout.decode()
    block = text.split("\nexample:\n", 1)[1].split("\n\n", 1)[0]
    return "\n".join(line[2:] for line in block.splitlines())


def test_every_command_prints_its_own_help(cv):
    names = _commands(cv)
    assert len(names) >= 30 and "exec" in names and "snapshot rm" in names and "files ls" in names, names
    for name in names:
        a = cv.cli(*name.split(), "--help")
        b = cv.cli("help", *name.split())
        c = cv.cli(*name.split(), "-h")
        assert a.returncode == 0 and b.returncode == 0 and c.returncode == 0, (name, a, b)
        assert a.stdout == b.stdout == c.stdout, name
        out = a.stdout.decode()
        assert out.startswith("usage: cove %s " % name) and "cove " + name in _examples(cv, name), out
        # an unknown option names itself and the command's usage
        r = cv.cli(*name.split(), "--no-such-flag")
        err = r.stderr.decode()
        assert r.returncode == 2 and "'--no-such-flag'" in err and "usage: cove %s " % name in err, (name, r)
    r = cv.cli("help")
    assert r.returncode == 0 and all(n.split()[0] in r.stdout.decode() for n in names), r
    assert cv.cli("--help").stdout == r.stdout
    for args, msg in ((["help", "nosuch"], "unknown command 'nosuch'"), (["nosuch"], "unknown command"),
                      (["exec", "--user"], "needs a value"), (["ls", "--json=1"], "takes no value"),
                      (["fork", "-x", "sb_aaaaaaaaaaaa"], "unknown option '-x'")):
        r = cv.cli(*args)
        assert r.returncode == 2 and msg in r.stderr.decode(), (args, r)
    # the usage of a command that went wrong, on a bad operand too
    r = cv.cli("fork", "sb_aaaaaaaaaaaa", "extra")
    assert r.returncode == 2 and "usage: cove fork [-n N] [--memory] ID" in r.stderr.decode(), r


def test_help_examples_run(cv):
    names = _commands(cv)
    ran = 0
    for name in names:
        example = _examples(cv, name)
        assert example.strip(), name
        sid = cv.create()
        work = tempfile.mkdtemp(prefix="cove-example-")
        try:
            r = subprocess.run(["sh", "-ec", example], cwd=work, env=_env(cv, ID=sid), capture_output=True,
                               input=TYPED, timeout=120)
            assert r.returncode == 0, (name, example, r)
            ran += 1
        finally:
            shutil.rmtree(work)
            cv.api("DELETE", "/v1/sandboxes/" + sid)
    assert ran == len(names)


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _readme_blocks():
    with open(os.path.join(ROOT, "README.md")) as f:
        return re.findall(r"^```sh\n(.*?)^```", f.read(), re.S | re.M)


def _substitute(block, cv, stage, build):
    block = block.replace("/run/cove/cove.sock", cv.socket).replace("/var/lib/cove", cv.data)
    block = block.replace("/tmp/cove-root", stage).replace("build/cove", build + "/cove")
    block = re.sub(r"\bmake check\b", "make -n check BUILD=" + build, block)
    block = re.sub(r"\bmake install\b", "make install BUILD=" + build, block)
    return re.sub(r"\bmake(?= &&| *$)", "make BUILD=" + build, block, flags=re.M)


def _run_block(cv, block, build):
    stage = tempfile.mkdtemp(prefix="cove-stage-")
    work = tempfile.mkdtemp(prefix="cove-readme-")
    tcp = None
    try:
        lines = block.splitlines()
        if lines[0].startswith("coved "):
            # the TCP block: its coved, with the line's own flags, on a test port
            port = _free_port()
            flags = lines[0].split("#")[0].replace("&", "").replace("7070", str(port)).split()[1:]
            tcp = covetest.Coved(args=flags).start()
            cv = tcp
            block = "\n".join(lines[1:]).replace("7070", str(port))
        script = _substitute(block, cv, stage, build)
        # blocks about the source tree (make, the SDKs' folders) run in it
        cwd = ROOT if re.search(r"\bmake\b|\bsdk/", block) else work
        r = subprocess.run(["sh", "-ec", script], cwd=cwd, env=_env(cv), capture_output=True, input=TYPED,
                           timeout=600)
        assert r.returncode == 0, (script, r.stdout[-3000:], r.stderr[-3000:])
        return r
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
        if tcp:
            tcp.cleanup()


def test_readme_examples_run(cv):
    blocks = _readme_blocks()
    assert len(blocks) >= 6, blocks
    outputs = [_run_block(cv, b, covetest.BUILD).stdout.decode() for b in blocks]
    # a few of what the examples say they print
    using = outputs[[i for i, b in enumerate(blocks) if "ID=$(cove create --memory 1G)" in b][0]]
    assert "hi from " in using and "42\n65534\n" in using, using
    sessions = outputs[[i for i, b in enumerate(blocks) if "/sessions" in b][-1]]
    assert "/tmp\\nclang" in sessions, sessions


def test_options_anywhere_the_command_keeps_its_own(cv):
    sid = cv.create()
    r = cv.cli("exec", sid, "--user", "nobody", "--", "id", "-u")
    assert r.returncode == 0 and r.stdout == b"65534\n", r
    r = cv.cli("exec", "--user", "nobody", sid, "id", "-u")
    assert r.returncode == 0 and r.stdout == b"65534\n", r
    # after "--", or once the command began, nothing is cove's
    r = cv.cli("exec", sid, "--", "sh", "-c", 'printf "%s," "$@"', "x", "--json", "-n", "3", "--help", "--", "-u")
    assert r.returncode == 0 and r.stdout == b"--json,-n,3,--help,--,-u,", r
    r = cv.cli("exec", sid, "sh", "-c", 'printf "%s," "$@"', "x", "--user", "nobody")
    assert r.returncode == 0 and r.stdout == b"--user,nobody,", r
    r = cv.cli("run", "--", "echo", "--memory", "1G", "--help")
    assert r.returncode == 0 and r.stdout == b"--memory 1G --help\n", r
    r = cv.cli("lock", sid, "L", "--wait", "5", "--", "echo", "--lease", "x")
    assert r.returncode == 0 and r.stdout == b"--lease x\n", r
    # cove fork ID -n 3: three running copies
    r = cv.cli("fork", sid, "-n", "3")
    copies = r.stdout.decode().split()
    assert r.returncode == 0 and len(copies) == 3 and all(covetest.ID_RE.match(c) for c in copies), r
    for c in copies:
        assert cv.api("GET", "/v1/sandboxes/" + c)[1]["state"] == "running"
        cv.api("DELETE", "/v1/sandboxes/" + c)
    # cove export ID -o f.zip: a zip of what the sandbox changed
    cv.sh(sid, "echo kept > /root/w.txt")
    work = tempfile.mkdtemp(prefix="cove-order-")
    try:
        out = os.path.join(work, "f.zip")
        r = cv.cli("export", sid, "-o", out)
        assert r.returncode == 0 and zipfile.is_zipfile(out), r
        with zipfile.ZipFile(out) as z:
            assert z.read("root/w.txt") == b"kept\n", z.namelist()
        r = cv.cli("export", "--format=tar", sid, "--path", "/etc", "-o", os.path.join(work, "e"))
        assert r.returncode == 0 and open(os.path.join(work, "e"), "rb").read(262)[257:262] == b"ustar", r
    finally:
        shutil.rmtree(work)
    # the global options anywhere too
    env = dict(os.environ)
    env.pop("COVE_SOCKET", None)
    for args in (["--socket", cv.socket, "ls"], ["ls", "--socket", cv.socket], ["ls", "--socket=" + cv.socket]):
        r = subprocess.run([covetest.COVE] + args, capture_output=True, env=dict(env, COVE_NO_START="1"))
        assert r.returncode == 0 and sid.encode() in r.stdout, (args, r)
    # bad input changes nothing: a bad option creates no sandbox
    before = len(cv.api("GET", "/v1/sandboxes")[1]["sandboxes"])
    for args in (["create", "--memory", "lots"], ["create", "--bogus"], ["fork", sid, "-n", "x"]):
        assert cv.cli(*args).returncode == 2, args
    assert len(cv.api("GET", "/v1/sandboxes")[1]["sandboxes"]) == before
    cv.api("DELETE", "/v1/sandboxes/" + sid)

"""cove's Python SDK against a real coved: sandboxes, commands, sessions,
processes, errors."""
import threading
import time

import pytest

from cove import BadRequest, Capabilities, Conflict, CoveError, NotFound, Sandbox


def test_create_connect_list_destroy(coved):
    sb = Sandbox.create(name="sdk", memory="256M", cpus=0.5, pids=100, env={"K": "v"}, cwd="/tmp", timeout=600)
    try:
        assert sb.info["memory"] == 256 << 20 and sb.info["cpus"] == 0.5 and sb.info["pids"] == 100
        assert sb.state == "running" and sb.refresh()["name"] == "sdk"
        assert sb.info["expires_at"] is not None
        again = Sandbox.connect(sb.id)
        assert again.id == sb.id and again.run("echo $K; pwd").stdout == "v\n/tmp\n"
        assert sb.id in [s.id for s in Sandbox.list()]
        before = sb.info["expires_at"]
        sb.set_timeout(1200)
        assert sb.info["expires_at"] > before
    finally:
        sb.destroy()
    with pytest.raises(NotFound) as e:
        Sandbox.connect(sb.id)
    assert e.value.code == "not_found" and e.value.status == 404 and sb.id in e.value.message
    assert sb.id not in [s.id for s in Sandbox.list()]


def test_unknown_sandbox_is_typed_error(coved):
    with pytest.raises(NotFound) as e:
        Sandbox.connect("sb_aaaaaaaaaaaa")
    assert e.value.code == "not_found"
    gone = Sandbox.create()
    gone.destroy()
    for call in (lambda: gone.files.read("/etc/hostname"), lambda: gone.run("true"), gone.destroy,
                 lambda: gone.files.stat("/x")):
        with pytest.raises(NotFound):
            call()


def test_bad_request_is_typed_and_makes_nothing(coved):
    n = len(Sandbox.list())
    with pytest.raises(BadRequest) as e:
        Sandbox.create(image="no-such-image")
    assert e.value.code == "invalid_argument" and e.value.status == 400 and isinstance(e.value, CoveError)
    assert len(Sandbox.list()) == n


def test_run(sb):
    r = sb.run("echo out; echo err >&2; exit 3")
    assert (r.exit_code, r.stdout, r.stderr, r.ok) == (3, "out\n", "err\n", False)
    assert sb.run(["printf", "%s|", "a b", "c"]).stdout == "a b|c|"
    assert sb.run("echo $A$B", env={"A": "1", "B": "2"}).stdout == "12\n"
    sb.files.write("sub/f", "x")
    assert sb.run("pwd", cwd="sub").stdout == sb.workspace + "/sub\n"  # relative: under the workspace
    assert sb.run("pwd", cwd="/tmp").stdout == "/tmp\n"
    assert sb.run("id -u", user="nobody").stdout == "65534\n"
    assert sb.run("cat", stdin="fed").stdout == "fed"
    assert sb.run("od -An -tx1", stdin=b"\x00\xff").stdout.split() == ["00", "ff"]
    t = sb.run("sleep 10", timeout=0.3)
    assert t.timed_out and t.exit_code is None and t.signal == "KILL"


def test_streaming_callbacks_get_output_while_it_runs(sb):
    """The command prints 'first', then waits until the test has seen that
    chunk (the test then makes /tmp/go): it can only finish if the
    callback was called while it ran."""
    seen, first = [], threading.Event()

    def on_stdout(chunk):
        seen.append((time.monotonic(), chunk))
        if "first" in chunk:
            first.set()

    def release():
        if first.wait(20):
            Sandbox.connect(sb.id).files.write("/tmp/go", "")  # another thread: its own connection

    errs = []
    th = threading.Thread(target=release)
    th.start()
    r = sb.run("echo first; echo warn >&2; while [ ! -e /tmp/go ]; do sleep 0.02; done; echo second",
               timeout=30, on_stdout=on_stdout, on_stderr=errs.append)
    th.join()
    assert r.exit_code == 0 and not r.timed_out
    assert r.stdout == "first\nsecond\n" and "".join(c for _, c in seen) == r.stdout
    assert "".join(errs) == "warn\n" == r.stderr


def test_session_keeps_cwd_and_env(sb):
    with sb.session(env={"S": "1"}) as s:
        assert s.run("cd /tmp && export X=42 && Y=7").exit_code == 0
        r = s.run("pwd; echo $X $Y $S")
        assert r.stdout == "/tmp\n42 7 1\n"
        got = []
        assert s.run("echo streamed; (exit 4)", on_stdout=got.append).exit_code == 4 and got == ["streamed\n"]
        assert sb.run("pwd").stdout != "/tmp\n"  # a plain run is a new shell
        sid = s.id
    with pytest.raises(NotFound):
        sb._transport.call("DELETE", "/v1/sandboxes/%s/sessions/%s" % (sb.id, sid))


def test_spawn_wait_stdin_output_kill(sb):
    p = sb.spawn("read a; echo got $a; echo e >&2; exit 5", stdin=True, tag="reader")
    assert p.pid > 0 and p.tag == "reader"
    assert p.info()["state"] != "exited"
    with pytest.raises(TimeoutError):
        p.wait(timeout=0.2)
    p.send_stdin("hello\n")
    assert p.wait(timeout=20) == 5
    out = p.output()
    assert (out.exit_code, out.stdout, out.stderr) == (5, "got hello\n", "e\n")
    k = sb.spawn(["sleep", "100"])
    assert k.pid in [x["pid"] for x in sb.processes()]
    k.kill("TERM")
    assert k.wait(timeout=20) is None and k.info()["signal"] == "TERM"
    c = sb.spawn("cat", stdin=True)
    c.send_stdin(b"\x01\x02")
    c.close_stdin()
    assert c.wait(20) == 0 and c.output().stdout == "\x01\x02"


def test_capabilities(sb, coved):
    caps = sb.capabilities
    assert isinstance(caps, Capabilities)
    raw = coved.api("GET", "/v1/capabilities")[1]["backends"]["isolated"]["capabilities"]
    assert (caps.ports, caps.native_snapshot, caps.resume) == (raw["ports"], raw["nativeSnapshot"], raw["resume"])


def test_ephemeral_gone_after_block_even_when_it_raised(coved):
    with Sandbox.create() as sb:
        sid = sb.id
        assert sb.run("true").ok
    with pytest.raises(NotFound):
        Sandbox.connect(sid)
    with pytest.raises(ZeroDivisionError):
        with Sandbox.create() as sb:
            sid = sb.id
            1 / 0
    with pytest.raises(NotFound):
        Sandbox.connect(sid)
    with Sandbox.create() as sb:  # destroyed inside the block: the end is no error
        sb.destroy()


def test_a_callback_that_raises_ends_the_run_at_once(sb):
    def boom(chunk):
        raise KeyError(chunk)

    t0 = time.monotonic()
    with pytest.raises(KeyError):
        sb.run("echo x; sleep 30", on_stdout=boom)
    assert time.monotonic() - t0 < 15  # not drained to the command's end
    assert sb.run("echo next").stdout == "next\n"  # a fresh connection, no leftovers


def test_pause_resume_archive_reboot(coved):
    with Sandbox.create(idle_timeout=0, on_timeout="archive", timeout=3600) as sb:
        assert sb.info["idle_timeout"] == 0 and sb.info["on_timeout"] == "archive"
        assert sb.run("echo kept > /root/f").exit_code == 0
        assert sb.pause() == "paused" and sb.state == "paused"
        with pytest.raises(Conflict):
            sb.pause()
        assert sb.resume() == "running"
        assert sb.archive() == "archived" and sb.state == "archived"
        assert sb.run("cat /root/f").stdout == "kept\n" and sb.state == "running"
        pid = sb.info["init_pid"]
        assert sb.reboot() == "running" and sb.info["init_pid"] != pid
        assert sb.files.read("/root/f") == b"kept\n"
        p = sb.spawn("sleep 1000", keep_awake=True)
        assert [x.get("keep_awake") for x in sb.processes() if x["pid"] == p.pid] == [True]


def test_stats_and_disk(coved):
    with Sandbox.create(disk="64M", memory="256M") as sb:
        assert sb.info["disk"] == 64 << 20
        a = sb.stats()
        assert a["id"] == sb.id and a["disk_limit_bytes"] == 64 << 20 and a["memory_limit_bytes"] == 256 << 20
        r = sb.run("dd if=/dev/zero of=/root/f bs=1M count=100 2>&1; python3 -c 'x = bytearray(64 << 20)'")
        assert "Disk quota exceeded" in r.stdout, r.stdout
        b = sb.stats()
        assert b["disk_bytes"] >= a["disk_bytes"] + (32 << 20) and b["cpu_ns"] > a["cpu_ns"]
        assert b["memory_peak_bytes"] >= a["memory_peak_bytes"] + (32 << 20)
    with pytest.raises(BadRequest):
        Sandbox.create(disk="abc")

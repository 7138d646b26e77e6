"""sb.files against a real coved: relative paths, missing files, and a
200 MB upload and download whose memory stays bounded."""
import hashlib
import os
import tempfile
import zipfile

import pytest

from cove import NotFound, Sandbox

MB = 1 << 20


def test_write_read_list_remove(sb):
    sb.files.write("dir/a.txt", "hello\n")
    sb.files.write("/tmp/b.bin", b"\x00\xff", mode=0o600)
    assert sb.files.read("dir/a.txt") == b"hello\n"
    assert sb.files.read(sb.workspace + "/dir/a.txt") == b"hello\n"  # relative = under the workspace
    assert sb.run("cat dir/a.txt").stdout == "hello\n"
    assert sb.files.read_text("dir/a.txt") == "hello\n"
    assert sb.files.read("/tmp/b.bin") == b"\x00\xff"
    st = sb.files.stat("/tmp/b.bin")
    assert st["type"] == "file" and st["size"] == 2 and st["mode"] == "0600"
    assert sb.files.exists("dir") and not sb.files.exists("nope")
    names = sorted(e["path"] for e in sb.files.list("dir"))
    assert names == [sb.workspace + "/dir/a.txt"]
    sb.files.mkdir("dir/deeper/still")
    deep = [e["name"] for e in sb.files.list(".", depth=3)]
    assert "a.txt" in deep and "still" in deep
    assert [e["name"] for e in sb.files.list(".", depth=1)] == ["dir"]
    with pytest.raises(IsADirectoryError):
        sb.files.read("dir")


def test_missing_file_is_none_and_remove_of_missing_succeeds(sb):
    assert sb.files.read("no/such/file") is None
    assert sb.files.read_text("/no-such-file") is None
    assert sb.files.stat("/no-such-file") is None
    sb.files.remove("no-such-thing")  # no error
    sb.files.write("tree/x/y", "1")
    sb.files.remove("tree")
    assert sb.files.read("tree/x/y") is None and not sb.files.exists("tree")
    with pytest.raises(NotFound):
        sb.files.download("/no-such-file", os.devnull)


def test_workspace_is_the_sandbox_cwd(coved):
    with Sandbox.create(cwd="/srv") as sb:
        sb.files.write("rel.txt", "in srv")
        assert sb.run("cat /srv/rel.txt").stdout == "in srv"
        assert sb.files.list()[0]["path"] == "/srv/rel.txt"


def _peak_rss_reset():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS


def _peak_rss_kib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def test_upload_download_200mb_bounded_memory(sb):
    size = 200 * MB
    with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
        src, back = os.path.join(d, "in"), os.path.join(d, "out")
        h = hashlib.sha256()
        with open(src, "wb") as f:
            block = os.urandom(MB)
            for i in range(200):
                chunk = block[i:] + block[:i]
                h.update(chunk)
                f.write(chunk)
        _peak_rss_reset()
        base = _peak_rss_kib()
        sb.files.upload(src, "big.bin")
        up_peak = _peak_rss_kib() - base
        assert sb.files.stat("big.bin")["size"] == size
        assert sb.run("sha256sum big.bin").stdout.split()[0] == h.hexdigest()
        _peak_rss_reset()
        base = _peak_rss_kib()
        assert sb.files.download("big.bin", back) == size
        down_peak = _peak_rss_kib() - base
        with open(back, "rb") as f:
            h2 = hashlib.sha256()
            while c := f.read(MB):
                h2.update(c)
        assert h2.hexdigest() == h.hexdigest()
    # A client that held the file would grow by 200 MB; the streams hold a block or two.
    print("peak RSS growth KiB: upload %d, download %d" % (up_peak, down_peak))
    assert up_peak < 32 * 1024 and down_peak < 32 * 1024, (up_peak, down_peak)


def test_export_zip(sb):
    sb.files.write("proj/main.py", "print(1)\n")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "w.zip")
        n = sb.export(out, format="zip", path="proj")
        assert n == os.path.getsize(out) > 0
        with zipfile.ZipFile(out) as z:
            assert z.read("main.py") == b"print(1)\n"
        with open(os.path.join(d, "w.tar"), "wb") as f:
            assert sb.export(f, format="tar") > 0


def test_external_sandbox_paths_are_inside_its_workspace(coved):
    with Sandbox.create(isolation="external") as sb:
        ws = sb.info["workspace"]
        sb.files.write("sub/rel.txt", "x")
        assert sb.run("cat sub/rel.txt").stdout == "x"  # commands start in the workspace folder
        assert sb.run("pwd", cwd="sub").stdout == ws + "/sub\n"
        assert sb.files.read("/sub/rel.txt") == b"x"
        assert [e["name"] for e in sb.files.list()] == ["sub"]

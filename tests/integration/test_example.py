"""docs/example.c, the documented use of libcove, built by make check, runs
against the real coved and prints what it says it does."""
import os
import subprocess

import covetest


def test_docs_example_runs(cv):
    exe = os.path.join(covetest.BUILD, "docs-example")
    assert os.path.exists(exe), "make check builds %s" % exe
    r = subprocess.run([exe, cv.socket], capture_output=True, timeout=120)
    assert r.returncode == 0, r
    out = r.stdout.decode()
    assert out.startswith("hello from sb_"), out
    assert "read back: written by example.c\n" in out and out.endswith("42 in /tmp\n"), out

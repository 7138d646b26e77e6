"""Every ```python example of docs/sdk-python.md, run as it is written
(with the interpreter that runs the tests) against the test's coved."""
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

DOC = os.path.join(ROOT, "docs", "sdk-python.md")


def examples():
    with open(DOC) as f:
        text = f.read()
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_the_doc_has_examples():
    assert len(examples()) >= 8


@pytest.mark.parametrize("n", range(len(examples())))
def test_example(coved, n, tmp_path):
    code = examples()[n]
    script = tmp_path / ("example_%d.py" % n)
    script.write_text(code)
    env = dict(os.environ, COVE_SOCKET=coved.socket, PYTHONPATH=os.path.join(ROOT, "sdk", "python"))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env,
                       cwd=str(tmp_path))
    assert r.returncode == 0, "example %d failed:\n%s\n%s" % (n, code, r.stdout + r.stderr)
    before = {s["id"] for s in coved.api("GET", "/v1/sandboxes")[1]["sandboxes"]}
    assert not before, "example %d left sandboxes: %s" % (n, before)

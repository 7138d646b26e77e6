"""The package builds from this checkout as the README says (a wheel,
offline, with the build tools Debian ships: scripts/deps.sh) and, installed
alone, imports with nothing but the standard library."""
import os
import shutil
import subprocess
import sys
import zipfile

from conftest import ROOT


# Debian's python3 has the build tools scripts/deps.sh installs (pip,
# setuptools, wheel); another interpreter running the tests may lack wheel.
BUILDER = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def test_wheel_builds_and_imports_alone(tmp_path):
    src = str(tmp_path / "src")  # a copy: a build leaves build/ and *.egg-info beside the sources
    shutil.copytree(os.path.join(ROOT, "sdk", "python"), src,
                    ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info"))
    r = subprocess.run([BUILDER, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
                        "-w", str(tmp_path / "dist"), src], capture_output=True, text=True, timeout=300,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    wheels = list((tmp_path / "dist").glob("cove-*.whl"))
    assert len(wheels) == 1
    names = zipfile.ZipFile(wheels[0]).namelist()
    assert "cove/__init__.py" in names and "cove/aio.py" in names
    target = tmp_path / "site"
    zipfile.ZipFile(wheels[0]).extractall(target)
    code = "import cove, cove.aio; print(cove.Sandbox.__name__, cove.aio.Sandbox.__name__)"
    r = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, %r); " % str(target) + code],
                       capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert r.returncode == 0 and r.stdout == "Sandbox Sandbox\n", r.stderr

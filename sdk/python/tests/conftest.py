"""A real coved for the SDK's tests, started as the integration tests start
theirs (tests/integration/covetest.py): its own data root and socket. The
SDK is imported from this checkout (sdk/python), with the interpreter that
runs pytest."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import covetest  # noqa: E402

import cove._http  # noqa: E402


@pytest.fixture(scope="session")
def coved():
    d = covetest.Coved().start()
    os.environ["COVE_SOCKET"] = d.socket
    os.environ.pop("COVE_HOST", None)
    os.environ.pop("COVE_TOKEN", None)
    cove._http._default = None  # the default transport follows the environment
    yield d
    d.teardown()


@pytest.fixture
def sb(coved):
    from cove import Sandbox
    with Sandbox.create() as s:
        yield s

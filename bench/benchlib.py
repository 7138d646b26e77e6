"""What the Python benchmarks share: HTTP to coved over its unix socket (the
test suite's connection class), and the "key value" result files
bench/run.sh and summary.py read."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from covetest import UnixHTTPConnection as UnixHTTP  # noqa: E402,F401


def write_results(path, res, name):
    """res as "key value" lines (3 decimals) to path, and a report to stderr."""
    with open(path, "w") as f:
        for k, v in sorted(res.items()):
            f.write("%s %.3f\n" % (k, v))
    for k, v in sorted(res.items()):
        print("%s: %-22s %9.1f" % (name, k, v), file=sys.stderr)

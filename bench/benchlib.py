"""What the Python benchmarks share: HTTP to coved over its unix socket, and
the "key value" result files bench/run.sh and summary.py read."""
import http.client
import socket
import sys


class UnixHTTP(http.client.HTTPConnection):
    """An HTTP connection to a unix socket (coved's API)."""

    def __init__(self, path, timeout=300):
        super().__init__("cove", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def write_results(path, res, name):
    """res as "key value" lines (3 decimals) to path, and a report to stderr."""
    with open(path, "w") as f:
        for k, v in sorted(res.items()):
            f.write("%s %.3f\n" % (k, v))
    for k, v in sorted(res.items()):
        print("%s: %-22s %9.1f" % (name, k, v), file=sys.stderr)

"""cove cp next to curl over the same unix socket: a file of MIB MiB into
a sandbox (`cove cp FILE ID:PATH` and `curl -T FILE` PUT /files) and out
of it (`cove cp ID:PATH FILE` and curl GET), alternately, RUNS times each;
the best and the median in MB/s, and cove's peak RSS (VmHWM, polled).

Usage: cpbench.py --socket SOCK [--cove PATH] [--mib 1024] [--runs 3]
                  [--scratch DIR] [--out FILE]
Without --socket it starts a private coved (tests/integration/covetest.py)."""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import covetest  # noqa: E402


def hwm_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def timed(argv, env):
    """Seconds and peak RSS (KiB) of one run of argv, which must succeed."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    peak = 0
    while True:
        peak = max(peak, hwm_kib(p.pid))
        pid, status = os.waitpid(p.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.005)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("cpbench: %s failed" % " ".join(argv))
    return time.monotonic() - t0, peak


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket")
    ap.add_argument("--cove", default=covetest.COVE)
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scratch", default="/var/tmp")
    ap.add_argument("--out")
    a = ap.parse_args()
    own = None
    if not a.socket:
        own = covetest.Coved().start()
        a.socket = own.socket
    env = dict(os.environ, COVE_SOCKET=a.socket, COVE_NO_START="1")
    work = tempfile.mkdtemp(prefix="cpbench-", dir=a.scratch)
    sid = None
    try:
        sid = subprocess.run([a.cove, "create"], env=env, capture_output=True, check=True).stdout.decode().strip()
        src, dst = os.path.join(work, "in.bin"), os.path.join(work, "out.bin")
        subprocess.run("head -c %dM /dev/urandom > %s" % (a.mib, src), shell=True, check=True)
        url = "http://cove/v1/sandboxes/%s/files?path=/root/f.bin" % sid
        curl = ["curl", "-sf", "--unix-socket", a.socket]
        cases = {
            "in: cove cp": [a.cove, "cp", src, sid + ":/root/f.bin"],
            "in: curl -T (PUT /files)": curl + ["-T", src, url, "-o", "/dev/null"],
            "out: cove cp": [a.cove, "cp", sid + ":/root/f.bin", dst],
            "out: curl (GET /files)": curl + [url, "-o", dst],
        }
        secs = {k: [] for k in cases}
        rss = {k: 0 for k in cases}
        for _ in range(a.runs):
            for k, argv in cases.items():
                t, peak = timed(argv, env)
                secs[k].append(t)
                rss[k] = max(rss[k], peak)
        mb = a.mib * 1048576 / 1e6
        lines = ["cove cp vs curl, %d MiB, %d runs each, alternating (MB/s: best, median; peak RSS)" % (a.mib, a.runs)]
        for k in cases:
            lines.append("  %-26s %6.0f %6.0f   %6d KiB" % (k, mb / min(secs[k]), mb / statistics.median(secs[k]),
                                                           rss[k]))
        text = "\n".join(lines) + "\n"
        sys.stdout.write(text)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text)
    finally:
        if sid:
            subprocess.run([a.cove, "rm", sid], env=env, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
        if own:
            own.cleanup()


if __name__ == "__main__":
    main()

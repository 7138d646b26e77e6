"""Helpers for cove's integration tests: a real coved on a private data root
and socket, the real cove CLI, and raw HTTP over the unix socket."""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("COVE_BUILD", os.path.join(ROOT, "build"))
COVED = os.path.join(BUILD, "coved")
COVE = os.path.join(BUILD, "cove")
PROBE = os.path.join(BUILD, "cove-probe")


def nft(cmd):
    """Runs an nftables command through libnftables (Debian's nft program
    is not installed here; the library is coved's dependency): (rc, output,
    error)."""
    import ctypes
    lib = ctypes.CDLL("libnftables.so.1")
    lib.nft_ctx_new.restype = ctypes.c_void_p
    for f in ("nft_ctx_buffer_output", "nft_ctx_buffer_error", "nft_ctx_free"):
        getattr(lib, f).argtypes = [ctypes.c_void_p]
    for f in ("nft_ctx_get_output_buffer", "nft_ctx_get_error_buffer"):
        getattr(lib, f).argtypes = [ctypes.c_void_p]
        getattr(lib, f).restype = ctypes.c_char_p
    lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    ctx = lib.nft_ctx_new(0)
    lib.nft_ctx_buffer_output(ctx)
    lib.nft_ctx_buffer_error(ctx)
    rc = lib.nft_run_cmd_from_buffer(ctx, cmd.encode())
    out = (lib.nft_ctx_get_output_buffer(ctx) or b"").decode()
    err = (lib.nft_ctx_get_error_buffer(ctx) or b"").decode()
    lib.nft_ctx_free(ctx)
    return rc, out, err


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("cove", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


class Coved:
    """One coved process on its own data root (under /var/tmp, on ext4, so
    the loop-backed btrfs pool is exercised) and socket."""

    def __init__(self, data=None, args=(), env=None):
        self.dir = data or tempfile.mkdtemp(prefix="cove-it-", dir="/var/tmp")
        self.args = list(args)  # more coved flags
        self.env = env  # more environment for coved
        self.data = os.path.join(self.dir, "data")
        self.socket = os.path.join(self.dir, "cove.sock")
        self.log = os.path.join(self.dir, "coved.log")
        self.proc = None

    def start(self, timeout=60):
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen([COVED, "--data", self.data, "--socket", self.socket] + self.args,
                                     stdout=logf, stderr=logf, stdin=subprocess.DEVNULL,
                                     env=dict(os.environ, **self.env) if self.env else None)
        logf.close()
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("coved exited: " + self.read_log())
            try:
                if self.api("GET", "/v1/health")[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("coved did not start: " + self.read_log())

    def read_log(self):
        try:
            with open(self.log) as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def kill(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)
        self.proc = None

    def cleanup(self):
        """Delete every sandbox, stop coved, unmount the pool, remove the dir."""
        try:
            if self.proc:
                for sb in self.api("GET", "/v1/sandboxes")[1].get("sandboxes", []):
                    self.api("DELETE", "/v1/sandboxes/" + sb["id"])
        except OSError:
            pass
        self.kill(signal.SIGTERM)
        keep_sanitizer_lines(self.log)
        pool = os.path.join(self.data, "pool")
        subprocess.run(["umount", "-l", pool], stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)

    def sandbox_dirs(self):
        """Sandbox roots on disk (entries named like sandbox IDs)."""
        d = os.path.join(self.data, "pool", "sandboxes")
        return sorted(n for n in os.listdir(d) if ID_RE.match(n)) if os.path.isdir(d) else []

    def teardown(self):
        """Stop a private coved and leave nothing behind: delete every
        sandbox it lists or has on disk, wait for the deletions to finish
        (they complete after the reply), then clean up. Inits that survive
        that are ended by pid, and their cgroups removed."""
        ids = set()
        try:
            if self.proc is None or self.proc.poll() is not None:
                self.proc = None
                self.start()
            ids = {s["id"] for s in self.api("GET", "/v1/sandboxes")[1]["sandboxes"]} | set(self.sandbox_dirs())
            for sid in ids:
                self.api("DELETE", "/v1/sandboxes/" + sid)
            wait_until(lambda: not any(cgroup_dirs(s) for s in ids), 10)
        except Exception:
            pass
        finally:
            for sid in ids:
                for pid in cgroup_procs(sid) or []:
                    try:
                        os.kill(pid, 9)
                    except OSError:
                        pass
            self.cleanup()
            for sid in ids:
                for h in cgroup_dirs(sid):
                    try:
                        os.rmdir("/sys/fs/cgroup/%s/cove/%s" % (h, sid))
                    except OSError:
                        pass

    def pid(self):
        return self.proc.pid

    def conn(self, timeout=60):
        return UnixHTTPConnection(self.socket, timeout)

    def api(self, method, path, body=None, raw=None, headers=None, timeout=60):
        """Returns (status, parsed JSON or None)."""
        c = self.conn(timeout)
        try:
            data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
            c.request(method, path, body=data, headers=headers or {})
            r = c.getresponse()
            text = r.read()
            try:
                return r.status, json.loads(text)
            except ValueError:
                return r.status, None
        finally:
            c.close()

    def create(self, **spec):
        st, j = self.api("POST", "/v1/sandboxes", spec)
        assert st == 201, (st, j)
        return j["id"]

    def exec(self, sid, cmd, **kw):
        kw["cmd"] = cmd
        st, j = self.api("POST", "/v1/sandboxes/%s/exec" % sid, kw, timeout=kw.get("timeout", 60) + 60)
        assert st == 200, (st, j)
        return j

    def sh(self, sid, script, **kw):
        return self.exec(sid, script, **kw)

    def cli(self, *args, input=None, timeout=120, env=None):
        e = dict(os.environ)
        e["COVE_SOCKET"] = self.socket
        e["COVE_DATA"] = self.data
        if env:
            e.update(env)
        return subprocess.run([COVE] + list(args), input=input, capture_output=True, timeout=timeout, env=e)


ID_RE = re.compile(r"^sb_[a-z2-7]{12}$")
CGROUP_HIERARCHIES = ("memory", "pids", "cpu", "cpuacct", "freezer")


def cgroup_dirs(sid):
    """The v1 hierarchies in which sandbox sid still has a cgroup."""
    return [h for h in CGROUP_HIERARCHIES if os.path.isdir("/sys/fs/cgroup/%s/cove/%s" % (h, sid))]


def cgroup_procs(sid):
    """Pids in sandbox sid's freezer cgroup, or None when it has none."""
    try:
        with open("/sys/fs/cgroup/freezer/cove/%s/cgroup.procs" % sid) as f:
            return sorted(int(p) for p in f.read().split())
    except OSError:
        return None


SANITIZER_LOG = os.environ.get("COVE_SANITIZER_LOG")
_reported = set()


def sanitizer_reports():
    """make asan: the sanitizer reports (ASan, UBSan, LeakSanitizer) written
    since the last call, by any process of ours, as (path, text) pairs. The
    sanitizers write them to files in COVE_SANITIZER_LOG (see the Makefile's
    asan target); none without it."""
    found = []
    for name in sorted(os.listdir(SANITIZER_LOG)) if SANITIZER_LOG else ():
        path = os.path.join(SANITIZER_LOG, name)
        if path not in _reported:
            _reported.add(path)
            with open(path, errors="replace") as f:
                found.append((path, f.read()))
    return found


def keep_sanitizer_lines(log):
    """make asan: GCC's UBSan writes its reports to stderr whatever
    UBSAN_OPTIONS's log_path says (it stops the process: halt_on_error);
    the lines of a coved log about to be removed that report something go
    to a file in COVE_SANITIZER_LOG, so that they fail the run too."""
    if not SANITIZER_LOG:
        return
    try:
        with open(log, errors="replace") as f:
            found = [line for line in f if re.search(r"runtime error:|ERROR: \w+Sanitizer|^SUMMARY: \w+Sanitizer", line)]
    except OSError:
        return
    if found:
        fd, _ = tempfile.mkstemp(prefix="coved-log.", dir=SANITIZER_LOG)
        with os.fdopen(fd, "w") as f:
            f.write(log + ":\n" + "".join(found))


def wait_until(fn, timeout=10, step=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(step)
    return fn()

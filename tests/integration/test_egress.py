"""Domain rules that hold for real: the egress proxy reads the TLS server
name (443) and the HTTP Host (80) of a sandbox's connections, judges the
name and dials it itself, so a denied name is refused whatever address it
is sent to, and a spoofed server name reaches the named host, not the
address.

"The internet" is a network namespace this file makes: a veth from the
host, a /24 of 198.18.0.0/15 (the benchmarking range: no real host) picked
at random, two web hosts A and B (HTTP on 80, TLS on 443, each answering
"host=A" or "host=B"), and a DNS server for the test's own zone
example.test. coved runs with --resolv-conf naming that DNS server, so the
sandboxes' resolver and the proxy both resolve through it. No packet goes
anywhere else (the names of the link-local and host-address tests are
refused before any packet is sent)."""
import contextlib
import os
import random
import signal
import subprocess
import tempfile
import uuid

import covetest
from covetest import Coved, wait_until

SERVERS = r"""
import socket, ssl, struct, sys, threading
a, b, dns, cert, key, zone, a6 = sys.argv[1:8]
names = dict(kv.split("=") for kv in zone.split(","))

def serve_http(addr, who):
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 80)); s.listen(64)
    while True:
        c, _ = s.accept()
        threading.Thread(target=answer_http, args=(c, who), daemon=True).start()

BIG = 256 << 20
def answer_http(c, who):
    # One request per connection, but that a "GET /keep" keeps it open
    # for the next (unless it says "Connection: close"), answering
    # "host=WHO:HOST" to each.
    try:
        c.settimeout(30)
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                more = c.recv(4096)
                if not more:
                    return
                buf += more
            req, buf = buf.split(b"\r\n\r\n", 1)
            if req.startswith(b"GET /big "):
                c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % BIG)
                block = bytes(range(256)) * 256
                for _ in range(BIG // len(block)):
                    c.sendall(block)
                return
            if not req.startswith(b"GET /keep "):
                c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 6\r\n\r\nhost=" + who.encode())
                return
            host = [l[5:].strip() for l in req.split(b"\r\n") if l.lower().startswith(b"host:")]
            body = b"host=" + who.encode() + b":" + (host[0] if host else b"")
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            if b"connection: close" in req.lower():
                return
    except OSError:
        pass
    finally:
        c.close()

def serve_tls(addr, who):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(cert, key)
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 443)); s.listen(64)
    while True:
        c, _ = s.accept()
        try:
            c.settimeout(5)
            t = ctx.wrap_socket(c, server_side=True)
            t.sendall(b"host=" + who.encode()); t.close()
        except (OSError, ssl.SSLError):
            c.close()

def serve_dns(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind((addr, 53))
    while True:
        q, peer = s.recvfrom(512)
        i, labels = 12, []
        while q[i]:
            labels.append(q[i + 1:i + 1 + q[i]].decode().lower()); i += 1 + q[i]
        qtype = struct.unpack("!H", q[i + 1:i + 3])[0]
        question = q[12:i + 5]
        ip = names.get(".".join(labels))
        rcode = 0 if ip else 3
        ans = b""
        if ip and ((qtype == 1) == (":" not in ip)) and qtype in (1, 28):
            raw = socket.inet_pton(socket.AF_INET6 if qtype == 28 else socket.AF_INET, ip)
            ans = b"\xc0\x0c" + struct.pack("!HHIH", qtype, 1, 5, len(raw)) + raw
        hdr = q[:2] + struct.pack("!HHHHH", 0x8180 | rcode, 1, 1 if ans else 0, 0, 0)
        s.sendto(hdr + question + ans, peer)

for f, args in ((serve_http, (a, "A")), (serve_http, (b, "B")), (serve_http, (a6, "A6")), (serve_tls, (a, "A")),
                (serve_tls, (b, "B")), (serve_dns, (dns,))):
    threading.Thread(target=f, args=args, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
"""

# Run inside a sandbox: MODE (http|tls) TO (an address or a name the
# sandbox resolves) NAME (the Host or server name; "-" for none). Prints
# what the server said ("host=A") or "refused".
CLIENT = r"""
import socket, ssl, sys
mode, to, name = sys.argv[1:4]
name = None if name == "-" else name
try:
    s = socket.create_connection((to, 443 if mode == "tls" else 80), timeout=5)
    s.settimeout(10)
    if mode == "tls":
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        s = ctx.wrap_socket(s, server_hostname=name)
        data = s.recv(100)
    else:
        s.sendall(b"GET / HTTP/1.1\r\n" + (b"Host: " + name.encode() + b"\r\n" if name else b"") + b"\r\n")
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        data = data.split(b"\r\n\r\n", 1)[-1] if data.startswith(b"HTTP/") else b""
    print(data.decode() or "refused")
except (OSError, ssl.SSLError, ValueError) as e:
    print("refused")
"""


def _run(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


class Internet:
    def __init__(self):
        net = "198.%d.%d" % (random.choice((18, 19)), random.randrange(256))
        self.host, self.a, self.b, self.dns = net + ".1", net + ".2", net + ".3", net + ".4"
        net6 = "2001:db8:%x:%x::" % (random.randrange(65536), random.randrange(65536))  # documentation
        self.host6, self.a6 = net6 + "1", net6 + "2"
        self.net = net


@contextlib.contextmanager
def _internet():
    inet = Internet()
    tag = uuid.uuid4().hex[:6]
    ns, veth = "covee-" + tag, "cte" + tag
    tmp = tempfile.mkdtemp(prefix="cove-egress-", dir="/var/tmp")
    cert, key, resolv = (os.path.join(tmp, n) for n in ("cert.pem", "key.pem", "resolv.conf"))
    zone = {"ok.example.test": inet.a, "bad.example.test": inet.b, "other.example.test": inet.b,
            "x.wild.example.test": inet.b, "wild.example.test": inet.b, "host.example.test": inet.host,
            "meta.example.test": "169.254.169.254", "six.example.test": inet.a6}
    srv = None
    try:
        _run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-subj", "/CN=example.test", "-days", "2", "-keyout", key, "-out", cert)
        with open(resolv, "w") as f:
            f.write("nameserver %s\n" % inet.dns)
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _run("ip", "addr", "add", inet.host + "/24", "dev", veth)
        _run("ip", "link", "set", veth, "up")
        for addr in (inet.a, inet.b, inet.dns):
            _run("ip", "-n", ns, "addr", "add", addr + "/24", "dev", "eth0")
        _run("ip", "addr", "add", inet.host6 + "/64", "dev", veth, "nodad")
        _run("ip", "-n", ns, "addr", "add", inet.a6 + "/64", "dev", "eth0", "nodad")
        _run("ip", "-n", ns, "link", "set", "eth0", "up")
        _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("ip", "-n", ns, "route", "add", "default", "via", inet.host)
        _run("ip", "-n", ns, "-6", "route", "add", "default", "via", inet.host6)
        srv = subprocess.Popen(["ip", "netns", "exec", ns, "python3", "-c", SERVERS, inet.a, inet.b, inet.dns, cert,
                                key, ",".join("%s=%s" % kv for kv in zone.items()), inet.a6],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert srv.stdout.readline().strip() == b"ready"
        inet.resolv = resolv
        yield inet
    finally:
        if srv:
            srv.kill()
            srv.wait()
        subprocess.run(["ip", "link", "del", veth], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["rm", "-rf", tmp])


def _get(cv, sid, mode, to, name):
    r = cv.exec(sid, ["python3", "-c", CLIENT, mode, to, name], timeout=60)
    assert r["exit_code"] == 0, r
    return r["stdout"].strip()


def _put(cv, sid, **lists):
    st, j = cv.api("PUT", "/v1/sandboxes/%s/network" % sid, lists)
    assert st == 200, (st, j)


def _deny_by_name(cv, inet, sid):
    """With deny_out ["bad.example.test"]: what that policy must do."""
    assert _get(cv, sid, "http", "ok.example.test", "ok.example.test") == "host=A"
    assert _get(cv, sid, "tls", "ok.example.test", "ok.example.test") == "host=A"
    # Sent to the allowed host's address, naming the denied one.
    assert _get(cv, sid, "http", inet.a, "bad.example.test") == "refused"
    assert _get(cv, sid, "tls", inet.a, "bad.example.test") == "refused"
    # And to its own address: the name decides, not the address.
    assert _get(cv, sid, "tls", inet.b, "bad.example.test") == "refused"
    assert _get(cv, sid, "http", inet.b, "other.example.test") == "host=B"


def test_egress_domains_sni_host_spoofing_wildcards_runtime(_shared):
    with _internet() as inet:
        own = Coved(args=["--resolv-conf", inet.resolv]).start()
        try:
            sid = own.create(deny_out=["bad.example.test"])
            _deny_by_name(own, inet, sid)
            r = own.sh(sid, "getent hosts bad.example.test; echo rc=$?")
            assert "rc=2" in r["stdout"], r

            # An allow list: the names on it, nothing else.
            _put(own, sid, allow_out=["ok.example.test", "*.wild.example.test"], deny_out=["0.0.0.0/0", "::/0"])
            assert _get(own, sid, "tls", inet.a, "ok.example.test") == "host=A"
            # A spoofed server name: sent to B's address, it reaches A, the
            # host the name names (B's address is denied by the list).
            assert _get(own, sid, "tls", inet.b, "ok.example.test") == "host=A"
            assert _get(own, sid, "http", inet.b, "ok.example.test") == "host=A"
            assert _get(own, sid, "tls", inet.b, "other.example.test") == "refused"
            assert _get(own, sid, "http", inet.b, "x.wild.example.test") == "host=B", "*.wild matches x.wild"
            assert _get(own, sid, "http", inet.b, "wild.example.test") == "refused", "*.wild is not wild"
            # No name: judged by the address the sandbox chose (denied here).
            assert _get(own, sid, "tls", inet.a, "-") == "refused"
            assert _get(own, sid, "http", inet.a, "-") == "refused"

            # Always denied, whatever the list: the host's own addresses,
            # link-local (refused before any packet leaves).
            _put(own, sid, allow_out=["host.example.test", "meta.example.test", inet.host])
            assert _get(own, sid, "http", inet.a, "host.example.test") == "refused"
            assert _get(own, sid, "http", inet.a, "meta.example.test") == "refused"
            assert _get(own, sid, "http", inet.a, inet.host) == "refused"

            # A runtime change holds for the next connection.
            _put(own, sid, deny_out=["ok.example.test"])
            assert _get(own, sid, "http", inet.a, "ok.example.test") == "refused"
            assert _get(own, sid, "http", inet.b, "bad.example.test") == "host=B"
            # No domain rule: nothing proxied, the addresses decide.
            _put(own, sid, deny_out=[inet.b])
            assert _get(own, sid, "http", inet.a, "bad.example.test") == "host=A"
            assert _get(own, sid, "http", inet.b, "ok.example.test") == "refused"
            own.api("DELETE", "/v1/sandboxes/" + sid)
        finally:
            own.teardown()


def test_egress_domains_after_restart_restore_and_fork(_shared):
    with _internet() as inet:
        own = Coved(args=["--resolv-conf", inet.resolv]).start()
        try:
            sid = own.create(deny_out=["bad.example.test"])
            own.kill(signal.SIGKILL)
            own.start()
            _deny_by_name(own, inet, sid)
            st, sn = own.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
            assert st == 201, (st, sn)
            st, r = own.api("POST", "/v1/snapshots/%s/restore" % sn["id"], {})
            assert st == 201, (st, r)
            st, f = own.api("POST", "/v1/sandboxes/%s/fork" % sid, {"count": 1})
            assert st in (200, 201), (st, f)
            for copy in (r["id"], f["sandboxes"][0]["id"]):
                _deny_by_name(own, inet, copy)
        finally:
            own.teardown()


def _ct_mark(sid):
    """net.c's conntrack mark of a sandbox's flows (FNV-1a of its ID, top bit set)."""
    h = 2166136261
    for c in sid.encode():
        h = ((h ^ c) * 16777619) & 0xffffffff
    return h | 0x80000000


def _ours(ids):
    """What of these sandboxes is left on the host: veths, nftables chains
    and map elements, conntrack entries with their marks."""
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    table = covetest.nft("list table inet cove")[1]
    try:
        with open("/proc/net/nf_conntrack") as f:
            ct = f.read()
    except OSError:
        ct = ""
    marks = ["mark=%d " % _ct_mark(i) for i in ids]
    return {
        "links": [i for i in ids if (" cv-%s@" % i[3:]) in links],
        "rules": [i for i in ids if i in table],
        "conntrack": sum(ct.count(m) for m in marks),
    }


def _addrs_left(gateways):
    """Which of these gateway addresses are still on the host (other
    coveds' sandboxes come and go on a shared host: only ours count)."""
    out = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
    return [g for g in gateways if (" %s/" % g) in out]


# Inside a sandbox, in the background: a TCP connection to HOST:80 held
# open (a conntrack entry of the sandbox's, established).
HOLD = "import socket, sys, time; s = socket.create_connection((sys.argv[1], 80)); time.sleep(3600)"


def test_egress_nothing_left_after_coved_sigkill_restart_and_delete(_shared):
    """Sandboxes with egress (one proxied, each holding a connection open),
    coved killed with SIGKILL, started again, every sandbox deleted: no
    veth, chain, map element, conntrack entry of theirs or host address is
    left."""
    with _internet() as inet:
        own = Coved(args=["--resolv-conf", inet.resolv]).start()
        try:
            ids = [own.create(), own.create(deny_out=["bad.example.test"]), own.create(deny_out=[inet.b])]
            for sid in ids:
                st, _ = own.api("POST", "/v1/sandboxes/%s/exec" % sid,
                                {"cmd": ["python3", "-c", HOLD, inet.a], "background": True})
                assert st in (200, 201), st
                assert _get(own, ids[1], "http", inet.a, "ok.example.test") == "host=A"
            before = _ours(ids)
            assert len(before["links"]) == 3 and len(before["rules"]) == 3, before
            if os.path.exists("/proc/net/nf_conntrack"):
                assert wait_until(lambda: _ours(ids)["conntrack"] >= 3, 20), _ours(ids)
            nets = [own.api("GET", "/v1/sandboxes/" + sid)[1]["network"] for sid in ids]
            gateways = [n[k] for n in nets for k in ("gateway", "gateway6") if k in n]
            assert len(_addrs_left(gateways)) == len(gateways), (gateways, _addrs_left(gateways))
            own.kill(signal.SIGKILL)
            own.start()
            # The proxied sandbox's rules point at the new coved's proxy.
            assert _get(own, ids[1], "http", inet.a, "bad.example.test") == "refused"
            assert _get(own, ids[1], "http", inet.b, "ok.example.test") == "host=A"
            for sid in ids:
                assert own.api("DELETE", "/v1/sandboxes/" + sid)[0] == 200
            empty = {"links": [], "rules": [], "conntrack": 0}
            # A veth goes with its namespace, which the kernel destroys
            # later, in one work queue for the whole host (behind every
            # other namespace going away, and any socket of the sandbox
            # still closing): once past 60 s on this shared, loaded host.
            assert wait_until(lambda: _ours(ids) == empty, 180), _ours(ids)
            assert wait_until(lambda: not _addrs_left(gateways), 30), _addrs_left(gateways)
        finally:
            own.teardown()


def _host_has_ipv6_default():
    out = subprocess.run(["ip", "-6", "route", "show", "default"], capture_output=True, text=True).stdout
    return out.strip() != ""


# On the host, for the always-denied check: answers "host=H" on ADDR:80.
HOST_SERVER = r"""
import socket, sys
s = socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 80)); s.listen(8); print("ready", flush=True)
while True:
    c, _ = s.accept(); c.recv(4096); c.sendall(b"HTTP/1.0 200 OK\r\n\r\nhost=H"); c.close()
"""


def test_egress_ipv6_nat_always_denied_and_proxy(_shared):
    """Where the host has a default IPv6 route (this one has), a sandbox
    gets a ULA address and reaches an IPv6 test host through NAT66; the
    host's IPv6 address stays denied; deny_out holds for IPv6 CIDRs; and a
    name with only an AAAA record goes through the egress proxy over IPv6."""
    with _internet() as inet:
        own = Coved(args=["--resolv-conf", inet.resolv]).start()
        host_srv = None
        try:
            sid = own.create()
            n = own.api("GET", "/v1/sandboxes/" + sid)[1]["network"]
            if not _host_has_ipv6_default():
                assert "address6" not in n, n
                return
            assert n["address6"].startswith("fd") and n["gateway6"], n
            host_srv = subprocess.Popen(["python3", "-c", HOST_SERVER, inet.host6], stdout=subprocess.PIPE)
            assert host_srv.stdout.readline().strip() == b"ready"
            assert _get(own, sid, "http", inet.a6, "-") == "host=A6", "NAT66 to the test host"
            assert _get(own, sid, "http", inet.host6, "-") == "refused", "the host's IPv6 address reached"
            _put(own, sid, deny_out=[inet.a6[:-1] + "/64"])
            assert _get(own, sid, "http", inet.a6, "-") == "refused", "deny_out of an IPv6 CIDR"
            # A domain rule: TCP 80 over IPv6 goes to the proxy, which
            # dials the AAAA-only name over IPv6 (and judges its address).
            # (Sent to the address, so that only the proxy resolves.)
            _put(own, sid, deny_out=["bad.example.test"])
            assert _get(own, sid, "http", inet.a6, "six.example.test") == "host=A6"
            assert _get(own, sid, "http", inet.a6, "bad.example.test") == "refused"
            _put(own, sid, deny_out=["bad.example.test", inet.a6[:-1] + "/64"])
            assert _get(own, sid, "http", inet.a6, "six.example.test") == "refused"
        finally:
            if host_srv:
                host_srv.kill()
                host_srv.wait()
            own.teardown()


# Inside a sandbox: GET /big from NAME (port 80), reading slowly at first
# (the proxy must hold back, not buffer); prints the byte count and digest.
BIG_CLIENT = r"""
import hashlib, socket, sys, time
s = socket.create_connection((sys.argv[1], 80), timeout=30)
s.sendall(b"GET /big HTTP/1.1\r\nHost: " + sys.argv[1].encode() + b"\r\n\r\n")
h, n, head, t0 = hashlib.sha256(), 0, b"", time.time()
while True:
    if time.time() - t0 < 3:
        time.sleep(0.05)
    chunk = s.recv(1 << 16)
    if not chunk:
        break
    if head is not None:
        head += chunk
        if b"\r\n\r\n" not in head:
            continue
        chunk = head.split(b"\r\n\r\n", 1)[1]
        head = None
    h.update(chunk)
    n += len(chunk)
print(n, h.hexdigest())
"""


def _hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(next(l for l in f if l.startswith("VmHWM:")).split()[1])


def test_egress_proxy_streams_256_mib_with_bounded_memory(_shared):
    """256 MiB through the egress proxy to a reader that starts slowly:
    every byte arrives, and coved's peak RSS grows by far less than what
    went through (back-pressure, not buffering)."""
    import hashlib
    with _internet() as inet:
        own = Coved(args=["--resolv-conf", inet.resolv]).start()
        try:
            sid = own.create(deny_out=["bad.example.test"])
            assert _get(own, sid, "http", inet.a, "ok.example.test") == "host=A"
            hwm0 = _hwm_kib(own.pid())
            r = own.exec(sid, ["python3", "-c", BIG_CLIENT, "ok.example.test"], timeout=300)
            block = bytes(range(256)) * 256
            want = hashlib.sha256()
            for _ in range((256 << 20) // len(block)):
                want.update(block)
            assert r["stdout"].split() == [str(256 << 20), want.hexdigest()], r
            grew = _hwm_kib(own.pid()) - hwm0
            print("# 256 MiB through the egress proxy: coved's peak RSS +%d KiB" % grew)
            assert grew < 32 * 1024, "coved's peak RSS grew by %d KiB" % grew
        finally:
            own.teardown()


# Inside a sandbox: two requests on one connection to ADDR:80, the first
# naming FIRST, the second SECOND; prints every answer's body.
PIPELINE = r"""
import socket, sys
s = socket.create_connection((sys.argv[1], 80), timeout=10)
s.sendall(b"GET /keep HTTP/1.1\r\nHost: " + sys.argv[2].encode() + b"\r\n\r\n" +
          b"GET /keep HTTP/1.1\r\nHost: " + sys.argv[3].encode() + b"\r\nConnection: close\r\n\r\n")
data = b""
while True:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
print(" ".join(p.split(b"\r\n\r\n", 1)[1][:40].decode() for p in data.split(b"HTTP/1.1 200 OK")[1:]) or "none")
"""


def test_egress_http_one_request_per_proxied_connection(_shared):
    """A second request on a kept-alive connection, naming a denied host,
    never reaches the server the first (allowed) name chose: the proxy
    makes the first request the connection's only one. Without a domain
    rule (nothing proxied) the same two requests are both answered, which
    shows the test server keeps connections alive."""
    with _internet() as inet:
        own = Coved(args=["--resolv-conf", inet.resolv]).start()
        try:
            sid = own.create(deny_out=["bad.example.test"])
            r = own.exec(sid, ["python3", "-c", PIPELINE, inet.a, "ok.example.test", "bad.example.test"], timeout=60)
            assert r["stdout"].split() == ["host=A:ok.example.test"], r
            _put(own, sid, deny_out=[])
            r = own.exec(sid, ["python3", "-c", PIPELINE, inet.a, "ok.example.test", "bad.example.test"], timeout=60)
            assert r["stdout"].split() == ["host=A:ok.example.test", "host=A:bad.example.test"], r
        finally:
            own.teardown()

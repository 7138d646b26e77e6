"""A sandbox's network: egress (the default) and none, the policy lists at
create and at runtime, what is always denied, and that nothing is left.

The only outside target is the npm registry (through the host's resolver).
Every other packet goes to loopback or to a test host in a network
namespace this file makes itself ("the internet": a veth from the host to
it, TEST-NET-2 addresses, and 169.254.169.254 given to it too, to prove the
link-local rule without touching any real metadata service)."""
import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
import uuid

import covetest
from covetest import Coved, wait_until

NET = "198.51.100"  # TEST-NET-2: host side .1, test hosts .2 and .3
HOST1, HOST2, LINK_LOCAL = NET + ".2", NET + ".3", "169.254.169.254"
PORT = 8080

# A TCP server for the test host: answers "hi" to every connection.
SERVER = r"""
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(64)
print("ready", flush=True)
while True:
    c, _ = s.accept(); c.sendall(b"hi"); c.close()
"""

# Run inside a sandbox: "ok" if ADDR:PORT answers "hi" within 2 s, else "no".
CLIENT = r"""
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2)
    print("ok" if c.recv(2) == b"hi" else "no")
except OSError:
    print("no")
"""


def _run(*cmd):
    subprocess.run(cmd, check=True, capture_output=True)


@contextlib.contextmanager
def _internet():
    """The test's own network namespace, routed from the host, with a server
    on HOST1, HOST2 and LINK_LOCAL port PORT."""
    tag = uuid.uuid4().hex[:6]
    ns, veth = "covet-" + tag, "ctv" + tag
    servers = []
    try:
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        _run("ip", "addr", "add", NET + ".1/24", "dev", veth)
        _run("ip", "link", "set", veth, "up")
        for a in (HOST1 + "/24", HOST2 + "/24", LINK_LOCAL + "/32"):
            _run("ip", "-n", ns, "addr", "add", a, "dev", "eth0")
        _run("ip", "-n", ns, "link", "set", "eth0", "up")
        _run("ip", "-n", ns, "link", "set", "lo", "up")
        _run("ip", "-n", ns, "route", "add", "default", "via", NET + ".1")
        _run("ip", "route", "add", LINK_LOCAL + "/32", "via", HOST1, "dev", veth)
        for addr in (HOST1, HOST2, LINK_LOCAL):
            p = subprocess.Popen(["ip", "netns", "exec", ns, "python3", "-c", SERVER, addr, str(PORT)],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            servers.append(p)
            assert p.stdout.readline().strip() == b"ready"
        yield ns
    finally:
        for p in servers:
            p.kill()
            p.wait()
        subprocess.run(["ip", "link", "del", veth], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _reach(cv, sid, addr, port=PORT):
    r = cv.exec(sid, ["python3", "-c", CLIENT, addr, str(port)], timeout=20)
    assert r["exit_code"] == 0, r
    return r["stdout"].strip() == "ok"


def _network(cv, sid):
    st, j = cv.api("GET", "/v1/sandboxes/" + sid)
    assert st == 200, (st, j)
    return j["network"]


def _put(cv, sid, **lists):
    return cv.api("PUT", "/v1/sandboxes/%s/network" % sid, lists)


def test_egress_is_the_default_with_addresses_and_resolver(cv):
    sid = cv.create()
    try:
        n = _network(cv, sid)
        assert n["mode"] == "egress" and n["allow_out"] == [] and n["deny_out"] == [], n
        assert n["address"] and n["gateway"] and n["dns"] and n["dns"] != n["gateway"], n
        r = cv.sh(sid, "cat /etc/resolv.conf; cat /proc/net/fib_trie")
        assert "nameserver %s\n" % n["dns"] in r["stdout"], r
        assert n["address"] in r["stdout"], r
        caps = cv.api("GET", "/v1/capabilities")[1]
        assert caps["network"] == ["egress", "none"], caps
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def _npm_view(cv, sid):
    t0 = time.time()
    r = cv.sh(sid, "cd /tmp && HOME=/tmp timeout 60 npm view is-number version --fetch-retries=0 2>&1", timeout=90)
    return r, time.time() - t0


def test_npm_view_answers_with_egress_and_fails_fast_without(cv):
    egress, none = cv.create(), cv.create(network="none")
    try:
        r, _ = _npm_view(cv, egress)
        assert r["exit_code"] == 0 and r["stdout"].strip()[:1].isdigit(), r
        r, took = _npm_view(cv, none)
        assert r["exit_code"] != 0 and took < 15, (r, took)
        assert _network(cv, none) == {"mode": "none", "allow_out": [], "deny_out": []}
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + egress)
        cv.api("DELETE", "/v1/sandboxes/" + none)


def test_allow_and_deny_by_cidr_at_create_and_at_runtime(cv):
    with _internet():
        sid = cv.create(deny_out=[HOST2 + "/32"])
        other = cv.create(network="none")
        try:
            assert _reach(cv, sid, HOST1) and not _reach(cv, sid, HOST2)
            assert not _reach(cv, other, HOST1), "network none reached the test host"
            # An allow list: everything denied but what allow_out names.
            st, j = _put(cv, sid, allow_out=[HOST2], deny_out=["0.0.0.0/0", "::/0"])
            assert st == 200 and j["network"]["allow_out"] == [HOST2], (st, j)
            assert _reach(cv, sid, HOST2) and not _reach(cv, sid, HOST1)
            # Replace semantics: an absent list is emptied.
            st, j = _put(cv, sid, deny_out=[NET + ".0/24"])
            assert st == 200 and j["network"]["allow_out"] == [], (st, j)
            assert not _reach(cv, sid, HOST1) and not _reach(cv, sid, HOST2)
            assert _put(cv, sid)[0] == 200
            assert _reach(cv, sid, HOST1) and _reach(cv, sid, HOST2)
            # A sandbox with network none has no policy to set.
            assert _put(cv, other, deny_out=[HOST1])[0] == 409
        finally:
            cv.api("DELETE", "/v1/sandboxes/" + sid)
            cv.api("DELETE", "/v1/sandboxes/" + other)


def test_denied_domain_is_refused_by_the_resolver(cv):
    sid = cv.create(deny_out=["*.npmjs.org"])
    try:
        r = cv.sh(sid, "getent hosts registry.npmjs.org; echo rc=$?")
        assert "rc=2" in r["stdout"] and "registry" not in r["stdout"].split("rc=")[0], r
        assert _put(cv, sid)[0] == 200
        r = cv.sh(sid, "getent hosts registry.npmjs.org; echo rc=$?")
        assert "rc=0" in r["stdout"], r
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_always_denied_host_api_link_local_other_sandboxes(cv):
    """Whatever allow_out says: not coved's TCP API, not the host's side of
    any veth (the test host's router, the gateway itself but for DNS), not
    169.254.0.0/16, not another sandbox."""
    lsock = socket.socket()
    lsock.bind(("0.0.0.0", 0))
    api_port = lsock.getsockname()[1]
    lsock.close()
    own = Coved(args=["--listen", "0.0.0.0:%d" % api_port]).start()
    with _internet():
        host_srv = subprocess.Popen(["python3", "-c", SERVER, NET + ".1", str(PORT)], stdout=subprocess.PIPE)
        try:
            assert host_srv.stdout.readline().strip() == b"ready"
            everything = ["0.0.0.0/0", "169.254.0.0/16", "10.0.0.0/8"]
            a, b = own.create(allow_out=everything), own.create(allow_out=everything)
            na, nb = _network(own, a), _network(own, b)
            assert _reach(own, a, HOST1), "the control: the test host answers"
            assert not _reach(own, a, LINK_LOCAL), "169.254.169.254 reached"
            assert not _reach(own, a, NET + ".1"), "a host address reached"
            assert not _reach(own, a, na["gateway"], api_port), "coved's TCP API reached on the gateway"
            assert not _reach(own, a, NET + ".1", api_port), "coved's TCP API reached on a host address"
            # b serves; a must not reach it, through b's address or gateway.
            own.exec(b, ["sh", "-c", "cat > /tmp/srv.py"], stdin_b64=__import__("base64").b64encode(
                SERVER.encode()).decode())
            st, _ = own.api("POST", "/v1/sandboxes/%s/exec" % b,
                            {"cmd": ["python3", "/tmp/srv.py", "0.0.0.0", str(PORT)], "background": True})
            assert st in (200, 201), st
            assert wait_until(lambda: _reach(own, b, "127.0.0.1"), 10), "b's own server is up"
            assert not _reach(own, a, nb["address"]), "another sandbox reached"
            assert not _reach(own, a, nb["gateway"]), "another sandbox's gateway reached"
        finally:
            host_srv.kill()
            host_srv.wait()
            own.teardown()


def test_policy_survives_restart_snapshot_restore_and_fork(_shared):
    own = Coved().start()
    try:
        with _internet():
            sid = own.create(deny_out=[HOST2])
            assert _reach(own, sid, HOST1) and not _reach(own, sid, HOST2)
            before = _network(own, sid)
            own.kill(signal.SIGKILL)
            own.start()
            assert _network(own, sid) == before
            assert _reach(own, sid, HOST1) and not _reach(own, sid, HOST2), "policy after a restart"
            st, sn = own.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
            assert st == 201, (st, sn)
            st, r = own.api("POST", "/v1/snapshots/%s/restore" % sn["id"], {})
            assert st == 201, (st, r)
            st, f = own.api("POST", "/v1/sandboxes/%s/fork" % sid, {"count": 1})
            assert st in (200, 201), (st, f)
            fid = f["sandboxes"][0]["id"]
            for copy in (r["id"], fid):
                n = _network(own, copy)
                assert n["deny_out"] == [HOST2] and n["address"] != before["address"], n
                r2 = own.sh(copy, "cat /etc/resolv.conf; getent hosts registry.npmjs.org >/dev/null; echo rc=$?")
                assert "nameserver %s\n" % n["dns"] in r2["stdout"] and "rc=0" in r2["stdout"], r2
                assert _reach(own, copy, HOST1) and not _reach(own, copy, HOST2), copy
            # A runtime change survives a restart too.
            assert _put(own, sid, deny_out=[HOST1])[0] == 200
            own.kill(signal.SIGKILL)
            own.start()
            assert _network(own, sid)["deny_out"] == [HOST1]
            assert not _reach(own, sid, HOST1) and _reach(own, sid, HOST2)
    finally:
        own.teardown()


def test_bad_input_is_a_400_that_changes_nothing(cv):
    count = cv.api("GET", "/v1/health")[1]["sandboxes"]
    for body in ({"allow_out": ["10.0.0.1/8"]}, {"deny_out": ["no spaces.example.org"]},
                 {"deny_out": "10.0.0.0/8"}, {"allow_out": [5]}, {"network": "bridge"},
                 {"isolation": "external", "network": "egress"}):
        st, j = cv.api("POST", "/v1/sandboxes", body)
        assert st == 400 and j["error"]["code"] == "invalid_argument", (body, st, j)
    assert cv.api("GET", "/v1/health")[1]["sandboxes"] == count
    sid = cv.create(deny_out=["192.0.2.0/24"])
    try:
        before = _network(cv, sid)
        for body in ({"deny_out": ["300.1.2.3"]}, {"allow_out": ["*.*.example.org"]}, {"mode": "none"}):
            st, j = cv.api("PUT", "/v1/sandboxes/%s/network" % sid, body)
            assert st == 400, (body, st, j)
        assert _network(cv, sid) == before
        assert cv.api("PUT", "/v1/sandboxes/sb_aaaaaaaaaaaa/network", {})[0] == 404
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def test_cli_network_flags(cv):
    p = cv.cli("create", "--network", "none")
    assert p.returncode == 0, p
    none = p.stdout.decode().strip()
    p = cv.cli("create", "--deny-out", "192.0.2.0/24", "--allow-out", "192.0.2.7")
    assert p.returncode == 0, p
    sid = p.stdout.decode().strip()
    try:
        assert _network(cv, none)["mode"] == "none"
        n = _network(cv, sid)
        assert n["deny_out"] == ["192.0.2.0/24"] and n["allow_out"] == ["192.0.2.7"], n
        p = cv.cli("network", sid, "--deny-out", "*.example.org")
        assert p.returncode == 0 and b"example.org" in p.stdout, p
        assert _network(cv, sid)["allow_out"] == []
        p = cv.cli("network", sid, "--deny-out", "bad/cidr")
        assert p.returncode == 1 and b"deny_out[0]" in p.stderr, p
        p = cv.cli("info", sid)
        assert p.returncode == 0 and b'"gateway"' in p.stdout and b"example.org" in p.stdout, p
        p = cv.cli("run", "--network", "none", "--", "sh", "-c", "cat /proc/net/dev")
        assert p.returncode == 0 and b"eth0" not in p.stdout, p
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)
        cv.api("DELETE", "/v1/sandboxes/" + none)


def _our_links(ids):
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return sorted(n for n in ("cv-" + i[3:] for i in ids) if (" %s@" % n) in out)


def _our_chains(ids):
    out = covetest.nft("list table inet cove")[1]
    assert "table inet cove" in out or not out, out
    return sorted(i for i in ids if ("chain %s " % i) in out or ("chain %s_nat " % i) in out or
                  ('"cv-%s"' % i[3:]) in out)


def _fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


CYCLES = 500


def test_create_delete_cycles_leave_nothing(_shared):
    """CYCLES creates and deletes with egress: no veth, chain, map element,
    pool address or coved fd of theirs is left."""
    own = Coved().start()
    try:
        warm = own.create()
        own.api("DELETE", "/v1/sandboxes/" + warm)
        time.sleep(0.5)
        fds0 = _fds(own.pid())
        ids = []
        t0 = time.time()
        for _ in range(CYCLES):
            sid = own.create()
            ids.append(sid)
            assert own.api("DELETE", "/v1/sandboxes/" + sid)[0] == 200
        took = time.time() - t0
        assert wait_until(lambda: not _our_links(ids) and not _our_chains(ids), 30), \
            (_our_links(ids)[:5], _our_chains(ids)[:5])
        assert wait_until(lambda: _fds(own.pid()) <= fds0, 10), (fds0, _fds(own.pid()))
        # Addresses on links of theirs (the host-wide count moves with the
        # other coveds and tests of a shared host).
        out = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
        addrs = [line for line in out.splitlines() if any((" cv-%s " % i[3:]) in line for i in ids)]
        assert not addrs, addrs[:5]
        print("# %d egress create/delete cycles in %.1f s" % (CYCLES, took))
    finally:
        own.teardown()

"""Templates (POST/GET/DELETE /v1/templates, create's "template"), start
commands and readiness checks, and warm pools (a template's "warm", coved
--warm). What a template sets is seen inside a sandbox made from it; a
create's own fields win; a readiness check that never passes fails the
create with nothing left; a pool's sandboxes are handed out once, with the
create's limits and env, replaced in the background, never listed, and gone
after a restart."""
import os
import signal
import threading
import time

import covetest
from covetest import wait_until

_n = [0]


def _name(prefix):
    _n[0] += 1
    return "%s-%d-%d" % (prefix, os.getpid(), _n[0])


def _cg(sid, hier, key):
    with open("/sys/fs/cgroup/%s/cove/%s/%s" % (hier, sid, key)) as f:
        return f.read().strip()


def _listed(cv):
    st, j = cv.api("GET", "/v1/sandboxes")
    assert st == 200, (st, j)
    return {s["id"] for s in j["sandboxes"]}


def _template(cv, **body):
    st, j = cv.api("POST", "/v1/templates", body)
    assert st == 201, (st, j)
    return j


def _pool(cv, name):
    st, j = cv.api("GET", "/v1/templates/" + name)
    assert st == 200, (st, j)
    return j["pool"]


def test_template_fields_seen_inside_and_overrides_win(coved):
    name = _name("fields")
    _template(coved, name=name, memory="200M", cpus=0.5, pids=100, env={"A": "from-template", "B": "b"},
              cwd="/tmp", user="nobody")
    st, sb = coved.api("POST", "/v1/sandboxes", {"template": name})
    assert st == 201, (st, sb)
    sid = sb["id"]
    try:
        assert sb["template"] == name and sb["memory"] == 200 << 20 and sb["cpus"] == 0.5, sb
        assert _cg(sid, "memory", "memory.limit_in_bytes") == str(200 << 20)
        assert _cg(sid, "pids", "pids.max") == "100"
        assert _cg(sid, "cpu", "cpu.cfs_quota_us") == str(int(_cg(sid, "cpu", "cpu.cfs_period_us")) // 2)
        r = coved.exec(sid, "env; echo cwd=$(pwd); echo user=$(id -un)")
        assert "A=from-template\n" in r["stdout"] and "B=b\n" in r["stdout"], r
        assert "cwd=/tmp\n" in r["stdout"] and "user=nobody\n" in r["stdout"], r
    finally:
        coved.api("DELETE", "/v1/sandboxes/" + sid)
    # Each field overridable; env merged name by name.
    st, sb = coved.api("POST", "/v1/sandboxes", {"template": name, "memory": "300M", "pids": 200, "user": "root",
                                                 "cwd": "/", "env": {"B": "from-create"}})
    assert st == 201, (st, sb)
    sid = sb["id"]
    try:
        assert _cg(sid, "memory", "memory.limit_in_bytes") == str(300 << 20)
        assert _cg(sid, "pids", "pids.max") == "200"
        r = coved.exec(sid, "env; echo cwd=$(pwd); echo user=$(id -un)")
        assert "A=from-template\n" in r["stdout"] and "B=from-create\n" in r["stdout"], r
        assert "cwd=/\n" in r["stdout"] and "user=root\n" in r["stdout"], r
    finally:
        coved.api("DELETE", "/v1/sandboxes/" + sid)
    assert coved.api("DELETE", "/v1/templates/" + name)[0] == 200


def test_template_routes_and_bad_input_change_nothing(coved):
    name = _name("crud")
    t = _template(coved, name=name, memory="256M", env={"K": "v"}, disk="2G", idle_timeout=300,
                  network="none")
    assert t["name"] == name and t["warm"] == 0 and t["disk"] == "2G" and t["idle_timeout"] == 300, t
    st, j = coved.api("GET", "/v1/templates")
    assert st == 200 and name in [x["name"] for x in j["templates"]], j
    st, j = coved.api("GET", "/v1/templates/" + name)
    assert st == 200 and j["env"] == {"K": "v"} and j["from_snapshot"] is None, j
    before = [x["name"] for x in coved.api("GET", "/v1/templates")[1]["templates"]]
    sandboxes = _listed(coved)
    bad = [
        (409, {"name": name}),
        (400, {"name": _name("x"), "bogus": 1}),
        (400, {"name": _name("x"), "ephemeral": True}),
        (400, {"name": "../x"}),
        (400, {}),
        (400, {"name": _name("x"), "warm": -1}),
        (400, {"name": _name("x"), "warm": "2"}),
        (400, {"name": _name("x"), "memory": "lots"}),
        (400, {"name": _name("x"), "env": {"A": 1}}),
        (400, {"name": _name("x"), "ready": {}}),
        (400, {"name": _name("x"), "ready": {"port": 0}}),
        (400, {"name": _name("x"), "ready": {"port": 80, "cmd": "true"}}),
        (400, {"name": _name("x"), "ready": {"url": "https://127.0.0.1/"}}),
        (400, {"name": _name("x"), "ready": {"url": "http://example.org/"}}),
        (400, {"name": _name("x"), "ready": {"cmd": "true", "timeout": 0}}),
        (400, {"name": _name("x"), "start": []}),
        (400, {"name": _name("x"), "disk": "-1"}),
        (400, {"name": _name("x"), "network": "wide"}),
        (404, {"name": _name("x"), "image": "no-such-image"}),
        (404, {"name": _name("x"), "from_snapshot": "sn_aaaaaaaaaaaa"}),
    ]
    for status, body in bad:
        st, j = coved.api("POST", "/v1/templates", body)
        assert st == status and "error" in j, (body, st, j)
    assert [x["name"] for x in coved.api("GET", "/v1/templates")[1]["templates"]] == before
    for status, body in [(404, {"template": _name("none")}), (400, {"template": name, "bogus": 1}),
                         (400, {"template": 7}), (400, {"template": name, "memory": "1K"})]:
        st, j = coved.api("POST", "/v1/sandboxes", body)
        assert st == status, (body, st, j)
    assert _listed(coved) == sandboxes
    # A sandbox made from it does not depend on it.
    st, sb = coved.api("POST", "/v1/sandboxes", {"template": name})
    assert st == 201 and sb["network"]["mode"] == "none", (st, sb)
    assert coved.api("DELETE", "/v1/templates/" + name)[0] == 200
    assert coved.api("GET", "/v1/templates/" + name)[0] == 404
    assert coved.api("DELETE", "/v1/templates/" + name)[0] == 404
    assert coved.exec(sb["id"], "echo alive")["stdout"] == "alive\n"
    coved.api("DELETE", "/v1/sandboxes/" + sb["id"])


GET = ("python3 -c 'import urllib.request as u; "
       "print(u.urlopen(\"http://127.0.0.1:%d/\", timeout=5).status)'")


def test_readiness_by_port_url_and_command(coved):
    """Create answers once the check passes: the server answers at once."""
    name = _name("web")
    _template(coved, name=name, start="cd /tmp && python3 -m http.server 8123 --bind 127.0.0.1",
              ready={"port": 8123, "timeout": 60})
    st, sb = coved.api("POST", "/v1/sandboxes", {"template": name}, timeout=120)
    assert st == 201 and sb["start"][-1].endswith("8123 --bind 127.0.0.1"), (st, sb)
    try:
        assert coved.exec(sb["id"], GET % 8123)["stdout"] == "200\n"
        st, procs = coved.api("GET", "/v1/sandboxes/%s/processes" % sb["id"])
        assert any(p.get("tag") == "start" and p["state"] == "running" for p in procs["processes"]), procs
    finally:
        coved.api("DELETE", "/v1/sandboxes/" + sb["id"])
        coved.api("DELETE", "/v1/templates/" + name)
    # A URL that answers (the create's own start and ready, no template).
    st, sb = coved.api("POST", "/v1/sandboxes",
                       {"start": ["python3", "-m", "http.server", "8124", "--bind", "127.0.0.1"],
                        "ready": {"url": "http://localhost:8124/", "timeout": 60}}, timeout=120)
    assert st == 201, (st, sb)
    try:
        assert coved.exec(sb["id"], GET % 8124)["stdout"] == "200\n"
    finally:
        coved.api("DELETE", "/v1/sandboxes/" + sb["id"])
    # A command that succeeds only once the start command has done its work.
    st, sb = coved.api("POST", "/v1/sandboxes",
                       {"start": "sleep 0.5; echo done > /tmp/ready; exec sleep 1000",
                        "ready": {"cmd": "test -s /tmp/ready", "timeout": 60}}, timeout=120)
    assert st == 201, (st, sb)
    try:
        assert coved.exec(sb["id"], "cat /tmp/ready")["stdout"] == "done\n"
    finally:
        coved.api("DELETE", "/v1/sandboxes/" + sb["id"])


def test_readiness_that_never_passes_fails_clearly_and_leaves_nothing(coved):
    sandboxes, dirs = _listed(coved), set(coved.sandbox_dirs())
    cases = [
        ({"ready": {"port": 9, "timeout": 1}}, "nothing listens on port 9"),
        ({"ready": {"cmd": "exit 3", "timeout": 1}}, "exited with status 3"),
        ({"ready": {"url": "http://127.0.0.1:9/", "timeout": 1}}, "did not answer"),
        # Not at the timeout: an ended start command fails it at once.
        ({"start": "exit 7", "ready": {"port": 9, "timeout": 600}}, "start command exited with status 7"),
    ]
    for body, words in cases:
        st, j = coved.api("POST", "/v1/sandboxes", body, timeout=700)
        assert st == 504 and j["error"]["code"] == "not_ready" and words in j["error"]["message"], (body, st, j)
    assert _listed(coved) == sandboxes
    assert wait_until(lambda: set(coved.sandbox_dirs()) <= dirs, 30), (coved.sandbox_dirs(), dirs)


def test_template_from_snapshot(coved):
    src = coved.create(memory="300M", env={"FROM": "snapshot"})
    assert coved.exec(src, "echo kept > /root/file")["exit_code"] == 0
    st, sn = coved.api("POST", "/v1/sandboxes/%s/snapshots" % src, {})
    assert st == 201, (st, sn)
    name = _name("snap")
    try:
        t = _template(coved, name=name, from_snapshot=sn["id"], env={"T": "t"})
        assert t["from_snapshot"] == sn["id"], t
        st, sb = coved.api("POST", "/v1/sandboxes", {"template": name})
        assert st == 201, (st, sb)
        try:
            r = coved.exec(sb["id"], "cat /root/file; echo $FROM $T")
            assert r["stdout"] == "kept\nsnapshot t\n", r
            assert _cg(sb["id"], "memory", "memory.limit_in_bytes") == str(300 << 20)
        finally:
            coved.api("DELETE", "/v1/sandboxes/" + sb["id"])
        # The snapshot is the template's: kept while the template is.
        st, j = coved.api("DELETE", "/v1/snapshots/" + sn["id"])
        assert st == 409 and name in j["error"]["message"], (st, j)
        st, j = coved.api("POST", "/v1/templates", {"name": _name("x"), "from_snapshot": sn["id"], "image": "host"})
        assert st == 400, (st, j)
    finally:
        coved.api("DELETE", "/v1/templates/" + name)
        coved.api("DELETE", "/v1/sandboxes/" + src)
    assert coved.api("DELETE", "/v1/snapshots/" + sn["id"])[0] == 200


def _wait_pool(cv, name, n, timeout=120):
    return wait_until(lambda: _pool(cv, name)["ready"] == n, timeout, 0.1)


def test_warm_pool_hands_out_ready_sandboxes_once(_shared):
    cv = covetest.Coved().start()
    try:
        name = _name("warm")
        _template(cv, name=name, warm=2, memory="256M", env={"T": "t"},
                  start="python3 -m http.server 8125 --bind 127.0.0.1", ready={"port": 8125})
        assert _wait_pool(cv, name, 2), _pool(cv, name)
        assert _listed(cv) == set()  # a pool's sandboxes are nobody's
        t_request = covetest_now_ms()
        st, a = cv.api("POST", "/v1/sandboxes", {"template": name, "memory": "200M", "env": {"C": "c"},
                                                 "name": "mine"})
        assert st == 201 and a["from_pool"] is True and a["name"] == "mine", (st, a)
        assert a["created_at"] < t_request, a  # started before it was asked for
        assert _cg(a["id"], "memory", "memory.limit_in_bytes") == str(200 << 20)
        r = cv.exec(a["id"], "echo $T $C; " + GET % 8125)
        assert r["stdout"] == "t c\n200\n", r
        assert _listed(cv) == {a["id"]}
        # Refilled in the background.
        assert _wait_pool(cv, name, 2), _pool(cv, name)
        # Creates at once never share a sandbox, and never get one handed out before.
        got, errs = [], []

        def one():
            st2, j = cv.api("POST", "/v1/sandboxes", {"template": name}, timeout=120)
            (got if st2 == 201 else errs).append(j if st2 == 201 else (st2, j))

        threads = [threading.Thread(target=one) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errs and len(got) == 3, errs
        ids = [j["id"] for j in got]
        assert len(set(ids)) == 3 and a["id"] not in ids, ids
        assert sum(j["from_pool"] for j in got) >= 2, got  # the third may have been cold
        assert _listed(cv) == set(ids) | {a["id"]}
        # A create the pool cannot serve (another start command) starts cold.
        st, c = cv.api("POST", "/v1/sandboxes", {"template": name, "start": "sleep 1000", "ready": None})
        assert st == 201 and c["from_pool"] is False, (st, c)
        # Deleting the template deletes its pool, not what it handed out.
        assert _wait_pool(cv, name, 2), _pool(cv, name)
        assert cv.api("DELETE", "/v1/templates/" + name)[0] == 200
        assert _listed(cv) == set(ids) | {a["id"], c["id"]}
        assert wait_until(lambda: len(cv.sandbox_dirs()) == 5, 30), cv.sandbox_dirs()
    finally:
        cv.teardown()


def covetest_now_ms():
    return int(time.time() * 1000)


def test_warm_pool_leaves_no_orphans_across_restarts(_shared):
    cv = covetest.Coved(args=["--warm", "2"]).start()
    try:
        assert wait_until(lambda: len(cv.sandbox_dirs()) == 2, 120), cv.sandbox_dirs()
        st, mine = cv.api("POST", "/v1/sandboxes", {"env": {"E": "e"}})
        assert st == 201 and mine["from_pool"] is True and mine["template"] is None, (st, mine)
        assert cv.exec(mine["id"], "echo $E")["stdout"] == "e\n"
        assert wait_until(lambda: len(cv.sandbox_dirs()) == 3, 120), cv.sandbox_dirs()
        pooled = set(cv.sandbox_dirs()) - {mine["id"]}
        # SIGKILL: the next start deletes the old pool and makes a new one.
        cv.kill()
        cv.start()
        gone = lambda: not (set(cv.sandbox_dirs()) & pooled) and not any(covetest.cgroup_dirs(s) for s in pooled)
        assert wait_until(gone, 60), (cv.sandbox_dirs(), pooled)
        assert wait_until(lambda: len(cv.sandbox_dirs()) == 3, 120), cv.sandbox_dirs()
        assert _listed(cv) == {mine["id"]}
        assert cv.exec(mine["id"], "echo $E")["stdout"] == "e\n"
        # SIGTERM: the pool goes with coved, what was handed out stays.
        pooled = set(cv.sandbox_dirs()) - {mine["id"]}
        cv.kill(signal.SIGTERM)
        assert set(cv.sandbox_dirs()) == {mine["id"]}, cv.sandbox_dirs()
        assert not any(covetest.cgroup_dirs(s) for s in pooled), pooled
        cv.start()
        assert _listed(cv) == {mine["id"]}
    finally:
        cv.teardown()


def test_templates_survive_a_restart(_shared):
    cv = covetest.Coved().start()
    try:
        _template(cv, name="kept", memory="128M", env={"K": "1"}, warm=1)
        assert _wait_pool(cv, "kept", 1), _pool(cv, "kept")
        cv.kill()
        cv.start()
        st, t = cv.api("GET", "/v1/templates/kept")
        assert st == 200 and t["env"] == {"K": "1"} and t["warm"] == 1, (st, t)
        assert _wait_pool(cv, "kept", 1), _pool(cv, "kept")
        st, sb = cv.api("POST", "/v1/sandboxes", {"template": "kept"})
        assert st == 201 and sb["memory"] == 128 << 20 and sb["env"] == {"K": "1"}, (st, sb)
    finally:
        cv.teardown()

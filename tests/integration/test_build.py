"""Dockerfile builds (issue 11, item 7): a build with every instruction
(FROM an image imported here, RUN in shell and exec form, COPY with
--chown, globs and .dockerignore, ADD of a local tar, ENV, ARG with
--build-arg and defaults, WORKDIR, USER, LABEL, EXPOSE, CMD, ENTRYPOINT),
the image run with its Env/WorkingDir/User/Cmd seen inside; the cache hit
for every step on a second build (no RUN runs again), a changed file
invalidating from its COPY on; a failing RUN, a client that hangs up and
bad Dockerfiles leaving no image, sandbox, layer or scratch file behind.
FROM host (and a template on host): the host's /usr and /opt under what
RUN wrote there, kept by the cache, snapshots and forks.
RUN steps need no network; nothing leaves loopback."""
import io
import json
import os
import shutil
import socket
import tarfile
import tempfile
import time

import covetest
import imagekit

APPLETS = imagekit.APPLETS + ["mkdir", "rm", "false", "wc"]

DOCKERFILE = """# every instruction a Dockerfile of one stage has
ARG BASE=bb:1
FROM ${BASE}
ARG GREETING=hello
ARG FLAVOR
ENV GREETING=${GREETING} \\
    PATH=/bin
LABEL org.example.team="builders" version=1
WORKDIR /app
COPY --chown=app:app src/ ./src/
COPY ["data.tar", "/opt/raw/"]
ADD data.tar /opt/unpacked/
COPY --chown=1000 *.log /logs/
COPY *.txt ./
RUN echo "building $GREETING $FLAVOR"; \\
    echo "$GREETING $FLAVOR" > /app/greeting
RUN ["/bin/sh", "-c", "id -u > /app/built-as; rm /etc/group"]
USER app
RUN id -u > /tmp/user-run
EXPOSE 8080 53/udp
ENTRYPOINT ["sh", "-c"]
CMD ["echo started as $(id -u) in $PWD > /tmp/started; exec sleep 1000"]
"""


def base_image(cv):
    """busybox with a few more applets, as bb:1."""
    img = imagekit.Image([imagekit.base_layer(APPLETS)])
    st, j = cv.api("POST", "/v1/images?name=bb:1", raw=imagekit.docker_archive(img, ["bb:1"]))
    assert st == 201, j
    return j["id"]


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def inner_tar():
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w") as t:
        data = b"from the archive\n"
        ti = tarfile.TarInfo("inner/file.txt")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    return b.getvalue()


def context(dockerfile=DOCKERFILE):
    d = tempfile.mkdtemp(prefix="cove-build-")
    write(os.path.join(d, "Dockerfile"), dockerfile)
    write(os.path.join(d, ".dockerignore"), "# not sent to any step\nsecret.txt\n*.log\n!keep.log\nsrc/tmp\n")
    write(os.path.join(d, "src/main.c"), "int main(void) { return 0; }\n")
    write(os.path.join(d, "src/tmp/junk"), "junk\n")
    write(os.path.join(d, "a.txt"), "a\n")
    write(os.path.join(d, "b.txt"), "b\n")
    write(os.path.join(d, "secret.txt"), "secret\n")
    write(os.path.join(d, "x.log"), "x\n")
    write(os.path.join(d, "keep.log"), "keep\n")
    write(os.path.join(d, "data.tar"), inner_tar())
    os.chown(os.path.join(d, "b.txt"), 200000, 200000)  # no sandbox maps it: the CLI sends owners as 0:0
    return d


def context_tar(d):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w") as t:
        for n in sorted(os.listdir(d)):
            t.add(os.path.join(d, n), arcname=n, filter=lambda ti: (setattr(ti, "uid", 0), setattr(ti, "gid", 0),
                                                                     ti)[2])
    return b.getvalue()


def build_api(cv, tar, query=""):
    """POST /v1/images/build: (status, events or the error answer)."""
    c = cv.conn(300)
    try:
        c.request("POST", "/v1/images/build" + query, body=tar)
        r = c.getresponse()
        text = r.read().decode()
        if r.status != 200:
            return r.status, json.loads(text)
        return r.status, [json.loads(line) for line in text.splitlines() if line]
    finally:
        c.close()


def layer_steps(events):
    """{instruction: cached} of the steps that make a layer."""
    steps, out = {}, {}
    for e in events:
        if e["type"] == "step":
            steps[e["step"]] = e["instruction"]
        elif e["type"] == "step_done" and "cached" in e:
            out[steps[e["step"]]] = e["cached"]
    return out


def leftovers(cv):
    """What a build may leave: images, sandboxes (listed and on disk),
    layer trees, scratch folders."""
    images = os.path.join(cv.data, "pool", "images")
    st, listed = cv.api("GET", "/v1/images")
    st2, sbs = cv.api("GET", "/v1/sandboxes")
    builds = os.path.join(images, "builds")
    return (sorted(i["id"] for i in listed["images"]), sorted(s["id"] for s in sbs["sandboxes"]),
            cv.sandbox_dirs(), sorted(os.listdir(os.path.join(images, "layers"))),
            sorted(os.listdir(builds)) if os.path.isdir(builds) else [])


def settled(cv, before):
    """Wait for deletions (they finish after the answer) to reach before."""
    covetest.wait_until(lambda: leftovers(cv) == before, 60)
    return leftovers(cv)


def run_on(cv, image, cmd):
    """cmd's result in a new sandbox of image, deleted after."""
    sid = cv.create(image=image)
    try:
        return cv.exec(sid, cmd)
    finally:
        cv.api("DELETE", "/v1/sandboxes/" + sid)


def check_built_image(cv, sid):
    st, sb = cv.api("GET", "/v1/sandboxes/" + sid)
    assert st == 200, sb
    assert sb["cwd"] == "/app" and sb["user"] == "app", sb
    assert sb["start"] == ["sh", "-c", "echo started as $(id -u) in $PWD > /tmp/started; exec sleep 1000"], sb
    assert sorted(sb["exposed_ports"]) == ["53/udp", "8080/tcp"], sb
    assert sb["labels"] == {"org.example.team": "builders", "version": "1"}, sb
    r = cv.exec(sid, ["sh", "-c", "echo $GREETING; id -u; pwd; cat greeting built-as /tmp/user-run; "
                      "stat -c '%u:%g %n' src src/main.c /logs/keep.log; ls /app; ls /app/src; ls /logs; "
                      "cat /opt/unpacked/inner/file.txt; ls /opt/raw; test -e /etc/group || echo no-group"])
    assert r["exit_code"] == 0, r
    assert r["stdout"].split("\n") == [
        "hello", "1000", "/app", "hello mint", "0", "1000",
        "1000:1000 src", "1000:1000 src/main.c", "1000:1000 /logs/keep.log",
        "a.txt", "b.txt", "built-as", "greeting", "src", "main.c", "keep.log",
        "from the archive", "data.tar", "no-group", ""], r
    started = covetest.wait_until(lambda: cv.exec(sid, ["cat", "/tmp/started"])["stdout"], 60)
    assert started == "started as 1000 in /app\n", started


def test_build_every_instruction_and_cache(coved):
    base_image(coved)
    ctx = context()
    try:
        # the CLI: steps and RUN's output as they come, the ID on stdout
        r = coved.cli("build", "-t", "built:1", "--build-arg", "FLAVOR=mint", ctx, timeout=300)
        assert r.returncode == 0, r
        err = r.stderr.decode()
        assert "#1/19 ARG BASE=bb:1" in err and "building hello mint" in err, err
        image_id = r.stdout.decode().strip()
        assert image_id.startswith("sha256:"), r
        st, img = coved.api("GET", "/v1/images/built:1")
        assert st == 200 and img["id"] == image_id and img["config"]["working_dir"] == "/app", img
        assert img["layers"] == 1 + 9, img  # the base, WORKDIR, 5 COPY/ADD, 3 RUN
        ls = coved.cli("image", "ls")
        assert ls.returncode == 0 and "built:1" in ls.stdout.decode(), ls
        sid = coved.create(image="built:1")
        try:
            check_built_image(coved, sid)
        finally:
            coved.api("DELETE", "/v1/sandboxes/" + sid)

        # again: every layer from the cache, no RUN runs (no output)
        q = "?tag=built:2&build_args=%7B%22FLAVOR%22%3A%22mint%22%7D"
        st, events = build_api(coved, context_tar(ctx), q)
        assert st == 200, events
        steps = layer_steps(events)
        assert len(steps) == 9 and all(steps.values()), steps
        assert not [e for e in events if e["type"] == "output"], events
        assert events[-1]["type"] == "image" and events[-1]["image"]["id"] == image_id, events[-1]

        # a.txt changed: from its COPY on, made again (the RUNs run)
        write(os.path.join(ctx, "a.txt"), "a, changed\n")
        st, events = build_api(coved, context_tar(ctx), q)
        assert st == 200, events
        steps = layer_steps(events)
        order = list(steps)
        changed = order.index("COPY *.txt ./")
        assert all(steps[s] for s in order[:changed]), steps
        assert not any(steps[s] for s in order[changed:]), steps
        assert [e["data"] for e in events if e["type"] == "output"] == ["building hello mint\n"], events
        assert events[-1]["image"]["id"] != image_id
        # a build arg is an input of the RUNs that see it
        st, events = build_api(coved, context_tar(ctx), "?build_args=%7B%22FLAVOR%22%3A%22lime%22%7D")
        assert st == 200 and [e["data"] for e in events if e["type"] == "output"] == ["building hello lime\n"]
        for name in ("built:1", "built:2"):
            coved.api("DELETE", "/v1/images/" + name)
        coved.api("POST", "/v1/images/prune", {"all": True})
    finally:
        shutil.rmtree(ctx)


def test_build_failing_run_leaves_nothing(coved):
    base_image(coved)
    ctx = context("FROM bb:1\nCOPY a.txt b.txt /x/\nRUN echo doomed output; echo to stderr >&2; exit 3\n"
                  "CMD [\"sh\"]\n")
    try:
        before = leftovers(coved)
        r = coved.cli("build", "-t", "doomed:1", ctx, timeout=300)
        err = r.stderr.decode()
        assert r.returncode != 0, r
        assert "doomed output" in err and "to stderr" in err and "line 3: RUN exited with status 3" in err, err
        assert settled(coved, before) == before
        st, j = coved.api("GET", "/v1/images/doomed:1")
        assert st == 404, j
    finally:
        shutil.rmtree(ctx)


def test_build_client_gone_leaves_nothing(coved):
    base_image(coved)
    ctx = context("FROM bb:1\nCOPY a.txt /x/\nRUN echo long run; sleep 1000\n")
    try:
        before = leftovers(coved)
        tar = context_tar(ctx)
        s = socket.socket(socket.AF_UNIX)
        s.connect(coved.socket)
        s.sendall(b"POST /v1/images/build?tag=gone:1 HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(tar) +
                  tar)
        got = b""
        deadline = time.time() + 120
        while b"long run" not in got and time.time() < deadline:
            got += s.recv(65536)
        assert b"long run" in got, got
        st, sbs = coved.api("GET", "/v1/sandboxes")
        assert len(sbs["sandboxes"]) == len(before[1]) + 1, sbs
        s.close()
        assert settled(coved, before) == before
    finally:
        shutil.rmtree(ctx)


def test_build_bad_dockerfiles(coved):
    base_image(coved)
    before = leftovers(coved)
    cases = [
        ("FROM bb:1\nRUN true\nFETCH x\n", 400, "line 3: unknown instruction 'FETCH'"),
        ("# no base\nRUN true\n", 400, "line 2: RUN before FROM"),
        ("", 400, "no FROM"),
        ("FROM bb:1\n\nCOPY ../outside /x\n", 400, "line 3: COPY source '../outside' is outside the build context"),
        ("FROM bb:1\nADD http://127.0.0.1:9/x /x\n", 400, "line 2: ADD from a URL"),
        ("FROM nosuch:1\n", 404, "line 1: FROM: no image 'nosuch:1'"),
    ]
    for text, status, want in cases:
        ctx = context(text)
        try:
            st, j = build_api(coved, context_tar(ctx), "?tag=bad:1")
            assert st == status and want in j["error"]["message"], (text, st, j)
        finally:
            shutil.rmtree(ctx)
    ctx = context()
    try:
        st, j = build_api(coved, context_tar(ctx), "?dockerfile=missing/Dockerfile")
        assert st == 400 and "no 'missing/Dockerfile' in the build context" in j["error"]["message"], j
        st, j = build_api(coved, context_tar(ctx), "?build_args=%5B1%5D")
        assert st == 400 and "build_args" in j["error"]["message"], j
    finally:
        shutil.rmtree(ctx)
    st, j = build_api(coved, b"not a tar at all" * 100)
    assert st == 400 and "build context" in j["error"]["message"], j
    assert settled(coved, before) == before
    # the CLI says so too, and exits non-zero
    ctx = context("FROM bb:1\nBOGUS\n")
    try:
        r = coved.cli("build", ctx)
        assert r.returncode != 0 and "line 2: unknown instruction 'BOGUS'" in r.stderr.decode(), r
    finally:
        shutil.rmtree(ctx)


def test_build_from_a_template(coved):
    """FROM a template: its image, with the template's env, cwd and user."""
    base_image(coved)
    name = "bb-tpl-%d" % os.getpid()
    st, t = coved.api("POST", "/v1/templates", {"name": name, "image": "bb:1", "env": {"FROM_TEMPLATE": "yes"},
                                                 "cwd": "/home/app", "user": "app"})
    assert st == 201, t
    ctx = context("FROM %s\nRUN echo $FROM_TEMPLATE $(id -u) > got; pwd >> got\n" % name)
    try:
        st, events = build_api(coved, context_tar(ctx), "?tag=from-tpl:1")
        assert st == 200 and events[-1]["type"] == "image", events
        cfg = events[-1]["image"]["config"]
        assert "FROM_TEMPLATE=yes" in cfg["env"] and cfg["working_dir"] == "/home/app" and cfg["user"] == "app", cfg
        r = run_on(coved, "from-tpl:1", ["cat", "/home/app/got"])
        assert r["stdout"] == "yes 1000\n/home/app\n", r
        coved.api("DELETE", "/v1/images/from-tpl:1")
    finally:
        coved.api("DELETE", "/v1/templates/" + name)
        shutil.rmtree(ctx)


def test_build_cut_by_a_crash_leaves_nothing(coved):
    """coved killed in the middle of a RUN: the next start deletes the
    build's sandbox and scratch files, and a prune its layers."""
    cv = covetest.Coved().start()
    ctx = context("FROM bb:1\nCOPY a.txt /x/\nRUN echo long run; sleep 1000\n")
    try:
        base_image(cv)
        before = leftovers(cv)
        tar = context_tar(ctx)
        s = socket.socket(socket.AF_UNIX)
        s.connect(cv.socket)
        s.sendall(b"POST /v1/images/build HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(tar) + tar)
        got = b""
        deadline = time.time() + 120
        while b"long run" not in got and time.time() < deadline:
            got += s.recv(65536)
        assert b"long run" in got, got
        cv.kill()
        s.close()
        cv.start()
        cv.api("POST", "/v1/images/prune", {"all": False})
        assert settled(cv, before) == before
    finally:
        shutil.rmtree(ctx)
        cv.teardown()


def test_build_on_the_overlay_driver(coved):
    """The same build on a pool of plain folders (--storage overlay): each
    layer a copy of the one below, the cache found again."""
    cv = covetest.Coved(args=["--storage", "overlay"]).start()
    ctx = context()
    try:
        base_image(cv)
        q = "?tag=ov:1&build_args=%7B%22FLAVOR%22%3A%22mint%22%7D"
        st, events = build_api(cv, context_tar(ctx), q)
        assert st == 200 and events[-1]["type"] == "image", events
        sid = cv.create(image="ov:1")
        try:
            check_built_image(cv, sid)
        finally:
            cv.api("DELETE", "/v1/sandboxes/" + sid)
        st, events = build_api(cv, context_tar(ctx), q)
        steps = layer_steps(events)
        assert st == 200 and len(steps) == 9 and all(steps.values()), steps
        # FROM host: its first layer a copy of the host image
        write(os.path.join(ctx, "Dockerfile"), HOST_DOCKERFILE)
        st, events = build_api(cv, context_tar(ctx), "?tag=ovhost:1")
        assert st == 200 and events[-1]["type"] == "image", events
        sid = cv.create(image="ovhost:1")
        try:
            assert host_seen(cv, sid) == HOST_SEEN
        finally:
            cv.api("DELETE", "/v1/sandboxes/" + sid)
    finally:
        shutil.rmtree(ctx)
        cv.teardown()


def test_build_arg_and_env_scopes(coved):
    """As Docker: an ARG before FROM is FROM's alone until declared again
    after it (then with its value); an ENV's values see the env before it."""
    base_image(coved)
    ctx = context("ARG V=outer\nARG W=w\nFROM bb:1\nRUN echo \"1[$V]\"\nARG V\nENV A=1 B=$A\n"
                  "ENV C=$A\nRUN echo \"2[$V] [$B] [$C] [$W]\"\n")
    try:
        st, events = build_api(coved, context_tar(ctx))
        assert st == 200, events
        assert [e["data"] for e in events if e["type"] == "output"] == ["1[]\n", "2[outer] [] [1] []\n"], events
        assert events[-1]["image"]["config"]["env"] == ["A=1", "B=", "C=1"], events[-1]
        coved.api("DELETE", "/v1/images/" + events[-1]["image"]["id"])
    finally:
        shutil.rmtree(ctx)


def test_build_run_writes_usr_on_an_image(coved):
    """On an image (no host layers), what a RUN writes under /usr and /opt
    is in its layer like any other file."""
    base_image(coved)
    ctx = context("FROM bb:1\nRUN mkdir -p /usr/local/bin /opt/o && echo u > /usr/local/bin/u && echo o > /opt/o/o\n")
    try:
        st, events = build_api(coved, context_tar(ctx))
        assert st == 200 and events[-1]["type"] == "image", events
        image_id = events[-1]["image"]["id"]
        r = run_on(coved, image_id, ["cat", "/usr/local/bin/u", "/opt/o/o"])
        assert r["exit_code"] == 0 and r["stdout"] == "u\no\n", r
        coved.api("DELETE", "/v1/images/" + image_id)
    finally:
        shutil.rmtree(ctx)


HOST_DOCKERFILE = """FROM host
ENV APPV=7
WORKDIR /srv/app
COPY a.txt ./
RUN mkdir -p /usr/local/lib/x && echo hi > /usr/local/lib/x/f
RUN echo a > /opt/a
RUN echo "built $APPV" > built; rm -f /usr/local/lib/x/none
CMD ["sleep", "1000"]
"""

HOST_CHECK = ("python3 -c 'print(6 * 7)'; cat /usr/local/lib/x/f /opt/a a.txt built; "
              "stat -c '%u:%g %a %n' /usr/local/lib/x/f /opt/a a.txt; echo $APPV; pwd; "
              "test -x /usr/bin/env && echo host-usr")
HOST_SEEN = ["42", "hi", "a", "a", "built 7", "0:0 644 /usr/local/lib/x/f", "0:0 644 /opt/a", "0:0 644 a.txt",
             "7", "/srv/app", "host-usr", ""]


def host_seen(cv, sid, extra=""):
    r = cv.exec(sid, ["sh", "-c", HOST_CHECK + extra])
    assert r["exit_code"] == 0, r
    return r["stdout"].split("\n")


def test_build_from_host(coved):
    """FROM host: a sandbox from the image sees the host's /usr (python3
    runs) and what RUN wrote in /usr/local and /opt, owned by root inside,
    with its ENV, WORKDIR and CMD; the second build is all cache; a
    snapshot's restore and a fork keep it all; deleted, the image leaves
    no layer tree."""
    ctx = context(HOST_DOCKERFILE)
    ids = []
    try:
        before = leftovers(coved)
        r = coved.cli("build", "-t", "onhost:1", ctx, timeout=300)
        assert r.returncode == 0, r
        image_id = r.stdout.decode().strip()
        st, img = coved.api("GET", "/v1/images/onhost:1")
        assert st == 200 and img["id"] == image_id and img["layers"] == 1 + 5, img  # host, WORKDIR, COPY, 3 RUN
        assert "APPV=7" in img["config"]["env"] and img["config"]["working_dir"] == "/srv/app", img
        sid = coved.create(image="onhost:1")
        ids.append(sid)
        st, sb = coved.api("GET", "/v1/sandboxes/" + sid)
        assert sb["start"] == ["sleep", "1000"] and sb["cwd"] == "/srv/app", sb
        assert host_seen(coved, sid) == HOST_SEEN
        # the sandbox's own writes in /usr, kept by a snapshot and a fork
        r = coved.exec(sid, ["sh", "-c", "echo mine > /usr/local/lib/x/mine && echo o2 > /opt/b"])
        assert r["exit_code"] == 0, r
        extra = "; cat /usr/local/lib/x/mine /opt/b"
        st, sn = coved.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
        assert st == 201, sn
        ids.append(sn["id"])
        st, rs = coved.api("POST", "/v1/snapshots/%s/restore" % sn["id"], {})
        assert st == 201, rs
        ids.append(rs["id"])
        st, fk = coved.api("POST", "/v1/sandboxes/%s/fork" % sid, {"count": 1})
        assert st == 201, fk
        ids.append(fk["sandboxes"][0]["id"])
        for who in (rs["id"], fk["sandboxes"][0]["id"]):
            assert host_seen(coved, who, extra) == HOST_SEEN[:-1] + ["mine", "o2", ""], who

        # again: every layer from the cache, no RUN runs
        st, events = build_api(coved, context_tar(ctx), "?tag=onhost:2")
        assert st == 200, events
        steps = layer_steps(events)
        assert len(steps) == 5 and all(steps.values()), steps
        assert not [e for e in events if e["type"] == "output"], events
        assert events[-1]["image"]["id"] == image_id, events[-1]
    finally:
        for i in reversed(ids):
            coved.api("DELETE", ("/v1/snapshots/" if i.startswith("sn_") else "/v1/sandboxes/") + i)
        for name in ("onhost:1", "onhost:2"):
            coved.api("DELETE", "/v1/images/" + name)
        shutil.rmtree(ctx)
    coved.api("POST", "/v1/images/prune", {"all": False})
    assert settled(coved, before) == before


def test_build_from_a_template_on_host(coved):
    """FROM a template whose image is host: its env and cwd, and the host's
    /usr under the RUN's files."""
    name = "host-tpl-%d" % os.getpid()
    st, t = coved.api("POST", "/v1/templates", {"name": name, "image": "host", "env": {"FROM_TEMPLATE": "yes"},
                                                 "cwd": "/root"})
    assert st == 201, t
    ctx = context("FROM %s\nRUN echo $FROM_TEMPLATE > got && mkdir -p /usr/local/share/t && "
                  "python3 -c 'print(1)' > /usr/local/share/t/p\n" % name)
    try:
        st, events = build_api(coved, context_tar(ctx), "?tag=from-host-tpl:1")
        assert st == 200 and events[-1]["type"] == "image", events
        cfg = events[-1]["image"]["config"]
        assert "FROM_TEMPLATE=yes" in cfg["env"] and cfg["working_dir"] == "/root", cfg
        r = run_on(coved, "from-host-tpl:1", ["sh", "-c", "cat got /usr/local/share/t/p; python3 -c 'print(2)'"])
        assert r["exit_code"] == 0 and r["stdout"] == "yes\n1\n2\n", r
        coved.api("DELETE", "/v1/images/from-host-tpl:1")
    finally:
        coved.api("DELETE", "/v1/templates/" + name)
        shutil.rmtree(ctx)

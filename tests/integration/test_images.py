"""Images (issue 11, items 1-4 and 8): import of an OCI image layout and a
docker archive made here by hand, pulls from Debian's docker-registry
started on 127.0.0.1 by the test (anonymous, token auth from a token server
of the test's own, an index, gzip and zstd layers, layers downloaded at
once, a connection cut halfway by a loopback proxy and the pull resumed), sandboxes from the images with
their Env, WorkingDir, User and Cmd seen inside, hostile archives and
mismatched digests refused with nothing left, and reference counts. No
traffic leaves loopback."""
import atexit
import json
import os
import shutil
import tempfile

import covetest
import imagekit

CONFIG = {"Env": ["GREETING=hello from the image", "PATH=/bin"], "WorkingDir": "/work", "User": "app",
          "Cmd": ["sh", "-c", "echo started as $(id -u) in $PWD > /tmp/started; exec sleep 1000"],
          "ExposedPorts": {"8080/tcp": {}, "53/udp": {}}, "Labels": {"org.example.team": "sandbox"}}


def scratch(prefix):
    """A folder of the test's, removed when the run ends."""
    d = tempfile.mkdtemp(prefix=prefix, dir="/var/tmp")
    atexit.register(shutil.rmtree, d, True)
    return d


def app_image(compression=None, config=CONFIG, extra=b"hi\n"):
    """busybox, then a layer with /work, and one removing /etc/group's
    sibling /removed (a whiteout) and /work/old (an opaque folder)."""
    l2 = imagekit.layer([("work", "dir"), ("work/hello", "file", extra), ("work/old", "dir"),
                         ("work/old/gone", "file", b"x"), ("removed", "file", b"soon gone"),
                         ("work/linked", "hard", "work/hello")])
    l3 = imagekit.layer([("work/old", "dir"), ("work/old/.wh..wh..opq", "file"), ("work/old/new", "file", b"n"),
                         (".wh.removed", "file")])
    return imagekit.Image([imagekit.base_layer(), l2, l3], config, compression)


def layout_tar(img, ref_name=None):
    d = tempfile.mkdtemp(prefix="cove-oci-")
    try:
        return imagekit.tar_of_dir(imagekit.oci_layout(img, d, ref_name))
    finally:
        shutil.rmtree(d)


def pool_state(cv):
    """The store's blobs and layer trees, and the image IDs listed."""
    images = os.path.join(cv.data, "pool", "images")
    blobs = sorted(os.listdir(os.path.join(images, "blobs", "sha256")))
    layers = sorted(os.listdir(os.path.join(images, "layers")))
    st, listed = cv.api("GET", "/v1/images")
    assert st == 200
    return blobs, layers, sorted(i["id"] for i in listed["images"])


def wait_started(cv, sid):
    def started():
        r = cv.exec(sid, ["cat", "/tmp/started"])
        return r["exit_code"] == 0 and r["stdout"]
    return covetest.wait_until(started, 60)


def check_runs_as_configured(cv, sid):
    st, sb = cv.api("GET", "/v1/sandboxes/" + sid)
    assert st == 200, sb
    assert sb["start"] == CONFIG["Cmd"] and sb["cwd"] == "/work" and sb["user"] == "app", sb
    assert sorted(sb["exposed_ports"]) == ["53/udp", "8080/tcp"], sb
    assert sb["labels"] == {"org.example.team": "sandbox"}, sb
    assert sb["image_id"].startswith("sha256:"), sb
    r = cv.exec(sid, ["sh", "-c", "echo $GREETING; id -u; pwd; cat hello linked; ls /work/old; "
                      "test -e /removed || echo no-removed; test -e /usr/bin/python3 || echo no-host-usr"])
    assert r["exit_code"] == 0, r
    assert r["stdout"].split("\n") == ["hello from the image", "1000", "/work", "hi", "hi", "new", "no-removed",
                                       "no-host-usr", ""], r
    # the start command runs as the kept process "start", as the image's user, in its folder
    assert wait_started(cv, sid) == "started as 1000 in /work\n"
    st, procs = cv.api("GET", "/v1/sandboxes/%s/processes/start" % sid)
    assert st == 200 and procs["state"] == "running" and procs["cmd"] == CONFIG["Cmd"], procs
    # root inside owns the image's files (shifted like host's)
    r = cv.exec(sid, ["stat", "-c", "%u %U", "/bin/busybox", "/home/app"], user="root")
    assert r["stdout"] == "0 root\n1000 app\n", r


def test_import_oci_layout_and_run(coved):
    img = app_image()
    st, j = coved.api("POST", "/v1/images?name=oci-app:1", raw=layout_tar(img))
    assert st == 201, j
    assert j["id"] == img.id and j["layers"] == 3 and "docker.io/library/oci-app:1" in j["names"], j
    assert j["config"]["cmd"] == CONFIG["Cmd"] and j["config"]["user"] == "app", j
    sid = coved.create(image="oci-app:1")
    try:
        check_runs_as_configured(coved, sid)
        # the request's own values win over the image's
        sid2 = coved.create(image=img.id, env={"GREETING": "mine"}, cwd="/tmp", user="root")
        r = coved.exec(sid2, ["sh", "-c", "echo $GREETING; pwd; id -u"])
        assert r["stdout"] == "mine\n/tmp\n0\n", r
        coved.api("DELETE", "/v1/sandboxes/" + sid2)
    finally:
        coved.api("DELETE", "/v1/sandboxes/" + sid)
    # by ID prefix, GET and DELETE
    st, j = coved.api("GET", "/v1/images/" + img.id[7:19])
    assert st == 200 and j["id"] == img.id, j
    st, j = coved.api("DELETE", "/v1/images/oci-app:1")
    assert st == 200, j
    assert coved.api("GET", "/v1/images/" + img.id)[0] == 404


def test_import_docker_archive_and_cli(coved):
    img = app_image(config=dict(CONFIG, Cmd=["sleep", "1000"]))
    path = os.path.join(scratch("cove-docker-"), "app.tar")
    with open(path, "wb") as f:
        f.write(imagekit.docker_archive(img, ["registry.example/team/app:2"]))
    r = coved.cli("image", "import", path)
    assert r.returncode == 0, r
    iid = r.stdout.decode().strip()
    st, j = coved.api("GET", "/v1/images/registry.example%2Fteam%2Fapp:2")
    assert st == 200 and j["id"] == iid and j["names"] == ["registry.example/team/app:2"], j
    r = coved.cli("run", "--image", "registry.example/team/app:2", "--", "sh", "-c", "echo $GREETING; cat hello")
    assert r.returncode == 0 and r.stdout == b"hello from the image\nhi\n", r
    # from stdin, and named
    with open(path, "rb") as f:
        r = coved.cli("image", "import", "--name", "stdin-app:1", "-", input=f.read())
    assert r.returncode == 0 and r.stdout.decode().strip() == iid, r
    st, j = coved.api("GET", "/v1/images/stdin-app:1")
    assert st == 200 and sorted(j["names"]) == ["docker.io/library/stdin-app:1", "registry.example/team/app:2"], j
    # an OCI layout folder, as it is on disk
    d = imagekit.oci_layout(app_image(extra=b"folder\n"), scratch("cove-oci-"))
    r = coved.cli("image", "import", "--name", "folder-app:1", d)
    assert r.returncode == 0, r
    r = coved.cli("run", "--image", "folder-app:1", "--", "cat", "/work/hello")
    assert r.returncode == 0 and r.stdout == b"folder\n", r
    r = coved.cli("image", "ls")
    assert r.returncode == 0 and "folder-app:1" in r.stdout.decode(), r
    r = coved.cli("image", "inspect", "folder-app:1")
    assert r.returncode == 0 and json.loads(r.stdout)["config"]["working_dir"] == "/work", r
    for ref in ("folder-app:1", "registry.example/team/app:2"):
        r = coved.cli("image", "rm", ref)
        assert r.returncode == 0, r
    os.unlink(path)


def _refused(cv, body, words):
    before = pool_state(cv)
    st, j = cv.api("POST", "/v1/images?name=hostile:1", raw=body)
    assert st == 400, (st, j)
    msg = j["error"]["message"]
    assert any(w in msg for w in words), msg
    assert pool_state(cv) == before, "an import that was refused left something behind"


def test_hostile_archives_and_bad_digests_refused(coved):
    base = imagekit.base_layer()
    for name, entries, words in (
            ("dotdot", [("../escape", "file", b"x")], ["..", "outside"]),
            ("absolute", [("/etc/evil", "file", b"x")], ["absolute"]),
            ("through a symlink", [("out", "link", "/etc"), ("out/evil", "file", b"x")], ["symlink", "link"]),
            ("hard link out", [("h", "hard", "../../etc/passwd")], ["link", ".."])):
        img = imagekit.Image([base, imagekit.layer(entries)], {"Cmd": ["true"]})
        _refused(coved, layout_tar(img), words)
    # a layer whose bytes are not its diff id
    img = imagekit.Image([base], {"Cmd": ["true"]})
    cfg = json.loads(img.config)
    cfg["rootfs"]["diff_ids"] = ["sha256:" + "0" * 64]
    bad = imagekit.Image([base], {"Cmd": ["true"]})
    bad.blobs.pop(bad.id)
    bad.config = json.dumps(cfg).encode()
    bad = imagekit.Image.__new__(imagekit.Image)
    bad.__dict__.update(img.__dict__)
    bad.blobs = dict(img.blobs)
    bad.blobs.pop(imagekit.sha(img.config))
    bad.blobs.pop(img.id)
    bad.config = json.dumps(cfg).encode()
    bad.blobs[imagekit.sha(bad.config)] = bad.config
    man = json.loads(img.manifest)
    man["config"]["digest"], man["config"]["size"] = imagekit.sha(bad.config), len(bad.config)
    bad.manifest = json.dumps(man).encode()
    bad.id = imagekit.sha(bad.manifest)
    bad.blobs[bad.id] = bad.manifest
    _refused(coved, layout_tar(bad), ["digest", "diff"])
    # a blob that is not what its name says
    d = imagekit.oci_layout(imagekit.Image([base], {"Cmd": ["true"]}), scratch("cove-oci-"))
    layer_hex = imagekit.sha(base)[7:]
    with open(os.path.join(d, "blobs", "sha256", layer_hex), "r+b") as f:
        f.seek(100)
        f.write(b"tampered")
    _refused(coved, imagekit.tar_of_dir(d), ["digest"])
    # not an image at all
    _refused(coved, imagekit.layer([("hello", "file", b"x")]), ["oci-layout", "manifest.json"])
    # a good image under a bad name; an unknown parameter
    before = pool_state(coved)
    good = layout_tar(app_image())
    for query in ("name=Not%20A%20Name", "nosuch=1"):
        st, j = coved.api("POST", "/v1/images?" + query, raw=good)
        assert st == 400, (query, st, j)
    assert pool_state(coved) == before


def test_reference_counts(coved):
    img = app_image(extra=b"refcount\n")
    st, j = coved.api("POST", "/v1/images?name=counted:1", raw=layout_tar(img))
    assert st == 201, j
    blobs0, layers0, _ = pool_state(coved)
    sid = coved.create(image="counted:1")
    st, j = coved.api("DELETE", "/v1/images/counted:1")
    assert st == 409 and sid in j["error"]["message"], j
    st, j = coved.api("GET", "/v1/images/counted:1")
    assert j["in_use"] and j["users"]["sandboxes"] == [sid], j
    st, sn = coved.api("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
    assert st in (200, 201), sn
    coved.api("DELETE", "/v1/sandboxes/" + sid)
    st, j = coved.api("DELETE", "/v1/images/counted:1")
    assert st == 409 and sn["id"] in j["error"]["message"], j
    r = coved.cli("image", "rm", "counted:1")
    assert r.returncode != 0 and b"in use" in r.stderr, r
    # a restore from the snapshot still runs on the image
    st, rj = coved.api("POST", "/v1/snapshots/%s/restore" % sn["id"], {})
    assert st in (200, 201), rj
    assert coved.exec(rj["id"], ["cat", "/work/hello"])["stdout"] == "refcount\n"
    coved.api("DELETE", "/v1/sandboxes/" + rj["id"])
    assert coved.api("DELETE", "/v1/snapshots/" + sn["id"])[0] == 200
    # prune keeps named images; --all takes them, and their blobs and trees
    st, j = coved.api("POST", "/v1/images/prune", {})
    assert st == 200 and img.id not in j["deleted"], j
    r = coved.cli("image", "prune", "--all")
    assert r.returncode == 0 and img.id in r.stdout.decode(), r
    blobs, layers, ids = pool_state(coved)
    assert img.id not in ids
    assert img.id[7:] not in blobs and all(d[7:] not in blobs for d in img.blobs), blobs
    assert len(layers) < len(layers0), (layers, layers0)


def pull(cv, ref):
    """POST /v1/images/pull: (status, events)."""
    c = cv.conn(300)
    try:
        c.request("POST", "/v1/images/pull", body=json.dumps({"ref": ref}))
        r = c.getresponse()
        text = r.read().decode()
        if r.status != 200:
            return r.status, [json.loads(text)]
        return r.status, [json.loads(line) for line in text.splitlines() if line]
    finally:
        c.close()


def cli_on_terminal(cv, *args):
    """cove with a terminal as stderr: (stdout, what the terminal showed)."""
    import pty
    import subprocess
    master, slave = pty.openpty()
    env = dict(os.environ, COVE_SOCKET=cv.socket, COVE_DATA=cv.data)
    p = subprocess.Popen([covetest.COVE] + list(args), stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    out = p.communicate(timeout=300)[0]
    os.close(master)
    return out.decode(), shown.decode(errors="replace")


def test_pull_anonymous_index_gzip_zstd(coved):
    reg = imagekit.Registry()
    try:
        gz, zs = app_image("gzip"), app_image("zstd", extra=b"zstd\n")
        decoy = imagekit.Image([imagekit.layer([("arm", "file", b"not for us")])],
                               {"Cmd": ["true"]}, "gzip")
        reg.push("team/app", "gz", gz)
        reg.push_index("team/app", "multi", [(("linux", "arm64"), decoy), (("linux", "amd64"), zs)])
        st, ev = pull(coved, reg.host + "/team/app:gz")
        assert st == 200 and ev[-1]["type"] == "image", ev
        assert ev[-1]["image"]["id"] == gz.id, ev[-1]
        layers = {e["digest"] for e in ev if e["type"] == "layer"}
        assert layers >= {d["digest"] for d in gz.layer_descs}, ev
        for d in gz.layer_descs:
            seen = [e["status"] for e in ev if e.get("digest") == d["digest"]]
            assert "verified" in seen and seen[-1] == "unpacked", (d, seen)
            done = [e for e in ev if e.get("digest") == d["digest"] and e["status"] == "verified"][0]
            assert done["done"] == done["total"] == d["size"], done
        # the index leads to linux/amd64, zstd layers; the shared base layer is
        # stored once (its diff is the same: its tree is there already)
        st, ev = pull(coved, reg.host + "/team/app:multi")
        assert st == 200 and ev[-1]["image"]["id"] == zs.id, ev[-1]
        sid = coved.create(image=reg.host + "/team/app:multi")
        check_runs_as_configured_zstd = coved.exec(sid, ["cat", "/work/hello"])
        assert check_runs_as_configured_zstd["stdout"] == "zstd\n"
        assert not coved.exec(sid, ["test", "-e", "/arm"])["exit_code"] == 0
        coved.api("DELETE", "/v1/sandboxes/" + sid)
        sid = coved.create(image=reg.host + "/team/app:gz")
        try:
            check_runs_as_configured(coved, sid)
        finally:
            coved.api("DELETE", "/v1/sandboxes/" + sid)
        # the CLI, pulling again: every blob is there already; on a terminal, a bar per layer
        r = coved.cli("image", "pull", reg.host + "/team/app:gz")
        assert r.returncode == 0 and r.stdout.decode().strip() == gz.id and r.stderr == b"", r
        out, err = cli_on_terminal(coved, "image", "pull", reg.host + "/team/app:gz")
        assert out.strip() == gz.id, (out, err)
        for d in gz.layer_descs:
            assert "%s [====================]" % d["digest"][:19] in err, err
        assert "unpacked" in err and "exists" in err, err
        # a third image sharing the gzip one's base layer blob: stored once,
        # not downloaded again, its layer tree shared
        other = app_image("gzip", extra=b"other\n")
        assert other.layer_descs[0] == gz.layer_descs[0]
        reg.push("team/other", "1", other)
        blobs_before = set(pool_state(coved)[0])
        st, ev = pull(coved, reg.host + "/team/other:1")
        assert st == 200 and ev[-1]["image"]["id"] == other.id, ev
        base = [e["status"] for e in ev if e.get("digest") == gz.layer_descs[0]["digest"]]
        assert "exists" in base and "downloading" not in base and "verified" not in base, base
        blobs, layers, _ = pool_state(coved)
        assert sum(1 for b in blobs if b == gz.layer_descs[0]["digest"][7:]) == 1
        # new: its middle layer (the others are gz's), its config, its manifest
        assert len(set(blobs) - blobs_before) == 3, (set(blobs) - blobs_before)
        assert coved.api("DELETE", "/v1/images/" + other.id)[0] == 200
        # errors: no such tag, no such registry
        st, ev = pull(coved, reg.host + "/team/app:nosuch")
        assert st == 404 and "manifests/nosuch" in ev[0]["error"]["message"], ev
        st, ev = pull(coved, "127.0.0.1:1/team/app:gz")
        assert st == 500 and "127.0.0.1:1" in ev[0]["error"]["message"], ev
        st, ev = pull(coved, "Bad Ref")
        assert st == 400, ev
        for ref in ("team/app:gz", "team/app:multi"):
            assert coved.api("DELETE", "/v1/images/" + (reg.host + "/" + ref).replace("/", "%2F"))[0] == 200
    finally:
        reg.stop()


def test_pull_token_auth(coved):
    d = scratch("cove-token-")
    ts = imagekit.TokenServer(d)
    reg = imagekit.Registry(ts.auth_yaml)
    auth = os.path.join(d, "auth.json")
    import base64
    with open(auth, "w") as f:
        json.dump({"auths": {reg.host: {"auth": base64.b64encode(b"alice:s3cret").decode()}}}, f)
    cv = covetest.Coved(args=["--registry-auth", auth]).start()
    try:
        img = app_image("gzip", extra=b"token\n")
        reg.push("private/app", "1", img, token=ts.token(["repository:private/app:pull,push"]))
        # the shared coved has no login: refused
        st, ev = pull(coved, reg.host + "/private/app:1")
        assert st == 403 and "token server refused" in ev[0]["error"]["message"], (st, ev)
        st, ev = pull(cv, reg.host + "/private/app:1")
        assert st == 200 and ev[-1]["type"] == "image" and ev[-1]["image"]["id"] == img.id, ev
        assert any(a.startswith("Basic ") for _, a in ts.requests)
        assert any(q.get("scope") == ["repository:private/app:pull"] for q, _ in ts.requests), ts.requests
        sid = cv.create(image=reg.host + "/private/app:1")
        assert cv.exec(sid, ["cat", "/work/hello"])["stdout"] == "token\n"
    finally:
        cv.teardown()
        reg.stop()
        ts.stop()


def test_pull_resumes_after_a_cut_and_refuses_a_bad_digest(coved):
    reg = imagekit.Registry()
    big = imagekit.layer([("data", "dir"), ("data/random", "file", os.urandom(3 << 20))])
    img = imagekit.Image([imagekit.base_layer(), big], {"Cmd": ["true"]}, "gzip")
    reg.push("big/app", "1", img)
    proxy = imagekit.CutProxy(reg.port, cut_after=1 << 20, together=[d["digest"] for d in img.layer_descs])
    bad = imagekit.CutProxy(reg.port, tamper=True)
    try:
        before = pool_state(coved)
        st, ev = pull(coved, bad.host + "/big/app:1")
        assert st == 200 and ev[-1]["type"] == "error" and "digest mismatch" in ev[-1]["error"]["message"], ev
        assert pool_state(coved) == before, "a refused pull left something behind"
        st, ev = pull(coved, proxy.host + "/big/app:1")
        assert st == 200 and ev[-1]["type"] == "image" and ev[-1]["image"]["id"] == img.id, ev
        assert proxy.cuts == 1 and any(r and r.startswith("bytes=") for r in proxy.ranges), proxy.ranges
        assert proxy.together_ok, "the layers were not downloaded at once"
        sid = coved.create(image=proxy.host + "/big/app:1")
        r = coved.exec(sid, ["stat", "-c", "%s", "/data/random"])
        assert r["stdout"] == "%d\n" % (3 << 20), r
        coved.api("DELETE", "/v1/sandboxes/" + sid)
        assert coved.api("DELETE", "/v1/images/" + img.id)[0] == 200
    finally:
        proxy.stop()
        bad.stop()
        reg.stop()


def test_images_and_their_sandboxes_survive_a_restart(coved):
    cv = covetest.Coved().start()
    try:
        img = app_image(extra=b"restart\n")
        st, j = cv.api("POST", "/v1/images?name=kept:1", raw=layout_tar(img))
        assert st == 201, j
        sid = cv.create(image="kept:1")
        assert wait_started(cv, sid)
        cv.kill()
        cv.start()
        st, j = cv.api("GET", "/v1/images/kept:1")
        assert st == 200 and j["id"] == img.id and j["users"]["sandboxes"] == [sid], j
        r = cv.exec(sid, ["sh", "-c", "cat /work/hello; echo $GREETING; cat /tmp/started"])
        assert r["stdout"] == "restart\nhello from the image\nstarted as 1000 in /work\n", r
        st, sb = cv.api("GET", "/v1/sandboxes/" + sid)
        assert sb["start"] == CONFIG["Cmd"] and sb["image_id"] == img.id, sb
        sid2 = cv.create(image=img.id[7:19])
        assert cv.exec(sid2, ["cat", "/work/hello"])["stdout"] == "restart\n"
        assert cv.api("DELETE", "/v1/images/kept:1")[0] == 409
    finally:
        cv.teardown()


def test_plain_http_only_for_loopback_or_insecure_registries(coved):
    """A registry off loopback (a test host in a network namespace of the
    test's own, 203.0.113.2) is spoken to with TLS unless coved names it
    in --insecure-registry."""
    import subprocess
    import uuid
    tag = uuid.uuid4().hex[:6]
    ns, veth, net = "covei-" + tag, "cvi" + tag, "203.0.113."
    reg = cv = None
    try:
        for cmd in (["ip", "netns", "add", ns],
                    ["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns],
                    ["ip", "addr", "add", net + "1/30", "dev", veth], ["ip", "link", "set", veth, "up"],
                    ["ip", "-n", ns, "addr", "add", net + "2/30", "dev", "eth0"],
                    ["ip", "-n", ns, "link", "set", "eth0", "up"], ["ip", "-n", ns, "link", "set", "lo", "up"]):
            subprocess.run(cmd, check=True, capture_output=True)
        reg = imagekit.Registry(netns=ns, addr=net + "2")
        img = app_image("gzip", extra=b"insecure\n")
        reg.push("team/app", "1", img)
        st, ev = pull(coved, reg.host + "/team/app:1")
        assert st == 500 and "https://" not in ev[0]["error"]["message"] and reg.host in ev[0]["error"]["message"], ev
        assert any(w in ev[0]["error"]["message"] for w in ("SSL", "TLS", "ssl")), ev
        cv = covetest.Coved(args=["--insecure-registry", reg.host]).start()
        st, ev = pull(cv, reg.host + "/team/app:1")
        assert st == 200 and ev[-1]["type"] == "image" and ev[-1]["image"]["id"] == img.id, ev
    finally:
        if cv:
            cv.teardown()
        if reg:
            reg.stop()
        subprocess.run(["ip", "link", "del", veth], capture_output=True)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_images_on_the_overlay_driver(coved):
    """The same image on a coved whose pool is plain folders (--storage
    overlay): layer trees are copies, a sandbox still stands on one."""
    cv = covetest.Coved(args=["--storage", "overlay"]).start()
    try:
        img = app_image()
        st, j = cv.api("POST", "/v1/images?name=overlay-app:1", raw=layout_tar(img))
        assert st == 201 and j["id"] == img.id, j
        sid = cv.create(image="overlay-app:1")
        check_runs_as_configured(cv, sid)
        cv.api("DELETE", "/v1/sandboxes/" + sid)
        assert cv.api("DELETE", "/v1/images/overlay-app:1")[0] == 200
        # what the sandbox still being deleted stood on goes once it is gone
        assert covetest.wait_until(lambda: pool_state(cv) == ([], [], []), 30), pool_state(cv)
    finally:
        cv.teardown()


def test_a_template_on_an_image_with_a_warm_pool(coved):
    """A template stands on an image: its sandboxes (cold and from its warm
    pool) have the image's config, and the image is kept while the template
    is."""
    img = app_image(extra=b"template\n")
    st, j = coved.api("POST", "/v1/images?name=tpl-app:1", raw=layout_tar(img))
    assert st == 201, j
    name = "img-tpl-%d" % os.getpid()
    st, t = coved.api("POST", "/v1/templates", {"name": name, "image": "tpl-app:1", "memory": "200M", "warm": 1,
                                                 "env": {"FROM": "template"}})
    assert st == 201, t
    st, j = coved.api("POST", "/v1/templates", {"name": name + "-x", "image": "no-such-image:1"})
    assert st == 404 and "no-such-image" in j["error"]["message"], j
    try:
        st, j = coved.api("DELETE", "/v1/images/tpl-app:1")
        assert st == 409 and "templates" in j["error"]["message"], j
        assert coved.api("GET", "/v1/images/tpl-app:1")[1]["users"]["templates"] == 1
        assert covetest.wait_until(lambda: coved.api("GET", "/v1/templates/" + name)[1]["pool"]["ready"] >= 1, 60)
        for _ in range(2):  # the first from the pool, the second cold (or a refill)
            st, sb = coved.api("POST", "/v1/sandboxes", {"template": name})
            assert st == 201, sb
            try:
                assert sb["start"] == CONFIG["Cmd"] and sb["image_id"] == img.id, sb
                r = coved.exec(sb["id"], ["sh", "-c", "echo $GREETING $FROM; pwd; id -u; cat hello"])
                assert r["stdout"] == "hello from the image template\n/work\n1000\ntemplate\n", r
                assert wait_started(coved, sb["id"]) == "started as 1000 in /work\n"
            finally:
                coved.api("DELETE", "/v1/sandboxes/" + sb["id"])
    finally:
        assert coved.api("DELETE", "/v1/templates/" + name)[0] == 200
    assert covetest.wait_until(lambda: coved.api("DELETE", "/v1/images/tpl-app:1")[0] == 200, 30)

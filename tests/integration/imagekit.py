"""Images made by hand for the image tests: layer tars of a small busybox
root, OCI image layouts and docker archives of them, and a push into a
registry over the OCI distribution API (all on loopback)."""
import gzip
import hashlib
import http.client
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import tempfile
import time
import urllib.parse

BUSYBOX = "/bin/busybox"
APPLETS = ["sh", "cat", "env", "id", "pwd", "sleep", "ls", "echo", "true", "stat", "test", "touch"]


def sha(b):
    return "sha256:" + hashlib.sha256(b).hexdigest()


def _add(t, name, data=b"", mode=0o644, uid=0, gid=0, kind=tarfile.REGTYPE, link=""):
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.mode = mode
    ti.uid, ti.gid = uid, gid
    ti.mtime = 1700000000
    ti.linkname = link
    ti.size = len(data) if kind == tarfile.REGTYPE else 0
    t.addfile(ti, io.BytesIO(data) if kind == tarfile.REGTYPE else None)


def layer(entries):
    """An uncompressed layer tar from (name, kind, data/link, mode, uid) tuples."""
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            name, kind, payload, mode, uid = (list(e) + [None, None, None])[:5]
            if kind == "dir":
                _add(t, name, mode=mode or 0o755, uid=uid or 0, gid=uid or 0, kind=tarfile.DIRTYPE)
            elif kind == "link":
                _add(t, name, kind=tarfile.SYMTYPE, link=payload, mode=0o777)
            elif kind == "hard":
                _add(t, name, kind=tarfile.LNKTYPE, link=payload)
            else:
                _add(t, name, payload or b"", mode=mode or 0o644, uid=uid or 0, gid=uid or 0)
    return b.getvalue()


def base_layer():
    """A root with busybox, its applets, /etc/passwd with user app (1000)."""
    with open(BUSYBOX, "rb") as f:
        bb = f.read()
    entries = [("bin", "dir"), ("bin/busybox", "file", bb, 0o755), ("etc", "dir"), ("tmp", "dir", None, 0o1777),
               ("etc/passwd", "file", b"root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\n"),
               ("etc/group", "file", b"root:x:0:\napp:x:1000:\n"), ("root", "dir", None, 0o700),
               ("home", "dir"), ("home/app", "dir", None, 0o755, 1000)]
    entries += [("bin/" + a, "link", "busybox") for a in APPLETS]
    return layer(entries)


def compress(tar, how):
    if how == "gzip":
        return gzip.compress(tar, mtime=0)
    if how == "zstd":
        return subprocess.run(["zstd", "-q", "-c"], input=tar, capture_output=True, check=True).stdout
    return tar


MEDIA = {None: "application/vnd.oci.image.layer.v1.tar", "gzip": "application/vnd.oci.image.layer.v1.tar+gzip",
         "zstd": "application/vnd.oci.image.layer.v1.tar+zstd"}


class Image:
    """Layers (uncompressed tars), a config, and the blobs of both."""

    def __init__(self, layers, config=None, compression=None):
        self.tars = layers
        self.blobs = {}
        self.layer_descs = []
        for t in layers:
            c = compress(t, compression)
            self.blobs[sha(c)] = c
            self.layer_descs.append({"mediaType": MEDIA[compression], "digest": sha(c), "size": len(c)})
        cfg = {"architecture": "amd64", "os": "linux", "config": config or {},
               "rootfs": {"type": "layers", "diff_ids": [sha(t) for t in layers]}}
        self.config = json.dumps(cfg).encode()
        self.blobs[sha(self.config)] = self.config
        self.manifest = json.dumps({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(self.config),
                       "size": len(self.config)},
            "layers": self.layer_descs}).encode()
        self.blobs[sha(self.manifest)] = self.manifest
        self.id = sha(self.manifest)


def oci_layout(img, path, ref_name=None):
    """img as an OCI image layout folder at path."""
    os.makedirs(os.path.join(path, "blobs", "sha256"), exist_ok=True)
    with open(os.path.join(path, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    for d, b in img.blobs.items():
        with open(os.path.join(path, "blobs", "sha256", d[7:]), "wb") as f:
            f.write(b)
    desc = {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": img.id, "size": len(img.manifest),
            "platform": {"os": "linux", "architecture": "amd64"}}
    if ref_name:
        desc["annotations"] = {"org.opencontainers.image.ref.name": ref_name}
    with open(os.path.join(path, "index.json"), "w") as f:
        json.dump({"schemaVersion": 2, "manifests": [desc]}, f)
    return path


def tar_of_dir(path):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w") as t:
        for n in sorted(os.listdir(path)):
            t.add(os.path.join(path, n), arcname=n)
    return b.getvalue()


def docker_archive(img, tags):
    """img as `docker save` writes it (layers uncompressed, by folder)."""
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w") as t:
        names = []
        for i, tar in enumerate(img.tars):
            n = "%064x/layer.tar" % (i + 1)
            _add(t, n, tar)
            names.append(n)
        cfg = img.config
        _add(t, sha(cfg)[7:] + ".json", cfg)
        man = [{"Config": sha(cfg)[7:] + ".json", "RepoTags": tags, "Layers": names}]
        _add(t, "manifest.json", json.dumps(man).encode())
    return b.getvalue()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Registry:
    """Debian's docker-registry on 127.0.0.1, with its own config (auth: a
    YAML "auth:" section or "")."""

    def __init__(self, auth="", netns=None, addr="127.0.0.1"):
        self.dir = tempfile.mkdtemp(prefix="cove-registry-", dir="/var/tmp")
        self.port = free_port() if not netns else 5000
        self.addr = addr
        self.host = "%s:%d" % (addr, self.port)
        cfg = os.path.join(self.dir, "config.yml")
        with open(cfg, "w") as f:
            f.write("version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
                    "storage:\n  filesystem:\n    rootdirectory: %s/store\n  delete:\n    enabled: true\n"
                    "http:\n  addr: %s\n%s" % (self.dir, self.host, auth))
        self.log = open(os.path.join(self.dir, "registry.log"), "wb")
        cmd = ["docker-registry", "serve", cfg]
        self.proc = subprocess.Popen((["ip", "netns", "exec", netns] if netns else []) + cmd, stdout=self.log,
                                     stderr=self.log, stdin=subprocess.DEVNULL)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                if self.request("GET", "/v2/")[0] in (200, 401):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("docker-registry did not start")

    def request(self, method, path, body=None, headers=None, token=None):
        c = http.client.HTTPConnection(self.addr, self.port, timeout=60)
        h = dict(headers or {})
        if token:
            h["Authorization"] = "Bearer " + token
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return r.status, r.read(), dict(r.getheaders())
        finally:
            c.close()

    def push_blob(self, repo, data, token=None):
        st, _, h = self.request("POST", "/v2/%s/blobs/uploads/" % repo, token=token)
        assert st == 202, st
        loc = urllib.parse.urlparse(h["Location"])
        q = loc.query + ("&" if loc.query else "") + "digest=" + sha(data)
        st, body, _ = self.request("PUT", loc.path + "?" + q, data,
                                   {"Content-Type": "application/octet-stream"}, token=token)
        assert st == 201, (st, body)

    def push_manifest(self, repo, ref, doc, media, token=None):
        st, body, _ = self.request("PUT", "/v2/%s/manifests/%s" % (repo, ref), doc, {"Content-Type": media},
                                   token=token)
        assert st == 201, (st, body)

    def push(self, repo, tag, img, token=None):
        for d, b in img.blobs.items():
            if d != img.id:
                self.push_blob(repo, b, token)
        self.push_manifest(repo, tag, img.manifest, "application/vnd.oci.image.manifest.v1+json", token)

    def push_index(self, repo, tag, imgs_by_arch, token=None):
        """An index of images by (os, arch); each manifest pushed by digest."""
        descs = []
        for (os_, arch), img in imgs_by_arch:
            for d, b in img.blobs.items():
                if d != img.id:
                    self.push_blob(repo, b, token)
            self.push_manifest(repo, img.id, img.manifest, "application/vnd.oci.image.manifest.v1+json", token)
            descs.append({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": img.id,
                          "size": len(img.manifest), "platform": {"os": os_, "architecture": arch}})
        doc = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                          "manifests": descs}).encode()
        self.push_manifest(repo, tag, doc, "application/vnd.oci.image.index.v1+json", token)

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait(timeout=30)
            self.proc = None
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _b64url(b):
    import base64
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


class TokenServer:
    """A token server of the test's own on loopback, as docker-registry's
    token auth wants one: ES256 JWTs with the signing certificate in x5c,
    given only to alice:s3cret (Basic). Its config section: auth_yaml."""

    def __init__(self, dirpath, service="cove-test", issuer="cove-test-issuer"):
        import datetime
        import http.server
        import threading
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
        self.service, self.issuer = service, issuer
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cove-test-token")])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(self.key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
                .not_valid_after(now + datetime.timedelta(days=2)).sign(self.key, hashes.SHA256()))
        self.cert_der = cert.public_bytes(serialization.Encoding.DER)
        self.cert_path = os.path.join(dirpath, "token.pem")
        with open(self.cert_path, "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM))
        self.requests = []
        ts = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                import base64
                q = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
                auth = self.headers.get("Authorization", "")
                user = None
                if auth.startswith("Basic "):
                    u, _, p = base64.b64decode(auth[6:]).decode().partition(":")
                    user = u if (u, p) == ("alice", "s3cret") else None
                ts.requests.append((q, auth))
                if user is None:
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                scopes = q.get("scope", [])
                body = json.dumps({"token": ts.token(scopes)}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.auth_yaml = ("auth:\n  token:\n    realm: http://127.0.0.1:%d/token\n    service: %s\n"
                          "    issuer: %s\n    rootcertbundle: %s\n" % (self.port, service, issuer, self.cert_path))

    def token(self, scopes):
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, utils
        import base64
        access = []
        for s in scopes:
            typ, name, actions = s.split(":")
            access.append({"type": typ, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        header = {"typ": "JWT", "alg": "ES256", "x5c": [base64.b64encode(self.cert_der).decode()]}
        claims = {"iss": self.issuer, "sub": "alice", "aud": self.service, "exp": now + 600, "nbf": now - 60,
                  "iat": now, "jti": os.urandom(8).hex(), "access": access}
        signing = (_b64url(json.dumps(header).encode()) + "." + _b64url(json.dumps(claims).encode())).encode()
        r, s = utils.decode_dss_signature(self.key.sign(signing, ec.ECDSA(hashes.SHA256())))
        return signing.decode() + "." + _b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class CutProxy:
    """A loopback proxy in front of a registry, one request per connection
    (sent upstream with Connection: close). The first blob response bigger
    than cut_after is cut there (the connection closed mid-body); with
    tamper, a blob's byte is flipped instead. ranges: the Range headers
    that blob requests carried."""

    def __init__(self, upstream_port, cut_after=None, tamper=False, together=()):
        """together: blob digests whose first requests are held until all
        of them have come (or 60 s passed): together_ok says they came at
        once, as concurrent downloads do."""
        import threading
        self.together = set(together)
        self.barrier = threading.Barrier(len(together)) if together else None
        self.together_ok = None
        self.upstream = upstream_port
        self.cut_after, self.tamper = cut_after, tamper
        self.ranges, self.cuts = [], 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.host = "127.0.0.1:%d" % self.port
        self.lock = threading.Lock()
        self.stopped = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        import threading
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(c,), daemon=True).start()

    def _one(self, c):
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                d = c.recv(65536)
                if not d:
                    return
                head += d
            lines = head.split(b"\r\n\r\n", 1)[0].split(b"\r\n")
            path = lines[0].split()[1].decode()
            hdrs = [l for l in lines[1:] if not l.lower().startswith(b"connection:")]
            blob = "/blobs/sha256:" in path
            if blob:
                rng = [l.split(b":", 1)[1].strip().decode() for l in hdrs if l.lower().startswith(b"range:")]
                with self.lock:
                    self.ranges.append(rng[0] if rng else None)
                    digest = path.rsplit("/", 1)[1]
                    held = digest in self.together
                    self.together.discard(digest)
                if held:
                    import threading
                    try:
                        self.barrier.wait(60)
                        ok = True
                    except threading.BrokenBarrierError:
                        ok = False
                    with self.lock:
                        self.together_ok = ok if self.together_ok is None else (self.together_ok and ok)
            up = socket.create_connection(("127.0.0.1", self.upstream))
            up.sendall(b"\r\n".join([lines[0]] + hdrs + [b"Connection: close", b"", b""]))
            self._relay(up, c, blob)
            up.close()
        finally:
            c.close()

    def _relay(self, up, c, blob):
        sent, body_at, resp = 0, None, b""
        while True:
            d = up.recv(65536)
            if not d:
                return
            if body_at is None:
                resp += d
                if b"\r\n\r\n" in resp:
                    body_at = resp.index(b"\r\n\r\n") + 4
                    d, sent = resp, -body_at
            ok = body_at is not None and resp.startswith(b"HTTP/1.1 200")
            if blob and ok and self.tamper and sent <= 0 < sent + len(d):
                i = -sent
                d = d[:i] + bytes([d[i] ^ 0xFF]) + d[i + 1:]
            if blob and ok and self.cut_after and sent + len(d) > self.cut_after:
                with self.lock:
                    cut = self.cuts == 0
                    self.cuts += 1 if cut else 0
                if cut:
                    c.sendall(d[:self.cut_after - sent])
                    return
            if body_at is not None:
                c.sendall(d)
                sent += len(d)

    def stop(self):
        self.stopped = True
        self.sock.close()

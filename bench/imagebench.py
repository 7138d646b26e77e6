"""Images, side by side in one run (issue 11's targets):

  create   POST /v1/sandboxes from `host`, from a pulled 5-layer image, from
           a 1-layer and a 20-layer image (network none, deleted after
           each), interleaved, N times each: median and p90 in ms, and the
           ratios (5 layers / host: target <= 1.1; 20 / 1 layers: <= 1.2).
           The images have no Cmd: a start command's launch (its spawn
           answered before the create is) is not the image's cost.
  pull     a 5-layer gzip image (~300 MB of /usr's files) from
           docker-registry on 127.0.0.1: `POST /v1/images/pull` (blobs
           downloaded, verified and unpacked into layer subvolumes; the
           image deleted and pruned between runs) next to `skopeo copy` to
           a local OCI layout plus `tar -x` of the same layers into a
           folder, alternately, RUNS times each: MB/s of compressed bytes
           (target: cove >= 80% of the peer).

Usage: imagebench.py [--socket SOCK] [--n 30] [--runs 3] [--out FILE]
Without --socket it starts a private coved (tests/integration/covetest.py)."""
import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import covetest  # noqa: E402
import imagekit  # noqa: E402

TREES = ["/usr/lib/python3", "/usr/share/man", "/usr/include", "/usr/share/perl"]


def host_layer(path):
    """A tar of a host folder as root's files (no special files)."""
    b = io.BytesIO()

    def keep(ti):
        if not (ti.isfile() or ti.isdir() or ti.issym() or ti.islnk()):
            return None
        ti.uid = ti.gid = 0
        ti.uname = ti.gname = ""
        return ti
    with tarfile.open(fileobj=b, mode="w", format=tarfile.PAX_FORMAT) as t:
        t.add(path, arcname=path.lstrip("/"), filter=keep)
    return b.getvalue()


def tiny_layers(n):
    return [imagekit.base_layer()] + [imagekit.layer([("l%d" % i, "file", b"%d\n" % i)]) for i in range(n - 1)]


def pull(cv, ref):
    c = cv.conn(600)
    try:
        c.request("POST", "/v1/images/pull", body=json.dumps({"ref": ref}))
        r = c.getresponse()
        last = r.read().decode().strip().splitlines()[-1]
        ev = json.loads(last)
        assert r.status == 200 and ev["type"] == "image", last
        return ev["image"]["id"]
    finally:
        c.close()


def stats(xs):
    xs = sorted(xs)
    return statistics.median(xs), xs[int(0.9 * (len(xs) - 1))]


def bench_create(cv, images, n):
    times = {k: [] for k in images}
    for _ in range(n):
        for kind, ref in images.items():
            t0 = time.monotonic()
            st, j = cv.api("POST", "/v1/sandboxes", {"image": ref, "network": "none"})
            dt = (time.monotonic() - t0) * 1000
            assert st == 201, j
            times[kind].append(dt)
            cv.api("DELETE", "/v1/sandboxes/" + j["id"])
    return {k: stats(v) for k, v in times.items()}


def skopeo_and_tar(reg, ref, scratch):
    layout, root = os.path.join(scratch, "layout"), os.path.join(scratch, "root")
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(root)
    t0 = time.monotonic()
    subprocess.run(["skopeo", "copy", "--quiet", "--src-tls-verify=false", "docker://%s/%s" % (reg.host, ref),
                    "oci:%s:bench" % layout], check=True)
    with open(os.path.join(layout, "index.json")) as f:
        man_digest = json.load(f)["manifests"][0]["digest"]
    with open(os.path.join(layout, "blobs", "sha256", man_digest[7:])) as f:
        layers = json.load(f)["layers"]
    for layer in layers:
        subprocess.run(["tar", "-xzf", os.path.join(layout, "blobs", "sha256", layer["digest"][7:]), "-C", root],
                       check=True)
    subprocess.run(["sync", "-f", root], check=True)
    dt = time.monotonic() - t0
    shutil.rmtree(scratch, ignore_errors=True)
    return dt


def bench_pull(cv, runs, scratch):
    reg = imagekit.Registry()
    try:
        layers = [imagekit.base_layer()] + [host_layer(p) for p in TREES if os.path.isdir(p)]
        img = imagekit.Image(layers, {}, "gzip")  # no Cmd: no start command to wait for
        reg.push("bench/big", "1", img)
        size = sum(d["size"] for d in img.layer_descs)
        cove_t, peer_t = [], []
        for _ in range(runs):
            t0 = time.monotonic()
            iid = pull(cv, reg.host + "/bench/big:1")
            cove_t.append(time.monotonic() - t0)
            assert cv.api("DELETE", "/v1/images/" + iid)[0] == 200
            peer_t.append(skopeo_and_tar(reg, "bench/big:1", scratch))
        # the image stays for the create benchmark
        pull(cv, reg.host + "/bench/big:1")
        return reg.host + "/bench/big:1", size, sum(len(t) for t in layers), cove_t, peer_t
    finally:
        reg.stop()


def import_tiny(cv, n):
    img = imagekit.Image(tiny_layers(n), {})
    d = tempfile.mkdtemp(prefix="cove-bench-oci-")
    try:
        st, j = cv.api("POST", "/v1/images?name=bench-layers:%d" % n,
                       raw=imagekit.tar_of_dir(imagekit.oci_layout(img, d)))
        assert st == 201, j
        return j["id"]
    finally:
        shutil.rmtree(d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket")
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scratch", default="/var/tmp/cove-imagebench")
    ap.add_argument("--out")
    a = ap.parse_args()
    own = None
    if a.socket:
        cv = covetest.Coved(data=a.scratch)  # only its socket is used
        cv.socket = a.socket
    else:
        own = cv = covetest.Coved().start()
    try:
        ref, size, raw, cove_t, peer_t = bench_pull(cv, a.runs, a.scratch)
        one, twenty = import_tiny(cv, 1), import_tiny(cv, 20)
        c = bench_create(cv, {"host": "host", "pulled 5 layers": ref, "1 layer": one, "20 layers": twenty}, a.n)
        mb = size / 1e6
        cove_best, peer_best = mb / min(cove_t), mb / min(peer_t)
        cove_med, peer_med = mb / statistics.median(cove_t), mb / statistics.median(peer_t)
        lines = ["create (POST /v1/sandboxes, network none), %d each, median / p90 ms:" % a.n]
        for k, (med, p90) in c.items():
            lines.append("  %-16s %7.2f / %7.2f" % (k, med, p90))
        lines.append("  ratio pulled-5-layers / host: %.3f (target <= 1.1)" % (c["pulled 5 layers"][0] / c["host"][0]))
        lines.append("  ratio 20 layers / 1 layer:    %.3f (target <= 1.2)" % (c["20 layers"][0] / c["1 layer"][0]))
        lines.append("pull + unpack, 5 gzip layers, %.1f MB compressed (%.1f MB as tars), %d runs each:"
                     % (mb, raw / 1e6, a.runs))
        lines.append("  cove pull (POST /v1/images/pull)   best %6.1f MB/s, median %6.1f MB/s (%s s)"
                     % (cove_best, cove_med, " ".join("%.2f" % t for t in cove_t)))
        lines.append("  skopeo copy + tar -xzf + sync       best %6.1f MB/s, median %6.1f MB/s (%s s)"
                     % (peer_best, peer_med, " ".join("%.2f" % t for t in peer_t)))
        lines.append("  cove / peer (median): %.2f (target >= 0.8)" % (cove_med / peer_med))
        text = "\n".join(lines)
        print(text)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text + "\n")
        for r in (ref, one, twenty):
            cv.api("DELETE", "/v1/images/" + r.replace("/", "%2F"))
    finally:
        if own:
            own.teardown()


if __name__ == "__main__":
    main()

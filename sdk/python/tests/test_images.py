"""Images through the Python SDK: import, list, create from one, pull
from docker-registry on loopback with progress, delete (refused while in
use), prune."""
import pytest

import imagekit
from cove import Conflict, Image, NotFound, Sandbox


def _image(extra):
    l2 = imagekit.layer([("work", "dir"), ("work/hello", "file", extra)])
    return imagekit.Image([imagekit.base_layer(), l2],
                          {"Env": ["GREETING=sdk"], "WorkingDir": "/work", "Cmd": ["sleep", "600"]}, "gzip")


def test_import_create_delete(coved, tmp_path):
    img = _image(b"from the sdk\n")
    layout = imagekit.oci_layout(img, str(tmp_path / "layout"))
    archive = tmp_path / "image.tar"
    archive.write_bytes(imagekit.tar_of_dir(layout))
    im = Image.import_archive(str(archive), name="sdk-app:1")
    assert im.id == img.id and "docker.io/library/sdk-app:1" in im.names
    assert im.config["working_dir"] == "/work" and im.config["cmd"] == ["sleep", "600"]
    assert img.id in [i.id for i in Image.list()]
    assert Image.get("sdk-app:1").id == img.id
    with Sandbox.create(image="sdk-app:1") as sb:
        assert sb.info["start"] == ["sleep", "600"]
        assert sb.run("echo $GREETING; cat hello").stdout == "sdk\nfrom the sdk\n"
        with pytest.raises(Conflict):
            im.delete()
    im.delete()
    with pytest.raises(NotFound):
        Image.get(img.id)


def test_pull_with_progress_and_prune(coved):
    reg = imagekit.Registry()
    try:
        img = _image(b"pulled\n")
        reg.push("sdk/app", "1", img)
        events = []
        im = Image.pull(reg.host + "/sdk/app:1", on_progress=events.append)
        assert im.id == img.id
        assert {e["status"] for e in events} >= {"waiting", "verified", "unpacked"}, events
        with Sandbox.create(image=reg.host + "/sdk/app:1") as sb:
            assert sb.run("cat hello").stdout == "pulled\n"
        assert im.id in Image.prune(all=True)
    finally:
        reg.stop()

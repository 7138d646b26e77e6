"""Templates and warm pools through the Python SDK (sync and asyncio)."""
import asyncio
import time

import pytest

from cove import BadRequest, NotFound, Sandbox, Template, aio


def _wait_ready(t, n):
    deadline = time.time() + 120
    while t.refresh()["pool"]["ready"] != n and time.time() < deadline:
        time.sleep(0.1)
    return t.pool["ready"] == n


def test_template_fields_and_overrides(coved):
    t = Template.create("py-tpl", memory="256M", env={"A": "a", "B": "b"}, user="nobody", idle_timeout=60)
    try:
        assert t.name == "py-tpl" and t.info["idle_timeout"] == 60 and t.pool["size"] == 0
        assert "py-tpl" in [x.name for x in Template.list()]
        with t.sandbox(env={"B": "over"}) as sb:
            assert sb.info["template"] == "py-tpl" and sb.info["memory"] == 256 << 20
            r = sb.run("echo $A $B $(id -un)")
            assert r.stdout == "a over nobody\n", r
        with Sandbox.create(template=t, memory="300M", user="root") as sb:
            assert sb.info["memory"] == 300 << 20 and sb.run("id -un").stdout == "root\n"
        with pytest.raises(BadRequest):
            Template.create("py-bad", ready={"port": 0})
        with pytest.raises(NotFound):
            Sandbox.create(template="py-none")
    finally:
        t.delete()
    with pytest.raises(NotFound):
        Template.get("py-tpl")


def test_start_ready_and_warm_pool(coved):
    t = Template.create("py-warm", warm=1, start="python3 -m http.server 8131 --bind 127.0.0.1",
                        ready={"port": 8131, "timeout": 60})
    try:
        assert _wait_ready(t, 1), t.info
        with t.sandbox(env={"E": "e"}) as sb:
            assert sb.info["from_pool"] is True
            r = sb.run("echo $E; python3 -c 'import urllib.request as u; "
                       "print(u.urlopen(\"http://127.0.0.1:8131/\").status)'")
            assert r.stdout == "e\n200\n", r
        assert _wait_ready(t, 1), t.info
    finally:
        t.delete()


def test_aio_templates(coved):
    async def main():
        t = await aio.Template.create("py-aio", env={"X": "x"})
        try:
            assert "py-aio" in [x.name for x in await aio.Template.list()]
            async with await aio.Sandbox.create(template=t) as sb:
                assert (await sb.run("echo $X")).stdout == "x\n"
            async with await t.sandbox(env={"X": "y"}) as sb:
                assert (await sb.run("echo $X")).stdout == "y\n"
        finally:
            await t.delete()

    asyncio.run(main())

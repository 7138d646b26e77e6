"""cove.aio, the asyncio twin, against a real coved: every coroutine, and
streaming callbacks called in the loop's thread while the command runs."""
import asyncio
import os
import tempfile
import threading

import pytest

from cove import NotFound
from cove.aio import Sandbox, Snapshot


def run(coro):
    return asyncio.run(coro)


def test_aio_sandbox_commands_and_files(coved):
    async def main():
        async with await Sandbox.create(env={"E": "e"}) as sb:
            assert sb.id in [s.id for s in await Sandbox.list()]
            assert (await Sandbox.connect(sb.id)).id == sb.id
            assert (await sb.refresh())["state"] == "running" and sb.info["id"] == sb.id
            await sb.set_timeout(900)
            assert sb.info["expires_at"] is not None
            assert (await sb.capabilities()).ports is True  # coved serves its port proxy
            loop_thread = threading.get_ident()
            chunks = []

            def on_out(c):
                assert threading.get_ident() == loop_thread
                chunks.append(c)
                if c == "first\n":  # the loop is free while it runs: write the file it waits for
                    asyncio.get_running_loop().create_task(sb.files.write("/tmp/go", ""))

            r = await sb.run("echo first; while [ ! -e /tmp/go ]; do sleep 0.02; done; echo $E", timeout=30,
                             on_stdout=on_out)
            assert r.exit_code == 0 and not r.timed_out and chunks == ["first\n", "e\n"]
            f = sb.files
            await f.write("d/x", "1")
            assert await f.read("d/x") == b"1" and await f.read_text("d/x") == "1"
            assert await f.read("missing") is None and not await f.exists("missing")
            assert (await f.stat("d/x"))["size"] == 1
            await f.mkdir("d/e")
            assert sorted(e["name"] for e in await f.list("d")) == ["e", "x"]
            await f.remove("d")
            await f.remove("d")
            with tempfile.TemporaryDirectory() as tmp:
                src, dst = os.path.join(tmp, "a"), os.path.join(tmp, "b")
                with open(src, "wb") as fh:
                    fh.write(b"up" * 1000)
                await f.upload(src, "up.bin")
                assert await f.download("up.bin", dst) == 2000
                assert await sb.export(os.path.join(tmp, "w.zip")) > 0
            async with await sb.session() as s:
                await s.run("cd /tmp; V=3")
                assert (await s.run("pwd; echo $V")).stdout == "/tmp\n3\n"
            p = await sb.spawn("read a; echo $a", stdin=True)
            assert (await p.info())["pid"] == p.pid
            await p.send_stdin("hi\n")
            assert await p.wait(20) == 0 and (await p.output()).stdout == "hi\n"
            q = await sb.spawn("cat", stdin=True)
            await q.close_stdin()
            assert await q.wait(20) == 0
            k = await sb.spawn("sleep 100")
            assert k.pid in [x["pid"] for x in await sb.processes()]
            await k.kill()
            assert await k.wait(20) is None
            sid = sb.id
        with pytest.raises(NotFound):
            await Sandbox.connect(sid)
    run(main())


def test_aio_snapshots_history_locks(coved):
    async def main():
        sb = await Sandbox.create()
        try:
            await sb.files.write("f", "1")
            snap = await sb.snapshot(name="a", wait_durable=False)
            for _ in range(400):
                if (await snap.refresh())["durable"]:
                    break
                await asyncio.sleep(0.05)
            assert snap.durable and snap.id in [s.id for s in await Snapshot.list()]
            assert (await Snapshot.get(snap.id)).id == snap.id
            back = await snap.restore()
            assert await back.files.read_text("f") == "1"
            await back.destroy()
            await snap.delete()
            doc = await sb.portable_snapshot()
            revived = await Sandbox.from_portable(doc)
            assert await revived.files.read_text("/root/f") == "1"
            await revived.destroy()
            for c in await sb.fork(2):
                await c.destroy()
            assert (await sb.checkpoint("one")).seq == 1
            assert len((await sb.history())["checkpoints"]) == 1
            await (await sb.rollback(1)).destroy()
            for b in await sb.branch(1, 2):
                await b.destroy()
            order = []

            async def holder(name, pause):
                async with sb.lock("L"):
                    order.append(name + " in")
                    await asyncio.sleep(pause)
                    order.append(name + " out")

            first = asyncio.create_task(holder("a", 0.5))
            await asyncio.sleep(0.2)
            await asyncio.gather(first, holder("b", 0))
            assert order == ["a in", "a out", "b in", "b out"]
        finally:
            await sb.destroy()
    run(main())

"""Ports as URLs from the SDK: expose, list, close, against a real coved
and a server in the sandbox, reached through coved's port proxy."""
import asyncio
import http.client
import time
import urllib.parse

import pytest

from cove import NotFound, Port, BadRequest
from cove import aio


def _get(url, headers=None):
    u = urllib.parse.urlsplit(url)
    c = http.client.HTTPConnection("127.0.0.1", u.port, timeout=30)
    try:
        c.request("GET", u.path + ("?" + u.query if u.query else ""), headers=dict(headers or {}, Host=u.netloc))
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def test_expose_list_close(sb):
    sb.spawn("python3 -m http.server 8000 --bind 127.0.0.1")
    p = sb.expose_port(8000)
    assert isinstance(p, Port) and p.port == 8000 and not p.public and len(p.token) == 32
    assert p.url.startswith("http://8000-" + sb.id.replace("_", "-") + ".localhost:")
    deadline = time.time() + 30
    while _get(p.browser_url)[0] != 200 and time.time() < deadline:
        time.sleep(0.1)
    assert _get(p.browser_url)[0] == 200
    assert _get(p.url)[0] == 401
    assert _get(p.url, {"X-Cove-Token": p.token})[0] == 200
    again = sb.expose_port(8000, public=True)
    assert again.token == p.token and again.public and again.browser_url == again.url
    assert _get(p.url)[0] == 200
    assert [(x.port, x.public) for x in sb.ports()] == [(8000, True)]
    sb.close_port(8000)
    assert sb.ports() == [] and _get(p.url)[0] == 404
    with pytest.raises(NotFound):
        sb.close_port(8000)
    with pytest.raises(BadRequest):
        sb.expose_port(70000)


def test_aio_ports(coved):
    async def main():
        async with await aio.Sandbox.create() as s:
            p = await s.expose_port(3000, public=True)
            assert p.public and [x.port for x in await s.ports()] == [3000]
            await s.close_port(3000)
            assert await s.ports() == []
    asyncio.run(main())

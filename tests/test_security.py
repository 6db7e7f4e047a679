"""Attacks on the proxy, each with the refusal the README documents.

Requests that a client library would normalise (absolute-form targets, dot segments, odd Host
headers, repeated or oversized headers) are sent as raw bytes over a socket. A *canary*
server stands for "another host": it must never see a request.
"""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from multidict import CIMultiDict, CIMultiDictProxy

from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url


class Recorder:
    """An upstream that answers 200 and remembers each request's path and headers."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, CIMultiDictProxy[str]]] = []

    async def handler(self, request: web.Request) -> web.Response:
        self.seen.append((request.raw_path, request.headers))
        return web.Response(text="upstream", headers={"X-Upstream": "yes"})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handler)
        return app

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        assert len(self.seen) == 1, self.seen
        return self.seen[0][1]


async def raw_request(port: int, head: bytes, body: bytes = b"") -> tuple[int, bytes, bytes]:
    """Send ``head`` (request line and headers, without the blank line); return the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head + b"\r\nConnection: close\r\n\r\n" + body)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), timeout=10)
    writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, content = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), headers, content


@pytest.fixture
async def canary(start_upstream: StartUpstream) -> tuple[Recorder, TestServer]:
    recorder = Recorder()
    return recorder, await start_upstream(recorder.app())


# -- not an open proxy ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "status"),
    [
        (b"http://{canary}/v1/models", 400),
        (b"http://{canary}/v1/chat/completions", 400),
        (b"https://{canary}/v1/models", 400),
        (b"http://{canary}", 404),  # no path at all: aiohttp's router finds no route
    ],
)
async def test_absolute_form_request_targets_are_refused(
    target: bytes,
    status: int,
    canary: tuple[Recorder, TestServer],
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
) -> None:
    recorder, canary_server = canary
    upstream = Recorder()
    proxy = await start_proxy(await start_upstream(upstream.app()))
    target = target.replace(b"{canary}", b"127.0.0.1:%d" % canary_server.port)
    answer = await raw_request(
        proxy.port, b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1:%d" % canary_server.port
    )
    assert answer[0] == status
    if status == 400:
        assert b"not a forward proxy" in answer[2]
    assert recorder.seen == upstream.seen == []


@pytest.mark.parametrize(
    "request_line",
    [
        b"CONNECT 127.0.0.1:{canary} HTTP/1.1",
        b"OPTIONS * HTTP/1.1",
        b"GET 127.0.0.1:{canary}/v1/models HTTP/1.1",
    ],
)
async def test_authority_and_asterisk_form_targets_are_refused(
    request_line: bytes,
    canary: tuple[Recorder, TestServer],
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
) -> None:
    recorder, canary_server = canary
    upstream = Recorder()
    proxy = await start_proxy(await start_upstream(upstream.app()))
    line = request_line.replace(b"{canary}", b"%d" % canary_server.port)
    status, _, _ = await raw_request(proxy.port, line + b"\r\nHost: x")
    assert status in (400, 404)
    assert recorder.seen == upstream.seen == []


@pytest.mark.parametrize(
    "host",
    [b"127.0.0.1:{canary}", b"evil.example", b"127.0.0.1:{canary}@evil.example", b""],
)
async def test_the_host_header_never_chooses_where_a_request_goes(
    host: bytes,
    canary: tuple[Recorder, TestServer],
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
) -> None:
    recorder, canary_server = canary
    upstream = Recorder()
    upstream_server = await start_upstream(upstream.app())
    proxy = await start_proxy(upstream_server)
    host = host.replace(b"{canary}", b"%d" % canary_server.port)
    status, _, body = await raw_request(
        proxy.port,
        b"GET /v1/props HTTP/1.1\r\nHost: "
        + host
        + b"\r\nX-Forwarded-Host: 127.0.0.1:%d" % canary_server.port,
    )
    assert (status, body) == (200, b"upstream")
    assert recorder.seen == []
    assert upstream.headers["Host"] == f"127.0.0.1:{upstream_server.port}"


@pytest.mark.parametrize(
    "path",
    [
        b"/v1/../admin",
        b"/v1/%2e%2e/admin",
        b"/v1/%2E%2E%2Fadmin",
        b"/v1/%252e%252e/admin",
        b"/v1/..%5cadmin",
        b"/v1\\..\\admin",
        b"/v1/..;/admin",
        b"/v1/.%2e/admin",
        b"/-/health/../../admin",
        b"/v1/./models",
    ],
)
async def test_paths_that_climb_out_of_the_upstream_prefix_are_refused(
    path: bytes, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = Recorder()
    server = await start_upstream(upstream.app())
    proxy = await start_proxy(UpstreamSettings(name="u", url=upstream_url(server, "/engine")))
    status, _, body = await raw_request(proxy.port, b"GET " + path + b" HTTP/1.1\r\nHost: x")
    assert status == 400
    assert b"dot segments" in body
    assert upstream.seen == []


@pytest.mark.parametrize("path", [b"//127.0.0.1/x", b"/@evil.example/x", b"/v1/a..b/%2F"])
async def test_odd_but_harmless_paths_stay_under_the_upstream_prefix(
    path: bytes,
    canary: tuple[Recorder, TestServer],
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
) -> None:
    recorder, _ = canary
    upstream = Recorder()
    server = await start_upstream(upstream.app())
    proxy = await start_proxy(UpstreamSettings(name="u", url=upstream_url(server, "/engine")))
    status, _, _ = await raw_request(proxy.port, b"GET " + path + b" HTTP/1.1\r\nHost: x")
    assert status == 200
    assert upstream.seen[0][0] == "/engine" + path.decode()
    assert recorder.seen == []


def header_lines(raw: bytes) -> CIMultiDict[str]:
    headers: CIMultiDict[str] = CIMultiDict()
    for line in raw.split(b"\r\n"):
        name, _, value = line.partition(b":")
        headers.add(name.decode(), value.strip().decode())
    return headers

"""Hostile clients: slow or oversized requests, and requests that are not HTTP/1.x.

Clients here are raw sockets, so a test controls exactly which bytes arrive and when the
client falls silent. The upstream is a real aiohttp server that records what reached it.
"""

from __future__ import annotations

import asyncio
import logging
import tracemalloc
from time import perf_counter

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.conftest import StartProxy, StartUpstream, template_probe


class Upstream:
    """Answers 200 and remembers each request's method, path and body length."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, int]] = []
        # tracemalloc's current size (if tracing) mid-body, while the proxy waits for this
        # upstream to read on, and once the body is in
        self.traced: list[int] = []

    async def handler(self, request: web.Request) -> web.Response:
        if template_probe(request.method, request.path, request.headers):
            return web.Response(status=404)
        size = 0
        while chunk := await request.content.readany():  # discarded: it must not count
            if tracemalloc.is_tracing() and not size:
                await asyncio.sleep(0.2)  # a slow reader: the rest waits on the proxy's side
                self.traced.append(tracemalloc.get_traced_memory()[0])
            size += len(chunk)
        if tracemalloc.is_tracing():
            self.traced.append(tracemalloc.get_traced_memory()[0])
        self.seen.append((request.method, request.path, size))
        return web.json_response({"ok": True})

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_route("*", "/{tail:.*}", self.handler)
        return app


Proxy = TestClient[web.Request, web.Application]


@pytest.fixture
def proxy_with(start_upstream: StartUpstream, start_proxy: StartProxy):
    async def start(**settings: object) -> tuple[Upstream, Proxy]:
        upstream = Upstream()
        return upstream, await start_proxy(await start_upstream(upstream.app()), **settings)

    return start


async def exchange(port: int, data: bytes, *, wait: float = 10) -> tuple[bytes, float]:
    """Send ``data`` and keep the socket open; return all the proxy sent until it closed the
    connection, and how long that took."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = perf_counter()
    try:
        writer.write(data)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), timeout=wait)
        return answer, perf_counter() - started
    finally:
        writer.close()


def status_of(answer: bytes) -> int:
    return int(answer.split(b"\r\n", 1)[0].split()[1])


async def first_status(port: int, data: bytes) -> int:
    """Send ``data`` and keep the socket open; the status of the answer's first line (it
    must come within 5 s, whether or not the request is whole)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        await writer.drain()
        return status_of(await asyncio.wait_for(reader.readline(), timeout=5))
    finally:
        writer.close()


# -- slow requests -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sent",
    [b"", b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Le"],
    ids=["nothing", "half-a-head"],
)
async def test_a_request_head_that_does_not_arrive_in_time_closes_the_connection(
    sent: bytes, proxy_with
) -> None:
    upstream, proxy = await proxy_with(timeouts={"request_headers": 1})
    answer, took = await exchange(proxy.port, sent)
    assert answer == b""
    assert 0.9 <= took < 5
    assert upstream.seen == []


async def test_a_body_that_stops_arriving_is_408_and_the_connection_is_closed(
    proxy_with,
) -> None:
    upstream, proxy = await proxy_with(timeouts={"request_body": 1})
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    )
    answer, took = await exchange(proxy.port, head + b'{"model"')
    assert status_of(answer) == 408
    assert b"timeouts.request_body" in answer
    assert b"Connection: close" in answer
    assert 0.9 <= took < 5  # answered, then closed at once (no lingering for the rest)
    assert upstream.seen == []


# -- oversized requests --------------------------------------------------------------------


async def test_a_declared_length_over_the_limit_is_413_before_the_body_is_sent(
    proxy_with,
) -> None:
    upstream, proxy = await proxy_with(
        limits={"max_request_body_bytes": 4096}, timeouts={"request_body": 30}
    )
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n"
    )
    assert await first_status(proxy.port, head) == 413  # no body byte sent
    assert upstream.seen == []


async def test_a_client_that_asks_before_sending_is_invited_only_under_the_limit(
    proxy_with,
) -> None:
    """``Expect: 100-continue`` (curl's way for bodies over 1 MiB): a length over the limit
    gets its 413 instead of "100 Continue", so the client never sends the body."""
    upstream, proxy = await proxy_with(limits={"max_request_body_bytes": 4096})
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    head = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n"
    )
    body = b'{"model": "m"}'
    writer.write(head % len(body))
    await writer.drain()
    assert await asyncio.wait_for(reader.readline(), timeout=5) == b"HTTP/1.1 100 Continue\r\n"
    assert await reader.readline() == b"\r\n"
    writer.write(body)
    assert (await asyncio.wait_for(reader.readline(), timeout=5)).split()[1] == b"200"
    writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(head % 5000)
    await writer.drain()
    assert (await asyncio.wait_for(reader.readline(), timeout=5)).split()[1] == b"413"
    writer.close()
    assert [size for *_, size in upstream.seen] == [len(body)]


_CHUNKED_HEAD = (
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
    b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
)
_CHUNK_OF_1000 = b"3e8\r\n" + b"x" * 1000 + b"\r\n"


async def test_a_chunked_body_is_413_as_soon_as_it_passes_the_limit(
    proxy_with,
) -> None:
    upstream, proxy = await proxy_with(
        limits={"max_request_body_bytes": 4096}, timeouts={"request_body": 30}
    )
    sent = _CHUNKED_HEAD + _CHUNK_OF_1000 * 5  # 5000 bytes, and the body never ends
    assert await first_status(proxy.port, sent) == 413
    assert upstream.seen == []


async def test_a_chunked_body_that_arrived_whole_is_413_when_over_the_limit(
    proxy_with,
) -> None:
    """A body already buffered to its end is read without a timer; its size still counts."""
    upstream, proxy = await proxy_with(
        limits={"max_request_body_bytes": 4096}, timeouts={"request_body": 30}
    )
    sent = _CHUNKED_HEAD + _CHUNK_OF_1000 * 5 + b"0\r\n\r\n"
    assert await first_status(proxy.port, sent) == 413
    assert upstream.seen == []


async def test_uploads_stream_through_whatever_their_size(
    proxy_with,
) -> None:
    """The limit is for bodies the proxy reads; an upload's size is the upstream's business."""
    upstream, proxy = await proxy_with(limits={"max_request_body_bytes": 4096})
    for content_type in ("multipart/form-data; boundary=b", "application/octet-stream"):
        resp = await proxy.post(
            "/v1/audio/transcriptions", data=b"x" * 20000, headers={"Content-Type": content_type}
        )
        assert resp.status == 200
    assert [size for *_, size in upstream.seen] == [20000, 20000]


@pytest.mark.filterwarnings("ignore:Sending a large body directly:ResourceWarning")
async def test_a_json_body_is_held_once_not_parsed_and_kept(
    proxy_with,
) -> None:
    """The proxy holds the body it forwards once: no parsed copy while the upstream works,
    and no copy of the unsent rest in the socket's buffer while the upstream reads slowly."""
    upstream, proxy = await proxy_with()
    size = 16 << 20
    body = b'{"model": "m", "messages": [{"role": "user", "content": "%s"}]}' % (b"x" * size)
    tracemalloc.start()
    try:
        resp = await proxy.post(
            "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
        )
    finally:
        tracemalloc.stop()
    assert resp.status == 200
    assert upstream.seen == [("POST", "/v1/chat/completions", len(body))]
    mid_body, body_in = upstream.traced
    assert mid_body < 1.5 * size, mid_body / size
    assert body_in < 1.5 * size, body_in / size


# -- not HTTP/1.x --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "request_head",
    [b"GET /\r\n\r\n", b"GET /v1/models\r\nHost: x\r\n\r\n", b"GET / HTTP/2.0\r\nHost: x\r\n\r\n"],
    ids=["http-0.9", "http-0.9-with-headers", "http-2.0-line"],
)
async def test_requests_that_are_not_http1_are_400_and_never_forwarded(
    request_head: bytes, proxy_with
) -> None:
    upstream, proxy = await proxy_with()
    answer, _ = await exchange(proxy.port, request_head)
    assert status_of(answer) == 400
    assert b"send HTTP/1.1" in answer
    assert upstream.seen == []


async def test_connect_is_405_with_allow_and_never_forwarded(
    proxy_with,
) -> None:
    upstream, proxy = await proxy_with()
    answer, _ = await exchange(proxy.port, b"CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status_of(answer) == 405
    assert b"\r\nAllow: GET, HEAD, POST" in answer
    assert upstream.seen == []


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n",
        b"GET /v1/models HTTP/1.1\nHost: x\n\n",
    ],
    ids=["cl-and-te", "header-too-long", "bare-lf"],
)
async def test_a_malformed_request_is_400_and_logs_one_line_without_a_traceback(
    request_bytes: bytes, proxy_with, caplog: pytest.LogCaptureFixture
) -> None:
    upstream, proxy = await proxy_with()
    with caplog.at_level(logging.DEBUG):
        answer, _ = await exchange(proxy.port, request_bytes)
    assert status_of(answer) == 400
    assert upstream.seen == []
    refusals = [r for r in caplog.records if "malformed" in r.getMessage()]
    assert len(refusals) == 1, caplog.text
    (refusal,) = refusals
    assert refusal.levelno == logging.WARNING
    assert refusal.getMessage().startswith("refused a malformed request from 127.0.0.1: 400 ")
    assert "\n" not in refusal.getMessage()
    assert all(r.exc_info is None for r in caplog.records), caplog.text
    assert "Traceback" not in caplog.text

"""Clients that misbehave: many that leave mid-request, and one that reads slowly.

Clients here are raw sockets, so a test controls exactly when a connection closes or resets
and how fast it is read.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import struct
from collections.abc import Callable

import orjson
import pytest
from aiohttp import ClientResponse, web

from proxy.core.sse import SSEDecoder
from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, port_of, upstream_url
from tests.support.raw_upstream import CHUNKED, SSE_HEAD, Conn, raw_upstream
from tests.support.sockets import open_connections_to, queued_bytes
from tests.support.streams import recorded

CHAT = "/v1/chat/completions"
TEXT = recorded("llamacpp-b9821-no-tools-text.sse")


def request_bytes(port: int, payload: dict[str, object]) -> bytes:
    body = orjson.dumps(payload)
    return (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (port, len(body), body)
    )


def reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def wait_until(condition: Callable[[], object]) -> None:
    """Poll state that no event announces (task counts, kernel socket tables), up to 10 s."""
    async with asyncio.timeout(10):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.02)


class EndlessUpstream:
    """Streams text events until cancelled, optionally after stalling before its head."""

    def __init__(self) -> None:
        self.running = 0
        self.cancelled = 0

    async def handler(self, request: web.Request) -> web.StreamResponse:
        payload = await request.json()
        self.running += 1
        try:
            if payload["when"] == "before-head":
                await asyncio.sleep(60)
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            for n in range(100_000):
                await response.write(TEXT[1 + n % 10])
                await asyncio.sleep(0.005)
            return response
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.running -= 1

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post(CHAT, self.handler)
        return app


def live_upstream_responses(port: int) -> list[object]:
    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, ClientResponse) and o.url.port == port] + [
        o for o in gc.get_objects() if isinstance(o, SSEDecoder)
    ]


async def test_many_client_disconnects_leave_no_task_connection_or_buffer_behind(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    endless = EndlessUpstream()
    upstream = await start_upstream(endless.app())
    proxy = await start_proxy(
        UpstreamSettings(name="pass", url=upstream_url(upstream), models=["pass"], normalize=False),
        UpstreamSettings(name="rewrite", url=upstream_url(upstream), models=["rewrite"]),
    )

    async def client(model: str, when: str, how: str) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port_of(proxy))
        writer.write(request_bytes(port_of(proxy), {"model": model, "stream": True, "when": when}))
        await writer.drain()
        if when == "before-head":
            await wait_until(lambda: endless.running > 0)
            await asyncio.sleep(0.05)
        else:
            await reader.readuntil(b"data: ")  # the stream is flowing
        if how == "reset":
            reset(writer)
        else:
            writer.close()

    # One round first, so that lazily created machinery counts in the baseline.
    await client("pass", "mid-stream", "close")
    await wait_until(lambda: endless.running == 0)
    baseline_tasks = len(asyncio.all_tasks())

    cases = [
        (model, when, how)
        for model in ("pass", "rewrite")
        for when in ("before-head", "mid-stream")
        for how in ("close", "reset")
    ]
    rounds = 6
    for _ in range(rounds):
        await asyncio.gather(*(client(*case) for case in cases))

    total = 1 + rounds * len(cases)
    await wait_until(lambda: endless.cancelled == total)
    await wait_until(lambda: len(asyncio.all_tasks()) <= baseline_tasks)
    assert len(asyncio.all_tasks()) == baseline_tasks
    await wait_until(lambda: open_connections_to(port_of(upstream)) == 0)
    assert live_upstream_responses(port_of(upstream)) == []


def content_event(size: int) -> bytes:
    text = "x" * size
    return (
        b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}) + b"\n\n"
    )


@pytest.mark.parametrize("normalize", [False, True], ids=["passthrough", "rewriting"])
async def test_slow_client_gets_backpressure_not_a_growing_buffer(
    normalize: bool, start_proxy: StartProxy
) -> None:
    """The proxy holds at most a small constant beyond what sits in socket buffers.

    The upstream writes as fast as the proxy takes its bytes, up to far more than every socket
    buffer on the path can hold (tcp_rmem's maximum is 32 MiB here); the client reads slowly.
    At every sample, bytes the upstream handed to its kernel, minus bytes the client read,
    minus bytes queued in the four sockets of the path, is what the proxy holds in memory.
    Measured: about 1 MiB, whatever the upstream sends: aiohttp's read buffer (128 KiB high
    water plus one 256 KiB socket read, handed to the pump whole) and the same again in the
    client transport's write buffer while the pump waits for it to drain.
    """
    limit = 96 << 20
    event = content_event(16 << 10)
    written = 0

    async def fast(conn: Conn) -> None:
        nonlocal written
        await conn.send(SSE_HEAD + CHUNKED.head(0))
        framed = CHUNKED.frame(event)
        sent = 0
        try:
            while sent < limit:
                conn.writer.write(framed)
                sent += len(framed)
                written = sent - conn.writer.transport.get_write_buffer_size()
                await conn.writer.drain()
        except ConnectionError:  # the proxy closed the connection
            conn.closed_by_peer.set()
            return
        written = sent
        await conn.wait_peer_close()

    async with raw_upstream(fast) as upstream:
        proxy = await start_proxy(
            UpstreamSettings(name="u", url=upstream.url, normalize=normalize),
            limits={"max_event_bytes": 64 << 10, "max_held_bytes": 64 << 10},
        )
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 10)
        client.setblocking(False)
        loop = asyncio.get_running_loop()
        await loop.sock_connect(client, ("127.0.0.1", port_of(proxy)))
        await loop.sock_sendall(
            client, request_bytes(port_of(proxy), {"model": "m", "stream": True})
        )
        await wait_until(lambda: upstream.conns and written > 0)
        conn = upstream.conns[0]
        proxy_side = conn.writer.get_extra_info("peername")[1]
        client_side = client.getsockname()[1]
        paths = ((upstream.port, proxy_side), (port_of(proxy), client_side))

        read = 0
        held_max = 0
        for _ in range(60):
            read += len(await loop.sock_recv(client, 16 << 10))
            await asyncio.sleep(0.02)
            held = written - read - queued_bytes(*paths)
            held_max = max(held_max, held)
        client.close()
        await asyncio.wait_for(conn.closed_by_peer.wait(), timeout=10)

    assert written < limit, "the upstream was never slowed down"
    assert held_max < 2 << 20, f"the proxy held {held_max} bytes"


@pytest.mark.parametrize("normalize", [False, True], ids=["passthrough", "rewriting"])
async def test_a_client_that_stops_reading_is_dropped_after_the_client_write_timeout(
    normalize: bool, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """It would otherwise hold its stream, its buffers and its upstream slot forever."""
    event = content_event(16 << 10)

    async def endless(conn: Conn) -> None:
        await conn.send(SSE_HEAD + CHUNKED.head(0))
        try:
            while True:
                await conn.send(CHUNKED.frame(event))
        except ConnectionError:  # the proxy gave up and closed the connection
            conn.closed_by_peer.set()

    async with raw_upstream(endless) as upstream:
        proxy = await start_proxy(
            UpstreamSettings(
                name="u", url=upstream.url, normalize=normalize, max_concurrent_requests=1
            ),
            timeouts={"client_write": 0.5},
        )
        _, writer = await asyncio.open_connection("127.0.0.1", port_of(proxy))
        writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        writer.write(request_bytes(port_of(proxy), {"model": "m", "stream": True}))
        await writer.drain()
        await wait_until(lambda: bool(upstream.conns))
        # The client reads nothing from here on.
        await asyncio.wait_for(upstream.conns[0].closed_by_peer.wait(), timeout=20)
        assert "the client stopped reading" in caplog.text
        writer.close()
        await writer.wait_closed()

        # Its slot is free again.
        again = await proxy.post(CHAT, json={"model": "m", "stream": True})
        assert again.status == 200
        again.close()

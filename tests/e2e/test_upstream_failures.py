"""Failure paths: refused and stalled upstreams, drops mid-stream, and clients that leave."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

import pytest
from aiohttp import ClientPayloadError, web

from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.support.sockets import free_port
from tests.support.upstreams import stalling_app

CHAT = "/v1/chat/completions"
STREAM_REQUEST = {"model": "m", "stream": True}


async def test_refused_upstream_is_502_naming_it_without_credentials(
    start_proxy: StartProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SECRET_KEY_VAR", "sk-very-secret")
    port = free_port()
    proxy = await start_proxy(
        UpstreamSettings(
            name="gpu-box", url=f"http://127.0.0.1:{port}", api_key_env="SECRET_KEY_VAR"
        )
    )
    resp = await proxy.post(CHAT, json=STREAM_REQUEST)
    assert resp.status == 502
    body = await resp.text()
    assert "gpu-box" in body
    assert "sk-very-secret" not in body
    assert (await resp.json())["error"]["type"] == "upstream_error"


async def test_upstream_slow_to_answer_is_504(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    proxy = await start_proxy(await start_upstream(stalling_app()), timeouts={"first_byte": 0.3})
    resp = await proxy.post(CHAT, json=STREAM_REQUEST)
    assert resp.status == 504
    assert (await resp.json())["error"]["type"] == "upstream_timeout"


@pytest.fixture
def unaccepting_port() -> Iterator[int]:
    """A port whose listen backlog is full, so new connections hang in the handshake."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(8):
        s = socket.socket()
        s.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            s.connect(("127.0.0.1", port))
        fillers.append(s)
    yield port
    for s in fillers:
        s.close()
    listener.close()


async def test_upstream_connect_timeout_is_504(
    start_proxy: StartProxy, unaccepting_port: int
) -> None:
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=f"http://127.0.0.1:{unaccepting_port}"),
        timeouts={"connect": 0.3, "first_byte": 20},
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    resp = await proxy.post(CHAT, json=STREAM_REQUEST)
    assert resp.status == 504
    assert loop.time() - started < 10


def dropping_app(events: list[bytes], *, how: str) -> web.Application:
    """Sends ``events`` then breaks the connection: ``close`` mid-body or ``stall`` forever."""

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in events:
            await response.write(event)
            await asyncio.sleep(0.01)
        if how == "close":
            assert request.transport is not None
            request.transport.close()
        else:
            await asyncio.sleep(30)
        return response

    app = web.Application()
    app.router.add_post(CHAT, handler)
    return app


async def read_until_error(resp: object) -> tuple[bytes, BaseException | None]:
    received = b""
    try:
        async for chunk in resp.content.iter_any():  # type: ignore[attr-defined]
            received += chunk
    except ClientPayloadError as exc:
        return received, exc
    return received, None


@pytest.mark.parametrize("normalize", [False, True], ids=["passthrough", "rewriting"])
@pytest.mark.parametrize(
    "events",
    [
        [b'data: {"choices":[]}\n\n', b'data: {"choi'],
        [b'data: {"choices":[]}\n\n'],
        [
            b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{\\"a"}}]}}]}\n\n'
        ],
    ],
    ids=["mid-event", "between-events", "mid-tool-call"],
)
async def test_upstream_drop_mid_stream_reaches_client_as_an_error_after_every_byte(
    events: list[bytes], normalize: bool, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = await start_upstream(dropping_app(events, how="close"))
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(upstream), normalize=normalize)
    )
    resp = await proxy.post(CHAT, json=STREAM_REQUEST)
    received, error = await read_until_error(resp)
    assert error is not None, "a dropped upstream must not look like a clean end"
    assert b"[DONE]" not in received
    if not normalize:
        assert received == b"".join(events)
    else:
        assert received.startswith(events[0][:12])


async def test_upstream_idle_past_the_timeout_aborts_the_stream(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    events = [b'data: {"object":"chat.completion.chunk","choices":[]}\n\n']
    upstream = await start_upstream(dropping_app(events, how="stall"))
    proxy = await start_proxy(upstream, timeouts={"idle": 0.3})
    resp = await proxy.post(CHAT, json=STREAM_REQUEST)
    received, error = await asyncio.wait_for(read_until_error(resp), timeout=10)
    assert error is not None
    assert received == events[0]


async def test_upstream_steady_past_the_idle_timeout_is_not_idle(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    # Each gap is under the timeout, the whole stream well over it: only a timer that
    # follows every read (not one started with the stream) lets this stream finish.
    events = [b'data: {"object":"chat.completion.chunk","choices":[]}\n\n'] * 8 + [
        b"data: [DONE]\n\n"
    ]

    async def steady(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in events:
            await response.write(event)
            await asyncio.sleep(0.1)
        return response

    app = web.Application()
    app.router.add_post(CHAT, steady)
    upstream = await start_upstream(app)
    proxy = await start_proxy(upstream, timeouts={"idle": 0.3})
    resp = await proxy.post(CHAT, json=STREAM_REQUEST)
    received, error = await asyncio.wait_for(read_until_error(resp), timeout=10)
    assert error is None
    assert received == b"".join(events)


async def test_client_disconnect_cancels_the_upstream_request(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream_saw_close = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"choices":[]}\n\n')
        try:
            await asyncio.sleep(30)  # a long prompt: nothing to write, so only a cancel tells
        except asyncio.CancelledError:
            upstream_saw_close.set()
            raise
        return response

    app = web.Application()
    app.router.add_post(CHAT, slow)
    upstream = await start_upstream(app)
    proxy = await start_proxy(upstream)
    resp = await proxy.post(CHAT, json=STREAM_REQUEST)
    await resp.content.readuntil(b"\n\n")
    resp.close()  # the client goes away mid-stream
    await asyncio.wait_for(upstream_saw_close.wait(), timeout=5)

"""Passthrough: what the proxy does not rewrite reaches each side untouched, and at once."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from aiohttp import web
from multidict import CIMultiDict
from yarl import URL

from tests.conftest import UPSTREAM_FIXTURES, StartProxy, StartUpstream
from tests.support.upstreams import replay_app, serve_writes

RECORDED = sorted(UPSTREAM_FIXTURES.glob("*.sse"))


@pytest.mark.parametrize("recording", RECORDED, ids=[p.stem for p in RECORDED])
async def test_recorded_stream_passes_byte_for_byte_when_not_rewritten(
    recording: Path, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    from proxy.settings import UpstreamSettings

    body = recording.read_bytes()
    upstream = await start_upstream(replay_app(body))
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=f"http://127.0.0.1:{upstream.port}", normalize=False)
    )
    resp = await proxy.post("/v1/chat/completions", json={"model": "m", "stream": True})
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "text/event-stream"
    assert resp.headers["X-Accel-Buffering"] == "no"
    assert await resp.read() == body


async def test_plain_text_stream_passes_byte_for_byte_through_a_rewriting_upstream(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    body = (UPSTREAM_FIXTURES / "llamacpp-b9821-no-tools-text.sse").read_bytes()
    upstream = await start_upstream(replay_app(body))
    proxy = await start_proxy(upstream)
    resp = await proxy.post("/v1/chat/completions", json={"model": "m", "stream": True})
    assert await resp.read() == body


async def test_non_streaming_json_and_upstream_error_pass_unchanged(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    rejected = (UPSTREAM_FIXTURES / "llamacpp-b5477-stream-with-tools-rejected.body").read_bytes()
    upstream = await start_upstream(
        replay_app(rejected, content_type="application/json", status=500)
    )
    proxy = await start_proxy(upstream)
    resp = await proxy.post(
        "/v1/chat/completions", json={"model": "m", "stream": True, "tools": []}
    )
    assert resp.status == 500
    assert await resp.read() == rejected


@pytest.mark.parametrize("status", [400, 401, 404, 429, 503])
async def test_upstream_error_statuses_and_headers_pass_through(
    status: int, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    body = b'{"error":{"message":"nope"}}'
    headers = {"Retry-After": "7"}
    app = serve_writes([body], content_type="application/json", status=status, headers=headers)
    proxy = await start_proxy(await start_upstream(app))
    resp = await proxy.post("/v1/chat/completions", json={"model": "m"})
    assert resp.status == status
    assert resp.headers["Retry-After"] == "7"
    assert await resp.read() == b'{"error":{"message":"nope"}}'


async def test_method_path_query_headers_and_binary_bodies_pass_through(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    seen: dict[str, object] = {}
    payload = os.urandom(300_000)

    async def echo(request: web.Request) -> web.Response:
        seen["method"] = request.method
        seen["path_qs"] = request.raw_path
        seen["headers"] = request.headers.copy()
        body = await request.read()
        return web.Response(
            body=body[::-1],
            content_type="application/octet-stream",
            headers={"X-Upstream": "yes", "Connection": "close, X-Hop", "X-Hop": "1"},
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo)
    upstream = await start_upstream(app)
    proxy = await start_proxy(upstream)
    url = URL(f"http://127.0.0.1:{proxy.port}/v1/files/a%20b?x=1&y=%2F", encoded=True)
    resp = await proxy.session.put(
        url,
        data=payload,
        headers={
            "Content-Type": "application/octet-stream",
            "X-Custom": "kept",
            "Connection": "keep-alive, X-Secret-Hop",
            "X-Secret-Hop": "drop me",
            "Keep-Alive": "timeout=5",
            "Proxy-Authorization": "Basic x",
        },
    )
    assert resp.status == 200
    assert await resp.read() == payload[::-1]
    assert resp.headers["X-Upstream"] == "yes"
    assert "X-Hop" not in resp.headers
    assert seen["method"] == "PUT"
    assert seen["path_qs"] == "/v1/files/a%20b?x=1&y=%2F"
    headers = seen["headers"]
    assert isinstance(headers, CIMultiDict)
    assert headers["X-Custom"] == "kept"
    assert headers["Host"] == f"127.0.0.1:{upstream.port}"
    for hop in ("X-Secret-Hop", "Keep-Alive", "Proxy-Authorization"):
        assert hop not in headers
    assert headers["X-Forwarded-For"] == "127.0.0.1"
    assert headers["X-Forwarded-Proto"] == "http"
    assert headers["X-Request-Id"] == resp.headers["X-Request-Id"]


@pytest.mark.parametrize("method", ["GET", "DELETE", "HEAD", "OPTIONS", "PATCH"])
async def test_other_methods_reach_the_upstream(
    method: str, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(
            text=f"{request.method} {request.path}", headers={"X-Seen": request.method}
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    proxy = await start_proxy(await start_upstream(app))
    resp = await proxy.request(method, "/props")
    assert resp.status == 200
    assert resp.headers["X-Seen"] == method
    if method != "HEAD":
        assert await resp.text() == f"{method} /props"


async def test_client_request_id_is_forwarded_and_returned(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=request.headers["X-Request-Id"])

    app = web.Application()
    app.router.add_get("/props", handler)
    proxy = await start_proxy(await start_upstream(app))
    resp = await proxy.get("/props", headers={"X-Request-Id": "abc-123"})
    assert await resp.text() == "abc-123"
    assert resp.headers["X-Request-Id"] == "abc-123"


async def test_path_prefix_of_the_upstream_url_is_kept(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    from proxy.settings import UpstreamSettings

    async def handler(request: web.Request) -> web.Response:
        return web.Response(text=request.raw_path)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    upstream = await start_upstream(app)
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=f"http://127.0.0.1:{upstream.port}/engine/")
    )
    resp = await proxy.get("/v1/models/x?q=1")
    assert await resp.text() == "/engine/v1/models/x?q=1"


async def test_each_upstream_read_is_forwarded_without_waiting_for_the_next(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    """The upstream sends one event, then waits until the client has received it."""
    received_first = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"n":1}\n\n')
        await asyncio.wait_for(received_first.wait(), timeout=10)
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    proxy = await start_proxy(await start_upstream(app))
    resp = await proxy.post("/v1/chat/completions", json={"model": "m", "stream": True})
    first = await asyncio.wait_for(resp.content.readuntil(b"\n\n"), timeout=5)
    assert first == b'data: {"n":1}\n\n'
    received_first.set()
    assert await resp.read() == b"data: [DONE]\n\n"


async def test_large_request_body_streams_through_without_json(
    start_upstream: StartUpstream, start_proxy: StartProxy, tmp_path: Path
) -> None:
    sizes: list[int] = []

    async def handler(request: web.Request) -> web.Response:
        total = 0
        async for chunk in request.content.iter_any():
            total += len(chunk)
        sizes.append(total)
        return web.Response(text="ok")

    app = web.Application(client_max_size=1 << 30)
    app.router.add_post("/v1/audio/transcriptions", handler)
    proxy = await start_proxy(await start_upstream(app))

    async def body():
        for _ in range(80):
            yield b"\0" * (1 << 20)

    resp = await proxy.post(
        "/v1/audio/transcriptions", data=body(), headers={"Content-Type": "audio/wav"}
    )
    assert resp.status == 200
    assert sizes == [80 << 20]


async def test_get_without_body_reaches_upstream_without_body_headers(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(
            {
                k: request.headers.get(k)
                for k in ("Content-Length", "Transfer-Encoding", "Content-Type")
            }
        )

    app = web.Application()
    app.router.add_get("/props", handler)
    proxy = await start_proxy(await start_upstream(app))
    resp = await proxy.get("/props")
    assert await resp.json() == {
        "Content-Length": None,
        "Transfer-Encoding": None,
        "Content-Type": None,
    }

"""One stream cannot freeze the others: while a huge tool-call stream is rewritten as fast as
its upstream sends it, the proxy still answers its health check and a second stream at once.

The upstream writes its whole answer (40,000 argument deltas the way old llama.cpp sends
them, the name repeated on every one, so every delta is rewritten) in large writes, so the
proxy's reads are as big and as full of work as the connection allows."""

from __future__ import annotations

import asyncio
import gc
import json
import time
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestClient

from tests.conftest import StartProxy, StartUpstream

BOUND_S = 0.25  # generous: a turn of the loop should take a few milliseconds
DELTAS = 40_000
SAMPLES = 5


def _event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def _old_llama(text: str | None) -> bytes:
    function = {"name": "write_file", "id": "call_1"}
    if text is not None:
        function["arguments"] = text
    return _event({"tool_calls": [{"index": 0, "function": function}]})


def huge_call() -> list[bytes]:
    events = [_event({"role": "assistant", "content": None}), _old_llama(None)]
    events.append(_old_llama('{"path": "a.txt", "content": "'))
    events += [_old_llama(f" w{i}") for i in range(DELTAS)]
    events += [_old_llama('"}'), _event({}, "tool_calls"), b"data: [DONE]\n\n"]
    return events


def small_call() -> list[bytes]:
    opening = {"index": 0, "id": "call_2", "type": "function"}
    opening["function"] = {"name": "get_weather", "arguments": ""}
    return [
        _event({"role": "assistant", "content": None}),
        _event({"tool_calls": [opening]}),
        _event({"tool_calls": [{"index": 0, "function": {"arguments": '{"q": "Paris"}'}}]}),
        _event({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]


def upstream_app() -> web.Application:
    huge, small = huge_call(), b"".join(small_call())
    batches = [b"".join(huge[i : i + 2_000]) for i in range(0, len(huge), 2_000)]

    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if body["model"] == "huge":
            for batch in batches:
                await resp.write(batch)
        else:
            await resp.write(small)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    return app


async def test_health_and_a_second_stream_stay_prompt_beside_a_huge_fast_stream(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = await start_upstream(upstream_app())
    proxy = await start_proxy(upstream)
    # The serving process freezes its start-up heap (proxy/shell/heap.py); this one also holds
    # what every earlier test left (some 700,000 objects in a whole run), and one collection of
    # the oldest generation over it took 0.5-0.7 s: the test runner's pause, not the proxy's.
    gc.collect()
    gc.freeze()
    try:
        await _measure(proxy)
    finally:
        gc.unfreeze()


async def _measure(proxy: TestClient[web.Request, web.Application]) -> None:
    flowing = asyncio.Event()
    received = 0

    async def read_huge() -> bytes:
        nonlocal received
        resp = await proxy.post("/v1/chat/completions", json={"model": "huge", "stream": True})
        parts = []
        async for part in resp.content.iter_any():
            parts.append(part)
            received += len(part)
            if received > 1 << 20:
                flowing.set()
        return b"".join(parts)

    async def timed(request: Any) -> tuple[float, bytes]:
        started = time.monotonic()
        async with request as resp:
            body = await resp.read()
            assert resp.status == 200
        return time.monotonic() - started, body

    huge = asyncio.create_task(read_huge())
    await asyncio.wait_for(flowing.wait(), 30)
    health: list[float] = []
    second: list[float] = []
    while len(health) < SAMPLES and not huge.done():
        took, _ = await timed(proxy.get("/-/health"))
        health.append(took)
        small = {"model": "small", "stream": True}
        took, body = await timed(proxy.post("/v1/chat/completions", json=small))
        second.append(took)
        assert body.endswith(b"data: [DONE]\n\n")
    in_flight = not huge.done()
    body = await huge
    assert max(health) < BOUND_S, health
    assert max(second) < BOUND_S, second
    assert in_flight, "the huge stream ended before the measurements did: they prove nothing"
    assert body.endswith(b"data: [DONE]\n\n")
    assert body.count(b"data: ") == DELTAS + 6

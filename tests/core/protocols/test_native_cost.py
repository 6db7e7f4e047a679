"""A native stream's cost grows with its length, never faster, whatever its shape, and one
native stream never freezes the proxy (issue 26 item 1).

The cost guard is tests/core/protocols/chat/test_linear_cost.py's, on the native repairers: 16 times the stream
must cost less than 40 times the CPU (linear costs about 16 times). N function_call items
without their output_item.done (the SGLang router's shape) cost N² before: each item was
ended only at the stream's end, and every event held behind it was read again each time.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest
from aiohttp import web

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.registry import CLIENT_PROTOCOLS
from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.support import native_shapes as s
from tests.support.cpu import least_cpu_seconds
from tests.support.native_shapes import REQUESTS, SHAPES

GROWTH = 16
BOUND = 40
# nothing goes raw here: the paths that hold are what is measured
OPTIONS = UpstreamOptions(dialects=("hermes",), max_held_bytes=1 << 30)


def cpu_seconds(protocol: str, events: list[bytes], repeat: int) -> float:
    """The least CPU time the native repairer took over the stream, in reads of 1,500 bytes."""
    body = b"".join(events)
    reads = [body[i : i + 1500] for i in range(0, len(body), 1500)]
    native = CLIENT_PROTOCOLS[protocol].native

    def work() -> None:
        counter = itertools.count()
        stream = native(
            new_id=lambda: f"i{next(counter)}", request=REQUESTS[protocol], options=OPTIONS
        )
        for read in reads:
            stream.feed(read)
        stream.close(complete=True)

    return least_cpu_seconds(work, repeat)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_sixteen_times_the_native_stream_costs_less_than_forty_times_the_cpu(shape: str) -> None:
    protocol, build, small = SHAPES[shape]
    short = cpu_seconds(protocol, build(small), repeat=3)
    long = cpu_seconds(protocol, build(small * GROWTH), repeat=2)
    assert long < BOUND * short, f"{GROWTH}x the stream took {long / short:.0f}x the CPU"


HEALTH_BOUND_S = 0.25  # generous: a turn of the loop takes a few milliseconds
ITEMS = 3_000


def sglang_upstream() -> web.Application:
    """A native Responses server sending 3,000 calls without their output_item.done, in ten
    large writes a few milliseconds apart (the proxy's reads are full, and the stream lasts
    long enough to be asked about)."""
    events = s.sglang_calls(ITEMS)
    size = len(events) // 10 + 1
    batches = [b"".join(events[i : i + size]) for i in range(0, len(events), size)]

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for batch in batches:
            await resp.write(batch)
            await asyncio.sleep(0.02)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/responses", handler)
    return app


async def test_health_stays_prompt_during_a_stream_of_thousands_of_native_items(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = await start_upstream(sglang_upstream())
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(upstream), responses="native")
    )
    streaming = asyncio.Event()

    async def read_stream() -> bytes:
        resp = await proxy.post("/v1/responses", json=REQUESTS["responses"])
        assert resp.status == 200
        streaming.set()
        return await resp.read()

    stream = asyncio.create_task(read_stream())
    await asyncio.wait_for(streaming.wait(), 30)
    health: list[float] = []
    async with asyncio.timeout(120):
        while not stream.done():
            started = time.monotonic()
            async with proxy.get("/-/health") as resp:
                assert resp.status == 200
            health.append(time.monotonic() - started)
    body = await stream
    assert body.count(b"event: response.output_item.done") == ITEMS  # every call ended
    assert len(health) >= 3, "the stream ended before the proxy was asked anything"
    assert max(health) < HEALTH_BOUND_S, f"/-/health took {max(health):.3f} s"

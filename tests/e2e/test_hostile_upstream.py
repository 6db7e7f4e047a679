"""Hostile or broken upstream data through the running proxy, on the rewriting path.

The documented outcome for each: what the proxy cannot understand goes out raw, what is too
big is cut at its cap with a log line and forwarded raw from there, and the proxy never
crashes, never hangs and never holds more than the cap. Every request offers a tool, so the
normalizer and its dialect parsers are live.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
import pytest
from aiohttp import web

from proxy.core.sse import DONE, Event, SSEDecoder
from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.support.streams import arguments, call_event, chunk_event, chunks, read_until_error
from tests.support.upstreams import serve_writes

CHAT = "/v1/chat/completions"
TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
REQUEST = {"model": "m", "stream": True, "tools": TOOLS}
OPEN = chunk_event({"role": "assistant", "content": ""})
FINISH = chunk_event({}, finish="stop")
CAP_LOG = "outgrew limits.max_event_bytes or limits.max_held_bytes"


async def through_proxy(
    writes: list[bytes],
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    *,
    output: str = "streamed",
    **settings: Any,
) -> bytes:
    """What a client receives for ``writes``; the stream must end cleanly and the proxy live on."""
    upstream = await start_upstream(serve_writes(writes))
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(upstream), output=output), **settings
    )
    resp = await proxy.post(CHAT, json=REQUEST)
    assert resp.status == 200
    received, error = await asyncio.wait_for(read_until_error(resp), timeout=120)
    assert error is None
    assert (await proxy.get("/-/health")).status == 200
    return received


def no_errors_logged(caplog: pytest.LogCaptureFixture) -> bool:
    return not [r for r in caplog.records if r.levelno >= logging.ERROR]


UNPARSEABLE = {
    "invalid-utf8-content": [
        b'data: {"choices":[{"index":0,"delta":{"content":"caf\xc3("}}]}\n\n',
        b'data: {"choices":[{"index":0,"delta":{"content":"\xff\xfe<tool_call>"}}]}\n\n',
    ],
    "invalid-utf8-arguments": [
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"function",'
        b'"function":{"name":"f","arguments":"{\\"a\\": \\"\xed\xa0\x80\\"}"}}]}}]}\n\n'
    ],
    "non-json-data": [
        b"data: hello world\n\n",
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,\n\n',
        b"data: {\n\n",
        b"data:\n\n",
        b'data: {"choices":[{"index":0,"delta":{"content":"<tool_call>{\\"name\\": "}}]}\x00\n\n',
    ],
    "json-not-an-object": [
        b"data: [1, 2, 3]\n\n",
        b'data: "tool_calls"\n\n',
        b"data: 42\n\n",
        b"data: null\n\n",
        b'data: ["tool_calls", {"finish_reason": "tool_calls"}]\n\n',
    ],
    "deeply-nested-json": [
        b"data: " + b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"\n\n",
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":' + b"[" * 200_000 + b"\n\n",
    ],
}


@pytest.mark.parametrize("case", UNPARSEABLE)
async def test_data_the_proxy_cannot_parse_goes_out_raw(
    case: str,
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    writes = [OPEN, *UNPARSEABLE[case], FINISH, DONE]
    received = await through_proxy(writes, start_upstream, start_proxy)
    for event in UNPARSEABLE[case]:
        assert event in received
    assert no_errors_logged(caplog)


ODD_SHAPES = [
    b'data: {"choices": "none"}\n\n',
    b'data: {"choices": [1, null, "x", []]}\n\n',
    b'data: {"choices": [{"index": 0, "delta": []}]}\n\n',
    b'data: {"choices": [{"index": 0, "delta": {"tool_calls": "f"}}]}\n\n',
    b'data: {"choices": [{"index": 0, "delta": {"tool_calls": [null, 1, "s", []]}}]}\n\n',
    b'data: {"choices": [{"index": "0", "delta": {"tool_calls": [{"index": -1, "function": 5}]}}]}\n\n',
    b'data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1e308, "function": {"name": [], "arguments": {"x": [[[[1]]]]}}}]}}]}\n\n',
    b'data: {"choices": [{"index": 0, "delta": {"content": null, "tool_calls": [], "finish_reason": 7}}]}\n\n',
    b'data: {"choices": [{"index": 99999999999999999999, "delta": {"content": "x"}}]}\n\n',
    b'data: {"error": "tool_calls", "choices": [{"index": 0, "delta": {"tool_calls": [{}]}}]}\n\n',
]


async def test_json_objects_of_unexpected_shapes_never_break_the_stream(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    writes = [OPEN, *ODD_SHAPES, FINISH, DONE]
    received = await through_proxy(writes, start_upstream, start_proxy)
    assert received.endswith(DONE)
    assert no_errors_logged(caplog)


def content_event(size: int) -> bytes:
    return chunk_event({"content": "x" * size})


@pytest.mark.parametrize(
    "big",
    [content_event(3 << 20), call_event(0, "a" * (3 << 20), name="f")],
    ids=["content", "arguments"],
)
async def test_an_event_beyond_max_event_bytes_is_forwarded_raw_with_a_log_line(
    big: bytes,
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    writes = [OPEN, big[: 1 << 20], big[1 << 20 :], call_event(0, "tail"), FINISH, DONE]
    received = await through_proxy(
        writes, start_upstream, start_proxy, limits={"max_event_bytes": 1 << 20}
    )
    assert received == b"".join(writes)
    assert CAP_LOG in caplog.text


@pytest.mark.parametrize("output", ["streamed", "coalesced"])
async def test_enormous_arguments_in_many_fragments_lose_no_byte(
    output: str,
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fragment = '{"k": "' + "v" * (16 << 10) + '", '
    writes = [OPEN, call_event(0, "{", name="f")]
    writes += [call_event(0, fragment) for _ in range(256)]  # 4 MiB of arguments
    writes += [call_event(0, '"end": 1}'), chunk_event({}, finish="tool_calls"), DONE]
    received = await through_proxy(
        writes, start_upstream, start_proxy, output=output, limits={"max_held_bytes": 1 << 20}
    )
    assert arguments(received) == arguments(b"".join(writes))
    assert CAP_LOG in caplog.text


async def test_thousands_of_tool_calls_keep_every_call_and_argument(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    count = 3000
    writes = [OPEN]
    for i in range(count):
        writes += [call_event(i, '{"n": ', name="f"), call_event(i, f"{i}}}")]
    writes += [chunk_event({}, finish="tool_calls"), DONE]
    received = await through_proxy(writes, start_upstream, start_proxy)
    assert arguments(received) == arguments(b"".join(writes))
    ids = {
        call.get("id")
        for chunk in chunks(received)
        for choice in chunk["choices"]
        for call in choice["delta"].get("tool_calls") or ()
        if call.get("id")
    }
    assert len(ids) == count


async def test_deeply_nested_argument_text_loses_no_byte(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    nested = "[" * 50_000 + "]" * 50_000
    writes = [OPEN, call_event(0, '{"x": ', name="f")]
    writes += [call_event(0, nested[i : i + 1000]) for i in range(0, len(nested), 1000)]
    writes += [call_event(0, "}"), chunk_event({}, finish="tool_calls"), DONE]
    received = await through_proxy(writes, start_upstream, start_proxy)
    assert arguments(received) == arguments(b"".join(writes))


class ArgumentMeter:
    """Counts the argument characters a client has received, as the bytes arrive."""

    def __init__(self) -> None:
        self._decoder = SSEDecoder(max_event_bytes=1 << 30)
        self.received = 0

    def feed(self, data: bytes) -> None:
        for item in self._decoder.feed(data):
            if isinstance(item, Event) and item.data is not None:
                self.received += len(arguments(item.raw))


@pytest.mark.parametrize("output", ["streamed", "coalesced"])
async def test_a_never_ending_tool_call_is_not_held_past_the_cap(
    output: str,
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The upstream streams one call's arguments and never ends it.

    The upstream does not stop until the client has received all but ``cap`` of what it sent:
    a proxy that held the call whole would deadlock here (and fail on the timeout).
    """
    cap = 64 << 10
    fragment = "y" * 1024
    meter = ArgumentMeter()
    sent = 0
    caught_up = asyncio.Event()

    async def endless(request: web.Request) -> web.StreamResponse:
        nonlocal sent
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(OPEN + call_event(0, "{", name="f"))
        sent = 1
        while sent < 8 * cap:
            await response.write(call_event(0, fragment))
            sent += len(fragment)
        await caught_up.wait()
        await asyncio.sleep(3600)  # the call never ends
        return response

    app = web.Application()
    app.router.add_post(CHAT, endless)
    upstream = await start_upstream(app)
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(upstream), output=output),
        limits={"max_held_bytes": cap},
    )
    resp = await proxy.post(CHAT, json=REQUEST)
    async with asyncio.timeout(60):
        async for data in resp.content.iter_any():
            meter.feed(data)
            if sent >= 8 * cap and meter.received >= sent - cap:
                break
    caught_up.set()
    assert meter.received >= sent - cap
    resp.close()  # the client leaves; the stream's log line is written as its handler ends
    async with asyncio.timeout(10):
        while CAP_LOG not in caplog.text:  # noqa: ASYNC110 (log records announce nothing)
            await asyncio.sleep(0.02)


def test_the_hostile_cases_are_what_they_claim() -> None:
    """Guard against a case that quietly became parseable (and so tests nothing)."""
    for case, events in UNPARSEABLE.items():
        for event in events:
            data = event.removeprefix(b"data:").strip()
            if not data:
                continue
            try:
                value = orjson.loads(data)
            except orjson.JSONDecodeError:
                continue
            assert not isinstance(value, dict), case

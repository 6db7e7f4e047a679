"""The limits of a translated stream, through the running proxy (issue 26 items 8, 9 and 11).

Only what is held back counts toward ``limits.max_held_bytes``: a call's arguments that went
out do not, so a legitimate call longer than the cap completes, as it does for a chat
client. What the protocol repeats later (a Responses stream's text and arguments in its
``.done`` events and ``response.completed``) is kept once, and a response that would keep
more than ``limits.max_response_body_bytes`` fails honestly, with the protocol's failure
event; after that event both connections close, and the rest of the upstream's body is not
read.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from aiohttp import web

from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.support.streams import call_event, chunk_event
from tests.support.upstreams import serve_writes

TOOLS_R = [{"type": "function", "name": "write_file", "parameters": {"type": "object"}}]
TOOLS_M = [{"name": "write_file", "input_schema": {"type": "object"}}]
REQUESTS: dict[str, dict[str, Any]] = {
    "responses": {"model": "m", "stream": True, "input": "hi", "tools": TOOLS_R},
    "messages": {
        "model": "m",
        "max_tokens": 10,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": TOOLS_M,
    },
}
DONE = b"data: [DONE]\n\n"


def events_of(body: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    out = []
    for block in body.split(b"\n\n"):
        lines = block.split(b"\n")
        name = next((ln[7:].decode() for ln in lines if ln.startswith(b"event: ")), None)
        data = b"".join(ln[6:] for ln in lines if ln.startswith(b"data: "))
        if data:
            out.append((name, json.loads(data)))
    return out


def long_call(size: int, fragment: int = 16 << 10) -> list[bytes]:
    """A chat stream of one call whose arguments (``size`` characters of content) stream in
    fragments, as a model writing a file sends them."""
    content = "x" * size
    writes = [chunk_event({"role": "assistant", "content": None})]
    writes.append(call_event(0, '{"content": "', name="write_file"))
    writes += [call_event(0, content[i : i + fragment]) for i in range(0, size, fragment)]
    return [*writes, call_event(0, '"}'), chunk_event({}, finish="tool_calls"), DONE]


def long_text(size: int, fragment: int = 16 << 10) -> list[bytes]:
    text = "y" * size
    writes = [chunk_event({"role": "assistant", "content": ""})]
    writes += [chunk_event({"content": text[i : i + fragment]}) for i in range(0, size, fragment)]
    return [*writes, chunk_event({}, finish="stop"), DONE]


async def translated(
    protocol: str,
    upstream: web.Application,
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    **settings: Any,
) -> bytes:
    server = await start_upstream(upstream)
    proxy = await start_proxy(UpstreamSettings(name="u", url=upstream_url(server)), **settings)
    resp = await proxy.post(f"/v1/{protocol}", json=REQUESTS[protocol])
    assert resp.status == 200
    async with asyncio.timeout(60):
        return await resp.read()


@pytest.mark.parametrize("protocol", ["responses", "messages"])
async def test_a_call_longer_than_max_held_bytes_completes(
    protocol: str, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    size = 1_300_000  # past the default max_held_bytes (1 MiB), as chat streams it
    body = await translated(protocol, serve_writes(long_call(size)), start_upstream, start_proxy)
    events = events_of(body)
    if protocol == "responses":
        assert events[-1][0] == "response.completed"
        (call,) = events[-1][1]["response"]["output"]
        assert json.loads(call["arguments"]) == {"content": "x" * size}
    else:
        assert events[-1][0] == "message_stop"
        text = "".join(
            e["delta"]["partial_json"] for name, e in events if name == "content_block_delta"
        )
        assert json.loads(text) == {"content": "x" * size}


@pytest.mark.parametrize(
    ("protocol", "writes"),
    [
        ("responses", long_text(300 << 10)),
        ("responses", long_call(300 << 10)),
        ("messages", long_call(300 << 10)),
    ],
    ids=["responses-text", "responses-call", "messages-call"],
)
async def test_a_response_past_max_response_body_bytes_fails_honestly(
    protocol: str, writes: list[bytes], start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    body = await translated(
        protocol,
        serve_writes(writes),
        start_upstream,
        start_proxy,
        limits={"max_response_body_bytes": 256 << 10},
    )
    name, last = events_of(body)[-1]
    if protocol == "responses":
        assert name == "response.failed"
        assert "max_response_body_bytes" in last["response"]["error"]["message"]
    else:
        assert name == "error"
        assert "max_response_body_bytes" in last["error"]["message"]


def endless_upstream(left: asyncio.Event) -> web.Application:
    """A chat upstream whose call never ends: it writes arguments until its client leaves."""

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        writes = long_call(0)[:2]
        try:
            for write in writes:
                await resp.write(write)
            while True:
                await resp.write(call_event(0, "z" * (64 << 10)))
                await asyncio.sleep(0.001)
        except (ConnectionResetError, asyncio.CancelledError):
            left.set()
            raise

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    return app


@pytest.mark.parametrize("protocol", ["responses", "messages"])
async def test_after_a_failure_event_both_connections_close(
    protocol: str, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    left = asyncio.Event()
    body = await translated(
        protocol,
        endless_upstream(left),
        start_upstream,
        start_proxy,
        limits={"max_response_body_bytes": 1 << 20},
    )
    name, _ = events_of(body)[-1]
    assert name == ("response.failed" if protocol == "responses" else "error")
    async with asyncio.timeout(10):
        await left.wait()  # the proxy stopped reading and closed the upstream's connection


@pytest.mark.parametrize(
    "limits",
    [{"max_response_body_bytes": 256 << 10}, {"max_held_bytes": 64 << 10}],
    ids=["kept", "held"],
)
async def test_a_translate_failure_is_logged_once(
    limits: dict[str, int],
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # held: a call whose name comes only after all of its arguments is held whole
    writes = long_call(300 << 10)
    if "max_held_bytes" in limits:
        nameless = [call_event(0, '{"content": "'), *writes[2:-3]]
        writes = [writes[0], *nameless, call_event(0, '"}', name="write_file"), *writes[-2:]]
    body = await translated(
        "responses", serve_writes(writes), start_upstream, start_proxy, limits=limits
    )
    assert events_of(body)[-1][0] == "response.failed"
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert "the translated response failed" in warnings[0]
    assert next(iter(limits)) in warnings[0]  # the limit it outgrew is named

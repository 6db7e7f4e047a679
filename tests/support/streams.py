"""Reading streams in tests: what a client received, and what it means as chat completion chunks.

A rewritten stream is not byte-identical to its input, so rewriting tests compare meaning: the
text and the tool-call argument bytes, in order, as a client accumulates them.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from aiohttp import ClientPayloadError, ClientResponse

from proxy.core.sse import Event, SSEDecoder
from tests.conftest import UPSTREAM_FIXTURES


def split_events(body: bytes) -> list[bytes]:
    """A recorded stream cut after each blank line, as an upstream writes it."""
    return [part for part in re.split(rb"(?<=\n\n)", body) if part]


def recorded(name: str) -> list[bytes]:
    return split_events((UPSTREAM_FIXTURES / name).read_bytes())


async def read_until_error(resp: ClientResponse) -> tuple[bytes, BaseException | None]:
    """Everything the client received, and the error that ended it (None: a clean end)."""
    received = bytearray()
    try:
        async for chunk in resp.content.iter_any():
            received += chunk
    except ClientPayloadError as exc:
        resp.close()  # hand the broken connection back, or the client's pool fills up
        return bytes(received), exc
    return bytes(received), None


def chunks(stream: bytes) -> list[dict[str, Any]]:
    """The JSON objects of the stream's data events; anything else is skipped."""
    decoder = SSEDecoder(max_event_bytes=1 << 30)
    out = []
    for item in [*decoder.feed(stream), *decoder.close()]:
        if not isinstance(item, Event) or item.data is None:
            continue
        try:
            value = orjson.loads(item.data)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _deltas(stream: bytes) -> list[dict[str, Any]]:
    deltas = []
    for chunk in chunks(stream):
        for choice in chunk.get("choices") or ():
            if isinstance(choice, dict) and isinstance(choice.get("delta"), dict):
                deltas.append(choice["delta"])
    return deltas


def arguments(stream: bytes) -> str:
    """Every string argument fragment of every tool call, joined in stream order."""
    parts = []
    for delta in _deltas(stream):
        for call in delta.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                parts.append(function["arguments"])
    return "".join(parts)


def content(stream: bytes) -> str:
    return "".join(d["content"] for d in _deltas(stream) if isinstance(d.get("content"), str))


def chunk_event(delta: dict[str, Any], *, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return (
        b"data: " + orjson.dumps({"object": "chat.completion.chunk", "choices": [choice]}) + b"\n\n"
    )


def call_event(index: int, arguments: str, *, name: str | None = None) -> bytes:
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if name is not None:
        call.update(id=f"call_{index}", type="function")
        call["function"]["name"] = name
    return chunk_event({"tool_calls": [call]})

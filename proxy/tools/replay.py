"""Run a whole captured response through the normalizer, as the proxy would have streamed it.

Shared by ``fix`` (a capture on disk) and ``probe`` (a response just read from an upstream).
The normalizer's output does not depend on how the input is cut, so the capture is fed in one
piece.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat.normalize import (
    RequestInfo,
    StreamNormalizer,
    normalize_completion,
)
from proxy.core.protocols.chat.sent import chat_bytes
from proxy.core.sse import Event, SSEDecoder
from proxy.shell.random_ids import new_id_factory


@dataclass(frozen=True, slots=True)
class Replayed:
    output: bytes
    repairs: Counter[str]


def is_json_body(capture: bytes) -> bool:
    """A whole (non-streamed) completion rather than an event stream."""
    return capture.lstrip()[:1] == b"{"


def replay(capture: bytes, options: UpstreamOptions, request: object) -> Replayed:
    """The normalized response and the repairs it took; ``request`` is the parsed request body."""
    info = RequestInfo.from_body(request)
    if is_json_body(capture):
        output, repairs = normalize_completion(capture, options, info, new_id=new_id_factory())
        return Replayed(output, repairs)
    decoder = SSEDecoder(max_event_bytes=options.max_event_bytes)
    normalizer = StreamNormalizer(options, info, new_id=new_id_factory())
    items = [*decoder.feed(capture), *decoder.close()]
    out = chat_bytes([sent for item in items for sent in normalizer.feed(item)])
    out += chat_bytes(normalizer.close(complete=True))
    return Replayed(b"".join(out), normalizer.repairs)


def tool_calls_in(stream: bytes) -> int:
    """How many tool calls a normalized event stream opens (deltas that carry an id)."""
    opened: set[tuple[object, object]] = set()
    for chunk in _chunks(stream):
        for choice in _objects(chunk.get("choices")):
            delta = choice.get("delta")
            for call in _objects(delta.get("tool_calls") if isinstance(delta, dict) else None):
                if call.get("id"):
                    opened.add((choice.get("index"), call.get("index")))
    return len(opened)


def _chunks(stream: bytes) -> Iterator[dict[str, Any]]:
    decoder = SSEDecoder(max_event_bytes=len(stream) + 1)
    for item in [*decoder.feed(stream), *decoder.close()]:
        if isinstance(item, Event) and item.data is not None and item.data != b"[DONE]":
            try:
                chunk = orjson.loads(item.data)
            except orjson.JSONDecodeError:
                continue
            if isinstance(chunk, dict):
                yield chunk


def _objects(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []

"""The bench's shapes as native Responses and Messages streams, for the proxy's ``native``
mode and for the targets that only pass a stream through.

bench/upstream.py serves them on ``/v1/responses`` and ``/v1/messages``; the model name picks
the shape, as for chat (bench/shapes.py). The payload is the chat stream's, fragment for
fragment: ``content`` (and ``plain``) text deltas; ``toolcall`` one function_call (Responses)
or tool_use block (Messages) whose arguments arrive in the same fragments as the chat call's;
``hermes`` the same markup leaked into output text. Each stamped delta carries one fresh
stamp. A Responses stream repeats its text in its ``.done`` events and in
``response.completed``, as OpenAI's does, so those events carry again the stamps the deltas
sent first (the load generator counts the stamps of delta events only).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

import orjson

from bench.shapes import HERMES_CLOSE, HERMES_OPEN, SHAPES, parse_model

NATIVE_PROTOCOLS: Final = ("responses", "messages")
_SLOT: Final = re.compile(rb"@@S(\d+)@@")  # JSON leaves it as it is, as shapes.py's slot


@dataclass(frozen=True, slots=True)
class SlotTemplate:
    """One SSE event: ``parts`` around ``slots``, each slot the number of a stamp of the
    stream; a ``fresh`` event is the one that sends its stamp first (a delta)."""

    parts: tuple[bytes, ...]
    slots: tuple[int, ...]
    fresh: bool

    @classmethod
    def parse(cls, event: bytes, fresh: bool) -> SlotTemplate:
        pieces = _SLOT.split(event)  # text, number, text, number, ..., text
        return cls(tuple(pieces[0::2]), tuple(int(n) for n in pieces[1::2]), fresh)

    def event(self, stamps: Sequence[bytes]) -> bytes:
        """The event's bytes, with the stream's ``stamps`` (so far) in its slots."""
        if not self.slots:
            return self.parts[0]
        out = [self.parts[0]]
        for slot, part in zip(self.slots, self.parts[1:], strict=True):
            out += (stamps[slot], part)
        return b"".join(out)


def _fragments(shape: str, chunks: int) -> tuple[list[tuple[str, bool]], bool]:
    """The payload's fragments (text, stamped), and whether they are a call's arguments."""
    stamped = [(f" @@S{i}@@", True) for i in range(chunks)]
    if shape == "toolcall":
        return [("{", False), ('"q": "', False), *stamped, ('"}', False)], True
    if shape == "hermes":
        markup = [*((t, False) for t in HERMES_OPEN), *stamped, *((t, False) for t in HERMES_CLOSE)]
        return markup, False
    return stamped, False


def _sse(kind: str, data: dict[str, Any], fresh: bool = False) -> SlotTemplate:
    raw = b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"
    return SlotTemplate.parse(raw, fresh)


def _response(model: str, status: str, output: list[Any], usage: Any = None) -> dict[str, Any]:
    return {
        "id": "resp_bench",
        "object": "response",
        "created_at": 1700000000,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "usage": usage,
    }


def _responses(model: str, fragments: list[tuple[str, bool]], call: bool) -> list[SlotTemplate]:
    out: list[SlotTemplate] = []

    def emit(kind: str, fresh: bool = False, **fields: Any) -> None:
        out.append(_sse(kind, {"type": kind, "sequence_number": len(out), **fields}, fresh))

    full = "".join(text for text, _ in fragments)
    emit("response.created", response=_response(model, "in_progress", []))
    emit("response.in_progress", response=_response(model, "in_progress", []))
    at: dict[str, Any] = {"output_index": 0}
    item: dict[str, Any]
    if call:
        item = {"id": "fc_bench", "type": "function_call", "status": "in_progress"}
        item |= {"arguments": "", "call_id": "call_bench", "name": "get_weather"}
        emit("response.output_item.added", **at, item=item)
        at = {"item_id": "fc_bench", **at}
        for text, fresh in fragments:
            emit("response.function_call_arguments.delta", fresh, **at, delta=text)
        emit("response.function_call_arguments.done", **at, arguments=full)
        item = {**item, "status": "completed", "arguments": full}
    else:
        item = {"id": "msg_bench", "type": "message", "status": "in_progress"}
        item |= {"role": "assistant", "content": []}
        emit("response.output_item.added", **at, item=item)
        at = {"item_id": "msg_bench", **at, "content_index": 0}
        part: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
        emit("response.content_part.added", **at, part=part)
        for text, fresh in fragments:
            emit("response.output_text.delta", fresh, **at, delta=text, logprobs=[])
        emit("response.output_text.done", **at, text=full, logprobs=[])
        part = {**part, "text": full}
        emit("response.content_part.done", **at, part=part)
        item = {**item, "status": "completed", "content": [part]}
    emit("response.output_item.done", output_index=0, item=item)
    tokens = len(fragments)
    usage = {"input_tokens": 10, "output_tokens": tokens, "total_tokens": 10 + tokens}
    emit("response.completed", response=_response(model, "completed", [item], usage))
    return out


def _messages(model: str, fragments: list[tuple[str, bool]], call: bool) -> list[SlotTemplate]:
    def event(kind: str, fresh: bool = False, **fields: Any) -> SlotTemplate:
        return _sse(kind, {"type": kind, **fields}, fresh)

    message: dict[str, Any] = {"id": "msg_bench", "type": "message", "role": "assistant"}
    message |= {"model": model}
    message |= {"content": [], "stop_reason": None, "stop_sequence": None}
    message |= {"usage": {"input_tokens": 10, "output_tokens": 1}}
    block: dict[str, Any]
    if call:
        block = {"type": "tool_use", "id": "toolu_bench", "name": "get_weather", "input": {}}
        delta = ("input_json_delta", "partial_json")
    else:
        block, delta = {"type": "text", "text": ""}, ("text_delta", "text")
    out = [
        event("message_start", message=message),
        event("content_block_start", index=0, content_block=block),
    ]
    out += [
        event("content_block_delta", fresh, index=0, delta={"type": delta[0], delta[1]: text})
        for text, fresh in fragments
    ]
    stop = {"stop_reason": "tool_use" if call else "end_turn", "stop_sequence": None}
    out += [
        event("content_block_stop", index=0),
        event("message_delta", delta=stop, usage={"output_tokens": len(fragments)}),
        event("message_stop"),
    ]
    return out


@cache
def native_templates(protocol: str, model: str) -> tuple[SlotTemplate, ...]:
    """The events of the shape ``model`` names, as a ``protocol`` server streams them."""
    req = parse_model(model)
    if req is None or req.shape not in SHAPES or protocol not in NATIVE_PROTOCOLS:
        raise ValueError(f"no native {protocol!r} stream for {model!r}")
    fragments, call = _fragments(req.shape, req.chunks)
    build = _responses if protocol == "responses" else _messages
    return tuple(build(model, fragments, call))

"""A strict checker of Messages streams: the canonical sequence of docs/quirks.md's Messages streams.

``check(data)`` raises AssertionError naming the broken rule and returns what a client
rebuilds: the message with its content blocks (tool inputs parsed), the stop reason and the
usage. Rules:

1. Every event has an ``event:`` line equal to its data's ``type``; the data is a JSON object.
2. ``message_start`` first and once: ``id``, ``type: "message"``, ``role: "assistant"``,
   ``model`` a string, ``content: []``, ``stop_reason`` and ``stop_sequence`` null, usage with
   integer ``input_tokens`` and ``output_tokens``.
3. Blocks are dense from 0 and sequential: a block starts only when none is open, its deltas
   address it, its stop closes it. A start carries its empty fields (``text: ""``; ``thinking``
   and ``signature``; ``tool_use`` with ``id``, ``name`` and ``input: {}``).
4. Deltas match the block: text_delta (text), thinking_delta / signature_delta, input_json_delta
   (partial_json). A tool's input is the concatenation of its fragments, a JSON object when the
   turn did not end at max_tokens (empty means ``{}``), but for the ids in ``abandoned``: calls
   of an earlier generation a second one was spliced over (issue 24 item 9), which went out cut
   before the splice could be seen.
5. ``message_delta`` once, with no block open: a known ``stop_reason`` (``tool_use`` exactly when
   there are tool_use blocks, unless ``max_tokens``), ``stop_sequence`` a string only for
   ``stop_sequence``, usage with integer ``output_tokens``. ``message_stop`` then, last.
6. ``ping`` anywhere after message_start. ``error`` ends the stream (``{"type": "error",
   "error": {"type", "message"}}``); nothing follows it.
7. No ``[DONE]``, no event without data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from proxy.core.sse import Event, SSEDecoder

STOP_REASONS = {"end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal"}


@dataclass
class Result:
    message: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    finished: bool = False

    @property
    def blocks(self) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = self.message.get("content", [])
        return blocks

    @property
    def tool_uses(self) -> list[dict[str, Any]]:
        return [b for b in self.blocks if b["type"] == "tool_use"]

    @property
    def text(self) -> str:
        return "".join(b["text"] for b in self.blocks if b["type"] == "text")


def events_of(data: bytes) -> list[Event]:
    decoder = SSEDecoder()
    items = decoder.feed(data) + decoder.close()
    out = []
    for item in items:
        assert isinstance(item, Event), f"bytes that are no whole event: {item!r}"
        if item.data is not None:
            out.append(item)
    return out


def check(data: bytes, *, finished: bool = True, abandoned: frozenset[str] = frozenset()) -> Result:
    """Check a whole stream; ``finished=False`` allows a stream cut before message_stop;
    ``abandoned``: the ids of tool calls whose input may be cut (rule 4)."""
    result = Result()
    pieces: list[str] = []
    open_index: int | None = None
    state = "start"
    for event in events_of(data):
        assert state not in ("stopped", "error"), f"an event after the end: {event.raw!r}"
        assert event.data != b"[DONE]", "[DONE] in a Messages stream"
        payload = json.loads(event.data)  # type: ignore[arg-type]
        assert isinstance(payload, dict), event.raw
        kind = payload.get("type")
        assert event.event == kind, f"event line {event.event!r} for {kind!r}"
        result.events.append(payload)
        if kind == "error":
            error = payload.get("error")
            assert isinstance(error, dict), payload
            assert isinstance(error.get("type"), str), payload
            assert isinstance(error.get("message"), str), payload
            result.error = error
            state = "error"
            continue
        if state == "start":
            assert kind == "message_start", f"{kind} before message_start"
            _check_start(payload["message"])
            result.message = {**payload["message"], "content": []}
            state = "blocks"
            continue
        if kind == "ping":
            continue
        assert kind != "message_start", "a second message_start"
        if kind == "content_block_start":
            assert state == "blocks", "a block after message_delta"
            assert open_index is None, f"block {payload['index']} starts while {open_index} is open"
            assert payload["index"] == len(result.blocks), f"index {payload['index']} not dense"
            block = dict(payload["content_block"])
            _check_block_start(block)
            result.blocks.append(block)
            open_index, pieces = payload["index"], []
        elif kind == "content_block_delta":
            assert open_index is not None, f"delta for {payload['index']} while no block is open"
            assert payload["index"] == open_index, (
                f"delta for {payload['index']}, open {open_index}"
            )
            _delta(result.blocks[open_index], payload["delta"], pieces)
        elif kind == "content_block_stop":
            assert open_index is not None, f"stop for {payload['index']} while no block is open"
            assert payload["index"] == open_index, f"stop for {payload['index']}, open {open_index}"
            block = result.blocks[open_index]
            if block["type"] == "tool_use":
                block["input_text"] = "".join(pieces)
            open_index = None
        elif kind == "message_delta":
            assert state == "blocks", "a second message_delta"
            assert open_index is None, f"message_delta while block {open_index} is open"
            _check_delta(payload, result, abandoned)
            state = "delta"
        elif kind == "message_stop":
            assert state == "delta", "message_stop without message_delta"
            state = "stopped"
            result.finished = True
        else:
            raise AssertionError(f"unknown event type {kind!r}")
    if finished:
        assert state in ("stopped", "error"), f"the stream ended in state {state}"
    return result


def _check_start(message: dict[str, Any]) -> None:
    assert isinstance(message.get("id"), str), message
    assert message["id"], message
    assert message.get("type") == "message", message
    assert message.get("role") == "assistant", message
    assert isinstance(message.get("model"), str), message
    assert message.get("content") == [], message
    assert message.get("stop_reason") is None, message
    assert message.get("stop_sequence") is None, message
    usage = message.get("usage")
    assert isinstance(usage, dict), message
    assert isinstance(usage.get("input_tokens"), int), message
    assert isinstance(usage.get("output_tokens"), int), message


def _check_block_start(block: dict[str, Any]) -> None:
    kind = block.get("type")
    if kind == "text":
        assert isinstance(block.get("text"), str), block
    elif kind == "thinking":
        assert isinstance(block.get("thinking"), str), block
        assert isinstance(block.get("signature"), str), block
    elif kind == "redacted_thinking":
        assert isinstance(block.get("data"), str), block
    elif kind in ("tool_use", "server_tool_use"):
        assert isinstance(block.get("id"), str), block
        assert block["id"], block
        assert isinstance(block.get("name"), str), block
        assert block["name"], block
        assert block.get("input") == {}, f"a tool_use start without input {{}}: {block}"
    else:
        raise AssertionError(f"unknown block type {kind!r}")


def _delta(block: dict[str, Any], delta: dict[str, Any], pieces: list[str]) -> None:
    kind = delta.get("type")
    if kind == "text_delta":
        assert block["type"] == "text", (block, delta)
        assert isinstance(delta.get("text"), str), delta
        block["text"] += delta["text"]
    elif kind == "thinking_delta":
        assert block["type"] == "thinking", (block, delta)
        assert isinstance(delta.get("thinking"), str), delta
        block["thinking"] += delta["thinking"]
    elif kind == "signature_delta":
        assert block["type"] == "thinking", (block, delta)
        assert isinstance(delta.get("signature"), str), delta
        block["signature"] += delta["signature"]
    elif kind == "input_json_delta":
        assert block["type"] in ("tool_use", "server_tool_use"), (block, delta)
        assert isinstance(delta.get("partial_json"), str), delta
        pieces.append(delta["partial_json"])
    elif kind == "citations_delta":
        assert block["type"] == "text", (block, delta)
    else:
        raise AssertionError(f"unknown delta type {kind!r}")


def _check_delta(payload: dict[str, Any], result: Result, abandoned: frozenset[str]) -> None:
    delta, usage = payload.get("delta"), payload.get("usage")
    assert isinstance(delta, dict), payload
    assert isinstance(usage, dict), payload
    reason = delta.get("stop_reason")
    assert reason in STOP_REASONS, f"stop_reason {reason!r}"
    sequence = delta.get("stop_sequence")
    assert (sequence is not None) == (reason == "stop_sequence"), delta
    assert isinstance(usage.get("output_tokens"), int), payload
    tools = result.tool_uses
    if reason != "max_tokens":
        assert bool(tools) == (reason == "tool_use"), (
            f"stop_reason {reason} with {len(tools)} calls"
        )
        unchecked = set(abandoned)
        for block in tools:
            text = block.pop("input_text", "")
            if block.get("id") in unchecked:  # its first block only: a later may reuse the id
                unchecked.discard(block["id"])
                block["input_unparsed"] = text
                continue
            block["input"] = json.loads(text) if text else {}
            assert isinstance(block["input"], dict), block
    else:
        for block in tools:
            text = block.pop("input_text", "")
            try:
                block["input"] = json.loads(text) if text else {}
            except ValueError:
                block["input_unparsed"] = text
    result.message["stop_reason"] = reason
    result.message["stop_sequence"] = sequence
    result.message["usage"] = {**result.message["usage"], **usage}

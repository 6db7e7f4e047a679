"""Messages streams for the tests: recorded ones parsed into events, broken variants built from
them by named transformations (each one quirk of docs/quirks.md M1-M4 or llama.cpp's endpoint), and the
ways a stream is cut into reads."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.core.protocols.messages.checker import events_of

PROTOCOL_FIXTURES = Path(__file__).parents[3] / "fixtures" / "protocols"
Events = list[dict[str, Any]]


def recorded(name: str) -> bytes:
    return (PROTOCOL_FIXTURES / f"messages-{name}.sse").read_bytes()


def parsed(name: str) -> Events:
    return [json.loads(event.data) for event in events_of(recorded(name))]  # type: ignore[arg-type]


def sse(events: Events, *, event_lines: bool = True) -> bytes:
    out = []
    for event in events:
        data = json.dumps(event, separators=(",", ":"))
        head = f"event: {event['type']}\n" if event_lines else ""
        out.append(f"{head}data: {data}\n\n")
    return "".join(out).encode()


def of_type(events: Events, kind: str) -> Iterator[dict[str, Any]]:
    return (event for event in events if event["type"] == kind)


def tool_indexes(events: Events) -> list[int]:
    return [
        e["index"]
        for e in of_type(events, "content_block_start")
        if e["content_block"]["type"] == "tool_use"
    ]


# -- the quirks, each a function of a canonical stream's events


def llamacpp_b9821(events: Events) -> Events:
    """llama.cpp's own endpoint (docs/quirks.md): tool_use starts without ``input``, and every
    block's stop held back until just before message_delta."""
    out = copy.deepcopy(events)
    for event in of_type(out, "content_block_start"):
        if event["content_block"]["type"] == "tool_use":
            event["content_block"].pop("input", None)
    stops = [e for e in out if e["type"] == "content_block_stop"]
    rest = [e for e in out if e["type"] != "content_block_stop"]
    at = next(i for i, e in enumerate(rest) if e["type"] == "message_delta")
    return rest[:at] + stops + rest[at:]


def input_missing(events: Events) -> Events:
    out = copy.deepcopy(events)
    for event in of_type(out, "content_block_start"):
        event["content_block"].pop("input", None)
    return out


def empty_fields_dropped(events: Events) -> Events:
    """A re-serializing gateway (M2): empty text, input and partial_json gone, null
    stop_reason as ""."""
    out = copy.deepcopy(events)
    for event in out:
        if event["type"] == "content_block_start":
            block = event["content_block"]
            for key in ("text", "input", "thinking", "signature"):
                if block.get(key) in ("", {}):
                    del block[key]
        elif event["type"] == "content_block_delta":
            delta = event["delta"]
            for key in ("text", "partial_json"):
                if delta.get(key) == "":
                    del delta[key]
        elif event["type"] == "message_start":
            event["message"]["stop_reason"] = ""
            event["message"]["stop_sequence"] = ""
    return out


def cut_in_tool_input(events: Events) -> Events:
    """max_tokens inside the last tool's input (M3): its last fragments and its stop gone."""
    out = copy.deepcopy(events)
    last = tool_indexes(out)[-1]
    fragments = [
        i for i, e in enumerate(out) if e["type"] == "content_block_delta" and e["index"] == last
    ]
    keep = fragments[: max(2, len(fragments) // 2)]
    out = [
        e
        for i, e in enumerate(out)
        if not (
            e.get("index") == last
            and e["type"] in ("content_block_delta", "content_block_stop")
            and i not in keep
        )
    ]
    next(of_type(out, "message_delta"))["delta"]["stop_reason"] = "max_tokens"
    return out


def message_start_twice(events: Events) -> Events:
    return [events[0], *copy.deepcopy(events)]


def spliced_generation(events: Events) -> Events:
    """A second generation spliced in mid tool call (M4): the first stops inside its first
    tool input; a new message_start follows and the whole stream again."""
    out = copy.deepcopy(events)
    first = tool_indexes(out)[0]
    at = next(
        i
        for i, e in enumerate(out)
        if e["type"] == "content_block_delta"
        and e["index"] == first
        and e["delta"].get("partial_json")
    )
    return out[: at + 1] + copy.deepcopy(events)


def stop_reason(value: str) -> Callable[[Events], Events]:
    def change(events: Events) -> Events:
        out = copy.deepcopy(events)
        next(of_type(out, "message_delta"))["delta"]["stop_reason"] = value
        return out

    change.__name__ = f"stop_reason_{value or 'empty'}"
    return change


def without(kind: str) -> Callable[[Events], Events]:
    def drop(events: Events) -> Events:
        return [e for e in events if e["type"] != kind]

    drop.__name__ = f"without_{kind}"
    return drop


def hermes_markup(events: Events) -> Events:
    """The model wrote its call as hermes markup in a text_delta, cut across deltas."""
    start = copy.deepcopy(events[0])
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris, \\"FR\\""}}\n</tool_call>'
    texts = ["Let me check. ", call[:7], call[7:40], call[40:], " Done."]
    out: Events = [
        start,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    out += [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}
        for t in texts
    ]
    out += [
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 30},
        },
        {"type": "message_stop"},
    ]
    return out

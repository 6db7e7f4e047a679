"""What the native contract (test_native_contract.py) needs of each native repairer: its
streams, built as its servers send them, and how its strict checker reads the calls back.

One :class:`NativeCase` per protocol of the registry (proxy/core/protocols/registry.py); the
contract asserts the same behaviour of every one, only the shapes differ.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from proxy.core.events import (
    ArgumentsDelta,
    CallClosed,
    CallOpened,
    Ended,
    Finished,
    FinishReason,
    Started,
    StreamEvent,
    TextDelta,
    Usage,
)
from proxy.core.markup import check_names
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.registry import CLIENT_PROTOCOLS
from tests.core.protocols.messages import checker as messages_checker
from tests.core.protocols.messages import streams
from tests.core.protocols.responses import checker as responses_checker
from tests.core.protocols.responses import variants as v
from tests.support import native_shapes as s
from tests.support.normalizer import bytewise, random_cuts

EVERY_DIALECT = check_names(["auto"])
HERMES_CALL = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>'
)


@dataclass(frozen=True)
class NativeCase:
    name: str  #: the registry's key
    #: client requests with tools (calls and markup may be repaired) and without
    tools_request: dict[str, Any]
    no_tools_request: dict[str, Any]
    canonical: dict[str, bytes]  #: recorded canonical streams, by name
    #: (a stream with a call sent twice in a row, the same stream without the repeat), by name
    repeated: dict[str, tuple[bytes, bytes]]
    other_arguments: bytes  #: two calls of one name in a row, other arguments: no repeat
    repeat_marker: bytes  #: what only the repeat's events carry (its id)
    #: the repeat's head: inside its held arguments (cut there, nothing may be made up)
    repeat_cut: Callable[[bytes], bytes]
    long_repeat: Callable[[int], bytes]  #: a repeat whose arguments come in N fragments
    markup_twice: bytes  #: text with one hermes call twice in a row (other spacing)
    calls: Callable[[bytes], list[str]]  #: the call ids the strict checker reads
    #: the items or blocks, by type, and the text, as the strict checker reads them
    structure: Callable[[bytes], tuple[list[str], str]]
    payloads: Callable[[bytes], list[object]]  #: the events' payloads, numbering aside
    terminal: bytes  #: what only the protocol's end of a response carries
    #: a stream of one text part or block of these deltas; ``named``: with ``event:`` lines
    text: Callable[..., list[bytes]]
    #: a shape that holds (an item or block waiting behind one that grows) and its opening
    held_shape: tuple[Callable[..., list[bytes]], bytes]
    long_arguments: Callable[[int], list[bytes]]  #: one call of N argument fragments "ab"


#: a streamed request without tools, by protocol
REQUESTS: dict[str, dict[str, Any]] = {
    "responses": {"model": "m", "stream": True, "input": "hi"},
    "messages": {
        "model": "m",
        "max_tokens": 10,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    },
}


def run(
    protocol: str,
    pieces: Sequence[bytes] | bytes,
    request: object,
    *,
    complete: bool = True,
    **options: Any,
) -> tuple[bytes, Counter[str]]:
    """The native repairer of ``protocol``, made through the registry, over ``pieces``."""
    if isinstance(pieces, bytes):
        pieces = [pieces]
    counter = itertools.count(1)
    stream = CLIENT_PROTOCOLS[protocol].native(
        new_id=lambda: f"n{next(counter):05d}",
        request=request,
        options=UpstreamOptions(**{"dialects": EVERY_DIALECT, **options}),
    )
    out = [data for piece in pieces for data in stream.feed(piece)]
    out += stream.close(complete=complete)
    return b"".join(out), stream.repairs


def every_cut(data: bytes, seed: str) -> list[list[bytes]]:
    """Whole, a byte at a time, and at random cuts."""
    return [[data], bytewise(data), *random_cuts(data, seed)]


# -- Responses -----------------------------------------------------------------------------

R_TOOLS: dict[str, Any] = {
    "model": "m",
    "tools": [
        {
            "type": "function",
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
        },
        {
            "type": "function",
            "name": "get_time",
            "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
        },
        # the tools the canonical recordings call, so that their calls fit (issue 25 checks)
        {"type": "function", "name": "weather", "parameters": {"type": "object"}},
        {"type": "function", "name": "calculator", "parameters": {"type": "object"}},
    ],
}
R_START = Started(id="chatcmpl-x", model="m", created=1)


def _r_call(index: int, ident: str, name: str, *args: str) -> list[Any]:
    return [
        CallOpened(index, ident, name),
        *(ArgumentsDelta(index, a) for a in args),
        CallClosed(index),
    ]


def r_stream(
    *, repeat: bool, second: str = '{ "location" :', rest: str = ' "Paris" }'
) -> v.Payloads:
    """Text, get_weather, (the same call again: another id, its arguments as other JSON),
    get_time."""
    events = [
        R_START,
        TextDelta("Let me check."),
        *_r_call(0, "call_w", "get_weather", '{"location"', ': "Paris"}'),
        *(_r_call(1, "call_again", "get_weather", second, rest) if repeat else []),
        *_r_call(2 if repeat else 1, "call_t", "get_time", '{"tz": ', '"CET"}'),
        Finished(FinishReason.TOOL_CALLS),
        Usage(3, 4),
        Ended(complete=True),
    ]
    return v.encoded(events)


def r_without(payloads: v.Payloads, call_id: str) -> v.Payloads:
    """The stream with the call ``call_id`` never sent: its events gone, the later items'
    output_index and every sequence_number closed up, the terminal output without it."""
    item_id = next(
        p["item"]["id"]
        for p in payloads
        if p["type"] == "response.output_item.added" and p["item"].get("call_id") == call_id
    )
    index = next(p["output_index"] for p in payloads if p.get("item", {}).get("id") == item_id)
    out: v.Payloads = []
    for payload in copy.deepcopy(payloads):
        if payload.get("item_id") == item_id or payload.get("item", {}).get("id") == item_id:
            continue
        if payload.get("output_index", -1) > index:
            payload["output_index"] -= 1
        response = payload.get("response")
        if isinstance(response, dict) and isinstance(response.get("output"), list):
            response["output"] = [i for i in response["output"] if i.get("id") != item_id]
        out.append(payload)
    return v.renumber(out)


def _r_repeat_cut(body: bytes) -> bytes:
    done = body.index(b"response.function_call_arguments.done", body.index(b"call_again"))
    return body[: body.rindex(b"event: ", 0, body.rindex(b"event: ", 0, done))]  # mid-arguments


def _r_long_repeat(deltas: int) -> bytes:
    long = ['{"location": "', *(["ab"] * deltas), '"}']
    events = [
        R_START,
        *_r_call(0, "call_w", "get_weather", '{"location": "Paris"}'),
        *_r_call(1, "call_again", "get_weather", *long),
        Finished(FinishReason.TOOL_CALLS),
        Ended(complete=True),
    ]
    return v.sse(v.encoded(events))


def _r_markup_twice() -> bytes:
    text = "Let me check. " + HERMES_CALL + HERMES_CALL.replace('": ', '":') + " Done."
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    events: list[StreamEvent] = [
        R_START,
        *(TextDelta(p) for p in pieces),
        Finished(FinishReason.STOP),
        Usage(1, 2),
        Ended(complete=True),
    ]
    return v.sse(v.encoded(events))


def _r_structure(data: bytes) -> tuple[list[str], str]:
    checked = responses_checker.check(data)
    return [i["type"] for i in checked.items], checked.text


def _r_payloads(data: bytes) -> list[object]:
    return [p for _, p in responses_checker.parse(data)]


RESPONSES = NativeCase(
    name="responses",
    tools_request=R_TOOLS,
    no_tools_request={"model": "m"},
    canonical={p.name: p.read_bytes() for p in sorted(v.FIXTURES.glob("responses-*.sse"))},
    repeated={
        "text-and-calls": (
            v.sse(r_stream(repeat=True)),
            v.sse(r_without(r_stream(repeat=True), "call_again")),
        )
    },
    other_arguments=v.sse(r_stream(repeat=True, rest=' "Rome" }')),
    repeat_marker=b"call_again",
    repeat_cut=_r_repeat_cut,
    long_repeat=_r_long_repeat,
    markup_twice=_r_markup_twice(),
    calls=lambda data: [c["call_id"] for c in responses_checker.check(data).calls],
    structure=_r_structure,
    payloads=_r_payloads,
    terminal=b"event: response.completed",
    text=lambda *deltas, named=True: _responses_text(deltas, named=named),
    held_shape=(s.args_behind_a_message, b"event: response.output_item.added"),
    long_arguments=s.long_call,
)


# -- Messages ------------------------------------------------------------------------------

M_TOOLS: dict[str, Any] = {
    "model": "claude-test",
    "max_tokens": 1024,
    "messages": [{"role": "user", "content": "go"}],
    "tools": [
        {
            "name": "get_weather",
            "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}},
        },
        {"name": "make_directory", "input_schema": {"type": "object"}},
        # the tools the canonical recordings call, so that their calls fit (issue 25 checks)
        {"name": "website_update", "input_schema": {"type": "object"}},
        {"name": "updateIssueList", "input_schema": {"type": "object"}},
    ],
}
M_PARALLEL = "anthropic-haiku35-parallel-three-tools"  # three make_directory calls, inputs differ
M_TEXT_THEN_TOOL = "anthropic-haiku35-text-then-tool"


def call_twice(events: streams.Events) -> streams.Events:
    """The first tool block sent again right after itself: a new id, the same input as other
    JSON (keys reordered, spaced, cut elsewhere); the blocks after it move up one index."""
    first = streams.tool_indexes(events)[0]
    out: streams.Events = []
    for event in copy.deepcopy(events):
        if event.get("index", -1) > first:
            event["index"] += 1
        out.append(event)
        if event["type"] == "content_block_stop" and event["index"] == first:
            start = next(
                e for e in events if e["type"] == "content_block_start" and e["index"] == first
            )
            value = json.loads(
                "".join(
                    e["delta"]["partial_json"]
                    for e in events
                    if e["type"] == "content_block_delta" and e["index"] == first
                )
            )
            text = json.dumps(dict(reversed(value.items())), indent=1)
            block = {**start["content_block"], "id": "toolu_repeated"}
            out.append({"type": "content_block_start", "index": first + 1, "content_block": block})
            out += [
                {
                    "type": "content_block_delta",
                    "index": first + 1,
                    "delta": {"type": "input_json_delta", "partial_json": text[at : at + 7]},
                }
                for at in range(0, len(text), 7)
            ]
            out.append({"type": "content_block_stop", "index": first + 1})
    return out


def _m_repeat_cut(broken: bytes) -> bytes:
    stop = broken.index(b"event: content_block_stop", broken.index(b'"toolu_repeated"'))
    return broken[: broken.rindex(b"event: content_block_delta", 0, stop)]  # inside its input


def _m_long_repeat(deltas: int) -> bytes:
    """A call and its repeat, the repeat's input in ``deltas`` fragments: held all along."""
    events = call_twice(streams.parsed(M_TEXT_THEN_TOOL))
    at = next(
        i for i, e in enumerate(events) if e.get("content_block", {}).get("id") == "toolu_repeated"
    )
    index = events[at]["index"]
    fragment = {"type": "content_block_delta", "index": index}
    body = [{**fragment, "delta": {"type": "input_json_delta", "partial_json": '{"x": "'}}]
    body += [{**fragment, "delta": {"type": "input_json_delta", "partial_json": "ab"}}] * deltas
    body += [{**fragment, "delta": {"type": "input_json_delta", "partial_json": '"}'}}]
    rest = [
        e for e in events[at + 1 :] if e.get("index") != index or e["type"] != "content_block_delta"
    ]
    return streams.sse([*events[: at + 1], *body, *rest])


def _m_markup_twice() -> bytes:
    events = streams.hermes_markup(streams.parsed("anthropic-sonnet45-text-only"))
    deltas = [e for e in events if e["type"] == "content_block_delta"]
    call = deltas[1]["delta"]["text"] + deltas[2]["delta"]["text"] + deltas[3]["delta"]["text"]
    deltas[3]["delta"]["text"] += call.replace('": ', '":')  # the same call again, other spacing
    return streams.sse(events)


def _m_structure(data: bytes) -> tuple[list[str], str]:
    result = messages_checker.check(data)
    return [b["type"] for b in result.blocks], result.text


def _m_payloads(data: bytes) -> list[object]:
    return [json.loads(e.data) for e in messages_checker.events_of(data)]  # type: ignore[arg-type]


def _m_repeated(name: str) -> tuple[bytes, bytes]:
    return streams.sse(call_twice(streams.parsed(name))), streams.recorded(name)


MESSAGES = NativeCase(
    name="messages",
    tools_request=M_TOOLS,
    no_tools_request={k: v for k, v in M_TOOLS.items() if k != "tools"},
    canonical={
        p.stem: p.read_bytes() for p in sorted(streams.PROTOCOL_FIXTURES.glob("messages-*.sse"))
    },
    repeated={name: _m_repeated(name) for name in (M_PARALLEL, M_TEXT_THEN_TOOL)},
    other_arguments=streams.recorded(M_PARALLEL),
    repeat_marker=b"toolu_repeated",
    repeat_cut=_m_repeat_cut,
    long_repeat=_m_long_repeat,
    markup_twice=_m_markup_twice(),
    calls=lambda data: [b["id"] for b in messages_checker.check(data).tool_uses],
    structure=_m_structure,
    payloads=_m_payloads,
    terminal=b"event: message_stop",
    text=lambda *deltas, named=True: _messages_text(deltas, named=named),
    held_shape=(s.input_behind_a_growing_input, b"event: content_block_start"),
    long_arguments=s.long_tool_input,
)


# -- text streams ----------------------------------------------------------------------------


def data_event(payload: dict[str, Any], *, named: bool = True) -> bytes:
    head = b"event: " + payload["type"].encode() + b"\n" if named else b""
    return head + b"data: " + orjson.dumps(payload) + b"\n\n"


def _responses_text(deltas: Sequence[str], *, named: bool) -> list[bytes]:
    """A Responses stream of one message whose deltas are ``deltas``; ``named``: each event
    with its ``event:`` line (without, every event is a repair)."""
    response = {"id": "resp_1", "object": "response", "created_at": 1, "model": "m"}
    item = {"id": "msg_1", "type": "message", "role": "assistant"}
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    at = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    payloads: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**response, "status": "in_progress"}},
        {"type": "response.in_progress", "response": {**response, "status": "in_progress"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "status": "in_progress", "content": []},
        },
        {"type": "response.content_part.added", **at, "part": part},
        *({"type": "response.output_text.delta", **at, "delta": d, "logprobs": []} for d in deltas),
    ]
    text = "".join(deltas)
    done_part = {**part, "text": text}
    done_item = {**item, "status": "completed", "content": [done_part]}
    usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
    payloads += [
        {"type": "response.output_text.done", **at, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **at, "part": done_part},
        {"type": "response.output_item.done", "output_index": 0, "item": done_item},
        {
            "type": "response.completed",
            "response": {**response, "status": "completed", "output": [done_item], "usage": usage},
        },
    ]
    for n, payload in enumerate(payloads):
        payload["sequence_number"] = n
    return [data_event(p, named=named) for p in payloads]


def _messages_text(deltas: Sequence[str], *, named: bool) -> list[bytes]:
    """A Messages stream of one text block whose deltas are ``deltas``."""
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 0},
    }
    payloads: list[dict[str, Any]] = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": d}}
            for d in deltas
        ),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
    return [data_event(p, named=named) for p in payloads]


CASES: dict[str, NativeCase] = {case.name: case for case in (RESPONSES, MESSAGES)}

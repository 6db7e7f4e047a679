"""Native streams of many items, built as servers send them: the shapes whose cost and memory
the native repairers must keep in bounds (issue 26 items 1 and 2)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

RESPONSE = {"id": "resp_1", "object": "response", "created_at": 1, "model": "m"}
USAGE = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
MESSAGE: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [],
    "stop_reason": None,
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 0},
}


def event(payload: dict[str, Any]) -> bytes:
    kind: str = payload["type"]
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


def created() -> bytes:
    """``response.created`` and ``response.in_progress`` (one write)."""
    head = {**RESPONSE, "status": "in_progress"}
    return event({"type": "response.created", "response": head}) + event(
        {"type": "response.in_progress", "response": head}
    )


def completed(output: list[Any] | None = None) -> bytes:
    response = {**RESPONSE, "status": "completed", "output": output or [], "usage": USAGE}
    return event({"type": "response.completed", "response": response})


def call_added(index: int, name: str = "get_weather") -> bytes:
    item = {
        "id": f"fc_{index}",
        "type": "function_call",
        "status": "in_progress",
        "arguments": "",
        "call_id": f"call_{index}",
        "name": name,
    }
    return event({"type": "response.output_item.added", "output_index": index, "item": item})


def args_delta(index: int, text: str) -> bytes:
    return event(
        {
            "type": "response.function_call_arguments.delta",
            "item_id": f"fc_{index}",
            "output_index": index,
            "delta": text,
        }
    )


def args_done(index: int, text: str) -> bytes:
    return event(
        {
            "type": "response.function_call_arguments.done",
            "item_id": f"fc_{index}",
            "output_index": index,
            "arguments": text,
        }
    )


def sglang_calls(count: int) -> list[bytes]:
    """The SGLang router (quirk 3): calls without their output_item.done, and a
    response.completed whose output is one empty message."""
    out = [created()]
    for i in range(count):
        out += [call_added(i), args_delta(i, f'{{"q": {i}}}'), args_done(i, f'{{"q": {i}}}')]
    empty = {"id": "msg_e", "type": "message", "status": "completed", "content": [], "role": "x"}
    return [*out, completed([empty])]


def unended_calls(count: int) -> list[bytes]:
    """Calls whose arguments never end (no ``.done``, never whole JSON) nor their items: each
    waits for the one before it until the stream's end."""
    out = [created()]
    for i in range(count):
        out += [call_added(i), args_delta(i, f'{{"q": [{i}')]
    return [*out, completed()]


def message_added(index: int = 0) -> list[bytes]:
    item = {"id": "msg_0", "type": "message", "status": "in_progress", "content": []}
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    at = {"item_id": "msg_0", "output_index": index, "content_index": 0}
    return [
        event({"type": "response.output_item.added", "output_index": index, "item": item}),
        event({"type": "response.content_part.added", **at, "part": part}),
        event({"type": "response.output_text.delta", **at, "delta": "On it.", "logprobs": []}),
    ]


def message_done(index: int = 0) -> bytes:
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": "On it."}
    item = {"id": "msg_0", "type": "message", "status": "completed", "content": [part]}
    return event({"type": "response.output_item.done", "output_index": index, "item": item})


def calls_behind_a_message(count: int, piece: str = '{"q": 1}') -> list[bytes]:
    """llama.cpp: text, then calls, the message's own end only after them (every call waits
    behind the open message)."""
    out = [created(), *message_added()]
    for i in range(1, count + 1):
        out += [call_added(i), args_delta(i, piece)]
    return [*out, message_done(), completed()]


def long_call(deltas: int, piece: str = "ab") -> list[bytes]:
    """One call whose arguments come in ``deltas`` fragments."""
    body = [args_delta(0, piece) for _ in range(deltas)]
    return [
        created(),
        call_added(0),
        args_delta(0, '{"content": "'),
        *body,
        args_delta(0, '"}'),
        completed(),
    ]


# -- Messages


def m_event(payload: dict[str, Any]) -> bytes:
    return event(payload)


def message_start() -> bytes:
    return m_event({"type": "message_start", "message": MESSAGE})


def message_end() -> list[bytes]:
    return [
        m_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 5},
            }
        ),
        m_event({"type": "message_stop"}),
    ]


def tool_start(index: int, name: str = "get_weather") -> bytes:
    block = {"type": "tool_use", "id": f"toolu_{index}", "name": name, "input": {}}
    return m_event({"type": "content_block_start", "index": index, "content_block": block})


def input_delta(index: int, text: str) -> bytes:
    delta = {"type": "input_json_delta", "partial_json": text}
    return m_event({"type": "content_block_delta", "index": index, "delta": delta})


def block_stop(index: int) -> bytes:
    return m_event({"type": "content_block_stop", "index": index})


def unstopped_blocks(count: int) -> list[bytes]:
    """llama.cpp: tool blocks never stopped, each input whole before the next starts."""
    out = [message_start()]
    for i in range(count):
        out += [tool_start(i), input_delta(i, '{"q": '), input_delta(i, f"{i}}}")]
    return [*out, *message_end()]


def blocks_behind_a_growing_input(count: int) -> list[bytes]:
    """A tool block whose input is still growing while ``count`` blocks start: every event of
    theirs waits behind it, until it stops."""
    out = [message_start(), tool_start(0), input_delta(0, '{"q": "Pa')]
    for i in range(1, count + 1):
        out += [tool_start(i), input_delta(i, '{"q": 1}')]
    out += [input_delta(0, 'ris"}'), block_stop(0)]
    return [*out, *(block_stop(i) for i in range(1, count + 1)), *message_end()]


def long_tool_input(deltas: int, piece: str = "ab") -> list[bytes]:
    body = [input_delta(0, piece) for _ in range(deltas)]
    return [
        message_start(),
        tool_start(0),
        input_delta(0, '{"content": "'),
        *body,
        input_delta(0, '"}'),
        block_stop(0),
        *message_end(),
    ]


def args_behind_a_message(size: int, piece: int = 4096) -> list[bytes]:
    """llama.cpp's order with one long call: the message stays open (its end comes after the
    call), so every event of the call waits behind it."""
    chunk = "x" * piece
    body = [args_delta(1, chunk) for _ in range(size // piece)]
    return [
        created(),
        *message_added(),
        call_added(1, "write_file"),
        args_delta(1, '{"content": "'),
        *body,
        args_delta(1, '"}'),
        message_done(),
        completed(),
    ]


def input_behind_a_growing_input(size: int, piece: int = 4096) -> list[bytes]:
    """A tool block whose input is still growing while a second one streams ``size``
    characters: every event of the second waits behind the first."""
    chunk = "x" * piece
    body = [input_delta(1, chunk) for _ in range(size // piece)]
    return [
        message_start(),
        tool_start(0),
        input_delta(0, '{"q": "Pa'),
        tool_start(1, "write_file"),
        input_delta(1, '{"content": "'),
        *body,
        input_delta(1, '"}'),
        input_delta(0, 'ris"}'),
        block_stop(0),
        block_stop(1),
        *message_end(),
    ]


# the requests and the shapes the cost guard grows (tests/core/protocols/test_native_cost.py),
# the contract's flat cost per event among them: (protocol, builder, the short length)
REQUESTS: dict[str, dict[str, Any]] = {
    "responses": {
        "model": "m",
        "stream": True,
        "input": "hi",
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}],
    },
    "messages": {
        "model": "m",
        "max_tokens": 10,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
    },
}
SHAPES: dict[str, tuple[str, Callable[[int], list[bytes]], int]] = {
    "sglang-calls": ("responses", sglang_calls, 150),
    "unended-calls": ("responses", unended_calls, 150),
    "calls-behind-a-message": ("responses", calls_behind_a_message, 150),
    "long-call": ("responses", long_call, 2_000),
    "unstopped-blocks": ("messages", unstopped_blocks, 150),
    "blocks-behind-a-growing-input": ("messages", blocks_behind_a_growing_input, 150),
    "long-tool-input": ("messages", long_tool_input, 2_000),
}

"""A server's own non-streamed Message, repaired: the same quirks as the stream, on one object.

The body comes back byte for byte when nothing needs repair. Otherwise the Message is written
again as compact JSON (the original keys in their places): tool_use blocks get their missing
``input``, tool-call markup in a text block becomes tool_use blocks after the text before it,
and ``stop_reason`` says ``tool_use`` when the message has tool_use blocks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from proxy.core.arguments.parallel import one_call_asked
from proxy.core.arguments.rules import call_rules
from proxy.core.arguments.tools import RequestTools
from proxy.core.errors import DialectError
from proxy.core.jsonvalues import JSONObject
from proxy.core.markup import build_extractor, check_names
from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Segment, Text
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.messages.native.fields import block_start, message_delta
from proxy.core.protocols.messages.native.model import extracts, input_parses
from proxy.core.protocols.messages.request import convert_tools
from proxy.core.protocols.native_calls import changes, whole_calls
from proxy.core.protocols.think import leading_think
from proxy.core.repairs import Repair, markup_kind


def repair_message(
    body: bytes, request: object, *, new_id: Callable[[], str], options: UpstreamOptions
) -> tuple[bytes, Counter[str]]:
    repairs: Counter[str] = Counter()
    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body, repairs
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return body, repairs
    request = request if isinstance(request, dict) else {}
    names = check_names(options.dialects) if extracts(request) else ()
    tools = convert_tools(request.get("tools")) if names else []
    content: list[Any] = []
    if options.think_in_content:
        message["content"] = _leading_think(message["content"], repairs)
    for block in message["content"]:
        if not isinstance(block, dict):
            content.append(block)
            continue
        repairs.update(block_start(block))
        if block.get("type") == "text" and names and isinstance(block.get("text"), str):
            content += _split(block, names, tools, new_id, repairs)
        else:
            content.append(block)
    # issue 25: the calls' inputs at their end, which a whole Message is
    tool_defs = request.get("tools")
    message["content"] = content = whole_calls(
        content,
        "tool_use",
        rules=call_rules(options, RequestTools.from_messages(tool_defs) if tool_defs else None),
        one_call=one_call_asked("messages", request) and options.enforce_parallel_tool_calls,
        repairs=repairs,
        cut=lambda _: message.get("stop_reason") == "max_tokens",
        read=_input_text,
        write=lambda block, text: block.__setitem__("input", orjson.loads(text)),
        unwrap=lambda _, name, text: {
            "type": "tool_use",
            "id": "toolu_" + new_id(),
            "name": name,
            "input": orjson.loads(text),
        },
    )
    tool_blocks = sum(isinstance(b, dict) and b.get("type") == "tool_use" for b in content)
    bad = any(
        isinstance(b, dict) and b.get("type") == "tool_use" and not isinstance(b.get("input"), dict)
        for b in content
    )
    delta: JSONObject = {
        "delta": {"stop_reason": message.get("stop_reason")},
        "usage": {"output_tokens": 0},
    }
    fixed = message_delta(delta, tool_blocks=tool_blocks, bad_input=bad)
    if any(kind != Repair.EMPTY_FIELD_DROPPED for kind in fixed):
        message["stop_reason"] = delta["delta"]["stop_reason"]
        repairs.update(kind for kind in fixed if kind != Repair.EMPTY_FIELD_DROPPED)
    if not changes(repairs):
        return body, repairs
    return orjson.dumps(message), repairs


def _leading_think(blocks: list[Any], repairs: Counter[str]) -> list[Any]:
    """Under ``think_in_content`` (issue 24 item 11), a first text block that begins with a
    ``<think>`` block: a thinking block of its text (no signature: none was made), then the
    text block with the rest (none when nothing is left)."""
    first = blocks[0] if blocks else None
    if not isinstance(first, dict) or first.get("type") != "text":
        return blocks
    text = first.get("text")
    split = leading_think(text) if isinstance(text, str) else None
    if split is None:
        return blocks
    repairs[Repair.THINK_IN_CONTENT] += 1
    thinking = {"type": "thinking", "thinking": split[0], "signature": ""}
    rest = [{**first, "text": split[1]}] if split[1].strip() else []
    return [thinking, *rest, *blocks[1:]]


def _input_text(block: JSONObject) -> str | None:
    value = block.get("input")
    return orjson.dumps(value).decode() if isinstance(value, dict) else None


def _split(
    block: JSONObject,
    names: Sequence[str],
    tools: list[JSONObject],
    new_id: Callable[[], str],
    repairs: Counter[str],
) -> list[JSONObject]:
    extractor = build_extractor(names, tools)
    if extractor is None:
        return [block]
    text = block["text"]
    try:
        segments: list[Segment] = extractor.feed(text) + extractor.close()
    except DialectError:
        repairs[Repair.DIALECT_ERROR] += 1
        return [block]
    if extractor.broken:  # given back as the text it was (issue 24 item 4)
        repairs[Repair.MARKUP_BROKEN] += extractor.broken
    if not any(isinstance(segment, CallOpen) for segment in segments):
        return [block]
    out: list[JSONObject] = []
    pieces: list[str] = []
    for segment in segments:
        match segment:
            case Text(text=piece):
                if out and out[-1]["type"] == "text":
                    out[-1]["text"] += piece
                else:
                    out.append({**block, "text": piece})
            case CallOpen(name=name, id=ident):
                repairs[markup_kind(extractor, names)] += 1
                pieces = []
                out.append({"type": "tool_use", "id": ident or "toolu_" + new_id(), "name": name})
            case CallArgs(text=piece):
                pieces.append(piece)
            case CallClose(error=error):
                if error is not None:
                    repairs[Repair.MARKUP_BROKEN] += 1
                arguments = "".join(pieces)
                out[-1]["input"] = (
                    orjson.loads(arguments) if input_parses(arguments) and arguments.strip() else {}
                )
    return [b for b in out if b["type"] != "text" or b["text"].strip()] or [block]

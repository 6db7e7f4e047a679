"""Driving an extractor the ways an upstream cuts content, and reading what came out."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import orjson
from hypothesis import strategies as st

from proxy.core.markup import build_extractor
from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Segment, Text

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "metric": {"type": "boolean"},
                "ratio": {"type": "number"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "options": {"type": "object"},
                "note": {"type": ["string", "null"]},
            },
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
}
TOOLS = [WEATHER, TIME]

# Special tokens and words come whole, the rest in short pieces, as tokenizers cut them.
_TOKEN = re.compile(
    r"<\|[a-z_]+\|>|<\|\"\|>|<｜[^｜]+｜>|\[[A-Z_]+\]|<\|[a-z_]+>|<[a-z_]+\|>|\s+|\w{1,4}|[^\w\s]"
)


def tokens(text: str) -> list[str]:
    """``text`` cut roughly as a tokenizer would: one token per chunk."""
    pieces = _TOKEN.findall(text)
    assert "".join(pieces) == text
    return pieces


def chars(text: str) -> list[str]:
    return list(text)


def run(
    chunks: Iterable[str], names: Sequence[str] = ("auto",), tools: Any = None
) -> list[Segment]:
    extractor = build_extractor(list(names), TOOLS if tools is None else tools)
    assert extractor is not None
    out: list[Segment] = []
    for chunk in chunks:
        out += extractor.feed(chunk)
    out += extractor.close()
    return merged(out)


def merged(segments: Iterable[Segment]) -> list[Segment]:
    """Adjacent Text, and adjacent CallArgs, joined: what a client accumulates."""
    out: list[Segment] = []
    for segment in segments:
        if out and isinstance(segment, Text) and isinstance(out[-1], Text):
            out[-1] = Text(out[-1].text + segment.text)
        elif out and isinstance(segment, CallArgs) and isinstance(out[-1], CallArgs):
            out[-1] = CallArgs(out[-1].text + segment.text)
        else:
            out.append(segment)
    return out


@dataclass(frozen=True)
class Call:
    name: str
    args: Any
    id: str | None = None
    error: str | None = None


def calls(segments: Sequence[Segment]) -> list[Call]:
    """The calls in the segments, arguments parsed; checks the segments' grammar on the way."""
    found: list[Call] = []
    opened: CallOpen | None = None
    args = ""
    for segment in segments:
        if isinstance(segment, CallOpen):
            assert opened is None, "call opened inside a call"
            opened, args = segment, ""
        elif isinstance(segment, CallArgs):
            assert opened is not None, "arguments outside a call"
            args += segment.text
        elif isinstance(segment, CallClose):
            assert opened is not None, "close outside a call"
            parsed = orjson.loads(args) if segment.error is None else args
            found.append(Call(opened.name, parsed, opened.id, segment.error))
            opened = None
        else:
            assert opened is None, "text inside a call"
    assert opened is None, "call left open"
    return found


def text(segments: Sequence[Segment]) -> str:
    return "".join(s.text for s in segments if isinstance(s, Text))


def cuts(text_: str) -> dict[str, list[str]]:
    """The ways every example is fed: whole, one token per chunk, one character per chunk."""
    return {"whole": [text_], "tokens": tokens(text_), "chars": chars(text_)}


def cut(data: st.DataObject, whole: str) -> list[str]:
    points = data.draw(st.lists(st.integers(0, len(whole)), max_size=12).map(sorted))
    bounds = [0, *points, len(whole)]
    return [whole[a:b] for a, b in pairwise(bounds)]

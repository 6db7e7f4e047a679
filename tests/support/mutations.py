"""Real streams mutated at random (hypothesis): a golden input or a generated stream, cut,
duplicated, dropped or overwritten with SSE and JSON noise, and the characters of every argument
and text field a stream holds, to prove that none is lost."""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from hypothesis import strategies as st

from tests.support.stream_strategies import streams
from tests.support.strict_checker import events

GOLDEN_INPUTS = sorted((Path(__file__).parents[1] / "golden").glob("*.in.sse"))


_NOISE = [
    b'"',
    b"{",
    b"}",
    b"\n\n",
    b"\n",
    b"null",
    b'"tool_calls":',
    b'"index":',
    b"[",
    b"]",
    b":",
    b",",
    b"\r",
]


@st.composite
def mutated(draw) -> bytes:
    base = draw(
        st.sampled_from(GOLDEN_INPUTS).map(Path.read_bytes) | streams().map(lambda d: d.body)
    )
    data = bytearray(base)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["cut", "duplicate", "drop", "replace"]))
        start = draw(st.integers(0, len(data)))
        end = draw(st.integers(start, min(len(data), start + 80)))
        if op == "cut":
            del data[start:]
        elif op == "duplicate":
            data[end:end] = data[start:end]
        elif op == "drop":
            del data[start:end]
        else:
            data[start:end] = draw(st.binary(max_size=6) | st.sampled_from(_NOISE))
    return bytes(data)


def _entries(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [value]
    return value if isinstance(value, list) else []


def argument_and_text_chars(body: bytes) -> tuple[Counter[str], Counter[str]]:
    """Characters of every tool-call argument value, and of every text field, in a stream."""
    args: Counter[str] = Counter()
    text: Counter[str] = Counter()
    for event in events(body):
        if event.data is None:
            continue
        try:
            chunk = json.loads(event.data)
        except ValueError:
            continue
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        for choice in choices if isinstance(choices, list) else []:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                continue
            for key in ("content", "reasoning_content", "reasoning"):
                if isinstance(delta.get(key), str):
                    text.update(delta[key])
            for entry in _entries(delta.get("tool_calls")):
                function = entry.get("function") if isinstance(entry, dict) else None
                if not isinstance(function, dict):
                    continue
                value = function.get("arguments")
                if value is None:
                    value = function.get("parameters")
                if isinstance(value, str):
                    args.update(value)
                elif value is not None:
                    with contextlib.suppress(orjson.JSONEncodeError):
                        args.update(orjson.dumps(value).decode())
    return args, text

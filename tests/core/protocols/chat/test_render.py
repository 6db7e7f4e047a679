"""The chunks a chunk sends itself (chat/render.py ``render_own``): a call held in markup goes
out whole in the chunk that closes it (issue 24 item 4), one chunk per argument piece; the
pieces after the first are written around their text in the shape of the one before them,
and come out byte for byte as each written whole."""

from __future__ import annotations

import json

from proxy.core.protocols.chat.deltas import ArgsDelta, Extras, OpeningDelta
from proxy.core.protocols.chat.pieces import Piece, Source
from proxy.core.protocols.chat.render import render_own
from proxy.core.sse import Event

CHUNK = {
    "id": "c",
    "object": "chat.completion.chunk",
    "created": 1,
    "model": "m",
    "choices": [
        {"index": 0, "delta": {"content": "x"}, "logprobs": {"a": 1}, "finish_reason": None}
    ],
}
TEXTS = ['{"q": "', "Par", "is \\u00e9 ü", '\\"', "\\n", "\n\t", "🙂", "", '"}']


def written(
    chunk: dict[str, object], choice: dict[str, object], delta: object, first: bool
) -> bytes:
    out = {**choice, "delta": delta, "finish_reason": None}
    if not first:
        out["logprobs"] = None
    body = {**chunk, "choices": [out]}
    return (
        b"data: " + json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"
    )


def args(index: int, text: str) -> dict[str, object]:
    return {"tool_calls": [{"index": index, "function": {"arguments": text}}]}


def test_a_run_of_argument_pieces_comes_out_as_each_piece_written_whole() -> None:
    chunk = json.loads(json.dumps(CHUNK))
    choice = chunk["choices"][0]
    source = Source(Event(raw=b"unused"), chunk)
    opening = OpeningDelta(0, "call_1", "get_weather", "", None, None)
    pieces = [Piece(source, choice, opening)]
    pieces += [Piece(source, choice, ArgsDelta(0, text)) for text in TEXTS]
    pieces += [Piece(source, choice, ArgsDelta(1, "{}"))]  # another call's: a shape of its own
    pieces += [Piece(source, choice, ArgsDelta(1, "x", Extras({}, {"name": "f"})))]
    pieces += [Piece(source, choice, ArgsDelta(1, "y"))]
    out = render_own(source, [choice], [pieces])
    entry = {"index": 0, "id": "call_1", "type": "function"}
    entry["function"] = {"name": "get_weather", "arguments": ""}
    expected = [written(chunk, choice, {"tool_calls": [entry]}, True)]
    expected += [written(chunk, choice, args(0, text), False) for text in TEXTS]
    expected += [written(chunk, choice, args(1, "{}"), False)]
    named = {"tool_calls": [{"index": 1, "function": {"arguments": "x", "name": "f"}}]}
    assert pieces[-3].delta != pieces[-2].delta
    expected += [written(chunk, choice, named, False), written(chunk, choice, args(1, "y"), False)]
    assert out == expected


def test_a_chunk_with_usage_puts_it_on_its_last_piece_only() -> None:
    chunk = {**json.loads(json.dumps(CHUNK)), "usage": {"completion_tokens": 3}}
    choice = chunk["choices"][0]
    source = Source(Event(raw=b"unused"), chunk)
    pieces = [Piece(source, choice, ArgsDelta(0, text)) for text in ("a", "b", "c")]
    out = render_own(source, [choice], [pieces])
    bare = {k: v for k, v in chunk.items() if k != "usage"}
    expected = [
        written(bare, choice, args(0, "a"), True),
        written(bare, choice, args(0, "b"), False),
    ]
    assert out == [*expected, written(chunk, choice, args(0, "c"), False)]

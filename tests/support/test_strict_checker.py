"""The strict checker finds each rule it enforces, so a clean verdict means something."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.strict_checker import check, reconstruct


def stream(*deltas: Any, done: bool = True) -> bytes:
    """One chunk per (delta, finish_reason) pair, or per bare delta."""
    out = []
    for item in deltas:
        delta, finish = item if isinstance(item, tuple) else (item, None)
        chunk = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        out.append(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    if done:
        out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def opening(index=0, ident="call_1", name="get_weather", args=""):
    return {
        "tool_calls": [
            {
                "index": index,
                "id": ident,
                "type": "function",
                "function": {"name": name, "arguments": args},
            }
        ]
    }


def more(text, index=0):
    return {"tool_calls": [{"index": index, "function": {"arguments": text}}]}


FINISH: tuple[dict[str, Any], str] = ({}, "tool_calls")
GOOD = stream({"role": "assistant"}, opening(), more('{"a":'), more("1}"), FINISH)


def test_a_canonical_stream_passes():
    assert check(GOOD) == []
    assert check(GOOD, form="S2") != []  # streamed arguments are not S2


def test_whole_calls_pass_both_forms():
    body = stream(opening(args='{"a":1}'), opening(1, "call_2", args="{}"), FINISH)
    assert check(body) == []
    assert check(body, form="S2") == []


def test_interleaved_calls_pass():
    body = stream(opening(), opening(1, "call_2"), more("{}"), more("{}", 1), FINISH)
    assert check(body) == []


BAD = {
    "rule 6: index": stream(opening(index=1, args="{}"), FINISH),
    "rule 6: not an array": stream({"tool_calls": {"index": 0}}, FINISH),
    "rule 7": stream(
        {
            "tool_calls": [
                *opening(args="{}")["tool_calls"],
                *opening(1, "call_2", args="{}")["tool_calls"],
            ]
        },
        FINISH,
    ),
    "rule 5": stream({**opening(args="{}"), "content": "hi"}, FINISH),
    "rule 8: no id": stream(opening(ident="", args="{}"), FINISH),
    "rule 8: not unique": stream(opening(args="{}"), opening(1, args="{}"), FINISH),
    "rule 8: no type": stream(
        {"tool_calls": [{"index": 0, "id": "x", "function": {"name": "f", "arguments": "{}"}}]},
        FINISH,
    ),
    "rule 8: no name": stream(opening(name="", args="{}"), FINISH),
    "rule 8: partial arguments": stream(opening(args="{"), more("}"), FINISH),
    "rule 8: id inside function": stream(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "x",
                    "type": "function",
                    "function": {"name": "f", "arguments": "{}", "id": "x"},
                }
            ]
        },
        FINISH,
    ),
    "rule 9: repeats id": stream(
        opening(),
        {"tool_calls": [{"index": 0, "id": "call_1", "function": {"arguments": "{}"}}]},
        FINISH,
    ),
    "rule 9: repeats type": stream(
        opening(),
        {"tool_calls": [{"index": 0, "type": "function", "function": {"arguments": "{}"}}]},
        FINISH,
    ),
    "rule 9: repeats the name": stream(
        opening(),
        {"tool_calls": [{"index": 0, "function": {"name": "get_weather", "arguments": "{}"}}]},
        FINISH,
    ),
    "rule 10: not a string": stream(opening(args={"a": 1}), FINISH),
    "rule 10: not one JSON value": stream(opening(), more('{"a":'), FINISH),
    "rule 10: are not one JSON": stream(opening(args="{}"), more('{"a":1}'), FINISH),
    "rule 10: no arguments": stream(opening(), FINISH),
    "rule 11: no finish": stream(opening(args="{}")),
    "rule 11: stop": stream(opening(args="{}"), ({}, "stop")),
    "rule 11: finish_reason on a chunk": stream((opening(args="{}"), "tool_calls")),
    "rule 11: after the finish": stream(
        opening(args="{}"), FINISH, opening(1, "call_2", args="{}")
    ),
    "[DONE]": stream(opening(args="{}"), FINISH, done=False),
}


@pytest.mark.parametrize("expected", list(BAD), ids=list(BAD))
def test_each_violation_is_found(expected):
    problems = check(BAD[expected])
    assert any(expected.split(":")[0] in p for p in problems), problems
    detail = expected.split(": ", 1)[-1]
    if ": " in expected:
        assert any(detail in p for p in problems), problems


def test_a_stream_cut_short_may_lack_its_end():
    body = stream(opening(), more('{"a":'), done=False)
    assert check(body, complete=False) == []
    assert check(body) != []


def test_a_stream_that_reported_an_error_need_not_end_with_done():
    text = stream({"role": "assistant"}, {"content": "Hel"}, done=False)
    assert check(text) != []
    assert check(text + b'data: {"error": {"message": "boom"}}\n\n') == []


def test_length_allows_cut_arguments():
    assert check(stream(opening(), more('{"a":'), ({}, "length"))) == []


def test_reconstruct_joins_a_call_and_the_text():
    seen = reconstruct(
        stream({"content": "He"}, {"content": "llo"}, opening(), more('{"a":'), more("1}"), FINISH)
    )
    choice = seen.choices[0]
    assert "".join(choice.content) == "Hello"
    assert [(c.id, c.name, c.text) for c in choice.calls] == [("call_1", "get_weather", '{"a":1}')]
    assert choice.finish_reason == "tool_calls"
    assert seen.done

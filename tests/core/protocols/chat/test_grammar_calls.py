"""TGI's grammar tool calls (issue 24 item 2): a call without a name whose arguments are the
grammar's whole call object gets its name and arguments from inside it, at its end."""

from __future__ import annotations

import json

import pytest

from proxy.core.options import RequestInfo, UpstreamOptions
from proxy.core.protocols.chat.completion import normalize_completion
from proxy.core.protocols.chat.grammar_calls import grammar_call, without_eos
from tests.support.normalizer import run

WRAPPED = '{"function": {"_name": "get_current_weather", "location": "Paris", "format": "celsius"}}'
TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("get_current_weather", "get_n_day_weather_forecast")
]


@pytest.mark.parametrize("eos", ["", "<|eot_id|>", "</s>", "\n</s>", "<|eot_id|><|end_of_text|>"])
def test_the_wrapped_arguments_give_the_name_and_the_inner_object(eos: str) -> None:
    name, arguments = grammar_call(WRAPPED + eos) or ("", "")
    assert name == "get_current_weather"
    assert json.loads(arguments) == {"location": "Paris", "format": "celsius"}


@pytest.mark.parametrize(
    "text",
    [
        '{"location": "Paris"}',  # plain arguments
        '{"function": {"location": "Paris"}}',  # no _name
        '{"function": {"_name": "f"}, "other": 1}',  # more than the wrapper
        '{"function": {"_name": 3}}',
        '{"function": {"_name": "f", "a": 1}}<|eot_id|> and more',
        '{"function": {"_name": "f", "a": 1',
    ],
)
def test_other_arguments_are_not_a_grammar_call(text: str) -> None:
    assert grammar_call(text) is None


def test_only_trailing_end_of_sequence_tokens_are_stripped() -> None:
    assert without_eos('{"a": "</s>"}</s> \n') == '{"a": "</s>"}'


def _chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    chunk = {"id": "", "object": "chat.completion.chunk", "created": 1, "model": "tgi"}
    chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def _tgi(pieces: list[str], finish: str = "stop") -> bytes:
    """TGI's shape: tool_calls an object, name null, id empty, on every delta."""
    body = b""
    for i, piece in enumerate(pieces):
        entry: dict[str, object] = {"index": 0, "id": "", "type": "function"}
        entry["function"] = {"name": None, "arguments": piece}
        delta: dict[str, object] = {"role": "assistant", "content": None, "tool_calls": entry}
        body += _chunk(delta, finish if i == len(pieces) - 1 else None)
    return body + b"data: [DONE]\n\n"


def _calls(out: bytes) -> tuple[list[tuple[str, object]], str | None]:
    names: dict[int, str] = {}
    args: dict[int, str] = {}
    finish = None
    for line in out.split(b"\n\n"):
        if not line.startswith(b"data: {"):
            continue
        choice = json.loads(line[6:])["choices"][0]
        finish = choice.get("finish_reason") or finish
        for entry in choice["delta"].get("tool_calls") or ():
            function = entry.get("function", {})
            if function.get("name"):
                names[entry["index"]] = function["name"]
            args[entry["index"]] = args.get(entry["index"], "") + function.get("arguments", "")
    return [(names[i], json.loads(args[i])) for i in sorted(names)], finish


@pytest.mark.parametrize("coalesce", [False, True], ids=["S1", "S2"])
@pytest.mark.parametrize("eos", ["<|eot_id|>", "</s>"])
def test_a_streamed_grammar_call_is_named_unwrapped_and_finishes_with_tool_calls(
    coalesce: bool, eos: str
) -> None:
    pieces = [WRAPPED[i : i + 7] for i in range(0, len(WRAPPED), 7)] + [eos]
    out, normalizer = run(
        _tgi(pieces),
        options=UpstreamOptions(coalesce=coalesce),
        request=RequestInfo.from_body({"tools": TOOLS}),
        complete=True,
    )
    calls, finish = _calls(out)
    assert calls == [("get_current_weather", {"location": "Paris", "format": "celsius"})]
    assert finish == "tool_calls"
    assert normalizer.repairs["grammar-call"] == 1
    assert "name-missing" not in normalizer.repairs


def test_a_string_tool_choice_names_a_call_that_never_got_a_name() -> None:
    out, normalizer = run(
        _tgi(['{"location": ', '"Paris"}']),
        request=RequestInfo.from_body({"tools": TOOLS, "tool_choice": "get_current_weather"}),
        complete=True,
    )
    assert _calls(out) == ([("get_current_weather", {"location": "Paris"})], "tool_calls")
    assert normalizer.repairs["name-missing"] == 1


def test_a_string_tool_choice_that_names_no_tool_names_nothing() -> None:
    assert RequestInfo.from_body({"tools": TOOLS, "tool_choice": "auto"}).fallback_name is None
    assert RequestInfo.from_body({"tools": TOOLS, "tool_choice": "nope"}).fallback_name is None


@pytest.mark.parametrize("as_object", [False, True], ids=["string", "object"])
def test_a_whole_grammar_call_is_named_unwrapped_and_finishes_with_tool_calls(
    as_object: bool,
) -> None:
    # stream: false (issue 24 item 3a): TGI's grammar output in a completion's message, the
    # arguments as text with the end-of-sequence token, or as the object itself
    arguments: object = json.loads(WRAPPED) if as_object else WRAPPED + "<|eot_id|>"
    call = {"id": "", "type": "function", "function": {"name": None, "arguments": arguments}}
    body = json.dumps(
        {
            "id": "",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                    "finish_reason": "stop",
                }
            ],
        }
    ).encode()
    out, repairs = normalize_completion(
        body,
        UpstreamOptions(),
        RequestInfo.from_body({"tools": TOOLS}),
        new_id=iter(f"id{n:07d}" for n in range(9)).__next__,
    )
    [choice] = json.loads(out)["choices"]
    [fixed] = choice["message"]["tool_calls"]
    assert fixed["function"]["name"] == "get_current_weather"
    assert json.loads(fixed["function"]["arguments"]) == {"location": "Paris", "format": "celsius"}
    assert choice["finish_reason"] == "tool_calls"
    assert repairs["grammar-call"] == 1
    assert "name-missing" not in repairs
    assert "args-truncated" not in repairs

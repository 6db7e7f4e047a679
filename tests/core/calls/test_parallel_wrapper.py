"""The model's multi-call wrapper (issue 24 item 6; calls/wrapper.py, the driver's UNWRAP): a
call named ``parallel`` or ``multi_tool_use.parallel`` that the request offers no tool for
becomes one call per entry of its ``tool_uses``, in every protocol and mode, streamed and
whole. The field streams (tests/fixtures/field/, section 6) are run by
tests/core/protocols/chat/test_field_streams.py and the chat golden case
``field-gptoss-parallel-wrapper`` (chat S1/S2 and both translate modes); here the rules
around it."""

from __future__ import annotations

import itertools
import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.core.calls.wrapper import entries
from proxy.core.options import RequestInfo, UpstreamOptions
from proxy.core.protocols.chat.completion import normalize_completion
from proxy.core.protocols.registry import CLIENT_PROTOCOLS
from proxy.core.repairs import DETECTED_ONLY, Repair
from tests.fixtures.field import report
from tests.support import strict_checker
from tests.support.normalizer import cut, run

WEATHER = {
    "type": "object",
    "properties": {"location": {"type": "string"}},
    "required": ["location"],
}
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TWO_PAIRS: list[tuple[str, dict[str, Any]]] = [
    ("functions.weather", {"location": "San Francisco"}),
    ("functions.cityAttractions", {"city": "Rome"}),
]
TWO = [{"recipient_name": n, "parameters": p} for n, p in TWO_PAIRS]


def chat_tools(**schemas: Any) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": name, "parameters": schema}}
        for name, schema in schemas.items()
    ]


def chat_request(**extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "stream": True,
        "messages": [{"role": "user", "content": "go"}],
        "tools": chat_tools(weather=WEATHER, cityAttractions=CITY),
        **extra,
    }


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-oss",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def wrapper_stream(
    arguments: str,
    *,
    name: str = "multi_tool_use.parallel",
    piece: int = 24,
    finish: str = "tool_calls",
) -> bytes:
    """A chat stream of one call (the wrapper, by default), its arguments in pieces."""
    opening = {"index": 0, "id": "call_w", "type": "function"}
    out = [
        _chunk({"role": "assistant", "content": ""}),
        _chunk({"tool_calls": [{**opening, "function": {"name": name, "arguments": ""}}]}),
    ]
    for at in range(0, len(arguments), piece):
        text = arguments[at : at + piece]
        out.append(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": text}}]}))
    out.append(_chunk({}, finish))
    return b"".join([*out, b"data: [DONE]\n\n"])


def uses(*pairs: tuple[str, dict[str, Any]]) -> str:
    return json.dumps(
        {"tool_uses": [{"recipient_name": n, "parameters": p} for n, p in pairs]},
        separators=(",", ":"),
    )


def chat_calls(out: bytes) -> list[tuple[Any, Any, Any, Any]]:
    """(index, id, name, arguments as parsed) of each call a chat client builds."""
    seen = strict_checker.reconstruct(out).choices[0]
    return [(c.index, c.id, c.name, json.loads(c.text)) for c in seen.calls]


FORMS = pytest.mark.parametrize("coalesce", [False, True], ids=["S1", "S2"])


# -- the wrapper's shape -----------------------------------------------------------------------


def test_entries_are_the_calls_named_without_the_functions_prefix():
    text = json.dumps({"tool_uses": [*TWO, {"recipient_name": "plain", "parameters": {}}]})
    assert entries(text) == [
        ("weather", '{"location":"San Francisco"}'),
        ("cityAttractions", '{"city":"Rome"}'),
        ("plain", "{}"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        '{"tool_uses": [{"recipient_name": "functions.a", "parameters": {}}',  # cut
        "[]",
        '{"tool_uses": []}',
        '{"tool_uses": {"recipient_name": "functions.a"}}',
        '{"tool_uses": [{"parameters": {}}]}',
        '{"tool_uses": [{"recipient_name": "functions.", "parameters": {}}]}',
        '{"tool_uses": [{"recipient_name": "functions.a", "parameters": "x=1"}]}',
        '{"tool_uses": [{"recipient_name": "functions.a", "parameters": {}}, 3]}',
        '{"location": "Paris"}',
    ],
)
def test_arguments_not_of_the_wrappers_shape_hold_no_calls(text: str):
    assert entries(text) is None


# -- chat streams ------------------------------------------------------------------------------


@FORMS
@pytest.mark.parametrize("name", ["multi_tool_use.parallel", "parallel"])
def test_a_streamed_wrapper_becomes_its_calls_each_with_a_fresh_id(coalesce: bool, name: str):
    body = wrapper_stream(uses(*TWO_PAIRS), name=name)
    out, normalizer = run(
        body,
        options=UpstreamOptions(coalesce=coalesce),
        request=RequestInfo.from_body(chat_request()),
    )
    calls = chat_calls(out)
    assert [(c[0], c[2], c[3]) for c in calls] == [
        (0, "weather", {"location": "San Francisco"}),
        (1, "cityAttractions", {"city": "Rome"}),
    ]
    assert len({c[1] for c in calls}) == 2
    assert "call_w" not in {c[1] for c in calls}  # the wrapper's id is not one of theirs
    assert strict_checker.check(out, form="S2" if coalesce else "S1") == []
    assert strict_checker.reconstruct(out).choices[0].finish_reason == "tool_calls"
    assert normalizer.repairs[Repair.PARALLEL_WRAPPER] == 1
    # each call fits its own tool: nothing counted against the wrapper's name
    assert not any(k.startswith(Repair.ARGS_SCHEMA_MISMATCH) for k in normalizer.repairs)


@FORMS
def test_a_tool_the_request_names_parallel_gets_its_own_call(coalesce: bool):
    body = wrapper_stream(uses(("functions.weather", {"location": "Paris"})))
    request = chat_request(tools=chat_tools(weather=WEATHER, **{"multi_tool_use.parallel": {}}))
    out, normalizer = run(
        body, options=UpstreamOptions(coalesce=coalesce), request=RequestInfo.from_body(request)
    )
    [call] = chat_calls(out)
    assert call[2] == "multi_tool_use.parallel"
    assert Repair.PARALLEL_WRAPPER not in normalizer.repairs
    if not coalesce:
        assert out == body  # canonical, and no wrapper: byte for byte


@FORMS
def test_a_wrapper_without_the_shape_goes_out_as_it_came(coalesce: bool):
    text = '{"tool_uses": [{"recipient_name": "functions.weather", "parameters": "Paris"}]}'
    out, normalizer = run(
        wrapper_stream(text),
        options=UpstreamOptions(coalesce=coalesce),
        request=RequestInfo.from_body(chat_request()),
    )
    [call] = strict_checker.reconstruct(out).choices[0].calls
    assert (call.name, call.text) == ("multi_tool_use.parallel", text)
    assert Repair.PARALLEL_WRAPPER not in normalizer.repairs


@FORMS
def test_a_wrapper_cut_by_the_token_limit_stays_a_cut(coalesce: bool):
    text = uses(("functions.weather", {"location": "San Francisco"}))[:-12]
    out, normalizer = run(
        wrapper_stream(text, finish="length"),
        options=UpstreamOptions(coalesce=coalesce),
        request=RequestInfo.from_body(chat_request()),
    )
    seen = strict_checker.reconstruct(out).choices[0]
    assert [(c.name, c.text) for c in seen.calls] == [("multi_tool_use.parallel", text)]
    assert seen.finish_reason == "length"
    assert Repair.PARALLEL_WRAPPER not in normalizer.repairs


@FORMS
def test_one_call_asked_keeps_the_wrappers_first_entry(coalesce: bool):
    body = wrapper_stream(uses(*TWO_PAIRS))
    out, normalizer = run(
        body,
        options=UpstreamOptions(coalesce=coalesce),
        request=RequestInfo.from_body(chat_request(parallel_tool_calls=False)),
    )
    assert [(c[0], c[2]) for c in chat_calls(out)] == [(0, "weather")]
    assert normalizer.repairs[Repair.PARALLEL_CALL_DROPPED] == 1
    assert normalizer.repairs[Repair.PARALLEL_WRAPPER] == 1
    assert strict_checker.check(out, form="S2" if coalesce else "S1") == []


def test_each_entry_is_checked_against_its_own_tool():
    text = uses(("functions.weather", {"city": "Paris"}), ("functions.unknown", {}))
    _, normalizer = run(wrapper_stream(text), request=RequestInfo.from_body(chat_request()))
    mismatches = {k: n for k, n in normalizer.repairs.items() if k.startswith("args-schema")}
    assert mismatches == {
        "args-schema-mismatch:required": 1,
        "args-schema-mismatch:unknown-tool": 1,
    }


def test_a_request_without_tools_gets_the_wrappers_calls_too():
    body = wrapper_stream(uses(("functions.weather", {"location": "Oslo"})))
    request = {k: v for k, v in chat_request().items() if k != "tools"}
    out, _ = run(body, request=RequestInfo.from_body(request))
    assert [c[2] for c in chat_calls(out)] == ["weather"]


def test_parallel_wrapper_is_a_repair_not_only_detected():
    assert Repair.PARALLEL_WRAPPER not in DETECTED_ONLY


# -- the property --------------------------------------------------------------------------------

_names = st.text("abcdefgh_", min_size=1, max_size=6)
_params = st.dictionaries(
    st.text("xyz", min_size=1, max_size=3),
    st.one_of(st.integers(-5, 5), st.text('ab "\\é', max_size=4), st.booleans(), st.none()),
    max_size=3,
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(_names, _params), min_size=1, max_size=5),
    st.integers(1, 30),
    st.lists(st.integers(0, 4000), max_size=6),
    st.booleans(),
    st.booleans(),
)
def test_split_calls_carry_exactly_the_entries(
    found: list[tuple[str, dict[str, Any]]],
    piece: int,
    cuts: list[int],
    prefixed: bool,
    coalesce: bool,
):
    """The split calls' arguments are exactly the entries' parameters, in order, their ids
    unique and their indexes consecutive from 0, however the stream is cut."""
    prefix = "functions." if prefixed else ""
    body = wrapper_stream(uses(*((prefix + n, p) for n, p in found)), piece=piece)
    reads = cut(body, sorted({c % (len(body) + 1) for c in cuts}))
    out, normalizer = run(
        reads,
        options=UpstreamOptions(coalesce=coalesce),
        request=RequestInfo.from_body(chat_request()),
    )
    calls = chat_calls(out)
    assert [(c[2], c[3]) for c in calls] == found
    assert [c[0] for c in calls] == list(range(len(found)))
    assert len({c[1] for c in calls}) == len(found)
    assert normalizer.repairs[Repair.PARALLEL_WRAPPER] == 1


# -- whole answers -------------------------------------------------------------------------------


def _counting(prefix: str) -> Any:
    counter = itertools.count(1)
    return lambda: f"{prefix}{next(counter):04d}"


def test_a_whole_chat_completion_gets_the_wrappers_calls():
    arguments = json.dumps({"tool_uses": TWO})
    body = orjson.dumps(
        {
            "id": "c",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_w",
                                "type": "function",
                                "function": {"name": "parallel", "arguments": arguments},
                            }
                        ],
                    },
                    "finish_reason": "tool_calls",
                }
            ],
        }
    )
    request = RequestInfo.from_body(chat_request(stream=False))
    out, repairs = normalize_completion(body, UpstreamOptions(), request, new_id=_counting("idx00"))
    calls = json.loads(out)["choices"][0]["message"]["tool_calls"]
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("weather", {"location": "San Francisco"}),
        ("cityAttractions", {"city": "Rome"}),
    ]
    assert len({c["id"] for c in calls}) == 2
    assert repairs[Repair.PARALLEL_WRAPPER] == 1
    # under parallel_tool_calls: false the first entry is the one call
    one = RequestInfo.from_body(chat_request(stream=False, parallel_tool_calls=False))
    out, repairs = normalize_completion(body, UpstreamOptions(), one, new_id=_counting("idx00"))
    calls = json.loads(out)["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["weather"]
    assert repairs[Repair.PARALLEL_CALL_DROPPED] == 1


def test_a_whole_chat_completion_cut_by_length_keeps_its_wrapper():
    arguments = json.dumps({"tool_uses": TWO})
    choice = {
        "index": 0,
        "message": {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_w",
                    "type": "function",
                    "function": {"name": "parallel", "arguments": arguments},
                }
            ],
        },
        "finish_reason": "length",
    }
    body = orjson.dumps({"id": "c", "object": "chat.completion", "choices": [choice]})
    request = RequestInfo.from_body(chat_request(stream=False))
    out, repairs = normalize_completion(body, UpstreamOptions(), request, new_id=_counting("i"))
    assert out == body
    assert Repair.PARALLEL_WRAPPER not in repairs


def test_a_whole_native_message_gets_the_wrappers_tool_use_blocks():
    body = orjson.dumps(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "gpt-oss",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_w",
                    "name": "multi_tool_use.parallel",
                    "input": {"tool_uses": TWO},
                }
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    request = {
        "model": "m",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "go"}],
        "tools": [
            {"name": "weather", "input_schema": WEATHER},
            {"name": "cityAttractions", "input_schema": CITY},
        ],
    }
    out, repairs = CLIENT_PROTOCOLS["messages"].native_completion(
        body=body, request=request, options=UpstreamOptions(), new_id=_counting("m")
    )
    blocks = json.loads(out)["content"]
    assert [(b["type"], b["name"], b["input"]) for b in blocks] == [
        ("tool_use", "weather", {"location": "San Francisco"}),
        ("tool_use", "cityAttractions", {"city": "Rome"}),
    ]
    assert len({b["id"] for b in blocks}) == 2
    assert all(b["id"].startswith("toolu_") for b in blocks)
    assert repairs[Repair.PARALLEL_WRAPPER] == 1


def test_a_whole_native_response_gets_the_wrappers_function_call_items():
    arguments = json.dumps({"tool_uses": TWO})
    body = orjson.dumps(
        {
            "id": "resp_1",
            "object": "response",
            "status": "completed",
            "output": [
                {
                    "type": "function_call",
                    "id": "fc_w",
                    "call_id": "call_w",
                    "name": "parallel",
                    "arguments": arguments,
                    "status": "completed",
                }
            ],
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
        }
    )
    request = {
        "model": "m",
        "input": "go",
        "tools": [
            {"type": "function", "name": "weather", "parameters": WEATHER},
            {"type": "function", "name": "cityAttractions", "parameters": CITY},
        ],
    }
    out, repairs = CLIENT_PROTOCOLS["responses"].native_completion(
        body=body, request=request, options=UpstreamOptions(), new_id=_counting("r")
    )
    items = json.loads(out)["output"]
    assert [(i["type"], i["name"], json.loads(i["arguments"])) for i in items] == [
        ("function_call", "weather", {"location": "San Francisco"}),
        ("function_call", "cityAttractions", {"city": "Rome"}),
    ]
    assert len({i["call_id"] for i in items}) == 2
    assert len({i["id"] for i in items}) == 2
    assert repairs[Repair.PARALLEL_WRAPPER] == 1


# -- native streams beyond the field fixtures -----------------------------------------------------


def _field(name: str) -> report.Stream:
    return next(s for s in report.load() if s.file == name)


def test_a_native_messages_stream_asked_for_one_call_keeps_the_first_entry():
    stream = _field("gptoss-parallel-wrapper.messages.sse")
    request = {
        **report.messages_request(stream),
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
    }
    native = CLIENT_PROTOCOLS["messages"].native(
        new_id=_counting("n"), request=request, options=report.options()
    )
    out = b"".join([*native.feed(stream.body), *native.close(complete=True)])
    seen = report.read_messages(out)
    assert [c["name"] for c in seen.calls] == ["weather"]
    assert seen.end == "tool_use"


def test_a_native_responses_stream_asked_for_one_call_keeps_the_first_entry():
    stream = _field("openai-parallel-wrapper.responses.sse")
    request = {**report.responses_request(stream), "parallel_tool_calls": False}
    native = CLIENT_PROTOCOLS["responses"].native(
        new_id=_counting("n"), request=request, options=report.options()
    )
    out = b"".join([*native.feed(stream.body), *native.close(complete=True)])
    seen = report.read_responses(out)
    assert [c["name"] for c in seen.calls] == ["weather"]
    assert seen.end == "response.completed"


@pytest.mark.parametrize(
    "name", ["gptoss-parallel-wrapper.messages.sse", "openai-parallel-wrapper.responses.sse"]
)
def test_a_native_stream_cut_inside_the_wrapper_gives_it_back_as_it_came(name: str):
    stream = _field(name)
    protocol = "messages" if ".messages." in name else "responses"
    body = stream.body[: stream.body.index(b"cityAttractions")]
    request = report.REQUESTS[protocol](stream)
    native = CLIENT_PROTOCOLS[protocol].native(
        new_id=_counting("n"), request=request, options=report.options()
    )
    out = b"".join([*native.feed(body), *native.close(complete=False)])
    assert b"San Francisco" in out  # what was held goes out, as the upstream sent it
    assert b'"name":"weather"' not in out


def test_a_native_responses_wrapper_without_its_arguments_done_is_split_at_its_item_end():
    # llama-server's /v1/responses sends no function_call_arguments.done: the item's
    # output_item.done ends the wrapper's arguments, whole
    stream = _field("openai-parallel-wrapper.responses.sse")
    events = stream.body.split(b"\n\n")
    body = b"\n\n".join(e for e in events if b"function_call_arguments.done" not in e)
    native = CLIENT_PROTOCOLS["responses"].native(
        new_id=_counting("n"), request=report.responses_request(stream), options=report.options()
    )
    out = b"".join([*native.feed(body), *native.close(complete=True)])
    seen = report.read_responses(out)
    assert [c["name"] for c in seen.calls] == ["weather", "cityAttractions"]
    assert seen.end == "response.completed"
    assert native.repairs[Repair.PARALLEL_WRAPPER] == 1


@FORMS
def test_a_wrapper_written_as_markup_becomes_its_calls(coalesce: bool):
    # the same call as the model's markup in content (hermes), recovered through the table
    arguments = {"tool_uses": TWO}
    text = "Sure. <tool_call>" + json.dumps({"name": "parallel", "arguments": arguments})
    text += "</tool_call>"
    body = b"".join(
        [
            _chunk({"role": "assistant", "content": ""}),
            *(_chunk({"content": text[at : at + 5]}) for at in range(0, len(text), 5)),
            _chunk({}, "stop"),
            b"data: [DONE]\n\n",
        ]
    )
    out, normalizer = run(
        body,
        options=UpstreamOptions(coalesce=coalesce, dialects=("hermes",)),
        request=RequestInfo.from_body(chat_request()),
    )
    seen = strict_checker.reconstruct(out).choices[0]
    assert [(c[0], c[2], c[3]) for c in chat_calls(out)] == [
        (0, "weather", {"location": "San Francisco"}),
        (1, "cityAttractions", {"city": "Rome"}),
    ]
    assert "".join(seen.content) == "Sure. "
    assert seen.finish_reason == "tool_calls"
    assert strict_checker.check(out, form="S2" if coalesce else "S1") == []
    assert normalizer.repairs[Repair.PARALLEL_WRAPPER] == 1

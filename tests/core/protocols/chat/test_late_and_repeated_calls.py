"""Issue 16's gaps found by real streams and real clients, through the streaming normalizer:
markup after a structured call, a late name with the whole arguments, a missing role, and the
same call twice in a row (``dedupe_calls``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat.normalize import RequestInfo, StreamNormalizer
from tests.support.normalizer import bytewise, random_cuts, run
from tests.support.strict_checker import check, reconstruct

ENVELOPE = {"id": "chatcmpl-g", "object": "chat.completion.chunk", "created": 1, "model": "m"}
TOOLS = {"tools": [{"type": "function", "function": {"name": "get_weather"}}]}
FORMS = pytest.mark.parametrize("coalesce", [False, True], ids=["S1", "S2"])


def event(delta: Mapping[str, object], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return b"data: " + json.dumps({**ENVELOPE, "choices": [choice]}).encode() + b"\n\n"


def body(*deltas: Mapping[str, object], finish: str = "tool_calls") -> bytes:
    head = event({"role": "assistant", "content": None})
    return head + b"".join(map(event, deltas)) + event({}, finish) + b"data: [DONE]\n\n"


def call(index: int, ident: str, name: str, args: str) -> dict[str, object]:
    function = {"name": name, "arguments": args}
    return {"tool_calls": [{"index": index, "id": ident, "type": "function", "function": function}]}


def args(index: int, text: str) -> dict[str, object]:
    return {"tool_calls": [{"index": index, "function": {"arguments": text}}]}


def normalize(
    data: bytes | list[bytes], request: Any = TOOLS, **options: Any
) -> tuple[bytes, StreamNormalizer]:
    return run(data, options=UpstreamOptions(**options), request=RequestInfo.from_body(request))


def calls(out: bytes) -> list[tuple[int, str, object]]:
    seen = reconstruct(out).choices[0]
    return [(c.index, c.name, json.loads("".join(c.arguments))) for c in seen.calls]


def same_however_cut(data: bytes, **options: Any) -> bytes:
    whole, _ = normalize(data, **options)
    assert normalize(bytewise(data), **options)[0] == whole
    for pieces in random_cuts(data, "gaps"):
        assert normalize(pieces, **options)[0] == whole
    return whole


# -- 1. markup after a structured call -------------------------------------------------------


@FORMS
def test_a_markup_copy_of_a_structured_call_is_dropped_and_a_new_call_recovered(coalesce):
    markup = [
        '<tool_call>\n{"name": "get_weather", "arguments": {"unit": "c",',
        ' "city": "Paris"}}\n</tool_call>',  # the structured call again, keys reordered
        '<tool_call>\n{ "name" :"get_weather",  "arguments":{"city" : "Oslo"} }\n</tool_call>',
    ]
    data = body(
        call(0, "call_a", "get_weather", ""),
        args(0, '{"city": "Paris", "unit": "c"}'),
        *({"content": text} for text in markup),
    )
    out = same_however_cut(data, dialects=("hermes",), coalesce=coalesce)
    assert check(out) == []
    assert calls(out) == [
        (0, "get_weather", {"city": "Paris", "unit": "c"}),
        (1, "get_weather", {"city": "Oslo"}),
    ]
    _, n = normalize(data, dialects=("hermes",), coalesce=coalesce)
    assert n.repairs["call-duplicated"] == 1
    assert json.loads(n.dropped_arguments[0]) == {"unit": "c", "city": "Paris"}
    assert reconstruct(out).choices[0].finish_reason == "tool_calls"


def test_a_markup_call_held_as_a_possible_copy_keeps_later_output_behind_it():
    data = body(
        call(0, "call_a", "get_weather", '{"city": "Paris"}'),
        {"content": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Ro'},
        {"content": 'me"}}\n</tool_call>'},
        {"content": " done"},
    )
    out = same_however_cut(data, dialects=("hermes",))
    seen = reconstruct(out).choices[0]
    assert [(c.index, c.name) for c in seen.calls] == [(0, "get_weather"), (1, "get_weather")]
    assert "".join(seen.calls[1].arguments) == '{"city": "Rome"}'
    assert seen.calls[1].whole is False  # S1: the opening with "", then the arguments
    assert "".join(seen.content) == " done"


# -- 2. a late name with the whole arguments -----------------------------------------------


def test_a_late_name_with_the_whole_arguments_opens_with_empty_arguments():
    opening = {
        "tool_calls": [{"index": 0, "id": "call_x", "function": {"name": "", "arguments": ""}}]
    }
    named = {
        "tool_calls": [
            {"index": 0, "id": "call_x", "function": {"name": "bash", "arguments": '{"a": 1}'}}
        ]
    }
    out = same_however_cut(body(opening, named))
    assert check(out) == []
    [seen] = reconstruct(out).choices[0].calls
    assert seen.whole is False
    assert "".join(seen.arguments) == '{"a": 1}'


def test_a_whole_call_in_one_delta_with_nothing_before_stays_whole():
    data = body(call(0, "call_w", "get_weather", '{"a": 1}'))
    out, n = normalize(data)
    assert out == data
    assert not n.repairs


# -- 3. a missing role -----------------------------------------------------------------------


@FORMS
def test_the_first_delta_of_each_choice_gets_a_role_when_it_has_none(coalesce):
    data = b"".join(map(event, [{"content": "Hi"}, {"content": " there"}])) + event({}, "stop")
    out = same_however_cut(data, coalesce=coalesce)
    first = json.loads(out.split(b"\n\n")[0][6:])["choices"][0]["delta"]
    assert first == {"role": "assistant", "content": "Hi"}
    assert out.count(b'"role"') == 1
    _, n = normalize(data, coalesce=coalesce)
    assert n.repairs["role-missing"] == 1


def test_a_role_is_not_added_where_one_is_or_where_no_tools_were_offered():
    has_role = body({"content": "Hi"}, finish="stop")
    assert normalize(has_role)[0] == has_role
    no_role = event({"content": "Hi"}) + event({}, "stop") + b"data: [DONE]\n\n"
    out, n = normalize(no_role, request={})
    assert out == no_role
    assert not n.repairs


def test_an_empty_first_delta_leaves_the_role_to_the_next():
    data = event({}) + event({"content": "Hi"}) + event({}, "stop")
    out, _ = normalize(data)
    deltas = [
        json.loads(e[6:])["choices"][0]["delta"] for e in out.split(b"\n\n") if e[:7] == b"data: {"
    ]
    assert deltas[:2] == [{}, {"role": "assistant", "content": "Hi"}]


# -- 4. the same call twice in a row ---------------------------------------------------------

TWICE = body(
    call(0, "call_1", "get_weather", ""),
    args(0, '{"city": "Rome"}'),
    call(1, "call_2", "get_weather", ""),
    args(1, '{ "city":"Rome" }'),
    call(2, "call_3", "get_weather", '{"city": "Oslo"}'),
)


def test_the_same_call_twice_in_a_row_is_counted_and_kept_by_default():
    out, n = normalize(TWICE)
    assert out == TWICE
    assert n.repairs["call-duplicated"] == 1


@FORMS
def test_with_dedupe_calls_the_second_is_dropped_and_later_indexes_close_up(coalesce):
    out = same_however_cut(TWICE, dedupe_calls=True, coalesce=coalesce)
    assert check(out) == []
    assert calls(out) == [
        (0, "get_weather", {"city": "Rome"}),
        (1, "get_weather", {"city": "Oslo"}),
    ]
    assert b"call_2" not in out
    _, n = normalize(TWICE, dedupe_calls=True, coalesce=coalesce)
    assert n.repairs["call-duplicated"] == 1
    assert n.dropped_arguments == ['{ "city":"Rome" }']


@FORMS
def test_with_dedupe_calls_a_call_that_differs_goes_out_after_being_held(coalesce):
    data = body(
        call(0, "call_1", "get_weather", '{"city": "Rome"}'),
        call(1, "call_2", "get_weather", '{"city": "Rome", "unit": "c"}'),
        call(2, "call_3", "get_weather", "{"),  # JSON equal to neither: 1 and true differ
        args(2, '"city": "Rome", "unit": "c", "x": 1}'),
        call(3, "call_4", "get_weather", '{"city": "Rome", "unit": "c", "x": true}'),
    )
    out = same_however_cut(data, dedupe_calls=True, coalesce=coalesce)
    assert check(out) == []
    assert [i for i, _, _ in calls(out)] == [0, 1, 2, 3]
    _, n = normalize(data, dedupe_calls=True, coalesce=coalesce)
    assert "call-duplicated" not in n.repairs

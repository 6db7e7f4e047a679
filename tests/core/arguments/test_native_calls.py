"""Issue 25 through the native repairers (a server's own Responses and Messages streams, tools
in their own shapes): the schema check at each call's end, changing no byte, and calls past
the first dropped under ``parallel_tool_calls: false`` / ``disable_parallel_tool_use``."""

from __future__ import annotations

import copy
import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Any

import orjson
import pytest

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.responses.native.request import NativeRequest
from proxy.core.protocols.responses.native.stream import NativeStream
from proxy.core.repairs import Repair
from tests.core.protocols.messages import streams as m_streams
from tests.core.protocols.messages.checker import check as m_check
from tests.core.protocols.messages.native_helpers import every_cut
from tests.core.protocols.messages.native_helpers import repair as m_repair
from tests.core.protocols.responses import variants as v
from tests.core.protocols.responses.checker import check as r_check
from tests.support.normalizer import bytewise, random_cuts
from tests.support.streams import chunks

R_TWO_CALLS = "responses-openai-gpt4o-parallel-two-calls.sse"  # get_weather, get_time
M_THREE_CALLS = "anthropic-haiku35-parallel-three-tools"  # three make_directory calls


def r_tools(**weather: Any) -> list[dict[str, Any]]:
    schema = {"type": "object", "properties": {"location": {"type": "string"}}, **weather}
    return [
        {"type": "function", "name": "get_weather", "parameters": schema},
        {"type": "function", "name": "get_time", "parameters": {"type": "object"}},
    ]


def r_run(
    pieces: Sequence[bytes], request: dict[str, Any], options: UpstreamOptions | None = None
) -> tuple[bytes, Counter[str]]:
    counter = itertools.count(1)
    stream = NativeStream(
        lambda: f"id{next(counter):05d}",
        NativeRequest.from_body(request),
        options=options or UpstreamOptions(),
    )
    out = [b for piece in pieces for b in stream.feed(piece)]
    out += stream.close(complete=True)
    return b"".join(out), stream.repairs


def r_every_cut(body: bytes, request: dict[str, Any], options: UpstreamOptions | None = None):
    whole, repairs = r_run([body], request, options)
    for pieces in [bytewise(body), *random_cuts(body, seed=body[:64].hex())]:
        assert r_run(pieces, request, options) == (whole, repairs)
    return whole, repairs


def mismatches(repairs: Counter[str]) -> dict[str, int]:
    return {k: n for k, n in repairs.items() if k.startswith("args-schema-mismatch")}


# -- Responses ------------------------------------------------------------------------------


def test_responses_calls_that_fit_count_nothing():
    body = (v.FIXTURES / R_TWO_CALLS).read_bytes()
    out, repairs = r_every_cut(body, {"tools": r_tools()})
    assert out == body
    assert not repairs


def test_responses_a_mismatch_is_counted_and_changes_no_byte():
    body = (v.FIXTURES / R_TWO_CALLS).read_bytes()
    request = {"tools": r_tools(required=["location", "unit"])}
    out, repairs = r_every_cut(body, request)
    assert out == body
    assert repairs == {"args-schema-mismatch:required": 1}


def test_responses_a_call_of_no_declared_tool_is_counted():
    body = (v.FIXTURES / R_TWO_CALLS).read_bytes()
    out, repairs = r_every_cut(body, {"tools": r_tools()[:1]})
    assert out == body
    assert repairs == {"args-schema-mismatch:unknown-tool": 1}


def test_responses_only_the_first_call_when_one_was_asked_for():
    body = (v.FIXTURES / R_TWO_CALLS).read_bytes()
    request = {"tools": r_tools(), "parallel_tool_calls": False}
    out, repairs = r_every_cut(body, request)
    checked = r_check(out)
    assert [c["name"] for c in checked.calls] == ["get_weather"]
    assert repairs[Repair.PARALLEL_CALL_DROPPED] == 1
    items = [e["item"] for e in chunks(out) if "item" in e]
    assert {item["name"] for item in items} == {"get_weather"}
    [final] = [e["response"] for e in chunks(out) if e["type"] == "response.completed"]
    assert [item["name"] for item in final["output"]] == ["get_weather"]
    # the opt-out keeps both, as they came
    kept, repairs = r_every_cut(body, request, UpstreamOptions(enforce_parallel_tool_calls=False))
    assert kept == body
    assert not repairs


# -- Messages -------------------------------------------------------------------------------


def m_request(schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "go"}],
        "tools": [{"name": "make_directory", "input_schema": schema}],
        **extra,
    }


def test_messages_a_mismatch_is_counted_at_each_blocks_end_and_changes_no_byte():
    data = m_streams.recorded(M_THREE_CALLS)
    schema = {"type": "object", "properties": {"parent": {"type": "integer"}}}
    for pieces in every_cut(data, M_THREE_CALLS):
        out, repairs = m_repair(pieces, m_request(schema))
        assert out == data
        assert mismatches(repairs) == {"args-schema-mismatch:type": 3}


def test_messages_calls_that_fit_count_nothing():
    data = m_streams.recorded(M_THREE_CALLS)
    schema = {
        "type": "object",
        "properties": {"parent": {"type": "string"}, "name": {"type": "string"}},
        "additionalProperties": False,
    }
    out, repairs = m_repair(data, m_request(schema))
    assert out == data
    assert not repairs


@pytest.mark.parametrize("enforce", [True, False])
def test_messages_only_the_first_call_under_disable_parallel_tool_use(enforce: bool):
    data = m_streams.recorded(M_THREE_CALLS)
    choice = {"type": "auto", "disable_parallel_tool_use": True}
    request = m_request({"type": "object"}, tool_choice=choice)
    for pieces in every_cut(data, M_THREE_CALLS):
        out, repairs = m_repair(pieces, request, enforce_parallel_tool_calls=enforce)
        if not enforce:
            assert out == data
            continue
        calls = m_check(out).tool_uses
        assert len(calls) == 1
        first = m_check(data).tool_uses[0]
        assert calls[0]["id"] == first["id"]
        assert calls[0]["input"] == first["input"]
        assert repairs[Repair.PARALLEL_CALL_DROPPED] == 2


def test_messages_no_tools_no_rules():
    data = m_streams.recorded(M_THREE_CALLS)
    request = copy.deepcopy(m_request({}))
    del request["tools"]
    out, repairs = m_repair(data, request)
    assert out == data
    assert not repairs


# -- Messages: heal and coerce (each call's input held, sent whole at its end) -------------


def test_messages_valid_input_comes_out_byte_identical_with_healing_on():
    data = m_streams.recorded(M_THREE_CALLS)
    schema = {"type": "object", "properties": {"parent": {"type": "string"}}}
    for pieces in every_cut(data, M_THREE_CALLS):
        out, repairs = m_repair(pieces, m_request(schema), heal_arguments=True)
        assert out == data
        assert not repairs


def test_messages_input_is_coerced_and_sent_in_one_piece():
    data = m_streams.recorded(M_THREE_CALLS)
    schema = {
        "type": "object",
        "properties": {"parent": {"type": "array", "items": {"type": "string"}}},
    }
    expected = None
    for pieces in every_cut(data, M_THREE_CALLS):
        out, repairs = m_repair(pieces, m_request(schema), coerce_arguments=True)
        assert expected is None or out == expected
        expected = out
        assert repairs == {Repair.ARGS_COERCED: 3}
        calls = m_check(out).tool_uses
        assert [c["input"]["parent"] for c in calls] == [["/tmp"]] * 3
        inputs = [
            e
            for e in chunks(out)
            if e.get("type") == "content_block_delta" and e["delta"]["type"] == "input_json_delta"
        ]
        assert len(inputs) == 3  # each call's fixed input in one piece


def test_messages_almost_json_is_healed_but_never_a_cut_input():
    events = m_streams.parsed(M_THREE_CALLS)
    for event in events:
        delta = event.get("delta")
        if isinstance(delta, dict) and delta.get("type") == "input_json_delta":
            delta["partial_json"] = delta["partial_json"].replace('"', "'")
    broken = m_streams.sse(events)
    schema = {"type": "object", "properties": {"parent": {"type": "string"}}}
    out, repairs = m_repair(broken, m_request(schema), heal_arguments=True)
    assert repairs == {Repair.ARGS_HEALED: 3}
    assert [c["input"]["name"] for c in m_check(out).tool_uses] == [
        "testdir1",
        "testdir2",
        "testdir3",
    ]
    cut = broken[: broken.index(b"testdir1")]
    out, repairs = m_repair(cut, m_request(schema), heal_arguments=True, complete=False)
    assert Repair.ARGS_HEALED not in repairs
    assert out == cut


M_NO_ARGS = "anthropic-sonnet45-tool-no-args"  # pings around a tool block of no input
HEAL_COERCE = {"heal_arguments": True, "coerce_arguments": True}
PING = {"type": "ping"}
ERROR = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def _no_input_delta(events: m_streams.Events) -> m_streams.Events:
    return [e for e in events if e.get("delta", {}).get("type") != "input_json_delta"]


@pytest.mark.parametrize(
    "shape", [lambda e: e, _no_input_delta], ids=["empty-partial-json", "no-delta"]
)
def test_messages_a_call_of_no_input_is_neither_changed_nor_counted_with_healing_on(shape):
    # a held call of no text was counted empty-arguments, and one with no delta at all got a
    # made-up input_json_delta "{}": the client builds that {} from the start's input itself
    data = m_streams.sse(shape(m_streams.parsed(M_NO_ARGS)))
    request = m_request({"type": "object"})
    request["tools"][0]["name"] = "updateIssueList"
    for pieces in every_cut(data, M_NO_ARGS):
        out, repairs = m_repair(pieces, request, **HEAL_COERCE)
        assert out == data
        assert not repairs
    assert [c["input"] for c in m_check(data).tool_uses] == [{}]


def test_messages_a_ping_keeps_its_place_among_a_held_calls_events():
    # the ping came between the tool block's start and its input; a held call's start went
    # out after it (heal_arguments holds a call from its start)
    events = m_streams.parsed(M_THREE_CALLS)
    first = m_streams.tool_indexes(events)[0]
    start = next(
        i for i, e in enumerate(events) if e.get("content_block", {}).get("type") == "tool_use"
    )
    events.insert(start + 1, PING)
    events.insert(start + 3, PING)  # and one after its first fragment
    data = m_streams.sse(events)
    schema = {"type": "object", "properties": {"parent": {"type": "string"}}}
    for pieces in every_cut(data, M_THREE_CALLS + "-ping"):
        assert m_repair(pieces, m_request(schema), **HEAL_COERCE) == (data, Counter())
    # healed, the input is the proxy's, in one piece: the pings stay behind the block's start
    for event in events:
        delta = event.get("delta")
        if isinstance(delta, dict) and delta.get("type") == "input_json_delta":
            delta["partial_json"] = delta["partial_json"].replace('"', "'")
    out, repairs = m_repair(m_streams.sse(events), m_request(schema), **HEAL_COERCE)
    assert repairs == {Repair.ARGS_HEALED: 3}
    kinds = [(e["type"], e.get("index")) for e in chunks(out)]
    at = kinds.index(("content_block_start", first))
    assert kinds[at : at + 4] == [
        ("content_block_start", first),
        ("ping", None),
        ("ping", None),
        ("content_block_delta", first),
    ]


def test_messages_an_error_inside_a_held_call_comes_after_the_call_as_it_came():
    # the error went out ahead of the held call's start and fragments, which followed it
    events = m_streams.parsed(M_THREE_CALLS)
    first = m_streams.tool_indexes(events)[0]
    fragments = [
        i
        for i, e in enumerate(events)
        if e["type"] == "content_block_delta" and e["index"] == first
    ]
    data = m_streams.sse([*events[: fragments[2]], ERROR])
    schema = {"type": "object", "properties": {"parent": {"type": "string"}}}
    for options in ({}, HEAL_COERCE, {"dedupe": True, **HEAL_COERCE}):
        for pieces in every_cut(data, M_THREE_CALLS + "-error"):
            assert m_repair(pieces, m_request(schema), **options) == (data, Counter())


# -- the whole native answers ------------------------------------------------------------------


def _whole_response() -> dict[str, Any]:
    body = (v.FIXTURES / R_TWO_CALLS).read_bytes()
    [final] = [e["response"] for e in chunks(body) if e.get("type") == "response.completed"]
    return dict(final)


def test_a_whole_response_is_checked_unchanged_and_keeps_one_call_when_asked():
    from proxy.core.protocols.responses.native.whole import repair_completion

    body = orjson.dumps(_whole_response())
    request = NativeRequest.from_body({"tools": r_tools(required=["location", "unit"])})
    fixed, repairs = repair_completion(body, request, options=UpstreamOptions())
    assert fixed is body
    assert repairs == {"args-schema-mismatch:required": 1}
    request = NativeRequest.from_body({"tools": r_tools(), "parallel_tool_calls": False})
    fixed, repairs = repair_completion(body, request, options=UpstreamOptions())
    output = orjson.loads(fixed)["output"]
    assert [i["name"] for i in output if i["type"] == "function_call"] == ["get_weather"]
    assert repairs == {Repair.PARALLEL_CALL_DROPPED: 1}


def test_a_whole_message_is_checked_coerced_and_keeps_one_call_when_asked():
    from proxy.core.protocols.messages.native.whole import repair_message

    blocks = [
        {
            "type": "tool_use",
            "id": f"toolu_{i}",
            "name": "make_directory",
            "input": {"parent": "/tmp"},
        }
        for i in range(2)
    ]
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": blocks,
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    body = orjson.dumps(message)
    array = {"type": "object", "properties": {"parent": {"type": "array"}}}

    def repair(request: dict[str, Any], **options: Any) -> tuple[bytes, Counter[str]]:
        return repair_message(body, request, new_id=lambda: "x", options=UpstreamOptions(**options))

    fixed, repairs = repair(m_request(array))
    assert fixed is body
    assert repairs == {"args-schema-mismatch:type": 2}
    fixed, repairs = repair(m_request(array), coerce_arguments=True)
    assert [b["input"] for b in orjson.loads(fixed)["content"]] == [{"parent": ["/tmp"]}] * 2
    assert repairs == {Repair.ARGS_COERCED: 2}
    one = m_request(
        {"type": "object"}, tool_choice={"type": "auto", "disable_parallel_tool_use": True}
    )
    fixed, repairs = repair(one)
    assert [b["id"] for b in orjson.loads(fixed)["content"]] == ["toolu_0"]
    assert repairs == {Repair.PARALLEL_CALL_DROPPED: 1}

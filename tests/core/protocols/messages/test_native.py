"""Native mode: a server's own /v1/messages stream, repaired in place.

Each in-scope quirk, applied to the recorded streams, must come out canonical (the strict
checker) with the calls the canonical stream had, recording the repair kind, however the bytes
are cut. That recorded canonical streams come out byte-identical, and cut short as they came,
is the native contract's (tests/core/protocols/test_native_contract.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.core.repairs import Repair
from tests.core.protocols.messages import streams
from tests.core.protocols.messages.checker import Result, check
from tests.core.protocols.messages.native_helpers import every_cut, repair
from tests.support.normalizer import cut

RECORDED = sorted(
    p.stem.removeprefix("messages-") for p in streams.PROTOCOL_FIXTURES.glob("messages-*.sse")
)
WITH_TOOLS = [name for name in RECORDED if streams.tool_indexes(streams.parsed(name))]
WITH_ARGS = [name for name in WITH_TOOLS if check(streams.recorded(name)).tool_uses[-1]["input"]]


def calls(result: Result) -> list[tuple[str, str, object]]:
    return [(b["id"], b["name"], b["input"]) for b in result.tool_uses]


QUIRKS: list[tuple[Callable[[streams.Events], streams.Events], set[str]]] = [
    (streams.llamacpp_b9821, {Repair.TOOL_USE_INPUT_MISSING}),
    (streams.input_missing, {Repair.TOOL_USE_INPUT_MISSING}),
    (
        streams.empty_fields_dropped,
        {Repair.TOOL_USE_INPUT_MISSING, Repair.EMPTY_FIELD_DROPPED, Repair.STOP_REASON_EMPTY},
    ),
    (streams.message_start_twice, {Repair.MESSAGE_START_REPEATED}),
    (streams.stop_reason("end_turn"), {Repair.STOP_REASON_NOT_TOOL_USE}),
    (streams.stop_reason(""), {Repair.STOP_REASON_NOT_TOOL_USE}),
    (streams.without("message_stop"), {Repair.MESSAGE_STOP_MISSING}),
    (streams.without("content_block_stop"), {Repair.BLOCK_STOP_MISSING}),
]


@pytest.mark.parametrize("name", WITH_TOOLS)
@pytest.mark.parametrize(("quirk", "kinds"), QUIRKS, ids=[q.__name__ for q, _ in QUIRKS])
def test_quirk_comes_out_canonical_with_the_same_calls(name, quirk, kinds):
    canonical = check(streams.recorded(name))
    broken = streams.sse(quirk(streams.parsed(name)))
    assert broken != streams.recorded(name)
    expected, _ = repair(broken)
    if quirk is streams.llamacpp_b9821 and len(canonical.blocks) > 1:
        kinds = kinds | {Repair.BLOCKS_OVERLAP}
    for pieces in every_cut(broken, name + quirk.__name__):
        out, repairs = repair(pieces)
        assert out == expected
        assert kinds <= set(repairs), repairs
    result = check(expected)
    assert calls(result) == calls(canonical)
    assert result.text == canonical.text
    assert result.message["stop_reason"] == "tool_use"


@pytest.mark.parametrize("name", WITH_TOOLS)
def test_llamacpp_blocks_go_out_one_after_another_without_waiting_for_the_end(name):
    """Each tool block is stopped as soon as its input is whole, so the next one streams on
    (not held until llama.cpp's stops arrive together at the end)."""
    broken = streams.sse(streams.llamacpp_b9821(streams.parsed(name)))
    stream_events = [
        json.loads(line[6:]) for line in broken.decode().splitlines() if line.startswith("data: ")
    ]
    last_delta = max(i for i, e in enumerate(stream_events) if e["type"] == "content_block_delta")
    head = streams.sse(stream_events[: last_delta + 1])
    out, _ = repair(head, complete=False)
    partial = check(out, finished=False)
    assert len(partial.blocks) == len(check(streams.recorded(name)).blocks)


@pytest.mark.parametrize("name", WITH_ARGS)
def test_cut_inside_a_tool_input_is_stopped_and_ends_at_max_tokens(name):
    broken = streams.sse(streams.cut_in_tool_input(streams.parsed(name)))
    out, repairs = repair(broken)
    result = check(out)
    assert Repair.BLOCK_STOP_MISSING in repairs
    assert result.message["stop_reason"] == "max_tokens"
    assert len(result.tool_uses) == len(check(streams.recorded(name)).tool_uses)


@pytest.mark.parametrize("name", WITH_ARGS)
def test_end_turn_with_an_unparsable_tool_input_becomes_max_tokens(name):
    events = streams.cut_in_tool_input(streams.parsed(name))
    events = [e for e in events if e["type"] != "message_delta"]
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn", "stop_sequence": None},
        "usage": {"output_tokens": 9},
    }
    tool_block_stop = {
        "type": "content_block_stop",
        "index": streams.tool_indexes(events)[-1],
    }
    events = [*events[:-1], tool_block_stop, delta, events[-1]]
    out, repairs = repair(streams.sse(events))
    assert Repair.TOOL_INPUT_UNPARSABLE in repairs
    assert check(out).message["stop_reason"] == "max_tokens"


@pytest.mark.parametrize("name", WITH_ARGS)
def test_spliced_second_generation_is_numbered_after_the_first(name):
    broken = streams.sse(streams.spliced_generation(streams.parsed(name)))
    for pieces in every_cut(broken, name):
        out, repairs = repair(pieces)
        assert Repair.MESSAGE_START_REPEATED in repairs
        assert Repair.GENERATION_SPLICED in repairs
        canonical = check(streams.recorded(name))
        # the abandoned call is still there (cut short: its input is not checked), then the
        # whole second generation
        result = check(out, abandoned=frozenset({canonical.tool_uses[0]["id"]}))
        assert calls(result)[-len(canonical.tool_uses) :] == calls(canonical)
        # issue 24 item 9: the message ends as the later generation says (it said max_tokens
        # before, for the earlier generation's cut input)
        assert result.message["stop_reason"] == canonical.message["stop_reason"]


def test_events_without_event_lines_get_them():
    events = streams.parsed("anthropic-haiku35-text-then-tool")
    out, repairs = repair(streams.sse(events, event_lines=False))
    assert repairs[Repair.EVENT_LINE_MISSING] == len(events)
    assert calls(check(out)) == calls(check(streams.recorded("anthropic-haiku35-text-then-tool")))


def test_hermes_markup_in_text_delta_becomes_a_tool_use_block():
    broken = streams.sse(streams.hermes_markup(streams.parsed("anthropic-sonnet45-text-only")))
    expected, _ = repair(broken)
    for pieces in every_cut(broken, "hermes"):
        out, repairs = repair(pieces)
        assert out == expected
        assert repairs["markup-in-content:hermes"] == 1
        assert repairs[Repair.STOP_REASON_NOT_TOOL_USE] == 1
    result = check(expected)
    assert [b["type"] for b in result.blocks] == ["text", "tool_use", "text"]
    assert result.tool_uses[0]["name"] == "get_weather"
    assert result.tool_uses[0]["input"] == {"location": 'Paris, "FR"'}
    assert result.text == "Let me check.  Done."
    assert result.message["stop_reason"] == "tool_use"


def test_markup_stays_text_when_the_request_offered_no_tools():
    broken = streams.sse(streams.hermes_markup(streams.parsed("anthropic-sonnet45-text-only")))
    out, repairs = repair(broken, {"model": "m", "messages": []})
    assert out == broken
    assert not repairs


def test_qwen3_coder_markup_split_across_deltas_becomes_a_tool_use_block():
    markup = "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n</function>\n</tool_call>"
    events = streams.hermes_markup(streams.parsed("anthropic-sonnet45-text-only"))
    deltas = [e for e in events if e["type"] == "content_block_delta"]
    pieces = ["Let me check. ", markup[:5], markup[5:33], markup[33:], " Done."]
    for delta, piece in zip(deltas, pieces, strict=True):
        delta["delta"]["text"] = piece
    broken = streams.sse(events)
    expected, _ = repair(broken)
    for pieces_cut in every_cut(broken, "qwen3"):
        out, repairs = repair(pieces_cut)
        assert out == expected
        assert repairs["markup-in-content:qwen3_coder"] == 1
    result = check(expected)
    assert [(b["name"], b["input"]) for b in result.tool_uses] == [
        ("get_weather", {"location": "Paris"})
    ]
    assert result.message["stop_reason"] == "tool_use"


COMPOSABLE = [
    streams.input_missing,
    streams.empty_fields_dropped,
    streams.message_start_twice,
    streams.stop_reason(""),
    streams.without("message_stop"),
    streams.llamacpp_b9821,
]


@settings(max_examples=60, deadline=None)
@given(
    name=st.sampled_from(WITH_TOOLS),
    quirks=st.lists(st.sampled_from(COMPOSABLE), max_size=4, unique=True),
    cuts=st.lists(st.integers(min_value=0), max_size=6),
)
def test_quirks_combined_come_out_canonical_however_cut(name, quirks, cuts):
    events = streams.parsed(name)
    for quirk in quirks:
        events = quirk(events)
    broken = streams.sse(events)
    whole, _ = repair(broken)
    assert repair(cut(broken, cuts))[0] == whole
    result = check(whole)
    assert calls(result) == calls(check(streams.recorded(name)))


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(RECORDED),
    edits=st.lists(st.tuples(st.integers(min_value=0), st.binary(max_size=3)), max_size=8),
    cuts=st.lists(st.integers(min_value=0), max_size=4),
)
def test_mutated_streams_never_raise_and_cut_the_same(name, edits, cuts):
    data = bytearray(streams.recorded(name))
    for at, junk in edits:
        at %= len(data)
        data[at : at + len(junk)] = junk
    whole, _ = repair(bytes(data))
    assert repair(cut(bytes(data), cuts))[0] == whole

"""Native mode: a server's own Responses stream repaired in place.

A broken variant of each in-scope quirk
(docs/quirks.md R1-R7 and R10, and llama.cpp's own endpoint) comes out canonical, passing the
strict checker, with the calls and text of the canonical stream, and the same bytes however the
upstream's body is cut. R8 and R9 pass through unchanged and are counted. That canonical
recordings come out byte for byte identical is the native contract's
(tests/core/protocols/test_native_contract.py).
"""

from __future__ import annotations

import copy
import itertools
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from proxy.core.events import (
    ArgumentsDelta,
    CallClosed,
    CallOpened,
    Ended,
    Finished,
    FinishReason,
    ReasoningDelta,
    Started,
    TextDelta,
    Usage,
)
from proxy.core.protocols.responses.native.request import NativeRequest
from proxy.core.protocols.responses.native.stream import NativeStream
from proxy.core.repairs import Repair
from tests.core.protocols.responses import variants as v
from tests.core.protocols.responses.checker import check
from tests.support.native_responses import NATIVE, WEATHER_TOOLS, summary
from tests.support.normalizer import bytewise, random_cuts

RECORDED = [p.name for p in sorted(v.FIXTURES.glob("responses-*.sse"))]
NO_TOOLS: dict[str, Any] = {"model": "m"}


def run(
    pieces: Sequence[bytes], request: dict[str, Any], *, complete: bool = True
) -> tuple[bytes, Counter[str]]:
    counter = itertools.count(1)
    stream = NativeStream(
        lambda: f"n{next(counter):04d}", NativeRequest.from_body(request), options=NATIVE
    )
    out = [b for piece in pieces for b in stream.feed(piece)]
    out += stream.close(complete=complete)
    return b"".join(out), stream.repairs


def every_cutting(
    body: bytes, request: dict[str, Any], *, complete: bool = True
) -> tuple[bytes, Counter[str]]:
    """The output, the same whole, a byte at a time and at random cuts."""
    whole, repairs = run([body], request, complete=complete)
    for pieces in [bytewise(body), *random_cuts(body, seed=body[:64].hex())]:
        assert run(pieces, request, complete=complete)[0] == whole
    return whole, repairs


START = Started(id="chatcmpl-x", model="m", created=1)


def _call(index: int, ident: str, name: str, *args: str) -> list[Any]:
    return [
        CallOpened(index, ident, name),
        *(ArgumentsDelta(index, a) for a in args),
        CallClosed(index),
    ]


TEXT_THEN_TWO_CALLS = v.encoded(
    [
        START,
        TextDelta("Let me "),
        TextDelta("check."),
        *_call(0, "call_w", "get_weather", '{"location"', ': "Paris"}'),
        *_call(1, "call_t", "get_time", '{"tz": ', '"CET"}'),
        Finished(FinishReason.TOOL_CALLS),
        Usage(3, 4),
        Ended(complete=True),
    ]
)
PARALLEL = v.recorded("responses-openai-gpt4o-parallel-two-calls.sse")
SINGLE = v.recorded("responses-azure-gpt51-single-call.sse")
TEXT = v.recorded("responses-openai-gpt52-text-only.sse")

CASES = {
    "q1-args-only-in-done": (PARALLEL, v.args_only_in_done, {Repair.ARGS_ONLY_IN_DONE}),
    "q2-rotating-ids": (
        SINGLE,
        v.rotating_ids,
        {Repair.ITEM_ID_ROTATING, Repair.RESPONSE_ID_ROTATING},
    ),
    "q3-no-item-done-for-calls": (
        PARALLEL,
        v.no_item_done_for_calls,
        {Repair.ITEM_DONE_MISSING, Repair.OUTPUT_INCOMPLETE},
    ),
    "q5-content-index-per-delta": (
        TEXT,
        v.content_index_per_delta,
        {Repair.CONTENT_INDEX_WRONG, Repair.ITEM_ID_MISSING},
    ),
    "q6-empty-call-id-and-name": (PARALLEL, v.empty_call_id_and_name, {Repair.NAME_MISSING}),
    "q6-empty-name-in-done": (PARALLEL, v.empty_name_in_done, {Repair.NAME_MISSING}),
    "q7-bare-completed": (
        SINGLE,
        v.bare_completed,
        {Repair.OUTPUT_INCOMPLETE, Repair.USAGE_MISSING, Repair.RESPONSE_FIELDS_MISSING},
    ),
    "q7-deltas-without-added": (TEXT, v.deltas_without_added, {Repair.ITEM_ADDED_MISSING}),
    "llamacpp-parallel": (
        PARALLEL,
        v.llamacpp,
        {
            Repair.SEQUENCE_NUMBER_MISSING,
            Repair.OUTPUT_INDEX_MISSING,
            Repair.ARGS_DONE_MISSING,
            Repair.RESPONSE_FIELDS_MISSING,
        },
    ),
    "llamacpp-text": (
        TEXT,
        v.llamacpp,
        {Repair.TEXT_FIELDS_MISSING, Repair.SEQUENCE_NUMBER_MISSING},
    ),
    "llamacpp-text-then-calls": (
        TEXT_THEN_TWO_CALLS,
        v.llamacpp,
        {Repair.ITEMS_INTERLEAVED, Repair.ARGS_DONE_MISSING},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_broken_variant_comes_out_canonical(case: str):
    base, variant, kinds = CASES[case]
    body = v.sse(variant(base))
    out, repairs = every_cutting(body, WEATHER_TOOLS)
    assert out != body
    assert summary(check(out)) == summary(check(v.sse(base)))
    assert kinds <= set(repairs), repairs


def test_a_stream_without_event_lines_gets_them():
    body = v.sse(TEXT, event_lines=False)
    out, repairs = every_cutting(body, NO_TOOLS)
    assert out == v.sse(TEXT)
    assert set(repairs) == {Repair.EVENT_LINE_MISSING}


def test_llamacpp_cut_by_the_token_limit_is_incomplete():
    body = v.sse(v.cut_reported_as_completed(v.llamacpp(TEXT_THEN_TWO_CALLS)))
    out, repairs = every_cutting(body, WEATHER_TOOLS)
    checked = check(out)
    assert checked.events[-1]["type"] == "response.incomplete"
    assert checked.response is not None
    assert checked.response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [c["status"] for c in checked.calls] == ["completed", "incomplete"]
    assert Repair.CUT_AS_COMPLETED in repairs


HERMES = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>'
QWEN3_CODER = "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n</function>\n</tool_call>"


@pytest.mark.parametrize("markup", [HERMES, QWEN3_CODER], ids=["hermes", "qwen3_coder"])
@pytest.mark.parametrize("before", ["", "Let me check. "], ids=["markup-only", "text-first"])
def test_markup_in_text_deltas_becomes_a_function_call(markup: str, before: str):
    text = before + markup
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    base = v.encoded(
        [
            START,
            *(TextDelta(p) for p in pieces),
            Finished(FinishReason.STOP),
            Usage(1, 2),
            Ended(complete=True),
        ]
    )
    out, repairs = every_cutting(v.sse(base), WEATHER_TOOLS)
    checked = check(out)
    assert [i["type"] for i in checked.items] == (["message"] if before else []) + ["function_call"]
    assert checked.text == before
    call = checked.calls[0]
    assert (call["name"], json.loads(call["arguments"])) == ("get_weather", {"location": "Paris"})
    assert any(kind.startswith(Repair.MARKUP_IN_CONTENT) for kind in repairs)
    # every upstream event was numbered: the events put in for the call are not a missing number
    assert Repair.SEQUENCE_NUMBER_MISSING not in repairs


def test_markup_is_left_alone_without_tools():
    base = v.encoded([START, TextDelta(HERMES), Finished(FinishReason.STOP), Ended(complete=True)])
    body = v.sse(base)
    assert run([body], NO_TOOLS)[0] == body


def test_q10_a_nameless_call_interleaved_with_reasoning():
    base = v.encoded(
        [
            START,
            ReasoningDelta("hmm"),
            *_call(0, "call_w", "get_weather", '{"location": "Paris"}'),
            Finished(FinishReason.TOOL_CALLS),
            Ended(complete=True),
        ]
    )
    reasoning = [
        p
        for p in base
        if "reasoning" in p["type"] or (p.get("item") or {}).get("type") == "reasoning"
    ]
    call = [
        p
        for p in base
        if p not in reasoning
        and p["type"] not in ("response.created", "response.in_progress", "response.completed")
    ]
    call[0]["item"]["name"] = ""
    # the call opens while the reasoning streams, and their events alternate
    mixed = [
        *base[:2],
        reasoning[0],
        call[0],
        *[e for pair in itertools.zip_longest(reasoning[1:], call[1:]) for e in pair if e],
        base[-1],
    ]
    body = v.sse(v.renumber(mixed))
    out, repairs = every_cutting(body, WEATHER_TOOLS)
    checked = check(out)
    assert [i["type"] for i in checked.items] == ["reasoning", "function_call"]
    assert checked.calls[0]["name"] == "get_weather"
    assert Repair.NAME_MISSING in repairs


def test_quirk_8_passes_through_counted():
    base = v.recorded("responses-openai-gpt51codexmax-reasoning-summary-then-call.sse")
    body = v.sse(v.nonstandard_names(base))
    # the recording calls "calculator": declared, so that its call fits (issue 25's check)
    calculator = {"type": "function", "name": "calculator", "parameters": {"type": "object"}}
    request = {**WEATHER_TOOLS, "tools": [*WEATHER_TOOLS["tools"], calculator]}
    out, repairs = every_cutting(body, request)
    assert out == body
    assert set(repairs) == {Repair.NONSTANDARD_EVENT}


def test_quirk_9_a_call_named_parallel_without_the_wrappers_shape_passes_through():
    # Issue 24 item 6 made the wrapper a repair (split into its calls, test_parallel_wrapper
    # under tests/core/calls/); a call named "parallel" whose arguments hold no ``tool_uses``
    # (here the recording's calculator arguments) is held until they end and then goes out
    # as it came: not counted as a wrapper
    base = v.recorded("responses-openai-gpt51codexmax-reasoning-summary-then-call.sse")
    body = v.sse(v.parallel_wrapper(base))
    calculator = {"type": "function", "name": "calculator", "parameters": {"type": "object"}}
    request = {**WEATHER_TOOLS, "tools": [*WEATHER_TOOLS["tools"], calculator]}
    out, repairs = every_cutting(body, request)
    assert out == body
    # the call names a function no tool declares: issue 25's check counts that
    assert set(repairs) == {"args-schema-mismatch:unknown-tool"}


def test_a_cut_stream_gets_no_made_up_end():
    body = v.sse(v.llamacpp(TEXT_THEN_TWO_CALLS))
    cut = body[: body.index(b"get_time") + 40]
    out, _ = every_cutting(cut, WEATHER_TOOLS, complete=False)
    assert b"response.completed" not in out
    assert b"response.incomplete" not in out
    # every complete event that came is in the output (what was held went out at the end)
    assert out.count(b"\n\n") >= cut.count(b"\n\n")


def test_a_second_created_and_events_after_the_terminal_event_are_dropped_counted():
    # issue 26 item 12: both went out, and a client saw a second response.incomplete
    base = v.recorded("responses-openai-gpt52-text-only.sse")
    created, terminal = base[0], base[-1]
    incomplete = {**terminal, "type": "response.incomplete"}
    late_text = next(p for p in base if p["type"] == "response.output_text.delta")
    broken = copy.deepcopy([*base[:2], created, *base[2:], incomplete, late_text])
    body = v.sse(v.renumber(broken))
    out, repairs = every_cutting(body, NO_TOOLS)
    checked = check(out)  # strict: one created first, nothing after the terminal
    assert checked.events[-1]["type"] == "response.completed"
    assert summary(checked) == summary(check(v.sse(base)))
    assert repairs[Repair.CREATED_REPEATED] == 1
    assert repairs[Repair.EVENT_AFTER_TERMINAL] == 2

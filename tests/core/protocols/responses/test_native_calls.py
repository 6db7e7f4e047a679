"""Native Responses function calls through the shared call table (native/calls.py): which
call input each event becomes, and what the table's answers mean for a stream: a call held
for its name goes out with its own events when the name comes (or, cut, as it came); under
``dedupe_calls`` a repeat is dropped however late its name came; empty arguments are the
empty object when calls are compared."""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from proxy.core.events import (
    ArgumentsDelta,
    CallClosed,
    CallOpened,
    Ended,
    Finished,
    FinishReason,
    Started,
    StreamEvent,
    TextDelta,
    Usage,
)
from proxy.core.protocols.responses.native.model import NativeCall, WireEvent
from proxy.core.protocols.responses.native.request import NativeRequest
from proxy.core.protocols.responses.native.stream import NativeStream
from proxy.core.repairs import Repair
from tests.core.protocols.responses import variants as v
from tests.core.protocols.responses.checker import check
from tests.support.native_responses import NATIVE, WEATHER_TOOLS, every_cutting

START = Started(id="chatcmpl-x", model="m", created=1)
PARIS = ('{"location"', ': "Paris"}')
HERMES = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>'


def record(
    body: bytes, *, dedupe: bool = False, hot: bool = True
) -> tuple[list[tuple[str, str, str]], bytes]:
    """The stream's output, and each call input its calls took: its name, its text, the
    state after."""
    counter = itertools.count(1)
    native = NativeStream(
        lambda: f"n{next(counter):04d}",
        NativeRequest.from_body(WEATHER_TOOLS),
        options=replace(NATIVE, dedupe_calls=dedupe),
    )
    inputs: list[tuple[str, str, str]] = []
    calls = native.calls
    take = calls.call_input

    def call_input(call: Any, event: Any, text: str = "", ev: WireEvent | None = None) -> None:
        take(call, event, text, ev)
        inputs.append((event.name, text, call.state.name))

    calls.call_input = call_input  # type: ignore[method-assign]
    if not hot:  # the table's answer turned around: no state streams its arguments
        calls.calls.streams = ()
    out = b"".join(native.feed(body) + native.close(complete=True))
    return inputs, out


def calls(*specs: tuple[str, str, tuple[str, ...]], text: str = "") -> v.Payloads:
    events: list[Any] = [START, *([TextDelta(text)] if text else [])]
    for index, (ident, name, args) in enumerate(specs):
        events += [
            CallOpened(index, ident, name),
            *(ArgumentsDelta(index, a) for a in args),
            CallClosed(index),
        ]
    events += [Finished(FinishReason.TOOL_CALLS), Usage(3, 4), Ended(complete=True)]
    return v.encoded(events)


def test_an_open_calls_events_are_naming_and_end_its_deltas_the_hot_path():
    body = v.sse(calls(("call_w", "get_weather", PARIS)))
    inputs, out = record(body)
    # the deltas of an OPEN call go out as they came: the table's answer, kept on the call
    assert inputs == [("NAMED_EMPTY", "", "OPEN"), ("COMPLETE", "", "OPEN"), ("END", "", "OPEN")]
    assert out == body


def test_the_hot_paths_ask_the_table():
    markup: list[StreamEvent] = [START, TextDelta("Hi. " + HERMES)]
    markup += [Finished(FinishReason.STOP), Ended(True)]
    for body in (v.sse(calls(("call_w", "get_weather", PARIS))), v.sse(v.encoded(markup))):
        hot_inputs, hot = record(body)
        slow_inputs, slow = record(body, hot=False)
        assert slow == hot
        args = [text for event, text, _ in slow_inputs if event == "ARGS"]
        assert "".join(args) == '{"location": "Paris"}'  # every fragment took the slow path
        assert not [event for event, _, _ in hot_inputs if event == "ARGS"]


def test_a_call_whole_in_its_added_is_named_whole():
    def whole(payloads: v.Payloads) -> v.Payloads:
        for payload in payloads:
            if payload["type"] != "response.output_item.added":
                continue
            if (item := payload["item"])["type"] == "function_call":
                item["arguments"] = '{"location": "Paris"}'
        return [p for p in payloads if p["type"] != "response.function_call_arguments.delta"]

    inputs, out = record(v.sse(v.renumber(whole(calls(("call_w", "get_weather", PARIS))))))
    assert inputs[0] == ("NAMED_WHOLE", '{"location": "Paris"}', "OPEN")
    assert [c["arguments"] for c in check(out).calls] == ['{"location": "Paris"}']


def test_a_nameless_call_is_args_until_its_done_names_it():
    body = v.sse(v.empty_call_id_and_name(calls(("call_w", "get_weather", PARIS))))
    inputs, out = record(body)
    assert inputs == [
        ("ARGS", "", "NAMELESS"),  # the added
        ("ARGS", '{"location"', "NAMELESS"),
        ("ARGS", ': "Paris"}', "NAMELESS"),
        ("COMPLETE", "", "NAMELESS"),
        # the name of its output_item.done, whole arguments held: the opening, then the text
        ("NAMED_PARTIAL", "", "OPEN"),
        ("END", "", "OPEN"),
    ]
    checked = check(out)
    assert [(c["name"], c["call_id"]) for c in checked.calls] == [("get_weather", "call_w")]


def test_arguments_only_in_done_are_args_of_an_inserted_delta_first():
    inputs, out = record(v.sse(v.args_only_in_done(calls(("call_w", "get_weather", PARIS)))))
    assert inputs[:2] == [("NAMED_EMPTY", "", "OPEN"), ("ARGS", '{"location": "Paris"}', "OPEN")]
    assert b'"delta":"{\\"location\\": \\"Paris\\"}"' in out


def test_a_call_named_like_the_one_before_is_a_suspect_under_dedupe_calls():
    body = v.sse(calls(("call_w", "get_weather", PARIS), ("call_a", "get_weather", PARIS)))
    inputs, _ = record(body, dedupe=True)
    assert inputs[3:] == [
        ("NAMED_SUSPECT", "", "SUSPECT"),
        ("ARGS", '{"location"', "SUSPECT"),
        ("ARGS", ': "Paris"}', "SUSPECT"),
        ("COMPLETE", "", "DROPPED"),  # compared once its arguments ended: a repeat
        ("END", "", "DROPPED"),
    ]
    kept, _ = record(body)
    assert [e for e, _, _ in kept[3:]] == ["NAMED_EMPTY", "COMPLETE", "END"]


def test_markup_calls_are_named_then_args_then_end():
    events: list[StreamEvent] = [START, TextDelta(HERMES), Finished(FinishReason.STOP)]
    events.append(Ended(complete=True))
    inputs, out = record(v.sse(v.encoded(events)), hot=False)
    assert [(e, state) for e, _, state in inputs] == [
        ("NAMED_EMPTY", "OPEN"),
        *[("ARGS", "OPEN")] * (len(inputs) - 2),
        ("END", "OPEN"),
    ]
    assert "".join(text for _, text, _ in inputs) == '{"location": "Paris"}'
    assert check(out).calls[0]["arguments"] == '{"location": "Paris"}'


def test_a_nameless_calls_held_events_reach_the_client_when_the_stream_is_cut():
    body = v.sse(v.empty_call_id_and_name(calls(("call_w", "get_weather", PARIS), text="Hi.")))
    cut = body[: body.index(b"response.function_call_arguments.done")]
    cut = cut[: cut.rindex(b"\n\n") + 2]  # the call's added and deltas came, not its end
    native = NativeStream(lambda: "x", NativeRequest.from_body(WEATHER_TOOLS), options=NATIVE)
    out = b"".join(native.feed(cut) + native.close(complete=False))
    assert out.count(b"\n\n") == cut.count(b"\n\n")  # no event lost, none made up
    assert out.count(b"event: response.function_call_arguments.delta") == 2
    assert b"response.completed" not in out


@pytest.mark.parametrize("variant", [v.empty_call_id_and_name, v.empty_name_in_done])
def test_dedupe_calls_drops_a_repeat_whose_name_came_late(variant: v.VARIANT):
    body = v.sse(
        variant(
            calls(
                ("call_w", "get_weather", PARIS),
                ("call_a", "get_weather", ('{ "location" :', ' "Paris" }')),
                ("call_t", "get_time", ('{"tz": "CET"}',)),
            )
        )
    )
    out, repairs = every_cutting(body, dedupe=True)
    assert repairs[Repair.CALL_DUPLICATED] == 1
    checked = check(out)  # strict: dense numbers and indexes, output as streamed
    assert [c["call_id"] for c in checked.calls] == ["call_w", "call_t"]
    kept, _ = every_cutting(body, dedupe=False)
    assert [c["call_id"] for c in check(kept).calls] == ["call_w", "call_a", "call_t"]


def test_calls_without_arguments_repeat_as_empty_objects():
    body = v.sse(calls(("call_a", "get_time", ()), ("call_b", "get_time", ())))
    _, counted = every_cutting(body, dedupe=False)
    assert counted[Repair.CALL_DUPLICATED] == 1
    out, repairs = every_cutting(body, dedupe=True)
    assert repairs[Repair.CALL_DUPLICATED] == 1
    assert b"call_b" not in out


def test_a_dropped_repeat_is_no_call_before_the_next():
    same = [("call_" + c, "get_weather", PARIS) for c in "abc"]
    out, repairs = every_cutting(v.sse(calls(*same)), dedupe=True)
    assert [c["call_id"] for c in check(out).calls] == ["call_a"]
    # b and c each repeat a (a dropped b is no call before c): two repeats, each counted
    # (issue 26 item 16: every occurrence, where this stream counted a kind once)
    assert repairs == Counter({Repair.CALL_DUPLICATED: 2})


def test_the_calls_are_records_of_the_shared_table():
    native = NativeStream(lambda: "x", NativeRequest.from_body(WEATHER_TOOLS), options=NATIVE)
    native.feed(v.sse(calls(("call_w", "get_weather", PARIS))))
    (call,) = native.calls.calls.records
    assert isinstance(call, NativeCall)
    assert (call.name, call.id, call.text()) == ("get_weather", "call_w", '{"location": "Paris"}')


def test_a_markup_call_after_an_equal_structured_call_is_a_repeat_like_any_other():
    structured = calls(("call_w", "get_weather", PARIS))
    message = v.encoded([START, TextDelta(HERMES), Finished(FinishReason.STOP), Ended(True)])
    items = [p for p in message if p["type"] not in ("response.created", "response.in_progress")]
    for payload in items:
        if "output_index" in payload:
            payload["output_index"] += 1
    body = v.sse(v.renumber([*structured[:-1], *items]))
    # only the call right before, and only under dedupe_calls: not chat's markup rule
    kept, counted = every_cutting(body, dedupe=False)
    assert [c["name"] for c in check(kept).calls] == ["get_weather", "get_weather"]
    assert counted[Repair.CALL_DUPLICATED] == 1
    out, _ = every_cutting(body, dedupe=True)
    assert [c["call_id"] for c in check(out).calls] == ["call_w"]

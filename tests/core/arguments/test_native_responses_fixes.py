"""Issue 25's heal and coercion on a server's own Responses stream (native mode): each call held
with what comes after it until the terminal event says whether a token limit cut the response;
then sent fixed (one delta of the whole text, its ``.done``, ``output_item.done`` and the
terminal's ``output`` with that text), or as the upstream's own events when it was cut, could
not be fixed, or fitted already."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.core.events import FinishReason
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.responses.native.request import NativeRequest
from proxy.core.protocols.responses.native.stream import NativeStream
from proxy.core.repairs import Repair
from tests.core.arguments.responses_streams import (
    DELTA,
    FIXES,
    OFF,
    call,
    call_events,
    every_cut,
    payloads,
    run,
    sent_arguments,
    stream,
    terminal,
)
from tests.core.protocols.responses import variants as v
from tests.core.protocols.responses.checker import check
from tests.support.cpu import least_cpu_seconds
from tests.support.streams import chunks

SCHEMA = {
    "type": "object",
    "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["location"],
}
TOOLS = [
    {"type": "function", "name": name, "parameters": SCHEMA} for name in ("get_weather", "get_time")
]
REQUEST = {"model": "m", "input": "go", "tools": TOOLS}
FIXED = {Repair.ARGS_HEALED, Repair.ARGS_COERCED}
PARALLEL = "responses-openai-gpt4o-parallel-two-calls.sse"
REASONING_CALL = "responses-openai-gpt51codexmax-reasoning-summary-then-call.sse"

# the shapes heal_arguments fixes, each with what it means
ALMOST = ("{'location': 'Paris', 'days': 2,}", {"location": "Paris", "days": 2})
COERCIBLE = ('{"location": "Oslo", "days": "3"}', {"location": "Oslo", "days": 3})


def two_calls(first: str, second: str, **kw: Any) -> bytes:
    return stream(
        "Let me check.",
        call(0, "get_weather", first[:7], first[7:]),
        call(1, "get_time", second[:3], second[3:]),
        **kw,
    )


def recorded_tools(name: str) -> list[dict[str, Any]]:
    [created] = [p for p in v.recorded(name) if p["type"] == "response.created"]
    return list(created["response"]["tools"])


@pytest.mark.parametrize(
    ("body", "tools", "canonical"),
    [
        ((v.FIXTURES / PARALLEL).read_bytes(), recorded_tools(PARALLEL), True),
        (v.sse(v.llamacpp(v.recorded(PARALLEL))), recorded_tools(PARALLEL), False),
        ((v.FIXTURES / REASONING_CALL).read_bytes(), recorded_tools(REASONING_CALL), True),
        (two_calls('{"location": "Paris"}', '{"location": "Oslo", "days": 3}'), TOOLS, True),
    ],
    ids=["recorded", "llamacpp", "reasoning-then-call", "text-then-two-calls"],
)
def test_calls_that_fit_come_out_as_without_healing(
    body: bytes, tools: list[Any], canonical: bool
) -> None:
    """Held, then sent as they came: the output is the output without heal and coerce, byte
    for byte (a canonical stream's is its input), the repairs the same."""
    request = {**REQUEST, "tools": tools}
    held = every_cut(body, request, FIXES)
    assert held == every_cut(body, request, OFF)
    assert not FIXED & set(held[1])
    assert (held[0] == body) is canonical


def test_almost_json_is_healed_and_sent_in_one_piece() -> None:
    body = two_calls(ALMOST[0], ALMOST[0])
    out, repairs = every_cut(body, REQUEST, FIXES)
    assert repairs == {Repair.ARGS_HEALED: 2}
    checked = check(out)  # the canonical stream's rules, held by the strict checker
    healed = orjson.dumps(ALMOST[1]).decode()
    assert [(c["name"], c["arguments"]) for c in checked.calls] == [
        ("get_weather", healed),
        ("get_time", healed),
    ]
    for events in call_events(out).values():
        assert [e["type"] for e in events] == [
            "response.output_item.added",
            DELTA,
            "response.function_call_arguments.done",
            "response.output_item.done",
        ]
        added, delta, done, item_done = events
        assert added["item"]["arguments"] == ""
        assert delta["delta"] == done["arguments"] == item_done["item"]["arguments"] == healed
        assert item_done["item"]["status"] == "completed"
    end = terminal(out)
    assert end["type"] == "response.completed"
    calls = [i for i in end["response"]["output"] if i["type"] == "function_call"]
    assert [i["arguments"] for i in calls] == [healed, healed]
    # nothing else changed: the message and the numbering as without healing
    plain, _ = run([body], REQUEST, OFF)
    assert checked.text == check(plain).text
    assert [e["sequence_number"] for e in chunks(out)] == list(range(len(chunks(out))))


def test_a_string_where_the_schema_says_integer_is_coerced() -> None:
    body = two_calls('{"location": "Paris"}', COERCIBLE[0])
    out, repairs = every_cut(body, REQUEST, UpstreamOptions(coerce_arguments=True))
    assert repairs == {Repair.ARGS_COERCED: 1}
    weather, time = sent_arguments(out)
    assert weather == '{"location": "Paris"}'  # it fitted: not a byte changed
    assert orjson.loads(time) == COERCIBLE[1]
    assert [orjson.loads(c["arguments"]) for c in check(out).calls][1] == COERCIBLE[1]


def test_a_response_cut_by_the_token_limit_is_never_fixed() -> None:
    """response.incomplete (max_output_tokens): the calls go out as they came, even one that
    a heal would fix (a cut stays a cut)."""
    body = two_calls(ALMOST[0], '{"location": "Pa', finish=FinishReason.LENGTH)
    assert terminal(body)["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    out, repairs = every_cut(body, REQUEST, FIXES)
    assert not FIXED & set(repairs)
    assert (out, repairs) == run([body], REQUEST, OFF)
    assert sent_arguments(out) == [ALMOST[0], '{"location": "Pa']


def test_llamacpps_cut_reported_as_completed_is_not_healed() -> None:
    body = v.sse(v.cut_reported_as_completed(v.llamacpp(v.recorded(PARALLEL))))
    request = {**REQUEST, "tools": recorded_tools(PARALLEL)}
    out, repairs = every_cut(body, request, FIXES)
    assert (out, repairs) == run([body], request, OFF)
    assert Repair.CUT_AS_COMPLETED in repairs
    assert terminal(out)["type"] == "response.incomplete"


def test_a_heal_that_does_not_fit_the_schema_changes_nothing() -> None:
    misfit = "{'location': 5}"  # heals into JSON whose location is no string
    body = two_calls(misfit, COERCIBLE[0].replace('"3"', '"three"'))
    out, repairs = every_cut(body, REQUEST, FIXES)
    assert not FIXED & set(repairs)
    assert (out, repairs) == run([body], REQUEST, OFF)


def test_items_after_a_held_call_wait_behind_it_in_their_order() -> None:
    """Text, reasoning and a second call after a call: each goes out after the call, in the
    order the upstream sent them, output_index dense, as without healing but for the fixed
    arguments."""
    body = stream(
        ("reasoning", "First the weather."),
        call(0, "get_weather", ALMOST[0]),
        "Then the time.",
        call(1, "get_time", '{"location": "Oslo"}'),
    )
    out, repairs = every_cut(body, REQUEST, FIXES)
    assert repairs == {Repair.ARGS_HEALED: 1}
    plain, _ = run([body], REQUEST, OFF)
    # one delta where the upstream sent several; the end: without healing the unparsable
    # arguments read as llama.cpp's cut (cut-reported-as-completed), healed they are whole
    assert shape(out)[:-1] == shape(plain)[:-1]
    assert (terminal(out)["type"], terminal(plain)["type"]) == (
        "response.completed",
        "response.incomplete",
    )
    order = [i["type"] for i in terminal(out)["response"]["output"]]
    assert order == ["reasoning", "function_call", "message", "function_call"]
    added = [e["output_index"] for e in chunks(out) if e["type"] == "response.output_item.added"]
    assert added == [0, 1, 2, 3]
    checked = check(out)
    assert checked.text == "Then the time."
    assert [orjson.loads(c["arguments"]) for c in checked.calls] == [
        ALMOST[1],
        {"location": "Oslo"},
    ]


def shape(out: bytes) -> list[tuple[str, int | None]]:
    """Each event's type and output_index, a call's run of deltas as one."""
    kinds: list[tuple[str, int | None]] = []
    for event in chunks(out):
        kind = (event["type"], event.get("output_index"))
        if not (kind[0] == DELTA and kinds and kinds[-1] == kind):
            kinds.append(kind)
    return kinds


def test_no_argument_byte_goes_out_before_the_terminal_event() -> None:
    """What holding costs: the first argument byte waits for the response's end."""
    body = two_calls('{"location": "Paris"}', '{"location": "Oslo"}')
    events = [part + b"\n\n" for part in body.split(b"\n\n") if part]
    kinds = [orjson.loads(e.split(b"data: ", 1)[1])["type"] for e in events]
    for options, first in ((OFF, DELTA), (FIXES, "response.completed")):
        native = NativeStream(lambda: "x", NativeRequest.from_body(REQUEST), options=options)
        sent = b""
        for n, event in enumerate(events):
            sent += b"".join(native.feed(event))
            if DELTA.encode() in sent:
                assert kinds[n] == first
                break
        else:
            raise AssertionError("no argument byte went out")


@pytest.mark.parametrize("at", ["mid-arguments", "after-its-done", "before-the-end"])
def test_a_stream_cut_while_a_call_is_held_gets_its_events_as_they_came(at: str) -> None:
    body = two_calls(ALMOST[0], ALMOST[0])
    marker = {
        "mid-arguments": b"'Paris'",
        "after-its-done": b'"type":"response.output_item.added","item":{"id":"fc_u0003"',
        "before-the-end": b"event: response.completed",
    }[at]
    cut = body[: body.index(marker)]
    out, repairs = every_cut(cut, REQUEST, FIXES, complete=False)
    assert not FIXED & set(repairs)
    assert (out, repairs) == run([cut], REQUEST, OFF, complete=False)


def test_an_end_without_a_terminal_event_fixes_nothing() -> None:
    body = two_calls(ALMOST[0], ALMOST[0])
    ended = body[: body.index(b"event: response.completed")]
    out, repairs = every_cut(ended, REQUEST, FIXES)
    assert not FIXED & set(repairs)
    assert (out, repairs) == run([ended], REQUEST, OFF)


def test_what_a_held_call_holds_counts_toward_max_held_bytes() -> None:
    """Past the cap, what was held goes out as it came (cap-reached), then the rest."""
    body = two_calls(ALMOST[0], ALMOST[0])
    capped = UpstreamOptions(heal_arguments=True, max_held_bytes=1500)
    out, repairs = every_cut(body, REQUEST, capped)
    assert out == body
    assert repairs[Repair.CAP_REACHED] == 1
    assert not FIXED & set(repairs)
    # the same stream under a cap it fits in is healed
    _, repairs = run([body], REQUEST, UpstreamOptions(heal_arguments=True))
    assert repairs[Repair.ARGS_HEALED] == 2


def test_one_call_and_repeats_hold_with_healing() -> None:
    body = two_calls(ALMOST[0], ALMOST[0])
    one = {**REQUEST, "parallel_tool_calls": False}
    out, repairs = every_cut(body, one, FIXES)
    assert repairs == {Repair.ARGS_HEALED: 1, Repair.PARALLEL_CALL_DROPPED: 1}
    assert [c["name"] for c in check(out).calls] == ["get_weather"]
    # a repeat is compared as it came, before any fix: the second is dropped, the first fixed
    same = stream(call(0, "get_weather", COERCIBLE[0]), call(1, "get_weather", COERCIBLE[0]))
    dedupe = UpstreamOptions(coerce_arguments=True, dedupe_calls=True)
    out, repairs = every_cut(same, REQUEST, dedupe)
    assert repairs == {Repair.CALL_DUPLICATED: 1, Repair.ARGS_COERCED: 1}
    assert [orjson.loads(c["arguments"]) for c in check(out).calls] == [COERCIBLE[1]]


def no_call_ends(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A server that ends no call (neither ``.done`` nor ``output_item.done``: R3 and more)."""
    ends = ("response.output_item.done", "response.function_call_arguments.done")
    return v.renumber(
        [e for e in events if e["type"] not in ends or e.get("item", {}).get("type") == "message"]
    )


SHAPES = [
    no_call_ends,
    v.llamacpp,
    v.args_only_in_done,
    v.no_item_done_for_calls,
    v.empty_call_id_and_name,
    v.empty_name_in_done,
    v.rotating_ids,
    v.bare_completed,
    v.deltas_without_added,
    v.content_index_per_delta,
]


@pytest.mark.parametrize("shape", SHAPES, ids=[s.__name__ for s in SHAPES])
def test_the_servers_broken_shapes_hold_and_heal_alike(shape: Any) -> None:
    """Every server shape the repairer knows (docs/quirks.md R1-R7, llama.cpp): calls that
    fit come out as without healing; almost-JSON ones healed, the rest repaired as ever."""
    fits = v.sse(shape(payloads(two_calls('{"location": "Paris"}', '{"location": "X"}'))))
    assert every_cut(fits, REQUEST, FIXES) == every_cut(fits, REQUEST, OFF)
    broken = v.sse(shape(payloads(two_calls(ALMOST[0], ALMOST[0]))))
    out, repairs = every_cut(broken, REQUEST, FIXES)
    assert repairs[Repair.ARGS_HEALED] == 2
    assert [orjson.loads(c["arguments"]) for c in check(out).calls] == [ALMOST[1]] * 2
    assert terminal(out)["type"] == "response.completed"


def test_a_failed_response_or_an_upstream_error_fixes_nothing() -> None:
    """response.failed, llama-server's bare error line and its parser failure answered with
    the calls in it (recover_parse_failures) end the calls held as without healing."""
    body = two_calls(ALMOST[0], ALMOST[0])
    before_end = body[: body.index(b"event: response.completed")]
    recovered = '<tool_call>{"name": "get_time", "arguments": {"location": "Oslo"}}</tool_call>'
    for ending in (
        body.replace(b"response.completed", b"response.failed"),
        before_end
        + b'data: {"error": {"code": 500, "message": "boom", "type": "server_error"}}\n\n',
        before_end
        + b"data: "
        + orjson.dumps(
            {"error": {"code": 500, "message": "Failed to parse input at pos 0: " + recovered}}
        )
        + b"\n\n",
    ):
        out, repairs = every_cut(ending, REQUEST, FIXES)
        assert not FIXED & set(repairs)
        assert (out, repairs) == run([ending], REQUEST, OFF)
        assert sent_arguments(out)[:2] == [ALMOST[0], ALMOST[0]]


def test_a_held_call_costs_the_same_per_event_however_long_it_is() -> None:
    """Holding keeps each event once and reads it again once: 16 times the deltas (and the
    text waiting behind them) cost about 16 times the CPU, never the square."""

    def body(deltas: int) -> list[bytes]:
        fragments = ['{"location": "', *("x" * deltas), '",}']
        data = stream(call(0, "get_weather", *fragments), *(["then "] * (deltas // 4)))
        return [data[i : i + 1500] for i in range(0, len(data), 1500)]

    def cpu(deltas: int, repeat: int) -> float:
        reads = body(deltas)
        return least_cpu_seconds(lambda: run(reads, REQUEST, FIXES), repeat)

    assert run(body(2_000), REQUEST, FIXES)[1][Repair.ARGS_HEALED] == 1
    short, long = cpu(2_000, 3), cpu(32_000, 2)
    assert long < 40 * short, f"16x the input took {long / short:.0f}x the CPU"


def test_events_of_other_kinds_keep_their_place_behind_a_held_call() -> None:
    """A non-standard event (R8: ``response.reasoning.delta``) of an item waiting behind a
    held call waits with it: it goes out after that item's opening, never before the call."""
    body = stream(
        call(0, "get_weather", ALMOST[0]),
        ("reasoning", "Now the time."),
        call(1, "get_time", '{"location": "Oslo"}'),
    )
    body = v.sse(v.nonstandard_names(payloads(body)))
    assert b"response.reasoning.delta" in body
    out, repairs = every_cut(body, REQUEST, FIXES)
    assert repairs[Repair.ARGS_HEALED] == 1
    assert repairs[Repair.NONSTANDARD_EVENT] == 1  # counted once, as it went out
    events = chunks(out)
    indexes = [e["output_index"] for e in events if "output_index" in e]
    assert indexes == sorted(indexes)  # no event of a later item before an earlier one's
    [reasoning] = [e for e in events if e["type"] == "response.reasoning.delta"]
    [added] = [
        e
        for e in events
        if e["type"] == "response.output_item.added" and e["item"]["type"] == "reasoning"
    ]
    assert added["sequence_number"] < reasoning["sequence_number"]
    assert reasoning["output_index"] == added["output_index"] == 1


def test_an_error_event_goes_out_after_what_came_before_it() -> None:
    """An upstream ``error`` event while calls are held: the calls go out first, as they came
    (a client may stop reading at the error), then the error and the failed response."""
    body = two_calls(ALMOST[0], ALMOST[0])
    error = {"type": "error", "code": "server_error", "message": "boom", "param": None}
    failed = body[: body.index(b"event: response.completed")] + v.sse([error])
    failed += body[body.index(b"event: response.completed") :].replace(
        b"response.completed", b"response.failed"
    )
    out, repairs = every_cut(failed, REQUEST, FIXES)
    assert (out, repairs) == run([failed], REQUEST, OFF)
    kinds = [e["type"] for e in chunks(out)]
    calls = [
        i for i, e in enumerate(chunks(out)) if e.get("item", {}).get("type") == "function_call"
    ]
    assert max(calls) < kinds.index("error") < kinds.index("response.failed")


def test_a_completed_event_whose_response_says_incomplete_fixes_nothing() -> None:
    """``response.completed`` carrying ``status: "incomplete"`` and its details (a server
    that names the event one way and the response another) is a cut all the same."""
    events = payloads(two_calls(ALMOST[0], ALMOST[0]))
    events[-1]["response"]["status"] = "incomplete"
    events[-1]["response"]["incomplete_details"] = {"reason": "max_output_tokens"}
    body = v.sse(events)
    out, repairs = every_cut(body, REQUEST, FIXES)
    assert not FIXED & set(repairs)
    assert (out, repairs) == run([body], REQUEST, OFF)


def test_a_held_calls_end_sent_twice_loses_neither() -> None:
    """An ``output_item.done`` the upstream repeats for a held call: the first is held with
    the call, the second waits behind it; both go out, as without healing."""
    events = payloads(two_calls('{"location": "Paris"}', '{"location": "Oslo"}'))
    at = next(
        n
        for n, e in enumerate(events)
        if e["type"] == "response.output_item.done" and e["item"]["type"] == "function_call"
    )
    events.insert(at, dict(events[at]))
    body = v.sse(events)
    held = every_cut(body, REQUEST, FIXES)
    assert held == run([body], REQUEST, OFF)
    assert b"".join(held[0].split(b"\n\n")).count(b'"type":"response.output_item.done"') == 4


def test_a_delta_before_its_items_added_is_not_taken_for_the_item_waiting_before_it() -> None:
    """A call's first delta ahead of its ``output_item.added`` (R7's shape, once) while the
    items before it wait behind a held call: it is no event of the reasoning item that
    waits (whose end came), and no event is sent twice or under another item."""
    body = stream(
        call(0, "get_weather", '{"location": "Paris"}'),
        ("reasoning", "Then the time."),
        call(1, "get_time", '{"location": "Oslo"}'),
    )
    events = payloads(body)
    added = max(n for n, e in enumerate(events) if e["type"] == "response.output_item.added")
    events[added], events[added + 1] = events[added + 1], events[added]
    body = v.sse(v.renumber(events))
    out, repairs = every_cut(body, REQUEST, FIXES)
    plain, plain_repairs = run([body], REQUEST, OFF)
    assert (out, repairs) == (plain, plain_repairs)
    reasoning = {
        e.get("item_id") for e in chunks(out) if e["type"].startswith("response.reasoning")
    }
    arguments = {e["item_id"] for e in chunks(out) if e["type"] == DELTA}
    assert not reasoning & arguments

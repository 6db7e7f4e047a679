"""Native mode's tool calls through the shared call state table (proxy/core/calls/state.py):
how a Messages stream's events become the table's inputs (native_calls.py), and the answers
that follow from them, however the bytes are cut."""

from __future__ import annotations

import copy
import json

import pytest

from proxy.core.calls import driver
from proxy.core.calls.driver import Calls
from proxy.core.calls.state import S1, Action, CallInput, CallState, transition
from proxy.core.protocols.messages.native import calls as native_calls
from proxy.core.protocols.messages.native.calls import end_input, naming_input
from proxy.core.repairs import Repair
from tests.core.protocols.messages import streams
from tests.core.protocols.messages.checker import check, events_of
from tests.core.protocols.messages.native_helpers import every_cut, repair

PARALLEL = "anthropic-haiku35-parallel-three-tools"  # three make_directory calls, inputs differ
NO_ARGS = "anthropic-sonnet45-tool-no-args"  # one call whose input is a single "" fragment


def payloads(data: bytes) -> list[object]:
    return [json.loads(event.data) for event in events_of(data)]  # type: ignore[arg-type]


def tool_events(events: streams.Events, index: int) -> streams.Events:
    return [e for e in events if e.get("index") == index]


def repeated(events: streams.Events, times: int) -> streams.Events:
    """The first tool block sent ``times`` more times right after itself (other ids); the
    blocks after it move up."""
    first = streams.tool_indexes(events)[0]
    own = tool_events(events, first)
    out: streams.Events = []
    for event in copy.deepcopy(events):
        if event.get("index", -1) > first:
            event["index"] += times
        out.append(event)
        if event["type"] == "content_block_stop" and event["index"] == first:
            for n in range(1, times + 1):
                for again in copy.deepcopy(own):
                    again["index"] = first + n
                    if again["type"] == "content_block_start":
                        again["content_block"]["id"] = f"toolu_again{n}"
                    out.append(again)
    return out


def test_a_start_names_the_call_with_no_argument_text_known():
    # a start's ``input`` is the block's ``{}``, never argument text: never a placeholder
    assert naming_input(False) is CallInput.NAMED_EMPTY
    assert naming_input(True) is CallInput.NAMED_SUSPECT
    assert transition(S1, CallState.NAMELESS, naming_input(False)) == (
        CallState.OPEN,
        Action.OPEN,
    )


@pytest.mark.parametrize(
    ("repeat", "cut", "event"),
    [
        (False, False, CallInput.COMPLETE),
        (False, True, CallInput.END),
        (True, False, CallInput.DUPLICATE),
        (True, True, CallInput.DUPLICATE),
    ],
)
def test_the_end_of_a_calls_input(repeat: bool, cut: bool, event: CallInput):
    assert end_input(repeat=repeat, cut=cut) is event


def test_an_open_call_whose_input_ends_gets_nothing_added():
    """COMPLETE, not END, on a clean end: the table's END would add a ``{}`` fragment to a
    call without argument text, where a Messages client rebuilds ``{}`` itself."""
    assert transition(S1, CallState.OPEN, end_input(repeat=False, cut=False))[1] is Action.NOTHING
    data = streams.recorded(NO_ARGS)
    for pieces in every_cut(data, NO_ARGS):
        assert repair(pieces, dedupe=True) == (data, {})


@pytest.mark.parametrize("empty", [False, True], ids=["absent", "empty"])
def test_a_tool_block_without_an_id_gets_one(empty: bool):
    events = streams.parsed("anthropic-haiku35-text-then-tool")
    first = streams.tool_indexes(events)[0]
    start = next(e for e in tool_events(events, first) if e["type"] == "content_block_start")
    upstream_id = start["content_block"].pop("id")
    if empty:
        start["content_block"] = {"id": "", **start["content_block"]}
    broken = streams.sse(events)
    expected, _ = repair(broken)
    for pieces in every_cut(broken, "no-id"):
        out, repairs = repair(pieces)
        assert out == expected
        assert repairs == {Repair.ID_MISSING: 1}
    (call,) = check(expected).tool_uses
    assert call["id"] == "toolu_id00001"
    assert call["id"] != upstream_id
    # an absent id goes after the keys that came (the re-encoding rule); nothing else changes
    placed = b'"id":"toolu_id00001","type"' if empty else b'"input":{},"id":"toolu_id00001"}'
    assert placed in expected
    start["content_block"]["id"] = call["id"]
    assert payloads(expected) == events


def test_a_call_without_input_twice_is_dropped_under_dedupe_calls():
    """An empty input is the ``{}`` the client rebuilds: equal to another empty one."""
    broken = streams.sse(repeated(streams.parsed(NO_ARGS), 1))
    for pieces in every_cut(broken, "no-args-twice"):
        assert repair(pieces) == (broken, {Repair.CALL_DUPLICATED: 1})
        out, repairs = repair(pieces, dedupe=True)
        assert payloads(out) == payloads(streams.recorded(NO_ARGS))
        assert repairs == {Repair.CALL_DUPLICATED: 1}


def test_a_third_equal_call_in_a_row_is_dropped_as_well():
    """Each call is compared with the last one not dropped: the first, for both repeats."""
    broken = streams.sse(repeated(streams.parsed(PARALLEL), 2))
    for pieces in every_cut(broken, "three-times"):
        out, repairs = repair(pieces, dedupe=True)
        assert payloads(out) == payloads(streams.recorded(PARALLEL))
        assert repairs == {Repair.CALL_DUPLICATED: 2}
    out, repairs = repair(broken)
    assert (out, repairs) == (broken, {Repair.CALL_DUPLICATED: 2})


def test_a_held_call_of_empty_fragments_only_goes_out_as_it_came():
    """A suspect whose fragments carry no text: held, not a repeat, sent byte for byte
    (the driver asks for no held argument text then; the fragments still go out)."""
    events = streams.parsed(PARALLEL)
    second = streams.tool_indexes(events)[1]
    empty = {
        "type": "content_block_delta",
        "index": second,
        "delta": {"type": "input_json_delta", "partial_json": ""},
    }
    stop = events.index({"type": "content_block_stop", "index": second})
    events = [
        e
        for e in events[:stop]
        if not (e["type"] == "content_block_delta" and e["index"] == second)
    ] + [empty, empty, *events[stop:]]
    data = streams.sse(events)
    assert check(data).tool_uses[1]["input"] == {}
    for pieces in every_cut(data, "empty-suspect"):
        assert repair(pieces, dedupe=True) == (data, {})


def lookups(monkeypatch: pytest.MonkeyPatch, *, asked: bool) -> list[int]:
    """Count the driver's table lookups (one item a lookup); with ``asked`` False, the
    table's answers the fast paths take are turned around first (no state streams, collects
    or ends with nothing to do)."""
    if not asked:
        monkeypatch.setattr(driver, "S1_STREAMS", ())
        monkeypatch.setattr(native_calls, "_COLLECTS", ())
        monkeypatch.setattr(native_calls, "_DONE", ())
    looked_up: list[int] = []
    lookup = Calls.input

    def counting(self, *args, **kwargs):
        looked_up.append(1)
        return lookup(self, *args, **kwargs)

    monkeypatch.setattr(Calls, "input", counting)
    return looked_up


@pytest.mark.parametrize("asked", [True, False], ids=["table", "turned-around"])
def test_the_fast_paths_ask_the_table(monkeypatch, asked: bool):
    """With the table's answers turned around (an open call's fragment streams, a suspect's
    is collected, an open call's end changes nothing), every fragment and every end takes
    the driver's lookup; the fast paths have no answer of their own."""
    looked_up = lookups(monkeypatch, asked=asked)
    data = streams.recorded(PARALLEL)  # three calls of one name: the second and third suspects
    assert repair(data, dedupe=True) == (data, {})
    fragments = sum(
        e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta"
        for e in streams.parsed(PARALLEL)
    )
    calls = len(streams.tool_indexes(streams.parsed(PARALLEL)))
    # asked: each call named, each suspect's end; else also every fragment and the open end
    assert len(looked_up) == (calls + calls - 1 if asked else 2 * calls + fragments)


@pytest.mark.parametrize("asked", [True, False], ids=["table", "turned-around"])
def test_the_markup_arguments_ask_the_table(monkeypatch, asked: bool):
    looked_up = lookups(monkeypatch, asked=asked)
    broken = streams.sse(streams.hermes_markup(streams.parsed("anthropic-sonnet45-text-only")))
    expected, _ = repair(broken)
    # asked: the call is named, and nothing else looks the pair up; else its arguments and
    # its end do too
    assert (len(looked_up) == 1) if asked else (len(looked_up) >= 3)
    assert check(expected).tool_uses[0]["input"] == {"location": 'Paris, "FR"'}

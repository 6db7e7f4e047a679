"""The tool-call state machine: its tables are total and a missing transition is an error."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from proxy.core.calls import driver
from proxy.core.calls.state import (
    FALLBACK_OPENING,
    HELD,
    S1,
    S1_STATES,
    S1_STREAMS,
    S2,
    S2_STATES,
    S2_STREAMS,
    Action,
    CallInput,
    CallState,
    Table,
    closes_whole,
    compared_when_whole,
    may_become_whole,
    placeholder_after,
    released_by,
    streams_args,
    transition,
    whole_calls_due,
)
from proxy.core.errors import NormalizerError
from proxy.core.protocols.chat.choice import ChoiceNormalizer
from proxy.core.protocols.chat.normalize import RequestInfo
from tests.support.normalizer import eventwise, run
from tests.support.streams import chunk_event as chunk

FORMS = pytest.mark.parametrize(
    ("table", "states"), [(S1, S1_STATES), (S2, S2_STATES)], ids=["S1", "S2"]
)


@FORMS
def test_table_has_a_transition_for_every_state_and_input(table: Table, states):
    missing = [(s.name, i.name) for s in states for i in CallInput if (s, i) not in table]
    assert missing == []


@FORMS
def test_table_never_leaves_its_form(table: Table, states):
    assert {state for state, _ in table} == set(states)
    assert {target for target, _ in table.values()} <= set(states)


@FORMS
def test_a_call_once_open_stays_open(table: Table, states):
    assert all(
        target is CallState.OPEN
        for (state, _), (target, _) in table.items()
        if state is CallState.OPEN
    )


@FORMS
def test_no_call_is_held_again_once_it_is_not(table: Table, states):
    """The driver marks a call's slot done only as the call leaves ``HELD``."""
    again = [
        (state.name, event.name)
        for (state, event), (target, _) in table.items()
        if state not in HELD and target in HELD
    ]
    assert again == []


def test_every_action_is_reachable_from_some_table():
    used = {action for table in (S1, S2) for _, action in table.values()}
    assert used == set(Action)


def test_a_missing_transition_is_a_normalizer_error_naming_the_pair():
    with pytest.raises(NormalizerError, match="PLACEHOLDER on END"):
        transition(S2, CallState.PLACEHOLDER, CallInput.END)


# -- what the states trigger (the driver and the hot paths ask these) -----------------------


@FORMS
def test_only_an_open_call_streams_its_arguments_as_they_come(table: Table, states):
    streaming = {state for state in states if streams_args(table, state)}
    assert streaming == {CallState.OPEN}


def test_the_kept_answers_are_the_tables():
    for table, states, kept in ((S1, S1_STATES, S1_STREAMS), (S2, S2_STATES, S2_STREAMS)):
        assert kept == tuple(state for state in states if streams_args(table, state))


def test_a_fallback_opening_exists_for_every_named_input_and_opens_the_call():
    named = {
        CallInput.NAMED_EMPTY,
        CallInput.NAMED_PARTIAL,
        CallInput.NAMED_WHOLE,
        CallInput.NAMED_PLACEHOLDER,
    }  # what the text known when the name comes classifies as (a suspect opens later)
    assert set(FALLBACK_OPENING) == named
    openings = {Action.OPEN, Action.OPEN_SPLIT, Action.OPEN_WHOLE}
    assert set(FALLBACK_OPENING.values()) <= openings
    # as the name arriving would have opened it, but a placeholder is no longer held back
    for event, action in FALLBACK_OPENING.items():
        if event is not CallInput.NAMED_PLACEHOLDER:
            assert S1[CallState.NAMELESS, event] == (CallState.OPEN, action)
    assert FALLBACK_OPENING[CallInput.NAMED_PLACEHOLDER] is Action.OPEN_WHOLE


def test_a_placeholder_is_kept_until_text_comes_and_dropped_for_an_object():
    assert placeholder_after(True, False, "{}") == (True, False)
    assert placeholder_after(False, True, "") == (True, False)
    assert placeholder_after(False, True, ' {"a": 1}') == (False, True)
    assert placeholder_after(False, True, "]") == (False, False)
    assert placeholder_after(False, False, "{") == (False, False)


def test_only_a_collected_call_becomes_whole():
    collected = [CallState.COLLECTING, CallState.SUSPECT]
    assert [s for s in CallState if may_become_whole(s, False)] == collected
    assert not may_become_whole(CallState.COLLECTING, True)  # the real arguments may follow
    assert [s for s in CallState if closes_whole(S2, s)] == collected
    assert not any(closes_whole(S1, s) for s in CallState)  # in S1 the block's end is END
    # an S1 suspect is compared at once; in S2 a whole call waits for the calls before it
    assert [s for s in CallState if compared_when_whole(S1, s)] == [CallState.SUSPECT]
    assert not any(compared_when_whole(S2, s) for s in CallState)


@dataclass
class _Tracked:
    state: CallState
    whole: bool = False


def test_whole_calls_go_out_in_order_and_never_before_an_earlier_call():
    first, second, third = (_Tracked(CallState.COLLECTING) for _ in range(3))
    calls = [_Tracked(CallState.OPEN), _Tracked(CallState.DROPPED), first, second, third]
    second.whole = True
    assert whole_calls_due(calls, 0) == ([], 2)  # the first waits: the second must too
    first.whole = True
    assert whole_calls_due(calls, 2) == ([first, second], 4)
    first.state, second.state = CallState.OPEN, CallState.DROPPED
    third.state, third.whole = CallState.SUSPECT, True
    assert whole_calls_due(calls, 4) == ([third], 5)


def test_a_call_moving_on_releases_every_other_placeholder():
    a, b, c = object(), object(), object()
    assert released_by(b, [a, b, c]) == [a, c]
    assert released_by(a, []) == []


def _canonical_call_stream() -> bytes:
    opening = {"index": 0, "id": "call_1", "type": "function"}
    entries = [{**opening, "function": {"name": "f", "arguments": ""}}]
    entries += [{"index": 0, "function": {"arguments": text}} for text in ('{"a"', ": 1", "}")]
    deltas = [{"role": "assistant", "tool_calls": entries[:1]}]
    deltas += [{"tool_calls": [entry]} for entry in entries[1:]]
    return b"".join(map(chunk, deltas)) + chunk({}, finish="tool_calls")


@pytest.mark.parametrize("table_says_stream", [True, False])
def test_the_fragment_hot_path_asks_the_table(monkeypatch, table_says_stream):
    """With the table's answer for OPEN turned around, every fragment goes through
    ``process``: the hot path has no answer of its own."""
    if not table_says_stream:
        monkeypatch.setattr(driver, "S1_STREAMS", ())
    processed = 0
    process = ChoiceNormalizer.process

    def counting(self, *args):
        nonlocal processed
        processed += 1
        return process(self, *args)

    monkeypatch.setattr(ChoiceNormalizer, "process", counting)
    stream = _canonical_call_stream()
    out, _ = run(eventwise(stream), request=RequestInfo(tools=[{"type": "function"}]))
    assert out == stream + b"data: [DONE]\n\n"
    assert processed == (2 if table_says_stream else 5)  # the opening and the finish

"""The tool-call state machine: its tables are total and a missing transition is an error."""

from __future__ import annotations

import pytest

from proxy.core.calls.state import (
    S1,
    S1_STATES,
    S2,
    S2_STATES,
    Action,
    CallInput,
    CallState,
    Table,
    transition,
)
from proxy.core.errors import NormalizerError

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


def test_every_action_is_reachable_from_some_table():
    used = {action for table in (S1, S2) for _, action in table.values()}
    assert used == set(Action)


def test_a_missing_transition_is_a_normalizer_error_naming_the_pair():
    with pytest.raises(NormalizerError, match="PLACEHOLDER on END"):
        transition(S2, CallState.PLACEHOLDER, CallInput.END)

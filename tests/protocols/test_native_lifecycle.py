"""The lifecycle tables of the native repairers' streams (responses/native/lifecycle.py,
messages/native/lifecycle.py): every phase but the last has a way on, the last none, and a
transition the table lacks is the proxy's own error, never a guess."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.core.errors import NormalizerError
from proxy.core.protocols.messages.native import lifecycle as messages
from proxy.core.protocols.responses.native import lifecycle as responses

TABLES: dict[str, tuple[Any, Any]] = {
    "responses": (responses, responses.RESPONSE),
    "messages": (messages, messages.MESSAGE),
}


@pytest.mark.parametrize("name", list(TABLES))
def test_every_phase_but_over_goes_on_and_over_is_the_end(name: str) -> None:
    module, table = TABLES[name]
    phases = module.Phase
    reachable = {phases.NEW}
    while True:
        more = {table[p, s] for p, s in table if p in reachable} - reachable
        if not more:
            break
        reachable |= more
    assert reachable == set(phases)
    assert {p for p, _ in table} == set(phases) - {phases.OVER}


@pytest.mark.parametrize("name", list(TABLES))
def test_a_missing_transition_is_the_proxys_error_naming_phase_and_step(name: str) -> None:
    module = TABLES[name][0]
    step = next(iter(module.Step))
    with pytest.raises(NormalizerError, match=f"{module.Phase.OVER}.*{step}"):
        module.after(module.Phase.OVER, step)


def test_a_message_delta_before_any_start_is_remembered_by_the_start() -> None:
    phase = messages.after(messages.Phase.NEW, messages.Step.DELTA)
    assert phase not in messages.STARTED
    phase = messages.after(phase, messages.Step.START)
    assert phase in messages.STARTED
    assert phase in messages.DELTA_SEEN

"""The lifecycle tables of the native repairers' streams (responses/native/lifecycle.py,
messages/native/lifecycle.py): every phase but the last has a way on, the last none, and a
transition the table lacks is the proxy's own error, never a guess."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.core.errors import NormalizerError
from proxy.core.protocols.messages.native import lifecycle as messages
from proxy.core.protocols.responses.native import lifecycle as responses
from proxy.core.protocols.responses.native.model import UpstreamItem

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


def test_an_items_end_is_total_and_remembers_who_ended_it() -> None:
    end, step = responses.ItemEnd, responses.EndStep
    assert set(responses.ITEM_END) == {(e, s) for e in end for s in step}
    early = responses.end_after(end.OPEN, step.PROXY_ENDS)
    assert early in responses.CLOSED_EARLY
    assert early not in responses.UPSTREAM_ENDED
    both = responses.end_after(early, step.UPSTREAM_ENDS)
    assert both in responses.CLOSED_EARLY
    assert both in responses.UPSTREAM_ENDED


def test_a_calls_arguments_end_once_and_a_message_part_is_no_call() -> None:
    content, step = responses.Content, responses.ContentStep
    done = responses.content_after(content.NO_PART, step.ARGS_DONE)
    assert responses.content_after(done, step.ARGS_DONE) is done
    with pytest.raises(NormalizerError, match="no content transition"):
        responses.content_after(done, step.PART_ADDED)
    with pytest.raises(NormalizerError, match="no content transition"):
        responses.content_after(content.PART_OPEN, step.ARGS_DONE)


def test_an_items_views_say_what_the_tables_sets_say() -> None:
    item = UpstreamItem("message")
    for end in responses.ItemEnd:
        item.end = end
        assert item.closed_early is (end in responses.CLOSED_EARLY)
        assert item.done is (end in responses.UPSTREAM_ENDED)

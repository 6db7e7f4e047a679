"""What names a conversation (proxy/core/affinity.py)."""

from __future__ import annotations

from multidict import CIMultiDict

from proxy.core.affinity import MAX_KEY, affinity_key


def test_the_sources_in_order() -> None:
    body = {"prompt_cache_key": "pck", "messages": [{"role": "user", "content": "x"}]}
    both = CIMultiDict({"X-Session-Affinity": "oc", "x-session-id": "sid"})
    assert affinity_key(both, body) == "h:oc"
    assert affinity_key(CIMultiDict({"x-session-id": "sid"}), body) == "p:pck"
    assert affinity_key(CIMultiDict({"session_id": "sid"}), {"model": "m"}) == "h:sid"
    assert affinity_key(CIMultiDict({"X-Session-Id": "sid"}), {"model": "m"}) == "h:sid"


def test_a_conversations_turns_share_the_key_of_its_opening() -> None:
    opening = [{"role": "system", "content": "agent"}, {"role": "user", "content": "fix it"}]
    first = affinity_key(CIMultiDict(), {"messages": opening})
    later = affinity_key(
        CIMultiDict(), {"messages": [*opening, {"role": "assistant", "content": "done"}]}
    )
    other = affinity_key(
        CIMultiDict(), {"messages": [opening[0], {"role": "user", "content": "other task"}]}
    )
    assert first is not None
    assert first == later != other
    responses = affinity_key(CIMultiDict(), {"instructions": "agent", "input": opening[1:]})
    messages = affinity_key(CIMultiDict(), {"system": "agent", "messages": opening[1:]})
    assert None not in (responses, messages)
    assert responses != messages


def test_no_conversation_no_key() -> None:
    assert affinity_key(CIMultiDict(), {"model": "m"}) is None
    assert affinity_key(CIMultiDict(), None) is None
    assert affinity_key(CIMultiDict(), [1, 2]) is None


def test_a_long_key_is_bounded() -> None:
    key = affinity_key(CIMultiDict({"x-session-affinity": "s" * 100_000}), None)
    assert key is not None
    assert len(key) <= MAX_KEY

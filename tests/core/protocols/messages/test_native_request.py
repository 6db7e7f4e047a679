"""Native Messages: system entries inside messages moved into the top-level system."""

from __future__ import annotations

from proxy.core.protocols.messages.native.request import native_request
from proxy.core.repairs import Repair


def test_system_entries_in_messages_join_the_top_level_system_in_order():
    body = {
        "model": "m",
        "system": [{"type": "text", "text": "one", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "system", "content": "two"},
            {"role": "assistant", "content": "hello"},
        ],
    }
    sent, repairs = native_request(body)
    assert sent["system"] == [
        {"type": "text", "text": "one", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "two"},
    ]
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant"]
    assert set(repairs) == {Repair.SYSTEM_NOT_FIRST}


def test_a_request_without_them_goes_as_it_came():
    body = {"model": "m", "system": "s", "messages": [{"role": "user", "content": "hi"}]}
    sent, repairs = native_request(body)
    assert sent is body
    assert not repairs

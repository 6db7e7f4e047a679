"""Which requests asked for at most one call (issue 25 item 2), in each protocol's words."""

from __future__ import annotations

import pytest

from proxy.core.arguments.parallel import one_call_asked
from proxy.core.protocols.messages.request import translate_request


@pytest.mark.parametrize(
    ("protocol", "body", "asked"),
    [
        ("chat", {"parallel_tool_calls": False}, True),
        ("chat", {"parallel_tool_calls": True}, False),
        ("chat", {"parallel_tool_calls": "false"}, False),  # not the JSON false: the default
        ("chat", {}, False),
        ("responses", {"parallel_tool_calls": False}, True),
        ("responses", {"input": "hi"}, False),
        ("messages", {"tool_choice": {"type": "auto", "disable_parallel_tool_use": True}}, True),
        ("messages", {"tool_choice": {"type": "any", "disable_parallel_tool_use": False}}, False),
        ("messages", {"tool_choice": {"type": "none", "disable_parallel_tool_use": True}}, False),
        ("messages", {"parallel_tool_calls": False}, False),  # not a Messages field
        ("chat", ["not", "an", "object"], False),
    ],
)
def test_one_call_is_asked_in_each_protocols_words(protocol, body, asked):
    assert one_call_asked(protocol, body) is asked


@pytest.mark.parametrize("kind", ["auto", "any", "tool", "none"])
def test_a_translated_messages_request_asks_its_chat_upstream_the_same(kind):
    choice = {"type": kind, "disable_parallel_tool_use": True}
    if kind == "tool":
        choice["name"] = "f"
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "tool_choice": choice,
    }
    chat = translate_request(body).body
    assert one_call_asked("chat", chat) is one_call_asked("messages", body)

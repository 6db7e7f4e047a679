"""The Messages request -> the chat request a chat-only upstream gets."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.core.errors import ClientRequestError
from proxy.core.protocols.messages import to_chat
from proxy.core.protocols.messages.count import count_tokens
from proxy.core.protocols.messages.errors import error_body
from proxy.core.protocols.messages.request import MessagesContext

BASH = {
    "name": "Bash",
    "description": "run a command",
    "input_schema": {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    },
    "cache_control": {"type": "ephemeral"},
}


def claude_code_request() -> dict[str, Any]:
    """The shape Claude Code 2.1 sends (seen against a fake server on loopback), second turn."""
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64000,
        "stream": True,
        "system": [
            {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}
        ],
        "messages": [
            {"role": "system", "content": "Extra system text."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<reminder>"},
                    {"type": "text", "text": "list files"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "s"},
                    {"type": "text", "text": "Running it."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "Bash",
                        "input": {"command": "ls"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "a.txt"}],
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_2",
                        "content": "no such file",
                        "is_error": True,
                    },
                    {"type": "text", "text": "thanks"},
                ],
            },
        ],
        "tools": [BASH, {"type": "web_search_20250305", "name": "web_search"}],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        "metadata": {"user_id": "u"},
        "thinking": {"type": "adaptive"},
        "context_management": {},
        "output_config": {},
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 40,
        "stop_sequences": ["END"],
    }


def test_claude_code_request_maps_to_chat():
    request = to_chat(claude_code_request())
    body = request.body
    assert body["messages"] == [
        {"role": "system", "content": "You are Claude Code.\n\nExtra system text."},
        {"role": "user", "content": "<reminder>\n\nlist files"},
        {
            "role": "assistant",
            "content": "Running it.",
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "Bash", "arguments": '{"command":"ls"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "toolu_1", "content": "a.txt"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: no such file"},
        {"role": "user", "content": "thanks"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "Bash",
                "parameters": BASH["input_schema"],
                "description": "run a command",
            },
        }
    ]
    assert body["tool_choice"] == "auto"
    assert body["parallel_tool_calls"] is False
    assert body["stop"] == ["END"]
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["top_k"]) == (
        64000,
        0.5,
        0.9,
        40,
    )
    assert body["stream"] is True
    assert "reasoning_effort" not in body
    assert set(request.dropped) == {
        "cache_control",
        "thinking",
        "tools.web_search",
        "content.thinking",
        "metadata",
        "context_management",
        "output_config",
    }
    assert request.context == MessagesContext("claude-sonnet-4-5", ("END",))
    for key in (
        "metadata",
        "context_management",
        "output_config",
        "thinking",
        "system",
        "stop_sequences",
    ):
        assert key not in body


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ({"type": "auto"}, "auto"),
        ({"type": "any"}, "required"),
        ({"type": "none"}, "none"),
        ({"type": "tool", "name": "Bash"}, {"type": "function", "function": {"name": "Bash"}}),
    ],
)
def test_tool_choice(choice, expected):
    body = to_chat({"model": "m", "messages": [], "tools": [BASH], "tool_choice": choice}).body
    assert body["tool_choice"] == expected
    assert "parallel_tool_calls" not in body


@pytest.mark.parametrize(("budget", "effort"), [(1024, "low"), (8000, "medium"), (32000, "high")])
def test_thinking_enabled_becomes_reasoning_effort(budget, effort):
    body = to_chat(
        {"model": "m", "messages": [], "thinking": {"type": "enabled", "budget_tokens": budget}}
    ).body
    assert body["reasoning_effort"] == effort


def test_images_base64_and_url_become_image_url_parts():
    content = [
        {"type": "text", "text": "what is it"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.invalid/a.png"}},
    ]
    body = to_chat({"model": "m", "messages": [{"role": "user", "content": content}]}).body
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is it"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "image_url", "image_url": {"url": "https://example.invalid/a.png"}},
            ],
        }
    ]


@pytest.mark.parametrize(
    "body",
    [
        {"messages": []},
        {"model": "m"},
        {"model": "m", "messages": [{"role": "robot", "content": "x"}]},
        {"model": "m", "messages": [{"role": "user", "content": 5}]},
        {"model": "m", "messages": [], "tool_choice": {"type": "sometimes"}},
    ],
)
def test_a_request_that_is_no_messages_request_is_a_400(body):
    with pytest.raises(ClientRequestError):
        to_chat(body)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
        (413, "request_too_large"),
        (429, "rate_limit_error"),
        (500, "api_error"),
        (502, "api_error"),
        (504, "api_error"),
    ],
)
def test_error_body_type_follows_the_status(status, kind):
    import json

    assert json.loads(error_body(status, "no")) == {
        "type": "error",
        "error": {"type": kind, "message": "no"},
    }


def test_count_tokens_is_a_quarter_of_the_characters():
    body = {"model": "m", "system": "x" * 40, "messages": [{"role": "user", "content": "y" * 41}]}
    assert count_tokens(body) == {"input_tokens": 21}


def test_dropped_names_come_from_a_closed_vocabulary():
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "hologram"}, {"type": "document"}]}],
        "tools": [
            {"type": "teleport_20991231", "name": "t"},
            {"type": "web_fetch_20250910", "name": "f"},
        ],
        "client_secret_sauce": 1,
    }
    assert set(to_chat(body).dropped) == {
        "content.other",
        "content.document",
        "tools.other",
        "tools.web_fetch",
        "other",
    }

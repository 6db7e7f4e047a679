"""A Responses request as the chat request a chat-only upstream can serve."""

from __future__ import annotations

import json

import pytest

from proxy.core.errors import ClientRequestError
from proxy.core.protocols.responses.context import ToolKind, ToolRef
from proxy.core.protocols.responses.request import translate_request

EXEC = {
    "type": "function",
    "name": "exec_command",
    "parameters": {"type": "object"},
    "strict": False,
}


def test_codex_shaped_request():
    body = {
        "model": "gpt-5-codex",
        "stream": True,
        "input": [
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "Be brief."}],
            },
            {"role": "user", "content": [{"type": "input_text", "text": "List files."}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "x"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Sure."}],
            },
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "exec_command",
                "arguments": '{"cmd":"ls"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "a.txt"},
        ],
        "tools": [
            EXEC,
            {
                "type": "namespace",
                "name": "multi_agent_v1",
                "tools": [{"type": "function", "name": "spawn", "parameters": {}}],
            },
            {
                "type": "custom",
                "name": "apply_patch",
                "description": "Patch files.",
                "format": {"type": "grammar", "syntax": "lark", "definition": "start: x"},
            },
            {"type": "web_search"},
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "reasoning": {"effort": "high", "summary": "auto"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "k",
        "client_metadata": {"a": 1},
        "max_output_tokens": 2048,
        "temperature": 0.2,
        "top_p": 0.9,
    }
    chat, context, dropped = translate_request(body)
    assert chat["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "List files."},
        {
            "role": "assistant",
            "content": "Sure.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "exec_command", "arguments": '{"cmd":"ls"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt"},
    ]
    names = [t["function"]["name"] for t in chat["tools"]]
    assert names == ["exec_command", "multi_agent_v1__spawn", "apply_patch"]
    custom = chat["tools"][2]["function"]
    assert custom["parameters"]["properties"] == {
        "input": {"type": "string", "description": "The tool's freeform input."}
    }
    assert "start: x" in custom["description"]
    assert context.tools == {
        "multi_agent_v1__spawn": ToolRef(ToolKind.FUNCTION, "spawn", "multi_agent_v1"),
        "apply_patch": ToolRef(ToolKind.CUSTOM, "apply_patch"),
    }
    assert context.model == "gpt-5-codex"
    for key, value in {
        "model": "gpt-5-codex",
        "stream": True,
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "max_tokens": 2048,
        "temperature": 0.2,
        "top_p": 0.9,
        "reasoning_effort": "high",
    }.items():
        assert chat[key] == value
    assert set(chat) == {
        "model",
        "stream",
        "messages",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "max_tokens",
        "temperature",
        "top_p",
        "reasoning_effort",
    }
    assert sorted(dropped) == sorted(
        [
            "tools.web_search",
            "input.reasoning",
            "reasoning.summary",
            "client_metadata",
            "include",
            "prompt_cache_key",
            "store",
        ]
    )


def test_string_input_and_instructions():
    chat, _, dropped = translate_request({"model": "m", "instructions": "Sys.", "input": "Hi"})
    assert chat["messages"] == [
        {"role": "system", "content": "Sys."},
        {"role": "user", "content": "Hi"},
    ]
    assert dropped == ()


def test_custom_tool_calls_and_outputs_go_back_as_function_calls():
    body = {
        "input": [
            {
                "type": "custom_tool_call",
                "call_id": "c1",
                "name": "apply_patch",
                "input": "*** Begin",
            },
            {
                "type": "custom_tool_call_output",
                "call_id": "c1",
                "output": [{"type": "input_text", "text": "ok"}],
            },
        ],
        "tools": [{"type": "custom", "name": "apply_patch"}],
    }
    chat, _, _ = translate_request(body)
    call = chat["messages"][0]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"input": "*** Begin"}
    assert chat["messages"][1] == {"role": "tool", "tool_call_id": "c1", "content": "ok"}


def test_a_user_image_stays_a_content_part():
    part = {"type": "input_image", "image_url": "data:image/png;base64,AA", "detail": "low"}
    chat, _, _ = translate_request(
        {"input": [{"role": "user", "content": [{"type": "input_text", "text": "What?"}, part]}]}
    )
    assert chat["messages"][0]["content"] == [
        {"type": "text", "text": "What?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA", "detail": "low"}},
    ]


def test_tool_choice_naming_a_namespace_function_is_flattened():
    body = {
        "input": "x",
        "tools": [
            {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "f"}]}
        ],
        "tool_choice": {"type": "function", "name": "f", "namespace": "ns"},
    }
    chat, _, _ = translate_request(body)
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "ns__f"}}


def test_tool_choice_without_any_tool_left_is_dropped():
    chat, _, dropped = translate_request(
        {"input": "x", "tools": [{"type": "web_search"}], "tool_choice": "required"}
    )
    assert "tool_choice" not in chat
    assert "tools" not in chat
    assert set(dropped) == {"tools.web_search", "tool_choice"}


def test_json_schema_text_format_is_response_format():
    fmt = {"type": "json_schema", "name": "out", "schema": {"type": "object"}, "strict": True}
    chat, _, _ = translate_request({"input": "x", "text": {"format": fmt}})
    assert chat["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "out", "schema": {"type": "object"}, "strict": True},
    }


def test_unknown_fields_are_dropped_under_bounded_names():
    _, _, dropped = translate_request(
        {"input": "x", "some_new_field": 1, "tools": [{"type": "brand_new_tool"}]}
    )
    assert set(dropped) == {"other", "tools.other"}


@pytest.mark.parametrize("key", ["previous_response_id", "conversation"])
def test_stateful_requests_are_refused(key):
    with pytest.raises(ClientRequestError, match="stateless"):
        translate_request({"input": "x", key: "resp_1"})


@pytest.mark.parametrize("body", [{}, {"input": 3}, {"input": [1]}, {"input": "x", "tools": {}}])
def test_malformed_requests_are_400(body):
    with pytest.raises(ClientRequestError):
        translate_request(body)

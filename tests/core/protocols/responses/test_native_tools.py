"""Native Responses (the server's own /v1/responses): the tools local servers cannot take sent
as functions, earlier turns' items renamed alike, and the calls named back in the stream."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from proxy.core.protocols.responses.native.tools import NamesBack, native_request
from proxy.core.repairs import Repair
from proxy.core.sse import Event, SSEDecoder, encode_event
from proxy.core.usage import UsageSeen, responses_tokens

FN: dict[str, Any] = {
    "type": "function",
    "name": "exec_command",
    "parameters": {"type": "object", "properties": {}},
}
NAMESPACE: dict[str, Any] = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "agents",
    "tools": [
        {
            "type": "function",
            "name": "spawn_agent",
            "parameters": {"type": "object", "properties": {}},
        }
    ],
}
CUSTOM: dict[str, Any] = {"type": "custom", "name": "apply_patch", "description": "Patch files."}


def test_a_request_with_function_tools_only_goes_as_it_came():
    body = {"model": "m", "input": "hi", "tools": [FN], "text": {"format": {"type": "text"}}}
    sent, names, repairs = native_request(body)
    assert sent is body
    assert (names, repairs) == ({}, Counter())


def test_namespace_custom_and_hosted_tools_become_functions_or_go():
    body: dict[str, Any] = {
        "model": "m",
        "tools": [FN, NAMESPACE, CUSTOM, {"type": "web_search"}],
        "text": {"verbosity": "low"},
        "input": [
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "spawn_agent",
                "namespace": "multi_agent_v1",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "c1", "output": "ok"},
            {
                "type": "custom_tool_call",
                "call_id": "c2",
                "name": "apply_patch",
                "input": "*** Begin Patch",
            },
            {"type": "custom_tool_call_output", "call_id": "c2", "output": "done"},
        ],
    }
    sent, names, repairs = native_request(body)
    assert [t["name"] for t in sent["tools"]] == [
        "exec_command",
        "multi_agent_v1__spawn_agent",
        "apply_patch",
    ]
    assert all(t["type"] == "function" for t in sent["tools"])
    assert sent["tools"][2]["parameters"]["required"] == ["input"]
    assert "text" not in sent
    call, _, custom, output = sent["input"]
    assert call["name"] == "multi_agent_v1__spawn_agent"
    assert "namespace" not in call
    assert custom == {
        "type": "function_call",
        "call_id": "c2",
        "name": "apply_patch",
        "arguments": '{"input":"*** Begin Patch"}',
    }
    assert output["type"] == "function_call_output"
    assert set(repairs) == {
        Repair.NAMESPACE_TOOL,
        Repair.CUSTOM_TOOL,
        Repair.HOSTED_TOOL,
        Repair.TEXT_WITHOUT_FORMAT,
    }
    assert set(names) == {"multi_agent_v1__spawn_agent", "apply_patch"}
    assert body["tools"][1]["type"] == "namespace", "the client's request is not changed"


class Inner:
    def __init__(self) -> None:
        self.repairs: Counter[str] = Counter()
        self.usage = UsageSeen(responses_tokens)
        self.held_bytes = 0
        self.over = False

    def feed(self, chunk: bytes) -> list[bytes]:
        return [chunk]

    def close(self, *, complete: bool) -> list[bytes]:
        return []


def event(payload: dict[str, Any]) -> bytes:
    return encode_event(json.dumps(payload).encode(), event=payload["type"])


def test_the_stream_names_the_clients_tools_back_and_numbers_densely():
    _, names, _ = native_request({"tools": [NAMESPACE, CUSTOM], "input": "x"})
    spawn = {
        "type": "function_call",
        "id": "fc1",
        "call_id": "c1",
        "name": "multi_agent_v1__spawn_agent",
        "arguments": "{}",
    }
    patch = {
        "type": "function_call",
        "id": "fc2",
        "call_id": "c2",
        "name": "apply_patch",
        "arguments": '{"input":"P"}',
    }
    untouched = event({"type": "response.created", "sequence_number": 0, "response": {"id": "r"}})
    stream = [
        untouched,
        event(
            {
                "type": "response.output_item.added",
                "sequence_number": 1,
                "output_index": 0,
                "item": {**spawn, "arguments": ""},
            }
        ),
        event(
            {
                "type": "response.output_item.done",
                "sequence_number": 2,
                "output_index": 0,
                "item": spawn,
            }
        ),
        event(
            {
                "type": "response.output_item.added",
                "sequence_number": 3,
                "output_index": 1,
                "item": {**patch, "arguments": ""},
            }
        ),
        event(
            {
                "type": "response.function_call_arguments.delta",
                "sequence_number": 4,
                "item_id": "fc2",
                "output_index": 1,
                "delta": '{"input":',
            }
        ),
        event(
            {
                "type": "response.function_call_arguments.delta",
                "sequence_number": 5,
                "item_id": "fc2",
                "output_index": 1,
                "delta": '"P"}',
            }
        ),
        event(
            {
                "type": "response.function_call_arguments.done",
                "sequence_number": 6,
                "item_id": "fc2",
                "output_index": 1,
                "arguments": '{"input":"P"}',
            }
        ),
        event(
            {
                "type": "response.output_item.done",
                "sequence_number": 7,
                "output_index": 1,
                "item": patch,
            }
        ),
        event(
            {
                "type": "response.completed",
                "sequence_number": 8,
                "response": {"id": "r", "output": [spawn, patch]},
            }
        ),
    ]
    back = NamesBack(Inner(), names, max_event_bytes=1 << 20)
    out = b"".join(back.feed(b"".join(stream)) + back.close(complete=True))
    assert out.startswith(untouched), "an event that needs nothing goes out as it came"
    payloads = [
        json.loads(e.data) for e in SSEDecoder().feed(out) if isinstance(e, Event) and e.data
    ]
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    assert payloads[2]["item"]["name"] == "spawn_agent"
    assert payloads[2]["item"]["namespace"] == "multi_agent_v1"
    kinds = [p["type"] for p in payloads]
    assert "response.function_call_arguments.delta" not in kinds
    assert kinds[4:6] == [
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
    ]
    assert payloads[5]["input"] == "P"
    custom = payloads[6]["item"]
    assert (custom["type"], custom["name"], custom["input"]) == (
        "custom_tool_call",
        "apply_patch",
        "P",
    )
    assert "arguments" not in custom
    assert [i["type"] for i in payloads[-1]["response"]["output"]] == [
        "function_call",
        "custom_tool_call",
    ]


def test_codex_developer_messages_join_the_instructions_and_its_user_messages_one():
    text = [{"type": "input_text", "text": "rules"}]
    body: dict[str, Any] = {
        "model": "m",
        "instructions": "be brief",
        "input": [
            {"type": "message", "role": "developer", "content": text},
            {
                "type": "message",
                "role": "developer",
                "content": [{"type": "input_text", "text": "skills"}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "context"}],
            },
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "task"}],
            },
        ],
    }
    sent, names, repairs = native_request(body)
    assert sent["instructions"] == "be brief\n\nrules\n\nskills"
    assert sent["input"] == [{"type": "message", "role": "user", "content": "context\n\ntask"}]
    assert set(repairs) == {Repair.SYSTEM_NOT_FIRST, Repair.SAME_ROLE_CONSECUTIVE}
    assert names == {}
    assert body["input"][0]["content"] is text, "the client's request is not changed"

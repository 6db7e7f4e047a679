"""Codex CLI (npm @openai/codex, pinned in tests/clients/package.json) runs its ``exec_command``
tool through the proxy, and its second request carries the command's output: against a
chat-only upstream that streams the call in a broken shape (translate mode), and against a
server's own Responses stream broken as a server breaks it (native mode)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.agents.agents import NODE_BIN
from tests.agents.upstream import MARKER

BROKEN_SHAPES = ["llamacpp-old", "hermes", "qwen3-coder", "object-arguments"]
NATIVE_QUIRKS = ["llamacpp", "args-only-in-done", "no-item-done-for-calls", "markup-in-text"]


def proof(shape: str) -> str:
    return f"{MARKER}-{shape}"


def codex_events(session: dict[str, Any]) -> list[dict[str, Any]]:
    """Codex's ``--json`` events, one a line."""
    events = []
    for line in session["stdout"].splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            events.append({"unparsed": line})
    return events


def agent_messages(session: dict[str, Any]) -> list[str]:
    return [
        e["item"]["text"]
        for e in codex_events(session)
        if e.get("item", {}).get("type") == "agent_message"
    ]


def test_codex_is_installed_by_the_project():
    codex = NODE_BIN / "codex"
    assert codex.exists(), "run npm ci in tests/clients (the project's own package.json pins it)"


@pytest.mark.parametrize("shape", BROKEN_SHAPES)
def test_codex_runs_its_shell_tool_through_the_proxy(sessions, shape):
    (session,) = sessions(("codex", shape, "proxy"))
    assert session["returncode"] == 0, session["stderr"]
    first, second = session["bodies"]  # one tool round trip: exactly two chat requests
    names = [tool["function"]["name"] for tool in first["tools"]]
    assert "exec_command" in names
    assert "web_search" not in names  # a hosted tool, dropped
    assert not {"include", "store", "prompt_cache_key", "client_metadata"} & set(first)
    [call] = second["messages"][-2]["tool_calls"]
    assert call["function"]["name"] == "exec_command"
    tool_result = second["messages"][-1]
    assert tool_result["role"] == "tool"
    assert tool_result["tool_call_id"] == call["id"]
    assert proof(shape) in tool_result["content"]
    commands = [
        e["item"]
        for e in codex_events(session)
        if e.get("item", {}).get("type") == "command_execution"
    ]
    assert commands[-1]["aggregated_output"].strip() == proof(shape)
    assert proof(shape) in agent_messages(session)[-1]


@pytest.mark.parametrize("quirk", NATIVE_QUIRKS)
def test_codex_over_a_broken_native_responses_stream(sessions, quirk):
    """Native mode: the upstream's own Responses stream, broken as a server breaks it."""
    shape = f"native:{quirk}"
    (session,) = sessions(("codex", shape, "proxy"))
    assert session["returncode"] == 0, session["stderr"]
    first, second = session["bodies"]
    assert first["tools"]  # the Responses request went to the upstream as Codex sent it
    outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
    calls = [i for i in second["input"] if i.get("type") == "function_call"]
    assert calls[-1]["name"] == "exec_command"
    assert outputs[-1]["call_id"] == calls[-1]["call_id"]
    assert proof(shape) in outputs[-1]["output"]
    assert proof(shape) in agent_messages(session)[-1]

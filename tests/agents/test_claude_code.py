"""Claude Code runs its Bash tool through the proxy against a chat-only upstream that streams
the call in each broken shape, and its next request carries the command's output back in a
tool_result. Claude Code speaks only the Messages API, so pointed at the chat upstream
directly it gets nowhere: the proxy's translation is what makes it work."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.agents.upstream import MARKER

BROKEN = ["llamacpp-old", "hermes", "qwen3-coder", "object-arguments"]
# what the proxy must have repaired in each shape (its access log's repairs)
REPAIRS = {
    "canonical": set(),
    "llamacpp-old": {"id-inside-function", "name-repeated", "type-missing"},
    "hermes": {"markup-in-content:hermes"},
    "qwen3-coder": {"markup-in-content:qwen3_coder"},
    "object-arguments": {"arguments-not-a-string"},
}


def proof(shape: str) -> str:
    return f"{MARKER}-{shape}"


def access_log(session: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in session["proxy_log"].splitlines() if line.startswith("{")]


def assert_round_trip(session: dict[str, Any], shape: str) -> None:
    assert session["returncode"] == 0, session["stdout"] + session["stderr"]
    result = json.loads(session["stdout"])
    assert result["is_error"] is False, result
    assert proof(shape) in result["result"]
    assert [r.strip() for r in session["tool_results"]] == [proof(shape)]
    # the second request: the call as the assistant's tool_calls, then its output
    second = session["bodies"][-1]["messages"]
    call = next(m for m in second if m.get("tool_calls"))["tool_calls"][0]
    assert call["function"]["name"] == "Bash"
    assert json.loads(call["function"]["arguments"])["command"] == f"echo {proof(shape)}"
    answer = next(m for m in second if m["role"] == "tool")
    assert answer["tool_call_id"] == call["id"]
    lines = access_log(session)
    assert lines, session["proxy_log"]
    assert all(line["path"] == "/v1/messages" and line["status"] == 200 for line in lines)
    assert REPAIRS[shape] <= set(lines[0]["repairs"]), lines[0]["repairs"]
    assert "Traceback" not in session["proxy_log"], session["proxy_log"]


@pytest.mark.parametrize("shape", BROKEN)
def test_claude_code_runs_bash_through_the_proxy(sessions, shape):
    through, direct = sessions(("claude-code", shape, "proxy"), ("claude-code", shape, "direct"))
    assert_round_trip(through, shape)
    assert direct["returncode"] != 0
    assert direct["tool_results"] == []


def test_claude_code_requests_are_translated_for_a_chat_server(sessions):
    (through,) = sessions(("claude-code", "canonical", "proxy"))
    assert_round_trip(through, "canonical")
    first = through["bodies"][0]
    assert first["stream"] is True
    assert first["stream_options"] == {"include_usage": True}
    assert first["messages"][0]["role"] == "system"
    assert all(m["role"] != "system" for m in first["messages"][1:]), "system text merged"
    assert any(t["function"]["name"] == "Bash" for t in first["tools"])
    for dropped in ("metadata", "thinking", "context_management", "output_config", "system"):
        assert dropped not in first

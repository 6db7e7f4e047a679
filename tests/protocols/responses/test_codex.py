"""Codex CLI (npm @openai/codex, pinned in tests/clients/package.json) runs its ``exec_command``
tool through the proxy against a chat-only upstream that streams the call in a broken shape, and
its second request carries the command's output (codex_session.py). Offline: inside a network
namespace with only loopback when this user may make one, else on loopback alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.protocols.responses.codex_session import CODEX

ROOT = Path(__file__).resolve().parents[3]
BROKEN_SHAPES = ["llamacpp-b5494", "hermes-markup", "qwen3-coder-markup", "object-arguments"]
NATIVE_QUIRKS = ["llamacpp", "args-only-in-done", "no-item-done-for-calls", "markup-in-text"]


def _isolated() -> bool:
    """Whether ``unshare -n`` works here (root, or user namespaces allowed)."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    probe = subprocess.run(["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True)
    return probe.returncode == 0


ISOLATED = _isolated()


def run_session(shape: str, workdir: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "tests.protocols.responses.codex_session", shape, str(workdir)]
    if ISOLATED:
        inner = " ".join(f"'{part}'" for part in command)
        command = ["unshare", "-n", "sh", "-c", f"ip link set lo up && exec {inner}"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_codex_is_installed_by_the_project():
    assert CODEX.exists(), "run npm ci in tests/clients (the project's own package.json pins it)"


@pytest.mark.parametrize("shape", BROKEN_SHAPES)
def test_codex_runs_its_shell_tool_through_the_proxy(shape: str, tmp_path: Path):
    result = run_session(shape, tmp_path)
    assert result["returncode"] == 0, result["stderr"]
    first, second = result["requests"]  # one tool round trip: exactly two chat requests
    names = [tool["function"]["name"] for tool in first["tools"]]
    assert "exec_command" in names
    assert "web_search" not in names  # a hosted tool, dropped
    assert not {"include", "store", "prompt_cache_key", "client_metadata"} & set(first)
    [call] = second["messages"][-2]["tool_calls"]
    assert call["function"]["name"] == "exec_command"
    tool_result = second["messages"][-1]
    assert tool_result["role"] == "tool"
    assert tool_result["tool_call_id"] == call["id"]
    assert "toolcall-proxy-42" in tool_result["content"]
    commands = [
        e["item"] for e in result["events"] if e.get("item", {}).get("type") == "command_execution"
    ]
    assert commands[-1]["aggregated_output"].strip() == "toolcall-proxy-42"
    messages = [
        e["item"]["text"]
        for e in result["events"]
        if e.get("item", {}).get("type") == "agent_message"
    ]
    assert "toolcall-proxy-42" in messages[-1]


@pytest.mark.parametrize("quirk", NATIVE_QUIRKS)
def test_codex_over_a_broken_native_responses_stream(quirk: str, tmp_path: Path):
    """Native mode: the upstream's own Responses stream, broken as a server breaks it."""
    result = run_session(f"native:{quirk}", tmp_path)
    assert result["returncode"] == 0, result["stderr"]
    first, second = result["requests"]
    assert first["tools"]  # the Responses request went to the upstream as Codex sent it
    outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
    calls = [i for i in second["input"] if i.get("type") == "function_call"]
    assert calls[-1]["name"] == "exec_command"
    assert outputs[-1]["call_id"] == calls[-1]["call_id"]
    assert "toolcall-proxy-42" in outputs[-1]["output"]
    messages = [
        e["item"]["text"]
        for e in result["events"]
        if e.get("item", {}).get("type") == "agent_message"
    ]
    assert "toolcall-proxy-42" in messages[-1]

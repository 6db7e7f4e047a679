"""Claude Code runs its Bash tool through the proxy against a chat-only upstream that streams
the call in a broken shape, and its next request carries the command's output back in a
tool_result. Offline: each session runs in a network namespace with only loopback
(``unshare --net``, as root), the upstream and the proxy inside it."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.protocols.messages.claude_code.upstream import MARKER, SHAPES

ROOT = Path(__file__).resolve().parents[3]
SESSION_TIMEOUT = 240
# what the proxy must have repaired in each shape (its access log's repairs)
REPAIRS = {
    "llamacpp-old": {"id-inside-function", "name-repeated", "finish-reason-stop"},
    "hermes": {"markup-in-content:hermes", "finish-reason-stop"},
    "qwen3-coder": {"markup-in-content:qwen3_coder", "finish-reason-stop"},
    "object-arguments": {"arguments-not-a-string"},
}


def run_session(shape: str, via: str) -> dict[str, Any]:
    module = "tests.protocols.messages.claude_code.session"
    inner = f"ip link set lo up && exec {sys.executable} -m {module} {shape} {via}"
    done = subprocess.run(
        ["unshare", "--net", "--", "sh", "-c", inner],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SESSION_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, (
        f"the session could not run (unshare --net needs root):\n{done.stderr}"
    )
    session: dict[str, Any] = json.loads(done.stdout)
    return session


@pytest.fixture(scope="module")
def sessions() -> dict[tuple[str, str], dict[str, Any]]:
    specs = [(shape, "proxy") for shape in SHAPES] + [("hermes", "direct")]
    with ThreadPoolExecutor(max_workers=len(specs)) as pool:
        return dict(zip(specs, pool.map(lambda spec: run_session(*spec), specs), strict=True))


def access_log(session: dict[str, Any]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in session["proxy_log"].splitlines() if line.startswith("{")]


@pytest.mark.parametrize("shape", list(SHAPES))
def test_claude_code_runs_bash_through_the_proxy(sessions, shape):
    session = sessions[(shape, "proxy")]
    assert session["returncode"] == 0, session["stdout"] + session["stderr"]
    result = json.loads(session["stdout"])
    assert result["is_error"] is False, result
    assert result["num_turns"] == 2
    proof = f"{MARKER}-{shape}"
    assert proof in result["result"]
    # the second request carries the command's output, as a tool message after the call
    assert [r.strip() for r in session["tool_results"]] == [proof]
    second = session["requests"][-1]["messages"]
    call = next(m for m in second if m.get("tool_calls"))
    assert call["tool_calls"][0]["function"]["name"] == "Bash"
    assert json.loads(call["tool_calls"][0]["function"]["arguments"])["command"] == f"echo {proof}"
    answer = next(m for m in second if m["role"] == "tool")
    assert answer["tool_call_id"] == call["tool_calls"][0]["id"]
    lines = access_log(session)
    assert all(line["path"] == "/v1/messages" and line["status"] == 200 for line in lines)
    assert REPAIRS[shape] <= set(lines[0]["repairs"]), lines[0]["repairs"]
    assert "Traceback" not in session["proxy_log"]


def test_claude_code_requests_are_translated_for_a_chat_server(sessions):
    first = sessions[("hermes", "proxy")]["requests"][0]
    assert first["stream"] is True
    assert first["stream_options"] == {"include_usage": True}
    assert first["messages"][0]["role"] == "system"
    assert all(m["role"] != "system" for m in first["messages"][1:]), "system text merged"
    assert any(t["function"]["name"] == "Bash" for t in first["tools"])
    for dropped in ("metadata", "thinking", "context_management", "output_config", "system"):
        assert dropped not in first


def test_the_chat_upstream_alone_cannot_serve_claude_code(sessions):
    session = sessions[("hermes", "direct")]
    assert session["returncode"] != 0
    assert session["tool_results"] == []
    assert session["other_paths"][0].startswith("POST /v1/messages")

"""OpenCode runs its bash tool through the proxy against a chat upstream that streams the call
in each broken shape, and sends the command's output back in its next request. Pointed at the
same upstream directly, it fails on every broken shape: the proxy is what makes it work."""

from __future__ import annotations

import pytest

from tests.agents.upstream import MARKER

BROKEN = ["llamacpp-old", "hermes", "qwen3-coder", "object-arguments", "gemma4"]


def proof(shape: str) -> str:
    return f"{MARKER}-{shape}"


@pytest.mark.parametrize("shape", BROKEN)
def test_opencode_runs_the_tool_through_the_proxy_and_not_without_it(sessions, shape):
    through, direct = sessions(("opencode", shape, "proxy"), ("opencode", shape, "direct"))
    assert through["returncode"] == 0, through["stdout"] + through["stderr"]
    assert [r.strip() for r in through["tool_results"]] == [proof(shape)], through["stdout"]
    assert "Traceback" not in through["proxy_log"], through["proxy_log"]
    assert not any(proof(shape) in r for r in direct["tool_results"]), direct["stdout"]


def test_opencode_runs_a_canonical_call_both_ways(sessions):
    through, direct = sessions(
        ("opencode", "canonical", "proxy"), ("opencode", "canonical", "direct")
    )
    for session in (through, direct):
        assert session["returncode"] == 0, session["stdout"] + session["stderr"]
        assert [r.strip() for r in session["tool_results"]] == [proof("canonical")]

"""Issue 24 item 1 through the running proxy: Kimi K2 puts ``finish_reason: "tool_calls"`` on
every whole-call chunk, GLM 4.6 sends the finish twice with a call between. A real aiohttp
upstream replays each field stream event by event; chat, Responses and Messages clients must
each see both calls whole and one finish, at the end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.core.protocols.messages import checker as messages_checker
from tests.core.protocols.responses import checker as responses_checker
from tests.support import strict_checker
from tests.support.metrics import scrape, value
from tests.support.upstreams import replay_app

FIELD = Path(__file__).parents[1] / "fixtures" / "field"
STREAMS = {
    "kimi": (
        FIELD / "kimi-k2-finish-on-every-call.chat.sse",
        ["functions.add:0", "functions.add:1"],
    ),
    "glm": (FIELD / "glm-4.6-finish-twice-call-between.chat.sse", ["call_glm0", "call_glm1"]),
}
ARGS = [{"a": 1, "b": 2}, {"a": 2, "b": 3}]
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
PROMPT = "add 1 and 2, then 2 and 3"
CHAT = {
    "model": "m",
    "stream": True,
    "messages": [{"role": "user", "content": PROMPT}],
    "tools": [{"type": "function", "function": {"name": "add", "parameters": SCHEMA}}],
}
RESPONSES = {
    "model": "m",
    "stream": True,
    "input": PROMPT,
    "tools": [{"type": "function", "name": "add", "parameters": SCHEMA}],
}
MESSAGES = {
    "model": "m",
    "stream": True,
    "max_tokens": 100,
    "messages": [{"role": "user", "content": PROMPT}],
    "tools": [{"name": "add", "input_schema": SCHEMA}],
}


async def _proxy(stream: str, start_upstream: StartUpstream, start_proxy: StartProxy) -> Any:
    upstream = await start_upstream(replay_app(STREAMS[stream][0].read_bytes()))
    return await start_proxy(UpstreamSettings(name="u", url=upstream_url(upstream)))


@pytest.mark.parametrize("stream", sorted(STREAMS))
async def test_a_chat_client_gets_every_call_then_one_finish(
    stream: str, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    proxy = await _proxy(stream, start_upstream, start_proxy)
    resp = await proxy.post("/v1/chat/completions", json=CHAT)
    assert resp.status == 200
    output = await resp.read()
    assert strict_checker.check(output) == []
    seen = strict_checker.reconstruct(output).choices[0]
    assert [c.id for c in seen.calls] == STREAMS[stream][1]
    assert [json.loads(c.text) for c in seen.calls] == ARGS
    assert (seen.finishes, seen.finish_reason) == (1, "tool_calls")
    last = [c for c in strict_checker.chunks(output) if isinstance(c, dict) and c["choices"]][-1]
    assert last["choices"][0]["finish_reason"] == "tool_calls"  # the finish is the last word
    usage = [
        c["usage"] for c in strict_checker.chunks(output) if isinstance(c, dict) and c.get("usage")
    ]
    assert usage == [
        {
            "prompt_tokens": 91 if stream == "kimi" else 88,
            "completion_tokens": 38 if stream == "kimi" else 41,
            "total_tokens": 129,
        }
    ]
    samples = await scrape(proxy)
    labels = {"upstream": "u", "model": "m", "side": "response"}
    assert value(samples, "toolcall_proxy_repairs_total", kind="finish-early", **labels) == 1


@pytest.mark.parametrize("stream", sorted(STREAMS))
async def test_a_responses_client_gets_both_calls_whole(
    stream: str, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    # before the fix the second call went out with arguments "" and status incomplete inside
    # a response.completed (pydantic-ai and langchain got {} for {"a": 2, "b": 3})
    proxy = await _proxy(stream, start_upstream, start_proxy)
    resp = await proxy.post("/v1/responses", json=RESPONSES)
    assert resp.status == 200
    checked = responses_checker.check(await resp.read())
    assert checked.response is not None
    assert checked.response["status"] == "completed"
    assert [c["call_id"] for c in checked.calls] == STREAMS[stream][1]
    assert [json.loads(c["arguments"]) for c in checked.calls] == ARGS
    assert [c["status"] for c in checked.calls] == ["completed", "completed"]


@pytest.mark.parametrize("stream", sorted(STREAMS))
async def test_a_messages_client_gets_both_calls_and_one_stop(
    stream: str, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    proxy = await _proxy(stream, start_upstream, start_proxy)
    resp = await proxy.post("/v1/messages", json=MESSAGES)
    assert resp.status == 200
    result = messages_checker.check(await resp.read())
    assert [b["id"] for b in result.tool_uses] == STREAMS[stream][1]
    assert [b["input"] for b in result.tool_uses] == ARGS
    assert result.message["stop_reason"] == "tool_use"
    assert [e["type"] for e in result.events].count("message_delta") == 1

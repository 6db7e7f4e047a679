"""Real Node clients of the Responses API through the real proxy over a chat-only upstream that
streams the call in broken shapes: openai-node ``responses.stream`` and the Vercel AI SDK's
``openai.responses(...)`` with a tool (tests/clients/drive_responses.mjs; the packages are pinned
in tests/clients/package.json)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from proxy.settings import UpstreamSettings
from tests.conftest import upstream_url
from tests.core.protocols.responses.chat_replay import ChatReplay

CLIENTS = Path(__file__).resolve().parents[3] / "clients"
DRIVER = CLIENTS / "drive_responses.mjs"
ARGS = {"get_weather": {"location": "Paris"}}
SHAPES = ["canonical", "llamacpp-old", "hermes", "qwen3-coder", "object-arguments"]


async def drive(job: dict[str, Any]) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is needed for the client suite"
    process = await asyncio.create_subprocess_exec(
        node,
        str(DRIVER),
        cwd=CLIENTS,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(json.dumps(job).encode()), 60)
    assert process.returncode == 0, stderr.decode(errors="replace")
    result: dict[str, Any] = json.loads(stdout)
    return result


async def _proxy_url(start_upstream, start_proxy, replay: ChatReplay) -> str:
    server = await start_upstream(replay.app)
    proxy = await start_proxy(UpstreamSettings(name="up", url=upstream_url(server)))
    return str(proxy.make_url("")).rstrip("/")


@pytest.mark.parametrize("shape", SHAPES)
async def test_openai_node_responses_stream_gets_the_call(start_upstream, start_proxy, shape):
    replay = ChatReplay(shape, ARGS)
    base = await _proxy_url(start_upstream, start_proxy, replay)
    out = await drive(
        {"client": "node-openai", "baseURL": base, "model": "m", "prompt": "Weather?"}
    )
    assert out.get("error") is None, out
    [call] = out["calls"]
    assert (call["name"], json.loads(call["arguments"])) == ("get_weather", {"location": "Paris"})
    assert call["id"]
    assert out["events"][0] == "response.created"
    assert out["events"][-1] == "response.completed"


@pytest.mark.parametrize("shape", SHAPES)
async def test_vercel_ai_sdk_responses_gets_the_call(start_upstream, start_proxy, shape):
    replay = ChatReplay(shape, ARGS)
    base = await _proxy_url(start_upstream, start_proxy, replay)
    out = await drive({"client": "ai-sdk", "baseURL": base, "model": "m", "prompt": "Weather?"})
    assert out.get("error") is None, out
    [call] = out["calls"]
    assert (call["name"], json.loads(call["arguments"])) == ("get_weather", {"location": "Paris"})


async def test_vercel_ai_sdk_runs_a_tool_round_trip(start_upstream, start_proxy):
    replay = ChatReplay("hermes", ARGS)
    base = await _proxy_url(start_upstream, start_proxy, replay)
    job = {
        "client": "ai-sdk",
        "baseURL": base,
        "model": "m",
        "prompt": "Weather?",
        "roundTrip": True,
    }
    out = await drive(job)
    assert out.get("error") is None, out
    assert out["text"] == "The tool said: sunny in Paris"
    tool_message = replay.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["tool_call_id"] == out["calls"][0]["id"]

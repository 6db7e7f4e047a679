"""Node Anthropic clients through the real proxy: @anthropic-ai/sdk's ``messages.stream`` and
the Vercel AI SDK's ``@ai-sdk/anthropic`` with a tool, over a chat-only upstream whose calls
need repair (translate mode)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.core.protocols.messages.upstreams import Recording, chat_upstream, golden

DRIVER = Path(__file__).parents[3] / "clients" / "drive_anthropic.mjs"
TOOLS = [
    {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "input_schema": {
            "type": "object",
            "properties": {"location": {"type": "string"}, "unit": {"type": "string"}},
        },
    },
    {
        "name": "get_time",
        "description": "Get the time in a timezone",
        "input_schema": {"type": "object", "properties": {"timezone": {"type": "string"}}},
    },
]


async def drive(client: str, base_url: str) -> dict[str, Any]:
    node = shutil.which("node")
    assert node is not None, "node is needed for the client suite"
    job = {
        "client": client,
        "baseURL": base_url,
        "model": "claude-x",
        "prompt": "weather?",
        "tools": TOOLS,
    }
    process = await asyncio.create_subprocess_exec(
        node,
        str(DRIVER),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(json.dumps(job).encode()), timeout=60)
    assert process.returncode == 0, err.decode()
    result: dict[str, Any] = json.loads(out)
    return result


@pytest.mark.parametrize("client", ["anthropic-sdk", "ai-sdk-anthropic"])
async def test_node_client_rebuilds_the_repaired_parallel_calls(
    client, start_upstream, start_proxy
):
    recording = Recording()
    server = await start_upstream(
        chat_upstream(lambda _: golden("fixture-llamacpp-b9821-parallel-tool-calls"), recording)
    )
    proxy = await start_proxy(server)
    result = await drive(client, str(proxy.make_url("")).rstrip("/"))
    assert result["error"] is None, result
    assert [(c["name"], c["input"]) for c in result["calls"]] == [
        ("get_weather", {"location": "Tokyo", "unit": "celsius"}),
        ("get_time", {"timezone": "CET"}),
    ]
    assert [c["id"] for c in result["calls"]] == [
        "rXCV3tBV247voA4g25GMPe9R3u0wXPpf",
        "9DOwZ6qJfEiAmsgt562Gi66OvOgdMPry",
    ]
    assert not any(c.get("invalid") for c in result["calls"])
    assert result["stop_reason"] in ("tool_use", "tool-calls")
    assert recording.bodies[0]["tools"][1]["function"]["name"] == "get_time"

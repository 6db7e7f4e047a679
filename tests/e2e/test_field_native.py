"""Issue 24's native field streams through the running proxy: a real aiohttp upstream on
127.0.0.1 replays each stream of tests/fixtures/field/ event by event to an upstream in native
mode; the client gets the repaired stream, and the repair is in the metrics and the access
line."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from proxy.settings import UpstreamSettings
from proxy.shell.accesslog import ACCESS_LOGGER
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.core.protocols.messages import checker as messages_checker
from tests.support.accesslog import logged
from tests.support.metrics import scrape, value
from tests.support.upstreams import replay_app

FIELD = Path(__file__).parents[1] / "fixtures" / "field"
ADD_SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}


def messages_request(*tools: str) -> dict[str, Any]:
    return {
        "model": "m",
        "stream": True,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "go"}],
        "tools": [{"name": name, "input_schema": ADD_SCHEMA} for name in tools],
    }


async def native_proxy(
    body: bytes, start_upstream: StartUpstream, start_proxy: StartProxy, **settings: Any
) -> Any:
    upstream = await start_upstream(replay_app(body))
    return await start_proxy(
        UpstreamSettings(
            name="u", url=upstream_url(upstream), responses="native", messages="native", **settings
        )
    )


async def counted(proxy: Any, kind: str) -> float | None:
    samples = await scrape(proxy)
    labels = {"upstream": "u", "model": "m", "side": "response"}
    return value(samples, "toolcall_proxy_repairs_total", kind=kind, **labels)


async def test_kimis_stop_after_each_call_reaches_a_messages_client_once_at_the_end(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    body = (FIELD / "kimi-k2-stop-after-each-call.messages.sse").read_bytes()
    proxy = await native_proxy(body, start_upstream, start_proxy)
    resp = await proxy.post("/v1/messages", json=messages_request("add"))
    assert resp.status == 200
    result = messages_checker.check(await resp.read())
    assert [b["id"] for b in result.tool_uses] == ["functions.add:0", "functions.add:1"]
    assert [b["input"] for b in result.tool_uses] == [{"a": 1, "b": 2}, {"a": 2, "b": 3}]
    assert result.message["stop_reason"] == "tool_use"
    assert [e["type"] for e in result.events][-2:] == ["message_delta", "message_stop"]
    assert [e["type"] for e in result.events].count("message_delta") == 1
    [record] = await logged(caplog)
    assert record["repairs"]["message-delta-early"] == 1
    assert await counted(proxy, "message-delta-early") == 1

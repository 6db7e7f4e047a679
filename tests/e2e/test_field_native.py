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
from tests.core.protocols.responses import checker as responses_checker
from tests.support.accesslog import logged
from tests.support.metrics import scrape, value
from tests.support.upstreams import replay_app

FIELD = Path(__file__).parents[1] / "fixtures" / "field"
CHAT_MESSAGES = [{"role": "user", "content": "go"}]
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


B11434_MESSAGE = "The model produced output that does not match the expected peg-native format"


async def test_llama_servers_responses_error_reaches_the_client_as_error_and_failed(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    body = (FIELD / "llamacpp-b11434-error.responses.sse").read_bytes()
    proxy = await native_proxy(body, start_upstream, start_proxy)
    resp = await proxy.post("/v1/responses", json={"model": "m", "stream": True, "input": "hi"})
    assert resp.status == 200
    checked = responses_checker.check(await resp.read())
    assert [e["type"] for e in checked.events][-2:] == ["error", "response.failed"]
    assert checked.events[-2]["message"] == B11434_MESSAGE
    assert checked.response is not None
    assert checked.response["status"] == "failed"
    assert checked.response["error"]["message"] == B11434_MESSAGE
    [record] = await logged(caplog)
    assert record["repairs"]["error-reshaped"] == 1
    assert await counted(proxy, "error-reshaped") == 1


async def test_llama_servers_messages_error_is_anthropics_and_nothing_follows(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    body = (FIELD / "llamacpp-b11434-error.messages.sse").read_bytes()
    proxy = await native_proxy(body, start_upstream, start_proxy)
    resp = await proxy.post("/v1/messages", json=messages_request("add"))
    assert resp.status == 200
    out = await resp.read()
    result = messages_checker.check(out)
    assert result.error == {"type": "api_error", "message": B11434_MESSAGE}
    assert [e["type"] for e in result.events][-1] == "error"
    assert b"message_stop" not in out
    [record] = await logged(caplog)
    assert record["repairs"]["error-reshaped"] == 1
    assert await counted(proxy, "error-reshaped") == 1


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/messages"])
async def test_no_protocol_ends_a_chat_upstreams_error_successfully(
    path: str, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    # the chat twin in translate mode (the control of item 7): every client sees the error
    body = (FIELD / "llamacpp-b11434-error.chat.sse").read_bytes()
    upstream = await start_upstream(replay_app(body))
    proxy = await start_proxy(UpstreamSettings(name="u", url=upstream_url(upstream)))
    request: dict[str, Any] = {
        "/v1/chat/completions": {"model": "m", "stream": True, "messages": CHAT_MESSAGES},
        "/v1/responses": {"model": "m", "stream": True, "input": "hi"},
        "/v1/messages": messages_request("add"),
    }[path]
    resp = await proxy.post(path, json=request)
    out = await resp.read()
    assert B11434_MESSAGE.encode() in out
    for success in (b"[DONE]", b"response.completed", b"message_stop", b'"finish_reason":"stop"'):
        assert success not in out


async def test_a_spliced_generation_reaches_a_messages_client_after_the_first(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    body = (FIELD / "vertex-spliced-message-start.messages.sse").read_bytes()
    proxy = await native_proxy(body, start_upstream, start_proxy)
    resp = await proxy.post("/v1/messages", json=messages_request("lookup"))
    assert resp.status == 200
    result = messages_checker.check(await resp.read(), abandoned=frozenset({"toolu_first"}))
    assert [b.get("id") for b in result.tool_uses] == ["toolu_first", "toolu_second"]
    assert result.tool_uses[1]["input"] == {"value": "Spark"}
    assert result.message["stop_reason"] == "tool_use"
    [record] = await logged(caplog)
    assert record["repairs"]["generation-spliced"] == 1
    assert await counted(proxy, "generation-spliced") == 1


async def test_a_gateways_message_added_with_content_reaches_a_responses_client_empty(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    body = (FIELD / "gateway-message-added-with-content.responses.sse").read_bytes()
    proxy = await native_proxy(body, start_upstream, start_proxy)
    resp = await proxy.post("/v1/responses", json={"model": "m", "stream": True, "input": "hi"})
    assert resp.status == 200
    checked = responses_checker.check(await resp.read())
    [added] = [e for e in checked.events if e["type"] == "response.output_item.added"]
    assert added["item"]["content"] == []
    assert checked.text == "OK"
    [record] = await logged(caplog)
    assert record["repairs"]["message-added-with-content"] == 1
    assert await counted(proxy, "message-added-with-content") == 1

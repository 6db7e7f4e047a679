"""Issue 24 item 8 through the running proxy: llama-server answers a generation its parser
cannot read with ``500 Failed to parse input at pos N: <the model's text>`` before the stream
(and as an error event inside it). A real aiohttp upstream on 127.0.0.1 sends the field
recordings; every client protocol gets the call the text holds, counted; an upstream with
``recover_parse_failures = false`` passes the error on."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from proxy.settings import UpstreamSettings
from proxy.shell.accesslog import ACCESS_LOGGER
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.core.protocols.messages import checker as messages_checker
from tests.core.protocols.responses import checker as responses_checker
from tests.support import strict_checker
from tests.support.accesslog import logged
from tests.support.metrics import scrape, value
from tests.support.upstreams import replay_app

FIELD = Path(__file__).parents[1] / "fixtures" / "field"
BODY_500 = (FIELD / "llamacpp-parse-failure-with-markup.chat.500.json").read_bytes()
SCHEMA = {"type": "object", "properties": {"location": {"type": "string"}}}
CALL = ("get_weather", {"location": "Paris"})


def chat(stream: bool) -> dict[str, Any]:
    return {
        "model": "m",
        "stream": stream,
        "messages": [{"role": "user", "content": "weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}],
    }


RESPONSES = {
    "model": "m",
    "stream": True,
    "input": "weather in Paris?",
    "tools": [{"type": "function", "name": "get_weather", "parameters": SCHEMA}],
}
MESSAGES = {
    "model": "m",
    "stream": True,
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "weather in Paris?"}],
    "tools": [{"name": "get_weather", "input_schema": SCHEMA}],
}


async def proxy_for(
    body: bytes, start_upstream: StartUpstream, start_proxy: StartProxy, **settings: Any
) -> Any:
    kind = "application/json" if body.startswith(b"{") else "text/event-stream"
    status = 500 if body.startswith(b"{") else 200
    upstream = await start_upstream(replay_app(body, content_type=kind, status=status))
    return await start_proxy(UpstreamSettings(name="u", url=upstream_url(upstream), **settings))


async def counted(proxy: Any) -> float | None:
    samples = await scrape(proxy)
    labels = {"upstream": "u", "model": "m", "side": "response"}
    return value(samples, "toolcall_proxy_repairs_total", kind="parse-failure-recovered", **labels)


async def test_a_streaming_chat_client_gets_the_call_for_the_500(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    proxy = await proxy_for(BODY_500, start_upstream, start_proxy)
    resp = await proxy.post("/v1/chat/completions", json=chat(True))
    assert resp.status == 200
    assert resp.content_type == "text/event-stream"
    out = await resp.read()
    assert strict_checker.check(out) == []
    seen = strict_checker.reconstruct(out).choices[0]
    assert [(c.name, json.loads(c.text)) for c in seen.calls] == [CALL]
    assert seen.finish_reason == "tool_calls"
    [record] = await logged(caplog)
    assert record["repairs"]["parse-failure-recovered"] == 1
    assert await counted(proxy) == 1


async def test_a_chat_client_that_asked_for_one_object_gets_a_completion(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    proxy = await proxy_for(BODY_500, start_upstream, start_proxy)
    resp = await proxy.post("/v1/chat/completions", json=chat(False))
    assert resp.status == 200
    completion = await resp.json()
    [choice] = completion["choices"]
    assert choice["finish_reason"] == "tool_calls"
    [call] = choice["message"]["tool_calls"]
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == CALL


async def test_translated_clients_get_the_call_for_the_500(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    proxy = await proxy_for(BODY_500, start_upstream, start_proxy)
    resp = await proxy.post("/v1/responses", json=RESPONSES)
    assert resp.status == 200
    checked = responses_checker.check(await resp.read())
    assert checked.response is not None
    assert checked.response["status"] == "completed"
    assert [(c["name"], json.loads(c["arguments"])) for c in checked.calls] == [CALL]
    resp = await proxy.post("/v1/messages", json=MESSAGES)
    assert resp.status == 200
    result = messages_checker.check(await resp.read())
    assert [(b["name"], b["input"]) for b in result.tool_uses] == [CALL]
    assert result.message["stop_reason"] == "tool_use"
    resp = await proxy.post("/v1/responses", json={**RESPONSES, "stream": False})
    assert resp.status == 200
    response = await resp.json()
    assert [(i["name"], json.loads(i["arguments"])) for i in response["output"]] == [CALL]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses"])
async def test_turned_off_the_500_goes_on(
    path: str, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    proxy = await proxy_for(BODY_500, start_upstream, start_proxy, recover_parse_failures=False)
    resp = await proxy.post(path, json=chat(True) if path.endswith("completions") else RESPONSES)
    assert resp.status == 500
    assert "Failed to parse input at pos 0" in await resp.text()


async def test_another_500_goes_on_as_it_came(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    other = b'{"error":{"code":500,"message":"Failed to parse input at pos 0: hello","type":"server_error"}}'
    proxy = await proxy_for(other, start_upstream, start_proxy)
    resp = await proxy.post("/v1/chat/completions", json=chat(True))
    assert resp.status == 500
    assert await resp.read() == other


async def test_the_native_error_streams_carry_the_call(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    for path, request, name in (
        ("/v1/messages", MESSAGES, "llamacpp-parse-failure-with-markup.messages.sse"),
        ("/v1/responses", RESPONSES, "llamacpp-parse-failure-with-markup.responses.sse"),
    ):
        proxy = await proxy_for(
            (FIELD / name).read_bytes(),
            start_upstream,
            start_proxy,
            responses="native",
            messages="native",
        )
        resp = await proxy.post(path, json=request)
        assert resp.status == 200
        out = await resp.read()
        if path == "/v1/messages":
            result = messages_checker.check(out)
            assert [(b["name"], b["input"]) for b in result.tool_uses] == [CALL]
        else:
            checked = responses_checker.check(out)
            assert [(c["name"], json.loads(c["arguments"])) for c in checked.calls] == [CALL]
        assert await counted(proxy) == 1


NATIVE = {"responses": "native", "messages": "native"}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
async def test_native_clients_get_the_call_for_the_500(
    stream: bool,
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # the upstream's own /v1/responses and /v1/messages answer the parser failure as a 500
    # before the stream; the native client gets the call in its protocol, as it asked
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    proxy = await proxy_for(BODY_500, start_upstream, start_proxy, **NATIVE)
    resp = await proxy.post("/v1/responses", json={**RESPONSES, "stream": stream})
    assert resp.status == 200
    if stream:
        assert resp.content_type == "text/event-stream"
        checked = responses_checker.check(await resp.read())
        assert checked.response is not None
        assert checked.response["status"] == "completed"
        calls = checked.calls
    else:
        assert resp.content_type == "application/json"
        calls = (await resp.json())["output"]
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [CALL]
    resp = await proxy.post("/v1/messages", json={**MESSAGES, "stream": stream})
    assert resp.status == 200
    if stream:
        result = messages_checker.check(await resp.read())
        blocks, stop = result.tool_uses, result.message["stop_reason"]
    else:
        message = await resp.json()
        blocks, stop = message["content"], message["stop_reason"]
    assert [(b["name"], b["input"]) for b in blocks if b["type"] == "tool_use"] == [CALL]
    assert stop == "tool_use"
    records = await logged(caplog, 2)
    assert [r["repairs"]["parse-failure-recovered"] for r in records] == [1, 1]
    assert await counted(proxy) == 2


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/messages"])
async def test_native_turned_off_or_without_calls_the_500_goes_on(
    path: str, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    body = RESPONSES if path.endswith("responses") else MESSAGES
    proxy = await proxy_for(
        BODY_500, start_upstream, start_proxy, recover_parse_failures=False, **NATIVE
    )
    resp = await proxy.post(path, json=body)
    assert resp.status == 500
    assert await resp.read() == BODY_500
    other = b'{"error":{"code":500,"message":"Failed to parse input at pos 0: hello","type":"server_error"}}'
    proxy = await proxy_for(other, start_upstream, start_proxy, **NATIVE)
    resp = await proxy.post(path, json=body)
    assert resp.status == 500
    assert await resp.read() == other

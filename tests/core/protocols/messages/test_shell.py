"""The shell's part of /v1/messages: inbound keys in ``x-api-key``, which key each mode sends
upstream, the query string, the proxy's own answers and errors in the Anthropic shape."""

from __future__ import annotations

import json

import pytest

from proxy.settings import AuthSettings, UpstreamSettings
from tests.conftest import upstream_url
from tests.core.protocols.messages import streams
from tests.core.protocols.messages.checker import check
from tests.core.protocols.messages.native_helpers import TOOLS_REQUEST
from tests.core.protocols.messages.upstreams import (
    Recording,
    chat_text,
    chat_upstream,
    messages_upstream,
)

REQUEST = {
    "model": "claude-x",
    "max_tokens": 50,
    "stream": True,
    "messages": [{"role": "user", "content": "hi"}],
}
HEADERS = {"anthropic-version": "2023-06-01", "anthropic-beta": "interleaved-thinking-2025-05-14"}
NATIVE_BODY = (
    b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message",'
    b'"role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,'
    b'"usage":{"input_tokens":1,"output_tokens":0}}}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
    b'"stop_sequence":null},"usage":{"output_tokens":0}}\n\n'
    b'event: message_stop\ndata: {"type":"message_stop"}\n\n'
)


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROXY_KEYS", "sk-proxy-1")
    monkeypatch.setenv("UPSTREAM_KEY", "sk-upstream")


async def chat_proxy(start_upstream, start_proxy, recording: Recording, **upstream: object):
    server = await start_upstream(chat_upstream(lambda _: chat_text("ok"), recording))
    settings = UpstreamSettings(name="chat", url=upstream_url(server), **upstream)
    return settings, server


async def test_translate_sends_the_clients_x_api_key_as_bearer(start_upstream, start_proxy):
    recording = Recording()
    settings, _ = await chat_proxy(start_upstream, start_proxy, recording)
    proxy = await start_proxy(settings)
    response = await proxy.post(
        "/v1/messages?beta=true", json=REQUEST, headers={"x-api-key": "sk-user", **HEADERS}
    )
    assert response.status == 200
    await response.read()
    sent = recording.headers[0]
    assert sent["Authorization"] == "Bearer sk-user"
    assert "x-api-key" not in {k.lower() for k in sent}
    assert "anthropic-version" not in {k.lower() for k in sent}
    assert "anthropic-beta" not in {k.lower() for k in sent}
    assert recording.paths == ["/v1/chat/completions"], "the query string is the Messages API's"


async def test_translate_prefers_the_upstreams_own_key(start_upstream, start_proxy, keys):
    recording = Recording()
    settings, _ = await chat_proxy(
        start_upstream, start_proxy, recording, api_key_env="UPSTREAM_KEY"
    )
    proxy = await start_proxy(settings)
    response = await proxy.post("/v1/messages", json=REQUEST, headers={"x-api-key": "sk-user"})
    await response.read()
    assert recording.headers[0]["Authorization"] == "Bearer sk-upstream"


async def test_native_sends_the_upstreams_key_as_x_api_key_and_keeps_the_query(
    start_upstream, start_proxy, keys
):
    recording = Recording()
    server = await start_upstream(messages_upstream(NATIVE_BODY, recording))
    proxy = await start_proxy(
        UpstreamSettings(
            name="n", url=upstream_url(server), messages="native", api_key_env="UPSTREAM_KEY"
        )
    )
    response = await proxy.post(
        "/v1/messages?beta=true", json=REQUEST, headers={"x-api-key": "sk-user", **HEADERS}
    )
    assert await response.read() == NATIVE_BODY
    sent = {k.lower(): v for k, v in recording.headers[0].items()}
    assert sent["x-api-key"] == "sk-upstream"
    assert "authorization" not in sent
    assert sent["anthropic-beta"] == HEADERS["anthropic-beta"]
    assert recording.paths == ["/v1/messages?beta=true"]


async def test_inbound_keys_accept_x_api_key(start_upstream, start_proxy, keys):
    recording = Recording()
    settings, _ = await chat_proxy(start_upstream, start_proxy, recording)
    proxy = await start_proxy(settings, auth=AuthSettings(api_keys_env="PROXY_KEYS"))
    ok = await proxy.post("/v1/messages", json=REQUEST, headers={"x-api-key": "sk-proxy-1"})
    assert ok.status == 200
    await ok.read()
    sent = {k.lower() for k in recording.headers[0]}
    assert "x-api-key" not in sent, "the proxy's key is never forwarded"
    assert "authorization" not in sent
    refused = await proxy.post("/v1/messages", json=REQUEST, headers={"x-api-key": "sk-wrong"})
    assert refused.status == 401
    body = json.loads(await refused.read())
    assert body["type"] == "error"
    assert body["error"]["type"] == "authentication_error"


async def test_unknown_model_is_an_anthropic_not_found_error(start_upstream, start_proxy):
    recording = Recording()
    settings, _ = await chat_proxy(start_upstream, start_proxy, recording, models=["qwen*"])
    proxy = await start_proxy(settings)
    response = await proxy.post("/v1/messages", json=REQUEST)
    assert response.status == 404
    body = json.loads(await response.read())
    assert body == {
        "type": "error",
        "error": {"type": "not_found_error", "message": body["error"]["message"]},
    }


async def test_a_request_that_is_no_messages_request_is_an_invalid_request_error(
    start_upstream, start_proxy
):
    recording = Recording()
    settings, _ = await chat_proxy(start_upstream, start_proxy, recording)
    proxy = await start_proxy(settings)
    response = await proxy.post("/v1/messages", json={"model": "claude-x", "messages": "hi"})
    assert response.status == 400
    assert json.loads(await response.read())["error"]["type"] == "invalid_request_error"
    assert recording.bodies == []


async def test_count_tokens_is_answered_by_the_proxy_in_translate_mode(start_upstream, start_proxy):
    recording = Recording()
    settings, _ = await chat_proxy(start_upstream, start_proxy, recording)
    proxy = await start_proxy(settings)
    body = {"model": "claude-x", "messages": [{"role": "user", "content": "x" * 400}]}
    response = await proxy.post("/v1/messages/count_tokens", json=body)
    assert response.status == 200
    assert json.loads(await response.read()) == {"input_tokens": 100}
    assert recording.bodies == []


async def test_model_map_and_max_tokens_limit_reach_the_chat_upstream(start_upstream, start_proxy):
    recording = Recording()
    settings, _ = await chat_proxy(
        start_upstream,
        start_proxy,
        recording,
        model_map={"claude-*": "qwen3-coder"},
        max_tokens_limit=4096,
    )
    proxy = await start_proxy(settings)
    response = await proxy.post("/v1/messages", json={**REQUEST, "max_tokens": 64000})
    body = await response.read()
    assert (recording.bodies[0]["model"], recording.bodies[0]["max_tokens"]) == (
        "qwen3-coder",
        4096,
    )
    start = json.loads(body.split(b"\n")[1].removeprefix(b"data: "))
    assert start["message"]["model"] == "claude-x", "the client sees the name it asked for"


async def test_an_unreachable_upstream_is_an_anthropic_api_error(start_proxy, unused_tcp_port):
    proxy = await start_proxy(
        UpstreamSettings(name="gone", url=f"http://127.0.0.1:{unused_tcp_port}")
    )
    response = await proxy.post("/v1/messages", json=REQUEST)
    assert response.status == 502
    body = json.loads(await response.read())
    assert body["type"] == "error"
    assert body["error"]["type"] == "api_error"


@pytest.mark.parametrize(
    ("dialects", "blocks"), [("auto", ["text", "tool_use", "text"]), ("none", ["text"])]
)
async def test_native_markup_recovery_follows_the_upstreams_dialects(
    start_upstream, start_proxy, dialects, blocks
):
    recording = Recording()
    broken = streams.sse(streams.hermes_markup(streams.parsed("anthropic-sonnet45-text-only")))
    server = await start_upstream(messages_upstream(broken, recording))
    proxy = await start_proxy(
        UpstreamSettings(name="n", url=upstream_url(server), messages="native", dialects=dialects)
    )
    response = await proxy.post("/v1/messages", json={**REQUEST, "tools": TOOLS_REQUEST["tools"]})
    result = check(await response.read())
    assert [b["type"] for b in result.blocks] == blocks

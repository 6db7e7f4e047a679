"""The anthropic Python SDK through the real proxy in front of real loopback upstreams: a
chat-only one (translate, the default) and one with its own /v1/messages (native)."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest
from aiohttp import web

from proxy.settings import UpstreamSettings
from tests.conftest import upstream_url
from tests.core.protocols.messages import streams
from tests.core.protocols.messages.upstreams import (
    Recording,
    chat_text,
    chat_upstream,
    completion,
    golden,
    messages_upstream,
)

WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather for a city",
    "input_schema": {
        "type": "object",
        "properties": {"location": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["location"],
    },
}
TIME = {
    "name": "get_time",
    "description": "Get the time in a timezone",
    "input_schema": {"type": "object", "properties": {"timezone": {"type": "string"}}},
}
ASK = [{"role": "user", "content": "Weather in Tokyo, and the time in CET?"}]
PARALLEL = [
    ("get_weather", {"location": "Tokyo", "unit": "celsius"}),
    ("get_time", {"timezone": "CET"}),
]


@pytest.fixture
async def clients():
    """Makes SDK clients for a proxy and closes them at the end."""
    made: list[anthropic.AsyncAnthropic] = []

    def make(proxy: Any) -> anthropic.AsyncAnthropic:
        base_url = str(proxy.make_url("")).rstrip("/")
        client = anthropic.AsyncAnthropic(base_url=base_url, api_key="sk-ant-client", max_retries=0)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()


def tool_uses(message: anthropic.types.Message) -> list[tuple[str, object]]:
    return [(b.name, b.input) for b in message.content if b.type == "tool_use"]


async def translate_proxy(start_upstream, start_proxy, reply, recording: Recording):
    server = await start_upstream(chat_upstream(reply, recording))
    return await start_proxy(server)


async def test_stream_get_final_message_rebuilds_the_repaired_calls(
    start_upstream, start_proxy, clients
):
    recording = Recording()
    # llama.cpp b9821 opens each call with the leading { of its arguments (Q13)
    proxy = await translate_proxy(
        start_upstream,
        start_proxy,
        lambda _: golden("fixture-llamacpp-b9821-parallel-tool-calls"),
        recording,
    )
    async with clients(proxy).messages.stream(
        model="claude-local", max_tokens=200, messages=ASK, tools=[WEATHER, TIME]
    ) as stream:
        message = await stream.get_final_message()
    assert tool_uses(message) == PARALLEL
    assert message.stop_reason == "tool_use"
    assert message.model == "claude-local"
    assert message.id.startswith("msg_")
    sent = recording.bodies[0]
    assert sent["stream"] is True
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["tools"][0]["function"]["parameters"] == WEATHER["input_schema"]
    assert sent["messages"] == [{"role": "user", "content": ASK[0]["content"]}]


async def test_create_stream_true_yields_canonical_events(start_upstream, start_proxy, clients):
    recording = Recording()
    proxy = await translate_proxy(
        start_upstream,
        start_proxy,
        lambda _: golden("fixture-llamacpp-b9821-one-tool-call"),
        recording,
    )
    stream = await clients(proxy).messages.create(
        model="claude-local", max_tokens=200, messages=ASK, tools=[WEATHER], stream=True
    )
    kinds = []
    partial = ""
    async for event in stream:
        kinds.append(event.type)
        if event.type == "content_block_delta" and event.delta.type == "input_json_delta":
            partial += event.delta.partial_json
    assert kinds[0] == "message_start"
    assert kinds[-2:] == ["message_delta", "message_stop"]
    assert json.loads(partial) == {"location": "Paris", "unit": "celsius"}


async def test_non_streaming_create_returns_one_message(start_upstream, start_proxy, clients):
    recording = Recording()
    call = {
        "id": "call_7",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"location": "Oslo"}'},
    }
    proxy = await translate_proxy(
        start_upstream,
        start_proxy,
        lambda _: completion({"content": "Checking.", "tool_calls": [call]}, "tool_calls"),
        recording,
    )
    message = await clients(proxy).messages.create(
        model="claude-local-small", max_tokens=100, messages=ASK, tools=[WEATHER]
    )
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.content[0].text == "Checking."
    assert tool_uses(message) == [("get_weather", {"location": "Oslo"})]
    assert message.content[1].id == "call_7"
    assert message.stop_reason == "tool_use"
    assert message.usage.input_tokens == 12
    assert recording.bodies[0].get("stream") in (None, False)


async def test_two_turn_tool_round_trip_keeps_the_call_id(start_upstream, start_proxy, clients):
    recording = Recording()

    def reply(body: dict[str, Any]) -> bytes:
        tool = [m for m in body["messages"] if m["role"] == "tool"]
        if tool:
            return chat_text(f"It is {tool[0]['content']}.")
        return golden("fixture-llamacpp-b9821-one-tool-call")

    proxy = await translate_proxy(start_upstream, start_proxy, reply, recording)
    client = clients(proxy)
    async with client.messages.stream(
        model="c", max_tokens=100, messages=ASK, tools=[WEATHER]
    ) as stream:
        first = await stream.get_final_message()
    call = next(b for b in first.content if b.type == "tool_use")
    history = [
        *ASK,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "18 C"}],
        },
    ]
    async with client.messages.stream(
        model="c", max_tokens=100, messages=history, tools=[WEATHER]
    ) as stream:
        second = await stream.get_final_message()
    assert second.content[0].text == "It is 18 C."
    assert second.stop_reason == "end_turn"
    assert (second.usage.input_tokens, second.usage.output_tokens) == (11, 3)
    sent = recording.bodies[1]["messages"]
    assert sent[1]["tool_calls"][0]["id"] == call.id == "ieEEmS6KIFd3NDzhOh9ZDE1Um1KoaLuQ"
    assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"]) == call.input
    assert sent[2] == {"role": "tool", "tool_call_id": call.id, "content": "18 C"}


async def test_native_llamacpp_stream_is_repaired_for_the_sdk(start_upstream, start_proxy, clients):
    recording = Recording()
    broken = streams.sse(
        streams.llamacpp_b9821(streams.parsed("anthropic-haiku35-parallel-three-tools"))
    )
    server = await start_upstream(messages_upstream(broken, recording))
    proxy = await start_proxy(
        UpstreamSettings(name="native", url=upstream_url(server), messages="native")
    )
    tools = [{"name": "make_directory", "input_schema": {"type": "object"}}]
    async with clients(proxy).messages.stream(
        model="m", max_tokens=99, messages=ASK, tools=tools
    ) as stream:
        message = await stream.get_final_message()
    canonical = streams.parsed("anthropic-haiku35-parallel-three-tools")
    expected = check_calls(canonical)
    assert tool_uses(message) == expected
    assert message.stop_reason == "tool_use"
    assert recording.paths == ["/v1/messages?beta=true"] or recording.paths == ["/v1/messages"]


def check_calls(events: list[dict[str, Any]]) -> list[tuple[str, object]]:
    from tests.core.protocols.messages.checker import check

    return [(b["name"], b["input"]) for b in check(streams.sse(events)).tool_uses]


async def test_upstream_error_before_the_stream_is_an_anthropic_error(
    start_upstream, start_proxy, clients
):
    recording = Recording()

    async def failing(request):
        return web.json_response({"error": {"message": "slow down"}}, status=429)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", failing)
    server = await start_upstream(app)
    proxy = await start_proxy(server)
    with pytest.raises(anthropic.RateLimitError) as raised:
        await clients(proxy).messages.create(model="m", max_tokens=10, messages=ASK)
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["type"] == "error"
    del recording

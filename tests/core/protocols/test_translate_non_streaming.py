"""``stream: false`` in translate mode: one Responses ``response`` / one Messages ``message``,
with the repaired calls, however the chat upstream answers: one JSON completion, or SSE anyway
(some servers stream whatever they are asked). A cut-off upstream is an error, never a clean
answer, and no SSE byte reaches a client that did not ask for a stream. Real aiohttp upstreams on
127.0.0.1, the real proxy, openai-python and the anthropic SDK."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest
from aiohttp import web

from proxy.settings import TimeoutSettings
from tests.agents import shapes

# Any: the tools as they are on the wire, which the SDKs' TypedDicts take
WEATHER_RESPONSES: Any = {
    "type": "function",
    "name": "get_weather",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string"}},
        "required": ["location"],
    },
}
WEATHER_MESSAGES: Any = {
    "name": "get_weather",
    "input_schema": WEATHER_RESPONSES["parameters"],
}
ARGS = {"location": "Paris"}
STREAMED = ["canonical", "llamacpp-old", "hermes", "qwen3-coder"]


def sse_always(
    shape: str, requests: list[dict[str, Any]], *, cut: bool = False, stall: bool = False
) -> web.Application:
    """A chat upstream that streams its call in ``shape`` even when asked not to stream; cut:
    the connection drops in the middle of the call; stall: it sends nothing more from there."""

    async def chat(request: web.Request) -> web.StreamResponse:
        requests.append(await request.json())
        body = shapes.sse(shapes.SHAPES[shape]("get_weather", ARGS, "call_up1"), usage=True)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if stall:
            await response.write(body[: len(body) // 2])
            await asyncio.sleep(30)
        if cut:
            await response.write(body[: len(body) // 2])
            assert request.transport is not None
            request.transport.close()
            return response
        await response.write(body)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


def json_always(requests: list[dict[str, Any]], *, cut: bool = False) -> web.Application:
    """A chat upstream that answers one completion; cut: the connection drops halfway."""

    async def chat(request: web.Request) -> web.StreamResponse:
        requests.append(await request.json())
        call = {
            "id": "call_up1",
            "type": "function",
            "function": {"name": "get_weather", "arguments": json.dumps(ARGS)},
        }
        answer = shapes.completion({"content": None, "tool_calls": [call]}, "tool_calls")
        if not cut:
            return web.json_response(answer)
        body = json.dumps(answer).encode()
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(body[: len(body) // 2])
        assert request.transport is not None
        request.transport.close()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


@pytest.fixture
def proxy_for(start_upstream, start_proxy) -> Callable[..., Any]:
    async def start(app: web.Application) -> Any:
        return await start_proxy(await start_upstream(app))

    return start


RESPONSES_BODY = {"model": "m", "input": "Weather?", "tools": [WEATHER_RESPONSES], "stream": False}
MESSAGES_BODY: dict[str, Any] = {
    "model": "m",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "Weather?"}],
    "tools": [WEATHER_MESSAGES],
    "stream": False,
}


def the_call(path: str, answer: dict[str, Any]) -> tuple[str, object]:
    """The one call in a Response or a Message, checked for the object's own fields."""
    if path == "/v1/responses":
        assert (answer["object"], answer["status"]) == ("response", "completed")
        [call] = answer["output"]
        assert call["type"] == "function_call"
        return call["name"], json.loads(call["arguments"])
    assert (answer["type"], answer["stop_reason"]) == ("message", "tool_use")
    [use] = [block for block in answer["content"] if block["type"] == "tool_use"]
    return use["name"], use["input"]


PATHS = [("/v1/responses", RESPONSES_BODY), ("/v1/messages", MESSAGES_BODY)]


@pytest.mark.parametrize("shape", STREAMED)
@pytest.mark.parametrize(("path", "body"), PATHS)
async def test_stream_false_over_an_sse_answer_is_one_object(proxy_for, path, body, shape):
    requests: list[dict[str, Any]] = []
    proxy = await proxy_for(sse_always(shape, requests))
    raw = await proxy.post(path, json=body)
    assert raw.status == 200
    assert raw.content_type == "application/json"
    data = await raw.read()
    assert b"event:" not in data
    assert b"data:" not in data
    assert the_call(path, json.loads(data)) == ("get_weather", ARGS)
    assert requests[0].get("stream") in (None, False)


async def test_openai_python_non_streaming_over_an_sse_answer(proxy_for):
    proxy = await proxy_for(sse_always("hermes", []))
    base_url = str(proxy.make_url("/v1"))
    async with openai.AsyncOpenAI(base_url=base_url, api_key="sk-test", max_retries=0) as client:
        response = await client.responses.create(
            model="m", input="Weather?", tools=[WEATHER_RESPONSES]
        )
    [call] = response.output
    assert call.type == "function_call"
    assert (call.name, json.loads(call.arguments)) == ("get_weather", ARGS)


async def test_anthropic_non_streaming_over_an_sse_answer(proxy_for):
    proxy = await proxy_for(sse_always("llamacpp-old", []))
    base_url = str(proxy.make_url("")).rstrip("/")
    async with anthropic.AsyncAnthropic(base_url=base_url, api_key="sk", max_retries=0) as client:
        message = await client.messages.create(
            model="m", max_tokens=100, messages=MESSAGES_BODY["messages"], tools=[WEATHER_MESSAGES]
        )
    assert message.stop_reason == "tool_use"
    assert [(b.name, b.input) for b in message.content if b.type == "tool_use"] == [
        ("get_weather", ARGS)
    ]


CUT_OFF = {
    "sse": lambda: sse_always("canonical", [], cut=True),
    "json": lambda: json_always([], cut=True),
}


@pytest.mark.parametrize("answer", list(CUT_OFF))
@pytest.mark.parametrize(("path", "body"), PATHS)
async def test_stream_false_over_a_cut_off_answer_is_an_error(proxy_for, path, body, answer):
    proxy = await proxy_for(CUT_OFF[answer]())
    raw = await proxy.post(path, json=body)
    assert raw.status == 502
    assert raw.content_type == "application/json"
    error = await raw.json()
    assert "error" in error


@pytest.mark.parametrize(("path", "body"), PATHS)
async def test_stream_false_over_a_stalled_answer_is_an_error(
    start_upstream, start_proxy, path, body
):
    server = await start_upstream(sse_always("canonical", [], stall=True))
    proxy = await start_proxy(server, timeouts=TimeoutSettings(idle=0.5))
    async with asyncio.timeout(10):
        raw = await proxy.post(path, json=body)
    assert raw.status == 502
    assert "cut off" in json.dumps(await raw.json())


@pytest.mark.parametrize(("path", "body"), PATHS)
async def test_stream_false_over_a_json_answer_is_one_object(proxy_for, path, body):
    requests: list[dict[str, Any]] = []
    proxy = await proxy_for(json_always(requests))
    raw = await proxy.post(path, json=body)
    assert raw.status == 200
    assert raw.content_type == "application/json"
    assert the_call(path, await raw.json()) == ("get_weather", ARGS)
    assert requests[0].get("stream") in (None, False)


def sse_error(requests: list[dict[str, Any]]) -> web.Application:
    """A chat upstream whose stream reports an error after some text."""

    async def chat(request: web.Request) -> web.Response:
        requests.append(await request.json())
        error = {"error": {"message": "the model crashed", "type": "server_error"}}
        body = shapes.sse(shapes.text("Let me")[:2]).replace(
            b"data: [DONE]", b"data: " + json.dumps(error).encode()
        )
        return web.Response(body=body, content_type="text/event-stream")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


@pytest.mark.parametrize(("path", "body"), PATHS)
async def test_stream_false_over_an_sse_error_is_an_error(proxy_for, path, body):
    proxy = await proxy_for(sse_error([]))
    raw = await proxy.post(path, json=body)
    assert raw.status == 502
    assert "the model crashed" in json.dumps(await raw.json())

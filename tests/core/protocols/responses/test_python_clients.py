"""Real Python clients of the Responses API through the real proxy, over real loopback upstreams:
openai-python (``responses.stream``, ``create(stream=True)``, non-streaming) and the OpenAI
Agents SDK (``Runner.run_streamed`` with a function tool, a two-turn round trip), against a
chat-only upstream streaming the call in each broken shape (translate mode), and against a
server's own broken Responses stream (native mode)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web
from openai import BadRequestError, InternalServerError

from proxy.settings import UpstreamSettings
from tests.agents.shapes import SHAPES
from tests.conftest import upstream_url
from tests.core.protocols.responses import variants as v
from tests.core.protocols.responses.chat_replay import ChatReplay

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string"}},
        "required": ["location"],
    },
}
ARGS = {"get_weather": {"location": "Paris"}}


@pytest.fixture
def serve(start_upstream, start_proxy, openai_of):
    """The proxy in front of an upstream app: the proxy's test client and an openai client."""

    async def start(app: web.Application, **upstream: Any):
        server = await start_upstream(app)
        proxy = await start_proxy(UpstreamSettings(name="up", url=upstream_url(server), **upstream))
        return proxy, openai_of(proxy)

    return start


@pytest.mark.parametrize("shape", list(SHAPES))
async def test_openai_python_responses_stream_gets_the_call(serve, shape):
    replay = ChatReplay(shape, ARGS)
    _, client = await serve(replay.app)
    async with client.responses.stream(
        model="gpt-5-codex", input="Weather in Paris?", tools=[WEATHER]
    ) as stream:
        async for _ in stream:
            pass
        final = await stream.get_final_response()
    calls = [item for item in final.output if item.type == "function_call"]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("get_weather", {"location": "Paris"})
    ]
    assert calls[0].call_id  # the upstream's id, or one the proxy made
    assert final.model == "gpt-5-codex"
    assert final.usage is not None
    assert final.usage.input_tokens == 11
    sent = replay.requests[0]
    assert sent["stream_options"] == {"include_usage": True}
    assert sent["tools"][0]["function"]["name"] == "get_weather"


async def test_openai_python_create_stream_and_a_round_trip(serve):
    replay = ChatReplay("canonical", ARGS, call_id="call_up7")
    _, client = await serve(replay.app)
    stream = await client.responses.create(
        model="m", input="Weather?", tools=[WEATHER], stream=True, max_output_tokens=100
    )
    events = [event async for event in stream]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert done[0].call_id == "call_up7"
    assert replay.requests[0]["max_tokens"] == 100
    # the second turn: the call and its output go back; the upstream sees its own call id
    answer = await client.responses.create(
        model="m",
        tools=[WEATHER],
        input=[
            {"role": "user", "content": "Weather?"},
            {
                "type": "function_call",
                "call_id": "call_up7",
                "name": "get_weather",
                "arguments": done[0].arguments,
            },
            {"type": "function_call_output", "call_id": "call_up7", "output": "sunny, 21 C"},
        ],
    )
    assert answer.output_text == "The tool said: sunny, 21 C"
    messages = replay.requests[1]["messages"]
    assert messages[1]["tool_calls"][0]["id"] == "call_up7"
    assert messages[2] == {"role": "tool", "tool_call_id": "call_up7", "content": "sunny, 21 C"}


async def test_openai_python_non_streaming_gets_the_call(serve):
    replay = ChatReplay("canonical", ARGS)
    _, client = await serve(replay.app)
    response = await client.responses.create(model="m", input="Weather?", tools=[WEATHER])
    assert response.status == "completed"
    [call] = response.output
    assert call.type == "function_call"
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"location": "Paris"})


async def test_previous_response_id_is_a_clear_400(serve):
    replay = ChatReplay("canonical", ARGS)
    _, client = await serve(replay.app)
    with pytest.raises(BadRequestError, match="stateless"):
        await client.responses.create(model="m", input="Hi", previous_response_id="resp_1")
    assert replay.requests == []


async def test_model_map_and_max_tokens_limit_shape_the_chat_request(serve):
    replay = ChatReplay("canonical", ARGS)
    _, client = await serve(
        replay.app,
        model_map={"gpt-5*": "qwen3-coder"},
        max_tokens_limit=512,
    )
    response = await client.responses.create(
        model="gpt-5-codex", input="Hi", max_output_tokens=64000
    )
    assert response.model == "gpt-5-codex"  # the answer echoes the client's name
    assert replay.requests[0]["model"] == "qwen3-coder"
    assert replay.requests[0]["max_tokens"] == 512


async def test_agents_sdk_runs_a_function_tool_round_trip(serve):
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)  # tracing would export to api.openai.com
    seen: list[str] = []

    @function_tool
    def get_weather(location: str) -> str:
        """The weather in a city."""
        seen.append(location)
        return f"sunny in {location}"

    replay = ChatReplay("hermes", ARGS)
    _, client = await serve(replay.app)
    agent = Agent(
        name="weather",
        instructions="Answer with the tool.",
        tools=[get_weather],
        model=OpenAIResponsesModel(model="m", openai_client=client),
    )
    result = Runner.run_streamed(agent, "Weather in Paris?")
    async for _ in result.stream_events():
        pass
    assert seen == ["Paris"]
    assert result.final_output == "The tool said: sunny in Paris"
    assert len(replay.requests) == 2
    assert replay.requests[0]["messages"][0] == {
        "role": "system",
        "content": "Answer with the tool.",
    }


def _native_app(body: bytes) -> web.Application:
    async def responses(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, content_type="text/event-stream")

    app = web.Application()
    app.router.add_post("/v1/responses", responses)
    return app


async def test_native_canonical_stream_passes_byte_identical(serve):
    body = (v.FIXTURES / "responses-openai-gpt4o-parallel-two-calls.sse").read_bytes()
    proxy, _ = await serve(_native_app(body), responses="native")
    resp = await proxy.post("/v1/responses", json={"model": "m", "input": "Hi", "stream": True})
    assert resp.status == 200
    assert await resp.read() == body


async def test_native_llamacpp_stream_is_repaired_for_openai_python(serve):
    body = v.sse(v.llamacpp(v.recorded("responses-openai-gpt4o-parallel-two-calls.sse")))
    proxy, client = await serve(_native_app(body), responses="native")
    async with client.responses.stream(model="m", input="Hi", tools=[WEATHER]) as stream:
        async for _ in stream:
            pass
        final = await stream.get_final_response()
    assert [c.name for c in final.output if c.type == "function_call"] == [
        "get_weather",
        "get_time",
    ]
    metrics = await (await proxy.get("/-/metrics")).text()
    for kind in ("sequence-number-missing", "output-index-missing", "arguments-done-missing"):
        assert f'kind="{kind}"' in metrics


async def test_dropped_fields_are_counted_in_the_metrics(serve):
    replay = ChatReplay("canonical", ARGS)
    proxy, client = await serve(replay.app)
    await client.responses.create(
        model="m",
        input="Hi",
        tools=[WEATHER, {"type": "web_search"}],
        store=False,
        include=["reasoning.encrypted_content"],
    )
    assert "include" not in replay.requests[0]
    metrics = await (await proxy.get("/-/metrics")).text()
    for field in ("tools.web_search", "store", "include"):
        line = f'toolcall_proxy_translate_dropped_total{{field="{field}",protocol="responses"}} 1.0'
        assert line in metrics


async def test_an_upstream_error_before_the_stream_keeps_its_status(serve):
    async def failing(request: web.Request) -> web.Response:
        return web.json_response({"error": {"message": "model not loaded"}}, status=503)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", failing)
    _, client = await serve(app)
    with pytest.raises(InternalServerError) as raised:
        await client.responses.create(model="m", input="Hi", stream=True)
    assert raised.value.status_code == 503
    assert "model not loaded" in str(raised.value)


async def test_native_non_streamed_response_gets_its_missing_call_id(serve):
    body = {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "m",
        "output": [
            {
                "id": "fc_1",
                "type": "function_call",
                "status": "completed",
                "call_id": "",
                "name": "get_weather",
                "arguments": "{}",
            }
        ],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    }

    async def responses(request: web.Request) -> web.Response:
        return web.json_response(body)

    app = web.Application()
    app.router.add_post("/v1/responses", responses)
    _, client = await serve(app, responses="native")
    answer = await client.responses.create(model="m", input="Hi", tools=[WEATHER])
    [call] = answer.output
    assert call.call_id == "call_fc_1"


NAMESPACE = {
    "type": "namespace",
    "name": "multi_agent_v1",
    "description": "agents",
    "tools": [
        {"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}},
    ],
}
CUSTOM = {"type": "custom", "name": "apply_patch", "description": "Patch files."}


def _renamed_calls_app(seen: list[dict[str, Any]]) -> web.Application:
    """A server's own /v1/responses that knows functions only (native_tools.py sent the
    client's namespace and custom tools as such): it calls both, whole or streamed."""
    output = [
        {
            "id": "fc_1",
            "type": "function_call",
            "status": "completed",
            "call_id": "call_1",
            "name": "multi_agent_v1__spawn_agent",
            "arguments": "{}",
        },
        {
            "id": "fc_2",
            "type": "function_call",
            "status": "completed",
            "call_id": "call_2",
            "name": "apply_patch",
            "arguments": '{"input":"*** Begin Patch"}',
        },
    ]
    response = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1800000000,
        "status": "completed",
        "model": "m",
        "output": output,
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    }

    async def responses(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        seen.append(body)
        if not body.get("stream"):
            return web.json_response(response)
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": {**response, "output": []}},
        ]
        for index, item in enumerate(output):
            events += [
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "arguments": "", "status": "in_progress"},
                },
                {
                    "type": "response.function_call_arguments.delta",
                    "output_index": index,
                    "item_id": item["id"],
                    "delta": item["arguments"],
                },
                {
                    "type": "response.function_call_arguments.done",
                    "output_index": index,
                    "item_id": item["id"],
                    "arguments": item["arguments"],
                },
                {"type": "response.output_item.done", "output_index": index, "item": item},
            ]
        events.append({"type": "response.completed", "response": response})
        text = "".join(
            f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n"
            for n, e in enumerate(events)
        )
        return web.Response(body=text.encode(), content_type="text/event-stream")

    app = web.Application()
    app.router.add_post("/v1/responses", responses)
    return app


async def test_native_non_streamed_calls_of_renamed_tools_come_back_as_the_clients(serve):
    """Issue 23: the request sent the namespace and custom tools as functions; the whole
    answer names them back (as the stream does), and openai-python parses the client's items."""
    seen: list[dict[str, Any]] = []
    _, client = await serve(_renamed_calls_app(seen), responses="native")
    answer = await client.responses.create(model="m", input="Go", tools=[NAMESPACE, CUSTOM])
    assert [t["name"] for t in seen[0]["tools"]] == ["multi_agent_v1__spawn_agent", "apply_patch"]
    spawn, patch = answer.output
    assert spawn.type == "function_call"
    assert (spawn.name, spawn.namespace, spawn.call_id) == (
        "spawn_agent",
        "multi_agent_v1",
        "call_1",
    )
    assert patch.type == "custom_tool_call"
    assert (patch.name, patch.input, patch.call_id) == ("apply_patch", "*** Begin Patch", "call_2")


async def test_native_whole_and_streamed_answers_name_the_tools_back_alike(serve):
    seen: list[dict[str, Any]] = []
    proxy, _ = await serve(_renamed_calls_app(seen), responses="native")
    request = {"model": "m", "input": "Go", "tools": [NAMESPACE, CUSTOM]}
    whole = await (await proxy.post("/v1/responses", json=request)).json()
    resp = await proxy.post("/v1/responses", json={**request, "stream": True})
    events = [
        json.loads(line[len("data: ") :])
        for line in (await resp.text()).splitlines()
        if line.startswith("data: ")
    ]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"]["output"] == whole["output"]
    assert [i["type"] for i in whole["output"]] == ["function_call", "custom_tool_call"]
    assert "arguments" not in whole["output"][1]


async def test_native_non_streamed_answer_without_renamed_calls_passes_byte_for_byte(serve):
    body = json.dumps({"id": "resp_1", "object": "response", "output": [], "usage": {}}).encode()

    async def responses(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/responses", responses)
    proxy, _ = await serve(app, responses="native")
    resp = await proxy.post(
        "/v1/responses", json={"model": "m", "input": "Go", "tools": [NAMESPACE, CUSTOM]}
    )
    assert await resp.read() == body

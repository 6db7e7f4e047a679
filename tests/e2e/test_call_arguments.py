"""Issue 25 through the running proxy, in front of a real aiohttp upstream that ignores
``parallel_tool_calls: false`` (llama-server b11434 on its Qwen2.5 path; its /v1/messages drops
``disable_parallel_tool_use``): every protocol and mode gets the first call only, the rest
counted; and a call that does not fit its tool's schema is counted in the metrics (labelled by
kind) and the access line, its bytes unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.support.accesslog import logged
from tests.support.metrics import scrape, value
from tests.support.streams import chunks
from tests.support.upstreams import replay_app

PROTOCOLS = Path(__file__).parents[1] / "fixtures" / "protocols"
R_TWO_CALLS = (PROTOCOLS / "responses-openai-gpt4o-parallel-two-calls.sse").read_bytes()
M_THREE_CALLS = (PROTOCOLS / "messages-anthropic-haiku35-parallel-three-tools.sse").read_bytes()

SCHEMA = {
    "type": "object",
    "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["location"],
}
CHAT_TOOLS = [
    {"type": "function", "function": {"name": n, "parameters": SCHEMA}}
    for n in ("get_weather", "get_time")
]
RESPONSES_TOOLS = [
    {"type": "function", "name": n, "parameters": SCHEMA} for n in ("get_weather", "get_time")
]
DIR_SCHEMA = {"type": "object", "properties": {"parent": {"type": "string"}}}
MESSAGES_TOOLS = [{"name": "make_directory", "input_schema": DIR_SCHEMA}]


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    return b"data: " + orjson.dumps({**body, "choices": [choice]}) + b"\n\n"


def _call(index: int, name: str, args: str) -> dict[str, Any]:
    return {
        "index": index,
        "id": f"call_{index}",
        "type": "function",
        "function": {"name": name, "arguments": args},
    }


CALLS = [
    ("get_weather", '{"location": "Paris"}'),
    ("get_time", '{"location": "Paris", "days": "2"}'),
]
CHAT_STREAM = (
    _chunk({"role": "assistant", "content": None})
    + b"".join(_chunk({"tool_calls": [_call(i, n, a)]}) for i, (n, a) in enumerate(CALLS))
    + _chunk({}, "tool_calls")
    + b"data: [DONE]\n\n"
)
CHAT_COMPLETION = orjson.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [_call(i, n, a) for i, (n, a) in enumerate(CALLS)],
                },
                "finish_reason": "tool_calls",
            }
        ],
    }
)


class IgnoresParallel:
    """An upstream that sends several calls whatever the request says; records the bodies."""

    def __init__(self) -> None:
        self.bodies: list[Any] = []
        self.app = web.Application()
        self.app.router.add_post("/v1/{tail:.*}", self._post)

    async def _post(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        stream = body.get("stream") is True
        if request.path.endswith("/chat/completions"):
            if not stream:
                return web.Response(body=CHAT_COMPLETION, content_type="application/json")
            data = CHAT_STREAM
        elif request.path.endswith("/responses"):
            data = R_TWO_CALLS
        else:
            data = M_THREE_CALLS
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for part in data.split(b"\n\n")[:-1]:
            await response.write(part + b"\n\n")
        await response.write_eof()
        return response


def _chat_calls(data: bytes) -> list[tuple[str, str]]:
    calls: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    for chunk in chunks(data):
        for entry in chunk["choices"][0]["delta"].get("tool_calls") or ():
            if entry["function"].get("name"):
                names[entry["index"]] = entry["function"]["name"]
            calls.setdefault(entry["index"], []).append(entry["function"]["arguments"])
    return [(names[i], "".join(parts)) for i, parts in sorted(calls.items())]


async def _post(proxy: Any, path: str, body: dict[str, Any]) -> bytes:
    resp = await proxy.post(path, json=body)
    assert resp.status == 200, await resp.text()
    return bytes(await resp.read())


@pytest.mark.parametrize("enforce", [True, False])
async def test_chat_gets_the_first_call_only(
    enforce: bool, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = IgnoresParallel()
    server = await start_upstream(upstream.app)
    setting = UpstreamSettings(
        name="u", url=upstream_url(server, "/v1"), enforce_parallel_tool_calls=enforce
    )
    proxy = await start_proxy(setting)
    request = {"model": "m", "tools": CHAT_TOOLS, "parallel_tool_calls": False}
    streamed = await _post(proxy, "/v1/chat/completions", {**request, "stream": True})
    whole = orjson.loads(await _post(proxy, "/v1/chat/completions", request))
    assert all(body["parallel_tool_calls"] is False for body in upstream.bodies)
    calls = whole["choices"][0]["message"]["tool_calls"]
    if enforce:
        assert _chat_calls(streamed) == CALLS[:1]
        assert [c["function"]["name"] for c in calls] == ["get_weather"]
    else:
        assert streamed == CHAT_STREAM
        assert len(calls) == 2
    samples = await scrape(proxy)
    dropped = value(
        samples,
        "toolcall_proxy_repairs_total",
        upstream="u",
        model="m",
        kind="parallel-call-dropped",
        side="response",
    )
    assert dropped == (2 if enforce else None)


async def test_translated_responses_and_messages_get_the_first_call_only(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = IgnoresParallel()
    server = await start_upstream(upstream.app)
    proxy = await start_proxy(UpstreamSettings(name="u", url=upstream_url(server, "/v1")))
    responses = await _post(
        proxy,
        "/v1/responses",
        {
            "model": "m",
            "input": "go",
            "tools": RESPONSES_TOOLS,
            "parallel_tool_calls": False,
            "stream": True,
        },
    )
    [done] = [e["response"] for e in chunks(responses) if e.get("type") == "response.completed"]
    assert [(i["name"], i["arguments"]) for i in done["output"]] == CALLS[:1]
    messages = await _post(
        proxy,
        "/v1/messages",
        {
            "model": "m",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "go"}],
            "tools": [{"name": n, "input_schema": SCHEMA} for n in ("get_weather", "get_time")],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
            "stream": True,
        },
    )
    starts = [
        e["content_block"] for e in chunks(messages) if e.get("type") == "content_block_start"
    ]
    assert [b["name"] for b in starts if b["type"] == "tool_use"] == ["get_weather"]
    # both translations said it to the chat upstream, which ignored it
    assert [b.get("parallel_tool_calls") for b in upstream.bodies] == [False, False]


async def test_native_responses_and_messages_get_the_first_call_only(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = IgnoresParallel()
    server = await start_upstream(upstream.app)
    proxy = await start_proxy(
        UpstreamSettings(
            name="u", url=upstream_url(server, "/v1"), responses="native", messages="native"
        )
    )
    responses = await _post(
        proxy,
        "/v1/responses",
        {
            "model": "m",
            "input": "go",
            "tools": RESPONSES_TOOLS,
            "parallel_tool_calls": False,
            "stream": True,
        },
    )
    [done] = [e["response"] for e in chunks(responses) if e.get("type") == "response.completed"]
    assert [i["name"] for i in done["output"]] == ["get_weather"]
    messages = await _post(
        proxy,
        "/v1/messages",
        {
            "model": "m",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "go"}],
            "tools": MESSAGES_TOOLS,
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
            "stream": True,
        },
    )
    starts = [
        e["content_block"] for e in chunks(messages) if e.get("type") == "content_block_start"
    ]
    assert [b["name"] for b in starts if b["type"] == "tool_use"] == ["make_directory"]
    assert "disable_parallel_tool_use" in upstream.bodies[1]["tool_choice"]


async def test_a_mismatch_is_counted_in_the_metrics_and_the_access_line(
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO")
    upstream = IgnoresParallel()
    server = await start_upstream(upstream.app)
    proxy = await start_proxy(UpstreamSettings(name="u", url=upstream_url(server, "/v1")))
    streamed = await _post(
        proxy, "/v1/chat/completions", {"model": "m", "tools": CHAT_TOOLS, "stream": True}
    )
    assert streamed == CHAT_STREAM  # detection changes no byte
    [record] = await logged(caplog)
    assert record["repairs"] == {"args-schema-mismatch:type": 1}
    samples = await scrape(proxy)
    labels = {"upstream": "u", "model": "m"}
    assert value(samples, "toolcall_proxy_args_schema_mismatches_total", kind="type", **labels) == 1
    assert (
        value(
            samples,
            "toolcall_proxy_repairs_total",
            kind="args-schema-mismatch",
            side="response",
            **labels,
        )
        == 1
    )


async def test_healing_reaches_every_translated_protocol(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    """heal_arguments through the chat stream a translation runs on: the Responses and
    Messages clients get the healed arguments, whole, and the chat client too."""
    broken = (
        _chunk({"role": "assistant", "content": None})
        + _chunk({"tool_calls": [_call(0, "get_weather", "{'location': ")]})
        + _chunk(
            {"tool_calls": [{"index": 0, "function": {"arguments": "'Paris', 'days': '2',}"}}]}
        )
        + _chunk({}, "tool_calls")
        + b"data: [DONE]\n\n"
    )
    server = await start_upstream(replay_app(broken))
    proxy = await start_proxy(
        UpstreamSettings(
            name="u", url=upstream_url(server), heal_arguments=True, coerce_arguments=True
        )
    )
    healed = {"location": "Paris", "days": 2}
    chat = await _post(
        proxy, "/v1/chat/completions", {"model": "m", "tools": CHAT_TOOLS, "stream": True}
    )
    [(name, text)] = _chat_calls(chat)
    assert name == "get_weather"
    assert orjson.loads(text) == healed
    responses = await _post(
        proxy,
        "/v1/responses",
        {"model": "m", "input": "go", "tools": RESPONSES_TOOLS, "stream": True},
    )
    [done] = [e["response"] for e in chunks(responses) if e.get("type") == "response.completed"]
    assert [orjson.loads(i["arguments"]) for i in done["output"]] == [healed]
    messages = await _post(
        proxy,
        "/v1/messages",
        {
            "model": "m",
            "max_tokens": 64,
            "messages": [{"role": "user", "content": "go"}],
            "tools": [{"name": n, "input_schema": SCHEMA} for n in ("get_weather", "get_time")],
            "stream": True,
        },
    )
    inputs = [
        e["delta"]["partial_json"]
        for e in chunks(messages)
        if e.get("type") == "content_block_delta" and e["delta"].get("type") == "input_json_delta"
    ]
    assert [orjson.loads("".join(inputs))] == [healed]

"""Every response the proxy sends carries the request's ``X-Request-Id``: passed through,
repaired, translated, answered by the proxy itself, or an error (issue 27: set in one place,
the ``on_response_prepare`` hook, instead of by each response path)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import orjson
import pytest
from aiohttp import web

from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url

CHUNK = {
    "id": "c",
    "object": "chat.completion.chunk",
    "model": "m",
    "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}],
}
COMPLETION = {
    "id": "c",
    "object": "chat.completion",
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
}
MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


async def _chat(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    if not body.get("stream"):
        return web.json_response(COMPLETION)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(b"data: " + orjson.dumps(CHUNK) + b"\n\ndata: [DONE]\n\n")
    await response.write_eof()
    return response


def _answer(response: web.Response) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handler(request: web.Request) -> web.StreamResponse:
        return response

    return handler


def upstream_app() -> web.Application:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", _chat)
    app.router.add_post("/v1/embeddings", _answer(web.json_response({"data": []})))
    app.router.add_post("/v1/messages", _answer(web.json_response(MESSAGE)))
    app.router.add_post("/v1/fail/chat/completions", _answer(web.Response(status=500)))
    return app


CHAT_STREAM = {"model": "chat", "stream": True, "messages": [{"role": "user", "content": "x"}]}
CHAT_WHOLE = {"model": "chat", "messages": [{"role": "user", "content": "x"}]}
RESPONSES = {"model": "chat", "input": "x", "stream": True}
MESSAGES = {"model": "chat", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}]}


@pytest.mark.parametrize(
    ("path", "body", "status"),
    [
        ("/v1/chat/completions", CHAT_STREAM, 200),  # chat, a stream repaired
        ("/v1/chat/completions", CHAT_WHOLE, 200),  # chat, a whole body repaired
        ("/v1/embeddings", {"model": "chat"}, 200),  # passthrough
        ("/v1/responses", RESPONSES, 200),  # translated stream
        ("/v1/responses", {**RESPONSES, "stream": False}, 200),  # translated whole
        ("/v1/fail/responses", RESPONSES, 500),  # translated, the upstream's error
        ("/v1/messages/count_tokens", MESSAGES, 200),  # the proxy's own answer
        ("/v1/messages", {**MESSAGES, "model": "native"}, 200),  # native, repaired whole
        ("/v1/responses", {"model": "chat", "input": 3}, 400),  # the client's mistake
        ("/-/nope", {}, 404),  # the proxy's own error
    ],
)
async def test_every_response_carries_the_request_id(
    start_upstream: StartUpstream, start_proxy: StartProxy, path: str, body: object, status: int
) -> None:
    upstream = await start_upstream(upstream_app())
    proxy = await start_proxy(
        UpstreamSettings(name="chat", url=upstream_url(upstream), models=["chat"]),
        UpstreamSettings(
            name="native", url=upstream_url(upstream), models=["native"], messages="native"
        ),
    )
    resp = await proxy.post(path, json=body, headers={"X-Request-Id": "rid-27"})
    await resp.read()
    assert resp.status == status
    assert resp.headers.getall("X-Request-Id") == ["rid-27"]


async def test_a_request_without_an_id_gets_one_of_the_proxys(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    proxy = await start_proxy(await start_upstream(upstream_app()))
    resp = await proxy.post("/v1/chat/completions", json=CHAT_STREAM)
    await resp.read()
    assert len(resp.headers.getall("X-Request-Id")) == 1
    assert len(resp.headers["X-Request-Id"]) == 32

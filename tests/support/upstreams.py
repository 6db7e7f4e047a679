"""The fake upstreams tests share: small aiohttp apps a test starts on 127.0.0.1 with the
``start_upstream`` fixture (tests/conftest.py). A test whose upstream does one thing of its own
(records one field, stalls at one point) keeps it beside its assertions; an upstream a second
module needs lives here. The hand-driven socket upstream for faults no aiohttp server makes is
tests/support/raw_upstream.py.

- ``serve_writes`` / ``replay_app``: answer every request with the given bytes, one write each
  (``replay_app``: one SSE event a write);
- ``models_app``: ``GET /v1/models`` only, with a status and a delay, recording headers;
- ``stalling_app``: takes every request and answers nothing for a while;
- ``HeldStream``: a chat stream that sends one event (``FIRST``), then waits to be released for
  the rest (``REST``);
- ``AnyUpstream``: takes any request a client's mistake could turn into (issue 26's request
  side), records what reached it and always answers in good shape:


* ``POST .../chat/completions``: a short text, streamed when the body says ``stream: true``,
  else one completion (whatever else the body holds);
* ``POST .../responses`` and ``.../messages`` (native mode): a short, canonical stream of the
  protocol, or its whole object without ``stream: true``;
* ``POST .../messages/count_tokens``: ``{"input_tokens": 1}``;
* ``GET .../models``: one model.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import web

from proxy.shell.readiness import CHECK_PATH
from tests.conftest import template_probe
from tests.support.streams import split_events

CHAT_STREAM = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    b'[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}\n\n'
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    b'[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)
CHAT_COMPLETION = orjson.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
)


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(
        b"event: %s\ndata: %s\n\n" % (event["type"].encode(), orjson.dumps(event))
        for event in events
    )


_RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "status": "completed",
    "model": "m",
    "output": [
        {
            "type": "message",
            "id": "msg_1",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "ok", "annotations": []}],
        }
    ],
    "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
}
RESPONSES_STREAM = _sse(
    [
        {"type": "response.created", "response": {**_RESPONSE, "status": "in_progress"}},
        {"type": "response.completed", "response": _RESPONSE},
    ]
)
_MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "text", "text": "ok"}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
MESSAGES_STREAM = _sse(
    [
        {"type": "message_start", "message": {**_MESSAGE, "content": [], "stop_reason": None}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
)


class AnyUpstream:
    """The upstream app; ``requests`` holds (path, headers, body bytes) of each, in order."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.app = web.Application(client_max_size=1 << 30)
        self.app.router.add_route("*", "/{tail:.*}", self._any)

    @property
    def bodies(self) -> list[Any]:
        return [orjson.loads(body) if body else None for _, _, body in self.requests]

    async def _any(self, request: web.Request) -> web.StreamResponse:
        if template_probe(request.method, request.path, request.headers):
            return web.Response(status=404)  # the proxy's own, not a client's (issue 23)
        body = await request.read()
        self.requests.append((request.path, dict(request.headers), body))
        try:
            payload = orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            payload = None
        stream = isinstance(payload, dict) and payload.get("stream") is True
        path = request.path
        if path.endswith("/models"):
            return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})
        if path.endswith("/count_tokens"):
            return web.json_response({"input_tokens": 1})
        if path.endswith("/chat/completions"):
            if stream:
                return web.Response(body=CHAT_STREAM, content_type="text/event-stream")
            return web.Response(body=CHAT_COMPLETION, content_type="application/json")
        if path.endswith("/responses"):
            if stream:
                return web.Response(body=RESPONSES_STREAM, content_type="text/event-stream")
            return web.json_response(_RESPONSE)
        if path.endswith("/messages"):
            if stream:
                return web.Response(body=MESSAGES_STREAM, content_type="text/event-stream")
            return web.json_response(_MESSAGE)
        return web.json_response({"ok": True})


def replay_app(
    body: bytes, *, content_type: str = "text/event-stream", status: int = 200
) -> web.Application:
    """An upstream that answers every request with ``body``, one SSE event per write."""
    return serve_writes(split_events(body), content_type=content_type, status=status)


def models_app(status: int = 200, *, delay: float = 0.0, seen: list[dict[str, str]] | None = None):
    """An upstream whose GET /v1/models answers ``status`` after ``delay``; records headers."""

    async def models(request: web.Request) -> web.Response:
        if seen is not None:
            seen.append(dict(request.headers))
        await asyncio.sleep(delay)
        return web.json_response({"object": "list", "data": [{"id": "m"}]}, status=status)

    app = web.Application()
    app.router.add_get(CHECK_PATH, models)
    return app


def serve_writes(
    writes: list[bytes],
    *,
    content_type: str = "text/event-stream",
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> web.Application:
    """An upstream answering every request with ``writes``, each flushed on its own (with
    ``headers`` added to its head)."""

    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        head = {**(headers or {}), "Content-Type": content_type}
        response = web.StreamResponse(status=status, headers=head)
        await response.prepare(request)
        for part in writes:
            await response.write(part)
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    return app


def serve_events(body: bytes) -> web.Application:
    """An upstream answering every request with the SSE ``body``, each event written on its
    own, as a server writes them while it generates."""
    return serve_writes([event + b"\n\n" for event in body.split(b"\n\n")[:-1]])


# what ``HeldStream`` sends before it waits, and after
FIRST = b'data: {"n": 1}\n\n'
REST = b'data: {"n": 2}\n\ndata: [DONE]\n\n'


class HeldStream:
    """An upstream whose streams send one event, then wait for ``release`` to finish."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def handler(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(FIRST)
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        await response.write(REST)
        return response

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handler)
        return app


def stalling_app(seconds: float = 30.0) -> web.Application:
    """An upstream that takes every request and answers nothing for ``seconds`` (the proxy's
    template probe gets its 404 at once, so that the proxy starts without waiting)."""

    async def stall(request: web.Request) -> web.Response:
        if template_probe(request.method, request.path, request.headers):
            return web.Response(status=404)
        await asyncio.sleep(seconds)
        return web.Response()

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", stall)
    return app

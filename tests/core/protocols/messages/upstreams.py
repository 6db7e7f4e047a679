"""Loopback upstreams for the Messages app tests: a chat-only server that answers from the
request, and a native Messages server that replays a stream. Each keeps what it was sent."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

GOLDEN = Path(__file__).parents[3] / "golden"


def golden(name: str) -> bytes:
    return (GOLDEN / f"{name}.in.sse").read_bytes()


def chat_text(text: str, usage: tuple[int, int] = (11, 3)) -> bytes:
    chunks: list[dict[str, Any]] = [
        {
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {
            "choices": [],
            "usage": {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": sum(usage),
            },
        },
    ]
    return sse_chunks(chunks)


def sse_chunks(chunks: list[dict[str, Any]]) -> bytes:
    out = b""
    for chunk in chunks:
        full = {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            **chunk,
        }
        out += b"data: " + json.dumps(full).encode() + b"\n\n"
    return out + b"data: [DONE]\n\n"


def completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16},
    }


def split_events(body: bytes) -> list[bytes]:
    return [part + b"\n\n" for part in body.split(b"\n\n") if part]


@dataclass
class Recording:
    """What an upstream was sent: bodies, headers and query strings, in order."""

    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)


def chat_upstream(
    reply: Callable[[dict[str, Any]], bytes | dict[str, Any]], recording: Recording
) -> web.Application:
    """A chat-only server: ``reply(body)`` gives the SSE body (streamed one event per write)
    or a completion object (for ``stream: false``)."""

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        recording.bodies.append(body)
        recording.headers.append(dict(request.headers))
        recording.paths.append(request.path_qs)
        answer = reply(body)
        if isinstance(answer, dict):
            return web.json_response(answer)
        return await stream(request, answer)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    return app


def messages_upstream(body: bytes, recording: Recording, *, status: int = 200) -> web.Application:
    """A server with its own /v1/messages, replaying ``body``."""

    async def messages(request: web.Request) -> web.StreamResponse:
        recording.bodies.append(await request.json())
        recording.headers.append(dict(request.headers))
        recording.paths.append(request.path_qs)
        if status != 200 or not body.startswith(b"event"):
            return web.Response(status=status, body=body, content_type="application/json")
        return await stream(request, body)

    app = web.Application()
    app.router.add_post("/v1/messages", messages)
    return app


async def stream(request: web.Request, body: bytes) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for event in split_events(body):
        await response.write(event)
        await asyncio.sleep(0)
    await response.write_eof()
    return response

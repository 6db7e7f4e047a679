"""The upstream the proxy talks to when rendering is all a test needs: each chat completion
the proxy sends is rendered by the real llama-server's ``POST /apply-template`` (the same
parsing and template as a chat completion, without generating), and answered with a short
canned completion when it rendered, or with the server's own error when it did not. Reads
(``/props``, ``/v1/models``) go to the server as they are."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import ClientSession, web


@dataclass(slots=True)
class Rendered:
    status: int
    body: bytes
    request: dict[str, Any]


@dataclass(slots=True)
class RenderTap:
    server_url: str
    seen: list[Rendered] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 28)
        app.router.add_post("/v1/chat/completions", self._render)
        app.router.add_get("/{tail:.*}", self._read)
        return app

    async def _read(self, request: web.Request) -> web.Response:
        async with ClientSession() as session, session.get(self.server_url + request.path) as resp:
            return web.Response(
                status=resp.status, body=await resp.read(), content_type="application/json"
            )

    async def _render(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        async with (
            ClientSession() as session,
            session.post(
                self.server_url + "/apply-template",
                data=raw,
                headers={"Content-Type": "application/json"},
            ) as resp,
        ):
            answer = await resp.read()
        body = json.loads(raw)
        self.seen.append(Rendered(resp.status, answer, body))
        if resp.status != 200:
            return web.Response(status=resp.status, body=answer, content_type="application/json")
        if not body.get("stream"):
            return web.json_response(_completion())
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in _chunks():
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def _envelope() -> dict[str, Any]:
    return {"id": "chatcmpl-rendered", "created": 0, "model": "tiny"}


def _chunks() -> list[dict[str, Any]]:
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    return [
        {**_envelope(), "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {"role": "assistant", "content": "rendered"}, "finish_reason": None}]},
        {**_envelope(), "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**_envelope(), "object": "chat.completion.chunk", "choices": [], "usage": usage},
    ]  # fmt: skip


def _completion() -> dict[str, Any]:
    message = {"role": "assistant", "content": "rendered"}
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    return {**_envelope(), "object": "chat.completion", "usage": usage,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}  # fmt: skip

"""A chat-only replay upstream for the Responses client tests, streaming calls in broken shapes.

The upstream decides each reply from the request alone, as tests/agents/upstream.py does: a tool
result present -> a final text quoting it; tools offered -> one call to the first tool whose
name is in ``arguments`` (with those arguments); otherwise a short text. Calls go out in one of
the shapes of tests/agents/shapes.py. Every request body is kept, in order, for the test to
look at.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from tests.agents import shapes


class ChatReplay:
    """The upstream app: ``/v1/chat/completions`` only, as a chat-only server has."""

    def __init__(
        self, shape: str, arguments: dict[str, dict[str, Any]], call_id: str = "call_up1"
    ) -> None:
        self.shape = shapes.SHAPES[shape]
        self.arguments = arguments  # tool name -> the arguments of the call to it
        self.call_id = call_id
        self.requests: list[dict[str, Any]] = []
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self._chat)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        messages = body.get("messages", [])
        tool_results = [m for m in messages if m.get("role") == "tool"]
        names = [t["function"]["name"] for t in body.get("tools", [])]
        target = next((n for n in names if n in self.arguments), None)
        if tool_results:
            answer = f"The tool said: {tool_results[-1]['content']}"
            return self._answer(body, shapes.text(answer), {"content": answer}, "stop")
        if target is not None:
            args = self.arguments[target]
            call = {
                "id": self.call_id,
                "type": "function",
                "function": {"name": target, "arguments": json.dumps(args)},
            }
            chunks = self.shape(target, args, self.call_id)
            return self._answer(body, chunks, {"content": None, "tool_calls": [call]}, "tool_calls")
        return self._answer(body, shapes.text("Hello there."), {"content": "Hello there."}, "stop")

    @staticmethod
    def _answer(
        body: dict[str, Any], chunks: list[shapes.Chunk], message: dict[str, Any], finish: str
    ) -> web.Response:
        if body.get("stream"):
            return web.Response(
                body=shapes.sse(chunks, usage=True), content_type="text/event-stream"
            )
        return web.json_response(shapes.completion(message, finish))

"""A chat-only replay upstream for the Responses client tests, streaming calls in broken shapes.

The upstream decides each reply from the request alone (research/protocols.md §5): a tool
result present -> a final text quoting it; tools offered -> one call to the first tool whose
name is in ``arguments`` (with those arguments); otherwise a short text. Calls go out in one of
``SHAPES``: canonical OpenAI chunks, or the way a broken server sends them (old llama.cpp,
hermes or qwen3-coder markup in content, arguments as a JSON object). Every request body is
kept, in order, for the test to look at.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

CHUNK = "chat.completion.chunk"


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-replay",
        "object": CHUNK,
        "created": 1800000000,
        "model": "upstream-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def _sse(chunks: list[dict[str, Any]]) -> bytes:
    usage = _chunk({}, None)
    usage["choices"] = []
    usage["usage"] = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in [*chunks, usage])
    return (body + "data: [DONE]\n\n").encode()


def _pieces(text: str, size: int = 9) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def canonical(name: str, arguments: dict[str, Any], call_id: str) -> bytes:
    text = json.dumps(arguments)
    opening = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": ""},
    }
    return _sse(
        [
            _chunk({"role": "assistant", "content": None, "tool_calls": [opening]}),
            *(
                _chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]})
                for p in _pieces(text)
            ),
            _chunk({}, "tool_calls"),
        ]
    )


def llamacpp_b5494(name: str, arguments: dict[str, Any], call_id: str) -> bytes:
    """Old llama.cpp: the id inside ``function``, no type, the name repeated on every delta."""
    text = json.dumps(arguments)
    return _sse(
        [
            _chunk({"role": "assistant", "content": None}),
            _chunk({"tool_calls": [{"index": 0, "function": {"name": name, "id": call_id}}]}),
            *(
                _chunk({"tool_calls": [{"index": 0, "function": {"name": name, "arguments": p}}]})
                for p in _pieces(text)
            ),
            _chunk({}, "tool_calls"),
        ]
    )


def hermes(name: str, arguments: dict[str, Any], call_id: str) -> bytes:
    markup = f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
    return _sse(
        [
            _chunk({"role": "assistant", "content": ""}),
            *(_chunk({"content": p}) for p in _pieces(markup)),
            _chunk({}, "stop"),
        ]
    )


def qwen3_coder(name: str, arguments: dict[str, Any], call_id: str) -> bytes:
    params = "".join(
        f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n"
        for k, v in arguments.items()
    )
    markup = f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"
    return _sse(
        [
            _chunk({"role": "assistant", "content": ""}),
            *(_chunk({"content": p}) for p in _pieces(markup)),
            _chunk({}, "stop"),
        ]
    )


def object_arguments(name: str, arguments: dict[str, Any], call_id: str) -> bytes:
    """Q19 (koboldcpp): the arguments as a JSON object, in one delta."""
    entry = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
    return _sse(
        [
            _chunk({"role": "assistant", "content": None}),
            _chunk({"tool_calls": [entry]}),
            _chunk({}, "tool_calls"),
        ]
    )


SHAPES: dict[str, Callable[[str, dict[str, Any], str], bytes]] = {
    "canonical": canonical,
    "llamacpp-b5494": llamacpp_b5494,
    "hermes-markup": hermes,
    "qwen3-coder-markup": qwen3_coder,
    "object-arguments": object_arguments,
}


def text_stream(text: str) -> bytes:
    return _sse(
        [
            _chunk({"role": "assistant", "content": ""}),
            *(_chunk({"content": p}) for p in _pieces(text)),
            _chunk({}, "stop"),
        ]
    )


def completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-replay",
        "object": "chat.completion",
        "created": 1800000000,
        "model": "upstream-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


class ChatReplay:
    """The upstream app: ``/v1/chat/completions`` only, as a chat-only server has."""

    def __init__(
        self, shape: str, arguments: dict[str, dict[str, Any]], call_id: str = "call_up1"
    ) -> None:
        self.shape = SHAPES[shape]
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
            return self._answer(body, text_stream(answer), completion({"content": answer}, "stop"))
        if target is not None:
            args = self.arguments[target]
            call = {
                "id": self.call_id,
                "type": "function",
                "function": {"name": target, "arguments": json.dumps(args)},
            }
            whole = completion({"content": None, "tool_calls": [call]}, "tool_calls")
            return self._answer(body, self.shape(target, args, self.call_id), whole)
        return self._answer(
            body, text_stream("Hello there."), completion({"content": "Hello there."}, "stop")
        )

    @staticmethod
    def _answer(body: dict[str, Any], stream: bytes, whole: dict[str, Any]) -> web.Response:
        if body.get("stream"):
            return web.Response(body=stream, content_type="text/event-stream")
        return web.json_response(whole)

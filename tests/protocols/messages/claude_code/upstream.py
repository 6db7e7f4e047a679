"""A chat-only model server for Claude Code: it answers from the request alone
(research/protocols.md section 5) and streams its Bash call in one of the broken shapes.

* A request with a tool result in it: a short text quoting the result.
* A request that offers ``Bash``: one call to it that runs ``echo <MARKER>-<shape>``.
* Anything else (Claude Code's side requests): a short text.

Every request body is kept, so the test can see the second turn's tool result.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from typing import Any, Final

from aiohttp import web

MARKER: Final = "toolcall-proxy-proof"
Chunk = dict[str, Any]


def command(shape: str) -> str:
    return f"echo {MARKER}-{shape}"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> Chunk:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {
        "id": "chatcmpl-cc",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [choice],
    }


def _pieces(text: str, size: int = 6) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _text(text: str) -> list[Chunk]:
    return [
        _chunk({"role": "assistant", "content": ""}),
        *(_chunk({"content": piece}) for piece in _pieces(text)),
        _chunk({}, "stop"),
    ]


def _llamacpp_old(args: dict[str, Any]) -> list[Chunk]:
    """llama.cpp before PR 13800: the id inside function, the name on every delta, no type,
    and finish_reason "stop" after the call (Q1, Q3, Q23)."""
    return [
        _chunk({"role": "assistant", "content": None}),
        _chunk({"tool_calls": [{"index": 0, "function": {"name": "Bash", "id": "call_cc1"}}]}),
        *(
            _chunk({"tool_calls": [{"index": 0, "function": {"name": "Bash", "arguments": piece}}]})
            for piece in _pieces(json.dumps(args))
        ),
        _chunk({}, "stop"),
    ]


def _object_arguments(args: dict[str, Any]) -> list[Chunk]:
    """Arguments as a JSON object, not a string (TGI, some Ollama builds; Q19)."""
    call = {
        "index": 0,
        "id": "call_cc1",
        "type": "function",
        "function": {"name": "Bash", "arguments": args},
    }
    return [
        _chunk({"role": "assistant", "content": None}),
        _chunk({"tool_calls": [call]}),
        _chunk({}, "tool_calls"),
    ]


def _hermes(args: dict[str, Any]) -> list[Chunk]:
    """Hermes markup left in the content (a server without its tool parser; Q32)."""
    return _text(
        "<tool_call>\n" + json.dumps({"name": "Bash", "arguments": args}) + "\n</tool_call>"
    )


def _qwen3_coder(args: dict[str, Any]) -> list[Chunk]:
    """Qwen3-Coder's XML left in the content."""
    params = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in args.items())
    return _text(f"<tool_call>\n<function=Bash>\n{params}</function>\n</tool_call>")


SHAPES: Final = {
    "llamacpp-old": _llamacpp_old,
    "hermes": _hermes,
    "qwen3-coder": _qwen3_coder,
    "object-arguments": _object_arguments,
}


def tool_result(body: dict[str, Any]) -> str | None:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "tool":
            return str(message.get("content"))
    return None


def offers_bash(body: dict[str, Any]) -> bool:
    return any(
        (tool.get("function") or {}).get("name") == "Bash" for tool in body.get("tools") or []
    )


def reply(shape: str, body: dict[str, Any]) -> list[Chunk]:
    result = tool_result(body)
    if result is not None:
        return _text(f"The command printed: {result.strip()}")
    if not offers_bash(body):
        return _text("Proof run")
    return SHAPES[shape]({"command": command(shape), "description": "Print the proof marker"})


class ChatUpstream:
    """The server on 127.0.0.1, on its own loop in a thread (Claude Code is a subprocess)."""

    def __init__(self, shape: str) -> None:
        self.shape = shape
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner = web.AppRunner(self._app(), handle_signals=False, access_log=None)
        self.url = ""

    def _app(self) -> web.Application:
        async def chat(request: web.Request) -> web.StreamResponse:
            body = await request.json()
            self.requests.append(body)
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            for chunk in reply(self.shape, body):
                await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                await asyncio.sleep(0)
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
            return response

        async def anything(request: web.Request) -> web.Response:
            self.paths.append(f"{request.method} {request.path_qs}")
            return web.json_response({"error": {"message": "not a chat completion"}}, status=404)

        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        app.router.add_route("*", "/{tail:.*}", anything)
        return app

    def __enter__(self) -> ChatUpstream:
        self._thread.start()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self._run(self._runner.setup())
        self._run(web.SockSite(self._runner, sock).start())
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._run(self._runner.cleanup())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    def _run(self, coro: Any) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    def tool_results(self) -> list[str]:
        return [result for body in self.requests if (result := tool_result(body)) is not None]

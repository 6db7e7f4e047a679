"""A chat-only model server for the agents under test: it decides each reply from the request
alone (no state between requests, as an agent's turns need none), and streams its tool call in
a broken shape.

* A request with a tool result in it: a short final text quoting that result.
* A request that offers a shell tool: one call to it, with arguments fitted to the tool's
  schema, whose command prints ``MARKER`` and the shape's name.
* Anything else (title requests): a short text.

The call goes out in the shape the server was started with (shapes.py): canonical, or one of
the ways real servers break it. Every request body is kept, so a test can check that the
agent's second request carries the command's output.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from typing import Any, Final

from aiohttp import web

from tests.agents import shapes
from tests.agents.shapes import SHAPES, Chunk
from tests.core.protocols.responses.native_replay import QUIRKS, ResponsesReplay

MARKER: Final = "toolcall-proxy-proof"
SHELL_TOOLS: Final = ("bash", "Bash", "exec_command", "shell", "local_shell")
COMMAND_KEYS: Final = ("command", "cmd")
NATIVE: Final = "native:"


def command_for(shape: str) -> str:
    return f"echo {MARKER}-{shape}"


def fit_arguments(schema: dict[str, Any], command: str) -> dict[str, Any]:
    """Arguments for a shell tool: the command under its key, and a plain value for every
    other required property."""
    properties: dict[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    args: dict[str, Any] = {}
    for key, prop in properties.items():
        if key not in COMMAND_KEYS and key not in required:
            continue
        kind = prop.get("type")
        if key in COMMAND_KEYS:
            args[key] = ["bash", "-lc", command] if kind == "array" else command
        elif kind == "string":
            args[key] = "print the proof marker"
        elif kind in ("integer", "number"):
            args[key] = 10000
        elif kind == "boolean":
            args[key] = False
        elif kind == "array":
            args[key] = []
        else:
            args[key] = {}
    return args


def _tool_result(messages: list[dict[str, Any]]) -> str | None:
    for message in reversed(messages):
        if message.get("role") == "tool":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            return str(content)
    return None


def _shell_tool(tools: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    for tool in tools:
        fn = tool.get("function") or {}
        if fn.get("name") in SHELL_TOOLS:
            return fn["name"], fn.get("parameters") or {}
    return None


def reply(shape: str, body: dict[str, Any]) -> list[Chunk]:
    result = _tool_result(body.get("messages") or [])
    if result is not None:
        return shapes.text(f"The command printed: {result.strip()}")
    tool = _shell_tool(body.get("tools") or [])
    if tool is None:
        return shapes.text("Proof run")
    name, schema = tool
    return SHAPES[shape](name, fit_arguments(schema, command_for(shape)), "call_agent1")


def events(chunks: list[Chunk]) -> Iterator[bytes]:
    for chunk in chunks:
        yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


class AgentUpstream:
    """The server on 127.0.0.1, on its own loop in a thread (the agents are subprocesses).

    A shape ``native:<quirk>`` makes it a server with its own ``/v1/responses`` instead, whose
    stream is broken by that quirk (tests/core/protocols/responses/native_replay.py; the proxy in
    native mode): its call is to ``exec_command``, Codex's shell tool."""

    def __init__(self, shape: str) -> None:
        quirk = shape.removeprefix(NATIVE)
        if shape not in SHAPES and not (shape.startswith(NATIVE) and quirk in QUIRKS):
            known = [*SHAPES, *(NATIVE + name for name in QUIRKS)]
            raise ValueError(f"unknown shape {shape!r}; known: {', '.join(known)}")
        self.shape = shape
        self.requests: list[dict[str, Any]] = []
        self._native = (
            ResponsesReplay(quirk, {"exec_command": {"cmd": command_for(shape)}})
            if shape.startswith(NATIVE)
            else None
        )
        if self._native is not None:
            self.requests = self._native.requests
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner = web.AppRunner(self._app(), handle_signals=False, access_log=None)
        self.url = ""

    def _app(self) -> web.Application:
        if self._native is not None:
            return self._native.app

        async def chat(request: web.Request) -> web.StreamResponse:
            body = await request.json()
            self.requests.append(body)
            chunks = reply(self.shape, body)
            if not body.get("stream"):
                content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
                return web.json_response(shapes.completion({"content": content}, "stop"))
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            for data in events(chunks):
                await response.write(data)
                await asyncio.sleep(0)
            await response.write_eof()
            return response

        async def models(_: web.Request) -> web.Response:
            return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})

        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        app.router.add_get("/v1/models", models)
        return app

    def __enter__(self) -> AgentUpstream:
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
        """The tool results the agent sent back, in order."""
        found = []
        for body in self.requests:
            result = _tool_result(body.get("messages") or [])
            if result is not None:
                found.append(result)
        return found

"""A chat-only model server for the agents under test: it decides each reply from the request
alone, as protocols.md section 5 describes, and streams its tool call in a broken shape.

* A request with a tool result in it: a short final text quoting that result.
* A request that offers a shell tool: one call to it, with arguments fitted to the tool's
  schema, whose command prints ``MARKER`` and the shape's name.
* Anything else (title requests): a short text.

The call goes out in the shape the server was started with (``SHAPES``): canonical, or one of
the ways real servers break it. Every request body is kept, so a test can check that the
agent's second request carries the command's output.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any, Final

from aiohttp import web

MARKER: Final = "toolcall-proxy-proof"
SHELL_TOOLS: Final = ("bash", "Bash", "exec_command", "shell", "local_shell")
COMMAND_KEYS: Final = ("command", "cmd")

Chunk = dict[str, Any]


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


def _chunk(delta: dict[str, Any], finish: str | None = None) -> Chunk:
    return {
        "id": "chatcmpl-agent",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _text(text: str, finish: str = "stop") -> list[Chunk]:
    return [
        _chunk({"role": "assistant", "content": ""}),
        *(_chunk({"content": piece}) for piece in _pieces(text)),
        _chunk({}, finish),
    ]


def _canonical(name: str, args: dict[str, Any]) -> list[Chunk]:
    opening = {"index": 0, "id": "call_agent1", "type": "function"}
    return [
        _chunk({"role": "assistant", "content": None}),
        _chunk({"tool_calls": [{**opening, "function": {"name": name, "arguments": ""}}]}),
        *(
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            for piece in _pieces(json.dumps(args))
        ),
        _chunk({}, "tool_calls"),
    ]


def _llamacpp_old(name: str, args: dict[str, Any]) -> list[Chunk]:
    """llama.cpp before PR 13800: the id inside function, the name on every delta, no type."""
    fn = {"name": name, "id": "call_agent1"}
    return [
        _chunk({"role": "assistant", "content": None}),
        _chunk({"tool_calls": [{"index": 0, "function": fn}]}),
        *(
            _chunk({"tool_calls": [{"index": 0, "function": {"name": name, "arguments": piece}}]})
            for piece in _pieces(json.dumps(args))
        ),
        _chunk({}, "tool_calls"),
    ]


def _object_arguments(name: str, args: dict[str, Any]) -> list[Chunk]:
    """Arguments as a JSON object instead of a string (TGI, some Ollama builds)."""
    entry = {"index": 0, "id": "call_agent1", "type": "function"}
    return [
        _chunk({"role": "assistant", "content": None}),
        _chunk({"tool_calls": [{**entry, "function": {"name": name, "arguments": args}}]}),
        _chunk({}, "tool_calls"),
    ]


def _hermes(name: str, args: dict[str, Any]) -> list[Chunk]:
    """Hermes markup left in the content (a server without its tool parser)."""
    markup = "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"
    return _text(markup)


def _qwen3_coder(name: str, args: dict[str, Any]) -> list[Chunk]:
    """Qwen3-Coder's XML left in the content."""
    params = "".join(
        f"<parameter={key}>\n{value if isinstance(value, str) else json.dumps(value)}\n</parameter>\n"
        for key, value in args.items()
    )
    return _text(f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>")


def _gemma4(name: str, args: dict[str, Any]) -> list[Chunk]:
    """Gemma 4's call syntax left in the content: bare keys, strings between <|"|>."""

    def value(v: Any) -> str:
        if isinstance(v, str):
            return f'<|"|>{v}<|"|>'
        if isinstance(v, list):
            return "[" + ",".join(value(x) for x in v) + "]"
        return json.dumps(v)

    body = ",".join(f"{key}:{value(v)}" for key, v in args.items())
    return _text(f"<|tool_call>call:{name}{{{body}}}<tool_call|>")


SHAPES: Final[dict[str, Callable[[str, dict[str, Any]], list[Chunk]]]] = {
    "canonical": _canonical,
    "llamacpp-old": _llamacpp_old,
    "hermes": _hermes,
    "qwen3-coder": _qwen3_coder,
    "object-arguments": _object_arguments,
    "gemma4": _gemma4,
}


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
        return _text(f"The command printed: {result.strip()}")
    tool = _shell_tool(body.get("tools") or [])
    if tool is None:
        return _text("Proof run")
    name, schema = tool
    return SHAPES[shape](name, fit_arguments(schema, command_for(shape)))


def events(chunks: list[Chunk]) -> Iterator[bytes]:
    for chunk in chunks:
        yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


class AgentUpstream:
    """The server on 127.0.0.1, on its own loop in a thread (the agents are subprocesses)."""

    def __init__(self, shape: str) -> None:
        if shape not in SHAPES:
            raise ValueError(f"unknown shape {shape!r}; known: {', '.join(SHAPES)}")
        self.shape = shape
        self.requests: list[dict[str, Any]] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner = web.AppRunner(self._app(), handle_signals=False, access_log=None)
        self.url = ""

    def _app(self) -> web.Application:
        async def chat(request: web.Request) -> web.StreamResponse:
            body = await request.json()
            self.requests.append(body)
            chunks = reply(self.shape, body)
            if not body.get("stream"):
                return web.json_response(_completion(chunks))
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


def _completion(chunks: list[Chunk]) -> dict[str, Any]:
    """The same reply as one (canonical) completion, for a request with ``stream: false``."""
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    return {
        "id": "chatcmpl-agent",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }

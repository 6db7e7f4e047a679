"""The shapes a chat server streams a tool call in: canonical, or the ways real servers break
it (docs/quirks.md Q1-Q34). One place for every test upstream that replays a call: the
agents' (upstream.py) and the Responses SDK tests' (tests/core/protocols/responses/chat_replay.py).

Each shape is ``(name, arguments, call_id) -> chunks``; ``sse`` frames chunks as the stream,
``completion`` is the same reply as one canonical ``chat.completion`` (``stream: false``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

Chunk = dict[str, Any]
USAGE: Final = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}


def chunk(delta: dict[str, Any], finish: str | None = None) -> Chunk:
    return {
        "id": "chatcmpl-agent",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _pieces(text: str, size: int = 7) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def text(content: str, finish: str = "stop") -> list[Chunk]:
    return [
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": piece}) for piece in _pieces(content)),
        chunk({}, finish),
    ]


def canonical(name: str, args: dict[str, Any], call_id: str) -> list[Chunk]:
    opening = {"index": 0, "id": call_id, "type": "function"}
    return [
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{**opening, "function": {"name": name, "arguments": ""}}]}),
        *(
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            for piece in _pieces(json.dumps(args))
        ),
        chunk({}, "tool_calls"),
    ]


def llamacpp_old(name: str, args: dict[str, Any], call_id: str) -> list[Chunk]:
    """llama.cpp before PR 13800 (b5494): the id inside function, the name on every delta, no
    type."""
    fn = {"name": name, "id": call_id}
    return [
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{"index": 0, "function": fn}]}),
        *(
            chunk({"tool_calls": [{"index": 0, "function": {"name": name, "arguments": piece}}]})
            for piece in _pieces(json.dumps(args))
        ),
        chunk({}, "tool_calls"),
    ]


def object_arguments(name: str, args: dict[str, Any], call_id: str) -> list[Chunk]:
    """Arguments as a JSON object instead of a string, in one delta (TGI, koboldcpp, some
    Ollama builds)."""
    entry = {"index": 0, "id": call_id, "type": "function"}
    return [
        chunk({"role": "assistant", "content": None}),
        chunk({"tool_calls": [{**entry, "function": {"name": name, "arguments": args}}]}),
        chunk({}, "tool_calls"),
    ]


def hermes(name: str, args: dict[str, Any], call_id: str) -> list[Chunk]:
    """Hermes markup left in the content (a server without its tool parser)."""
    markup = "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"
    return text(markup)


def qwen3_coder(name: str, args: dict[str, Any], call_id: str) -> list[Chunk]:
    """Qwen3-Coder's XML left in the content."""
    params = "".join(
        f"<parameter={key}>\n{value if isinstance(value, str) else json.dumps(value)}\n</parameter>\n"
        for key, value in args.items()
    )
    return text(f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>")


def gemma4(name: str, args: dict[str, Any], call_id: str) -> list[Chunk]:
    """Gemma 4's call syntax left in the content: bare keys, strings between <|"|>."""

    def value(v: Any) -> str:
        if isinstance(v, str):
            return f'<|"|>{v}<|"|>'
        if isinstance(v, list):
            return "[" + ",".join(value(x) for x in v) + "]"
        return json.dumps(v)

    body = ",".join(f"{key}:{value(v)}" for key, v in args.items())
    return text(f"<|tool_call>call:{name}{{{body}}}<tool_call|>")


SHAPES: Final[dict[str, Callable[[str, dict[str, Any], str], list[Chunk]]]] = {
    "canonical": canonical,
    "llamacpp-old": llamacpp_old,
    "hermes": hermes,
    "qwen3-coder": qwen3_coder,
    "object-arguments": object_arguments,
    "gemma4": gemma4,
}


def sse(chunks: list[Chunk], *, usage: bool = False) -> bytes:
    """The stream: the chunks, a usage chunk when asked (``stream_options.include_usage``),
    ``[DONE]``."""
    if usage:
        chunks = [*chunks, {**chunk({}), "choices": [], "usage": USAGE}]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks)
    return (body + "data: [DONE]\n\n").encode()


def completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-agent",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}
        ],
        "usage": USAGE,
    }

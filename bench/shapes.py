"""The streams the fake upstream sends, as event templates with a slot for a send stamp.

A shape is chosen per request through the model name, ``bench-<shape>-<chunks>-<delay_ms>``,
because the model name is the one request field every proxy (LiteLLM included) passes on.
``chunks`` counts the stamped payload chunks; a shape adds a few unstamped structural chunks
around them (role, tool-call opening, markup, finish), as real servers do.

- ``content``: plain content tokens; needs no rewrite.
- ``plain``: the same stream, but the request offers no tools, so a proxy need not look for
  markup in the text at all (the cheapest case for a rewriting proxy).
- ``toolcall``: one tool call whose arguments come in fragments, opened the llama.cpp/vLLM way
  (the first delta carries the name and ``"arguments":"{"``).
- ``hermes``: a hermes tool call leaked into content, ``<tool_call>{...}</tool_call>`` token
  by token, as Ollama and vLLM without a tool parser send it.

Two more measure how the cost per event holds up as a stream grows (``python -m bench.core``'s
second table), ``chunks`` being their length:

- ``longcall``: one tool call of ``chunks`` argument deltas the way old llama.cpp (b5494)
  sends them, the name and the id (inside ``function``) repeated on every delta, so each
  one is rewritten.
- ``manycalls``: ``chunks`` canonical tool calls in one choice, each an opening and one
  fragment with the whole arguments; nothing to rewrite.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

import orjson

SHAPES: Final = ("content", "toolcall", "hermes", "plain")
LENGTH_SHAPES: Final = ("longcall", "manycalls")
NO_TOOLS: Final = ("plain",)  # shapes whose requests offer no tools
_MODEL: Final = re.compile(r"bench-([a-z]+)-(\d+)-(\d+)\Z")
_SLOT: Final = "@@STAMP@@"  # JSON leaves it as it is, so it can be cut out of the encoding
# Hermes markup as a Qwen-style tokenizer splits it; the stamps go inside the "q" string.
HERMES_OPEN: Final = (
    *("<tool_call>", "\n", '{"', "name", '":', ' "', "get", "_weather", '",'),
    *(' "', "arguments", '":', ' {"', "q", '":', ' "'),
)
HERMES_CLOSE: Final = ('"}}', "\n", "</tool_call>")


# What the load generator offers the model on every request (but the ``plain`` shape's), as an
# agent would: a proxy may only turn markup into tool calls when the client offered tools.
TOOLS: Final[list[dict[str, Any]]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a place",
            "parameters": {
                "type": "object",
                "properties": {"q": {"type": "string"}},
                "required": ["q"],
            },
        },
    }
]


@dataclass(frozen=True, slots=True)
class Request:
    shape: str
    chunks: int
    delay_ms: int


def model_name(shape: str, chunks: int, delay_ms: int) -> str:
    return f"bench-{shape}-{chunks}-{delay_ms}"


def parse_model(model: str) -> Request | None:
    m = _MODEL.match(model)
    if m is None or m.group(1) not in (*SHAPES, *LENGTH_SHAPES):
        return None
    return Request(m.group(1), int(m.group(2)), int(m.group(3)))


@dataclass(frozen=True, slots=True)
class Template:
    """One SSE event; ``stamped`` events get a fresh stamp between ``head`` and ``tail``."""

    head: bytes
    tail: bytes = b""
    stamped: bool = False

    def event(self, stamp: bytes) -> bytes:
        """The event's bytes, with ``stamp`` in its slot when it has one."""
        return self.head + stamp + self.tail if self.stamped else self.head


def _event(model: str, delta: dict[str, object], finish: str | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": model,
        "system_fingerprint": "bench",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def _stamped(model: str, delta: dict[str, object]) -> Template:
    head, tail = _event(model, delta).split(_SLOT.encode())
    return Template(head, tail, stamped=True)


def _content(model: str, text: str) -> Template:
    return Template(_event(model, {"content": text}))


def _args(model: str, text: str, index: int = 0) -> dict[str, object]:
    return {"tool_calls": [{"index": index, "function": {"arguments": text}}]}


def _old_llama_args(text: str | None) -> dict[str, object]:
    """An entry as llama.cpp b5494 sends it: name and id inside ``function`` every time."""
    function = {"name": "get_weather", "id": "call_bench"}
    if text is not None:
        function["arguments"] = text
    return {"tool_calls": [{"index": 0, "function": function}]}


def completion(model: str, stamp: bytes) -> bytes:
    """The non-streaming answer (``stream: false``): one message whose content is the stamp."""
    message = {"role": "assistant", "content": " " + stamp.decode()}
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
    answer = {"id": "chatcmpl-bench", "object": "chat.completion", "created": 1700000000}
    answer |= {"model": model, "choices": [choice]}
    answer["usage"] = {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}
    return orjson.dumps(answer)


@cache
def templates(model: str) -> tuple[Template, ...]:
    req = parse_model(model)
    if req is None:
        raise ValueError(f"not a bench model name: {model!r}")
    payload = " " + _SLOT
    out: list[Template] = []
    if req.shape in ("content", "plain"):
        out.append(Template(_event(model, {"role": "assistant", "content": ""})))
        out += [_stamped(model, {"content": payload})] * req.chunks
        out.append(Template(_event(model, {}, "stop")))
    elif req.shape == "toolcall":
        opening = {
            "index": 0,
            "id": "call_bench",
            "type": "function",
            "function": {"name": "get_weather", "arguments": "{"},
        }
        out.append(Template(_event(model, {"role": "assistant", "content": None})))
        out.append(Template(_event(model, {"tool_calls": [opening]})))
        out.append(Template(_event(model, _args(model, '"q": "'))))
        out += [_stamped(model, _args(model, payload))] * req.chunks
        out.append(Template(_event(model, _args(model, '"}'))))
        out.append(Template(_event(model, {}, "tool_calls")))
    elif req.shape == "longcall":
        out.append(Template(_event(model, {"role": "assistant", "content": None})))
        out.append(Template(_event(model, _old_llama_args(None))))
        out.append(Template(_event(model, _old_llama_args('{"q": "'))))
        out += [_stamped(model, _old_llama_args(payload))] * req.chunks
        out.append(Template(_event(model, _old_llama_args('"}'))))
        out.append(Template(_event(model, {}, "tool_calls")))
    elif req.shape == "manycalls":
        out.append(Template(_event(model, {"role": "assistant", "content": None})))
        for i in range(req.chunks):
            opening = {
                "index": i,
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": "get_weather", "arguments": ""},
            }
            out.append(Template(_event(model, {"tool_calls": [opening]})))
            out.append(_stamped(model, _args(model, '{"q": "' + payload + '"}', i)))
        out.append(Template(_event(model, {}, "tool_calls")))
    else:
        out.append(Template(_event(model, {"role": "assistant", "content": ""})))
        out += [_content(model, token) for token in HERMES_OPEN]
        out += [_stamped(model, {"content": payload})] * req.chunks
        out += [_content(model, token) for token in HERMES_CLOSE]
        out.append(Template(_event(model, {}, "stop")))
    out.append(Template(b"data: [DONE]\n\n"))
    return tuple(out)

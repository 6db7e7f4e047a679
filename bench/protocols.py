"""The protocols the load generator speaks, and the bench's protocol dimension.

A client protocol is its path, its request and a reader that finds the send stamps, the end
and the errors of a stream in the raw bytes of each read, without parsing JSON, so it costs
the same whatever is in front. Chat ends with ``data: [DONE]``; a Responses stream with
``response.completed`` and a Messages stream with ``message_stop``, and either fails with an
error event (``response.failed``, ``response.incomplete``, ``error``). A Responses stream
sends its text again in its ``.done`` events and in ``response.completed``, so only the text
of its delta events counts.

The dimension (``--protocols``): ``chat``; ``responses/translate`` and ``messages/translate``,
the proxy's bridge over the chat upstream; ``responses/native`` and ``messages/native``, the
upstream's own stream of the same shape (bench/native_shapes.py), repaired in place by the
proxy and passed through by the others.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from bench.shapes import TOOLS
from bench.stamps import StampScanner

PATHS: Final = {
    "chat": "/v1/chat/completions",
    "responses": "/v1/responses",
    "messages": "/v1/messages",
}
CLIENT_PROTOCOLS: Final = tuple(PATHS)
MODES: Final = ("translate", "native")
BRIDGED: Final = ("responses", "messages")
_QUESTION: Final = "What is the weather in Paris?"
_FUNCTION: Final = TOOLS[0]["function"]
_TOOLS: Final[dict[str, list[dict[str, Any]]]] = {
    "chat": TOOLS,
    "responses": [{"type": "function", **_FUNCTION}],
    "messages": [
        {
            "name": _FUNCTION["name"],
            "description": _FUNCTION["description"],
            "input_schema": _FUNCTION["parameters"],
        }
    ],
}
_EVENT_END: Final = re.compile(rb"\r?\n\r?\n")


def streams(protocols: list[str], modes: list[str]) -> list[str]:
    """The dimension's values, in the order they run: chat first, then each bridged
    protocol in each mode."""
    if unknown := (set(protocols) - set(CLIENT_PROTOCOLS)) | (set(modes) - set(MODES)):
        known = ", ".join((*CLIENT_PROTOCOLS, *MODES))
        raise ValueError(f"unknown protocols or modes {sorted(unknown)}; known: {known}")
    out = ["chat"] if "chat" in protocols else []
    return out + [f"{p}/{m}" for p in BRIDGED if p in protocols for m in MODES if m in modes]


def client_protocol(stream: str) -> str:
    """What the client speaks in a value of the dimension: ``responses/native`` -> ``responses``."""
    return stream.split("/")[0]


def request(protocol: str, model: str, tools: bool) -> dict[str, Any]:
    """The streamed request of ``protocol`` for ``model``, offering the bench's tool or none."""
    body: dict[str, Any] = {"model": model, "stream": True}
    if protocol == "responses":
        body["input"] = _QUESTION
    else:
        body["messages"] = [{"role": "user", "content": _QUESTION}]
    if protocol == "messages":
        body["max_tokens"] = 1024
    if tools:
        body["tools"] = _TOOLS[protocol]
    return body


class ChatReader:
    """Stamps anywhere in the bytes; the end is ``data: [DONE]`` at the very end."""

    __slots__ = ("_scanner", "_tail", "seen")

    def __init__(self) -> None:
        self._scanner = StampScanner()
        self._tail = b""
        self.seen = 0

    def feed(self, data: bytes) -> list[int]:
        stamps = self._scanner.feed(data)
        self.seen += len(stamps)
        self._tail = (self._tail + data)[-32:]
        return stamps

    def error(self, expect: int) -> str | None:
        """Why the stream that ended is not a whole one, or None."""
        if not self._tail.rstrip().endswith(b"data: [DONE]"):
            return "no [DONE]"
        return "stamps lost" if self.seen != expect else None


@dataclass(frozen=True, slots=True)
class EventRules:
    """How a Responses or Messages stream is read, event by event."""

    end: bytes  # in the event that ends a whole stream
    delta: bytes  # in the events that carry text or arguments
    text: re.Pattern[bytes]  # that text: the JSON string, still escaped (stamps never are)
    failures: tuple[tuple[bytes, str], ...]  # (in an event that fails the stream, its name)


_STRING: Final = rb'\s*"((?:[^"\\]|\\.)*)"'
_ERROR_EVENT: Final = (
    (b"event: error", "error event"),
    (b'"type":"error"', "error event"),
    (b'"type": "error"', "error event"),
)
RULES: Final = {
    "responses": EventRules(
        b"response.completed",
        b".delta",
        re.compile(rb'"delta":' + _STRING),
        (
            (b"response.failed", "response.failed"),
            (b"response.incomplete", "response.incomplete"),
            *_ERROR_EVENT,
        ),
    ),
    "messages": EventRules(
        b"message_stop",
        b"content_block_delta",
        re.compile(rb'"(?:text|partial_json|thinking)":' + _STRING),
        _ERROR_EVENT,
    ),
}


class EventReader:
    """Whole events only (``\\n\\n`` or ``\\r\\n\\r\\n`` ends one). The stamps are found in
    the text of the delta events, read as one string: a proxy may cut a stamp in two deltas
    (LiteLLM's Responses bridge cuts argument deltas), and it counts when the read that
    completes it arrives."""

    __slots__ = ("_buf", "_ended", "_failed", "_rules", "_stamps", "seen")

    def __init__(self, rules: EventRules) -> None:
        self._rules = rules
        self._buf = b""
        self._stamps = StampScanner()
        self._ended = False
        self._failed: str | None = None
        self.seen = 0

    def feed(self, data: bytes) -> list[int]:
        events = _EVENT_END.split(self._buf + data if self._buf else data)
        self._buf = events.pop()  # what follows the last end: part of the next event
        rules = self._rules
        found: list[int] = []
        for event in events:
            if rules.delta in event and (m := rules.text.search(event)):
                found += self._stamps.feed(m.group(1))
            elif rules.end in event:
                self._ended = True
            if self._failed is None:
                self._failed = next((name for mark, name in rules.failures if mark in event), None)
        self.seen += len(found)
        return found

    def error(self, expect: int) -> str | None:
        if self._failed is not None:
            return self._failed
        if not self._ended:
            return f"no {self._rules.end.decode()}"
        return "stamps lost" if self.seen != expect else None


def reader(protocol: str) -> ChatReader | EventReader:
    return ChatReader() if protocol == "chat" else EventReader(RULES[protocol])

"""Chat streams with markup in their text, as the normalizer's markup tests write them, and a
dialect double that fails on demand (no registered dialect raises ``DialectError``)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from proxy.core.errors import DialectError
from proxy.core.markup import build_extractor
from proxy.core.markup.base import Segment, Tools
from proxy.core.options import UpstreamOptions

ENVELOPE = {"id": "chatcmpl-d", "object": "chat.completion.chunk", "created": 1, "model": "m"}
TOOLS = {"tools": [{"type": "function", "function": {"name": "get_weather"}}]}
ON = UpstreamOptions(dialects=("hermes",))


def event(delta: Mapping[str, object], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return b"data: " + json.dumps({**ENVELOPE, "choices": [choice]}).encode() + b"\n\n"


def stream(*texts: str, key: str = "content", finish: str = "stop", done: bool = True) -> bytes:
    out = [{"role": "assistant", "content": None}] + [{key: t} for t in texts]
    body = b"".join(event(d) for d in out) + event({}, finish)
    return body + (b"data: [DONE]\n\n" if done else b"")


def hermes(name: str, arguments: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


class FailingHermes:
    """The real hermes extractor, except that text containing ``BOOM`` raises DialectError.

    No registered dialect raises DialectError: each fails open by itself, as the contract in
    proxy/core/markup/base.py asks. The normalizer must survive one that does all the same, and
    only a double can take it down that path.
    """

    def __init__(self, tools: Tools) -> None:
        real = build_extractor(["hermes"], tools)
        assert real is not None
        self._real = real

    def passes(self, text: str) -> bool:
        return "BOOM" not in text and self._real.passes(text)

    def feed(self, text: str) -> list[Segment]:
        if "BOOM" in text:
            raise DialectError("told to fail")
        return self._real.feed(text)

    def close(self) -> list[Segment]:
        return self._real.close()

    @property
    def holding(self) -> bool:
        return self._real.holding

    @property
    def held(self) -> int:
        return self._real.held

    @property
    def broken(self) -> int:
        return self._real.broken

    @property
    def dialect(self) -> str | None:
        return self._real.dialect

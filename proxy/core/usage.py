"""Tokens as the upstream reports them (issue 28 item 4): read from its usage objects, never
estimated.

``Tokens`` holds the four kinds the metrics count (``prompt``, ``completion``, ``reasoning``,
``cached``), each None when the upstream did not report it. ``READERS`` is the registry of
usage shapes, by client protocol name (proxy/core/protocols/registry.py; a test holds every
registered protocol to a reader):

* chat: ``prompt_tokens``, ``completion_tokens``,
  ``completion_tokens_details.reasoning_tokens``, ``prompt_tokens_details.cached_tokens``;
* responses: ``input_tokens``, ``output_tokens``, ``output_tokens_details.reasoning_tokens``,
  ``input_tokens_details.cached_tokens``;
* messages: ``input_tokens`` plus ``cache_read_input_tokens`` and
  ``cache_creation_input_tokens`` as the prompt (Anthropic's ``input_tokens`` leaves out the
  tokens read from or written to its cache, OpenAI's ``prompt_tokens`` includes them, and a
  dashboard adds both up), ``output_tokens``, ``cache_read_input_tokens`` as cached. The
  figures of ``message_start`` and ``message_delta`` are merged, the later winning.

A stream keeps a ``UsageSeen``: where the stream parses an event anyway it hands over the
usage found (``saw``); an event that goes out unparsed is only looked at for the bytes of a
usage object (``passed``, ``passed_read``: one search, no parse), and the latest such event is
parsed once, when the figures are asked for at the end. So the cost per event stays one byte
search whatever the stream holds, and the last usage a stream carried is the one counted
(servers report running totals).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import Final

from proxy.core.jsonvalues import JSONObject, loads
from proxy.core.sse import plain_datas

KINDS: Final = ("prompt", "completion", "reasoning", "cached")


@dataclass(frozen=True, slots=True)
class Tokens:
    """Token counts by kind; None: not reported."""

    prompt: int | None = None
    completion: int | None = None
    reasoning: int | None = None
    cached: int | None = None

    def reported(self) -> Iterator[tuple[str, int]]:
        """(kind, count) for each kind the upstream reported, in ``KINDS`` order."""
        for field in fields(self):
            value = getattr(self, field.name)
            if value is not None:
                yield field.name, value


Reader = Callable[[JSONObject], Tokens | None]


def _count(value: object) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _inner(usage: JSONObject, key: str, name: str) -> int | None:
    details = usage.get(key)
    return _count(details.get(name)) if isinstance(details, dict) else None


def _some(tokens: Tokens) -> Tokens | None:
    return tokens if any(True for _ in tokens.reported()) else None


def chat_tokens(usage: JSONObject) -> Tokens | None:
    return _some(
        Tokens(
            prompt=_count(usage.get("prompt_tokens")),
            completion=_count(usage.get("completion_tokens")),
            reasoning=_inner(usage, "completion_tokens_details", "reasoning_tokens"),
            cached=_inner(usage, "prompt_tokens_details", "cached_tokens"),
        )
    )


def responses_tokens(usage: JSONObject) -> Tokens | None:
    return _some(
        Tokens(
            prompt=_count(usage.get("input_tokens")),
            completion=_count(usage.get("output_tokens")),
            reasoning=_inner(usage, "output_tokens_details", "reasoning_tokens"),
            cached=_inner(usage, "input_tokens_details", "cached_tokens"),
        )
    )


def messages_tokens(usage: JSONObject) -> Tokens | None:
    parts = [
        _count(usage.get(key))
        for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    ]
    known = [n for n in parts if n is not None]
    return _some(
        Tokens(
            prompt=sum(known) if known else None,
            completion=_count(usage.get("output_tokens")),
            cached=parts[1],
        )
    )


#: usage shapes by client protocol name (the registry's names)
READERS: Final[dict[str, Reader]] = {
    "chat": chat_tokens,
    "responses": responses_tokens,
    "messages": messages_tokens,
}


def body_tokens(protocol: str, body: bytes) -> Tokens | None:
    """A whole answer's tokens (its top-level ``usage``). The body is parsed again only when
    its bytes hold a usage object: the repair that parsed it first keeps no parse around."""
    if not has_usage_object(body):
        return None
    value = loads(body)
    usage = value.get("usage") if isinstance(value, dict) else None
    return READERS[protocol](usage) if isinstance(usage, dict) else None


#: the bytes of a usage object (not ``"usage": null``, which OpenAI sends on every chunk)
_USAGE_OBJECT: Final = re.compile(rb'"usage"[ \t\r\n]*+:[ \t\r\n]*+\{')
USAGE: Final = b'"usage"'


def has_usage_object(data: bytes) -> bool:
    """Whether ``data`` holds a usage object: the compact spellings cost a slice each, the
    pattern is asked only of another spacing."""
    at = data.find(USAGE)
    while at >= 0:
        after = data[at + 7 : at + 9]
        if after == b":{" or (after != b":n" and _USAGE_OBJECT.match(data, at)):
            return True
        at = data.find(USAGE, at + 7)
    return False


class UsageSeen:
    """The latest usage a stream carried (the module's docstring)."""

    __slots__ = ("_latest", "_merge", "_read", "_read_whole", "_reader")

    def __init__(self, reader: Reader, *, merge: bool = False) -> None:
        self._reader = reader
        self._merge = merge  # Messages: message_delta's figures join message_start's
        self._latest: JSONObject | None = None
        self._read: bytes | None = None  # unparsed, later than _latest
        self._read_whole = False  # _read is a read of whole events, else one event's data

    def saw(self, usage: object) -> None:
        """A parsed event's usage (anything but an object is not one)."""
        if not isinstance(usage, dict):
            return
        if self._merge:
            self._settle()
        self._read = None
        self._latest = {**self._latest, **usage} if self._merge and self._latest else usage

    def passed(self, data: bytes) -> None:
        """One event's data that went out unparsed (a caller on a hot path may ask
        ``USAGE in data`` first, which saves the call for the events without any)."""
        if has_usage_object(data):
            self._read, self._read_whole = data, False

    def passed_read(self, data: bytes) -> None:
        """A read of whole one-line data events that went out unparsed."""
        if has_usage_object(data):
            self._read, self._read_whole = data, True

    def tokens(self) -> Tokens | None:
        self._settle()
        return self._reader(self._latest) if self._latest is not None else None

    def _settle(self) -> None:
        """Parse the latest unparsed event with a usage object, once."""
        read, self._read = self._read, None
        if read is None:
            return
        datas = plain_datas(read) if self._read_whole else [read]
        for data in reversed(datas):
            if not has_usage_object(data):
                continue
            value = loads(data)
            usage = value.get("usage") if isinstance(value, dict) else None
            if isinstance(usage, dict):
                self._latest = {**self._latest, **usage} if self._merge and self._latest else usage
                return

"""A test double of a markup dialect, until the real dialects (branch ``dialects``) are merged.

Grammar: ``<call name="NAME">ARGS</call>``, optionally ``<call name="NAME" id="ID">``. It keeps
the contract of proxy/dialects/base.py: text comes back unchanged, only the tail that could
still begin a marker is held, a call opens once its name is complete, and markup cut short
closes the call with an error. Text containing ``BOOM`` raises DialectError, to test failing
open. ``dialect`` names the dialect for the repair record.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from proxy.dialects.base import CallArgs, CallClose, CallOpen, Segment, Text
from proxy.errors import DialectError

_OPEN = re.compile(r'<call name="([^"<>]+)"(?: id="([^"<>]+)")?>')
_OPEN_PREFIX = '<call name="'
_CLOSE = "</call>"


def _held_tail(text: str, markers: Sequence[str]) -> int:
    """How many characters at the end of ``text`` could still begin one of ``markers``."""
    for size in range(min(len(text), max(map(len, markers))), 0, -1):
        if any(m.startswith(text[-size:]) for m in markers):
            return size
    return 0


class ToyDialect:
    dialect = "toy"

    def __init__(self) -> None:
        self._buffer = ""
        self._in_call = False

    def feed(self, text: str) -> list[Segment]:
        if "BOOM" in text:
            raise DialectError("the toy dialect was told to fail")
        self._buffer += text
        out: list[Segment] = []
        while True:
            if self._in_call:
                end = self._buffer.find(_CLOSE)
                if end < 0:
                    keep = _held_tail(self._buffer, [_CLOSE])
                    args, self._buffer = (
                        self._buffer[: len(self._buffer) - keep],
                        self._buffer[len(self._buffer) - keep :],
                    )
                    if args:
                        out.append(CallArgs(args))
                    return out
                if end:
                    out.append(CallArgs(self._buffer[:end]))
                out.append(CallClose())
                self._buffer = self._buffer[end + len(_CLOSE) :]
                self._in_call = False
                continue
            start = self._buffer.find("<")
            while start >= 0:
                match = _OPEN.match(self._buffer, start)
                rest = self._buffer[start:]
                if match or (
                    _OPEN_PREFIX.startswith(rest[: len(_OPEN_PREFIX)]) and ">" not in rest
                ):
                    break
                start = self._buffer.find("<", start + 1)
            if start < 0:
                if self._buffer:
                    out.append(Text(self._buffer))
                self._buffer = ""
                return out
            if start:
                out.append(Text(self._buffer[:start]))
                self._buffer = self._buffer[start:]
            match = _OPEN.match(self._buffer)
            if match is None:
                return out  # a marker may be on its way
            out.append(CallOpen(match.group(1), match.group(2)))
            self._buffer = self._buffer[match.end() :]
            self._in_call = True

    def close(self) -> list[Segment]:
        out: list[Segment] = []
        if self._in_call:
            if self._buffer:
                out.append(CallArgs(self._buffer))
            out.append(CallClose(error="the markup ended inside a call"))
        elif self._buffer:
            out.append(Text(self._buffer))
        self._buffer = ""
        self._in_call = False
        return out


def toy_extractor(names: Sequence[str], tools: list[dict[str, Any]]) -> ToyDialect | None:
    return ToyDialect() if "toy" in names else None


@pytest.fixture
def toy_dialect(monkeypatch):
    """Make proxy.dialects.build_extractor build the toy dialect for the name "toy"."""
    import proxy.dialects

    monkeypatch.setattr(proxy.dialects, "build_extractor", toy_extractor)

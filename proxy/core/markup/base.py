"""What a dialect parser reports, and the contract every dialect keeps.

A dialect turns the text of one choice's ``content`` (fed in the pieces the upstream streamed)
into segments: plain text to forward as content, and tool calls found in the model's own
markup. Dialects never touch chunks or SSE; the normalizer turns segments into deltas.

Contract (checked for every registered dialect by tests/core/markup/test_contract.py):

* ``feed(text)`` and ``close()`` raise nothing but :class:`proxy.core.errors.DialectError`.
* The segments do not depend on how the text was cut into ``feed`` calls, except that
  :class:`Text` may come in different pieces.
* Plain text with no marker comes back as :class:`Text`, unchanged.
* A call is opened (:class:`CallOpen`) only once its complete name is known. Text that turns
  out not to be a call is given back as :class:`Text`, unchanged.
* Text is given out as soon as it cannot be the start of a marker. ``close()`` gives out
  everything still held.
* A call comes out whole, once its markup is complete: :class:`CallOpen`, the
  :class:`CallArgs` fragments that join into its arguments as a JSON object text, and
  :class:`CallClose`. Markup that breaks or stops inside a call is given back as the text it
  was (``broken`` counts it); ``CallClose.error`` is for an extractor that says why a call it
  gives out is not whole (the markup extractor never does, since issue 24 item 4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class CallOpen:
    name: str
    id: str | None = None  # only when the markup carries its own id (Kimi's functions.NAME:IDX)


@dataclass(frozen=True, slots=True)
class CallArgs:
    text: str


@dataclass(frozen=True, slots=True)
class CallClose:
    error: str | None = None


Segment = Text | CallOpen | CallArgs | CallClose

# The request's `tools` array, as the client sent it; dialects whose markup carries untyped
# parameter values use it to type them.
Tools = list[dict[str, Any]]


class Extractor(Protocol):
    """Incremental parser of one choice's content. One instance per choice per stream."""

    def feed(self, text: str) -> list[Segment]: ...

    def close(self) -> list[Segment]: ...

    def passes(self, text: str) -> bool:
        """Whether ``feed(text)`` would return ``[Text(text)]`` and change nothing, so that
        the caller may skip it (the hot path). False is always a safe answer."""
        ...

    @property
    def holding(self) -> bool:
        """Whether the extractor is inside a call's markup, which it holds until the markup
        is complete (issue 24 item 4): text fed then usually gives no segment. A hint for
        the hot path that feeds such text (chat/fast.py); False is always a safe answer."""
        ...

    @property
    def held(self) -> int:
        """Characters fed but not yet given out in any segment (a possible marker, markup
        before its call's name, a typed value before its closing tag). The normalizer
        compares it with its cap; past the cap it fails open."""
        ...

    @property
    def broken(self) -> int:
        """How many calls' markup broke or stopped (the stream's end, the token limit) before
        the call was complete, and was given back as text (issue 24 item 4)."""
        ...

    @property
    def dialect(self) -> str | None:
        """The name of the dialect that opened the most recent call (None before the first):
        the repair record counts extracted calls per dialect."""
        ...

"""The content parser of one choice: every enabled dialect at once, over one shared scanner.

Content is forwarded as :class:`Text` until an opening marker of some dialect; only the tail
that could still become a marker is held back. At a marker the dialect's block parser takes
over (through a :class:`Fork`, which picks among several dialects that open with the same
marker and names the one that took the block) until its markup ends, and scanning resumes on
the text after it. Markup without a marker of its own (a bare JSON object, a Python-style
list) is looked for only where the content starts, leading whitespace aside, and so are
openers made of plain words, unless the content started like a stream of their dialect
(``Dialect.word_starts``): then they are looked for anywhere, as the other openers are.

Feeding the same text cut differently gives the same segments, except that :class:`Text`
may come in different pieces.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Final

from proxy.core.markup.base import CallOpen, Segment, Text
from proxy.core.markup.block import WHITESPACE, Dialect, Fork, Step
from proxy.core.markup.scan import MarkerScanner


class MarkupExtractor:
    """``begun``: the content's start was already given out as plain text (``PlainText``
    judged it, before any extractor was built), so markers are looked for as past it."""

    def __init__(self, dialects: Sequence[Dialect], *, begun: bool = False) -> None:
        self._dialects = tuple(dialects)
        self._kinds = tuple(type(dialect) for dialect in self._dialects)
        start = _start(self._kinds)
        self._at_start = start.at_start
        self._start_scanner = start.at_start.scanner
        self._word_starts = start.word_starts
        self._anywhere = start.anywhere  # until the content's start says more (_look_anywhere)
        self._scanner = start.anywhere.scanner
        self._text = ""  # scanned text not yet released
        self._block: Fork | None = None
        self._marker = ""
        self._starting = not begun  # nothing but whitespace released so far
        self._dialect: str | None = None
        self.broken = 0  #: calls whose markup broke or stopped, given back as text

    @property
    def held(self) -> int:
        """Characters fed but not yet given out in any segment."""
        return len(self._text) + (self._block.held if self._block else 0)

    @property
    def dialect(self) -> str | None:
        """The name of the dialect whose block opened the most recent call (None before the
        first), for proxy.core.repairs.markup_kind. Read after a ``feed`` that opened calls of two
        dialects, it names the later one."""
        return self._dialect

    def feed(self, text: str) -> list[Segment]:
        block = self._block
        # most text fed inside a held call continues a string of its arguments: the block
        # takes it as its parser would, without the state machine's round
        if block is not None and block.takes_run(text):
            return []
        return self._run(text, final=False)

    def passes(self, text: str) -> bool:
        """Whether ``feed(text)`` would give ``text`` straight back as one Text and leave the
        extractor as it is: between blocks, past the content's start, holding nothing, and no
        marker or beginning of one in ``text``. Then the caller need not feed it."""
        return (
            self._block is None
            and not self._text
            and not self._starting
            and (self._scanner is None or self._scanner.clear(text))
        )

    @property
    def holding(self) -> bool:
        """Inside a block of markup: a call's segments are held until its markup is complete
        (issue 24 item 4, proxy/core/markup/block.py), so text fed now mostly gives nothing."""
        return self._block is not None

    def close(self) -> list[Segment]:
        return self._run("", final=True)

    def _run(self, text: str, final: bool) -> list[Segment]:
        out: list[Segment] = []
        while True:
            if self._block is None:
                self._text += text
                text = self._scan(out, final)
                if self._block is None:
                    return _merged(out)
            else:
                step = self._block.feed(text)
                if final and not step.failed and step.rest is None:
                    closing = self._block.close()
                    step = Step(
                        step.segments + closing.segments,
                        closing.rest,
                        closing.failed,
                        closing.broken,
                    )
                self.broken += step.broken
                if step.failed:
                    out.append(Text(self._marker))
                else:
                    out.extend(step.segments)
                    if any(isinstance(segment, CallOpen) for segment in step.segments):
                        self._dialect = self._block.dialect
                if step.rest is None:
                    return _merged(out)
                self._block = None
                text = step.rest

    def _scan(self, out: list[Segment], final: bool) -> str:
        """Release text up to the next marker; open its block and return the text after it."""
        if self._starting:
            stripped = self._text.lstrip(WHITESPACE)
            self._release(len(self._text) - len(stripped), out)
            if not stripped:
                return ""
            marker = self._start_marker(stripped, final)
            if marker is _WAIT:
                return ""
            self._starting = False
            if stripped.startswith(self._word_starts):
                self._look_anywhere(stripped)
            if marker is not None:
                return self._open(marker, self._at_start.dialects[marker])
        if self._scanner is None:
            end, found = len(self._text), None
        else:
            end, found = self._scanner.scan(self._text, final=final)
        self._release(end, out)
        if found is None:
            return ""
        return self._open(found.marker, self._anywhere.dialects[found.marker])

    def _start_marker(self, start: str, final: bool) -> str | None:
        """The marker the content starts with, None if none, _WAIT while it may grow into one
        or into one of the words that decide which openers are looked for anywhere."""
        if not final and (
            (self._start_scanner is not None and self._start_scanner.could_start(start))
            or any(len(word) > len(start) and word.startswith(start) for word in self._word_starts)
        ):
            return _WAIT
        if self._start_scanner is None:
            return None
        found = self._start_scanner.find(start)
        return found.marker if found is not None and found.start == 0 else None

    def _look_anywhere(self, start: str) -> None:
        """Look for every dialect's openers anywhere, and for the word openers of the dialects
        whose streams begin the way the content did (``start``)."""
        words = tuple(start.startswith(dialect.word_starts) for dialect in self._dialects)
        self._anywhere = _openers(self._kinds, words)
        self._scanner = self._anywhere.scanner

    def _open(self, marker: str, positions: tuple[int, ...]) -> str:
        dialects = [self._dialects[i] for i in positions]
        self._block = Fork([(dialect.name, dialect.block(marker)) for dialect in dialects])
        self._marker = marker
        rest = self._text[len(marker) :]
        self._text = ""
        return rest

    def _release(self, end: int, out: list[Segment]) -> None:
        if end:
            out.append(Text(self._text[:end]))
            self._text = self._text[end:]


_WAIT: Final = "\0wait"


@dataclass(frozen=True, slots=True)
class _Openers:
    """The dialects each opening marker may open (their positions in the extractor's list),
    and the scanner for those markers."""

    dialects: Mapping[str, tuple[int, ...]]
    scanner: MarkerScanner | None


@cache
def _openers(kinds: tuple[type[Dialect], ...], words: tuple[bool, ...] | None) -> _Openers:
    """The markers looked for where the content starts (``words`` None: every kind of
    opener), or anywhere (the openers, and the word openers of the dialects whose ``words``
    flag is set). Markers are class attributes, so every stream of one configuration shares
    these, built once: built for each choice, they were a fifth of the core's work on a
    1-chunk stream (37 us of 170; bench --per-request)."""
    found: dict[str, list[int]] = {}
    for i, kind in enumerate(kinds):
        if words is None:
            markers = (*kind.openers, *kind.word_openers, *kind.start_openers)
        else:
            markers = (*kind.openers, *(kind.word_openers if words[i] else ()))
        for marker in markers:
            found.setdefault(marker, []).append(i)
    return _Openers(
        {marker: tuple(at) for marker, at in found.items()},
        MarkerScanner(found) if found else None,
    )


@dataclass(frozen=True, slots=True)
class _Start:
    """How every stream of one configuration begins: the openers at the content's start,
    the words that decide which are looked for anywhere, and those looked for anywhere
    before that is known. Made of class attributes only, so built once per configuration,
    not for each choice (8.2 -> 6.0 us per stream with every dialect on)."""

    at_start: _Openers
    word_starts: tuple[str, ...]
    anywhere: _Openers


@cache
def _start(kinds: tuple[type[Dialect], ...]) -> _Start:
    return _Start(
        _openers(kinds, None),
        tuple(word for kind in kinds for word in kind.word_starts),
        _openers(kinds, tuple("".startswith(kind.word_starts) for kind in kinds)),
    )


class PlainText:
    """Whether text would come back from a fresh extractor of one configuration whole, as one
    Text, before any extractor exists: most streams' text holds no marker, and building the
    extractor (a dialect object each, 18 with every dialect on) and scanning through it was
    most of a short stream's set-up (issue 29). Made of class attributes only: one per
    configuration (``plain_text``).

    ``at_start``: text while nothing but whitespace went out; true only where the extractor
    would give it back and then be as ``MarkupExtractor(begun=True)`` is, or (whitespace
    only) as a fresh one. ``later``: text after that, as ``MarkupExtractor.passes``."""

    __slots__ = ("_anywhere", "_start_scanner", "_word_starts")

    def __init__(self, start: _Start) -> None:
        self._start_scanner = start.at_start.scanner
        self._word_starts = start.word_starts
        self._anywhere = start.anywhere.scanner

    def at_start(self, text: str) -> bool:
        stripped = text.lstrip(WHITESPACE)
        if not stripped:
            return True
        scanner = self._start_scanner
        if scanner is not None and (
            scanner.could_start(stripped)
            or ((found := scanner.find(stripped)) is not None and found.start == 0)
        ):
            return False
        # a word that could still begin, or that decides which openers are looked for
        if any(
            word.startswith(stripped) or stripped.startswith(word) for word in self._word_starts
        ):
            return False
        return self.later(stripped)

    def later(self, text: str) -> bool:
        return self._anywhere is None or self._anywhere.clear(text)


@cache
def plain_text(kinds: tuple[type[Dialect], ...]) -> PlainText:
    """The :class:`PlainText` of the extractor of these dialects."""
    return PlainText(_start(kinds))


def _merged(segments: list[Segment]) -> list[Segment]:
    """Adjacent Text pieces joined: one content delta per feed is enough."""
    out: list[Segment] = []
    for segment in segments:
        if isinstance(segment, Text) and out and isinstance(out[-1], Text):
            out[-1] = Text(out[-1].text + segment.text)
        else:
            out.append(segment)
    return out

"""The one marker scanner every dialect uses: find a marker, hold back only what could start one.

Markup arrives cut anywhere (``<tool`` then ``_call>``), so text can be released only up to
the longest tail that is still a proper prefix of some marker; that tail waits for the next
piece and is released as soon as it cannot be a marker any more. The same rule serves the
extractor looking for opening markers in content and the dialects looking for their inner
markers (``</parameter>``, ``<|tool_call_end|>`` ...).

The tail held back is shorter than the longest marker, and the text before it is never
searched again by the caller, so scanning stays linear in the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True, slots=True)
class Found:
    """A complete marker at ``start`` in the scanned text."""

    start: int
    marker: str

    @property
    def end(self) -> int:
        return self.start + len(self.marker)


@dataclass(frozen=True, slots=True)
class _Tables:
    markers: tuple[str, ...]  # longest first
    pattern: re.Pattern[str]  # any marker, the longest at a position
    prefixes: frozenset[str]  # every proper prefix of a marker
    firsts: re.Pattern[str]  # any character a marker starts with


@cache
def _tables(markers: frozenset[str]) -> _Tables:
    """Built once per set of markers: every stream's extractor scans for the same ones, and
    the prefix set of all dialects' markers is hundreds of strings."""
    ordered = tuple(sorted(markers, key=lambda m: (-len(m), m)))
    if not ordered or not all(ordered):
        raise ValueError("a scanner needs non-empty markers")
    return _Tables(
        markers=ordered,
        pattern=re.compile("|".join(re.escape(m) for m in ordered)),
        prefixes=frozenset(m[:i] for m in ordered for i in range(1, len(m))),
        firsts=re.compile("[" + "".join(sorted({re.escape(m[0]) for m in ordered})) + "]"),
    )


class MarkerScanner:
    """Finds the leftmost complete marker; at one position the longest marker wins."""

    def __init__(self, markers: Iterable[str]) -> None:
        tables = _tables(frozenset(markers))
        self.markers, self._pattern, self._prefixes = (
            tables.markers,
            tables.pattern,
            tables.prefixes,
        )
        self._firsts = tables.firsts
        self._longest = len(self.markers[0])

    def find(self, text: str, start: int = 0) -> Found | None:
        match = self._pattern.search(text, start)
        return Found(match.start(), match.group()) if match else None

    def scan(self, text: str, start: int = 0, final: bool = False) -> tuple[int, Found | None]:
        """Where the text before the next marker ends, and that marker if it is complete.

        Without a complete marker the first number is how far the text is safe to release. A
        complete marker also waits while an earlier tail could still grow into a longer one.
        """
        found = self.find(text, start)
        if not final:
            held = self._held_tail(text, max(start, len(text) - self._longest + 1))
            if held is not None and (found is None or held < found.start):
                return held, None
        if found:
            return found.start, found
        return len(text), None

    def clear(self, text: str) -> bool:
        """Whether ``scan`` would release all of ``text``: no marker in it, and no tail that
        could still become one. The question the extractor's fast path asks of most text."""
        return (
            self._pattern.search(text) is None
            and self._held_tail(text, len(text) - self._longest + 1) is None
        )

    def _held_tail(self, text: str, start: int) -> int | None:
        """Where the leftmost tail of ``text`` from ``start`` on that is a proper prefix of a
        marker begins. Such a tail begins with a marker's first character, so only those
        positions are tried."""
        for match in self._firsts.finditer(text, max(start, 0)):
            if text[match.start() :] in self._prefixes:
                return match.start()
        return None

    def could_start(self, text: str) -> bool:
        """Whether ``text`` is a proper prefix of some marker (more text may complete it)."""
        return text in self._prefixes

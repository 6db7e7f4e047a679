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


@cache
def _tables(markers: frozenset[str]) -> tuple[tuple[str, ...], re.Pattern[str], frozenset[str]]:
    """Built once per set of markers: every stream's extractor scans for the same ones, and
    the prefix set of all dialects' markers is hundreds of strings."""
    ordered = tuple(sorted(markers, key=lambda m: (-len(m), m)))
    if not ordered or not all(ordered):
        raise ValueError("a scanner needs non-empty markers")
    pattern = re.compile("|".join(re.escape(m) for m in ordered))
    prefixes = frozenset(m[:i] for m in ordered for i in range(1, len(m)))
    return ordered, pattern, prefixes


class MarkerScanner:
    """Finds the leftmost complete marker; at one position the longest marker wins."""

    def __init__(self, markers: Iterable[str]) -> None:
        self.markers, self._pattern, self._prefixes = _tables(frozenset(markers))
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
            first = found.start if found else len(text)
            for pos in range(max(start, len(text) - self._longest + 1), first):
                if text[pos:] in self._prefixes:
                    return pos, None
        if found:
            return found.start, found
        return len(text), None

    def could_start(self, text: str) -> bool:
        """Whether ``text`` is a proper prefix of some marker (more text may complete it)."""
        return text in self._prefixes

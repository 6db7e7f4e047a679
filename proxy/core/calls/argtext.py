"""The argument text a call keeps, and the questions asked of it on every delta, answered
without reading the whole text again.

A call keeps its argument text while it is held, and while it is open so that each new
fragment can be checked against it (Q17: a fragment that re-sends arguments already kept; a
repeated name with new complete arguments starting a second call). Joining the text for
those checks on every delta made a call of N deltas cost N² (old llama.cpp repeats the name
on every delta, and an agent writing a file through a tool call sends tens of thousands).
Here the text stays in the pieces it came in, and what the checks need is worked out as it
grows, each piece read once, when a question first needs it:

* ``complete()`` is ``complete_json`` of the whole text. A bracket counter outside strings
  finds where the first value closes. In valid JSON that is the end of the text, so any
  text after it but whitespace settles "not one value" for good (whatever comes later);
  the one parse is made when the counter closes, and stays right while only whitespace
  follows (``complete_json`` strips it).
* ``last_char()``: the last character that is not whitespace.
* ``prefix_end(fragment)`` is ``json_prefix_end`` of the whole text, read from only as much
  of the text's beginning as the fragment could match.

Whitespace is ``str.isspace``'s, as in ``str.strip``, which ``complete_json`` uses.
"""

from __future__ import annotations

import re
from enum import Enum, auto
from typing import Final

from proxy.core.calls.jsontext import complete_json, json_prefix_end
from proxy.core.jsonvalues import INVALID

_OUTSIDE: Final = re.compile(r'["{}\[\]]')  # what moves the counter outside a string
_INSIDE: Final = re.compile(r'["\\]')  # what ends a string, or escapes its next character
_UNPARSED: Final = object()


class _Scan(Enum):
    LEAD = auto()  #: only whitespace so far
    VALUE = auto()  #: inside a value that began with "{" or "["
    CLOSED = auto()  #: the value closed; only whitespace since
    NOT_ONE = auto()  #: the text is not one JSON object or array, and no more text can make it one


class ArgText:
    """Argument text in pieces; ``text()`` joins them (which costs the whole length)."""

    __slots__ = (
        "_depth",
        "_escaped",
        "_in_string",
        "_last",
        "_last_seen",
        "_len",
        "_parts",
        "_scan",
        "_scanned",
        "_value",
    )

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._len = 0
        self._scanned = 0  # pieces the bracket counter has read
        self._scan = _Scan.LEAD
        self._depth = 0
        self._in_string = False
        self._escaped = False  # the last piece read ended in a string's backslash
        self._value: object = _UNPARSED  # the parse, once the value closed
        self._last = ""
        self._last_seen = 0  # pieces ``_last`` covers

    def append(self, text: str) -> None:
        self._parts.append(text)
        self._len += len(text)

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def text(self) -> str:
        return "".join(self._parts)

    def last_char(self) -> str:
        """The text's last character that is not whitespace; "" when there is none."""
        parts = self._parts
        for i in range(len(parts) - 1, self._last_seen - 1, -1):
            tail = parts[i].rstrip()
            if tail:
                self._last = tail[-1]
                break
        self._last_seen = len(parts)
        return self._last

    def complete(self) -> object:
        """``complete_json(self.text())``: the value when the text is exactly one complete JSON
        object or array (whitespace around it aside), else INVALID."""
        self._read_new()
        if self._scan is not _Scan.CLOSED:
            return INVALID
        if self._value is _UNPARSED:
            self._value = complete_json(self.text())
        return self._value

    def prefix_end(self, fragment: str) -> int | None:
        """``json_prefix_end(self.text(), fragment)``: where the text ends inside ``fragment``,
        or None when it is not the fragment's beginning.

        Each character of the text but whitespace must match one of the fragment, so a
        beginning a little longer than the fragment almost always settles it; a mismatch
        within a beginning is one within the whole text. Only a text with long runs of
        whitespace needs more, read in doubling steps."""
        want = 2 * len(fragment) + 64
        while True:
            head, whole = self._head(want)
            end = json_prefix_end(head, fragment)
            if end is None or whole:
                return end
            want *= 2

    def _head(self, want: int) -> tuple[str, bool]:
        """The first pieces, at least ``want`` characters of them, and whether they are all."""
        parts = self._parts
        total = 0
        for count, part in enumerate(parts, 1):
            total += len(part)
            if total >= want:
                return "".join(parts[:count]), count == len(parts)
        return "".join(parts), True

    def _read_new(self) -> None:
        """Move the bracket counter over the pieces appended since it last ran (joined, so
        that the regular expressions run over them in one go)."""
        parts = self._parts
        if self._scanned == len(parts) or self._scan is _Scan.NOT_ONE:
            self._scanned = len(parts)
            return
        new = "".join(parts[self._scanned :])
        self._scanned = len(parts)
        if self._scan is _Scan.VALUE:
            self._count(new, 0)
        elif self._scan is _Scan.LEAD:
            rest = new.lstrip()
            if rest[:1] in ("{", "["):
                self._scan = _Scan.VALUE
                self._count(new, len(new) - len(rest))
            elif rest:
                self._scan = _Scan.NOT_ONE
        elif new.strip():  # after the value closed
            self._scan = _Scan.NOT_ONE

    def _count(self, part: str, i: int) -> None:
        depth, in_string, escaped = self._depth, self._in_string, self._escaped
        n = len(part)
        while i < n:
            if escaped:
                i += 1
                escaped = False
            elif in_string:
                found = _INSIDE.search(part, i)
                if found is None:
                    break
                i = found.end()
                if part[i - 1] == "\\":
                    escaped = True
                else:
                    in_string = False
            else:
                found = _OUTSIDE.search(part, i)
                if found is None:
                    break
                i = found.end()
                c = part[i - 1]
                if c == '"':
                    in_string = True
                elif c in "{[":
                    depth += 1
                else:
                    depth -= 1
                    if depth == 0:
                        self._scan = _Scan.CLOSED if not part[i:].strip() else _Scan.NOT_ONE
                        break
        self._depth, self._in_string, self._escaped = depth, in_string, escaped

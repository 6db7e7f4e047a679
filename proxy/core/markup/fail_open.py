"""One text's extractor that fails open: a dialect that raises gives its text back as text.

The contract (base.py) lets ``feed`` and ``close`` raise :class:`DialectError`. Text the
extractor took in and has not given out yet would then be lost, so this follows what it holds
(matched against the plain text it gives back; once markup was consumed the held part is
unknown and counted as nothing, as dialects hold little then) and, should it fail, returns
that text and the text it choked on as one :class:`Text`. After a failure ``failed`` is True
and the caller stops feeding it. The native repairers (Messages, Responses) use it; the chat
path's markup_bridge.py keeps the same accounting (:class:`HeldText`) beside its cap.

What is followed is kept in pieces: inside a call whose markup is held (issue 24 item 4)
every event adds to it and nothing comes out, and joining it on every event would cost the
whole call's length each time. It is joined only when text comes back.
"""

from __future__ import annotations

from proxy.core.errors import DialectError
from proxy.core.markup.base import Extractor, Segment, Text


class HeldText:
    """The text an extractor was fed and has not given out, as far as known (see above)."""

    __slots__ = ("_parts", "_size")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def text(self) -> str:
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def follow(self, text: str, segments: list[Segment]) -> None:
        """``text`` was fed and ``segments`` came out: the plain text given back is matched
        against what was held and fed; once markup was consumed, nothing is known held."""
        if not segments:
            if text:
                self._parts.append(text)
                self._size += len(text)
            return
        held = ""
        if all(isinstance(segment, Text) for segment in segments):
            returned = "".join(segment.text for segment in segments if isinstance(segment, Text))
            held = self.text() + text
            held = held[len(returned) :] if held.startswith(returned) else ""
        self._parts = [held] if held else []
        self._size = len(held)

    def take(self) -> str:
        """What is held, let go."""
        text = self.text()
        self._parts, self._size = [], 0
        return text


class FailOpen:
    __slots__ = ("_held", "extractor", "failed")

    def __init__(self, extractor: Extractor) -> None:
        self.extractor = extractor
        self._held = HeldText()  # text fed and not given out, as far as known
        self.failed = False

    def passes(self, text: str) -> bool:
        return self.extractor.passes(text)

    def feed(self, text: str) -> list[Segment]:
        try:
            segments = self.extractor.feed(text)
        except DialectError:
            return self._give_back(text)
        self._held.follow(text, segments)
        return segments

    def close(self) -> list[Segment]:
        try:
            segments = self.extractor.close()
        except DialectError:
            return self._give_back("")
        self._held.take()
        return segments

    def _give_back(self, text: str) -> list[Segment]:
        self.failed = True
        lost = self._held.take() + text
        return [Text(lost)] if lost else []


def fail_open(extractor: Extractor | None) -> FailOpen | None:
    return FailOpen(extractor) if extractor is not None else None

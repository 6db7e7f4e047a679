"""One text's extractor that fails open: a dialect that raises gives its text back as text.

The contract (base.py) lets ``feed`` and ``close`` raise :class:`DialectError`. Text the
extractor took in and has not given out yet would then be lost, so this follows what it holds
(matched against the plain text it gives back; once markup was consumed the held part is
unknown and counted as nothing, as dialects hold little then) and, should it fail, returns
that text and the text it choked on as one :class:`Text`. After a failure ``failed`` is True
and the caller stops feeding it. The native repairers (Messages, Responses) use it; the chat
path's markup_bridge.py keeps the same accounting beside its cap.
"""

from __future__ import annotations

from proxy.core.errors import DialectError
from proxy.core.markup.base import Extractor, Segment, Text


class FailOpen:
    __slots__ = ("_held", "extractor", "failed")

    def __init__(self, extractor: Extractor) -> None:
        self.extractor = extractor
        self._held = ""  # text fed and not given out, as far as known
        self.failed = False

    def passes(self, text: str) -> bool:
        return self.extractor.passes(text)

    def feed(self, text: str) -> list[Segment]:
        try:
            segments = self.extractor.feed(text)
        except DialectError:
            return self._give_back(text)
        held = self._held + text
        if all(isinstance(segment, Text) for segment in segments):
            returned = "".join(segment.text for segment in segments if isinstance(segment, Text))
            self._held = held[len(returned) :] if held.startswith(returned) else ""
        else:
            self._held = ""
        return segments

    def close(self) -> list[Segment]:
        try:
            segments = self.extractor.close()
        except DialectError:
            return self._give_back("")
        self._held = ""
        return segments

    def _give_back(self, text: str) -> list[Segment]:
        self.failed = True
        lost, self._held = self._held + text, ""
        return [Text(lost)] if lost else []


def fail_open(extractor: Extractor | None) -> FailOpen | None:
    return FailOpen(extractor) if extractor is not None else None

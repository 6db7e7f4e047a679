"""What the stream normalizer's output is: chat bytes for a chat client, or, for a client of
another protocol (proxy/core/bridge.py), values a :class:`NeutralWriter` reads neutral
events off (chat/sent.py) without the chat bytes being made.

The normalizer sends everything through these few hooks, so one normalizer serves both: the
hooks a chat client's stream asks on every event cost it an attribute and no call.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Final

from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.chat.neutral import NeutralWriter
from proxy.core.protocols.chat.pieces import Piece, Source
from proxy.core.protocols.chat.render import render_own, render_released
from proxy.core.protocols.chat.sent import Passed, Released, Said, Sent, own_sent
from proxy.core.sse import Event

_AS_CAME: Final[Callable[[Event], Sent]] = attrgetter("raw")  # C: asked of most events


class Output:
    def __init__(self) -> None:
        self._writer: NeutralWriter | None = None
        self._as_came = _AS_CAME  #: an upstream event sent as it came, unparsed
        self._template: JSONObject = {}  # the bridge's: the chunk a shape repeat repeats

    def write_events(self, writer: NeutralWriter) -> None:
        """Send the output to ``writer`` as neutral events instead of returning chat bytes:
        ``feed``, ``feed_read`` and ``close`` then return no bytes. Before the first feed."""
        self._writer = writer
        self._as_came = Passed

    def _write(self, out: list[Sent]) -> list[bytes]:
        """What a public method returns once its output went to the writer: no bytes."""
        assert self._writer is not None
        self._writer.write(out)
        return []

    def _kept(self, event: Event, chunk: JSONObject | None) -> Sent:
        """An upstream event sent as it came; ``chunk``: its data, as parsed here."""
        return event.raw if self._writer is None else Passed(event, chunk)

    def _own(self, source: Source, choices: list[JSONObject], own: list[list[Piece]]) -> list[Sent]:
        if self._writer is not None:
            return own_sent(source, choices, own)
        out: list[Sent] = []
        out += render_own(source, choices, own)
        return out

    def _released(self, piece: Piece) -> Sent:
        return render_released(piece) if self._writer is None else Released(piece)

    def _repeats(self, chunk: JSONObject, choice: JSONObject) -> bool:
        """Whether a chunk that went out as it came may be the shape later chunks repeat: for
        the bridge, only one whose events are its text alone (no error, no usage, choice
        0), so that a repeat's events are its text (``Said``)."""
        if self._writer is None:
            return True
        if (
            chunk.get("error") is not None
            or isinstance(chunk.get("usage"), dict)
            or choice.get("index", 0) != 0
        ):
            return False
        self._template = chunk
        return True

    def _said(self, key: int | None, text: str, size: int) -> Said:
        return Said(self._template, key, text, size)

    def _said_all(self, key: int | None, texts: list[str]) -> list[Sent]:
        # a read judged whole goes out at once, never into the queue: no size is asked
        template = self._template
        return [Said(template, key, text, 0) for text in texts]

"""What the normalizer sends, before it is chat bytes: for a client of another protocol.

A chat client gets the normalizer's output as chunk bytes (chat/render.py). A client of
another protocol (proxy/core/bridge.py) gets neutral events instead, and building them from
the chat bytes would render every chunk only to parse it again. So there the normalizer
sends these values in place of bytes, and chat/neutral.py reads the events off them: an
upstream event that goes out as it came (its chunk, where the normalizer parsed it), or the
typed pieces of a chunk of the proxy's own.

Held output waits in the normalizer's queue behind a held call, and the cap counts what
waits there in bytes; ``len`` of each value is the length of the chat bytes it stands for,
so the cap gives way at the same byte on both paths. It is asked only of what waits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.chat.deltas import ArgsDelta
from proxy.core.protocols.chat.pieces import Piece, Source
from proxy.core.protocols.chat.render import render_own, render_released
from proxy.core.sse import Event


@dataclass(frozen=True, slots=True)
class Passed:
    """An upstream event the chat client would get as it came; ``chunk``: its data, parsed
    (None: the normalizer judged it without parsing)."""

    event: Event
    chunk: JSONObject | None = None

    def __len__(self) -> int:
        return len(self.event.raw)


@dataclass(frozen=True, slots=True)
class Own:
    """The chunks an upstream chunk sends itself: piece k of every choice in chunk k
    (``render_own``'s arguments)."""

    source: Source
    choices: list[JSONObject]
    own: list[list[Piece]]

    def __len__(self) -> int:
        return sum(map(len, render_own(self.source, self.choices, self.own)))

    def with_args(self, text: str) -> Own:
        """The same chunk with ``text`` for the arguments of its one piece (an argument
        delta of a call in markup: chat/shape_repeats.py ``MarkupRepeat``)."""
        [[piece]] = self.own
        assert isinstance(piece.delta, ArgsDelta)
        delta = replace(piece.delta, text=text)
        return Own(self.source, self.choices, [[replace(piece, delta=delta)]])


@dataclass(frozen=True, slots=True)
class Released:
    """A piece sent after its chunk, in that chunk's envelope (``render_released``'s)."""

    piece: Piece

    def __len__(self) -> int:
        return len(render_released(self.piece))


@dataclass(frozen=True, slots=True)
class Said:
    """An upstream chunk that repeats the bytes of ``chunk`` (which went out as it came, and
    says nothing but one text) around another ``text``: ``chunk``'s events with that text
    (chat/shape_repeats.py). ``key``: the call's index in the chunk, for argument text;
    None for content."""

    chunk: JSONObject
    key: int | None
    text: str
    size: int  #: the event's bytes where it may wait in the queue (0 in a read judged whole)

    def __len__(self) -> int:
        return self.size


#: bytes: whole one-line data events as they came (a read judged whole, ``[DONE]``)
Sent = bytes | Said | Passed | Own | Released


def own_sent(source: Source, choices: list[JSONObject], own: list[list[Piece]]) -> list[Sent]:
    """``render_own``'s answer as values: nothing when the chunk sends nothing (everything
    in it was held and it carries no usage), which marks its source silent as there."""
    if not any(own) and source.chunk.get("usage") is None:
        source.silent = True
        return []
    return [Own(source, choices, own)]

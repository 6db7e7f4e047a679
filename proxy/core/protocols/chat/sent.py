"""What the stream normalizer sends: typed values, before they are chat bytes or events.

The normalizer returns these for every event; two writers consume them. A chat client's
stream writes them as chat bytes (:func:`chat_bytes`), a client of another protocol's
(proxy/core/bridge.py) reads neutral events off them (chat/neutral.py) without the chat bytes
being made: an upstream event that goes out as it came (its chunk, where the normalizer
parsed it), the typed pieces of a chunk of the proxy's own, or a chunk that repeats the
bytes of an earlier one around another text (chat/fast.py).

Held output waits in the normalizer's queue behind a held call, and the cap counts what
waits there in bytes; ``len`` of each value is the length of the chat bytes it stands for,
so the cap gives way at the same byte for both writers (:func:`size`; the tuples' own ``len``
is their fields'). It is asked only of what waits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, cast

from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.chat.pieces import Piece, Source
from proxy.core.protocols.chat.render import render_own, render_released
from proxy.core.sse import Event, RawBytes


class Passed:
    """An upstream event a chat client gets as it came; ``chunk``: its data, as parsed."""

    __slots__ = ("chunk", "event")

    def __init__(self, event: Event, chunk: JSONObject | None) -> None:
        self.event = event
        self.chunk = chunk

    def __len__(self) -> int:
        return len(self.event.raw)


@dataclass(eq=False, slots=True)
class Own:
    """The chunks an upstream chunk sends itself: piece k of every choice in chunk k
    (``render_own``'s arguments). Rendered once, when first asked."""

    source: Source
    choices: list[JSONObject]
    own: list[list[Piece]]
    _chat: list[bytes] | None = field(default=None, repr=False)

    def chat(self) -> list[bytes]:
        if self._chat is None:
            self._chat = render_own(self.source, self.choices, self.own)
        return self._chat

    def __len__(self) -> int:
        return sum(map(len, self.chat()))


class Released:
    """A piece sent after its chunk, in that chunk's envelope (``render_released``'s)."""

    __slots__ = ("_chat", "piece")

    def __init__(self, piece: Piece) -> None:
        self.piece = piece
        self._chat: bytes | None = None

    def chat(self) -> bytes:
        if self._chat is None:
            self._chat = render_released(self.piece)
        return self._chat

    def __len__(self) -> int:
        return len(self.chat())


class Said(NamedTuple):
    """An upstream event that repeats the bytes of an earlier chunk that went out as it came,
    around another ``text`` (chat/fast.py): it goes out as it came too. ``chunk``: that
    earlier chunk when its one event beside ``Started`` is its text (then so is this one's:
    ``key`` the call's index for argument text, None for content); else None (the event is
    read off its data). A tuple: one is made an event (chat/fast.py)."""

    chunk: JSONObject | None
    key: int | None
    text: str
    event: Event


class SaidRead(NamedTuple):
    """A read of whole one-line data events, each a ``Said`` of the same chunk: the read as it
    came (``data``), and the text of each event. A tuple, as ``Said``: one a read."""

    chunk: JSONObject | None
    key: int | None
    texts: list[str]
    data: bytes


#: bytes: whole one-line data events as they came (a read judged whole, ``[DONE]``); an
#: Event: an upstream event as it came, unparsed; RawBytes: bytes that are no event
Sent = bytes | Event | RawBytes | Passed | Own | Released | Said | SaidRead
#: what a read judged whole sends (``StreamNormalizer.feed_read``): one value alone, the read
#: itself when it goes out as it came, so that the usual read makes no list, or a list when
#: more goes with it
ReadSent = bytes | SaidRead | list[Sent]


def own_sent(source: Source, choices: list[JSONObject], own: list[list[Piece]]) -> list[Sent]:
    """``render_own``'s answer as values: nothing when the chunk sends nothing (everything
    in it was held and it carries no usage), which marks its source silent as there."""
    if not any(own) and source.chunk.get("usage") is None:
        source.silent = True
        return []
    return [Own(source, choices, own)]


def size(sent: Sent) -> int:
    """The length of the chat bytes ``sent`` stands for."""
    if isinstance(sent, Event | RawBytes):
        return len(sent.raw)
    if isinstance(sent, Said):
        return len(sent.event.raw)
    if isinstance(sent, SaidRead):
        return len(sent.data)
    return len(sent)


def chat_bytes(sent: list[Sent]) -> list[bytes]:
    """The chat client's writer: the normalizer's output as the bytes it sends, in order."""
    if len(sent) == 1:  # most reads: one value, which went out as it came
        item = sent[0]
        if type(item) is bytes:
            return cast("list[bytes]", sent)
        if type(item) is SaidRead:
            return [item.data]
    out: list[bytes] = []
    for item in sent:
        # asked of every value: the most frequent first, each by its exact type
        if type(item) is bytes:
            out.append(item)
        elif type(item) is Event:
            out.append(item.raw)
        elif type(item) is SaidRead:
            out.append(item.data)
        elif type(item) is Said or type(item) is Passed:
            out.append(item.event.raw)
        elif type(item) is Released:
            out.append(item.chat())
        elif type(item) is Own:
            out += item.chat()
        elif type(item) is RawBytes:
            out.append(item.raw)
        else:
            raise AssertionError(f"no chat bytes for {item!r}")
    return out

"""The chunk shapes later chunks repeat: a chunk that took one of a choice's hot paths, kept
so that a chunk of the same bytes around another text is judged by the text alone.

A chunk whose bytes repeat those of the latest chunk that went out as it came (a text or
argument delta that needed nothing) around a new string is that chunk with another text:
it is judged by the text alone, without parsing (chat/chunkshape.py). Likewise a chunk
repeating one whose markup arguments became a tool-call delta becomes that delta around
the new text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from proxy.core.protocols.chat.chunkshape import ChunkShape
from proxy.core.protocols.chat.hot_paths import HotPaths
from proxy.core.protocols.chat.pieces import Call
from proxy.core.protocols.chat.sent import Own, Sent
from proxy.core.sse import Event, plain_data, plain_datas


@dataclass(frozen=True, slots=True)
class ShapeRepeat:
    """A chunk that took one of the choice's hot paths, as the shape later chunks repeat: a
    chunk of the same shape is the same chunk with another text, so only the hot path's
    checks on the text remain (and the chunk need not be parsed)."""

    shape: ChunkShape
    hot: HotPaths  # the hot paths of the choice the chunk belongs to
    key: int | None  # the call's index for an argument fragment; None for content text

    @classmethod
    def of(
        cls,
        event: Event,
        data: bytes,
        hot: HotPaths,
        field: bytes,
        text: str,
        key: int | None = None,
    ) -> ShapeRepeat | None:
        shape = ChunkShape.around(data, field, text) if event.event is None else None
        return None if shape is None else cls(shape, hot, key)

    def take(self, data: bytes) -> str | None:
        """The text of ``data`` when it repeats the shape with a text that takes the hot path
        (which then does its bookkeeping); else None."""
        text = self.shape.text(data)
        if text is None:
            return None
        if self.key is None:
            return text if self.hot.text_passes(text) else None
        return text if self.hot.fragment_passes(self.key, text) else None

    def take_read(self, read: bytes, events: int) -> list[str] | None:
        """``take`` for every event of a read of whole one-line data events, all or none:
        their texts."""
        if events == 1:
            text = self.take(plain_data(read))
            return None if text is None else [text]
        texts: list[str] = []
        for data in plain_datas(read):
            text = self.shape.text(data)
            if text is None:
                return None
            texts.append(text)
        if self.key is None:
            return texts if all(map(self.hot.text_passes, texts)) else None
        kept: list[tuple[Call, str]] = []
        for text in texts:
            call = self.hot.fragment_call(self.key, text)
            if call is None:
                return None
            kept.append((call, text))
        for call, text in kept:
            self.hot.keep_fragment(call, text)
        return texts


@dataclass(frozen=True, slots=True)
class MarkupRepeat:
    """A chunk that took the markup-arguments hot path, as the shape later chunks repeat and
    the shape of the chunk sent for it: a chunk of the same shape around another content text
    that the hot path takes is sent as that chunk around the text, without parsing either
    (``ShapeRepeat`` does the same for chunks that go out as they came)."""

    shape: ChunkShape
    #: the chunk sent for a text: the encoded event's shape around it ("data: " and the blank
    #: line included), or for the bridge the same pieces with the text (chat/sent.py)
    sent: Callable[[str], Sent]
    hot: HotPaths  # the hot paths of the choice the chunk belongs to
    call: Call  # the sent chunk carries its index

    @classmethod
    def of(
        cls, event: Event, data: bytes, text: str, out: list[bytes], hot: HotPaths
    ) -> MarkupRepeat | None:
        call = hot.markup_call
        if event.event is not None or len(out) != 1 or call is None:
            return None
        shape = ChunkShape.around(data, b"content", text)
        sent = ChunkShape.around(out[0], b"arguments", text)
        return None if shape is None or sent is None else cls(shape, sent.with_text, hot, call)

    @classmethod
    def of_pieces(
        cls, event: Event, data: bytes, text: str, sent: Own, hot: HotPaths
    ) -> MarkupRepeat | None:
        """``of`` for a normalizer that sends pieces (the bridge's): a chunk of the same
        shape sends the same pieces around its text."""
        call = hot.markup_call
        if event.event is not None or call is None:
            return None
        shape = ChunkShape.around(data, b"content", text)
        return None if shape is None else cls(shape, sent.with_args, hot, call)

    def take(self, data: bytes) -> Sent | None:
        """The event to send for ``data`` when it repeats the shape with a text the hot path
        takes for the same call (which then does its bookkeeping); else None."""
        text = self.shape.text(data)
        if text is None or not self.hot.keep_markup_args(self.call, text):
            return None
        return self.sent(text)

"""The normalizer's typed output (chat/sent.py) as neutral events, for a client of another
protocol: the bridge's writer, where a chat client's is ``chat_bytes``.

The events are those :class:`~proxy.core.protocols.chat.decode.ChatDecoder` would read off
the chat bytes the same output renders to, under its rules (one choice read, choice 0;
``Started`` first, from the first chunk sent; calls closed at the finish; an ``error`` in a
chunk is ``Failed``), but nothing is rendered or parsed again: a chunk of the proxy's own is
read from its typed pieces, an upstream chunk the normalizer parsed from that parse, and only
an upstream event sent unparsed is parsed, once, here. Even that not when its bytes repeat
those of the latest such chunk, a chunk of nothing but content text, around another string
(chat/chunkshape.py): it is that chunk with another text (a stream that offered no tools
goes through the normalizer unparsed, and every chunk of it is such a repeat).
"""

from __future__ import annotations

from proxy.core.events import StreamEvent, TextDelta
from proxy.core.jsonvalues import JSONObject, loads
from proxy.core.protocols.chat.chunkshape import ChunkShape
from proxy.core.protocols.chat.decode import ChatDecoder, started_event
from proxy.core.protocols.chat.deltas import ArgsDelta, FieldsDelta, KeptDelta, OpeningDelta
from proxy.core.protocols.chat.pieces import Piece
from proxy.core.protocols.chat.sent import (
    Own,
    Passed,
    Released,
    Said,
    SaidRead,
    Sent,
)
from proxy.core.sse import Event, is_done, plain_datas


class NeutralWriter(ChatDecoder):
    """Where a normalizer writing for the bridge sends its output: ``write`` keeps the
    events it makes until ``take``."""

    def __init__(self) -> None:
        super().__init__()
        self._events: list[StreamEvent] = []
        self._text: ChunkShape | None = None  # the latest chunk parsed here, if of text alone

    def take(self) -> list[StreamEvent]:
        """The events written since the last ``take``."""
        events, self._events = self._events, []
        return events

    def write(self, sent: list[Sent]) -> None:
        out = self._events
        for item in sent:
            if isinstance(item, Said):  # the most frequent: a text or fragment repeated
                if item.chunk is None:
                    self._event(item.event, out)
                else:
                    self._said(item.chunk, item.key, item.text, out)
            elif isinstance(item, SaidRead):
                if item.chunk is None:
                    for data in plain_datas(item.data):
                        self._data(data, out)
                else:
                    for text in item.texts:
                        self._said(item.chunk, item.key, text, out)
            elif isinstance(item, Passed):
                if item.chunk is not None:
                    out += self.feed_chunk(item.chunk)
                else:
                    self._event(item.event, out)
            elif isinstance(item, Own):
                self._own(item, out)
            elif isinstance(item, Released):
                self._released(item.piece, out)
            elif isinstance(item, Event):
                self._event(item, out)
            elif isinstance(item, bytes):
                for data in plain_datas(item):
                    self._data(data, out)
            # RawBytes: no event (the end cut inside one, or past the event limit)

    def _said(self, chunk: JSONObject, key: int | None, text: str, out: list[StreamEvent]) -> None:
        if not self._started:
            self._started = True
            out.append(started_event(chunk))
        if key is None:
            if text:
                out.append(TextDelta(text))
        else:
            self._call(key, None, None, text, out)

    def _event(self, event: Event, out: list[StreamEvent]) -> None:
        if event.data is not None:
            self._data(event.data, out)

    def _data(self, data: bytes, out: list[StreamEvent]) -> None:
        if self._text is not None and (text := self._text.text(data)) is not None:
            if text:
                out.append(TextDelta(text))
            return
        if is_done(data):
            return
        value = loads(data)
        if isinstance(value, dict):
            out += self.feed_chunk(value)
            self._text = _text_shape(data, value)

    def _own(self, sent: Own, out: list[StreamEvent]) -> None:
        # as render_own builds them: chunk k holds piece k of every choice; the usage goes
        # on the last; a chunk that holds no piece goes out for its usage alone
        chunk, own = sent.source.chunk, sent.own
        count = max(map(len, own))
        if count == 0:
            if self._envelope(chunk, out):
                self._usage(chunk, out)
            return
        for k in range(count):
            if not self._envelope(chunk, out):
                continue
            for pieces in own:
                if len(pieces) > k:
                    self._piece(pieces[k], out)
            if k == count - 1:
                self._usage(chunk, out)

    def _released(self, piece: Piece, out: list[StreamEvent]) -> None:
        if self._envelope(piece.source.chunk, out):
            self._piece(piece, out)

    def _piece(self, piece: Piece, out: list[StreamEvent]) -> None:
        choice = piece.choice
        if choice.get("index", 0) != 0:
            return
        delta = piece.delta
        if isinstance(delta, ArgsDelta):
            if delta.head:
                self._delta(delta.head, out)
            self._call(delta.index, None, None, delta.text, out)
        elif isinstance(delta, OpeningDelta):
            if delta.head:
                self._delta(delta.head, out)
            self._call(delta.index, delta.id, delta.name, delta.arguments, out)
        elif isinstance(delta, FieldsDelta):
            self._delta(delta.fields, out)
        elif isinstance(delta, KeptDelta):
            kept = choice.get("delta")
            if isinstance(kept, dict):
                self._delta(kept, out)
        # the piece's finish stands for the choice's own (chat/render.py sets it over it)
        if isinstance(piece.finish, str) and piece.finish:
            out.extend(self._finish(piece.finish, choice.get("stop_reason")))


def _text_shape(data: bytes, chunk: JSONObject) -> ChunkShape | None:
    """The shape of ``chunk`` around its text when its one event beside ``Started`` is that
    text: no error, no usage, one choice (choice 0) of a delta of nothing but ``content``,
    no finish."""
    if chunk.get("error") is not None or isinstance(chunk.get("usage"), dict):
        return None
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1:
        return None
    [choice] = choices
    if type(choice) is not dict or choice.get("index", 0) != 0 or choice.get("finish_reason"):
        return None
    delta = choice.get("delta")
    if type(delta) is not dict or len(delta) != 1 or type(text := delta.get("content")) is not str:
        return None
    return ChunkShape.around(data, b"content", text)

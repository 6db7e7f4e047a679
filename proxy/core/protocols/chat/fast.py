"""The chat codec's fast paths: the deltas a choice sends as they came, judged without
``process``, and the chunk shapes later chunks repeat, judged without parsing. All of them
sit behind one switch (``StreamNormalizer(..., fast=False)`` takes none of them), and a
property test holds the output with it on to the output with it off, byte for byte
(tests/core/protocols/chat/test_fast_paths.py).

**Hot paths of a choice.**

Two shapes make up most of a long stream: a canonical argument fragment of an open call and
a plain content delta in which no markup can start. For each, a check says whether
``process`` would send the delta unchanged and change nothing but the bookkeeping done
here. Whether a call's arguments go out as they come is the
state table's answer (``CallRecord.streams``, kept by calls/driver.py from ``streams_args``),
not this module's; plain text is no input of any call.

:class:`HotPaths` is a choice's component for them, over the parts of the choice they read
(its calls, the calls by index, the markup, the latest chunk).

**Repeated shapes.** A chunk whose bytes repeat those of the latest chunk that went out as it
came (a text or argument delta that needed nothing) around a new string is that chunk with
another text: it is judged by the text alone, without parsing (chat/chunkshape.py,
:class:`ShapeRepeat`). Likewise a chunk repeating one of content that sent nothing because
the markup holds a call is fed to the extractor without parsing, and sends nothing while
nothing comes out (:class:`HeldRepeat`).
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.core.calls.driver import Calls
from proxy.core.calls.jsontext import complete_json
from proxy.core.jsonvalues import INVALID, JSONObject
from proxy.core.protocols.chat.call_matching import CallMatching
from proxy.core.protocols.chat.call_pieces import CallPieces
from proxy.core.protocols.chat.chunkshape import ChunkShape
from proxy.core.protocols.chat.deltas import Extras
from proxy.core.protocols.chat.markup_bridge import MarkupBridge
from proxy.core.protocols.chat.pieces import Call, Sink, Source
from proxy.core.protocols.chat.sent import Said, SaidRead
from proxy.core.sse import Event, plain_data, plain_datas
from proxy.core.usage import has_usage_object

# Said and SaidRead are tuples made once an event or a read: tuple.__new__ makes
# one without the Python call their constructor and ``_make`` cost
_new = tuple.__new__


class HotPaths:
    """The deltas of one choice that go out as they came (see above)."""

    __slots__ = (
        "_by_key",
        "_calls",
        "_keep",
        "_markup",
        "_matching",
        "_pieces",
        "_placeholders",
        "_suspects",
    )

    def __init__(
        self,
        calls: Calls[Call, Sink, Extras],
        matching: CallMatching,
        markup: MarkupBridge,
        pieces: CallPieces,
    ) -> None:
        self._calls = calls
        self._matching = matching
        self._by_key = matching.by_key  # the same dict, read on every fragment
        self._markup = markup
        self._pieces = pieces
        # bound once, the same objects the calls keep: asked on every fragment
        self._keep = calls.keep
        self._placeholders = calls.placeholders
        self._suspects = calls.suspects

    def take_canonical_fragment(self, choice: JSONObject, source: Source) -> bool:
        """The hot path: a canonical argument fragment of a call already open under the same
        index goes out as it came, with only the bookkeeping ``process`` would do. False when
        the chunk is anything else; ``process`` then handles it."""
        entries = sole_field(choice, "tool_calls")
        if type(entries) is not list or len(entries) != 1:
            return False
        entry = entries[0]
        if type(entry) is not dict or len(entry) != 2:
            return False
        key, function = entry.get("index"), entry.get("function")
        if type(key) is not int or type(function) is not dict or len(function) != 1:
            return False
        text = function.get("arguments")
        if type(text) is not str or not self.fragment_passes(key, text):
            return False
        pieces = self._pieces
        pieces.source, pieces.choice = source, choice
        return True

    def fragment_passes(self, key: int, text: str) -> bool:
        """The rest of ``take_canonical_fragment`` once the chunk's shape is known to be right:
        whether argument ``text`` under ``key`` continues an open call as it came, and if so
        its bookkeeping. Called directly for chunks that repeat the shape of one that took the
        hot path (chat/chunkshape.py), whose envelope is then the same."""
        call = self.fragment_call(key, text)
        if call is None:
            return False
        self.keep_fragment(call, text)
        return True

    def fragment_call(self, key: int, text: str) -> Call | None:
        """The open call that argument ``text`` under ``key`` continues as it came; None when
        the fragment needs ``process``. Changes nothing."""
        call = self._by_key.get(key)
        if (
            call is None
            or not call.streams  # the table: its arguments are not sent as they come
            or call.index != key
            or complete_json(text) is not INVALID  # maybe a re-sent copy (Q17)
            or self._placeholders
            or self._suspects  # another call moving on settles them (``release_others``)
        ):
            return None
        return call

    def keep_fragment(self, call: Call, text: str) -> None:
        self._matching.last = call
        self._keep(call, text)

    @property
    def markup(self) -> MarkupBridge:
        """The markup in the choice's text (for :class:`HeldRepeat`)."""
        return self._markup

    def take_plain_text(self, choice: JSONObject, source: Source) -> bool:
        """The hot path of a stream that offered tools: a delta of nothing but ``content``, in
        which no markup can start, goes out as it came. ``process`` would give the text back
        unchanged and change no state but the latest chunk; False sends it there instead."""
        text = sole_field(choice, "content")
        if type(text) is not str or not self.text_passes(text):
            return False
        pieces = self._pieces
        pieces.source, pieces.choice = source, choice
        return True

    def text_passes(self, text: str) -> bool:
        """The rest of ``take_plain_text`` once the chunk's shape is known to be right: whether
        content ``text`` goes out as it came (see ``fragment_passes``)."""
        markup = self._markup
        if not markup.extracting:
            return True
        return markup.passes(text)


def sole_field(choice: JSONObject, key: str) -> object:
    """The delta's ``key`` when it is the delta's only field and the choice does not finish
    (the shape every hot path starts from); else None."""
    delta = choice.get("delta")
    if type(delta) is not dict or len(delta) != 1 or choice.get("finish_reason") is not None:
        return None
    return delta.get(key)


@dataclass(frozen=True, slots=True)
class ShapeRepeat:
    """A chunk that took one of the choice's hot paths, as the shape later chunks repeat: a
    chunk of the same shape is the same chunk with another text, so only the hot path's
    checks on the text remain (and the chunk need not be parsed)."""

    shape: ChunkShape
    hot: HotPaths  # the hot paths of the choice the chunk belongs to
    key: int | None  # the call's index for an argument fragment; None for content text
    #: the chunk, when its one event beside ``Started`` is its text (chat/sent.py ``Said``)
    said: JSONObject | None
    #: the envelope holds a usage object, for the usage reader (proxy/core/usage.py). A
    #: repeat's bytes outside the shape's are one JSON string's, which holds no key: so a
    #: repeat holds a usage object exactly when the shape does, and none is searched for
    usage: bool

    @classmethod
    def of(
        cls,
        event: Event,
        data: bytes,
        chunk: JSONObject,
        hot: HotPaths,
        field: bytes,
        text: str,
        key: int | None = None,
    ) -> ShapeRepeat | None:
        shape = ChunkShape.around(data, field, text) if event.event is None else None
        if shape is None:
            return None
        usage = has_usage_object(shape.prefix) or has_usage_object(shape.suffix)
        return cls(shape, hot, key, _said(chunk), usage)

    def take_event(self, event: Event, data: bytes) -> Said | None:
        """``event`` (its ``data``) as it came, with its text, when it repeats the shape with a
        text that takes the hot path (which then does its bookkeeping); else None."""
        text = self.shape.text(data)
        if text is None:
            return None
        key = self.key
        if key is None:
            if not self.hot.text_passes(text):
                return None
        elif not self.hot.fragment_passes(key, text):
            return None
        return _new(Said, (self.said, key, text, event))

    def take_read(self, read: bytes, events: int, texts: bool) -> bytes | SaidRead | None:
        """``take_event`` for every event of a read of whole one-line data events, all or
        none: the read as it came, with their texts (``texts``: as a ``SaidRead``, what the
        bridge reads; else the read alone, no value made for it)."""
        if events == 1:  # the usual read, ``take_event`` written out without the event
            text = self.shape.text(plain_data(read))
            if text is None:
                return None
            key = self.key
            if key is None:
                if not self.hot.text_passes(text):
                    return None
            elif not self.hot.fragment_passes(key, text):
                return None
            return _new(SaidRead, (self.said, key, [text], read)) if texts else read
        said: list[str] = []
        for data in plain_datas(read):
            text = self.shape.text(data)
            if text is None:
                return None
            said.append(text)
        if self.key is None:
            if not all(map(self.hot.text_passes, said)):
                return None
            return _new(SaidRead, (self.said, self.key, said, read)) if texts else read
        kept: list[tuple[Call, str]] = []
        for text in said:
            call = self.hot.fragment_call(self.key, text)
            if call is None:
                return None
            kept.append((call, text))
        for call, text in kept:
            self.hot.keep_fragment(call, text)
        return _new(SaidRead, (self.said, self.key, said, read)) if texts else read


def _said(chunk: JSONObject) -> JSONObject | None:
    """``chunk`` when its events are its text alone (no error, no usage, choice 0), so that
    a repeat's events are its text; else None."""
    if chunk.get("error") is not None or isinstance(chunk.get("usage"), dict):
        return None
    choices = chunk.get("choices")
    if type(choices) is not list or not choices:
        return None
    choice = choices[0]
    return chunk if type(choice) is dict and choice.get("index", 0) == 0 else None


@dataclass(frozen=True, slots=True)
class HeldRepeat:
    """A chunk of nothing but content that sent nothing because the content's markup holds
    a call (issue 24 item 4: a call written as markup goes out whole at its end), as the
    shape later chunks repeat: a chunk of the same shape around another text is fed to the
    extractor without parsing it, and sends nothing as long as nothing comes out."""

    shape: ChunkShape
    markup: MarkupBridge  # the markup of the choice the chunk belongs to

    @classmethod
    def of(
        cls, event: Event, data: bytes, chunk: JSONObject, text: str, markup: MarkupBridge
    ) -> HeldRepeat | None:
        if event.event is not None or _said(chunk) is None or "usage" in chunk:
            return None
        shape = ChunkShape.around(data, b"content", text)
        return None if shape is None else cls(shape, markup)

    def take(self, data: bytes) -> bool | None:
        """Whether the chunk of ``data`` sent nothing (True), or was fed and must now be
        parsed and processed (False: ``process`` takes what came out of the extractor); None
        when it is not this shape around a text fed to a held call (nothing changed)."""
        markup = self.markup
        if markup.fed_ahead:
            return False
        text = self.shape.text(data)
        return None if text is None else markup.feed_held(text)

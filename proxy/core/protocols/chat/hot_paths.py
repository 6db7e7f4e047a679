"""The deltas of a choice that go out as they came, judged without ``process``.

Three shapes make up most of a long stream: a canonical argument fragment of an open call, a
plain content delta in which no markup can start, and content that only continues the
arguments of a call open in the markup. For each, a check says whether ``process`` would
send the delta unchanged (or, for markup arguments, as one argument delta) and change
nothing but the bookkeeping done here. Whether a call's arguments go out as they come is the
state table's answer (``CallRecord.streams``, kept by calls/driver.py from ``streams_args``),
not this module's; plain text is no input of any call.

:class:`HotPaths` is a choice's component for them, over the parts of the choice they read
(its calls, the calls by index, the markup, the latest chunk).
"""

from __future__ import annotations

from proxy.core.calls.driver import Calls
from proxy.core.markup.base import CallArgs
from proxy.core.protocols.chat.call_matching import CallMatching
from proxy.core.protocols.chat.call_pieces import CallPieces
from proxy.core.protocols.chat.chunks import INVALID, JSONObject, complete_json
from proxy.core.protocols.chat.deltas import Extras
from proxy.core.protocols.chat.markup_bridge import MarkupBridge
from proxy.core.protocols.chat.pieces import Call, Piece, Sink, Source


class HotPaths:
    """The deltas of one choice that go out as they came (see above)."""

    __slots__ = ("_by_key", "_calls", "_keep", "_markup", "_matching", "_pieces")

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
        self._keep = calls.keep  # bound once: asked on every fragment

    def take_canonical_fragment(self, choice: JSONObject, source: Source) -> bool:
        """The hot path: a canonical argument fragment of a call already open under the same
        index goes out as it came, with only the bookkeeping ``process`` would do. False when
        the chunk is anything else; ``process`` then handles it."""
        entries = _sole_field(choice, "tool_calls")
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
            or self._calls.placeholders
            or self._calls.suspects  # another call moving on settles them (``release_others``)
        ):
            return None
        return call

    def keep_fragment(self, call: Call, text: str) -> None:
        self._matching.last = call
        self._keep(call, text)

    def take_plain_text(self, choice: JSONObject, source: Source) -> bool:
        """The hot path of a stream that offered tools: a delta of nothing but ``content``, in
        which no markup can start, goes out as it came. ``process`` would give the text back
        unchanged and change no state but the latest chunk; False sends it there instead."""
        text = _sole_field(choice, "content")
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
        extractor = markup.extractors.get("content")
        return extractor is not None and extractor.passes(text)

    def take_markup_args(self, choice: JSONObject, source: Source) -> list[Piece] | None:
        """The hot path of a call streamed out of markup: a delta of nothing but ``content``
        that only continues the open call's arguments (``Extractor.args_run``). Its pieces,
        as ``process`` would give them with the same bookkeeping, without feeding the
        extractor; None when the chunk is anything else (``process`` then handles it).

        As for a canonical fragment, the state table answers whether the call's arguments go
        out as they come (``Call.streams``)."""
        text = _sole_field(choice, "content")
        call = self._markup.markup_call
        if type(text) is not str or call is None or not self.keep_markup_args(call, text):
            return None
        pieces = self._pieces
        pieces.source, pieces.choice = source, choice
        return [pieces.args_piece(call, text, source, choice)]

    @property
    def markup_call(self) -> Call | None:
        """The call that markup in the content has open, if any."""
        return self._markup.markup_call

    def keep_markup_args(self, call: Call, text: str) -> bool:
        """The rest of ``take_markup_args`` once the chunk's shape is known to be right:
        whether content ``text`` only continues the arguments of ``call``, the open call of
        the markup, and if so the text kept with its bookkeeping (else nothing changes).
        Called directly for chunks that repeat the bytes of one that took the hot path for
        the same call, whose output is then the same around the text (chat/normalize.py)."""
        markup = self._markup
        extractor = markup.extractors.get("content")
        if (
            call is not markup.markup_call
            or not call.streams
            or extractor is None
            or not markup.extracting
            or not extractor.args_run(text)
        ):
            return False
        markup.account("content", text, [CallArgs(text)])
        self._keep(call, text)
        return True


def _sole_field(choice: JSONObject, key: str) -> object:
    """The delta's ``key`` when it is the delta's only field and the choice does not finish
    (the shape every hot path starts from); else None."""
    delta = choice.get("delta")
    if type(delta) is not dict or len(delta) != 1 or choice.get("finish_reason") is not None:
        return None
    return delta.get(key)

"""Building the output pieces of a choice: a call's opening delta, an argument delta, text
(typed values, chat/deltas.py; chat/render.py writes them).

Output indexes are dense from 0 in the order the openings go out, so a call held for its
name does not block the others (Q11); the id is the upstream's, else a fresh one (Q5). The
shape repairs seen only once the opening is built (``type``, ``arguments`` or the index
missing or offset) are counted here, where the client's view of the call is settled.
"""

from __future__ import annotations

from proxy.core.protocols.chat.choice_base import ChoiceBase
from proxy.core.protocols.chat.chunks import JSONObject
from proxy.core.protocols.chat.deltas import ArgsDelta, Extras, Fields, FieldsDelta, OpeningDelta
from proxy.core.protocols.chat.pieces import Call, Piece, Source
from proxy.core.repairs import Repair


class CallPieces(ChoiceBase):
    def _opening(self, call: Call, args: str) -> Piece:
        call.index = self._next_index
        self._next_index += 1
        self._sent_calls += 1
        if call.upstream_id is not None:
            call.id = call.upstream_id
            self._s.ids.add(call.id)
        else:
            call.id = self._s.ids.fresh()
            self._record(Repair.ID_MISSING)
        if not call.from_markup:
            if not call.has_type:
                self._record(Repair.TYPE_MISSING)
            if not call.had_args_key:
                self._record(Repair.FIRST_DELTA_WITHOUT_ARGUMENTS)
            if isinstance(call.key, int) and call.key != call.index:
                self._record(Repair.INDEX_OFFSET)
        return Piece(
            call.origin,
            call.origin_choice,
            OpeningDelta(
                call.index,
                call.id,
                call.name,
                args,
                call.extras,
                call.head or None,
            ),
        )

    def _args_piece(
        self,
        call: Call,
        text: str,
        source: Source,
        choice: JSONObject,
        extras: Extras | None = None,
    ) -> Piece:
        assert call.index is not None  # the opening went out first
        return Piece(source, choice, ArgsDelta(call.index, text, extras))

    def _piece(self, fields: Fields) -> Piece:
        return Piece(self._source, self._choice, FieldsDelta(fields))

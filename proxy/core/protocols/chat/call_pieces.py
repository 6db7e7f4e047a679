"""Building the output pieces of a choice: a call's opening delta, an argument delta, text
(typed values, chat/deltas.py; chat/render.py writes them).

The call driver (proxy/core/calls/driver.py) says what goes out and when; here it becomes
chat pieces, put where they belong: a piece goes out in the chunk it comes from, and what a
held call releases goes where the call was held (``Sink``, ``Slot``). The shape repairs seen
only once the opening is built (``type``, ``arguments`` or the index missing or offset) are
counted here, where the client's view of the call is settled.
"""

from __future__ import annotations

from dataclasses import replace

from proxy.core.calls.driver import Calls
from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.chat.choice_base import ChoiceBase
from proxy.core.protocols.chat.deltas import (
    ArgsDelta,
    Extras,
    Fields,
    FieldsDelta,
    OpeningDelta,
    added,
)
from proxy.core.protocols.chat.pieces import Call, Piece, Sink, Source, StreamContext
from proxy.core.repairs import Repair


class CallPieces(ChoiceBase):
    def __init__(self, stream: StreamContext, source: Source, choice: JSONObject) -> None:
        super().__init__(stream, source, choice)
        self._calls = Calls(self._s, self, coalesce=stream.coalesce, dedupe=stream.dedupe)
        # bound once: asked on every delta
        self._record = self._calls.record
        self._input = self._calls.input
        self._keep = self._calls.keep

    # -- what the calls send (calls/driver.py's CallWriter) -----------------------------

    def put_opening(self, call: Call, args: str, out: Sink) -> None:
        out.put(self._opening(call, args), call)

    def put_held_args(self, call: Call, text: str, out: Sink) -> None:
        out.put(self._args_piece(call, text, call.origin, call.origin_choice), call)

    def put_args(self, call: Call, text: str, out: Sink, extras: Extras | None) -> None:
        # every continuation of a call streamed on the slow path comes here: built in place
        assert call.index is not None  # the opening went out first
        out.put(Piece(self._source, self._choice, ArgsDelta(call.index, text, extras)))

    def hold_opening(self, call: Call, args: str) -> None:
        call.placeholder = self._opening(call, args)

    def release_opening(self, call: Call, out: Sink, *, without_args: bool) -> None:
        held, call.placeholder = call.placeholder, None
        assert held is not None
        if without_args:
            assert isinstance(held.delta, OpeningDelta)
            held = replace(held, delta=replace(held.delta, arguments=""))
        out.put(held, call)

    def add_extras(self, call: Call, extras: Extras) -> None:
        call.extras = added(call.extras, extras)

    def holding(self, call: Call, out: Sink) -> None:
        if call.slot is None and call not in out.holding:
            out.holding.append(call)

    def settled(self, call: Call) -> None:
        if call.slot is not None:
            call.slot.done = True

    # -- the pieces --------------------------------------------------------------------------

    def _opening(self, call: Call, args: str) -> Piece:
        """The opening of a call the driver has identified, with ``args`` as its arguments."""
        assert call.index is not None
        assert call.id is not None
        if not call.from_markup:
            if not call.has_type:
                self._record(Repair.TYPE_MISSING)
            if not call.had_args_key:
                self._record(Repair.FIRST_DELTA_WITHOUT_ARGUMENTS)
            if isinstance(call.key, int) and call.key != call.index:
                self._record(Repair.INDEX_OFFSET)
        delta = OpeningDelta(call.index, call.id, call.name, args, call.extras, call.head or None)
        return Piece(call.origin, call.origin_choice, delta)

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

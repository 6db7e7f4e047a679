"""Building the output pieces of a choice: a call's opening delta, an argument delta, text
(typed values, chat/deltas.py; chat/render.py writes them).

The calls (proxy/core/calls/driver.py ``Calls``) say what goes out and when; :class:`CallPieces`
is their writer (``CallWriter``): what they send becomes chat pieces, put where they belong.
A piece goes out in the chunk it comes from (the choice's latest, ``source`` and ``choice``
here), and what a held call releases goes where the call was held (``Sink``, ``Slot``). The
shape repairs seen only once the opening is built (``type``, ``arguments`` or the index
missing or offset) are counted here, where the client's view of the call is settled.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.chat.deltas import (
    ArgsDelta,
    Extras,
    Fields,
    FieldsDelta,
    OpeningDelta,
    added,
)
from proxy.core.protocols.chat.pieces import Call, Piece, Sink, Source
from proxy.core.repairs import Repair


class CallPieces:
    """The pieces of one choice, in the envelope of its latest chunk (``source``, ``choice``)."""

    __slots__ = ("_repairs", "choice", "source")

    def __init__(self, source: Source, choice: JSONObject, repairs: Counter[str]) -> None:
        self.source = source  #: the latest chunk of this choice
        self.choice = choice
        self._repairs = repairs

    # -- what the calls send (calls/driver.py's CallWriter) -----------------------------

    def put_opening(self, call: Call, args: str, out: Sink) -> None:
        out.put(self.opening(call, args), call)

    def put_held_args(self, call: Call, text: str, out: Sink) -> None:
        out.put(self.args_piece(call, text, call.origin, call.origin_choice), call)

    def put_args(self, call: Call, text: str, out: Sink, extras: Extras | None) -> None:
        # every continuation of a call streamed on the slow path comes here: built in place
        assert call.index is not None  # the opening went out first
        out.put(Piece(self.source, self.choice, ArgsDelta(call.index, text, extras)))

    def hold_opening(self, call: Call, args: str) -> None:
        call.placeholder = self.opening(call, args)

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

    # -- a wrapper's calls (calls/driver.py's Unwrapping; issue 24 item 6) ----------------

    def entry_call(self, wrapper: Call) -> Call:
        """A call of the wrapper's, begun where it began (its opening goes out where the
        wrapper was held); the delta fields that waited for the wrapper's opening go with
        the first."""
        call = Call(
            None,
            None,
            origin=wrapper.origin,
            origin_choice=wrapper.origin_choice,
            has_type=True,
            had_args_key=True,
            slot=wrapper.slot,
            head=wrapper.head,
            extras=wrapper.extras,
        )
        wrapper.head = wrapper.extras = None
        return call

    def entry_done(self, call: Call, out: Sink) -> None:
        """Nothing to end: a chat call's arguments end with its choice."""

    # -- the pieces --------------------------------------------------------------------------

    def opening(self, call: Call, args: str) -> Piece:
        """The opening of a call the driver has identified, with ``args`` as its arguments."""
        assert call.index is not None
        assert call.id is not None
        if not call.from_markup:
            if not call.has_type:
                self._repairs[Repair.TYPE_MISSING] += 1
            if not call.had_args_key:
                self._repairs[Repair.FIRST_DELTA_WITHOUT_ARGUMENTS] += 1
            if isinstance(call.key, int) and call.key != call.index:
                self._repairs[Repair.INDEX_OFFSET] += 1
        delta = OpeningDelta(call.index, call.id, call.name, args, call.extras, call.head or None)
        return Piece(call.origin, call.origin_choice, delta)

    def args_piece(
        self,
        call: Call,
        text: str,
        source: Source,
        choice: JSONObject,
        extras: Extras | None = None,
    ) -> Piece:
        assert call.index is not None  # the opening went out first
        return Piece(source, choice, ArgsDelta(call.index, text, extras))

    def piece(self, fields: Fields) -> Piece:
        """A delta of ``fields`` in the latest chunk."""
        return Piece(self.source, self.choice, FieldsDelta(fields))

    def new_call(self, key: int | str | None, ident: str | None, *, markup: bool = False) -> Call:
        """A call that begins in the latest chunk."""
        return Call(key, ident, from_markup=markup, origin=self.source, origin_choice=self.choice)

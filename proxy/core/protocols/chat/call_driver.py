"""Driving the call state machine: an input in, the table's action performed.

The table (proxy/core/calls/state.py) says what each input does to a call; here the action
is carried out (what is kept, held, opened, sent or dropped), the inputs a state triggers
are made (``whole_calls_due``, ``released_by``), and the table's answer for the hot paths is
kept on the call (``Call.streams``).
"""

from __future__ import annotations

from dataclasses import replace

from proxy.core.calls.argtext import ArgText
from proxy.core.calls.repeats import repeats
from proxy.core.calls.state import (
    ARGS_END,
    FALLBACK_OPENING,
    Action,
    CallInput,
    CallState,
    placeholder_after,
    released_by,
    replaces_placeholder,
    transition,
    whole_calls_due,
)
from proxy.core.protocols.chat.call_pieces import CallPieces
from proxy.core.protocols.chat.chunks import INVALID, complete_json
from proxy.core.protocols.chat.deltas import Extras, OpeningDelta, added
from proxy.core.protocols.chat.pieces import HELD, Call, Sink
from proxy.core.repairs import Repair


class CallDriver(CallPieces):
    def _naming(self, call: Call, text: str) -> CallInput:
        """The input of the entry that names ``call``, with argument ``text``: a suspect if
        it may repeat an earlier call; else by the argument text known. Entries held before
        the name (vmlx sends an opening with an empty name) make even complete arguments an
        opening with ``""`` and the arguments apart: only a call in a single delta with
        nothing before it goes out whole (Groq)."""
        call.rivals = self._repeats.rivals(self._calls, call)
        if call.rivals:
            return CallInput.NAMED_SUSPECT
        event = opening_input(call.text() + text)
        return CallInput.NAMED_PARTIAL if event is CallInput.NAMED_WHOLE and call.waited else event

    def _send_whole_calls(self, sink: Sink) -> None:
        """S2: send the calls that are due whole (``whole_calls_due``)."""
        due, self._unsent = whole_calls_due(self._calls, self._unsent)
        for call in due:
            self._input(call, CallInput.COMPLETE, "", sink)

    def _release_others(self, call: Call, sink: Sink) -> None:
        """A held placeholder goes out as it is once another call of the choice moves on, and
        a suspect's arguments end (``released_by``)."""
        # asked on every entry: most of the time there is nothing held to release
        if self._placeholders:
            for other in released_by(call, self._placeholders):
                self._input(other, CallInput.END, "", sink)
        if self._suspects:
            for other in released_by(call, self._suspects):
                self._input(other, CallInput.END, "", sink)

    def _input(
        self,
        call: Call,
        event: CallInput,
        text: str,
        sink: Sink,
        *,
        complete: bool = True,
        extras: Extras | None = None,
    ) -> None:
        if call.state is CallState.SUSPECT and event in ARGS_END and repeats(call):
            self._record(Repair.CALL_DUPLICATED)
            event = CallInput.DUPLICATE
        state, action = transition(self._table, call.state, event)
        if state is CallState.PLACEHOLDER:
            self._placeholders[call] = None
        elif call.state is CallState.PLACEHOLDER:
            del self._placeholders[call]
        if state is CallState.SUSPECT:
            self._suspects[call] = None
        elif call.state is CallState.SUSPECT:
            del self._suspects[call]
        call.state = state
        call.streams = state in self._streams
        if state in HELD:
            if call.slot is None and call not in sink.holding:
                sink.holding.append(call)
        elif call.slot is not None:
            call.slot.done = True
        match action:  # the cases are tried in turn: streamed arguments come first
            case Action.SEND_ARGS:
                self._send_args(call, text, sink, extras)
            case Action.NOTHING:
                pass
            case Action.HOLD:
                call.waited = True
                self._keep(call, text)
            case Action.OPEN | Action.OPEN_SPLIT | Action.OPEN_WHOLE:
                self._keep(call, text)
                self._open(call, action, sink)
                if action is Action.OPEN_SPLIT and text:
                    self._record(Repair.ARGS_IN_FIRST_DELTA)
                if event is CallInput.END and complete and call.args_len == 0:  # a suspect
                    self._record(Repair.EMPTY_ARGUMENTS)
                    self._send_args(call, "{}", sink, None)
            case Action.DROP:
                self._keep(call, text)
                if call.args:
                    self._s.dropped.append(call.text())
                    self._s.held -= len(call.args)
                    call.args = ArgText()
            case Action.HOLD_OPENING:
                self._keep(call, text)
                call.placeholder = self._opening(call, call.text())
            case Action.RELEASE_FOR_ARGS:
                held, call.placeholder = call.placeholder, None
                assert held is not None
                if replaces_placeholder(text):
                    self._drop_placeholder(call)
                    assert isinstance(held.delta, OpeningDelta)
                    held = replace(held, delta=replace(held.delta, arguments=""))
                sink.put(held, call)
                self._send_args(call, text, sink, extras)
            case Action.RELEASE:
                held, call.placeholder = call.placeholder, None
                assert held is not None
                sink.put(held, call)
            case Action.CLOSE_ARGS:
                if complete and call.args_len == 0:
                    self._record(Repair.EMPTY_ARGUMENTS)
                    self._send_args(call, "{}", sink, None)
            case Action.FALLBACK:
                self._name_fallback(call)
                self._open(call, FALLBACK_OPENING[opening_input(call.text())], sink)
                if complete and call.args_len == 0:
                    self._record(Repair.EMPTY_ARGUMENTS)
                    self._send_args(call, "{}", sink, None)
            case Action.COLLECT:
                self._collect(call, event, text, extras)
            case Action.SEND_WHOLE | Action.FALLBACK_WHOLE:
                if action is Action.FALLBACK_WHOLE:
                    self._name_fallback(call)
                if complete and call.args_len == 0:
                    self._record(Repair.EMPTY_ARGUMENTS)
                    self._keep(call, "{}")
                sink.put(self._opening(call, call.text()), call)

    def _keep(self, call: Call, text: str) -> None:
        if text:
            call.args.append(text)
            call.args_len += len(text)
            self._s.held += len(text)

    def _drop_placeholder(self, call: Call) -> None:
        self._record(Repair.ARGS_PLACEHOLDER)
        self._s.dropped.append(call.text())
        self._s.held -= len(call.args)
        call.args_len -= len(call.args)
        call.args = ArgText()

    def _collect(
        self,
        call: Call,
        event: CallInput,
        text: str,
        extras: Extras | None,
    ) -> None:
        call.extras = added(call.extras, extras)
        names_placeholder = event is CallInput.NAMED_PLACEHOLDER or (
            event is CallInput.NAMED_SUSPECT
            and opening_input(call.text() + text) is CallInput.NAMED_PLACEHOLDER
        )
        call.placeholder_args, drop = placeholder_after(
            names_placeholder, call.placeholder_args, text
        )
        if drop:
            self._drop_placeholder(call)
        self._keep(call, text)

    def _open(self, call: Call, action: Action, sink: Sink) -> None:
        text = call.text()
        if action is Action.OPEN_WHOLE:
            sink.put(self._opening(call, text), call)
            return
        sink.put(self._opening(call, ""), call)
        if text:
            sink.put(self._args_piece(call, text, call.origin, call.origin_choice), call)

    def _send_args(
        self,
        call: Call,
        text: str,
        sink: Sink,
        extras: Extras | None,
    ) -> None:
        self._keep(call, text)
        if text or extras is not None:
            piece = self._args_piece(call, text, self._source, self._choice, extras)
            sink.put(piece)

    def _name_fallback(self, call: Call) -> None:
        self._record(Repair.NAME_MISSING)
        call.name = self._s.fallback_name


def opening_input(args: str) -> CallInput:
    """How a call opens, by the argument text known when its name arrives."""
    if not args:
        return CallInput.NAMED_EMPTY
    value = complete_json(args)
    if value is INVALID:
        return CallInput.NAMED_PARTIAL
    return CallInput.NAMED_PLACEHOLDER if value == {} else CallInput.NAMED_WHOLE

"""Driving the call state machine: an input in, the table's action performed.

The table (calls/state.py) says what each input does to a call; here the action is carried
out (what is kept, held, opened, sent or dropped), the inputs a state triggers are made
(``whole_calls_due``, ``released_by``), and the table's answer for the hot paths is kept on
the call (``CallRecord.streams``). The call's identity the client sees (its index, dense
from 0 in the order the openings go out, Q11; the upstream's id, else a fresh one, Q5) is
settled here when its opening is built.

What goes out is the protocol's to build: the driver names it through the few methods at
the end (the opening, argument text, a held opening released) and hands them an output
value (``Out``) and the unknown fields an entry carried (``Extra``) without looking inside.
The protocol's choice normalizer is this class's subclass (protocols/chat/choice_base.py),
one object rather than several: every delta of a stream reaches these attributes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from typing import Generic, Protocol, TypeVar

from proxy.core.calls.argtext import ArgText
from proxy.core.calls.jsontext import complete_json
from proxy.core.calls.record import CallRecord
from proxy.core.calls.repeats import Repeats, repeats
from proxy.core.calls.state import (
    ARGS_END,
    FALLBACK_OPENING,
    HELD,
    PLACEHOLDER,
    S1,
    S1_STREAMS,
    S2,
    S2_STREAMS,
    SUSPECT,
    Action,
    CallInput,
    CallState,
    Table,
    placeholder_after,
    released_by,
    replaces_placeholder,
    transition,
    whole_calls_due,
)
from proxy.core.ids import IdPool
from proxy.core.jsonvalues import INVALID
from proxy.core.repairs import Repair

C = TypeVar("C", bound=CallRecord)  # the protocol's call record
Out = TypeVar("Out")  # where the protocol puts what goes out
Extra = TypeVar("Extra")  # an entry's unknown fields, carried to the protocol's output

# The actions as module names for _input: an Enum's class attribute is a lookup through its
# class each time it is read (about 90 ns on Python 3.11), and _input runs for every call input.
_NOTHING = Action.NOTHING
_HOLD = Action.HOLD
_OPEN = Action.OPEN
_OPEN_SPLIT = Action.OPEN_SPLIT
_OPEN_WHOLE = Action.OPEN_WHOLE
_HOLD_OPENING = Action.HOLD_OPENING
_RELEASE_FOR_ARGS = Action.RELEASE_FOR_ARGS
_RELEASE = Action.RELEASE
_SEND_ARGS = Action.SEND_ARGS
_CLOSE_ARGS = Action.CLOSE_ARGS
_FALLBACK = Action.FALLBACK
_COLLECT = Action.COLLECT
_SEND_WHOLE = Action.SEND_WHOLE
_FALLBACK_WHOLE = Action.FALLBACK_WHOLE
_DROP = Action.DROP
_END = CallInput.END


class Tally(Protocol):
    """What the calls of one stream share: ids, the counts and what is held."""

    ids: IdPool
    fallback_name: str | None  #: the name a nameless call must have, from the request
    repairs: Counter[str]
    dropped: list[str]  #: argument text removed on purpose, reported
    held: int  #: argument characters of calls held (the client has not seen them yet)
    kept: int  #: argument characters kept of calls the client was shown (for the checks)


class CallDriver(ABC, Generic[C, Out, Extra]):
    # Slots: a protocol's stream object is this class's subclass, and with these on its
    # __dict__ as well it outgrew the 30 keys CPython 3.11 shares between instances (a
    # native Responses stream had 33), which makes every attribute read of it slower.
    __slots__ = (
        "_calls",
        "_next_index",
        "_placeholders",
        "_repeats",
        "_sent_calls",
        "_streams",
        "_suspects",
        "_table",
        "_tally",
        "_unsent",
    )

    def __init__(self, tally: Tally, *, coalesce: bool, dedupe: bool) -> None:
        self._tally = tally
        self._table: Table = S2 if coalesce else S1
        # the table's answer to "does a fragment of a call in this state go out as it came"
        self._streams: tuple[CallState, ...] = S2_STREAMS if coalesce else S1_STREAMS
        self._calls: list[C] = []
        # Found without a scan over the calls, which a choice of thousands would make on
        # every delta: the held placeholders (in S1 at most one, as a call only becomes one
        # right after the others were released), and the first call S2 has not sent whole
        # (every call before it is OPEN, which a call stays).
        self._placeholders: dict[C, None] = {}
        self._suspects: dict[C, None] = {}  # held until their arguments end (SUSPECT)
        self._repeats = Repeats(dedupe=dedupe)
        self._unsent = 0
        self._next_index = 0
        self._sent_calls = 0

    def _record(self, repair: Repair) -> None:
        self._tally.repairs[repair] += 1

    def _naming(self, call: C, text: str) -> CallInput:
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

    def _send_whole_calls(self, out: Out) -> None:
        """S2: send the calls that are due whole (``whole_calls_due``)."""
        due, self._unsent = whole_calls_due(self._calls, self._unsent)
        for call in due:
            self._input(call, CallInput.COMPLETE, "", out)

    def _release_others(self, call: C, out: Out) -> None:
        """A held placeholder goes out as it is once another call of the choice moves on, and
        a suspect's arguments end (``released_by``)."""
        # asked on every entry: most of the time there is nothing held to release
        if self._placeholders:
            for other in released_by(call, self._placeholders):
                self._input(other, CallInput.END, "", out)
        if self._suspects:
            for other in released_by(call, self._suspects):
                self._input(other, CallInput.END, "", out)

    def _input(
        self,
        call: C,
        event: CallInput,
        text: str,
        out: Out,
        *,
        complete: bool = True,
        extras: Extra | None = None,
    ) -> None:
        if call.state is SUSPECT and event in ARGS_END and repeats(call):
            self._record(Repair.CALL_DUPLICATED)
            event = CallInput.DUPLICATE
        state, action = transition(self._table, call.state, event)
        if state is PLACEHOLDER:
            self._placeholders[call] = None
        elif call.state is PLACEHOLDER:
            del self._placeholders[call]
        if state is SUSPECT:
            self._suspects[call] = None
        elif call.state is SUSPECT:
            del self._suspects[call]
        previous, call.state = call.state, state
        call.streams = state in self._streams
        if state in HELD:
            self._holding(call, out)
        elif previous in HELD:  # no call is held again once it is not (the tables)
            kept = len(call.args)  # what it held is kept from now on, not held
            self._tally.held -= kept
            self._tally.kept += kept
            self._settled(call)
        # tried in turn, the most frequent first: streamed arguments, then what collects
        if action is _SEND_ARGS:
            self._send_args(call, text, out, extras)
        elif action is _NOTHING:
            pass
        elif action is _HOLD:
            call.waited = True
            self._keep(call, text)
        elif action is _OPEN or action is _OPEN_SPLIT or action is _OPEN_WHOLE:
            self._keep(call, text)
            self._open(call, action, out)
            if action is _OPEN_SPLIT and text:
                self._record(Repair.ARGS_IN_FIRST_DELTA)
            if event is _END and complete and call.args_len == 0:  # a suspect
                self._record(Repair.EMPTY_ARGUMENTS)
                self._send_args(call, "{}", out, None)
        elif action is _COLLECT:
            self._collect(call, event, text, extras)
        elif action is _SEND_WHOLE or action is _FALLBACK_WHOLE:
            if action is _FALLBACK_WHOLE:
                self._name_fallback(call)
            if complete and call.args_len == 0:
                self._record(Repair.EMPTY_ARGUMENTS)
                self._keep(call, "{}")
            self._identify(call)
            self._put_opening(call, call.text(), out)
        elif action is _CLOSE_ARGS:
            if complete and call.args_len == 0:
                self._record(Repair.EMPTY_ARGUMENTS)
                self._send_args(call, "{}", out, None)
        elif action is _DROP:
            self._keep(call, text)
            if call.args:
                self._tally.dropped.append(call.text())
                self._forget(call)
        elif action is _HOLD_OPENING:
            self._keep(call, text)
            self._identify(call)
            self._hold_opening(call, call.text())
        elif action is _RELEASE_FOR_ARGS:
            replaced = replaces_placeholder(text)
            if replaced:
                self._drop_placeholder(call)
            self._release_opening(call, out, without_args=replaced)
            self._send_args(call, text, out, extras)
        elif action is _RELEASE:
            self._release_opening(call, out, without_args=False)
        elif action is _FALLBACK:
            self._name_fallback(call)
            self._open(call, FALLBACK_OPENING[opening_input(call.text())], out)
            if complete and call.args_len == 0:
                self._record(Repair.EMPTY_ARGUMENTS)
                self._send_args(call, "{}", out, None)
        else:
            raise AssertionError(f"no case for {action}")

    def _keep(self, call: C, text: str) -> None:
        if text:
            call.args.append(text)
            call.args_len += len(text)
            # a call that streams is not held (the hot paths' answer, a flag on the call)
            if call.streams or call.state not in HELD:
                self._tally.kept += len(text)
            else:
                self._tally.held += len(text)

    def _forget(self, call: C) -> None:
        """The argument text ``call`` kept is let go (the call ended, or was dropped)."""
        if call.state in HELD:
            self._tally.held -= len(call.args)
        else:
            self._tally.kept -= len(call.args)
        call.args = ArgText()

    def _drop_placeholder(self, call: C) -> None:
        self._record(Repair.ARGS_PLACEHOLDER)
        self._tally.dropped.append(call.text())
        call.args_len -= len(call.args)
        self._forget(call)

    def _collect(self, call: C, event: CallInput, text: str, extras: Extra | None) -> None:
        if extras is not None:
            self._add_extras(call, extras)
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

    def _open(self, call: C, action: Action, out: Out) -> None:
        text = call.text()
        self._identify(call)
        if action is _OPEN_WHOLE:
            self._put_opening(call, text, out)
            return
        self._put_opening(call, "", out)
        if text:
            self._put_held_args(call, text, out)

    def _send_args(self, call: C, text: str, out: Out, extras: Extra | None) -> None:
        self._keep(call, text)
        if text or extras is not None:
            self._put_args(call, text, out, extras)

    def _name_fallback(self, call: C) -> None:
        self._record(Repair.NAME_MISSING)
        call.name = self._tally.fallback_name

    def _identify(self, call: C) -> None:
        """The index and id the client sees, settled as the call's opening is built."""
        call.index = self._next_index
        self._next_index += 1
        self._sent_calls += 1
        if call.upstream_id is not None:
            call.id = call.upstream_id
            self._tally.ids.add(call.id)
        else:
            call.id = self._tally.ids.fresh()
            self._record(Repair.ID_MISSING)

    # -- what the protocol builds ------------------------------------------------------------

    @abstractmethod
    def _put_opening(self, call: C, args: str, out: Out) -> None:
        """Send the opening of ``call`` (identified) with ``args`` as its arguments."""

    @abstractmethod
    def _put_held_args(self, call: C, text: str, out: Out) -> None:
        """Send argument text held until the opening, where the call began."""

    @abstractmethod
    def _put_args(self, call: C, text: str, out: Out, extras: Extra | None) -> None:
        """Send argument text (maybe empty, when ``extras`` came) as a continuation."""

    @abstractmethod
    def _hold_opening(self, call: C, args: str) -> None:
        """Build the opening of ``call`` (identified) with ``args`` and keep it back."""

    @abstractmethod
    def _release_opening(self, call: C, out: Out, *, without_args: bool) -> None:
        """Send the opening held back, with ``""`` for its arguments if ``without_args``."""

    @abstractmethod
    def _add_extras(self, call: C, extras: Extra) -> None:
        """Keep an entry's unknown fields for the call's opening (S2: collected)."""

    @abstractmethod
    def _holding(self, call: C, out: Out) -> None:
        """``call`` is held (calls/state.py, ``HELD``): what comes after waits behind it."""

    @abstractmethod
    def _settled(self, call: C) -> None:
        """``call`` is no longer held: what waited behind it may go."""


def opening_input(args: str) -> CallInput:
    """How a call opens, by the argument text known when its name arrives."""
    if not args:
        return CallInput.NAMED_EMPTY
    value = complete_json(args)
    if value is INVALID:
        return CallInput.NAMED_PARTIAL
    return CallInput.NAMED_PLACEHOLDER if value == {} else CallInput.NAMED_WHOLE

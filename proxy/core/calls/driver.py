"""Driving the call state machine: an input in, the table's action performed.

The table (calls/state.py) says what each input does to a call; here the action is carried
out (what is kept, held, opened, sent or dropped), the inputs a state triggers are made
(``whole_calls_due``, ``released_by``), and the table's answer for the hot paths is kept on
the call (``CallRecord.streams``). The call's identity the client sees (its index, dense
from 0 in the order the openings go out, Q11; the upstream's id, else a fresh one, Q5) is
settled here when its opening is built.

What goes out is the protocol's to build: :class:`Calls`, the component a protocol's stream
(or chat's choice) holds, names it through the protocol's :class:`CallWriter` (the opening,
argument text, a held opening released, a call held or settled) and hands it an output
value (``Out``) and the unknown fields an entry carried (``Extra``) without looking inside.
The writer's methods are bound once, when the component is made: every delta of a stream
reaches them, and a lookup through the writer would be paid on each.

What issue 25 asks of a call's arguments happens here too, once for every protocol: a call
past the first one named is EXTRA under ``one_call`` (``parallel_tool_calls: false``), and
``rules`` (proxy/core/arguments/rules.py; None for a request without tools) fixes a call's
arguments as S2 sends it whole and checks them where the protocol says the call ended
(:meth:`Calls.ended`).

The model's multi-call wrapper (calls/wrapper.py; issue 24 item 6) is split here, before
both: named so while the request offers no tool of its name, it is a SUSPECT (held until its
arguments end), then UNWRAP gives way to one call per entry, which the protocol makes
(:class:`Unwrapping`) and which then go through the table as calls named whole at once: the
first is the one call ``one_call`` keeps, and each is checked against its own tool.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Final, Generic, Protocol, TypeVar

from proxy.core.arguments.rules import CallRules
from proxy.core.calls.argtext import ArgText
from proxy.core.calls.jsontext import complete_json
from proxy.core.calls.record import CallRecord
from proxy.core.calls.repeats import Repeats, repeats
from proxy.core.calls.state import (
    ARGS_END,
    COLLECTED,
    DROPPED,
    FALLBACK_OPENING,
    HELD,
    NAMELESS,
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
from proxy.core.calls.wrapper import entries, is_wrapper
from proxy.core.ids import IdPool
from proxy.core.jsonvalues import INVALID
from proxy.core.repairs import Repair

C = TypeVar("C", bound=CallRecord)  # the protocol's call record
Out = TypeVar("Out")  # where the protocol puts what goes out
Extra = TypeVar("Extra")  # an entry's unknown fields, carried to the protocol's output
C_in = TypeVar("C_in", bound=CallRecord, contravariant=True)
Out_in = TypeVar("Out_in", contravariant=True)
Extra_in = TypeVar("Extra_in", contravariant=True)

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
_UNWRAP = Action.UNWRAP
_ARGS = CallInput.ARGS
_END = CallInput.END
_EXTRA = CallInput.EXTRA
#: the inputs that take a call out of NAMELESS (other than into a hold): a call named then
#: is EXTRA when it is not the first (``one_call``)
_LEAVES_NAMELESS: Final = frozenset(
    (*(i for i in CallInput if i.name.startswith("NAMED_")), CallInput.END)
)


class Tally(Protocol):
    """What the calls of one stream share: ids, the counts and what is held."""

    ids: IdPool
    fallback_name: str | None  #: the name a nameless call must have, from the request
    repairs: Counter[str]
    dropped: list[str]  #: argument text removed on purpose, reported
    held: int  #: argument characters of calls held (the client has not seen them yet)
    kept: int  #: argument characters kept of calls the client was shown (for the checks)


class CallWriter(Protocol[C_in, Out_in, Extra_in]):
    """What the protocol builds when the table's action is carried out (:class:`Calls`)."""

    def put_opening(self, call: C_in, args: str, out: Out_in) -> None:
        """Send the opening of ``call`` (identified) with ``args`` as its arguments."""

    def put_held_args(self, call: C_in, text: str, out: Out_in) -> None:
        """Send argument text held until the opening, where the call began."""

    def put_args(self, call: C_in, text: str, out: Out_in, extras: Extra_in | None) -> None:
        """Send argument text (maybe empty, when ``extras`` came) as a continuation."""

    def hold_opening(self, call: C_in, args: str) -> None:
        """Build the opening of ``call`` (identified) with ``args`` and keep it back."""

    def release_opening(self, call: C_in, out: Out_in, *, without_args: bool) -> None:
        """Send the opening held back, with ``""`` for its arguments if ``without_args``."""

    def add_extras(self, call: C_in, extras: Extra_in) -> None:
        """Keep an entry's unknown fields for the call's opening (S2: collected)."""

    def holding(self, call: C_in, out: Out_in) -> None:
        """``call`` is held (calls/state.py, ``HELD``): what comes after waits behind it.
        Told on every input that leaves the call held; told again for the same ``out``, it
        changes nothing (:meth:`Calls.args` tells it once for a run of pieces)."""

    def settled(self, call: C_in) -> None:
        """``call`` is no longer held: what waited behind it may go."""


class Unwrapping(Protocol[C, Out_in]):
    """What a protocol makes of the calls a wrapper holds (issue 24 item 6)."""

    def entry_call(self, wrapper: C) -> C:
        """A new record for one entry, begun where ``wrapper`` began; its id is the
        protocol's to give (None: a fresh one of the stream's pool, no ``id-missing``)."""

    def entry_done(self, call: C, out: Out_in) -> None:
        """The entry's call went out whole (or was dropped): end what the protocol opened
        for it, if the upstream's events will not."""


class Calls(Generic[C, Out, Extra]):
    """The calls of one choice (chat) or one stream (native): their records, the table they
    follow, the placeholders and suspects held, and the index the next opening takes."""

    __slots__ = (
        "_add_extras",
        "_before_identify",
        "_chosen",
        "_fixes",
        "_hold_opening",
        "_holding",
        "_put_args",
        "_put_held_args",
        "_put_opening",
        "_release_opening",
        "_settled",
        "_unwrap",
        "next_index",
        "one_call",
        "placeholders",
        "records",
        "repeats",
        "rules",
        "sent",
        "streams",
        "suspects",
        "table",
        "tally",
        "unsent",
    )

    def __init__(
        self,
        tally: Tally,
        writer: CallWriter[C, Out, Extra],
        *,
        coalesce: bool,
        dedupe: bool,
        repeats: Repeats | None = None,
        before_identify: Callable[[C], None] | None = None,
        rules: CallRules | None = None,
        one_call: bool = False,
        unwrap: Unwrapping[C, Out] | None = None,
    ) -> None:
        self.tally = tally
        #: the protocol's side of splitting a wrapper (None: a wrapper stays one call)
        self._unwrap = unwrap
        #: the arguments' checks and fixes (None: the request has no tools)
        self.rules = rules
        # fixed only where the call goes out whole (S2): a streamed call's text is already out
        self._fixes = rules is not None and rules.fixes and coalesce
        #: the client gets the first call named; the rest are EXTRA (parallel_tool_calls: false)
        self.one_call = one_call
        self._chosen: C | None = None
        self.table: Table = S2 if coalesce else S1
        #: the table's answer to "does a fragment of a call in this state go out as it came"
        self.streams: tuple[CallState, ...] = S2_STREAMS if coalesce else S1_STREAMS
        self.records: list[C] = []
        # Found without a scan over the calls, which a choice of thousands would make on
        # every delta: the held placeholders (in S1 at most one, as a call only becomes one
        # right after the others were released), and the first call S2 has not sent whole
        # (every call before it is OPEN, which a call stays).
        self.placeholders: dict[C, None] = {}
        self.suspects: dict[C, None] = {}  # held until their arguments end (SUSPECT)
        self.repeats = Repeats(dedupe=dedupe) if repeats is None else repeats
        self.unsent = 0
        self.next_index = 0  #: the index the next call's opening takes (dense from 0)
        self.sent = 0  #: the calls whose opening was built (the client was shown them)
        # the ids a protocol makes before the call's identity is settled on them (Responses)
        self._before_identify = before_identify
        self._put_opening = writer.put_opening
        self._put_held_args = writer.put_held_args
        self._put_args = writer.put_args
        self._hold_opening = writer.hold_opening
        self._release_opening = writer.release_opening
        self._add_extras = writer.add_extras
        self._holding = writer.holding
        self._settled = writer.settled

    def follow(self, rules: CallRules | None, *, one_call: bool, hold: bool = False) -> None:
        """What a native stream's request asks of its calls' arguments (issue 25), told once
        before its first event; as the constructor's ``rules`` and ``one_call``. ``hold``: the
        protocol can send a call whole (S2), as fixing its arguments needs."""
        self.rules = rules
        if hold and rules is not None and rules.fixes:
            self.table, self.streams = S2, S2_STREAMS
        self._fixes = rules is not None and rules.fixes and self.table is S2
        self.one_call = one_call

    def record(self, repair: Repair) -> None:
        self.tally.repairs[repair] += 1

    def naming(self, call: C, text: str) -> CallInput:
        """The input of the entry that names ``call``, with argument ``text``: a suspect if
        it may repeat an earlier call; else by the argument text known. Entries held before
        the name (vmlx sends an opening with an empty name) make even complete arguments an
        opening with ``""`` and the arguments apart: only a call in a single delta with
        nothing before it goes out whole (Groq)."""
        call.rivals = self.repeats.rivals(self.records, call)
        if call.rivals or self.wraps(call):
            return CallInput.NAMED_SUSPECT
        event = opening_input(call.text() + text)
        return CallInput.NAMED_PARTIAL if event is CallInput.NAMED_WHOLE and call.waited else event

    def wraps(self, call: C) -> bool:
        """Whether ``call``, just named, is the model's multi-call wrapper to split (marked
        so): the protocol can split it, and the request offers no tool of its name. Such a
        call is named a suspect (held until its arguments end)."""
        if self._unwrap is None or call.name is None:
            return False
        rules = self.rules
        call.wrapper = is_wrapper(
            call.name, lambda name: rules is not None and rules.tools.parameters(name) is not None
        )
        return call.wrapper

    def send_whole_calls(self, out: Out) -> None:
        """S2: send the calls that are due whole (``whole_calls_due``)."""
        due, self.unsent = whole_calls_due(self.records, self.unsent)
        for call in due:
            self.input(call, CallInput.COMPLETE, "", out)

    def release_others(self, call: C, out: Out) -> None:
        """A held placeholder goes out as it is once another call of the choice moves on, and
        a suspect's arguments end (``released_by``)."""
        # asked on every entry: most of the time there is nothing held to release
        if self.placeholders:
            for other in released_by(call, self.placeholders):
                self.input(other, CallInput.END, "", out)
        if self.suspects:
            for other in released_by(call, self.suspects):
                self.input(other, CallInput.END, "", out)

    def input(
        self,
        call: C,
        event: CallInput,
        text: str,
        out: Out,
        *,
        complete: bool = True,
        extras: Extra | None = None,
    ) -> None:
        """One input of ``call`` through the table, and the action carried out."""
        if self.one_call and call.state is NAMELESS and event in _LEAVES_NAMELESS:
            if self._chosen is None:
                self._chosen = call
            elif self._chosen is not call:
                self.record(Repair.PARALLEL_CALL_DROPPED)
                event = _EXTRA
        found: list[tuple[str, str]] | None = None
        if call.state is SUSPECT and event in ARGS_END:
            # a wrapper is split once its arguments are whole: on COMPLETE, or on an END
            # that cut nothing (a cut stays a cut: it goes out as it came)
            if call.wrapper and (complete or event is not _END):
                found = entries(call.text())
            if found is not None:
                event = CallInput.UNWRAP
            elif repeats(call):
                self.record(Repair.CALL_DUPLICATED)
                event = CallInput.DUPLICATE
        state, action = transition(self.table, call.state, event)
        if state is PLACEHOLDER:
            self.placeholders[call] = None
        elif call.state is PLACEHOLDER:
            del self.placeholders[call]
        if state is SUSPECT:
            self.suspects[call] = None
        elif call.state is SUSPECT:
            del self.suspects[call]
        previous, call.state = call.state, state
        call.streams = state in self.streams
        if state in HELD:
            self._holding(call, out)
        elif previous in HELD:  # no call is held again once it is not (the tables)
            kept = len(call.args)  # what it held is kept from now on, not held
            self.tally.held -= kept
            self.tally.kept += kept
            self._settled(call)
        # tried in turn, the most frequent first: streamed arguments, then what collects
        if action is _SEND_ARGS:
            self._send_args(call, text, out, extras)
        elif action is _NOTHING:
            pass
        elif action is _HOLD:
            call.waited = True
            self.keep(call, text)
        elif action is _OPEN or action is _OPEN_SPLIT or action is _OPEN_WHOLE:
            self.keep(call, text)
            self._open(call, action, out)
            if action is _OPEN_SPLIT and text:
                self.record(Repair.ARGS_IN_FIRST_DELTA)
            if event is _END and complete and call.args_len == 0:  # a suspect
                self.record(Repair.EMPTY_ARGUMENTS)
                self._send_args(call, "{}", out, None)
        elif action is _COLLECT:
            self.collect(call, event, text, extras)
        elif action is _SEND_WHOLE or action is _FALLBACK_WHOLE:
            if action is _FALLBACK_WHOLE:
                self._name_fallback(call)
            if complete and call.args_len == 0:
                self.record(Repair.EMPTY_ARGUMENTS)
                self.keep(call, "{}")
            if self._fixes:
                self._fix(call, cut=not complete)
            self._identify(call)
            self._put_opening(call, call.text(), out)
        elif action is _CLOSE_ARGS:
            if complete and call.args_len == 0:
                self.record(Repair.EMPTY_ARGUMENTS)
                self._send_args(call, "{}", out, None)
        elif action is _DROP:
            self.keep(call, text)
            if call.args:
                self.tally.dropped.append(call.text())
                self.forget(call)
        elif action is _UNWRAP:
            assert found is not None
            self._split(call, found, out)
        elif action is _HOLD_OPENING:
            self.keep(call, text)
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
                self.record(Repair.EMPTY_ARGUMENTS)
                self._send_args(call, "{}", out, None)
        else:
            raise AssertionError(f"no case for {action}")

    def _split(self, wrapper: C, found: list[tuple[str, str]], out: Out) -> None:
        """UNWRAP: ``wrapper`` is dropped (its text, not sent as it came, is reported) and
        each entry becomes a call in its place, named whole; the first is the one a request
        for one call keeps, the rest are EXTRA to it (``one_call``)."""
        assert self._unwrap is not None
        self.record(Repair.PARALLEL_WRAPPER)
        self.tally.dropped.append(wrapper.text())
        self.forget(wrapper)
        if self._chosen is wrapper:
            self._chosen = None
        made = []
        for name, _ in found:
            call = self._unwrap.entry_call(wrapper)
            call.name = name
            if call.upstream_id is None:
                call.upstream_id = self.tally.ids.fresh()
            made.append(call)
        at = self.records.index(wrapper) + 1  # in the wrapper's place: the order they go out
        self.records[at:at] = made
        for call, (_, arguments) in zip(made, found, strict=True):
            self.keep(call, arguments)
            event = self.naming(call, "")
            if event is CallInput.NAMED_PLACEHOLDER:  # an entry's "{}" is its arguments
                event = CallInput.NAMED_WHOLE
            self.input(call, event, "", out)
            if call.state in COLLECTED:  # S2, or a suspect: its arguments are whole already
                call.whole = True
                self.input(call, CallInput.COMPLETE, "", out)
            self.ended(call)
            self._unwrap.entry_done(call, out)

    def args(self, call: C, texts: Sequence[str], out: Out) -> None:
        """A run of argument pieces of ``call``, each an ARGS input as :meth:`input` takes it,
        the table asked once for the run: a held call released whole (markup, issue 24 item
        4) brings a hundred at once. While the table's answer keeps the call's state, that
        answer is carried out for every piece left, in order; a piece whose answer moves the
        state goes through :meth:`input`, and the table is asked again for the rest. ARGS is
        never EXTRA nor compared (it takes no call out of NAMELESS and ends no arguments), so
        the table's answer is all that decides a piece."""
        table = self.table
        start, count = 0, len(texts)
        while start < count:
            state = call.state
            after, action = transition(table, state, _ARGS)
            if after is not state or not (
                action is _SEND_ARGS or action is _COLLECT or action is _HOLD
            ):
                self.input(call, _ARGS, texts[start], out)
                start += 1
                continue
            if state in HELD:
                self._holding(call, out)
            if action is _SEND_ARGS:
                self._send_run(call, texts, start, out)
            elif action is _COLLECT:
                for text in texts[start:]:
                    self.collect(call, _ARGS, text, None)
            else:
                call.waited = True
                for text in texts[start:]:
                    self.keep(call, text)
            return

    def _send_run(self, call: C, texts: Sequence[str], start: int, out: Out) -> None:
        """SEND_ARGS for each of ``texts`` from ``start``, as :meth:`_send_args` does: each kept,
        then sent, with what :meth:`keep` asks of the call answered once for the run."""
        tally = self.tally
        kept = call.streams or call.state not in HELD
        append = call.args.append
        put = self._put_args
        for i in range(start, len(texts)):
            text = texts[i]
            if text:
                append(text)
                size = len(text)
                call.args_len += size
                if kept:
                    tally.kept += size
                else:
                    tally.held += size
                put(call, text, out, None)

    def ended(self, call: C, text: str | None = None) -> None:
        """``call``'s arguments have ended (where, the protocol says): checked against its
        tool's schema once, counted as ``args-schema-mismatch:<kind>`` when they do not fit;
        nothing changes. ``text``: the arguments the client has, when not the kept text."""
        rules = self.rules
        if rules is None or call.checked or call.state is DROPPED:
            return
        call.checked = True
        rules.check(call.name, call.text() if text is None else text, self.tally.repairs)

    def _fix(self, call: C, *, cut: bool) -> None:
        """S2, as ``call`` goes out whole: arguments that do not fit healed or coerced."""
        assert self.rules is not None
        old = call.text()
        fixed = self.rules.fix(call.name, old, cut=cut)
        if fixed is None:
            return
        for repair in fixed.repairs:
            self.record(repair)
        call.fixed = True
        self.forget(call)
        call.args_len -= len(old)
        self.keep(call, fixed.text)

    def keep(self, call: C, text: str) -> None:
        """Argument ``text`` of ``call`` accepted: kept, and counted as held or kept."""
        if text:
            call.args.append(text)
            call.args_len += len(text)
            # a call that streams is not held (the hot paths' answer, a flag on the call)
            if call.streams or call.state not in HELD:
                self.tally.kept += len(text)
            else:
                self.tally.held += len(text)

    def forget(self, call: C) -> None:
        """The argument text ``call`` kept is let go (the call ended, or was dropped)."""
        if call.state in HELD:
            self.tally.held -= len(call.args)
        else:
            self.tally.kept -= len(call.args)
        call.args = ArgText()

    def _drop_placeholder(self, call: C) -> None:
        self.record(Repair.ARGS_PLACEHOLDER)
        self.tally.dropped.append(call.text())
        call.args_len -= len(call.args)
        self.forget(call)

    def collect(self, call: C, event: CallInput, text: str, extras: Extra | None) -> None:
        """The table's COLLECT: the text (and an entry's fields) kept until the call opens."""
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
        self.keep(call, text)

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
        self.keep(call, text)
        if text or extras is not None:
            self._put_args(call, text, out, extras)

    def _name_fallback(self, call: C) -> None:
        self.record(Repair.NAME_MISSING)
        call.name = self.tally.fallback_name

    def _identify(self, call: C) -> None:
        """The index and id the client sees, settled as the call's opening is built."""
        if self._before_identify is not None:
            self._before_identify(call)
        call.index = self.next_index
        self.next_index += 1
        self.sent += 1
        if call.upstream_id is not None:
            call.id = call.upstream_id
            self.tally.ids.add(call.id)
        else:
            call.id = self.tally.ids.fresh()
            self.record(Repair.ID_MISSING)


def opening_input(args: str) -> CallInput:
    """How a call opens, by the argument text known when its name arrives."""
    if not args:
        return CallInput.NAMED_EMPTY
    value = complete_json(args)
    if value is INVALID:
        return CallInput.NAMED_PARTIAL
    return CallInput.NAMED_PLACEHOLDER if value == {} else CallInput.NAMED_WHOLE

"""The tool calls of a native Messages stream, through the shared call state table.

Each call, a tool_use block of the upstream's or a call recovered from markup in a text block
(text.py), is a :class:`ToolCall` (a calls/record.py ``CallRecord``). Its life is the
S1 table's (proxy/core/calls/state.py), carried out by the shared ``Calls`` (calls/driver.py), which
:class:`ToolCalls` holds; here the upstream's events become the table's inputs, and, as the
``CallWriter``, what ``Calls`` sends becomes Messages events, through the client's side
(``BlockSide``: structure.py's ``BlockFlow``, which holds this object). The inputs:

* the block's start names the call, with no argument text known: a start's ``input`` is
  the block's empty object, the arguments are what the ``input_json_delta``s bring. So
  NAMED_EMPTY (the start goes out: OPEN), or NAMED_SUSPECT when the call may repeat the one
  before it (``dedupe_calls``): held until its input ends;
* a delta of the block: ARGS, with an ``input_json_delta``'s fragment (another delta brings
  none), the event itself carried along as the entry's extras, so that it goes out as it
  came;
* the input's end (it became one whole JSON value, the block stopped, or the upstream moved
  on to another block or the message's end): COMPLETE, or DUPLICATE when it repeats the call
  before it; the stream cut short: END, not complete (nothing is added to a cut call).

A call's input ends once (``CallRecord.whole``); Messages sends a call that got no argument
text as it came, the client rebuilding its ``{}``, which is why a clean end is COMPLETE and
never END (the driver would add a ``{}`` fragment). What goes out is the upstream's own events
where there are any (their bytes kept, an index changed where the client's numbering differs),
the proxy's for a markup call. The index is the driver's (``Calls``, one counter with the
client's other blocks, structure.py); so is the id of a tool_use block the upstream sent
without one (``toolu_`` and a fresh id, ``id-missing``).

A fragment of a call that streams (the table's answer, kept on the call: ``streams``) goes out
without a lookup, as chat's hot paths do; a suspect's is collected and an open call's end
changes nothing by answers asked of the table once (``_COLLECTS``, ``_DONE``): a test turns
them around and sees every fragment and end look the pair up.

The repeat rule is proxy/core/protocols/native_calls.py's, shared with the native Responses
repairer (a call compared with the call right before it that was not dropped).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Final, Protocol

from proxy.core.arguments.parallel import one_call_asked
from proxy.core.arguments.rules import EMPTY_OBJECT, call_rules
from proxy.core.arguments.tools import RequestTools
from proxy.core.calls.driver import Calls
from proxy.core.calls.state import S1, S1_STATES, Action, CallInput, CallState, transition
from proxy.core.ids import IdPool
from proxy.core.jsonvalues import JSONObject
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.messages.native.model import Item, ToolCall, UpstreamBlock
from proxy.core.protocols.native_calls import NativeTally, PreviousCall, repeats_before
from proxy.core.repairs import Repair
from proxy.core.sse import Event

# Answers of the table asked once, for what each call or fragment would otherwise look up
# (calls/driver.py ``Calls.input`` then does nothing else: ``holding`` does nothing here):
#: the states in which ARGS keeps the state and collects the text (a suspect's)
_COLLECTS: Final = tuple(
    state for state in S1_STATES if transition(S1, state, CallInput.ARGS) == (state, Action.COLLECT)
)
#: the states in which the end of the input (COMPLETE) changes nothing (an open call's)
_DONE: Final = tuple(
    state
    for state in S1_STATES
    if transition(S1, state, CallInput.COMPLETE) == (state, Action.NOTHING)
)


def naming_input(suspect: bool) -> CallInput:
    """The input of a call's start: no argument text is known yet (see above)."""
    return CallInput.NAMED_SUSPECT if suspect else CallInput.NAMED_EMPTY


def end_input(*, repeat: bool, cut: bool) -> CallInput:
    """The input of a call whose input ended: compared once with the call before it."""
    if repeat:
        return CallInput.DUPLICATE
    return CallInput.END if cut else CallInput.COMPLETE


class BlockSide(Protocol):
    """What the calls need of the client's side (structure.py ``BlockFlow``): where their
    blocks go out, and what is held."""

    held_bytes: int
    current: int  #: the place of the upstream event being read among the upstream's

    def start_tool(self, index: int) -> None: ...
    def write(self, event: Event, payload: JSONObject, changed: bool) -> None: ...
    def write_at(self, index: int, event: Event, payload: JSONObject, changed: bool) -> None: ...
    def emit(self, payload: JSONObject) -> None: ...
    def note(self, repair: Repair) -> None: ...


class ToolCalls:
    """The tool calls of one native Messages stream: a call's events as the table's inputs
    (the shared ``Calls`` carries them out) and, as its ``CallWriter``, what goes out, through
    the client's side (``client``)."""

    def __init__(
        self, client: BlockSide, new_id: Callable[[], str], repairs: Counter[str], *, dedupe: bool
    ) -> None:
        self._client = client
        self._write_at, self._emit, self._note = client.write_at, client.emit, client.note
        self.tally = NativeTally(IdPool(lambda: "toolu_" + new_id()), repairs)
        self.calls: Calls[ToolCall, None, Item] = Calls(
            self.tally,
            self,
            coalesce=False,
            dedupe=dedupe,
            repeats=PreviousCall(dedupe=dedupe),  # the repeat rule
            unwrap=self,  # a wrapper's entries: calls of the proxy's (issue 24 item 6)
        )
        self.keep = self.calls.keep  # bound once: asked on every fragment
        self._input = self.calls.input

    def follow(self, request: object, options: UpstreamOptions) -> None:
        """What the client's request (its parsed body) asks of the calls' arguments (issue
        25): its tools' schemas checked at each call's end (read only as far as a called
        name); one call only under ``tool_choice.disable_parallel_tool_use``."""
        body = request if isinstance(request, dict) else {}
        tools = body.get("tools")
        self.calls.follow(
            call_rules(options, RequestTools.from_messages(tools) if tools else None),
            one_call=one_call_asked("messages", body) and options.enforce_parallel_tool_calls,
            hold=True,  # heal/coerce: a call's fragments held, its input sent whole (S2)
        )

    # -- the upstream's events, as the table's inputs --------------------------------------

    def name_call(self, call: ToolCall) -> None:
        calls = self.calls
        calls.records.append(call)
        suspect = bool(calls.repeats.rivals(calls.records, call)) or calls.wraps(call)
        self._input(call, naming_input(suspect), "", None)

    def call_delta(
        self,
        block: UpstreamBlock,
        call: ToolCall,
        event: Event,
        payload: JSONObject,
        changed: bool,
        delta: JSONObject,
    ) -> bool:
        """A delta of a tool block; whether it ended the call's input (one whole value)."""
        # the fragment of an input_json_delta is a string (fields.delta saw to it)
        text: str = delta["partial_json"] if delta.get("type") == "input_json_delta" else ""
        if call.streams:  # the table's answer, kept on the call: ARGS sends the text
            self.keep(call, text)
            assert call.index is not None
            self._write_at(call.index, event, payload, changed)
        else:
            self.unstreamed_args(call, text, (event, payload, changed))
        if not text or not block.end.feed(text):
            return False
        self.end_input(call)
        return True

    def unstreamed_args(self, call: ToolCall, text: str, extras: Item | None) -> None:
        """ARGS for a call whose fragments do not stream (``call.streams``: its callers send
        those themselves, the cost of a fragment): a suspect's are collected (the table's
        answer, asked once), and the table is asked for any other."""
        if call.state in _COLLECTS:
            self.calls.collect(call, CallInput.ARGS, text, extras)
        else:
            self._input(call, CallInput.ARGS, text, None, extras=extras)

    def end_input(self, call: ToolCall, *, cut: bool = False) -> None:
        if call.whole:
            return
        call.whole = True
        repeat = repeats_before(self.calls.records, call)
        if repeat:
            self._note(Repair.CALL_DUPLICATED)
        # only a suspect (dedupe_calls) is dropped as one; any other held call (heal_arguments
        # holds every call) left in COLLECTING by a DUPLICATE would never go out
        event = end_input(repeat=repeat and call.state is CallState.SUSPECT, cut=cut)
        if not cut and not call.args_len and not call.from_markup:
            # no text is the object the client builds from the start's ``input: {}``: kept as
            # the call's arguments, so that a call sent whole (heal_arguments) is not counted
            # ``empty-arguments`` for a ``{}`` nobody writes (its own events go out as they came)
            self.keep(call, EMPTY_OBJECT)
        if event is not CallInput.COMPLETE or call.state not in _DONE:
            self._input(call, event, "", None, complete=not cut)
        # the one place a Messages call's input ends (checked as it went out, fixed or not)
        self.calls.ended(call, call.text() or EMPTY_OBJECT)

    # -- a wrapper's calls (calls/driver.py's Unwrapping) ----------------------------------

    def entry_call(self, wrapper: ToolCall) -> ToolCall:
        """A tool block of the proxy's for one entry (its start written as a markup call's);
        its id one of the stream's (``toolu_``)."""
        return ToolCall(None, None)

    def entry_done(self, call: ToolCall, out: None) -> None:
        """Nothing to end: the next block stops it, or the wrapper's own stop (structure.py
        writes it at the index of the block the client has open)."""

    # -- what the driver sends, as Messages events -----------------------------------------

    def put_opening(self, call: ToolCall, args: str, out: None) -> None:
        assert call.index is not None
        self._client.start_tool(call.index)
        if call.opening is None:
            block: JSONObject = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
            self._emit({"type": "content_block_start", "index": call.index, "content_block": block})
        else:
            event, payload, changed = call.opening
            if call.upstream_id is None:  # the driver gave it one
                payload["content_block"]["id"] = call.id
                changed = True
            self._write_at(call.index, event, payload, changed)
        if args:  # a call sent whole (S2), or a suspect's arguments held
            self.put_held_args(call, args, out)
        else:  # fragments without text, which put_held_args never gets
            self._write_held(call)

    def put_held_args(self, call: ToolCall, text: str, out: None) -> None:
        if call.opening is not None and not call.fixed:  # the upstream's fragments: the text
            self._write_held(call)
        else:  # a markup call's, or arguments healed or coerced: the proxy writes them
            self._held_items(call)
            self._write_beside(call)
            self.emit_input(call, text)

    def put_args(self, call: ToolCall, text: str, out: None, extras: Item | None) -> None:
        assert call.index is not None
        if extras is None:
            self.emit_input(call, text)
        else:
            self._write_at(call.index, *extras)

    def hold_opening(self, call: ToolCall, args: str) -> None:
        """Never asked: no Messages input names a call with a ``{}`` placeholder; the opening
        would be the start kept on the call anyway."""

    def release_opening(self, call: ToolCall, out: None, *, without_args: bool) -> None:
        self.put_opening(call, "", out)

    def add_extras(self, call: ToolCall, extras: Item) -> None:
        call.held.append(extras)
        call.held_at.append(self._client.current)
        self._client.held_bytes += len(extras[0].raw)

    def holding(self, call: ToolCall, out: None) -> None:
        """Nothing waits behind a held call here: a later block waits for the tool block's
        input to end (stream.py's ``_pending``), and that end settles the call first. Its
        start is held with it."""
        if call.opening is not None and not call.opening_held:
            call.opening_held = True
            self._client.held_bytes += len(call.opening[0].raw)

    def settled(self, call: ToolCall) -> None:
        if call.opening is not None and call.opening_held:
            call.opening_held = False
            self._client.held_bytes -= len(call.opening[0].raw)
        if call.state is CallState.DROPPED:
            self._held_items(call)  # nothing of a dropped call goes out
            self._write_beside(call)  # but what was not its own does

    def _held_items(self, call: ToolCall) -> list[Item]:
        """The events ``call`` held, held no more (the caller sends them, or not)."""
        held, call.held, call.held_at = call.held, [], []
        self._client.held_bytes -= sum(len(item[0].raw) for item in held)
        return held

    def let_go(self, call: ToolCall) -> list[tuple[int, bytes]]:
        """What ``call`` holds of the upstream's, with the places it came in, as it came (the
        stream gives up rewriting)."""
        held = list(zip(call.held_at, (item[0].raw for item in call.held), strict=True))
        held += ((at, event.raw) for at, event, _ in call.beside)
        self._client.held_bytes -= sum(len(event.raw) for _, event, _ in call.beside)
        call.beside = []
        if call.opening is not None and call.opening_held:
            held.append((call.opening_at, call.opening[0].raw))
            call.opening_held = False
            self._client.held_bytes -= len(call.opening[0].raw)
        self._held_items(call)
        return held

    def hold_beside(self, call: ToolCall, event: Event, payload: JSONObject) -> None:
        """An event of no block that came while ``call`` is held: it waits in its place."""
        call.beside.append((self._client.current, event, payload))
        self._client.held_bytes += len(event.raw)

    def _write_held(self, call: ToolCall) -> None:
        """The call's held events and those that came beside them, in the order they came."""
        index = call.index
        assert index is not None
        beside, call.beside = call.beside, []
        places = call.held_at  # _held_items lets them go
        at = 0
        for place, item in zip(places, self._held_items(call), strict=True):
            while at < len(beside) and beside[at][0] < place:
                self._put_beside(beside[at])
                at += 1
            self._write_at(index, *item)
        for entry in beside[at:]:
            self._put_beside(entry)

    def _write_beside(self, call: ToolCall) -> None:
        """The events held beside ``call``, as they came."""
        beside, call.beside = call.beside, []
        for entry in beside:
            self._put_beside(entry)

    def _put_beside(self, entry: tuple[int, Event, JSONObject]) -> None:
        _, event, payload = entry
        self._client.held_bytes -= len(event.raw)
        self._client.write(event, payload, False)

    def emit_input(self, call: ToolCall, text: str) -> None:
        delta = {"type": "input_json_delta", "partial_json": text}
        self._emit({"type": "content_block_delta", "index": call.index, "delta": delta})

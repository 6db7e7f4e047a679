"""The tool calls of a native Messages stream, through the shared call state table.

Each call, a tool_use block of the upstream's or a call recovered from markup in a text block
(native_text.py), is a :class:`ToolCall` (a calls/record.py ``CallRecord``). Its life is the
S1 table's (proxy/core/calls/state.py), carried out by the call driver (calls/driver.py);
here the upstream's events become the table's inputs, and what the driver sends becomes
Messages events. The inputs:

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
client's other blocks, native_client.py); so is the id of a tool_use block the upstream sent
without one (``toolu_`` and a fresh id, ``id-missing``).

A fragment of a call that streams (the table's answer, kept on the call: ``streams``) goes out
without a lookup, as chat's hot paths do; a suspect's is collected and an open call's end
changes nothing by answers asked of the table once (``_COLLECTS``, ``_DONE``): a test turns
them around and sees every fragment and end look the pair up.

The repeat rule is proxy/core/protocols/native_repeats.py's, shared with the native Responses
repairer (a call compared with the call right before it that was not dropped).
"""

from __future__ import annotations

from typing import Final

from proxy.core.calls.state import S1, S1_STATES, Action, CallInput, CallState, transition
from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.messages.native.client import ClientSide
from proxy.core.protocols.messages.native.model import Block, Item, ToolCall
from proxy.core.protocols.native_repeats import repeats_before
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


class CallBlocks(ClientSide):
    # -- the upstream's events, as the table's inputs --------------------------------------

    def _name_call(self, call: ToolCall) -> None:
        calls = self._calls
        calls.records.append(call)
        suspect = bool(calls.repeats.rivals(calls.records, call))
        self._input(call, naming_input(suspect), "", None)

    def _call_delta(
        self,
        block: Block,
        call: ToolCall,
        event: Event,
        payload: JSONObject,
        changed: bool,
        delta: JSONObject,
    ) -> bool:
        """A delta of a tool block; whether it ended the call's input (one whole value)."""
        # the fragment of an input_json_delta is a string (native_fields.delta saw to it)
        text: str = delta["partial_json"] if delta.get("type") == "input_json_delta" else ""
        if call.streams:  # the table's answer, kept on the call: ARGS sends the text
            self._keep(call, text)
            assert call.index is not None
            self._write_at(call.index, event, payload, changed)
        else:
            self._unstreamed_args(call, text, (event, payload, changed))
        if not text or not block.end.feed(text):
            return False
        self._end_input(call)
        return True

    def _unstreamed_args(self, call: ToolCall, text: str, extras: Item | None) -> None:
        """ARGS for a call whose fragments do not stream (``call.streams``: its callers send
        those themselves, the cost of a fragment): a suspect's are collected (the table's
        answer, asked once), and the table is asked for any other."""
        if call.state in _COLLECTS:
            self._calls.collect(call, CallInput.ARGS, text, extras)
        else:
            self._input(call, CallInput.ARGS, text, None, extras=extras)

    def _end_input(self, call: ToolCall, *, cut: bool = False) -> None:
        if call.whole:
            return
        call.whole = True
        repeat = repeats_before(self._calls.records, call)
        if repeat:
            self._note(Repair.CALL_DUPLICATED)
        event = end_input(repeat=repeat, cut=cut)
        if event is not CallInput.COMPLETE or call.state not in _DONE:
            self._input(call, event, "", None, complete=not cut)

    # -- what the driver sends, as Messages events -----------------------------------------

    def put_opening(self, call: ToolCall, args: str, out: None) -> None:
        assert call.index is not None
        self._stop_wire()
        self._wire, self._wire_index = "tool_use", call.index
        if call.start is None:
            block: JSONObject = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
            self._emit({"type": "content_block_start", "index": call.index, "content_block": block})
        else:
            event, payload, changed = call.start
            if call.upstream_id is None:  # the driver gave it one
                payload["content_block"]["id"] = call.id
                changed = True
            self._write_at(call.index, event, payload, changed)
        if args:  # a whole call in its opening: not from Messages' inputs, which carry none
            self.put_held_args(call, args, out)
        elif call.held and not call.args_len:
            self._write_held(call)  # fragments without text, which _put_held_args never gets

    def put_held_args(self, call: ToolCall, text: str, out: None) -> None:
        if call.held:  # the upstream's fragments, which carry the text
            self._write_held(call)
        else:  # a markup call's: the proxy writes them
            self._emit_input(call, text)

    def put_args(self, call: ToolCall, text: str, out: None, extras: Item | None) -> None:
        assert call.index is not None
        if extras is None:
            self._emit_input(call, text)
        else:
            self._write_at(call.index, *extras)

    def hold_opening(self, call: ToolCall, args: str) -> None:
        """Never asked: no Messages input names a call with a ``{}`` placeholder; the opening
        would be the start kept on the call anyway."""

    def release_opening(self, call: ToolCall, out: None, *, without_args: bool) -> None:
        self.put_opening(call, "", out)

    def add_extras(self, call: ToolCall, extras: Item) -> None:
        call.held.append(extras)
        call.held_at.append(self._current)
        self.held_bytes += len(extras[0].raw)

    def holding(self, call: ToolCall, out: None) -> None:
        """Nothing waits behind a held call here: a later block waits for the tool block's
        input to end (native.py's ``_pending``), and that end settles the call first. Its
        start is held with it."""
        if call.start is not None and not call.start_held:
            call.start_held = True
            self.held_bytes += len(call.start[0].raw)

    def settled(self, call: ToolCall) -> None:
        if call.start is not None and call.start_held:
            call.start_held = False
            self.held_bytes -= len(call.start[0].raw)
        if call.state is CallState.DROPPED:
            self._held_items(call)  # nothing of a dropped call goes out

    def _held_items(self, call: ToolCall) -> list[Item]:
        """The events ``call`` held, held no more (the caller sends them, or not)."""
        held, call.held, call.held_at = call.held, [], []
        self.held_bytes -= sum(len(item[0].raw) for item in held)
        return held

    def _let_go(self, call: ToolCall) -> list[tuple[int, bytes]]:
        """What ``call`` holds of the upstream's, with the places it came in, as it came (the
        stream gives up rewriting)."""
        held = list(zip(call.held_at, (item[0].raw for item in call.held), strict=True))
        if call.start is not None and call.start_held:
            held.append((call.start_at, call.start[0].raw))
            call.start_held = False
            self.held_bytes -= len(call.start[0].raw)
        self._held_items(call)
        return held

    def _write_held(self, call: ToolCall) -> None:
        assert call.index is not None
        for item in self._held_items(call):
            self._write_at(call.index, *item)

    def _emit_input(self, call: ToolCall, text: str) -> None:
        delta = {"type": "input_json_delta", "partial_json": text}
        self._emit({"type": "content_block_delta", "index": call.index, "delta": delta})

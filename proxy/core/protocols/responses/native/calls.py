"""A native stream's function calls through the shared call state table (calls/state.py, S1).

Each function_call, the upstream's or one taken out of a message's markup (text.py),
is a :class:`NativeCall`. Here its events become the table's inputs:

* ``output_item.added`` with a name and a ``call_id``: the naming input, by the argument
  text it carries (``NAMED_SUSPECT`` under the repeat rule); without either it is ``ARGS``,
  and the call is held (NAMELESS) until its ``output_item.done`` names it, else the end
  (``END``: the request's only tool);
* ``function_call_arguments.delta``: ``ARGS``; arguments only in a ``.done`` event: ``ARGS``
  of an inserted delta first (``args-only-in-done``);
* ``function_call_arguments.done``: ``COMPLETE``; ``output_item.done`` and the end: ``END``.

The shared ``Calls`` (calls/driver.py, held as ``calls``) performs the table's action
through the ``CallWriter`` methods at the end; what goes out goes through the item
structure (``ItemSide``, structure.py's ``ItemFlow``), which holds this object.
A Responses call's opening is its ``output_item.added`` (arguments ``""``: what the item
carried goes out as a delta after it, ``args-in-first-delta``) followed by the events of
the call that were held, as they came: the held argument text is in those events. What
comes after a held upstream call waits behind it (``blocking``, the stream's hold queue);
a markup call holds only its own text.

Healing and coercion (issue 25, ``heal_arguments``/``coerce_arguments``): the calls follow the
coalesced table (S2), so an upstream call is held whole, its ``output_item.added`` with it (as
coalesced output sends a call: at once, at its end), and what comes after it waits behind it.
Its end (``.done``, its ``output_item.done``) does not say whether a token limit cut it; the
response's terminal event does, later. So the end waits too (``verdict``, None until then):
at the terminal event a call of a response that ended ``response.completed``, whose item was
not ``incomplete``, goes out with its arguments fixed where they were (the added, one delta
of the whole text, its ``.done`` and ``output_item.done`` with that text; ``fixed_args`` for
the terminal's ``output``), else as the upstream's own events as they came. A call taken out
of markup is never fixed (its dialect read the markup whole), nor held for the verdict.

Repeats (issue 16; the rule is proxy/core/protocols/native_calls.py's, shared with native
Messages): a call named like the call right before it, that one not dropped, is a suspect
under ``dedupe_calls``. Whether its arguments equal that call's is asked here
(``DUPLICATE`` is an input like the others). A call equal to the call before it is counted
either way, when its arguments end.
"""

from __future__ import annotations

from collections import Counter
from typing import Final, Protocol

from proxy.core.arguments.rules import call_rules
from proxy.core.arguments.tools import RequestTools
from proxy.core.calls.driver import Calls
from proxy.core.calls.repeats import json_equal
from proxy.core.calls.state import (
    ARGS_END,
    DROPPED,
    HELD,
    NAMELESS,
    OPEN,
    S1,
    S2,
    SUSPECT,
    Action,
    CallInput,
    transition,
)
from proxy.core.errors import NormalizerError
from proxy.core.ids import IdPool
from proxy.core.jsonvalues import INVALID, JSONObject, loads
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.native_calls import (
    NativeTally,
    PreviousCall,
    previous_call,
    repeats_before,
)
from proxy.core.protocols.responses.items import FunctionCallItem
from proxy.core.protocols.responses.native import fields
from proxy.core.protocols.responses.native.lifecycle import ContentStep
from proxy.core.protocols.responses.native.model import (
    ClientItem,
    NativeCall,
    UpstreamItem,
    WireEvent,
)
from proxy.core.protocols.responses.native.request import NativeRequest
from proxy.core.repairs import Repair

# module names (the states' are calls/state.py's), not ``CallInput.END``: an Enum's class
# attribute costs ~90 ns a lookup (Python 3.11), and these are asked on every event of a call
ARGS, COMPLETE, END = CallInput.ARGS, CallInput.COMPLETE, CallInput.END
DELTA: Final = "response.function_call_arguments.delta"
#: The inputs that do nothing to an open call, by the table's answers (asked once here, not
#: per call): COMPLETE is NOTHING, END is CLOSE_ARGS, which only makes up "{}" for a complete
#: stream, never asked for here (``call_input``).
_QUIET_WHEN_OPEN: Final = tuple(
    event
    for event in (COMPLETE, END)
    if transition(S1, OPEN, event) in ((OPEN, Action.NOTHING), (OPEN, Action.CLOSE_ARGS))
)


class ItemSide(Protocol):
    """What the calls need of the item structure they live in (structure.py ``ItemFlow``):
    where events go out, how an item is shown, and what is held."""

    held_bytes: int
    cut: bool

    def emit(self, ev: WireEvent) -> None: ...
    def insert(self, payload: JSONObject) -> None: ...
    def repair(self, kind: str) -> None: ...
    def new_id(self) -> str: ...
    def show(self, up: UpstreamItem, ev: WireEvent) -> ClientItem: ...
    def new_item(self, kind: str, ident: str) -> ClientItem: ...
    def fix_item_fields(self, ev: WireEvent, out: ClientItem, *, count: bool = True) -> None: ...
    def finish(self, out: ClientItem, item: JSONObject) -> None: ...
    def release(self) -> None: ...
    def hold(self, queue: list[WireEvent], ev: WireEvent) -> None: ...
    def let_go(self, queue: list[WireEvent]) -> list[WireEvent]: ...


class NativeCalls:
    """The calls of one native Responses stream: classifies a call's events into the table's
    inputs (the shared ``Calls`` carries them out) and, as its ``CallWriter``, builds what
    goes out through the item structure (``items``)."""

    def __init__(
        self, items: ItemSide, fallback_name: str | None, repairs: Counter[str], *, dedupe: bool
    ) -> None:
        self._items = items
        # bound once: asked on every event of a call
        self._emit, self._insert, self._repair = items.emit, items.insert, items.repair
        self._new_id, self._hold, self._let_go = items.new_id, items.hold, items.let_go
        self.tally = NativeTally(IdPool(items.new_id), repairs, fallback_name)
        self.calls: Calls[NativeCall, None, WireEvent] = Calls(
            self.tally,
            self,
            coalesce=False,
            dedupe=dedupe,
            repeats=PreviousCall(dedupe=dedupe),
            before_identify=self._make_ids,
            unwrap=self,  # a wrapper's entries: items of the proxy's (issue 24 item 6)
        )
        self.keep = self.calls.keep  # bound once: asked on every fragment
        self.blocking: NativeCall | None = None  # the upstream call held: the rest waits
        self._markup: NativeCall | None = None  # the call being taken out of a message's text
        self.dropped: set[str] = set()  # the item and call ids of repeats dropped
        # heal/coerce (S2): a call's end waits for the response's; the terminal event's
        # verdict (None: not yet; True: the response was cut, or ended without saying)
        self._whole = False
        self.verdict: bool | None = None
        self.fixed_args: dict[str, str] = {}  # item id -> the arguments the proxy fixed

    def follow(self, request: NativeRequest, options: UpstreamOptions) -> None:
        """What the request asks of the calls' arguments (issue 25): its tools' schemas
        checked at each call's end; one call only under ``parallel_tool_calls: false``."""
        tools = RequestTools.from_chat(request.chat_tools) if request.chat_tools else None
        self.calls.follow(
            call_rules(options, tools),
            one_call=request.one_call and options.enforce_parallel_tool_calls,
            hold=True,  # heal/coerce: a call held whole (S2) until the response's end
        )
        self._whole = self.calls.table is S2

    def decide(self, *, cut: bool) -> None:
        """The response is over (``cut``: not as ``response.completed``, or no terminal event
        came): the calls whose end waited may go, fixed only if it was not cut."""
        if self.verdict is None:
            self.verdict = cut

    def hold_done(self, call: NativeCall, ev: WireEvent) -> None:
        """A held call's ``output_item.done``, held with it until the verdict."""
        call.done = ev
        self._items.held_bytes += ev.size
        item = ev.get("item")
        call.item_cut = isinstance(item, dict) and item.get("status") == "incomplete"

    def let_go_done(self, call: NativeCall) -> WireEvent | None:
        done, call.done = call.done, None
        if done is not None:
            self._items.held_bytes -= done.size
        return done

    # -- the upstream's events -> call inputs ------------------------------------------------

    def call_added(self, up: UpstreamItem, ev: WireEvent, item: JSONObject) -> None:
        name, call_id, text = item.get("name"), item.get("call_id"), item.get("arguments")
        call = NativeCall(
            ev.get("output_index"),
            call_id if isinstance(call_id, str) and call_id else None,
            name=name if isinstance(name, str) and name else None,
        )
        call.up, call.opening, up.call = up, ev, call
        self.calls.records.append(call)
        text = text if isinstance(text, str) else ""
        if call.name is None or call.upstream_id is None:
            self._repair(Repair.NAME_MISSING if call.name is None else Repair.CALL_ID_MISSING)
            self.call_input(call, ARGS, text)
        else:
            self.call_input(call, self._opening_input(call, text), text)

    def call_event(self, call: NativeCall, ev: WireEvent, kind: str) -> None:
        """An item event of a call (its added aside): text, or its arguments' end. (A delta
        of a call whose state streams its arguments takes the hot path, structure.py.)"""
        if kind == DELTA:
            self.call_input(call, ARGS, str(ev.get("delta") or ""), ev)
        elif kind == "response.function_call_arguments.done":
            self.args_in_done(call, ev.get("arguments"))
            if call.state is OPEN:
                self.call_input(call, COMPLETE)
                assert call.out is not None
                call.out.step(ContentStep.ARGS_DONE)
                self._emit(ev)
            else:
                self.call_input(call, COMPLETE, "", ev)  # behind what it held
        elif call.state is OPEN:
            self._emit(ev)
        elif call.state is not DROPPED:
            self._hold(call.held, ev)

    def args_in_done(self, call: NativeCall, arguments: object) -> None:
        """Arguments a server sent only in a ``.done`` event: a delta of them first."""
        if call.args_len or not isinstance(arguments, str) or not arguments:
            return
        self._repair(Repair.ARGS_ONLY_IN_DONE)
        out = call.out
        delta = {
            "type": DELTA,
            "item_id": out.id if out is not None else "",
            "output_index": out.index if out is not None else 0,
            "delta": arguments,
        }
        self.call_input(call, ARGS, arguments, WireEvent(delta, None))

    def call_ended(self, call: NativeCall, done: object) -> None:
        """A held call's ``output_item.done`` (None: the end came first): arguments only
        there, then the name and call_id it brings to a nameless call, and the end."""
        if isinstance(done, dict):
            self.args_in_done(call, done.get("arguments"))
            if call.state is SUSPECT and call.wrapper and call.args.complete() is not INVALID:
                # the item ended with the wrapper's arguments whole, without their .done
                # (llama-server sends none): they are complete, and it splits (issue 24 item 6)
                self.call_input(call, COMPLETE)
        if call.state is NAMELESS:
            later = done if isinstance(done, dict) else {}
            name, call_id = later.get("name"), later.get("call_id")
            if call.name is None and isinstance(name, str) and name:
                call.name = name
            if call.upstream_id is None and isinstance(call_id, str) and call_id:
                call.upstream_id = call_id
            if call.name is not None:
                self.call_input(call, self._opening_input(call, ""))
                if call.state is OPEN:
                    return
        self.call_input(call, END)

    def call_cut(self, call: NativeCall) -> None:
        """The stream was cut while ``call`` waited for its name: what it held goes out as it
        came, nothing made up (its state stays: no input came)."""
        assert call.opening is not None
        self.unblock(call)
        queue, call.held = self._let_go(call.held), []
        done = self.let_go_done(call)
        for ev in (call.opening, *queue, *(() if done is None else (done,))):
            self._emit(ev)

    def _opening_input(self, call: NativeCall, text: str) -> CallInput:
        event = self.calls.naming(call, text)
        # An item's arguments "{}" are its arguments: Responses servers are not known to
        # send a placeholder in front of the real ones (chat's case m), so none is held.
        return CallInput.NAMED_WHOLE if event is CallInput.NAMED_PLACEHOLDER else event

    # -- markup calls -> call inputs ---------------------------------------------------------

    @property
    def markup(self) -> NativeCall | None:
        """The call being taken out of a message's text, if any."""
        return self._markup

    def markup_open(self, name: str, ident: str | None) -> None:
        call = NativeCall(None, ident, from_markup=True, name=name)
        self.calls.records.append(call)
        self._markup = call
        self.call_input(call, self._opening_input(call, ""))

    def markup_args(self, text: str) -> None:
        call = self._markup
        if call is None or not text:
            return
        if call.streams:  # the table's answer kept on the call: the hot path
            self.keep(call, text)
            self.put_args(call, text, None, None)
        else:
            self.call_input(call, ARGS, text)

    def markup_close(self) -> None:
        call, self._markup = self._markup, None
        if call is None:
            return
        self.call_input(call, END)
        if call.state is OPEN:
            self._end_synthetic(call)

    def _end_synthetic(self, call: NativeCall) -> None:
        assert call.out is not None
        assert call.out.synthetic is not None
        synthetic = call.out.synthetic
        synthetic.closed = True
        status = "completed" if synthetic.whole_json() else "incomplete"
        for payload in synthetic.finish(status):
            self._insert(payload)
        self._items.finish(call.out, synthetic.full())

    # -- a wrapper's calls (calls/driver.py's Unwrapping) ----------------------------------

    def entry_call(self, wrapper: NativeCall) -> NativeCall:
        """A function_call item of the proxy's for one entry, as a markup call's."""
        return NativeCall(None, "call_" + self._new_id())

    def entry_done(self, call: NativeCall, out: None) -> None:
        """The entry's item ends at once: its arguments are whole."""
        if call.state is OPEN:
            self._end_synthetic(call)

    # -- the driver ----------------------------------------------------------------------------

    def call_input(
        self, call: NativeCall, event: CallInput, text: str = "", ev: WireEvent | None = None
    ) -> None:
        """One input through the table. An event of a call not shown yet waits on the call, to
        go out behind its opening; a dropped call's go nowhere. Under heal/coerce (S2) the
        end of an upstream call's arguments waits for the verdict, and is checked after the
        table sent it whole (what the client gets, fixed or not)."""
        state = call.state
        whole = self._whole and state in HELD
        if event is END and not whole:
            self.calls.ended(call)  # the one place a Responses call's arguments end
        if state is OPEN and event in _QUIET_WHEN_OPEN:
            if event is END and repeats_before(self.calls.records, call):
                self._repair(Repair.CALL_DUPLICATED)  # counted; only a suspect is dropped
            return
        held = state in HELD
        if state is SUSPECT and event in ARGS_END and self._repeats(call):
            self._repair(Repair.CALL_DUPLICATED)
            event = CallInput.DUPLICATE  # dropped (dedupe_calls)
        if ev is not None and call.state is not OPEN:
            if call.state is not DROPPED:
                self._hold(call.held, ev)
            ev = None
        if whole and event in ARGS_END and call.up is not None and self.verdict is None:
            call.ended = True
            return  # its end waits for the response's (the module's docstring)
        # ``complete=False``: an END never makes up "{}" for a call without arguments; such a
        # call is ``incomplete``, as the item's own status says (``item_done``). ``True`` only
        # for a call sent whole that may be fixed: arguments of a response not cut
        fixable = (
            whole
            and self.verdict is False
            and call.up is not None
            and not call.item_cut
            and call.args_len > 0
        )
        self.calls.input(call, event, text, None, complete=fixable, extras=ev)
        if whole and event is END:
            self.calls.ended(call)
            # a markup call gets no later END (an upstream call's item end is one, OPEN):
            # its repeat is counted here; only a suspect is dropped
            markup_open = call.up is None and state is not SUSPECT and call.state is OPEN
            if markup_open and repeats_before(self.calls.records, call):
                self._repair(Repair.CALL_DUPLICATED)
        if held and call.state is DROPPED and call.up is not None:
            self._items.release()  # what waited behind the repeat goes on

    def _repeats(self, call: NativeCall) -> bool:
        """Whether a suspect repeats the call before it: as they came, or, when the proxy
        fixed that one, as the suspect would be fixed (both as the client would get them)."""
        calls = self.calls
        if repeats_before(calls.records, call):
            return True
        before = previous_call(calls.records, call)
        if before is None or not before.fixed or calls.rules is None or before.name != call.name:
            return False
        fixed = calls.rules.fix(call.name, call.text(), cut=False)
        return fixed is not None and json_equal(loads(fixed.text), before.args.complete())

    def _make_ids(self, call: NativeCall) -> None:
        """The item's id and the call_id, made where missing (in that order, as the ids are
        drawn), before the driver settles the call's identity on them."""
        added = call.opening
        if added is None:
            call.item_id = "fc_" + self._new_id()
        else:
            item = added.payload["item"]
            if not isinstance(item.get("id"), str) or not item["id"]:
                self._repair(Repair.ITEM_ID_MISSING)
                item["id"] = "fc_" + self._new_id()
                added.changed()
        if call.upstream_id is None:  # counted where the added came without one (call_added)
            call.upstream_id = "call_" + self._new_id()

    def put_opening(self, call: NativeCall, args: str, out: None) -> None:
        if call.opening is None:  # out of markup: an item of the proxy's
            assert call.id is not None
            assert call.name is not None
            item = self._items.new_item("function_call", call.item_id)
            item.call_id, item.name, item.call = call.id, call.name, call
            item.synthetic = FunctionCallItem(item.id, item.index, call.id, call.name, None)
            call.out = item
            self.put_args(call, args, None, None)
            return
        # The upstream's added, its arguments moved into a delta after it by show() (that is
        # ``args`` for OPEN_WHOLE), then the call's held events: any held text is in them.
        assert call.up is not None
        ev = call.opening
        item_fields = ev.payload["item"]
        for key, value in (("name", call.name or ""), ("call_id", call.id)):
            if item_fields.get(key) != value:
                item_fields[key] = value
                ev.changed()
        if call.fixed and item_fields.get("arguments"):
            self._repair(Repair.ARGS_IN_FIRST_DELTA)  # the fixed text goes out as the delta
            item_fields["arguments"] = ""
            ev.changed()
        call.out = self._items.show(call.up, ev)
        call.out.call = call
        queue, call.held = self._let_go(call.held), []
        if call.fixed:
            self._put_fixed(call, call.out, queue)
            return
        for held in queue:  # the held argument text is in these, as it came
            self._items.fix_item_fields(held, call.out, count=held.raw is not None)
            if held.type == "response.function_call_arguments.done":
                call.out.step(ContentStep.ARGS_DONE)
            self._emit(held)

    def _put_fixed(self, call: NativeCall, out: ClientItem, queue: list[WireEvent]) -> None:
        """A call whose arguments the proxy fixed: one delta of the whole text, then its held
        events but the upstream's deltas, its ``.done`` with the fixed text."""
        text = call.text()
        self.fixed_args[out.id] = text
        self._insert(fields.arguments_delta(out, text))
        for held in queue:
            if held.type == DELTA:
                continue  # its text is the fixed text's, sent above
            self._items.fix_item_fields(held, out, count=held.raw is not None)
            if held.type == "response.function_call_arguments.done":
                held.set("arguments", text)
                out.step(ContentStep.ARGS_DONE)
            self._emit(held)

    def put_held_args(self, call: NativeCall, text: str, out: None) -> None:
        if call.opening is None:
            self.put_args(call, text, None, None)
        # an upstream call's held text went out in its held events, behind the opening

    def put_args(self, call: NativeCall, text: str, out: None, extras: WireEvent | None) -> None:
        item = call.out
        assert item is not None
        if item.synthetic is not None:
            if text:
                item.synthetic.add(text)
            for payload in item.synthetic.flush():
                self._insert(payload)
        elif extras is not None:
            self._items.fix_item_fields(extras, item, count=False)
            self._emit(extras)
        elif text:
            self._insert(
                {"type": DELTA, "item_id": item.id, "output_index": item.index, "delta": text}
            )

    def hold_opening(self, call: NativeCall, args: str) -> None:
        raise NormalizerError("a Responses call has no placeholder to hold (NAMED_WHOLE)")

    def release_opening(self, call: NativeCall, out: None, *, without_args: bool) -> None:
        raise NormalizerError("a Responses call has no placeholder to release")

    def add_extras(self, call: NativeCall, extras: WireEvent) -> None:
        raise NormalizerError("a held Responses call keeps its events on the call (call_input)")

    def holding(self, call: NativeCall, out: None) -> None:
        if call.up is not None and self.blocking is not call:
            self.blocking = call
            if call.opening is not None:  # its opening is held with it
                self._items.held_bytes += call.opening.size

    def unblock(self, call: NativeCall) -> None:
        if self.blocking is call:
            self.blocking = None
            if call.opening is not None:
                self._items.held_bytes -= call.opening.size

    def settled(self, call: NativeCall) -> None:
        self.unblock(call)
        if call.state is DROPPED:
            self._let_go(call.held)
            call.held = []  # nothing of a dropped call goes out
            if call.opening is not None:
                item = call.opening.payload["item"]
                self.dropped.update(str(item[key]) for key in ("id", "call_id") if item.get(key))

    # -- a call item's end -----------------------------------------------------------------------

    def item_done(self, ev: WireEvent, item: JSONObject, out: ClientItem) -> None:
        """A call's ``output_item.done``: the fields it was shown with, its arguments streamed
        and ended (END), and ``incomplete`` when they do not parse."""
        for kind in fields.settled_fields(ev, item, out):
            self._repair(kind)
        if out.call is not None and out.call.fixed and item.get("arguments") != out.arguments:
            item["arguments"] = out.arguments  # the arguments the proxy fixed
            ev.changed()
        arguments = item.get("arguments")
        if out.call is not None:
            self.args_in_done(out.call, arguments)
            self.call_input(out.call, END)
        if not isinstance(arguments, str):
            item["arguments"] = out.arguments
            ev.changed()
        if not out.args_done:
            self._repair(Repair.ARGS_DONE_MISSING)
            self._insert(fields.arguments_done(out, item["arguments"]))
        if loads(item["arguments"]) is INVALID and item.get("status") != "incomplete":
            self._items.cut = True
            item["status"] = "incomplete"
            ev.changed()

    def ended_early(self, out: ClientItem) -> JSONObject:
        """The item of a call the upstream never ended, as the proxy ends it."""
        if out.call is not None:
            self.call_input(out.call, END)
        if not out.args_done:
            self._insert(fields.arguments_done(out, out.arguments))
        status = "completed" if loads(out.arguments) is not INVALID else "incomplete"
        self._items.cut = self._items.cut or status == "incomplete"
        return {
            "id": out.id,
            "type": "function_call",
            "status": status,
            "arguments": out.arguments,
            "call_id": out.call_id,
            "name": out.name,
        }

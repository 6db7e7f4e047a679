"""The items of a native stream: which upstream item an event belongs to, the order they go
out in, what is held, and their fields (the rules are in stream.py's docstring).

``ItemFlow`` is the item half of :class:`~proxy.core.protocols.responses.native.stream.
NativeStream`, which routes each event; it holds the parts that each do one job: the calls
(calls.py, a function call's state and its events), the message text (text.py, part fields
and markup), and numbers and frames what they send.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Final

from proxy.core.calls.state import DROPPED, HELD, OPEN
from proxy.core.jsonvalues import INVALID, JSONObject
from proxy.core.markup import build_extractor
from proxy.core.markup.fail_open import fail_open
from proxy.core.protocols.responses.native import fields as call_fields
from proxy.core.protocols.responses.native.calls import DELTA, NativeCalls
from proxy.core.protocols.responses.native.lifecycle import EndStep, ItemEnd
from proxy.core.protocols.responses.native.model import (
    ClientItem,
    NativeCall,
    UpstreamItem,
    WireEvent,
    message_part,
)
from proxy.core.protocols.responses.native.request import NativeRequest
from proxy.core.protocols.responses.native.text import MessageText
from proxy.core.protocols.responses.wire import frame
from proxy.core.repairs import Repair

_OPEN = ItemEnd.OPEN  # asked on every event: a module name, not the class attribute
_ID_PREFIX: Final = {"message": "msg_", "function_call": "fc_", "reasoning": "rs_"}


class ItemFlow:
    """The items of one native stream, and where its events go out (numbered in place).
    ``dispatch`` routes one event (the stream's): the events of an item that waited are
    routed again when it may go (``release``)."""

    def __init__(
        self,
        request: NativeRequest,
        dialects: tuple[str, ...],
        *,
        new_id: Callable[[], str],
        dispatch: Callable[[WireEvent], None],
        dedupe: bool = False,
        think: bool = False,
    ) -> None:
        self._request = request
        self._new_id = new_id
        self._dispatch = dispatch
        self._seq = 0
        self._out: list[bytes] = []
        self.dialects = dialects
        self.repairs: Counter[str] = Counter()
        #: the upstream's bytes held back, as they came: events waiting behind an item or a
        #: held call, a held call's own, a message's opening deferred until its text shows
        self.held_bytes = 0
        self.cut = False  # a call ended with unparsable arguments
        self.calls = NativeCalls(self, request.fallback_name, self.repairs, dedupe=dedupe)
        self._keep = self.calls.keep  # bound once: asked on every fragment of a call
        self.text = MessageText(self)
        self._items: list[ClientItem] = []
        self._by_id: dict[str, UpstreamItem] = {}
        self._by_index: dict[int, UpstreamItem] = {}
        self._last: UpstreamItem | None = None  # the item the upstream added most recently
        self._open_item: ClientItem | None = None  # the item shown and not yet done
        # the items that must wait for the open one, in the order they began, each with its
        # events: one that may go next goes alone, its events read once (``release``)
        self._waiting: dict[UpstreamItem, list[WireEvent]] = {}
        self._extracting: UpstreamItem | None = None  # the message whose text goes through markup
        #: think_in_content: the output's first item, if a message, may begin with <think>
        self._think_first = think

    # -- what goes out ---------------------------------------------------------------------------

    def emit(self, ev: WireEvent) -> None:
        """Send one event, numbered in place."""
        ev.set("sequence_number", self._seq)
        self._seq += 1
        self._out.append(ev.raw if ev.raw is not None else frame(ev.payload))

    def insert(self, payload: JSONObject) -> None:
        self.emit(WireEvent(payload, None))

    def repair(self, kind: str) -> None:
        """Count a repair, each time it is made (the rule of every stream: docs/repairs.md)."""
        self.repairs[kind] += 1

    def new_id(self) -> str:
        return self._new_id()

    # -- what is held ----------------------------------------------------------------------------

    def hold(self, queue: list[WireEvent], ev: WireEvent) -> None:
        """``ev`` is held in ``queue`` (counted toward max_held_bytes)."""
        queue.append(ev)
        self.held_bytes += ev.size

    def let_go(self, queue: list[WireEvent]) -> list[WireEvent]:
        """The events of ``queue`` are held no more (the caller empties it)."""
        self.held_bytes -= sum(ev.size for ev in queue)
        return queue

    # -- the items -------------------------------------------------------------------------------

    def new_item(self, kind: str, ident: str) -> ClientItem:
        """An item the proxy adds (out of markup), open from now on."""
        out = ClientItem(len(self._items), ident, kind)
        self._items.append(out)
        self._open_item = out
        return out

    def find(self, ev: WireEvent) -> UpstreamItem | None:
        """The upstream item an event belongs to: by item id, else output_index, else the
        latest; an id that differs from the one known for the item is a rotating id."""
        if ev.up is not None:  # it waited with its item (``wait``): it goes to that one
            return ev.up
        item = ev.get("item")
        ident = item.get("id") if isinstance(item, dict) else ev.get("item_id")
        up = self._by_id.get(ident) if isinstance(ident, str) and ident else None
        index = ev.get("output_index")
        if up is None and isinstance(index, int):
            up = self._by_index.get(index)
        if up is None:  # the latest item, unless it ended (its end may wait behind a call)
            last = self._last
            up = last if last is not None and not last.done and not last.closing else None
        if up is not None and isinstance(ident, str) and ident and ident not in self._by_id:
            self._by_id[ident] = up
        return up

    def _added(self, ev: WireEvent) -> None:
        item = ev.get("item")
        if not isinstance(item, dict):
            self.emit(ev)
            return
        up = ev.up
        if up is None:  # known from now on, even while it waits, so its events find it
            up = ev.up = UpstreamItem(str(item.get("type")))
            ident, index = item.get("id"), ev.get("output_index")
            if isinstance(ident, str) and ident:
                self._by_id[ident] = up
            if isinstance(index, int):
                self._by_index[index] = up
            self._last = up
        if self._must_wait(ev):
            return
        first, self._think_first = self._think_first, False
        if first and up.type == "message" and not self._items:
            self.text.start_think(up, ev)  # held until its first text decides (text.py)
            return
        if up.type == "function_call":
            self.calls.call_added(up, ev, item)  # shown when the table opens it
            return
        if up.type == "message" and self.dialects:
            self.extract(up)
            self.hold(up.deferred, ev)
            return
        self.show(up, ev)

    def extract(self, up: UpstreamItem) -> None:
        """The message's text goes through the dialects from here on."""
        up.extractor = fail_open(build_extractor(self.dialects, self._request.chat_tools))
        self._extracting = up

    def route(self, ev: WireEvent) -> None:
        """An event held back goes its way now, as if it came now."""
        self._dispatch(ev)

    def _must_wait(self, ev: WireEvent) -> bool:
        """Items never interleave: an item that begins while another is open waits, with its
        events, until that one is done (its text ends here). A call whose arguments ended
        (their ``.done`` came, or they are one whole JSON value) cannot go on, so it is
        ended here instead when its own end never came (the SGLang router's calls, quirk 3).
        True when ``ev`` was held."""
        thinking = self.text.thinking
        if thinking is not None and thinking is not ev.up:
            self.text.close_think(thinking)
        text = self._extracting
        if text is not None and text is not ev.up and text.extractor is not None:
            self.text.end_extraction(text)
        open_item = self._open_item
        if open_item is not None and self.calls.blocking is None and _call_ended(open_item):
            self.close_early(open_item)
        blocking = self.calls.blocking
        if blocking is None and self._open_item is None:
            return False
        if blocking is None or not _waits_for_verdict(blocking):
            self.repair(Repair.ITEMS_INTERLEAVED)
        assert ev.up is not None
        self.wait(ev.up, ev)
        return True

    def wait(self, up: UpstreamItem, ev: WireEvent) -> None:
        """``ev`` waits with the item it belongs to (``release``), and is routed to it again
        then, whatever the upstream's ids say by that time."""
        ev.up = up
        queue = self._waiting.get(up)
        if queue is None:
            queue = self._waiting[up] = []
        self.hold(queue, ev)

    def waits_with_item(self, ev: WireEvent) -> bool:
        """An event of a kind the items do not route (non-standard, a hosted tool's) that
        names an item waiting, or the call held, waits with it, so that it keeps its place
        after the item's opening (a held call's later items wait long under heal/coerce)."""
        ident, index = ev.get("item_id"), ev.get("output_index")
        up = self._by_id.get(ident) if isinstance(ident, str) and ident else None
        if up is None and isinstance(index, int):
            up = self._by_index.get(index)
        if up is None:
            return False
        call = self.calls.blocking
        if call is not None and up.call is call:
            self.hold(call.held, ev)
            return True
        if up in self._waiting:
            self.wait(up, ev)
            return True
        return False

    def show(self, up: UpstreamItem, ev: WireEvent) -> ClientItem:
        """The upstream's output_item.added, as the next item of the output."""
        item = ev.payload["item"]
        out = ClientItem(len(self._items), "", up.type)
        if not isinstance(item.get("id"), str) or not item["id"]:
            self.repair(Repair.ITEM_ID_MISSING)
            item["id"] = _ID_PREFIX.get(up.type, "item_") + self.new_id()
            ev.changed()
        out.id = item["id"]
        out.up = up
        if ev.get("output_index") is None:
            self.repair(Repair.OUTPUT_INDEX_MISSING)
        ev.set("output_index", out.index)
        moved = ""
        if up.type == "function_call":
            moved, repairs = call_fields.shown(ev, item, out)
            for kind in repairs:
                self.repair(kind)
        elif up.type == "message":
            for kind in call_fields.message_added(ev, item):
                self.repair(kind)
        self._items.append(out)
        self._open_item = out
        up.target = out
        self.emit(ev)
        if moved:
            self.insert(call_fields.arguments_delta(out, moved))
        return out

    def _item_event(self, ev: WireEvent) -> None:
        up = self.find(ev)
        if up is None:
            up = self._orphan(ev)
            if up is None:
                self.emit(ev)
                return
        call = up.call
        if call is not None and call.state is not OPEN:
            self.calls.call_event(call, ev, ev.type)  # held behind its opening, or dropped
            return
        if self.calls.blocking is not None:
            self.wait(up, ev)
            return
        if up.think is not None:
            self.text.think_event(up, ev)
            return
        if up.extractor is not None or up.rewritten:
            self.text.text_event(up, ev)
            return
        out = up.target
        if up.end is not _OPEN and up.closed_early:  # most items are open: no call
            if ev.type.endswith(".delta"):
                self.emit(ev)  # text after the item was ended: passed on, never lost
            return  # the proxy ended the item already; its late closing is dropped
        if out is None and up.done:
            self.emit(ev)  # after the item's end: nothing left to fix it against
            return
        if out is None or (self._open_item is not out and self._open_item is not None):
            self.wait(up, ev)  # its item waits (not shown yet), or another is open
            return
        self.fix_item_fields(ev, out)
        kind = ev.type
        if call is not None:
            if kind == DELTA and call.streams:  # the table's answer kept on the call
                self._keep(call, str(ev.payload.get("delta") or ""))
                self.emit(ev)
            else:
                self.calls.call_event(call, ev, kind)
            return
        if kind.startswith(("response.content_part.", "response.output_text.")):
            self.text.part_fields(ev, out)
        self.emit(ev)

    def fix_item_fields(self, ev: WireEvent, out: ClientItem, *, count: bool = True) -> None:
        ident = ev.get("item_id")
        if ident != out.id:
            if count:
                self.repair(Repair.ITEM_ID_ROTATING if ident else Repair.ITEM_ID_MISSING)
            ev.set("item_id", out.id)
        if ev.get("output_index") is None:
            self.repair(Repair.OUTPUT_INDEX_MISSING)
        ev.set("output_index", out.index)

    def _orphan(self, ev: WireEvent) -> UpstreamItem | None:
        """An item event with no item added before it: the item is added here."""
        kind = {
            "response.output_text.delta": "message",
            "response.content_part.added": "message",
            "response.function_call_arguments.delta": "function_call",
        }.get(ev.type)
        if kind is None:
            return None
        self.repair(Repair.ITEM_ADDED_MISSING)
        ident = ev.get("item_id")
        item: JSONObject = {
            "id": ident if isinstance(ident, str) else "",
            "type": kind,
            "status": "in_progress",
        }
        if kind == "message":
            item |= {"content": [], "role": "assistant"}
        else:
            item |= {"arguments": "", "call_id": "", "name": self._request.fallback_name or ""}
        added = WireEvent({"type": "response.output_item.added", "item": item}, None)
        if isinstance(ev.get("output_index"), int):
            added.payload["output_index"] = ev.get("output_index")
        self._added(added)
        return self.find(ev)

    def _item_done(self, ev: WireEvent) -> None:
        up = self.find(ev)
        if up is None:
            self.emit(ev)
            return
        if up.think is not None:  # the text ends: what its splitter holds goes first
            self.text.close_think(up)
        up.closing = True
        call = up.call
        if self.calls.blocking is not None and call is not self.calls.blocking:
            self.wait(up, ev)
            return
        if call is not None and call.state is not OPEN:
            self.calls.call_ended(call, ev.get("item"))
            if call.state is DROPPED:
                up.ended(EndStep.UPSTREAM_ENDS)
                return
            if call.state in HELD:  # heal/coerce: its end waits for the response's (calls.py)
                up.ended(EndStep.UPSTREAM_ENDS)  # later events without an item are not its
                if call.done is None:
                    self.calls.hold_done(call, ev)
                else:  # its end again: after the first, as any item's event after its end
                    self.wait(up, ev)
                return
        if up.extractor is not None or up.rewritten or (up.target is None and up.deferred):
            self.text.text_done(up, ev)
            return
        out = up.target
        if up.closed_early or (out is None and up.done):
            if not up.closed_early:
                self.emit(ev)
            up.ended(EndStep.UPSTREAM_ENDS)
            return
        if out is None or (self._open_item is not out and self._open_item is not None):
            self.wait(up, ev)
            return
        up.ended(EndStep.UPSTREAM_ENDS)
        item = ev.payload["item"]
        self.fix_item_fields_done(ev, item, out)
        if out.type == "function_call":
            self.calls.item_done(ev, item, out)
        elif out.type == "message" and out.part_open:
            self.text.close_part(out)
        self.finish(out, item)
        self.emit(ev)
        self.release()

    def end_held(self) -> None:
        """The held call ends (the verdict is in, or the stream ends): it goes out, then its
        ``output_item.done`` if it came, as any call's does."""
        call = self.calls.blocking
        assert call is not None
        done = self.calls.let_go_done(call)
        self.calls.call_ended(call, None)
        if done is not None:
            self._item_done(done)

    def fix_item_fields_done(self, ev: WireEvent, item: JSONObject, out: ClientItem) -> None:
        if item.get("id") != out.id:
            self.repair(Repair.ITEM_ID_ROTATING if item.get("id") else Repair.ITEM_ID_MISSING)
            item["id"] = out.id
            ev.changed()
        if ev.get("output_index") is None:
            self.repair(Repair.OUTPUT_INDEX_MISSING)
        ev.set("output_index", out.index)

    def finish(self, out: ClientItem, item: JSONObject) -> None:
        out.done = item
        if self._open_item is out:
            self._open_item = None

    def release(self) -> None:
        """The open item is done: the item that waited longest goes on with its events, in
        order, then the next, as long as none is open (the others' events are not read)."""
        waiting = self._waiting
        while waiting and self._open_item is None and self.calls.blocking is None:
            up = next(iter(waiting))
            for ev in self.let_go(waiting.pop(up)):
                self._dispatch(ev)

    def waited(self) -> list[WireEvent]:
        """Every event waiting, in the order they came (the queues emptied)."""
        events = self.let_go([ev for queue in self._waiting.values() for ev in queue])
        self._waiting = {}
        events.sort(key=arrival)
        return events

    def held_events(self) -> list[WireEvent]:
        """Every upstream event held anywhere, in the order they came, the holding let go of
        (the stream gives up rewriting: they go out as they came)."""
        events = self.waited()
        call = self.calls.blocking
        if call is not None:
            self.calls.unblock(call)
            events += [] if call.opening is None else [call.opening]
            events += self.let_go(call.held)
            call.held = []
            done = self.calls.let_go_done(call)
            events += [] if done is None else [done]
        for up in {id(up): up for up in (*self._by_id.values(), *self._by_index.values())}.values():
            if up.deferred:
                events += self.let_go(up.deferred)
                up.deferred = []
        events.sort(key=arrival)
        return events

    def add_whole_message(self, text: str) -> None:
        """A message item the proxy adds whole (a parser failure's text)."""
        out = self.new_item("message", "msg_" + self.new_id())
        base = {"item_id": out.id, "output_index": out.index}
        item = {"id": out.id, "type": "message", "status": "in_progress", "role": "assistant"}
        self.insert(
            {
                "type": "response.output_item.added",
                "output_index": out.index,
                "item": {**item, "content": []},
            }
        )
        part = {"type": "output_text", "annotations": [], "text": ""}
        self.insert(
            {"type": "response.content_part.added", **base, "content_index": 0, "part": part}
        )
        text_base = {**base, "content_index": 0}
        self.insert(
            {"type": "response.output_text.delta", **text_base, "delta": text, "logprobs": []}
        )
        self.insert(
            {"type": "response.output_text.done", **text_base, "text": text, "logprobs": []}
        )
        self.insert({"type": "response.content_part.done", **text_base, "part": message_part(text)})
        done = {**item, "status": "completed", "content": [message_part(text)]}
        self.finish(out, done)
        self.insert({"type": "response.output_item.done", "output_index": out.index, "item": done})

    def add_whole_call(self, name: str, arguments: str, call_id: str | None) -> None:
        """A function call item the proxy adds whole (a parser failure's call)."""
        out = self.new_item("function_call", "fc_" + self.new_id())
        call_id = call_id or "call_" + self.new_id()
        item = {"id": out.id, "type": "function_call", "status": "in_progress"}
        item |= {"arguments": "", "call_id": call_id, "name": name}
        self.insert({"type": "response.output_item.added", "output_index": out.index, "item": item})
        base = {"item_id": out.id, "output_index": out.index}
        self.insert({"type": "response.function_call_arguments.delta", **base, "delta": arguments})
        self.insert(
            {"type": "response.function_call_arguments.done", **base, "arguments": arguments}
        )
        done = {**item, "status": "completed", "arguments": arguments}
        self.finish(out, done)
        self.insert({"type": "response.output_item.done", "output_index": out.index, "item": done})

    def close_early(self, out: ClientItem, *, failed: bool = False) -> None:
        """End an item the upstream never ended (R3: no output_item.done for calls), at
        the end of the stream; closing events of its that still come are dropped. A message
        the upstream's failure cut (``failed``) is ``incomplete``."""
        self.repair(Repair.ITEM_DONE_MISSING)
        if out.up is not None and out.up.target is out:
            out.up.ended(EndStep.PROXY_ENDS)
        if out.type == "message":
            if out.part_open:
                self.text.close_part(out)
            item = {
                "id": out.id,
                "type": "message",
                "status": "incomplete" if failed else "completed",
                "role": "assistant",
                "content": [message_part(t) for t in out.texts],
            }
        elif out.type == "function_call":
            item = self.calls.ended_early(out)
        else:
            item = {"id": out.id, "type": out.type}
        self.finish(out, item)
        self.insert({"type": "response.output_item.done", "output_index": out.index, "item": item})


def _call_ended(out: ClientItem) -> bool:
    """Whether ``out`` is an upstream call shown whose arguments ended: their ``.done`` went
    out, or they are one whole JSON value (which no more text can extend)."""
    call = out.call
    return (
        call is not None
        and call.up is not None
        and call.state is OPEN
        and (out.args_done or call.args.complete() is not INVALID)
    )


def _waits_for_verdict(call: NativeCall) -> bool:
    """Whether a held call waits only for the response's end (heal/coerce, calls.py): its
    arguments ended, or are one whole JSON value (as ``_call_ended`` asks of an open one);
    an item after it then interleaves with nothing."""
    return call.ended or (call.up is not None and call.args.complete() is not INVALID)


def arrival(ev: WireEvent) -> int:
    return ev.n

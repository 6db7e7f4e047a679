"""A native stream's message text: its part fields, and tool-call markup in it (R4).

With tools offered, a message item's ``output_text.delta`` text goes through the shared markup
extractor (proxy/core/markup, as chat/choice.py uses it). Plain text passes as it came (the
item's opening is held only until its first text shows, so markup at the start leaves no empty
message). A call found in the text ends the message item so far and becomes a
``function_call`` item of its own; text after it opens a new message item. The upstream's own
closing events of a message whose text changed are rewritten to the text that was sent, or
dropped when no message was left. A dialect that fails gives its text back as text.

Under the upstream's ``think_in_content`` (issue 24 item 11), the output's first item, when a
message, is held (its opening, its part, and its text as long as the text may still be the
start of ``<think>``) until its first text decides: a text that begins otherwise goes on as it
came, every event held routed again (byte for byte where nothing else needs repair); a
``<think>`` block becomes a reasoning item of the proxy's before the message (one summary
part, the whole native Response's shape, whole.py), streamed as it comes, and the message,
shown after it at the next ``output_index``, keeps the rest of the text (its closing events
rewritten to the text sent). What the splitter holds goes out at the message's end, the next
item, the response's end, the cap or a cut.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from proxy.core.jsonvalues import JSONObject
from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Extractor, Segment, Text
from proxy.core.protocols.responses.native.calls import NativeCalls
from proxy.core.protocols.responses.native.lifecycle import ContentStep, EndStep
from proxy.core.protocols.responses.native.model import (
    ClientItem,
    UpstreamItem,
    WireEvent,
    message_part,
)
from proxy.core.protocols.think import LeadingThink
from proxy.core.repairs import Repair, markup_kind

_DELTA = "response.output_text.delta"


class TextSide(Protocol):
    """What a message's text needs of the item structure (structure.py ``ItemFlow``)."""

    repairs: Counter[str]
    dialects: tuple[str, ...]
    calls: NativeCalls

    def repair(self, kind: str) -> None: ...
    def new_id(self) -> str: ...
    def emit(self, ev: WireEvent) -> None: ...
    def insert(self, payload: JSONObject) -> None: ...
    def hold(self, queue: list[WireEvent], ev: WireEvent) -> None: ...
    def let_go(self, queue: list[WireEvent]) -> list[WireEvent]: ...
    def show(self, up: UpstreamItem, ev: WireEvent) -> ClientItem: ...
    def new_item(self, kind: str, ident: str) -> ClientItem: ...
    def fix_item_fields(self, ev: WireEvent, out: ClientItem, *, count: bool = True) -> None: ...
    def fix_item_fields_done(self, ev: WireEvent, item: JSONObject, out: ClientItem) -> None: ...
    def finish(self, out: ClientItem, item: JSONObject) -> None: ...
    def release(self) -> None: ...
    def extract(self, up: UpstreamItem) -> None: ...
    def route(self, ev: WireEvent) -> None: ...


class MessageText:
    """The text of a native stream's messages: the part fields of each, and tool-call markup
    in those whose text goes through the dialects (``UpstreamItem.extractor``)."""

    def __init__(self, items: TextSide) -> None:
        self._items = items
        self.kept = 0  # characters of message text kept (to end a part the proxy ends)
        #: think_in_content: the first message while its splitter decides or reads reasoning
        self.thinking: UpstreamItem | None = None
        self._reasoning: ClientItem | None = None  # the reasoning item of its <think> block
        #: the reasoning item and the message its <think> block was split from
        self.split: tuple[ClientItem, ClientItem] | None = None

    # -- part fields (every message) ---------------------------------------------------------------

    def part_fields(self, ev: WireEvent, out: ClientItem) -> None:
        """content_index, logprobs and annotations of a message's part events, and its text."""
        kind = ev.type
        if kind == "response.content_part.added":
            out.step(ContentStep.PART_ADDED)
            out.text = []
            self._annotations(ev)
        elif not out.part_open and kind.startswith("response.output_text."):
            self._items.repair(Repair.ITEM_ADDED_MISSING)
            self._insert_part_added(out)
        index = ev.get("content_index")
        if index != len(out.texts):
            self._items.repair(
                Repair.CONTENT_INDEX_WRONG if index is not None else Repair.TEXT_FIELDS_MISSING
            )
            ev.set("content_index", len(out.texts))
        text_event = kind in ("response.output_text.delta", "response.output_text.done")
        if text_event and not isinstance(ev.get("logprobs"), list):
            self._items.repair(Repair.TEXT_FIELDS_MISSING)
            ev.set("logprobs", [])
        if kind == "response.output_text.delta":
            text = str(ev.get("delta") or "")
            out.text.append(text)
            self.kept += len(text)
        elif kind == "response.content_part.done":
            self._annotations(ev)
            out.texts.append("".join(out.text))
            out.step(ContentStep.PART_DONE)
            out.text = []

    def _annotations(self, ev: WireEvent) -> None:
        part = ev.get("part")
        if (
            isinstance(part, dict)
            and part.get("type") == "output_text"
            and "annotations" not in part
        ):
            self._items.repair(Repair.TEXT_FIELDS_MISSING)
            part["annotations"] = []
            ev.changed()

    def _insert_part_added(self, out: ClientItem) -> None:
        out.step(ContentStep.PART_ADDED)
        out.text = []
        self._items.insert(
            {
                "type": "response.content_part.added",
                "item_id": out.id,
                "output_index": out.index,
                "content_index": len(out.texts),
                "part": message_part(""),
            }
        )

    def close_part(self, out: ClientItem) -> None:
        """End the open part with the text it had: output_text.done, content_part.done."""
        text = "".join(out.text)
        head = {"item_id": out.id, "output_index": out.index, "content_index": len(out.texts)}
        self._items.insert(
            {"type": "response.output_text.done", **head, "text": text, "logprobs": []}
        )
        self._items.insert(
            {"type": "response.content_part.done", **head, "part": message_part(text)}
        )
        out.texts.append(text)
        out.step(ContentStep.PART_DONE)
        out.text = []

    # -- markup in text --------------------------------------------------------------------------

    def text_event(self, up: UpstreamItem, ev: WireEvent) -> None:
        kind = ev.type
        if up.target is None and kind == "response.content_part.added" and up.deferred:
            self._items.hold(up.deferred, ev)
            return
        if kind == "response.output_text.delta":
            self._delta(up, ev)
            return
        if kind == "response.output_text.done":
            self.end_extraction(up)
        target = up.target
        if target is None:
            if up.deferred and not up.rewritten:
                self._show(up)
                self.text_event(up, ev)
            return  # the message became calls only: its closing is dropped
        self._items.fix_item_fields(ev, target, count=not up.rewritten)
        if up.rewritten and kind == "response.output_text.done":
            ev.set("text", "".join(target.text))
        if up.rewritten and kind == "response.content_part.done":
            ev.set("part", message_part("".join(target.text)))
        if kind.startswith(("response.content_part.", "response.output_text.")):
            self.part_fields(ev, target)
        self._items.emit(ev)

    def text_done(self, up: UpstreamItem, ev: WireEvent) -> None:
        """The upstream's output_item.done of a message its text went through the extractor."""
        self.end_extraction(up)
        up.ended(EndStep.UPSTREAM_ENDS)
        if up.target is None and up.deferred and not up.rewritten:
            self._show(up)  # an empty message: shown as it came
        target = up.target
        if target is None:
            self._items.release()
            return
        item = ev.payload["item"]
        self._items.fix_item_fields_done(ev, item, target)
        if target.part_open:
            self.close_part(target)
        if up.rewritten:
            item["content"] = [message_part(text) for text in target.texts]
            ev.changed()
        self._items.finish(target, item)
        up.target = None
        self._items.emit(ev)
        self._items.release()

    def end_extraction(self, up: UpstreamItem) -> None:
        extractor, up.extractor = up.extractor, None
        if extractor is None:
            return
        broken = extractor.extractor.broken
        segments = extractor.close()
        self._broken(extractor.extractor.broken - broken)
        if extractor.failed:
            self._items.repair(Repair.DIALECT_ERROR)
        self._segments(up, segments, extractor.extractor)

    def _broken(self, count: int) -> None:
        """Markup that broke or stopped inside a call came back as text, the exact text it
        was (issue 24 item 4): ``markup-broken``, as the chat path counts it."""
        if count:
            self._items.repairs[Repair.MARKUP_BROKEN] += count

    def _delta(self, up: UpstreamItem, ev: WireEvent) -> None:
        text = str(ev.get("delta") or "")
        extractor = up.extractor
        if extractor is None or extractor.passes(text):
            segments: list[Segment] = [Text(text)] if text else []
        else:
            broken = extractor.extractor.broken
            segments = extractor.feed(text)
            self._broken(extractor.extractor.broken - broken)
            if extractor.failed:
                self._items.repair(Repair.DIALECT_ERROR)
                up.extractor = None
        if segments == [Text(text)] and not up.rewritten:
            self._ensure_message(up)
            assert up.target is not None
            self._items.fix_item_fields(ev, up.target)
            self.part_fields(ev, up.target)
            self._items.emit(ev)
            return
        self._segments(up, segments, extractor.extractor if extractor is not None else None)

    def _segments(
        self, up: UpstreamItem, segments: list[Segment], extractor: Extractor | None
    ) -> None:
        for segment in segments:
            match segment:
                case Text(text=text) if text:
                    self._ensure_message(up)
                    assert up.target is not None
                    self._text_delta(up.target, text)
                case CallOpen(name=name, id=ident):
                    # one per call, as in chat
                    self._items.repairs[markup_kind(extractor, self._items.dialects)] += 1
                    self._open_call(up, name, ident)
                case CallArgs(text=text):
                    self._items.calls.markup_args(text)
                case CallClose(error=error):
                    if error is not None and self._items.calls.markup is not None:
                        self._items.repair(Repair.MARKUP_BROKEN)
                    self._items.calls.markup_close()
                case _:
                    pass

    def _text_delta(self, out: ClientItem, text: str) -> None:
        if not out.part_open:
            self._insert_part_added(out)
        out.text.append(text)
        self.kept += len(text)
        self._items.insert(
            {
                "type": "response.output_text.delta",
                "item_id": out.id,
                "output_index": out.index,
                "content_index": len(out.texts),
                "delta": text,
                "logprobs": [],
            }
        )

    def _ensure_message(self, up: UpstreamItem) -> None:
        """The message item its text goes to: the upstream's own, shown now, or after a call
        taken out of its text, a new one."""
        if up.target is not None:
            return
        if up.deferred and not up.rewritten:
            self._show(up)
            return
        out = self._items.new_item("message", "msg_" + self._items.new_id())
        up.target, out.up = out, up
        self._items.insert(
            {
                "type": "response.output_item.added",
                "output_index": out.index,
                "item": {
                    "id": out.id,
                    "type": "message",
                    "status": "in_progress",
                    "content": [],
                    "role": "assistant",
                },
            }
        )
        self._insert_part_added(out)

    def show_unshown(self, up: UpstreamItem) -> None:
        """A message whose opening is still held (no text came yet) is shown as it came."""
        if up.target is None and up.deferred and not up.rewritten:
            self._show(up)

    def _show(self, up: UpstreamItem) -> None:
        deferred, up.deferred = self._items.let_go(up.deferred), []
        out = self._items.show(up, deferred[0])
        for ev in deferred[1:]:
            self._items.fix_item_fields(ev, out)
            self.part_fields(ev, out)
            self._items.emit(ev)

    def _open_call(self, up: UpstreamItem, name: str, ident: str | None) -> None:
        up.rewritten = True
        self._items.let_go(up.deferred)
        up.deferred = []  # a message with no text before the call is never shown
        target, up.target = up.target, None
        if target is not None:
            if target.part_open:
                self.close_part(target)
            item = {
                "id": target.id,
                "type": "message",
                "status": "completed",
                "content": [message_part(text) for text in target.texts],
                "role": "assistant",
            }
            self._items.finish(target, item)
            self._items.insert(
                {"type": "response.output_item.done", "output_index": target.index, "item": item}
            )
        self._items.calls.markup_open(name, ident)  # through the calls, as an upstream's call

    # -- a leading <think> block (think_in_content; issue 24 item 11) -------------------------

    def start_think(self, up: UpstreamItem, ev: WireEvent) -> None:
        """The output's first item is a message: its opening waits for its first text."""
        up.think = LeadingThink()
        self.thinking = up
        self._items.hold(up.deferred, ev)

    def think_event(self, up: UpstreamItem, ev: WireEvent) -> None:
        """An event of the first message while its splitter holds it (``up.think``)."""
        think = up.think
        assert think is not None
        if ev.type == "response.content_part.added":
            self._items.hold(up.deferred, ev)  # shown with the message's opening
            return
        if ev.type != _DELTA:  # the text is over, or something else comes: decided now
            self.close_think(up)
            self._items.route(ev)
            return
        was_found = think.found
        reasoning, content = think.feed(str(ev.get("delta") or ""))
        if not think.found:
            ev.up = up
            self._items.hold(up.deferred, ev)
            if think.done:  # it begins otherwise: every event as it came
                self._no_think(up)
            return
        if not was_found:
            self._open_reasoning(up)
        self._reason(reasoning)
        if think.done:
            self._end_think(up, content)

    def close_think(self, up: UpstreamItem) -> None:
        """The splitter's text ends here: what it holds goes out (reasoning inside the block,
        else the held events as they came)."""
        think = up.think
        if think is None:
            return
        reasoning, content = think.close()
        if not think.found:
            self._no_think(up)
            return
        self._reason(reasoning)
        self._end_think(up, content)

    def _no_think(self, up: UpstreamItem) -> None:
        up.think, self.thinking = None, None
        held, up.deferred = self._items.let_go(up.deferred), []
        for ev in held:
            ev.up = up
            self._items.route(ev)

    def _open_reasoning(self, up: UpstreamItem) -> None:
        """A ``<think>`` block: the reasoning item opens; the message's text so far is in it
        (the held deltas are dropped, the message's opening and part wait for its rest)."""
        held, up.deferred = self._items.let_go(up.deferred), []
        for ev in held:
            if ev.type != _DELTA:
                self._items.hold(up.deferred, ev)
        self._items.repair(Repair.THINK_IN_CONTENT)
        out = self._reasoning = self._items.new_item("reasoning", "rs_" + self._items.new_id())
        self._items.insert(
            {
                "type": "response.output_item.added",
                "output_index": out.index,
                "item": {"id": out.id, "type": "reasoning", "summary": []},
            }
        )
        self._items.insert(
            {
                "type": "response.reasoning_summary_part.added",
                "item_id": out.id,
                "output_index": out.index,
                "summary_index": 0,
                "part": {"type": "summary_text", "text": ""},
            }
        )

    def _reason(self, text: str) -> None:
        out = self._reasoning
        if not text or out is None:
            return
        out.text.append(text)
        self.kept += len(text)
        self._items.insert(
            {
                "type": "response.reasoning_summary_text.delta",
                "item_id": out.id,
                "output_index": out.index,
                "summary_index": 0,
                "delta": text,
            }
        )

    def _end_think(self, up: UpstreamItem, content: str) -> None:
        """The block ended: the reasoning item is done, then the message is shown with the
        rest of its text (through the dialects, when they read it)."""
        out = self._reasoning
        assert out is not None
        up.think, self.thinking, self._reasoning = None, None, None
        text = "".join(out.text)
        head = {"item_id": out.id, "output_index": out.index, "summary_index": 0}
        part = {"type": "summary_text", "text": text}
        self._items.insert({"type": "response.reasoning_summary_text.done", **head, "text": text})
        self._items.insert({"type": "response.reasoning_summary_part.done", **head, "part": part})
        item = {"id": out.id, "type": "reasoning", "summary": [part]}
        self._items.finish(out, item)
        self._items.insert(
            {"type": "response.output_item.done", "output_index": out.index, "item": item}
        )
        self._show(up)
        up.rewritten = True  # its closing events say the text that was sent
        assert up.target is not None
        self.split = (out, up.target)
        if self._items.dialects:
            self._items.extract(up)
        if content:
            self._delta(up, WireEvent({"type": _DELTA, "delta": content}, None))

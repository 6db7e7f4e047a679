"""A native stream's message text: its part fields, and tool-call markup in it (R4).

With tools offered, a message item's ``output_text.delta`` text goes through the shared markup
extractor (proxy/core/markup, as chat/choice.py uses it). Plain text passes as it came (the
item's opening is held only until its first text shows, so markup at the start leaves no empty
message). A call found in the text ends the message item so far and becomes a
``function_call`` item of its own; text after it opens a new message item. The upstream's own
closing events of a message whose text changed are rewritten to the text that was sent, or
dropped when no message was left. A dialect that fails gives its text back as text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Extractor, Segment, Text
from proxy.core.protocols.responses.native.model import Ev, Out, Up, message_part
from proxy.core.repairs import Repair, markup_kind

if TYPE_CHECKING:
    from proxy.core.protocols.responses.native.structure import ItemFlow as NativeStream


# -- part fields (every message) ---------------------------------------------------------------


def part_fields(s: NativeStream, ev: Ev, out: Out) -> None:
    """content_index, logprobs and annotations of a message's part events, and its text."""
    kind = ev.type
    if kind == "response.content_part.added":
        out.part_open, out.text = True, []
        _annotations(s, ev)
    elif not out.part_open and kind.startswith("response.output_text."):
        s.repair(Repair.ITEM_ADDED_MISSING)
        _insert_part_added(s, out)
    index = ev.get("content_index")
    if index != len(out.texts):
        s.repair(Repair.CONTENT_INDEX_WRONG if index is not None else Repair.TEXT_FIELDS_MISSING)
        ev.set("content_index", len(out.texts))
    text_event = kind in ("response.output_text.delta", "response.output_text.done")
    if text_event and not isinstance(ev.get("logprobs"), list):
        s.repair(Repair.TEXT_FIELDS_MISSING)
        ev.set("logprobs", [])
    if kind == "response.output_text.delta":
        text = str(ev.get("delta") or "")
        out.text.append(text)
        s.kept_text += len(text)
    elif kind == "response.content_part.done":
        _annotations(s, ev)
        out.texts.append("".join(out.text))
        out.part_open, out.text = False, []


def _annotations(s: NativeStream, ev: Ev) -> None:
    part = ev.get("part")
    if isinstance(part, dict) and part.get("type") == "output_text" and "annotations" not in part:
        s.repair(Repair.TEXT_FIELDS_MISSING)
        part["annotations"] = []
        ev.changed()


def _insert_part_added(s: NativeStream, out: Out) -> None:
    out.part_open, out.text = True, []
    s.insert(
        {
            "type": "response.content_part.added",
            "item_id": out.id,
            "output_index": out.index,
            "content_index": len(out.texts),
            "part": message_part(""),
        }
    )


def close_part(s: NativeStream, out: Out) -> None:
    """End the open part with the text it had: output_text.done, content_part.done."""
    text = "".join(out.text)
    head = {"item_id": out.id, "output_index": out.index, "content_index": len(out.texts)}
    s.insert({"type": "response.output_text.done", **head, "text": text, "logprobs": []})
    s.insert({"type": "response.content_part.done", **head, "part": message_part(text)})
    out.texts.append(text)
    out.part_open, out.text = False, []


# -- markup in text --------------------------------------------------------------------------


def text_event(s: NativeStream, up: Up, ev: Ev) -> None:
    kind = ev.type
    if up.target is None and kind == "response.content_part.added" and up.deferred:
        s.hold(up.deferred, ev)
        return
    if kind == "response.output_text.delta":
        _delta(s, up, ev)
        return
    if kind == "response.output_text.done":
        end_extraction(s, up)
    target = up.target
    if target is None:
        if up.deferred and not up.rewritten:
            _show(s, up)
            text_event(s, up, ev)
        return  # the message became calls only: its closing is dropped
    s.fix_item_fields(ev, target, count=not up.rewritten)
    if up.rewritten and kind == "response.output_text.done":
        ev.set("text", "".join(target.text))
    if up.rewritten and kind == "response.content_part.done":
        ev.set("part", message_part("".join(target.text)))
    if kind.startswith(("response.content_part.", "response.output_text.")):
        part_fields(s, ev, target)
    s.emit(ev)


def text_done(s: NativeStream, up: Up, ev: Ev) -> None:
    """The upstream's output_item.done of a message its text went through the extractor."""
    end_extraction(s, up)
    up.done = True
    if up.target is None and up.deferred and not up.rewritten:
        _show(s, up)  # an empty message: shown as it came
    target = up.target
    if target is None:
        s.release()
        return
    item = ev.payload["item"]
    s.fix_item_fields_done(ev, item, target)
    if target.part_open:
        close_part(s, target)
    if up.rewritten:
        item["content"] = [message_part(text) for text in target.texts]
        ev.changed()
    s.finish(target, item)
    up.target = None
    s.emit(ev)
    s.release()


def end_extraction(s: NativeStream, up: Up) -> None:
    extractor, up.extractor = up.extractor, None
    if extractor is None:
        return
    segments = extractor.close()
    if extractor.failed:
        s.repair(Repair.DIALECT_ERROR)
    _segments(s, up, segments, extractor.extractor)


def _delta(s: NativeStream, up: Up, ev: Ev) -> None:
    text = str(ev.get("delta") or "")
    extractor = up.extractor
    if extractor is None or extractor.passes(text):
        segments: list[Segment] = [Text(text)] if text else []
    else:
        segments = extractor.feed(text)
        if extractor.failed:
            s.repair(Repair.DIALECT_ERROR)
            up.extractor = None
    if segments == [Text(text)] and not up.rewritten:
        _ensure_message(s, up)
        assert up.target is not None
        s.fix_item_fields(ev, up.target)
        part_fields(s, ev, up.target)
        s.emit(ev)
        return
    _segments(s, up, segments, extractor.extractor if extractor is not None else None)


def _segments(
    s: NativeStream, up: Up, segments: list[Segment], extractor: Extractor | None
) -> None:
    for segment in segments:
        match segment:
            case Text(text=text) if text:
                _ensure_message(s, up)
                assert up.target is not None
                _text_delta(s, up.target, text)
            case CallOpen(name=name, id=ident):
                s.repairs[markup_kind(extractor, s.dialects)] += 1  # one per call, as in chat
                _open_call(s, up, name, ident)
            case CallArgs(text=text):
                s.markup_args(text)
            case CallClose(error=error):
                if error is not None and s.markup is not None:
                    s.repair(Repair.MARKUP_BROKEN)
                s.markup_close()
            case _:
                pass


def _text_delta(s: NativeStream, out: Out, text: str) -> None:
    if not out.part_open:
        _insert_part_added(s, out)
    out.text.append(text)
    s.kept_text += len(text)
    s.insert(
        {
            "type": "response.output_text.delta",
            "item_id": out.id,
            "output_index": out.index,
            "content_index": len(out.texts),
            "delta": text,
            "logprobs": [],
        }
    )


def _ensure_message(s: NativeStream, up: Up) -> None:
    """The message item its text goes to: the upstream's own, shown now, or after a call
    taken out of its text, a new one."""
    if up.target is not None:
        return
    if up.deferred and not up.rewritten:
        _show(s, up)
        return
    out = s.new_item("message", "msg_" + s.new_id())
    up.target, out.up = out, up
    s.insert(
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
    _insert_part_added(s, out)


def show_unshown(s: NativeStream, up: Up) -> None:
    """A message whose opening is still held (no text came yet) is shown as it came."""
    if up.target is None and up.deferred and not up.rewritten:
        _show(s, up)


def _show(s: NativeStream, up: Up) -> None:
    deferred, up.deferred = s.let_go(up.deferred), []
    out = s.show(up, deferred[0])
    for ev in deferred[1:]:
        s.fix_item_fields(ev, out)
        part_fields(s, ev, out)
        s.emit(ev)


def _open_call(s: NativeStream, up: Up, name: str, ident: str | None) -> None:
    up.rewritten = True
    s.let_go(up.deferred)
    up.deferred = []  # a message with no text before the call is never shown
    target, up.target = up.target, None
    if target is not None:
        if target.part_open:
            close_part(s, target)
        item = {
            "id": target.id,
            "type": "message",
            "status": "completed",
            "content": [message_part(text) for text in target.texts],
            "role": "assistant",
        }
        s.finish(target, item)
        s.insert({"type": "response.output_item.done", "output_index": target.index, "item": item})
    s.markup_open(name, ident)  # through the call driver, as an upstream's call

"""Tool-call markup in a native Messages stream's ``text_delta`` (every configured dialect).

A text block's text goes through the shared markup extractor (proxy/core/markup). Plain text
passes as it came; where a call begins, the client's text block is stopped and the call goes
out as a ``tool_use`` block of its own (its input as ``input_json_delta``s), and text after it
opens a new text block. Each call goes through the call state table as a tool block's does
(native_calls.py): one named like the call before it is held, under ``dedupe_calls``, until it
closes, then dropped (a repeat) or sent whole. A dialect that fails gives its text
back as text, and extraction stops for the block.
"""

from __future__ import annotations

from collections.abc import Callable

from proxy.core.jsonvalues import JSONObject
from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Segment, Text
from proxy.core.protocols.messages.native.calls import CallBlocks
from proxy.core.protocols.messages.native.model import Block, ToolCall, input_parses
from proxy.core.repairs import Repair, markup_kind
from proxy.core.sse import Event


class TextMarkup(CallBlocks):
    _new_id: Callable[[], str]
    _dialects: tuple[str, ...]
    _markup_call: ToolCall | None  # the markup call open in the active text block

    def _markup_delta(self, block: Block, event: Event, payload: JSONObject, text: str) -> None:
        extractor = block.markup
        assert extractor is not None
        if self._wire == "text" and extractor.passes(text):
            self._write_block_event(block, event, payload, False)
            return
        segments = extractor.feed(text)
        if extractor.failed:
            self._markup_failed(block)
        if segments == [Text(text)] and self._wire == "text":
            self._write_block_event(block, event, payload, False)
        else:
            self._segments(block, segments)

    def _close_markup(self, block: Block) -> None:
        extractor = block.markup
        if extractor is None:
            return
        segments = extractor.close()
        if extractor.failed:
            self._markup_failed(block)
        self._segments(block, segments)
        block.markup = None

    def _markup_failed(self, block: Block) -> None:
        """Extraction stops for the block; the text the dialect held comes back as text."""
        self._note(Repair.DIALECT_ERROR)
        block.markup = None
        self._markup_call = None  # a call it left open is left as it went out

    def _segments(self, block: Block, segments: list[Segment]) -> None:
        for segment in segments:
            match segment:
                case Text(text=text):
                    if self._wire != "text":
                        block.index = self._open_wire({"type": "text", "text": ""})
                    delta = {"type": "text_delta", "text": text}
                    self._emit(
                        {"type": "content_block_delta", "index": block.index, "delta": delta}
                    )
                case CallOpen(name=name, id=ident):
                    extractor = block.markup.extractor if block.markup is not None else None
                    self.repairs[markup_kind(extractor, self._dialects)] += 1
                    ident = ident or "toolu_" + self._new_id()
                    call = ToolCall(None, ident, from_markup=True, name=name)
                    self._markup_call = call  # a suspect is held: the text block stays open
                    self._name_call(call)
                case CallArgs(text=text):
                    current = self._markup_call
                    if current is None:  # outside a call (a dialect bug): text
                        self._segments(block, [Text(text)])
                    elif current.streams:  # the table's answer, kept on the call: sent
                        self._keep(current, text)
                        self._emit_input(current, text)
                    else:
                        self._unstreamed_args(current, text, None)
                case CallClose(error=error):
                    if error is not None:
                        self._note(Repair.MARKUP_BROKEN)
                    closed, self._markup_call = self._markup_call, None
                    if closed is None:
                        continue
                    if not input_parses(closed.text()):
                        self._bad_input = True
                    self._end_input(closed)
                    if self._wire == "tool_use":  # not a dropped repeat's: the text is open
                        self._stop_wire()

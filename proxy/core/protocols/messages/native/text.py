"""Tool-call markup in a native Messages stream's ``text_delta`` (every configured dialect).

A text block's text goes through the shared markup extractor (proxy/core/markup). Plain text
passes as it came; where a call begins, the client's text block is stopped and the call goes
out as a ``tool_use`` block of its own (its input as ``input_json_delta``s), and text after it
opens a new text block. Each call goes through the call state table as a tool block's does
(calls.py): one named like the call before it is held, under ``dedupe_calls``, until it
closes, then dropped (a repeat) or sent whole. A dialect that fails gives its text
back as text, and extraction stops for the block.
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from proxy.core.jsonvalues import JSONObject
from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Segment, Text
from proxy.core.protocols.messages.native.calls import ToolCalls
from proxy.core.protocols.messages.native.model import ToolCall, UpstreamBlock, input_parses
from proxy.core.repairs import Repair, markup_kind
from proxy.core.sse import Event


class TextSide(Protocol):
    """What the markup in text needs of the stream (stream.py ``NativeMessages``)."""

    repairs: Counter[str]
    dialects: tuple[str, ...]
    wire: str | None  #: the type of the block open on the client
    bad_input: bool
    calls: ToolCalls

    def new_id(self) -> str: ...
    def write_block_event(
        self, block: UpstreamBlock, event: Event, payload: JSONObject, changed: bool
    ) -> None: ...
    def open_wire(self, block: JSONObject) -> int: ...
    def stop_wire(self) -> None: ...
    def emit(self, payload: JSONObject) -> None: ...
    def note(self, repair: Repair) -> None: ...


class BlockText:
    """Markup in the text blocks of one native Messages stream: the calls found there go out
    as tool blocks of their own, through the stream's calls."""

    def __init__(self, stream: TextSide) -> None:
        self._stream = stream
        self._calls = stream.calls
        self.markup_call: ToolCall | None = None  # the markup call open in the active block

    def markup_delta(
        self, block: UpstreamBlock, event: Event, payload: JSONObject, text: str
    ) -> None:
        extractor = block.markup
        assert extractor is not None
        if self._stream.wire == "text" and extractor.passes(text):
            self._stream.write_block_event(block, event, payload, False)
            return
        broken = extractor.extractor.broken
        segments = extractor.feed(text)
        self._broken(extractor.extractor.broken - broken)
        if extractor.failed:
            self._failed(block)
        if segments == [Text(text)] and self._stream.wire == "text":
            self._stream.write_block_event(block, event, payload, False)
        else:
            self._segments(block, segments)

    def close_markup(self, block: UpstreamBlock) -> None:
        extractor = block.markup
        if extractor is None:
            return
        broken = extractor.extractor.broken
        segments = extractor.close()
        self._broken(extractor.extractor.broken - broken)
        if extractor.failed:
            self._failed(block)
        self._segments(block, segments)
        block.markup = None

    def _broken(self, count: int) -> None:
        """Markup that broke or stopped inside a call came back as text, the exact text it
        was (issue 24 item 4): ``markup-broken``, as the chat path counts it."""
        if count:
            self._stream.repairs[Repair.MARKUP_BROKEN] += count

    def _failed(self, block: UpstreamBlock) -> None:
        """Extraction stops for the block; the text the dialect held comes back as text."""
        self._stream.note(Repair.DIALECT_ERROR)
        block.markup = None
        self.markup_call = None  # a call it left open is left as it went out

    def _segments(self, block: UpstreamBlock, segments: list[Segment]) -> None:
        for segment in segments:
            match segment:
                case Text(text=text):
                    if self._stream.wire != "text":
                        block.index = self._stream.open_wire({"type": "text", "text": ""})
                    delta = {"type": "text_delta", "text": text}
                    self._stream.emit(
                        {"type": "content_block_delta", "index": block.index, "delta": delta}
                    )
                case CallOpen(name=name, id=ident):
                    extractor = block.markup.extractor if block.markup is not None else None
                    self._stream.repairs[markup_kind(extractor, self._stream.dialects)] += 1
                    ident = ident or "toolu_" + self._stream.new_id()
                    call = ToolCall(None, ident, from_markup=True, name=name)
                    self.markup_call = call  # a suspect is held: the text block stays open
                    self._calls.name_call(call)
                case CallArgs(text=text):
                    current = self.markup_call
                    if current is None:  # outside a call (a dialect bug): text
                        self._segments(block, [Text(text)])
                    elif current.streams:  # the table's answer, kept on the call: sent
                        self._calls.keep(current, text)
                        self._calls.emit_input(current, text)
                    else:
                        self._calls.unstreamed_args(current, text, None)
                case CallClose(error=error):
                    if error is not None:
                        self._stream.note(Repair.MARKUP_BROKEN)
                    closed, self.markup_call = self.markup_call, None
                    if closed is None:
                        continue
                    if not input_parses(closed.text()):
                        self._stream.bad_input = True
                    self._calls.end_input(closed)
                    if self._stream.wire == "tool_use":  # not a dropped repeat's: the text is open
                        self._stream.stop_wire()

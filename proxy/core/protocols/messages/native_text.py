"""Tool-call markup in a native Messages stream's ``text_delta`` (every configured dialect).

A text block's text goes through the shared markup extractor (proxy/core/markup). Plain text
passes as it came; where a call begins, the client's text block is stopped and the call goes
out as a ``tool_use`` block of its own (its input as ``input_json_delta``s), and text after it
opens a new text block. A call named like the call before it is held, under ``dedupe_calls``,
until it closes, then dropped (a repeat) or sent whole. A dialect that fails gives its text
back as text, and extraction stops for the block.
"""

from __future__ import annotations

from collections.abc import Callable

from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Segment, Text
from proxy.core.protocols.chat.chunks import JSONObject
from proxy.core.protocols.messages.native_block import Block, input_parses
from proxy.core.protocols.messages.native_client import ClientSide
from proxy.core.repairs import Repair, markup_kind
from proxy.core.sse import Event


class TextMarkup(ClientSide):
    _new_id: Callable[[], str]
    _dialects: tuple[str, ...]

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

    def _segments(self, block: Block, segments: list[Segment]) -> None:
        for segment in segments:
            match segment:
                case Text(text=text):
                    if self._wire != "text":
                        self._open_wire({"type": "text", "text": ""})
                        block.index = self._next - 1
                    delta = {"type": "text_delta", "text": text}
                    self._emit(
                        {"type": "content_block_delta", "index": block.index, "delta": delta}
                    )
                case CallOpen(name=name, id=ident):
                    extractor = block.markup.extractor if block.markup is not None else None
                    self.repairs[markup_kind(extractor, self._dialects)] += 1
                    self._tool_blocks += 1
                    block.pieces = []
                    block.name = name
                    ident = ident or "toolu_" + self._new_id()
                    start: JSONObject = {"type": "tool_use", "id": ident, "name": name, "input": {}}
                    if self._repeats.suspect(name):
                        block.call = start  # held: the text block stays open meanwhile
                    else:
                        self._open_wire(start)
                case CallArgs(text=text):
                    block.pieces.append(text)
                    if block.call is None:
                        self._emit_input(text)
                case CallClose(error=error):
                    if error is not None:
                        self._note(Repair.MARKUP_BROKEN)
                    arguments = "".join(block.pieces)
                    if not input_parses(arguments):
                        self._bad_input = True
                    held, block.call = block.call, None
                    if not self._repeated(block.name, arguments) or held is None:
                        if held is not None:
                            self._open_wire(held)
                            if arguments:
                                self._emit_input(arguments)
                        self._stop_wire()

"""The client's side of a native Messages stream: what goes out, and how it is numbered.

Client block indexes are dense from 0 in the order blocks go out (``_next`` is the next one);
at most one block is open on the client (``_wire``, its type). The tool blocks the client was
shown are counted (for the stop reason), with whether one's input did not parse; a call that
repeats the one before it is counted, and under ``dedupe_calls`` is no tool block. An event
that needs nothing goes out as the bytes that came; a changed or inserted one as compact JSON.
"""

from __future__ import annotations

from collections import Counter

import orjson

from proxy.core.protocols.chat.chunks import JSONObject
from proxy.core.protocols.messages.native_block import Block
from proxy.core.protocols.messages.wire import encode
from proxy.core.protocols.native_repeats import CallRepeats
from proxy.core.repairs import Repair
from proxy.core.sse import Event, encode_event


class ClientSide:
    def __init__(self, *, dedupe: bool) -> None:
        self.repairs: Counter[str] = Counter()
        self._out: list[bytes] = []
        self._wire: str | None = None  # the type of the block open on the client
        self._next = 0  # the next client block index
        self._tool_blocks = 0
        self._bad_input = False
        self._repeats = CallRepeats(dedupe=dedupe)

    # -- blocks

    def _start_wire(self, block: Block, event: Event, payload: JSONObject, changed: bool) -> None:
        if block.held is None:
            self._wire = block.type
            self._next += 1
        self._write_block_event(block, event, payload, changed)

    def _stop_wire(self) -> None:
        if self._wire is not None:
            self._wire = None
            self._emit({"type": "content_block_stop", "index": self._next - 1})

    def _open_wire(self, block: JSONObject) -> None:
        self._stop_wire()
        self._wire = str(block["type"])
        self._emit({"type": "content_block_start", "index": self._next, "content_block": block})
        self._next += 1

    def _write_block_event(
        self, block: Block, event: Event, payload: JSONObject, changed: bool
    ) -> None:
        if block.holds(event, payload, changed):
            return
        if payload.get("index") != block.index:
            payload["index"] = block.index
            changed = True
        self._write(event, payload, changed)

    def _emit_input(self, text: str) -> None:
        delta = {"type": "input_json_delta", "partial_json": text}
        self._emit({"type": "content_block_delta", "index": self._next - 1, "delta": delta})

    # -- calls

    def _repeated(self, name: object, arguments: str) -> bool:
        """Whether a call whose arguments just ended repeats the call before it (counted)."""
        if not self._repeats.ended(name, arguments):
            return False
        self._note(Repair.CALL_DUPLICATED)
        if self._repeats.dedupe:  # dropped: no tool block
            self._tool_blocks -= 1
        return True

    # -- output

    def _write(self, event: Event, payload: JSONObject, changed: bool) -> None:
        if event.event is None:
            self._note(Repair.EVENT_LINE_MISSING)
        elif not changed:
            self._out.append(event.raw)
            return
        name = event.event or str(payload.get("type"))
        self._out.append(encode_event(orjson.dumps(payload), event=name))

    def _emit(self, payload: JSONObject) -> None:
        self._out.append(encode(payload))

    def _note(self, repair: Repair) -> None:
        self.repairs[repair] += 1

    def _note_all(self, repairs: list[Repair]) -> bool:
        for repair in repairs:
            self.repairs[repair] += 1
        return bool(repairs)

    def _take(self) -> list[bytes]:
        out, self._out = self._out, []
        return out

"""The client's side of a native Messages stream: what goes out, and how it is numbered.

Client block indexes are dense from 0 in the order blocks go out, from one counter: the
calls' ``next_index`` (proxy/core/calls/driver.py ``Calls``, of the ``ToolCalls`` held as
``calls``), which gives
a call its index as its opening is built, and which a text or thinking block takes its index
from here. At most one block is open on the client (``wire``, its type; ``_wire_index``, its
index). The tool blocks the client was shown are the calls' ``sent`` (for the stop reason); whether
one's input did not parse is kept here. An event that needs nothing goes out as the bytes
that came; a changed or inserted one as compact JSON.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import orjson

from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.messages.native.calls import ToolCalls
from proxy.core.protocols.messages.native.model import UpstreamBlock
from proxy.core.protocols.messages.wire import encode
from proxy.core.repairs import Repair
from proxy.core.sse import Event, encode_event


class ClientSide:
    def __init__(self, new_id: Callable[[], str], *, dedupe: bool) -> None:
        self.repairs: Counter[str] = Counter()
        # the calls through the table (calls.py), which write through this object
        self.calls = ToolCalls(self, new_id, self.repairs, dedupe=dedupe)
        self.out: list[bytes] = []
        self.wire: str | None = None  # the type of the block open on the client
        self._wire_index = 0  # ... and its index
        self.bad_input = False
        self.current = -1  # the place of the upstream event being read among the upstream's
        #: the upstream's bytes held back, as they came: events waiting behind a growing tool
        #: block (stream.py), a held call's start and fragments (calls.py)
        self.held_bytes = 0

    def start_tool(self, index: int) -> None:
        """A tool block goes out (its call's opening): the next client block, ``index``."""
        self.stop_wire()
        self.wire, self._wire_index = "tool_use", index

    # -- blocks

    def start_wire(
        self, block: UpstreamBlock, event: Event, payload: JSONObject, changed: bool
    ) -> None:
        """An upstream text or thinking block starts: the next client block."""
        calls = self.calls.calls
        self.wire, self._wire_index = block.type, calls.next_index
        block.index = calls.next_index
        calls.next_index += 1
        self.write_block_event(block, event, payload, changed)

    def stop_wire(self) -> None:
        if self.wire is not None:
            self.wire = None
            self.emit({"type": "content_block_stop", "index": self._wire_index})

    def open_wire(self, block: JSONObject) -> int:
        """A block the upstream did not start as such (text after markup): its index."""
        self.stop_wire()
        index = self.calls.calls.next_index
        self.calls.calls.next_index += 1
        self.wire, self._wire_index = str(block["type"]), index
        self.emit({"type": "content_block_start", "index": index, "content_block": block})
        return index

    def write_block_event(
        self, block: UpstreamBlock, event: Event, payload: JSONObject, changed: bool
    ) -> None:
        self.write_at(block.index, event, payload, changed)

    def write_at(self, index: int, event: Event, payload: JSONObject, changed: bool) -> None:
        """An upstream block event, renumbered to the client block it belongs to."""
        if payload.get("index") != index:
            payload["index"] = index
            changed = True
        self.write(event, payload, changed)

    # -- output

    def write(self, event: Event, payload: JSONObject, changed: bool) -> None:
        if event.event is None:
            self.note(Repair.EVENT_LINE_MISSING)
        elif not changed:
            self.out.append(event.raw)
            return
        name = event.event or str(payload.get("type"))
        self.out.append(encode_event(orjson.dumps(payload), event=name))

    def emit(self, payload: JSONObject) -> None:
        self.out.append(encode(payload))

    def note(self, repair: Repair) -> None:
        self.repairs[repair] += 1

    def note_all(self, repairs: list[Repair]) -> bool:
        for repair in repairs:
            self.repairs[repair] += 1
        return bool(repairs)

    def take(self) -> list[bytes]:
        out, self.out = self.out, []
        return out

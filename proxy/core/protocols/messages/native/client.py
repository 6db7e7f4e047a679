"""The client's side of a native Messages stream: what goes out, and how it is numbered.

Client block indexes are dense from 0 in the order blocks go out, from one counter: the
calls' ``next_index`` (proxy/core/calls/driver.py ``Calls``, held as ``_calls``), which gives
a call its index as its opening is built, and which a text or thinking block takes its index
from here. At most one block is open on the client (``_wire``, its type; ``_wire_index``, its
index). The tool blocks the client was shown are the calls' ``sent`` (for the stop reason); whether
one's input did not parse is kept here. An event that needs nothing goes out as the bytes
that came; a changed or inserted one as compact JSON.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import orjson

from proxy.core.calls.driver import Calls, CallWriter
from proxy.core.ids import IdPool
from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.messages.native.model import Block, Item, Tally, ToolCall
from proxy.core.protocols.messages.wire import encode
from proxy.core.protocols.native_repeats import PreviousCall
from proxy.core.repairs import Repair
from proxy.core.sse import Event, encode_event


class ClientSide:
    def __init__(
        self,
        new_id: Callable[[], str],
        *,
        dedupe: bool,
        writer: CallWriter[ToolCall, None, Item],
    ) -> None:
        self.repairs: Counter[str] = Counter()
        ids = IdPool(lambda: "toolu_" + new_id())
        self._tally = Tally(ids, self.repairs)
        # the calls through the table; what they send is built by ``writer`` (the stream,
        # by the methods of native_calls.py)
        self._calls: Calls[ToolCall, None, Item] = Calls(
            self._tally,
            writer,
            coalesce=False,
            dedupe=dedupe,
            repeats=PreviousCall(dedupe=dedupe),  # the repeat rule (native_calls.py)
        )
        self._keep = self._calls.keep  # bound once: asked on every fragment
        self._input = self._calls.input
        self._out: list[bytes] = []
        self._wire: str | None = None  # the type of the block open on the client
        self._wire_index = 0  # ... and its index
        self._bad_input = False
        self._current = -1  # the place of the upstream event being read among the upstream's
        #: the upstream's bytes held back, as they came: events waiting behind a growing tool
        #: block (native.py), a held call's start and fragments (native_calls.py)
        self.held_bytes = 0

    # -- blocks

    def _start_wire(self, block: Block, event: Event, payload: JSONObject, changed: bool) -> None:
        """An upstream text or thinking block starts: the next client block."""
        calls = self._calls
        self._wire, self._wire_index = block.type, calls.next_index
        block.index = calls.next_index
        calls.next_index += 1
        self._write_block_event(block, event, payload, changed)

    def _stop_wire(self) -> None:
        if self._wire is not None:
            self._wire = None
            self._emit({"type": "content_block_stop", "index": self._wire_index})

    def _open_wire(self, block: JSONObject) -> int:
        """A block the upstream did not start as such (text after markup): its index."""
        self._stop_wire()
        index = self._calls.next_index
        self._calls.next_index += 1
        self._wire, self._wire_index = str(block["type"]), index
        self._emit({"type": "content_block_start", "index": index, "content_block": block})
        return index

    def _write_block_event(
        self, block: Block, event: Event, payload: JSONObject, changed: bool
    ) -> None:
        self._write_at(block.index, event, payload, changed)

    def _write_at(self, index: int, event: Event, payload: JSONObject, changed: bool) -> None:
        """An upstream block event, renumbered to the client block it belongs to."""
        if payload.get("index") != index:
            payload["index"] = index
            changed = True
        self._write(event, payload, changed)

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

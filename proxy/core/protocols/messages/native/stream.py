"""A server's own ``/v1/messages`` stream, repaired in place (native mode).

Events that need nothing go out as the very bytes that came (a canonical stream comes out
byte-identical); a repaired or inserted event is written as compact JSON, the original keys in
their places and restored ones after them. What is repaired (each a kind of
proxy/core/repairs.py; docs/quirks.md M1-M4 and "llama.cpp's own endpoints"):

* empty fields a server or gateway dropped: ``input: {}`` of a tool_use start (llama.cpp),
  ``text``/``partial_json``/``signature``, usage counts; ``stop_reason: ""``;
* overlapping blocks (llama.cpp stops every block at the end): a text or thinking block, or a
  tool block whose input is a complete JSON object, is stopped when the next block starts, and
  its own late stop is dropped; a tool block whose input is still growing holds the later
  events, in order, until it stops or its input completes;
* a block never stopped, a missing ``message_delta``/``message_stop`` (at a clean end only);
* ``stop_reason`` ``""``/``end_turn`` after tool_use blocks -> ``tool_use``; a finished turn
  whose tool input does not parse -> ``max_tokens``;
* a second ``message_start`` (duplicated, or a second generation spliced in): dropped, the
  open block stopped, and the new generation's blocks numbered after the first's;
* tool-call markup in a ``text_delta`` (every configured dialect): the text block is cut there
  and the call goes out as a ``tool_use`` block;
* the same call twice in a row (same name, JSON-equal input): counted; under ``dedupe_calls``
  the second is held until its input ends and then dropped (proxy/core/protocols/native_calls.py);
* a tool_use block without an id: ``toolu_`` and a fresh one.

Failing open, as chat does: a stream that would hold more than ``max_held_bytes`` (events
waiting behind a growing tool block, a held call's events and input, text a dialect holds),
keep more than ``max_response_body_bytes`` of tool input for its checks, or that brings an
event over ``max_event_bytes`` or ends inside one, gives up rewriting there: what it held goes
out as the upstream sent it, in the order it came, then every later byte as it comes, and the
proxy adds nothing more, not even an end (``cap-reached``, but for the cut tail).

This module follows the upstream's message and blocks; every tool call (a tool_use block, or
a call from markup) goes through the shared call state table (proxy/core/calls/state.py) as
calls.py (``ToolCalls``, held as ``calls``) classifies its events, and goes out as the table
says; client.py, the base of this class, is the client's side (dense block indexes from 0 in
the order blocks go out, an event whose block moved re-encoded with its new index, the bytes
out), text.py (``BlockText``, held as ``text``) the markup in text blocks.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from operator import itemgetter

import orjson

from proxy.core.jsonvalues import JSONObject
from proxy.core.markup import build_extractor, check_names
from proxy.core.markup.fail_open import fail_open
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.messages.native import fields as native_fields
from proxy.core.protocols.messages.native.client import ClientSide
from proxy.core.protocols.messages.native.lifecycle import DELTA_SEEN, STARTED, Phase, Step, after
from proxy.core.protocols.messages.native.model import (
    ToolCall,
    UpstreamBlock,
    extracts,
    input_parses,
)
from proxy.core.protocols.messages.native.text import BlockText
from proxy.core.protocols.messages.request import convert_tools
from proxy.core.repairs import Repair
from proxy.core.sse import Event, RawBytes, SSEDecoder

_OVER = Phase.OVER  # asked on every event: a module name, not the enum's class attribute
_Pending = tuple[int, Event, JSONObject]  # an event waiting: its place among the upstream's


class NativeMessages(ClientSide):
    over = False  # the upstream's body is read to its end, whatever it holds

    def new_id(self) -> str:
        return self._new_id()

    def __init__(
        self,
        new_id: Callable[[], str],
        request: object,
        *,
        options: UpstreamOptions,
    ) -> None:
        ClientSide.__init__(self, new_id, dedupe=options.dedupe_calls)
        self._new_id = new_id
        self._options = options
        self._decoder = SSEDecoder(max_event_bytes=options.max_event_bytes)
        self._raw = False  # gave up rewriting: every byte goes out as it came
        self._request = request if isinstance(request, dict) else {}
        self.calls.follow(self._request, options)  # issue 25: the arguments at each call's end
        self.dialects = check_names(options.dialects) if extracts(self._request) else ()
        self._tools = convert_tools(self._request.get("tools")) if self.dialects else []
        self._pending: deque[_Pending] = deque()  # events held behind a growing tool block
        self._blocks: dict[int, UpstreamBlock] = {}  # the current generation's, by upstream index
        self._active: UpstreamBlock | None = None  # the upstream block being streamed
        self.text = BlockText(self)  # markup in text blocks
        self._phase = Phase.NEW  # the message's (lifecycle.py)

    # -- the verbs the pump drives

    def feed(self, chunk: bytes) -> list[bytes]:
        for item in self._decoder.feed(chunk):
            self._item(item)
        return self.take()

    def close(self, *, complete: bool) -> list[bytes]:
        for item in self._decoder.close():
            self._item(item)
        if self._raw:
            return self.take()
        while self._pending:  # a tool block that never stopped still holds events
            self._finish_active(Repair.BLOCK_STOP_MISSING)
            self._drain()
        active = self._active
        if active is not None and active.call is not None:  # a suspect's input ends here
            self.calls.end_input(active.call, cut=not complete)
        if complete and self._phase in STARTED:
            self._finish_active(Repair.BLOCK_STOP_MISSING)
            if self._phase not in DELTA_SEEN:
                self.note(Repair.MESSAGE_DELTA_MISSING)
                self.emit(self._message_delta())
                self._phase = after(self._phase, Step.DELTA)
            self.note(Repair.MESSAGE_STOP_MISSING)
            self.emit({"type": "message_stop"})
            self._phase = after(self._phase, Step.STOP)
        return self.take()

    # -- dispatch

    def _item(self, item: Event | RawBytes) -> None:
        if self._raw:
            self.out.append(item.raw)
            return
        if isinstance(item, RawBytes):  # an event over the limit, or the stream cut inside one
            self._give_up(counted=item.reason == "oversize")
            self.out.append(item.raw)
            return
        if item.data is None or self._phase is _OVER:
            self.out.append(item.raw)
            return
        try:
            payload = orjson.loads(item.data)
        except orjson.JSONDecodeError:
            payload = None
        if not isinstance(payload, dict):
            self.out.append(item.raw)
            return
        self.current += 1
        if self._pending and not self._for_active(payload):
            self._wait(item, payload)
        elif not self._dispatch(item, payload):
            self.note(Repair.BLOCKS_OVERLAP)
            self._wait(item, payload)
        elif self._pending:
            self._drain()
        if self._over_limits():
            self._give_up(counted=True)

    def _wait(self, event: Event, payload: JSONObject) -> None:
        self._pending.append((self.current, event, payload))
        self.held_bytes += len(event.raw)

    def _drain(self) -> None:
        """The events that waited, in order, as far as they may go now (the first that must
        still wait is not counted again)."""
        while self._pending:
            waiting = self._pending[0]
            if not self._dispatch(waiting[1], waiting[2]):
                return
            self._pending.popleft()
            self.held_bytes -= len(waiting[1].raw)

    def _over_limits(self) -> bool:
        """What the stream holds, or keeps for its checks, outgrew its limit."""
        tally, options = self.calls.tally, self._options
        held = self.held_bytes + tally.held
        active = self._active
        if active is not None and active.markup is not None:
            held += active.markup.extractor.held
        return held > options.max_held_bytes or tally.kept > options.max_response_body_bytes

    def _give_up(self, *, counted: bool) -> None:
        """Rewriting stops (the module's docstring): text a dialect holds goes out as text,
        the events held as they came, in order; from here on every byte as it comes."""
        if counted:
            self.note(Repair.CAP_REACHED)
        active = self._active
        if active is not None:
            self.text.close_markup(active)
        held = [(at, event.raw) for at, event, _ in self._pending]
        self._pending.clear()
        call = active.call if active is not None else None
        if call is not None:
            held += self.calls.let_go(call)
        held.sort(key=itemgetter(0))
        self.out += [raw for _, raw in held]
        self.held_bytes = 0
        self._raw = True

    def _for_active(self, payload: JSONObject) -> bool:
        return (
            self._active is not None
            and payload.get("type") in ("content_block_delta", "content_block_stop")
            and payload.get("index") == self._active.upstream
        )

    def _dispatch(self, event: Event, payload: JSONObject) -> bool:
        """Handle one event; False when it must wait behind the open tool block."""
        kind = payload.get("type")
        if kind == "message_start":
            self._message_start(event, payload)
        elif kind == "content_block_start":
            return self._block_start(event, payload)
        elif kind == "content_block_delta":
            self._block_delta(event, payload)
        elif kind == "content_block_stop":
            self._block_stop(event, payload)
        elif kind == "message_delta":
            self._finish_active(Repair.BLOCK_STOP_MISSING)
            self._phase = after(self._phase, Step.DELTA)
            self.write(event, payload, self._fix_delta(payload))
        elif kind == "message_stop":
            self._finish_active(Repair.BLOCK_STOP_MISSING)
            if self._phase not in DELTA_SEEN:
                self.note(Repair.MESSAGE_DELTA_MISSING)
                self.emit(self._message_delta())
            self._phase = after(self._phase, Step.STOP)
            self.write(event, payload, False)
        else:  # ping, error, and what this proxy does not know: as they came
            if kind == "error":
                self._phase = after(self._phase, Step.ERROR)
            self.write(event, payload, False)
        return True

    # -- the message

    def _message_start(self, event: Event, payload: JSONObject) -> None:
        if self._phase in STARTED:
            self.note(Repair.MESSAGE_START_REPEATED)
            self._finish_active(None)
            self._blocks = {}  # the next generation numbers its blocks from 0 again
            return
        self._phase = after(self._phase, Step.START)
        self.write(event, payload, self.note_all(native_fields.message_start(payload)))

    def _ensure_started(self) -> None:
        if self._phase not in STARTED:
            self._phase = after(self._phase, Step.START)
            self.note(Repair.MESSAGE_START_MISSING)
            message: JSONObject = {
                "id": "msg_" + self._new_id(),
                "type": "message",
                "role": "assistant",
                "model": str(self._request.get("model", "")),
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
            self.emit({"type": "message_start", "message": message})

    def _fix_delta(self, payload: JSONObject) -> bool:
        repairs = native_fields.message_delta(
            payload, tool_blocks=self.calls.calls.sent, bad_input=self.bad_input
        )
        return self.note_all(repairs)

    def _message_delta(self) -> JSONObject:
        payload: JSONObject = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}}
        native_fields.message_delta(
            payload, tool_blocks=self.calls.calls.sent, bad_input=self.bad_input
        )
        if payload["delta"]["stop_reason"] == "end_turn" and self.calls.calls.sent:
            payload["delta"]["stop_reason"] = "tool_use"
        payload["delta"]["stop_sequence"] = None
        return payload

    # -- blocks

    def _block_start(self, event: Event, payload: JSONObject) -> bool:
        block = payload.get("content_block")
        upstream = payload.get("index")
        if not isinstance(block, dict) or not isinstance(upstream, int):
            self.write(event, payload, False)
            return True
        active = self._active
        if active is not None:
            if active.type == "tool_use" and not active.end.complete:
                return False
            self._finish_active(Repair.BLOCKS_OVERLAP)
        self._ensure_started()
        changed = self.note_all(native_fields.block_start(block))
        kind = str(block.get("type"))
        current = UpstreamBlock(upstream, self.calls.calls.next_index, kind)
        self._blocks[upstream] = current
        self._active = current
        if kind == "tool_use":  # a call: the driver opens it, or holds it (calls.py)
            ident, name = block.get("id"), block.get("name")
            current.call = ToolCall(
                upstream,
                ident if isinstance(ident, str) and ident else None,  # else id-missing
                name=name if isinstance(name, str) else None,
                opening=(event, payload, changed),
                opening_at=self.current,
            )
            self.calls.name_call(current.call)
            return True
        if kind == "text" and self.dialects:
            current.markup = fail_open(build_extractor(self.dialects, self._tools))
        self.start_wire(current, event, payload, changed)
        return True

    def _block_delta(self, event: Event, payload: JSONObject) -> None:
        block = self._block_of(payload)
        if block is None or block is not self._active:
            self.note(Repair.DELTA_AFTER_STOP)
            return
        changed = self.note_all(native_fields.delta(payload))
        delta = payload["delta"] if isinstance(payload.get("delta"), dict) else {}
        if block.call is not None:
            ended = self.calls.call_delta(block, block.call, event, payload, changed, delta)
            if ended and self._pending:
                self._finish_active(None)  # the later block it held back may start now
        elif delta.get("type") == "text_delta" and block.markup is not None:
            self.text.markup_delta(block, event, payload, delta["text"])
        else:
            self.write_block_event(block, event, payload, changed)

    def _block_stop(self, event: Event, payload: JSONObject) -> None:
        block = self._block_of(payload)
        if block is None or block is not self._active:
            if block is None:
                self.note(Repair.DELTA_AFTER_STOP)
            return  # stopped already, when the next block started
        self.text.close_markup(block)
        self._active = None
        if block.call is not None:
            self.calls.end_input(block.call)
        self._check_input(block)  # after the input's end: what heal_arguments made of it
        if self.wire is None:  # stopped with a markup call, or a dropped repeat's
            return
        self.wire = None
        self.write_at(self._wire_index, event, payload, False)

    def _block_of(self, payload: JSONObject) -> UpstreamBlock | None:
        index = payload.get("index")
        return self._blocks.get(index) if isinstance(index, int) else None

    def _finish_active(self, repair: Repair | None) -> None:
        """Stop the upstream block being streamed (the server did not, or not yet)."""
        block = self._active
        if block is None:
            return
        if repair is not None:
            self.note(repair)
        self.text.close_markup(block)
        self._active = None
        if block.call is not None:
            self.calls.end_input(block.call)
        self._check_input(block)  # after the input's end: what heal_arguments made of it
        self.stop_wire()

    def _check_input(self, block: UpstreamBlock) -> None:
        if block.call is not None and not input_parses(block.call.text()):
            self.bad_input = True

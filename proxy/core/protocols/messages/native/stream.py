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
* a block never stopped, a missing ``message_delta``/``message_stop`` (at a clean end only,
  never after an error);
* an error in another server's shape (llama-server b11434's ``event: error`` over
  ``{"code": 500, "message": ..., "type": "server_error"}``, a bare ``{"error": {...}}``):
  Anthropic's ``{"type": "error", "error": {"type": "api_error", "message": ...}}``, and
  the proxy adds nothing after it;
* a ``message_delta`` that blocks follow (Kimi K2 and GLM send one after every tool_use
  block): every ``message_delta`` waits for the message's end (``message_stop``, an error or
  the stream's end) and a later one takes its place, so the client gets one, after every
  block, with the last stop reason and usage;
* ``stop_reason`` ``""``/``end_turn`` after tool_use blocks -> ``tool_use``; a finished turn
  whose tool input does not parse -> ``max_tokens``;
* a second ``message_start`` (duplicated, or a second generation spliced in, vercel/ai#18402):
  dropped; after blocks of the first, the open block stopped, the new generation's blocks
  numbered after the first's, and the message ends as the later generation says (its stop
  reason; an input the earlier one left cut does not make it ``max_tokens``);
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

This module routes each event and follows the upstream's message (its phases are
lifecycle.py's ``MESSAGE``); structure.py, the base of this class, follows its blocks and is
the client's side (dense block indexes from 0 in the order blocks go out, an event whose block
moved re-encoded with its new index, the bytes out; a block's phases are lifecycle.py's
``BLOCK``). Every tool call (a tool_use block, or a call from markup) goes through the shared
call state table (proxy/core/calls/state.py) as calls.py (``ToolCalls``, held as ``calls``)
classifies its events, and goes out as the table says; text.py (``BlockText``, held as
``text``) is the markup in text blocks.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson

from proxy.core.jsonvalues import JSONObject
from proxy.core.markup import check_names
from proxy.core.options import UpstreamOptions
from proxy.core.parse_failure import Recovered, error_message, recover
from proxy.core.protocols.messages.native import fields as native_fields
from proxy.core.protocols.messages.native.lifecycle import DELTA_SEEN, STARTED, Phase, Step, after
from proxy.core.protocols.messages.native.model import extracts
from proxy.core.protocols.messages.native.structure import BlockFlow
from proxy.core.protocols.messages.request import convert_tools
from proxy.core.repairs import Repair
from proxy.core.sse import Event, RawBytes, SSEDecoder
from proxy.core.usage import UsageSeen, messages_tokens

_OVER = Phase.OVER  # asked on every event: a module name, not the enum's class attribute


class NativeMessages(BlockFlow):
    over = False  # the upstream's body is read to its end, whatever it holds

    def __init__(
        self,
        new_id: Callable[[], str],
        request: object,
        *,
        options: UpstreamOptions,
    ) -> None:
        self._options = options
        self._decoder = SSEDecoder(max_event_bytes=options.max_event_bytes)
        self._raw = False  # gave up rewriting: every byte goes out as it came
        self.usage = UsageSeen(messages_tokens, merge=True)  # the upstream's (issue 28 item 4)
        self._request = request if isinstance(request, dict) else {}
        dialects = check_names(options.dialects) if extracts(self._request) else ()
        BlockFlow.__init__(
            self,
            new_id,
            dialects,
            convert_tools(self._request.get("tools")) if dialects else [],
            dedupe=options.dedupe_calls,
            starting=self._ensure_started,
            think=options.think_in_content,
        )
        self.calls.follow(self._request, options)  # issue 25: the arguments at each call's end
        self._phase = Phase.NEW  # the message's (lifecycle.py)
        #: the upstream's message_delta, held until the message ends (a block after it makes
        #: it early), with its place among the upstream's events and whether it was counted
        self._delta: tuple[int, Event, JSONObject] | None = None
        self._delta_early = False

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
        while self.pending:  # a tool block that never stopped still holds events
            self.finish_active(Repair.BLOCK_STOP_MISSING)
            self.drain(self._dispatch)
        if self.active is not None:  # a <think> split's held text goes out, even on a cut
            self.close_think(self.active)
        self.end_active_input(cut=not complete)
        if complete and self._phase in STARTED:
            self._end_message()
            self.note(Repair.MESSAGE_STOP_MISSING)
            self.emit({"type": "message_stop"})
            self._phase = after(self._phase, Step.STOP)
        elif self._delta is not None:  # cut after it: it goes out, and nothing more is added
            self._release_delta()
        return self.take()

    # -- dispatch

    def _item(self, item: Event | RawBytes) -> None:
        if self._raw:
            if isinstance(item, Event) and item.data is not None:
                self.usage.passed(item.data)
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
        if self.pending and not self.for_active(payload):
            self.wait(item, payload)
        elif not self._dispatch(item, payload):
            self.note(Repair.BLOCKS_OVERLAP)
            self.wait(item, payload)
        elif self.pending:
            self.drain(self._dispatch)
        if self._over_limits():
            self._give_up(counted=True)

    def _over_limits(self) -> bool:
        """What the stream holds, or keeps for its checks, outgrew its limit."""
        tally, options = self.calls.tally, self._options
        held = self.held_bytes + tally.held
        active = self.active
        if active is not None and active.markup is not None:
            held += active.markup.extractor.held
        if active is not None and active.think is not None:
            held += active.think.held
        return held > options.max_held_bytes or tally.kept > options.max_response_body_bytes

    def _give_up(self, *, counted: bool) -> None:
        """Rewriting stops (the module's docstring): text a dialect holds goes out as text,
        the events held as they came, in order; from here on every byte as it comes."""
        if counted:
            self.note(Repair.CAP_REACHED)
        delta, self._delta = self._delta, None
        self.out += self.held_in_order([] if delta is None else [(delta[0], delta[1].raw)])
        self._raw = True

    def _dispatch(self, event: Event, payload: JSONObject) -> bool:
        """Handle one event; False when it must wait behind the open tool block."""
        kind = payload.get("type")
        if kind == "message_start":
            self._message_start(event, payload)
        elif kind == "content_block_start":
            return self.block_start(event, payload)
        elif kind == "content_block_delta":
            self.block_delta(event, payload)
        elif kind == "content_block_stop":
            self.block_stop(event, payload)
        elif kind == "message_delta":
            self.usage.saw(payload.get("usage"))  # before its fields are repaired
            self._phase = after(self._phase, Step.DELTA)
            self._hold_delta(event, payload)
        elif kind == "message_stop":
            self._end_message()
            self._phase = after(self._phase, Step.STOP)
            self.write(event, payload, False)
        elif native_fields.is_error(payload, event.event):
            self._error(event, payload)
        elif not self.beside_held_call(event, payload):
            # ping, and what this proxy does not know: as they came
            self.write(event, payload, False)
        return True

    def _error(self, event: Event, payload: JSONObject) -> None:
        """The upstream failed: its error, in Anthropic's shape, is the stream's last word
        (nothing made up after it, no end of a block or of the message)."""
        recovered = self._recovered(payload)
        if recovered is not None:
            self._answer(recovered)
            return
        # the input of a tool block streamed is cut here: a call held with it (heal_arguments,
        # dedupe_calls) goes out as it came, ahead of the error, as it would have streamed
        self.end_active_input(cut=True)
        if self._delta is not None:
            self._release_delta()
        self._phase = after(self._phase, Step.ERROR)
        reshaped = native_fields.error(payload)
        if reshaped is None:
            self.write(event, payload, False)
        else:
            self.note(Repair.ERROR_RESHAPED)
            self.emit(reshaped)

    # -- the message

    def _message_start(self, event: Event, payload: JSONObject) -> None:
        if self._phase in STARTED:
            self.note(Repair.MESSAGE_START_REPEATED)
            if self.calls.calls.next_index:  # blocks went out: a generation spliced in
                self.note(Repair.GENERATION_SPLICED)
                self.finish_active(None)
                # the earlier generation's blocks went out as they were, and cannot be taken
                # back; how the message ends is the later one's (its stop reason, its inputs)
                self.bad_input = False
            self.forget_blocks()  # the next generation numbers its blocks from 0 again
            return
        message = payload.get("message")
        if isinstance(message, dict):  # before its fields are repaired
            self.usage.saw(message.get("usage"))
        self._phase = after(self._phase, Step.START)
        self.write(event, payload, self.note_all(native_fields.message_start(payload)))

    def _recovered(self, payload: JSONObject) -> Recovered | None:
        """llama-server's parser failure that holds the model's whole calls
        (proxy/core/parse_failure.py); None: the error goes on."""
        if not self._options.recover_parse_failures:
            return None
        return recover(error_message(payload), convert_tools(self._request.get("tools")))

    def _answer(self, recovered: Recovered) -> None:
        """The calls of a parser failure instead of the error: the block left open stopped,
        the model's text and each call as blocks of their own, then the message's end."""
        self.note(Repair.PARSE_FAILURE_RECOVERED)
        self._ensure_started()
        self.finish_active(None)
        if recovered.text:
            index = self.open_wire({"type": "text", "text": ""})
            delta = {"type": "text_delta", "text": recovered.text}
            self.emit({"type": "content_block_delta", "index": index, "delta": delta})
        for call in recovered.calls:
            ident = call.id or "toolu_" + self._new_id()
            block = {"type": "tool_use", "id": ident, "name": call.name, "input": {}}
            index = self.open_wire(block)
            delta = {"type": "input_json_delta", "partial_json": call.arguments}
            self.emit({"type": "content_block_delta", "index": index, "delta": delta})
        self.stop_wire()
        if self._delta is not None:  # the upstream's, before its failure: the calls' ends it
            self.held_bytes -= len(self._delta[1].raw)
            self._delta = None
        if self._phase not in DELTA_SEEN:
            self._phase = after(self._phase, Step.DELTA)
        reason = {"stop_reason": "tool_use", "stop_sequence": None}
        self.emit({"type": "message_delta", "delta": reason, "usage": {"output_tokens": 0}})
        self.emit({"type": "message_stop"})
        self._phase = after(self._phase, Step.STOP)

    def _hold_delta(self, event: Event, payload: JSONObject) -> None:
        """A message_delta waits for the message's end: blocks may still follow it (Kimi K2
        and GLM behind Anthropic-compatible endpoints send one after every tool_use block).
        A later one takes its place: the message's stop reason and usage are the last."""
        if self._delta is not None:
            self.held_bytes -= len(self._delta[1].raw)
            if not self._delta_early:
                self.note(Repair.MESSAGE_DELTA_EARLY)
        self._delta, self._delta_early = (self.current, event, payload), False
        self.held_bytes += len(event.raw)

    def _release_delta(self) -> None:
        assert self._delta is not None
        _, event, payload = self._delta
        self._delta = None
        self.held_bytes -= len(event.raw)
        self.write(event, payload, self._fix_delta(payload))

    def _end_message(self) -> None:
        """The message ends (its message_stop, or a clean end): the block still streamed is
        stopped, then its one message_delta goes out, the upstream's or one made up."""
        self.finish_active(Repair.BLOCK_STOP_MISSING)
        if self._delta is not None:
            self._release_delta()
        elif self._phase not in DELTA_SEEN:
            self.note(Repair.MESSAGE_DELTA_MISSING)
            self.emit(self._message_delta())
            self._phase = after(self._phase, Step.DELTA)

    def _ensure_started(self) -> None:
        """A block starts: the message must have begun, and a message_delta held was early."""
        if self._delta is not None and not self._delta_early:
            self._delta_early = True
            self.note(Repair.MESSAGE_DELTA_EARLY)
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

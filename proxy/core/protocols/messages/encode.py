"""Neutral events -> the canonical Messages stream (docs/quirks.md, "Messages streams").

* ``message_start`` first (id ``msg_`` + the factory's id, ``model`` the client's model name,
  usage with the input tokens when known, else 0), then the blocks, dense from index 0, each
  started, streamed and stopped before the next one starts: reasoning as ``thinking`` blocks,
  text as ``text`` blocks, each call as a ``tool_use`` block (``input: {}`` at the start, the
  arguments as ``input_json_delta`` fragments), then ``message_delta`` (``stop_reason`` and
  the cumulative usage) and ``message_stop``.
* Chat lets the arguments of two calls, or text and a call, interleave; Messages blocks are
  sequential. What arrives for a later block while a call's block is open waits in order in
  ``_queue`` and goes out when the open call closes, or when the next call opens and the open
  call's arguments are already a whole JSON object. Only a call holds others back: a text or
  thinking block is simply stopped when something else starts.
* ``Failed`` -> ``event: error`` with an Anthropic error object, and nothing after it.
  ``Ended(complete=False)`` -> nothing more: the shell aborts the connection.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from proxy.core.events import (
    ArgumentsDelta,
    CallClosed,
    CallOpened,
    Ended,
    Failed,
    Finished,
    FinishReason,
    ReasoningDelta,
    Started,
    StreamEvent,
    TextDelta,
    Usage,
)
from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.messages.errors import error_object, stream_error_type
from proxy.core.protocols.messages.message import MessageAccumulator
from proxy.core.protocols.messages.native.model import InputEnd
from proxy.core.protocols.messages.request import MessagesContext
from proxy.core.protocols.messages.wire import encode

_TEXT_BLOCK: Final = {"text": ("text", "text_delta"), "thinking": ("thinking", "thinking_delta")}


@dataclass(slots=True)
class _Call:
    index: int
    id: str
    name: str
    pieces: list[str] = field(default_factory=list)
    closed: bool = False
    end: InputEnd = field(default_factory=InputEnd)


@dataclass(slots=True)
class _Loose:
    """Text or reasoning that came while a call's block was open."""

    kind: str  # "text" | "thinking"
    pieces: list[str]


class MessagesEncoder:
    def __init__(
        self, context: MessagesContext, new_id: Callable[[], str], *, stream: bool = True
    ) -> None:
        self._context = context
        self._new_id = new_id
        self._message = MessageAccumulator(whole=not stream)
        self._out: list[bytes] = []
        self._started = False
        self._done = False
        self._next_index = 0
        self._open: str | None = None  # the kind of the block open on the wire
        self._active: _Call | None = None  # the call whose block is open
        self._calls: dict[int, _Call] = {}
        self._queue: deque[_Call | _Loose] = deque()
        self._tool_blocks = 0
        self._finish: Finished | None = None
        self._usage = Usage()

    def feed(self, event: StreamEvent) -> list[bytes]:
        if self._done:
            return []
        match event:
            case TextDelta(text=text):
                self._loose("text", text)
            case ReasoningDelta(text=text):
                self._loose("thinking", text)
            case CallOpened(index=index, id=ident, name=name):
                self._call_opened(_Call(index, ident, name))
            case ArgumentsDelta(index=index, text=text):
                self._arguments(index, text)
            case CallClosed(index=index):
                self._call_closed(index)
            case Usage():
                self._usage = event
            case Finished():
                self._finish = event
            case Started():
                self._start()
            case Failed(message=message, type=kind):
                self._fail(message, kind)
            case Ended(complete=complete):
                self._end(complete)
        out, self._out = self._out, []
        return out

    def response(self) -> JSONObject:
        """The whole Message as accumulated (for ``stream: false``)."""
        return self._message.message

    @property
    def kept(self) -> int:
        """Characters kept: what ``response()`` repeats, for a stream only the tool inputs."""
        return self._message.kept

    # -- blocks

    def _loose(self, kind: str, text: str) -> None:
        if not text:
            return
        if self._active is not None or self._queue:
            last = self._queue[-1] if self._queue else None
            if isinstance(last, _Loose) and last.kind == kind:
                last.pieces.append(text)
            else:
                self._queue.append(_Loose(kind, [text]))
            return
        self._write_loose(kind, text)

    def _write_loose(self, kind: str, text: str) -> None:
        block, delta = _TEXT_BLOCK[kind]
        if self._open != kind:
            self._stop_block()
            content: JSONObject = {"type": block, block: ""}
            if kind == "thinking":
                content["signature"] = ""
            self._start_block(kind, content)
        self._emit(
            {
                "type": "content_block_delta",
                "index": self._next_index - 1,
                "delta": {"type": delta, block: text},
            }
        )

    def _call_opened(self, call: _Call) -> None:
        self._calls[call.index] = call
        active = self._active
        if active is not None and active.end.complete:
            # the chat decoder closes calls at the finish; arguments that are a whole JSON
            # object are done, so the next call need not wait for the end of the stream
            active.closed = True
            self._call_closed(active.index)
        if self._active is not None or self._queue:
            self._queue.append(call)
        else:
            self._write_call(call)

    def _write_call(self, call: _Call) -> None:
        self._stop_block()
        self._tool_blocks += 1
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        self._start_block("tool_use", block)
        if call.pieces:
            self._input_delta("".join(call.pieces))
            call.pieces = []
        if call.closed:
            self._stop_block()
        else:
            self._active = call

    def _arguments(self, index: int, text: str) -> None:
        call = self._calls.get(index)
        if call is None or not text or (call.closed and call is not self._active):
            return
        call.end.feed(text)
        if call is self._active:
            self._input_delta(text)
        else:
            call.pieces.append(text)

    def _call_closed(self, index: int) -> None:
        call = self._calls.get(index)
        if call is None:
            return
        call.closed = True
        if call is self._active:
            self._stop_block()
            self._active = None
            self._drain()

    def _drain(self) -> None:
        while self._queue and self._active is None:
            item = self._queue.popleft()
            if isinstance(item, _Call):
                self._write_call(item)
            else:
                self._write_loose(item.kind, "".join(item.pieces))

    def _input_delta(self, text: str) -> None:
        delta = {"type": "input_json_delta", "partial_json": text}
        self._emit({"type": "content_block_delta", "index": self._next_index - 1, "delta": delta})

    def _start_block(self, kind: str, block: JSONObject) -> None:
        self._start()
        index = self._next_index
        self._next_index += 1
        self._open = kind
        self._emit({"type": "content_block_start", "index": index, "content_block": block})

    def _stop_block(self) -> None:
        if self._open is not None:
            self._open = None
            self._emit({"type": "content_block_stop", "index": self._next_index - 1})

    # -- the message

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        message: JSONObject = {
            "id": "msg_" + self._new_id(),
            "type": "message",
            "role": "assistant",
            "model": self._context.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self._usage.input_tokens, "output_tokens": 0},
        }
        self._emit({"type": "message_start", "message": message})

    def _end(self, complete: bool) -> None:
        self._done = True
        if not complete:
            return
        if self._active is not None:  # the contract says calls close first; be safe anyway
            self._active.closed = True
            self._active = None
        self._stop_block()
        self._drain()
        self._stop_block()
        self._start()
        reason, sequence = self._stop_reason()
        usage = {
            "input_tokens": self._usage.input_tokens,
            "output_tokens": self._usage.output_tokens,
        }
        delta = {"stop_reason": reason, "stop_sequence": sequence}
        self._emit({"type": "message_delta", "delta": delta, "usage": usage})
        self._emit({"type": "message_stop"})

    def _stop_reason(self) -> tuple[str, str | None]:
        reason = self._finish.reason if self._finish is not None else None
        if reason is FinishReason.LENGTH or self._message.unparsed_input:
            return "max_tokens", None
        if reason is FinishReason.CONTENT_FILTER:
            return "refusal", None
        if self._tool_blocks:
            return "tool_use", None
        sequence = self._finish.stop_sequence if self._finish is not None else None
        if sequence is not None and sequence in self._context.stop_sequences:
            return "stop_sequence", sequence
        return "end_turn", None

    def _fail(self, message: str, kind: str | None) -> None:
        self._done = True
        self._emit(error_object(message, stream_error_type(kind)))

    def _emit(self, event: JSONObject) -> None:
        self._message.feed(event)
        self._out.append(encode(event))

"""Neutral stream events (proxy/core/events.py) -> the canonical Responses stream.

Rules this encoder keeps (docs/quirks.md, "Responses streams"; issue 14's "Response mapping"):

* ``response.created`` and ``response.in_progress`` first; ``sequence_number`` from 0, one up
  per event; an ``event:`` line equal to each payload's ``type`` (wire.py).
* Output items in the order their first piece arrived, ``output_index`` dense and equal to the
  item's position. Items never interleave: the first unfinished item streams live, later ones
  are held (a second call whose arguments interleave with the first's; text arriving while a
  call is open) and go out, held part first, as soon as every item before them is done.
* A text or reasoning item ends when a later item begins; a call when its ``CallClosed`` came
  and a later item began, or the finish is known (so a call cut by the token limit is never
  shown as completed: its item ends ``incomplete``).
* The end: chat ``length`` -> ``response.incomplete`` (``max_output_tokens``),
  ``content_filter`` -> ``response.incomplete`` (``content_filter``), otherwise
  ``response.completed``, each with every item in full and the usage (zeros when the upstream
  sent none); ``Failed`` -> ``response.failed``. ``Ended(complete=False)``: nothing more, so the
  client sees the cut and no faked success.
* Ids: ``resp_``/``msg_``/``rs_``/``fc_``/``ctc_`` plus an id from the injected factory;
  ``call_id`` is the upstream's call id. Flattened namespace functions and custom tools get
  the client's names back (context.py).
* What it keeps to repeat (every item's text and arguments, for the ``.done`` events and the
  terminal response) is kept once and counted (``kept``, characters): the bridge fails the
  response past ``limits.max_response_body_bytes``. A long text goes out in the events that
  repeat it as the one JSON encoding of it, between their other bytes (items.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

import orjson

from proxy.core.errors import NormalizerError
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
from proxy.core.protocols.responses.context import ResponsesContext, ToolKind
from proxy.core.protocols.responses.items import (
    CustomToolCallItem,
    FunctionCallItem,
    Item,
    MessageItem,
    Payload,
    ReasoningItem,
)
from proxy.core.protocols.responses.wire import Sequencer
from proxy.core.sse import encode_event

#: finish reasons that end the response as incomplete, with the reason the client is told
_INCOMPLETE: Final = {
    FinishReason.LENGTH: "max_output_tokens",
    FinishReason.CONTENT_FILTER: "content_filter",
}


#: the opening events' stand-in for the request's tools
_NO_TOOLS: Final[JSONObject] = {"tools": []}


class ResponsesEncoder:
    def __init__(
        self, context: ResponsesContext, new_id: Callable[[], str], *, stream: bool = True
    ) -> None:
        self._ctx = context
        self._new_id = new_id
        self._stream = stream
        self._seq = Sequencer()
        self._id = "resp_" + new_id()
        self.kept = 0  #: characters of text and arguments kept to be repeated
        # a long text stands in the events that repeat it as its item's mark: the response's
        # id (the shell draws it at random, so no upstream text equals a mark) and its index
        self._mark = f"\x00{self._id}:"
        self._marked = re.compile(
            rb'"' + re.escape(orjson.dumps(self._mark)[1:-1]) + rb"(\d+)\\u0000\""
        )
        self._model = context.model
        self._created = 0
        self._items: list[Item] = []
        self._calls: dict[int, FunctionCallItem] = {}
        self._live = 0  # the first item whose output_item.done has not gone out
        self._started = False
        self._finish: FinishReason | None = None
        self._finishing = False  # the stream ended: every item may end
        self._failed: Failed | None = None
        self._usage: Usage | None = None
        self._status = "in_progress"
        self._over = False  # the terminal event went out, or the stream broke off

    def feed(self, event: StreamEvent) -> list[bytes]:
        """The SSE events to send for one neutral event."""
        if self._over:
            return []
        hot = self._hot(event) if self._stream else None
        if hot is not None:
            return [hot]
        payloads = self._take(event)
        if not self._stream:
            return []
        return [data for payload in payloads for data in self._write(payload)]

    def _write(self, payload: Payload) -> list[bytes]:
        """One event's bytes: a long text it repeats is its item's one JSON encoding."""
        self._seq.number(payload)
        data = orjson.dumps(payload)
        if b"\\u0000" not in data or (parts := self._marked.split(data))[1:] == []:
            return [encode_event(data, event=str(payload["type"]))]
        out = [b"event: " + str(payload["type"]).encode() + b"\ndata: " + parts[0]]
        for at in range(1, len(parts), 2):
            out += (self._items[int(parts[at])].text_json(), parts[at + 1])
        out[-1] += b"\n\n"
        return out

    def response(self) -> JSONObject:
        """The Response object as accumulated so far (the body for ``stream: false``)."""
        return self._response(self._status, whole=True)

    # -- events ------------------------------------------------------------------------------

    def _hot(self, event: StreamEvent) -> bytes | None:
        """A text or argument delta for the live item, written from its template; None for
        any other event (which ``_take`` handles, with the same result)."""
        if type(event) is ArgumentsDelta:
            item: Item | None = self._calls.get(event.index)
            text = event.text
        elif type(event) is TextDelta and self._items:
            item, text = self._items[-1], event.text
            if type(item) is not MessageItem:
                return None
        else:
            return None
        if not text or item is None or item.output_index != self._live or not item.hot:
            return None
        if item.text_kind and item.output_index != len(self._items) - 1:
            return None
        sequence = self._seq.next
        self._seq.next += 1
        self.kept += len(text)
        return item.stream(text, sequence)

    def _take(self, event: StreamEvent) -> list[Payload]:
        if isinstance(event, Ended) and not event.complete:
            self._over = True
            return []
        out = self._start(event if isinstance(event, Started) else None)
        match event:
            case TextDelta(text=text):
                self._text(MessageItem, "msg_", text)
            case ReasoningDelta(text=text):
                self._text(ReasoningItem, "rs_", text)
            case CallOpened():
                self._open_call(event)
            case ArgumentsDelta(index=index, text=text):
                self._call(index).add(text)
                self.kept += len(text)
            case CallClosed(index=index, complete=complete):
                call = self._call(index)
                call.closed = True
                call.complete = complete
            case Usage():
                self._usage = event
            case Finished(reason=reason):
                # only the end ends the items: more calls may follow a finish (Kimi, GLM:
                # issue 24 item 1), and an item ended here would go out cut
                self._finish = reason
            case Failed():
                self._failed = event
                self._finishing = True
            case Ended():
                self._finishing = True
        out += self._pump()
        if isinstance(event, Failed | Ended):
            out.append(self._end())
        return out

    def _start(self, started: Started | None) -> list[Payload]:
        if self._started:
            return []
        self._started = True
        if started is not None:
            self._model = self._model or started.model
            self._created = started.created or 0
        head = self._response("in_progress", whole=False)
        return [
            {"type": "response.created", "response": head},
            {"type": "response.in_progress", "response": dict(head)},
        ]

    def _text(self, kind: type[MessageItem | ReasoningItem], prefix: str, text: str) -> None:
        if not text:
            return
        tail = self._items[-1] if self._items else None
        if tail is None or type(tail) is not kind or len(self._items) - 1 < self._live:
            index = len(self._items)
            tail = kind(prefix + self._new_id(), index, f"{self._mark}{index}\x00")
            self._items.append(tail)
        tail.add(text)
        self.kept += len(text)

    def _open_call(self, event: CallOpened) -> None:
        ref = self._ctx.tool(event.name)
        cls: type[FunctionCallItem]
        if ref.kind is ToolKind.CUSTOM:
            cls, prefix = CustomToolCallItem, "ctc_"
        else:
            cls, prefix = FunctionCallItem, "fc_"
        index = len(self._items)
        mark = f"{self._mark}{index}\x00"
        item = cls(prefix + self._new_id(), index, event.id, ref.name, ref.namespace, mark)
        self._items.append(item)
        self._calls[event.index] = item

    def _call(self, index: int) -> FunctionCallItem:
        call = self._calls.get(index)
        if call is None:
            raise NormalizerError(f"responses encoder: arguments for call {index}, never opened")
        return call

    # -- items -------------------------------------------------------------------------------

    def _pump(self) -> list[Payload]:
        """Stream the live item, and end it and start the next as far as each may."""
        out: list[Payload] = []
        while self._live < len(self._items):
            item = self._items[self._live]
            out += item.flush()
            last = self._live == len(self._items) - 1
            if not self._finishing and (last or not (item.text_kind or item.closed)):
                break
            out += item.finish(self._item_status(item, last))
            self._live += 1
        return out

    def _item_status(self, item: Item, last: bool) -> str:
        cut = self._failed is not None or self._finish in _INCOMPLETE
        if isinstance(item, FunctionCallItem):
            if not (item.closed and item.complete):
                return "incomplete"
            return "incomplete" if last and cut and not item.whole_json() else "completed"
        return "incomplete" if last and cut else "completed"

    # -- the response ------------------------------------------------------------------------

    def _end(self) -> Payload:
        self._over = True
        if self._failed is not None:
            self._status = "failed"
        else:
            reason = _INCOMPLETE.get(self._finish) if self._finish is not None else None
            self._status = "completed" if reason is None else "incomplete"
        response = self._response(self._status, whole=True, shared=True)
        return {"type": f"response.{self._status}", "response": response}

    def _response(self, status: str, *, whole: bool, shared: bool = False) -> JSONObject:
        """The Response object; only the whole one (the last event's, or the body) echoes the
        request's ``tools``, which may be megabytes: the opening events carry none. ``shared``:
        a long text as its item's mark (``_write``)."""
        reason = _INCOMPLETE.get(self._finish) if self._finish is not None else None
        error = None
        if self._failed is not None:
            error = {"code": self._failed.code or "server_error", "message": self._failed.message}
        return {
            "id": self._id,
            "object": "response",
            "created_at": self._created,
            "status": status,
            "error": error,
            "incomplete_details": {"reason": reason} if status == "incomplete" else None,
            **self._ctx.echo,
            **({} if whole else _NO_TOOLS),
            "model": self._model or "",
            "output": [item.full(shared=shared) for item in self._items] if whole else [],
            "usage": self._usage_object() if whole and self._status != "in_progress" else None,
        }

    def _usage_object(self) -> JSONObject:
        usage = self._usage or Usage()
        raw = usage.raw
        return {
            "input_tokens": usage.input_tokens,
            "input_tokens_details": {
                "cached_tokens": _detail(raw, "prompt_tokens_details", "cached_tokens")
            },
            "output_tokens": usage.output_tokens,
            "output_tokens_details": {
                "reasoning_tokens": _detail(raw, "completion_tokens_details", "reasoning_tokens")
            },
            "total_tokens": usage.input_tokens + usage.output_tokens,
        }


def _detail(raw: dict[str, Any], group: str, key: str) -> int:
    details = raw.get(group)
    value = details.get(key) if isinstance(details, dict) else None
    return value if isinstance(value, int) else 0
